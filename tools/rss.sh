#!/usr/bin/env bash
# rss.sh: sample a process's resident memory (VmRSS in /proc/PID/status)
# every INTERVAL seconds until it exits, one line a sample, with its two
# parts: anonymous memory (the heap, stacks: what a leak grows) and the
# binary's and libraries' pages read in so far (they grow as new code runs):
#   t_s=30 rss_kb=27648 anon_kb=15360 file_kb=12288
# Usage:
#   tools/rss.sh [-i SECONDS] -p PID            sample a running process
#   tools/rss.sh [-i SECONDS] -- COMMAND ARGS   start COMMAND and sample it
# With a command, its output goes to rss-cmd.log in the current folder (or
# $RSS_LOG) and the script exits with the command's exit code. It reads
# /proc only; it signals nothing.
set -euo pipefail
# p2pfault's Go (README), for a COMMAND that is `go run .`.
export GOTOOLCHAIN=go1.27.3
interval=30
pid=""
while [ $# -gt 0 ]; do
	case "$1" in
	-i) interval="$2"; shift 2 ;;
	-p) pid="$2"; shift 2 ;;
	--) shift; break ;;
	*) echo "rss.sh: unknown argument $1 (want -i SECONDS, -p PID or -- COMMAND)" >&2; exit 2 ;;
	esac
done
if [ -z "$pid" ]; then
	if [ $# -eq 0 ]; then
		echo "rss.sh: give -p PID or -- COMMAND" >&2
		exit 2
	fi
	"$@" >"${RSS_LOG:-rss-cmd.log}" 2>&1 &
	pid=$!
fi
start=$(date +%s)
sample() {
	local kb
	kb=$(awk '/^VmRSS:/ {r=$2} /^RssAnon:/ {a=$2} /^RssFile:/ {f=$2} END {if (r != "") print r, a, f}' "/proc/$pid/status" 2>/dev/null) || return 1
	[ -n "$kb" ] || return 1
	set -- $kb
	echo "t_s=$(( $(date +%s) - start )) rss_kb=$1 anon_kb=$2 file_kb=$3"
}
while sample; do
	# Sleep in short steps so the last sample is near the exit.
	for _ in $(seq 1 "$interval"); do
		[ -e "/proc/$pid/status" ] || break 2
		sleep 1
	done
done
if [ $# -gt 0 ]; then
	wait "$pid"
fi
