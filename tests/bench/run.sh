#!/usr/bin/env bash
# Benchmark hotpath against its peers on loopback, side by side in one run.
#
# Every server is pinned to SERVER_CPU with taskset and the load generator
# (wrk) to CLIENT_CPU. Each round runs every server in turn (the order
# rotates per round, so drift and thermal effects spread over all of them),
# /json plain and pipelined DEPTH deep, DURATION each, CONNS connections;
# the table shows the median of ROUNDS rounds. Then it counts system calls
# per request (strace -c -f over a fixed number of requests from
# tests/peers/fixedload) and heap allocations per request (the Go benchmark
# of the request path, and the server's own runtime.MemStats over a run).
#
# The floor is cfloor (tests/peers/cfloor/floor.c, built here with gcc): a
# minimal epoll responder in C that only counts requests and sends canned
# responses, i.e. the cost of the system calls and the TCP stack. Every
# server's CPU per request is also reported as a ratio to it.
#
# Targets (reported, never asserted): server CPU per request at most 1.05x
# cfloor plain and 1.25x pipelined (issue 26), >= nginx plain, >= 1.25x
# fasthttp in both columns, 0 allocations and <= 2.1 system calls per
# request. Last, it straces a worker started with -prefer-busy-poll: the
# EPIOCSPARAMS ioctl on its epoll instance (Linux 6.9+; ENOTTY before,
# and the server says it goes on without).
#
# Usage: tests/bench/run.sh      (make bench)
# Env:   ROUNDS=3 DURATION=5s CONNS=256 DEPTH=16 SERVER_CPU=0 CLIENT_CPU=1
#        PEERS="hotpath hotpath6 cfloor fasthttp nethttp nginx epoll"
#        (hotpath6: the same binary on its dual-stack default, wrk to [::1]:
#        the IPv4/IPv6 line under the table)
#        KEEP=1 keeps the work directory (wrk output, strace summaries, logs)
#        BASELINE=<git revision> also builds that revision's hotpath-json and
#        runs it as the peer "baseline": before/after in the same run
#        HOTPATH_ARGS, BASELINE_ARGS: extra flags for hotpath and baseline
#        (BASELINE=HEAD BASELINE_ARGS="-sndbuf -1": the cost of one option)
#        API=0 skips the "api" scenario that follows the /json table
#        (tests/bench/api.sh: the example catalogue API against fasthttp with
#        fasthttp/router and net/http's ServeMux, GET /v1/items/{id} and
#        POST /v1/score; it also runs alone)
set -euo pipefail

ROUNDS=${ROUNDS:-3}
DURATION=${DURATION:-5s}
CONNS=${CONNS:-256}
DEPTH=${DEPTH:-16}
SERVER_CPU=${SERVER_CPU:-0}
CLIENT_CPU=${CLIENT_CPU:-1}
PEERS=${PEERS:-"hotpath hotpath6 cfloor fasthttp nethttp nginx epoll"}
BASE_PORT=${BASE_PORT:-18480}

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BENCH=$ROOT/tests/bench
WORK=$(mktemp -d "${TMPDIR:-/tmp}/hotpath-bench.XXXXXX")
SERVER_PID=

cleanup() {
	stop_server
	if [[ -n ${KEEP:-} ]]; then
		log "kept $WORK"
	else
		rm -rf "$WORK"
	fi
}
trap cleanup EXIT INT TERM

log() { echo "bench: $*" >&2; }

need() {
	command -v "$1" >/dev/null 2>&1 || { log "missing $1 (${2:-apt-get install $1})"; exit 1; }
}
need wrk
need taskset util-linux
need strace
need go golang
need gcc build-essential

if ! command -v nginx >/dev/null 2>&1; then
	log "nginx not installed: skipping it (apt-get install nginx-light)"
	PEERS=${PEERS//nginx/}
fi

log "building into $WORK"
(cd "$ROOT" && go build -o "$WORK/hotpath" ./server/cmd/hotpath-json)
(cd "$ROOT/tests/peers" && go build -o "$WORK/fasthttp" ./fasthttp &&
	go build -o "$WORK/nethttp" ./nethttp &&
	go build -o "$WORK/epoll" ./epoll &&
	go build -o "$WORK/fixedload" ./fixedload)
gcc -O2 -Wall -o "$WORK/cfloor" "$ROOT/tests/peers/cfloor/floor.c"
if [[ -n ${BASELINE:-} ]]; then
	git -C "$ROOT" worktree add -q --detach "$WORK/baseline-src" "$BASELINE"
	(cd "$WORK/baseline-src" && go build -o "$WORK/baseline" ./server/cmd/hotpath-json)
	git -C "$ROOT" worktree remove --force "$WORK/baseline-src"
	[[ " $PEERS " == *" baseline "* ]] || PEERS="$PEERS baseline"
fi

port_of() {
	local i=0 p
	for p in hotpath fasthttp nethttp nginx epoll cfloor baseline hotpath6; do
		[[ $p == "$1" ]] && { echo $((BASE_PORT + i)); return; }
		i=$((i + 1))
	done
}

# host_of NAME: the address wrk connects to: [::1] for hotpath6, the
# IPv6 side of hotpath's dual-stack default.
host_of() {
	if [[ $1 == hotpath6 ]]; then echo "[::1]"; else echo 127.0.0.1; fi
}

# start_server NAME [extra hotpath flags]: starts NAME pinned to SERVER_CPU
# and waits until it accepts connections.
start_server() {
	local name=$1 port
	port=$(port_of "$name")
	shift
	case $name in
	hotpath | baseline)
		local extra
		if [[ $name == hotpath ]]; then extra=${HOTPATH_ARGS:-}; else extra=${BASELINE_ARGS:-}; fi
		# shellcheck disable=SC2086 # extra is a list of flags
		taskset -c "$SERVER_CPU" "$WORK/$name" -addr 127.0.0.1 -port "$port" -cpus "$SERVER_CPU" $extra "$@" \
			2>"$WORK/$name.log" &
		;;
	hotpath6)
		# shellcheck disable=SC2086 # extra is a list of flags
		taskset -c "$SERVER_CPU" "$WORK/hotpath" -addr :: -port "$port" -cpus "$SERVER_CPU" ${HOTPATH_ARGS:-} "$@" \
			2>"$WORK/$name.log" &
		;;
	fasthttp | nethttp | epoll | cfloor)
		taskset -c "$SERVER_CPU" "$WORK/$name" -addr "127.0.0.1:$port" 2>"$WORK/$name.log" &
		;;
	nginx)
		mkdir -p "$WORK/nginx"
		sed -e "s|@PREFIX@|$WORK/nginx|g" -e "s|@PORT@|$port|g" "$BENCH/nginx.conf.in" >"$WORK/nginx/nginx.conf"
		taskset -c "$SERVER_CPU" nginx -p "$WORK/nginx" -c "$WORK/nginx/nginx.conf" -e stderr \
			2>"$WORK/$name.log" &
		;;
	esac
	SERVER_PID=$!
	local i
	for i in $(seq 100); do
		if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
			return 0
		fi
		sleep 0.05
	done
	log "$name did not start:"
	cat "$WORK/$name.log" >&2
	exit 1
}

stop_server() {
	if [[ -n $SERVER_PID ]]; then
		kill -TERM "$SERVER_PID" 2>/dev/null || true
		wait "$SERVER_PID" 2>/dev/null || true
		SERVER_PID=
	fi
}

# cpu_ns PID: nanoseconds the process's threads have run so far, from the
# scheduler's own clock (/proc/PID/task/*/schedstat, first field). Not
# utime+stime from /proc/PID/stat: on a kernel with tick-based CPU
# accounting (CONFIG_TICK_CPU_ACCOUNTING, the default, and this machine's)
# those are samples of which task the timer tick found running, 4 ms each
# at HZ=250, and a server that sleeps and wakes thousands of times a
# second between its batches is sampled with a bias: the same server
# measured 0.47-0.66 us a pipelined request from one round to the next.
# Softirq work done in the server's context (loopback delivery of its
# responses to wrk) counts in both, as it does for every server.
cpu_ns() { cat /proc/"$1"/task/*/schedstat 2>/dev/null | awk '{ n += $1 } END { printf "%.0f\n", n }'; }
# ctx_switches PID: context switches of all the process's threads so far;
# on the one server CPU every one of them is an interruption of the server
# (the Go runtime's sysmon and scheduler hand-offs show up here).
ctx_switches() { cat /proc/"$1"/task/*/status 2>/dev/null | awk '/ctxt_switches/ { n += $2 } END { print n + 0 }'; }

# wrk_run NAME MODE -> prints "req/s p99_ms requests"
wrk_run() {
	local name=$1 mode=$2 port out
	port=$(port_of "$name")
	local args=(-t1 -c"$CONNS" -d"$DURATION" --latency)
	if [[ $mode == pipelined ]]; then
		args+=(-s "$BENCH/pipeline.lua")
	fi
	out=$(taskset -c "$CLIENT_CPU" wrk "${args[@]}" "http://$(host_of "$name"):$port/json" -- "$DEPTH")
	printf '### %s %s\n%s\n' "$name" "$mode" "$out" >>"$WORK/wrk.log"
	echo "$out" | awk '
		/Requests\/sec:/ { rps = $2 }
		/requests in/ { total = $1 }
		/^ +99%/ {
			v = $2
			if (v ~ /us$/) { sub(/us$/, "", v); p99 = v / 1000 }
			else if (v ~ /ms$/) { sub(/ms$/, "", v); p99 = v }
			else if (v ~ /s$/) { sub(/s$/, "", v); p99 = v * 1000 }
		}
		/Non-2xx|Socket errors/ { errs = errs " " $0 }
		END { printf "%.0f %.2f %d\n", rps, p99, total; if (errs != "") print "bench: wrk:" errs > "/dev/stderr" }'
}

# round_ratios "A1 A2 ..." "B1 B2 ...": the median of Ai/Bi, and the
# smallest and largest, as "1.23x, 1.10-1.31".
round_ratios() {
	awk -v a="$1" -v b="$2" 'BEGIN {
		n = split(a, x, " "); split(b, y, " "); k = 0
		for (i = 1; i <= n; i++) if (y[i] > 0) r[++k] = x[i] / y[i]
		if (k == 0) { print "n/a"; exit }
		for (i = 1; i <= k; i++) for (j = i + 1; j <= k; j++) if (r[j] < r[i]) { t = r[i]; r[i] = r[j]; r[j] = t }
		m = (k % 2) ? r[(k + 1) / 2] : (r[k / 2] + r[k / 2 + 1]) / 2
		printf "%.2fx, %.2f-%.2f", m, r[1], r[k] }'
}

median() { tr ' ' '\n' | awk 'NF' | sort -g | awk '{ a[NR] = $1 } END { if (NR == 0) print 0; else if (NR % 2) print a[(NR + 1) / 2]; else print (a[NR / 2] + a[NR / 2 + 1]) / 2 }'; }

declare -A RPS P99 CPU CTX
read -r -a peers <<<"$PEERS"
n=${#peers[@]}
load=$(cut -d' ' -f1 /proc/loadavg)
if awk -v l="$load" 'BEGIN { exit !(l > 1.5) }'; then
	log "WARNING: load average $load before the benchmark: other work shares these CPUs, expect noisy numbers"
fi
log "servers on cpu $SERVER_CPU, wrk on cpu $CLIENT_CPU, $CONNS connections, $DURATION per run, pipelined depth $DEPTH, $ROUNDS rounds"
for ((round = 0; round < ROUNDS; round++)); do
	for ((k = 0; k < n; k++)); do
		name=${peers[$(((k + round) % n))]}
		start_server "$name"
		taskset -c "$CLIENT_CPU" wrk -t1 -c"$CONNS" -d1s "http://$(host_of "$name"):$(port_of "$name")/json" >/dev/null # warm-up
		for mode in plain pipelined; do
			t0=$(cpu_ns "$SERVER_PID")
			c0=$(ctx_switches "$SERVER_PID")
			read -r rps p99 total < <(wrk_run "$name" "$mode")
			t1=$(cpu_ns "$SERVER_PID")
			c1=$(ctx_switches "$SERVER_PID")
			CTX[$name.$mode]+=" $(awk -v d=$((c1 - c0)) -v n="$total" 'BEGIN { if (n > 0) printf "%.2f", d * 1000 / n; else print 0 }')"
			# Server CPU time per request: what the server spends, even when
			# the single wrk thread is what limits req/s.
			cpu=$(awk -v d=$((t1 - t0)) -v n="$total" 'BEGIN { if (n > 0) printf "%.3f", d / 1e3 / n; else print 0 }')
			CPU[$name.$mode]+=" $cpu"
			RPS[$name.$mode]+=" $rps"
			if awk -v v="$p99" 'BEGIN { exit !(v > 0) }'; then P99[$name.$mode]+=" $p99"; fi
			log "round $((round + 1)) $name $mode: $rps req/s, p99 $p99 ms, server cpu $cpu us/request"
		done
		stop_server
	done
done

# Syscalls per request: strace every thread of the server while fixedload
# sends an exact number of requests.
syscalls_per_request() {
	local name=$1 depth=$2 perconn=$3 port conns=64 calls reqs
	port=$(port_of "$name")
	start_server "$name"
	strace -c -f -p "$SERVER_PID" -o "$WORK/strace.$name.$depth" 2>/dev/null &
	local spid=$!
	sleep 1
	reqs=$(taskset -c "$CLIENT_CPU" "$WORK/fixedload" -addr "$(host_of "$name"):$port" -c "$conns" -n "$perconn" -depth "$depth" |
		sed -n 's/^requests=\([0-9]*\).*/\1/p')
	kill -INT "$spid"
	wait "$spid" 2>/dev/null || true
	stop_server
	calls=$(awk '$NF == "total" { print $4 }' "$WORK/strace.$name.$depth")
	awk -v c="${calls:-0}" -v r="${reqs:-0}" 'BEGIN { if (r > 0) printf "%.2f", c / r; else print "n/a" }'
}

declare -A SYS
for name in "${peers[@]}"; do
	[[ $name == nethttp ]] && continue # one goroutine per connection: not comparable, and slow under strace
	SYS[$name.plain]=$(syscalls_per_request "$name" 1 300)
	SYS[$name.pipelined]=$(syscalls_per_request "$name" "$DEPTH" $((DEPTH * 100)))
	log "syscalls/request $name: plain ${SYS[$name.plain]} pipelined ${SYS[$name.pipelined]}"
done
# The hotpath syscall breakdown, for the record.
if [[ -f $WORK/strace.hotpath.1 ]]; then
	log "hotpath plain strace -c summary:"
	sed -n '1,12p' "$WORK/strace.hotpath.1" >&2
fi

# User-space instructions per request (cachegrind): unlike CPU time, a
# count that does not move with the machine's load, so that a change to
# the request path can be measured on a busy 2-core machine. Each server
# runs under valgrind twice, over N and 2N requests from fixedload, and
# the difference of the totals over N is the cost of one request, start-up
# and shutdown cancelled. Kernel work is not counted: the C floor's figure
# is its own loop and CRLFCRLF scan only. GODEBUG=asyncpreemptoff=1: the
# Go runtime's preemption signals are not what is measured (and callgrind,
# unlike cachegrind, aborts on them). cpu.rdtscp=off: valgrind 3.19's CPUID
# offers RDTSCP but it cannot run it, and the runtime's spinning lock reads
# the time with it (runtime.cputicks): SIGILL in 3 of 4 hotpath runs on a
# 6.18 host, so no figure at all.
instr_run() { # NAME DEPTH PERCONN -> total instructions
	local name=$1 depth=$2 n=$3 port out
	port=$(port_of "$name")
	out=$WORK/cachegrind.$name.$depth.$n
	local cmd=("$WORK/$name" -addr 127.0.0.1 -port "$port" -cpus "$SERVER_CPU")
	[[ $name == cfloor ]] && cmd=("$WORK/cfloor" -addr "127.0.0.1:$port")
	GODEBUG=asyncpreemptoff=1,cpu.rdtscp=off taskset -c "$SERVER_CPU" valgrind --tool=cachegrind --cache-sim=no \
		--cachegrind-out-file="$out.out" "${cmd[@]}" 2>"$out.log" &
	local vpid=$! i
	for i in $(seq 300); do
		(exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && break
		sleep 0.1
	done
	taskset -c "$CLIENT_CPU" "$WORK/fixedload" -addr "127.0.0.1:$port" -c 16 -n "$n" -depth "$depth" >/dev/null
	kill -TERM "$vpid"
	wait "$vpid" 2>/dev/null || true
	sed -n 's/.*I *refs: *\([0-9,]*\).*/\1/p' "$out.log" | tr -d ,
}
instr_per_request() { # NAME DEPTH PERCONN
	local a b
	a=$(instr_run "$1" "$2" "$3")
	b=$(instr_run "$1" "$2" $(($3 * 2)))
	awk -v a="${a:-0}" -v b="${b:-0}" -v n=$((16 * $3)) 'BEGIN { if (a > 0 && b > a) printf "%.0f", (b - a) / n; else print "n/a" }'
}
# instr_functions NAME DEPTH PERCONN: instructions per request by function,
# from the two cachegrind runs instr_per_request made (2N minus N).
instr_functions() {
	local name=$1 depth=$2 n=$3
	agg() { awk '/^fn=/ { fn = substr($0, 4) } /^[0-9]+ -?[0-9]+$/ { c[fn] += $2 } END { for (k in c) print k, c[k] }' "$1" | sort; }
	join -a1 -a2 -e0 -o 0,1.2,2.2 <(agg "$WORK/cachegrind.$name.$depth.$n.out") <(agg "$WORK/cachegrind.$name.$depth.$((n * 2)).out") |
		awk -v r=$((16 * n)) '{ d = ($3 - $2) / r; if (d >= 1) printf "%7.1f %s\n", d, $1 }' | sort -rn |
		sed 's#github.com/hotpath-dev/hotpath/##'
}
# vs_floor N FLOOR: "(cfloor 513, 2.53x)", or nothing without a floor figure.
vs_floor() {
	awk -v n="$1" -v f="$2" 'BEGIN { if (f + 0 > 0 && n + 0 > 0) printf "(cfloor %s, %.2fx)", f, n / f }'
}
INSTR_TARGET_PLAIN=1300
INSTR_TARGET_PIPELINED=1100
declare -A INSTR
if command -v valgrind >/dev/null 2>&1; then
	for name in "${peers[@]}"; do
		case $name in hotpath | baseline | cfloor) ;; *) continue ;; esac
		INSTR[$name.plain]=$(instr_per_request "$name" 1 200)
		INSTR[$name.pipelined]=$(instr_per_request "$name" "$DEPTH" 1600)
		log "user-space instructions/request $name: plain ${INSTR[$name.plain]} pipelined ${INSTR[$name.pipelined]}"
	done
else
	log "valgrind not installed: no instruction counts (apt-get install valgrind)"
fi

# Step 10 (issue 26): the worker sets its epoll instance's busy-poll
# parameters with EPIOCSPARAMS (_IOC(_IOC_WRITE, 0x8a, 0x1, 0x8) to an
# strace that does not know the name) and reads them back (EPIOCGPARAMS).
# Traced from the start, since a worker does it once, before its loop.
epoll_ioctls() {
	local port
	port=$(port_of hotpath)
	strace -f -qq -e trace=ioctl -o "$WORK/strace.epoll" \
		taskset -c "$SERVER_CPU" "$WORK/hotpath" -addr 127.0.0.1 -port "$port" -cpus "$SERVER_CPU" -prefer-busy-poll \
		2>"$WORK/hotpath-busypoll.log" &
	local spid=$! i
	for i in $(seq 100); do
		(exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && break
		sleep 0.05
	done
	# strace's child: taskset, which has exec'd the server by now.
	kill -TERM "$(pgrep -P "$spid")" 2>/dev/null || true
	wait "$spid" 2>/dev/null || true
	grep -E '0x8a, 0x[12]|EPIOC' "$WORK/strace.epoll" | sed 's/^/  /'
	grep 'epoll busy polling' "$WORK/hotpath-busypoll.log" | sed 's/^/  server: /'
}
epoll_lines=$(epoll_ioctls || true)

# Allocations per request: the Go benchmark of the request path, and the
# server's own count over a wrk run.
bench_allocs=$(cd "$ROOT" && go test -run '^$' -bench '^BenchmarkRequestPath$' -benchmem -benchtime 200000x ./server/ |
	awk '/^BenchmarkRequestPath/ { for (i = 1; i <= NF; i++) if ($i == "allocs/op") print $(i - 1) }')
start_server hotpath -stats
taskset -c "$CLIENT_CPU" wrk -t1 -c"$CONNS" -d"$DURATION" "http://127.0.0.1:$(port_of hotpath)/json" >/dev/null
stop_server
run_allocs=$(sed -n 's/.*allocs_per_request=\([0-9.]*\).*/\1/p' "$WORK/hotpath.log")
run_line=$(grep 'stats requests' "$WORK/hotpath.log" || true)

echo
echo "hotpath benchmark: $(uname -r), $(nproc) CPUs, server on cpu $SERVER_CPU, wrk (1 thread) on cpu $CLIENT_CPU,"
echo "load average before: $load, after: $(cut -d' ' -f1 /proc/loadavg)"
echo "$CONNS connections, $DURATION per run, median of $ROUNDS rounds, GET /json; pipelined = $DEPTH deep"
echo
printf '%-10s %12s %8s %9s %12s %8s %9s %8s %8s\n' "" plain plain "plain" pipelined pipelined pipelined plain pipelined
printf '%-10s %12s %8s %9s %12s %8s %9s %8s %8s\n' server "req/s" "p99 ms" "cpu us/r" "req/s" "p99 ms" "cpu us/r" "sys/req" "sys/req"
# wrk prints 0.00us for a percentile it lost track of (seen with nginx
# and pipelining); the median then hides nothing, so show n/a.
fmt_p99() { awk -v v="$1" 'BEGIN { if (v + 0 == 0) print "n/a"; else printf "%.2f", v }'; }
declare -A MED
for name in "${peers[@]}"; do
	for mode in plain pipelined; do
		MED[$name.$mode]=$(echo "${RPS[$name.$mode]:-}" | median)
		MED[$name.$mode.p99]=$(echo "${P99[$name.$mode]:-}" | median)
		MED[$name.$mode.cpu]=$(echo "${CPU[$name.$mode]:-}" | median)
	done
	printf '%-10s %12.0f %8s %9.3f %12.0f %8s %9.3f %8s %8s\n' "$name" \
		"${MED[$name.plain]}" "$(fmt_p99 "${MED[$name.plain.p99]}")" "${MED[$name.plain.cpu]}" \
		"${MED[$name.pipelined]}" "$(fmt_p99 "${MED[$name.pipelined.p99]}")" "${MED[$name.pipelined.cpu]}" \
		"${SYS[$name.plain]:--}" "${SYS[$name.pipelined]:--}"
done
echo
echo "ratios, hotpath vs peer: req/s (hotpath / peer), and server CPU per request (peer / hotpath):"
for name in "${peers[@]}"; do
	[[ $name == hotpath ]] && continue
	awk -v n="$name" -v hp="${MED[hotpath.plain]}" -v pp="${MED[$name.plain]}" \
		-v hq="${MED[hotpath.pipelined]}" -v pq="${MED[$name.pipelined]}" \
		-v hc="${MED[hotpath.plain.cpu]}" -v pc="${MED[$name.plain.cpu]}" \
		-v hd="${MED[hotpath.pipelined.cpu]}" -v pd="${MED[$name.pipelined.cpu]}" \
		'function r(a, b) { return b > 0 ? a / b : 0 }
		BEGIN { printf "  vs %-9s req/s plain %5.2fx pipelined %5.2fx   cpu/request plain %5.2fx pipelined %5.2fx\n",
			n, r(hp, pp), r(hq, pq), r(pc, hc), r(pd, hd) }'
done
if [[ " ${peers[*]} " == *" hotpath6 "* ]]; then
	echo
	echo "IPv4 and IPv6 side by side: hotpath on 127.0.0.1 (IPv4 socket) and on [::1] (its dual-stack default, IPv6 client):"
	awk -v a="${MED[hotpath.plain]}" -v b="${MED[hotpath6.plain]}" -v c="${MED[hotpath.pipelined]}" -v d="${MED[hotpath6.pipelined]}" \
		-v e="${MED[hotpath.plain.cpu]}" -v f="${MED[hotpath6.plain.cpu]}" -v g="${MED[hotpath.pipelined.cpu]}" -v h="${MED[hotpath6.pipelined.cpu]}" \
		'function r(x, y) { return y > 0 ? x / y : 0 }
		BEGIN { printf "  req/s plain v4 %.0f v6 %.0f (v6/v4 %.2fx), pipelined v4 %.0f v6 %.0f (%.2fx)\n", a, b, r(b, a), c, d, r(d, c)
			printf "  cpu us/request plain v4 %.2f v6 %.2f (v6/v4 %.2fx), pipelined v4 %.2f v6 %.2f (%.2fx)\n", e, f, r(f, e), g, h, r(h, g) }'
fi
echo
echo "context switches of the server's threads per 1000 requests (plain, pipelined):"
for name in "${peers[@]}"; do
	printf '  %-9s %8.2f %8.2f\n' "$name" "$(echo "${CTX[$name.plain]:-}" | median)" "$(echo "${CTX[$name.pipelined]:-}" | median)"
done
if [[ " ${peers[*]} " == *" cfloor "* ]]; then
	echo
	echo "server CPU per request against the C floor (cfloor = 1.00: the system calls and the TCP stack alone);"
	echo "the ratio of the medians, then the median of each round's ratio (the servers of one round ran"
	echo "seconds apart, so the second is the steadier figure), and its range over the rounds:"
	for name in "${peers[@]}"; do
		awk -v n="$name" -v fp="${MED[cfloor.plain.cpu]}" -v fq="${MED[cfloor.pipelined.cpu]}" \
			-v p="${MED[$name.plain.cpu]}" -v q="${MED[$name.pipelined.cpu]}" \
			-v rp="$(round_ratios "${CPU[$name.plain]:-}" "${CPU[cfloor.plain]:-}")" \
			-v rq="$(round_ratios "${CPU[$name.pipelined]:-}" "${CPU[cfloor.pipelined]:-}")" \
			'function r(a, b) { return b > 0 ? a / b : 0 }
			BEGIN { printf "  %-9s plain %5.2fx (rounds %s)   pipelined %5.2fx (rounds %s)\n", n, r(p, fp), rp, r(q, fq), rq }'
	done
fi
echo
echo "allocations per request: Go benchmark BenchmarkRequestPath ${bench_allocs:-?} allocs/op;"
echo "  server MemStats over a $DURATION wrk run: ${run_allocs:-?} (${run_line#*stats }; includes per-connection setup)"
echo
echo "cpu us/r is the time the server's threads ran per request during the run (the scheduler's clock, softirq"
echo "work in their context included): when the one wrk thread saturates its CPU (the plain column, usually),"
echo "req/s measures wrk and cpu us/r the server."
if ((${#INSTR[@]} > 0)); then
	echo
	echo "user-space instructions per request (cachegrind, 16 connections, exact load; independent of the machine's load),"
	echo "each beside the C floor's (cfloor: its loop and CRLFCRLF scan only) and its ratio to it; targets (issue 42):"
	echo "hotpath <= $INSTR_TARGET_PLAIN plain and <= $INSTR_TARGET_PIPELINED pipelined:"
	for name in "${peers[@]}"; do
		[[ -n ${INSTR[$name.plain]:-} ]] || continue
		floor_p=${INSTR[cfloor.plain]:-} floor_q=${INSTR[cfloor.pipelined]:-}
		[[ $name == cfloor ]] && floor_p= floor_q=
		printf '  %-9s plain %6s %-22s pipelined %6s %s\n' "$name" \
			"${INSTR[$name.plain]}" "$(vs_floor "${INSTR[$name.plain]}" "$floor_p")" \
			"${INSTR[$name.pipelined]}" "$(vs_floor "${INSTR[$name.pipelined]}" "$floor_q")"
	done
	if [[ -n ${INSTR[hotpath.plain]:-} ]]; then
		echo "hotpath per function, pipelined (instructions per request, the 2N run's counts minus the N run's;"
		echo "inlined code counted in the function it lands in; see tests/bench/README.md):"
		instr_functions hotpath "$DEPTH" 1600 | head -n 20 | sed 's/^/  /'
	fi
fi
echo
echo "a worker started with -prefer-busy-poll, traced (strace -e ioctl): EPIOCSPARAMS and EPIOCGPARAMS on its epoll instance"
echo "${epoll_lines:-  (none seen: see $WORK/strace.epoll with KEEP=1)}"
echo
echo "targets: cpu/request <= 1.05x cfloor plain and <= 1.25x pipelined, <= nginx plain, >= 1.25x fasthttp both columns,"
echo "  0 allocs/request, <= 2.1 syscalls/request"

# The "api" scenario (issue 35): routes with a parameter, a JSON body
# decoded, against the same API on fasthttp and net/http.
if [[ ${API:-1} != 0 ]]; then
	echo
	ROUNDS=$ROUNDS DURATION=$DURATION CONNS=$CONNS SERVER_CPU=$SERVER_CPU CLIENT_CPU=$CLIENT_CPU "$BENCH/api.sh"
fi
