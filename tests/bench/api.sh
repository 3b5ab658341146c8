#!/usr/bin/env bash
# The bench's "api" scenario (issue 35, item 6): the example catalogue API
# (server/examples/catalog) against the same API on fasthttp with
# fasthttp/router (tests/peers/fasthttpapi) and on net/http's ServeMux
# (tests/peers/nethttpapi), which serve the same data and the same answers
# byte for byte (package items). Two requests:
#
#   GET  /v1/items/42   a route with a parameter, a 10-field object encoded
#   POST /v1/score      a 343-byte JSON body decoded, validated, scored, encoded
#
# For each (server, request) a fresh process pinned to SERVER_CPU, wrk
# (1 thread, CONNS connections, plain keep-alive requests, score.lua for
# the POST) on CLIENT_CPU: a warm-up second, SIGUSR1 (the servers count
# allocations from there), the measured run, SIGTERM (they print
# allocations per request). Server CPU per request from the scheduler's
# clock, as run.sh's rows; the median of ROUNDS rounds, the order rotating.
# Then, with valgrind installed, each server's user-space instructions per
# request under cachegrind over an exact load (tests/peers/fixedload over
# N and 2N requests, the difference over N, as run.sh does for /json): a
# figure that does not move with the machine's load (API_INSTR=0 skips it).
#
# Then the "api-defer" row: hotpath's GET p99 at one open-loop offered
# rate with and without deferred traffic on /v1/proxy/{id} (see below;
# API_DEFER=0 skips it).
#
# Run by run.sh after the /json scenario (API=0 skips it), or alone:
#   tests/bench/api.sh     Env: ROUNDS DURATION CONNS SERVER_CPU CLIENT_CPU as run.sh (ROUNDS=0: instructions only, API_INSTR=0: none),
#                               API_PEERS="hotpath fasthttp nethttp", KEEP=1,
#                               API_ROUNDS (0: the api-defer row alone), API_DEFER DEFER_RATE DEFER_EVERY DEFER_DELAY DEFER_OTHER_CPUS
set -euo pipefail

ROUNDS=${ROUNDS:-3}
DURATION=${DURATION:-5s}
CONNS=${CONNS:-256}
SERVER_CPU=${SERVER_CPU:-0}
CLIENT_CPU=${CLIENT_CPU:-1}
API_PEERS=${API_PEERS:-"hotpath fasthttp nethttp"}
BASE_PORT=${API_BASE_PORT:-18500}

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BENCH=$ROOT/tests/bench
WORK=$(mktemp -d "${TMPDIR:-/tmp}/hotpath-bench-api.XXXXXX")
SERVER_PID=

log() { echo "bench api: $*" >&2; }

stop_server() {
	if [[ -n $SERVER_PID ]]; then
		kill -TERM "$SERVER_PID" 2>/dev/null || true
		wait "$SERVER_PID" 2>/dev/null || true
		SERVER_PID=
	fi
}
cleanup() {
	stop_server
	if [[ -n ${BACKEND_PID:-} ]]; then kill -TERM "$BACKEND_PID" 2>/dev/null || true; fi
	if [[ -n ${KEEP:-} ]]; then log "kept $WORK"; else rm -rf "$WORK"; fi
}
trap cleanup EXIT INT TERM

for c in wrk taskset go; do
	command -v "$c" >/dev/null 2>&1 || { log "missing $c"; exit 1; }
done

log "building into $WORK"
(cd "$ROOT" && go build -o "$WORK/hotpath" ./server/examples/catalog)
(cd "$ROOT/tests/peers" && go build -o "$WORK/fasthttp" ./fasthttpapi && go build -o "$WORK/nethttp" ./nethttpapi &&
	go build -o "$WORK/fixedload" ./fixedload && go build -o "$WORK/delaybackend" ./delaybackend &&
	go build -o "$WORK/openloop" ./openloop)
# The POST body, as score.lua sends it (its Lua string escapes backslashes).
sed -n "s/^wrk.body = '\(.*\)'\$/\1/p" "$BENCH/score.lua" | sed 's/\\\\/\\/g' | tr -d '\n' >"$WORK/score.json"

port_of() {
	case $1 in hotpath) echo $((BASE_PORT)) ;; fasthttp) echo $((BASE_PORT + 1)) ;; nethttp) echo $((BASE_PORT + 2)) ;; esac
}

start_server() { # NAME
	local name=$1 port i
	port=$(port_of "$name")
	if [[ $name == hotpath ]]; then
		# -reload 1h: the catalogue's rebuild (every 10 s by default, some
		# tens of thousands of allocations in the background) would count in allocs/r of
		# a run longer than that, and it is not per request.
		taskset -c "$SERVER_CPU" "$WORK/hotpath" -addr 127.0.0.1 -port "$port" -cpus "$SERVER_CPU" -reload 1h -stats 2>"$WORK/$name.log" &
	else
		taskset -c "$SERVER_CPU" "$WORK/$name" -addr "127.0.0.1:$port" 2>"$WORK/$name.log" &
	fi
	SERVER_PID=$!
	for i in $(seq 100); do
		(exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && return 0
		sleep 0.05
	done
	log "$name did not start:"
	cat "$WORK/$name.log" >&2
	exit 1
}

# The same clocks as run.sh: see its comments.
cpu_ns() { cat /proc/"$1"/task/*/schedstat 2>/dev/null | awk '{ n += $1 } END { printf "%.0f\n", n }'; }
median() { tr ' ' '\n' | awk 'NF' | sort -g | awk '{ a[NR] = $1 } END { if (NR == 0) print 0; else if (NR % 2) print a[(NR + 1) / 2]; else print (a[NR / 2] + a[NR / 2 + 1]) / 2 }'; }

wrk_args() { # NAME REQ DURATION -> wrk's arguments
	local url
	url="http://127.0.0.1:$(port_of "$1")"
	if [[ $2 == get ]]; then
		echo "-t1 -c$CONNS -d$3 $url/v1/items/42"
	else
		echo "-t1 -c$CONNS -d$3 -s $BENCH/score.lua $url/v1/score"
	fi
}

declare -A RPS CPU ALLOC
read -r -a peers <<<"$API_PEERS"
n=${#peers[@]}
log "servers on cpu $SERVER_CPU, wrk on cpu $CLIENT_CPU, $CONNS connections, $DURATION per run, $ROUNDS rounds"
# API_ROUNDS (default ROUNDS) rounds of the api table; API_ROUNDS=0 runs
# the api-defer row alone.
API_ROUNDS=${API_ROUNDS:-$ROUNDS}
for ((round = 0; round < API_ROUNDS; round++)); do
	for ((k = 0; k < n; k++)); do
		name=${peers[$(((k + round) % n))]}
		for req in get post; do
			start_server "$name"
			# shellcheck disable=SC2046 # wrk_args is a list of words
			taskset -c "$CLIENT_CPU" wrk $(wrk_args "$name" "$req" 1s) >/dev/null
			kill -USR1 "$SERVER_PID"
			sleep 0.1
			t0=$(cpu_ns "$SERVER_PID")
			# shellcheck disable=SC2046
			out=$(taskset -c "$CLIENT_CPU" wrk $(wrk_args "$name" "$req" "$DURATION"))
			t1=$(cpu_ns "$SERVER_PID")
			stop_server
			printf '### %s %s\n%s\n' "$name" "$req" "$out" >>"$WORK/wrk.log"
			if grep -q 'Non-2xx' <<<"$out"; then
				log "WARNING: $name $req: $(grep Non-2xx <<<"$out")"
			fi
			read -r rps total < <(awk '/Requests\/sec:/ { r = $2 } /requests in/ { t = $1 } END { printf "%.0f %d\n", r, t }' <<<"$out")
			cpu=$(awk -v d=$((t1 - t0)) -v n="$total" 'BEGIN { if (n > 0) printf "%.3f", d / 1e3 / n; else print 0 }')
			alloc=$(sed -n 's/.*allocs_per_request=\([0-9.]*\).*/\1/p' "$WORK/$name.log" | tail -1)
			RPS[$name.$req]+=" $rps"
			CPU[$name.$req]+=" $cpu"
			ALLOC[$name.$req]+=" ${alloc:-}"
			log "round $((round + 1)) $name $req: $rps req/s, server cpu $cpu us/request, ${alloc:-?} allocs/request"
		done
	done
done

# The "api-defer" row (issue 36): the latency of the other requests
# (GET /v1/items/42) on hotpath's catalog, on one worker, at one offered
# rate (DEFER_RATE requests a second, open loop: tests/peers/openloop,
# latency from each request's due time), with no deferred traffic and with
# every DEFER_EVERY'th request on /v1/proxy/{id} instead, which the catalog
# defers to a backend answering after DEFER_DELAY
# (tests/peers/delaybackend). The worker runs on SERVER_CPU (the server
# pins its thread: -cpus); the process's other threads, which make the
# backend calls, run on DEFER_OTHER_CPUS (CLIENT_CPU by default, with the
# load generator and the backend), never on the worker's CPU: the row
# measures what deferring costs the worker, not a CPU shared with the
# process's own HTTP client. The median p99 of each over ROUNDS rounds, and
# their ratio (the issue's target: within 1.2x). Reported, not asserted
# (server/defer_latency_test.go asserts the mechanism). API_DEFER=0 skips
# it.
DEFER_RATE=${DEFER_RATE:-1000}
DEFER_EVERY=${DEFER_EVERY:-10}
DEFER_DELAY=${DEFER_DELAY:-50ms}
DEFER_OTHER_CPUS=${DEFER_OTHER_CPUS:-$CLIENT_CPU}
BACKEND_PID=
declare -A P99 P50 SP99 DEFER_ERR
if ((ROUNDS > 0)) && [[ ${API_DEFER:-1} != 0 && " ${peers[*]} " == *" hotpath "* ]]; then
	bport=$((BASE_PORT + 3))
	taskset -c "$CLIENT_CPU" "$WORK/delaybackend" -addr "127.0.0.1:$bport" -delay "$DEFER_DELAY" 2>"$WORK/delaybackend.log" &
	BACKEND_PID=$!
	port=$(port_of hotpath)
	for ((round = 0; round < ROUNDS; round++)); do
		for mode in none deferred; do
			taskset -c "$DEFER_OTHER_CPUS" "$WORK/hotpath" -addr 127.0.0.1 -port "$port" -cpus "$SERVER_CPU" -reload 1h \
				-backend "http://127.0.0.1:$bport" -proxy-calls 4096 2>"$WORK/hotpath-defer.log" &
			SERVER_PID=$!
			for i in $(seq 100); do
				(exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && break
				sleep 0.05
			done
			if ((round == 0)) && [[ $mode == none ]]; then
				# The worker alone on SERVER_CPU, every other thread elsewhere.
				log "api-defer: the catalog's threads: $(cat /proc/"$SERVER_PID"/task/*/status | awk '/^Cpus_allowed_list/ { n[$2]++ } END { for (c in n) printf "%d on cpu %s; ", n[c], c }')"
			fi
			every=0
			[[ $mode == deferred ]] && every=$DEFER_EVERY
			# A warm-up second (connections, the backend's pool), then the run.
			taskset -c "$CLIENT_CPU" "$WORK/openloop" -addr "127.0.0.1:$port" -rate "$DEFER_RATE" -every "$every" -d 1s >/dev/null
			out=$(taskset -c "$CLIENT_CPU" "$WORK/openloop" -addr "127.0.0.1:$port" -rate "$DEFER_RATE" -every "$every" -d "$DURATION")
			stop_server
			printf '### api-defer %s\n%s\n' "$mode" "$out" >>"$WORK/wrk.log"
			val() { sed -n "s/.*\b$1=\([0-9.]*\).*/\1/p" <<<"$out"; }
			P99[$mode]+=" $(val p99_ms)"
			P50[$mode]+=" $(val p50_ms)"
			SP99[$mode]+=" $(val start_p99_ms)"
			DEFER_ERR[$mode]=$((${DEFER_ERR[$mode]:-0} + $(val errors)))
			log "round $((round + 1)) api-defer $mode: $out"
		done
	done
	kill -TERM "$BACKEND_PID" 2>/dev/null || true
	wait "$BACKEND_PID" 2>/dev/null || true
	BACKEND_PID=
fi

# instr_run NAME REQ PERCONN -> the server's total user-space instructions
# over 16 connections of PERCONN requests (see run.sh's instr_run).
instr_run() {
	local name=$1 req=$2 n=$3 port out i
	port=$(port_of "$name")
	out=$WORK/cachegrind.$name.$req.$n
	local cmd=("$WORK/$name" -addr "127.0.0.1:$port")
	[[ $name == hotpath ]] && cmd=("$WORK/hotpath" -addr 127.0.0.1 -port "$port" -cpus "$SERVER_CPU")
	GODEBUG=asyncpreemptoff=1,cpu.rdtscp=off taskset -c "$SERVER_CPU" valgrind --tool=cachegrind --cache-sim=no \
		--cachegrind-out-file="$out.out" "${cmd[@]}" 2>"$out.log" &
	local vpid=$!
	for i in $(seq 300); do
		(exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && break
		sleep 0.1
	done
	local load=(-path /v1/items/42)
	[[ $req == post ]] && load=(-path /v1/score -body "$WORK/score.json")
	taskset -c "$CLIENT_CPU" "$WORK/fixedload" -addr "127.0.0.1:$port" -c 16 -n "$n" "${load[@]}" >/dev/null
	kill -TERM "$vpid"
	wait "$vpid" 2>/dev/null || true
	sed -n 's/.*I *refs: *\([0-9,]*\).*/\1/p' "$out.log" | tr -d ,
}
declare -A ICOUNT
counted=0
if [[ ${API_INSTR:-1} != 0 ]] && command -v valgrind >/dev/null 2>&1; then
	counted=1
	for name in "${peers[@]}"; do
		for req in get post; do
			a=$(instr_run "$name" "$req" 200)
			b=$(instr_run "$name" "$req" 400)
			ICOUNT[$name.$req]=$(awk -v a="${a:-0}" -v b="${b:-0}" 'BEGIN { if (a > 0 && b > a) printf "%.0f", (b - a) / (16 * 200); else print "n/a" }')
			log "user-space instructions/request $name $req: ${ICOUNT[$name.$req]}"
		done
	done
fi

declare -A MED
echo
if ((API_ROUNDS > 0)); then
echo "api scenario: $(uname -r), server on cpu $SERVER_CPU, wrk (1 thread) on cpu $CLIENT_CPU, $CONNS connections,"
echo "$DURATION per run, median of $API_ROUNDS rounds; GET /v1/items/42 and POST /v1/score (tests/bench/score.lua)"
echo
printf '%-10s %10s %10s %10s %10s %10s %10s\n' "" GET GET GET POST POST POST
printf '%-10s %10s %10s %10s %10s %10s %10s\n' server "req/s" "cpu us/r" "allocs/r" "req/s" "cpu us/r" "allocs/r"
for name in "${peers[@]}"; do
	for req in get post; do
		MED[$name.$req]=$(echo "${RPS[$name.$req]:-}" | median)
		MED[$name.$req.cpu]=$(echo "${CPU[$name.$req]:-}" | median)
		MED[$name.$req.alloc]=$(echo "${ALLOC[$name.$req]:-}" | median)
	done
	printf '%-10s %10.0f %10.3f %10.2f %10.0f %10.3f %10.2f\n' "$name" \
		"${MED[$name.get]}" "${MED[$name.get.cpu]}" "${MED[$name.get.alloc]}" \
		"${MED[$name.post]}" "${MED[$name.post.cpu]}" "${MED[$name.post.alloc]}"
done
if [[ " ${peers[*]} " == *" hotpath "* ]]; then
	echo
	echo "server CPU per request, peer / hotpath (above 1.00: hotpath spends less):"
	for name in "${peers[@]}"; do
		[[ $name == hotpath ]] && continue
		awk -v n="$name" -v hg="${MED[hotpath.get.cpu]}" -v pg="${MED[$name.get.cpu]}" \
			-v hp="${MED[hotpath.post.cpu]}" -v pp="${MED[$name.post.cpu]}" \
			'function r(a, b) { return b > 0 ? a / b : 0 }
			BEGIN { printf "  vs %-9s GET %5.2fx   POST %5.2fx\n", n, r(pg, hg), r(pp, hp) }'
	done
fi
fi # API_ROUNDS > 0
if [[ -n ${P99[none]:-} ]]; then
	a=$(echo "${P99[none]}" | median)
	d=$(echo "${P99[deferred]:-}" | median)
	echo
	echo "api-defer: GET /v1/items/42's latency on one worker (cpu $SERVER_CPU; the process's other threads on cpu $DEFER_OTHER_CPUS),"
	echo "open loop at $DEFER_RATE req/s, with no deferred traffic and with every ${DEFER_EVERY}th request on /v1/proxy/7 (deferred to a"
	echo "backend answering after $DEFER_DELAY); median of $ROUNDS rounds of $DURATION:"
	sa=$(echo "${SP99[none]}" | median)
	sd=$(echo "${SP99[deferred]}" | median)
	printf '  %-10s p50 %8.3f ms  p99 %8.3f ms  (from the send: p99 %8.3f ms)  errors %d\n' none "$(echo "${P50[none]}" | median)" "$a" "$sa" "${DEFER_ERR[none]}"
	printf '  %-10s p50 %8.3f ms  p99 %8.3f ms  (from the send: p99 %8.3f ms)  errors %d\n' deferred "$(echo "${P50[deferred]}" | median)" "$d" "$sd" "${DEFER_ERR[deferred]}"
	awk -v d="$d" -v a="$a" -v sd="$sd" -v sa="$sa" 'BEGIN { printf "  p99 ratio deferred / none: %.2fx (from the send: %.2fx; issue 36: within 1.2x)\n", (a > 0 ? d / a : 0), (sa > 0 ? sd / sa : 0) }'
	echo "  (latency from each request's due time; \"from the send\": from when the client's goroutine ran, without its timer's lateness)"
fi
# (ROUNDS=0: the instruction counts alone)
if ((counted)); then
	echo
	echo "user-space instructions per request (cachegrind, 16 connections, exact load; independent of the machine's load):"
	for name in "${peers[@]}"; do
		printf '  %-9s GET %7s   POST %7s\n' "$name" "${ICOUNT[$name.get]:-}" "${ICOUNT[$name.post]:-}"
	done
	if [[ " ${peers[*]} " == *" hotpath "* ]]; then
		for name in "${peers[@]}"; do
			[[ $name == hotpath ]] && continue
			awk -v n="$name" -v hg="${ICOUNT[hotpath.get]:-0}" -v pg="${ICOUNT[$name.get]:-0}" \
				-v hp="${ICOUNT[hotpath.post]:-0}" -v pp="${ICOUNT[$name.post]:-0}" \
				'function r(a, b) { return b > 0 ? a / b : 0 }
				BEGIN { printf "  %s / hotpath: GET %.2fx   POST %.2fx\n", n, r(pg, hg), r(pp, hp) }'
		done
	fi
fi
echo
echo "allocs/r: the server's own runtime.MemStats.Mallocs over the measured run divided by its requests"
echo "(connections were opened in the warm-up second before it)."
echo "target (issue 35): hotpath's cpu us/r below fasthttp's and net/http's for both requests, 0 allocs/r."
