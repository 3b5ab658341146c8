#!/bin/bash
# privileges.sh: the default workload as root against the same binary as the
# appliance runs it by default (uid/gid 65534, no supplementary groups,
# no_new_privs, no capabilities), side by side and interleaved on loopback:
# server on CPU 0, wrk on CPU 1, 64 connections. Prints the server's CPU
# time per request for each run (from /proc/PID/stat). Needs root, setpriv
# (util-linux) and wrk (image/deps.sh bench).
#
#   tests/bench/privileges.sh [rounds] [duration]
set -eu
rounds=${1:-3}
duration=${2:-5s}
port=18555
cd "$(dirname "$0")/../.."
bin=$(mktemp -d)/hotpath-json
trap 'rm -rf "$(dirname "$bin")"' EXIT
go build -o "$bin" ./server/cmd/hotpath-json

run() { # label, then the command that drops (or keeps) privileges
	local label=$1
	shift
	"$@" "$bin" -addr 127.0.0.1 -port $port -cpus 0 >/dev/null 2>&1 &
	local pid=$!
	for _ in $(seq 50); do
		curl -s -o /dev/null "http://127.0.0.1:$port/json" && break
		sleep 0.1
	done
	local spid
	spid=$(pgrep -f "$bin -addr 127.0.0.1 -port $port" | head -1)
	local t0 t1 reqs uid
	t0=$(awk '{print $14+$15}' "/proc/$spid/stat")
	reqs=$(taskset -c 1 wrk -t1 -c64 -d"$duration" "http://127.0.0.1:$port/json" | awk '/requests in/{print $1}')
	t1=$(awk '{print $14+$15}' "/proc/$spid/stat")
	uid=$(awk '/^Uid/{print $2}' "/proc/$spid/status")
	# clock ticks are 10 ms (USER_HZ 100): µs/request = ticks * 10000 / requests
	echo "$label uid=$uid requests=$reqs server_cpu_us_per_req=$(echo "scale=2; ($t1-$t0)*10000/$reqs" | bc)"
	kill "$pid"
	wait "$pid" 2>/dev/null || true
}

for _ in $(seq "$rounds"); do
	run root env
	run unprivileged setpriv --reuid=65534 --regid=65534 --clear-groups --no-new-privs --inh-caps=-all --bounding-set=-all
done
