#!/usr/bin/env bash
# monitoring.sh: the monitoring repository (internal/monitor/repo) on
# SQLite, with its real code, on the workload of issue 6.
#
#   bench/monitoring.sh
#
# It builds bench/monbench and runs it once on a fresh directory on the
# host's disk (fsync is real: every Append fsyncs the repository's log):
#   history  10,000 series get 7 days of synthetic history written straight
#            into the 1-minute and 10-minute tiers (Repo.WriteHistory).
#   ingest   250,000 distinct series from 50 nodes: per node 20 metrics x
#            250 interfaces, of which 10 counters (10 to 10,000 packets/s,
#            drifting, with Poisson-like noise), 7 utilisation gauges (3
#            decimals, such as 0.734, random walk) and 3 constants; one
#            sample of every series per 10 s of synthetic time, each node's
#            push stamped with its collection time plus uniform jitter of
#            -5..+5 ms, pushed as 5,000 series per Append (one node's push)
#            from 2 goroutines as fast as the repository accepts them, for
#            DURATION of wall time. Reported: samples/s, CPU (getrusage
#            user+sys; it includes generating the samples), CPU per million
#            samples, peak RSS and heap.
#   raw tier after Close: the sealed chunks from SQLite's dbstat (the
#            chunks table with its index chunks_key, per raw sample in it:
#            leaf pages shared among their rows by size, interior and index
#            pages by row count); the open chunks from the heads file beside
#            the SQLite file (its bytes shared among the tiers by their share
#            of its chunk data, per raw sample in it); and both together.
#   queries  after a reopen (timed), 200 dashboard queries per row on random
#            history series: 1 h at step 12 s and 7 d at step 2016 s (7d/300),
#            selecting one series by name and labels, and 10 series (one
#            node's card); p50, p99, max.
#
# Then, on the same workload and machine, one after the other:
#   through the API  bench/monpush: each node's push as the agents' JSON to
#            POST /api/v1/metrics/push of a real controller on loopback (2
#            clients), for PUSH_DURATION (1m): what HTTP and JSON cost.
#   the peer bench/tsdbpeer (its own Go module): the same samples into
#            Prometheus' storage engine (github.com/prometheus/prometheus/
#            tsdb, as a library, one appender and Commit per push, series
#            references cached) for DURATION, then its head compacted into
#            blocks: samples/s, CPU, memory and the blocks' bytes per sample,
#            printed beside Lightpath's with the ratios. Prometheus' WAL is
#            not fsynced per commit, Lightpath's log is: said in the table.
#
# Targets (issue 6): ingest >= 100,000 samples/s, <= 2 bytes per sample on
# disk in the raw tier (sealed and open chunks together), query p99 <
# 100 ms. Each PASS or FAIL. The workload's generator is the package
# bench/monbench/workload, for peer benchmarks on the same samples.
#
# Environment: PUSH_DURATION (1m), PEER (1; 0 skips the peer), DURATION (5m; a shorter value such as 30s for a quick
# check), SERIES (250000, a multiple of 250000: 5,000 series per push),
# HIST (10000), QUERIES (200),
# WORKDIR (a directory on the disk to work in; default a new one under
# /var/tmp, removed at the end).
# Exit 0 when the measurements completed (whatever the targets), 1 when the
# benchmark failed, 2 on the script's own errors.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$HERE/.." && pwd)
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$HERE/lib.sh"

DURATION=${DURATION:-5m}
PUSH_DURATION=${PUSH_DURATION:-1m}
PEER=${PEER:-1}
SERIES=${SERIES:-250000}
HIST=${HIST:-10000}
QUERIES=${QUERIES:-200}
JSON=0
ONLY=
parse_args "$@"
[[ -z $ONLY ]] || die "--only is not supported here"
[[ $JSON == 0 ]] || die "--json is not supported here"
[[ $SERIES =~ ^[0-9]+$ ]] || die "SERIES must be a whole number, not '$SERIES'"
[[ $HIST =~ ^[0-9]+$ ]] || die "HIST must be a whole number, not '$HIST'"
[[ $QUERIES =~ ^[0-9]+$ ]] || die "QUERIES must be a whole number, not '$QUERIES'"

PATH=$PATH:/usr/local/go/bin
W=$(mktemp -d "${WORKDIR:-/var/tmp}/lpmon.XXXXXX") || die "cannot create a work directory"
cleanup() {
	local rc=$?
	trap - EXIT INT TERM
	rm -rf -- "$W"
	exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

log "building monbench, monpush and tsdbpeer"
(cd "$REPO" && go build -o "$W/monbench" ./bench/monbench && go build -o "$W/monpush" ./bench/monpush) || die "go build ./bench/monbench ./bench/monpush failed"
if [[ $PEER == 1 ]]; then
	(cd "$REPO/bench/tsdbpeer" && go build -o "$W/tsdbpeer" .) || die "go build bench/tsdbpeer failed"
fi
LOAD_START=$(cut -d' ' -f1-3 /proc/loadavg)
log "running: $SERIES series, $DURATION of ingest, $HIST history series, $QUERIES queries per row (in $W, $(stat -f -c %T "$W"))"
mkdir -p "$W/data"
rc=0
"$W/monbench" -dir "$W/data" -series "$SERIES" -duration "$DURATION" -hist "$HIST" -queries "$QUERIES" | tee "$W/monbench.out" || rc=$?
rm -rf "$W/data"
# Lightpath's figures, as monbench printed them.
lp_rate=$(sed -n 's/^  sustained rate *\([0-9]*\) samples\/s.*/\1/p' "$W/monbench.out" | head -1)
lp_bytes=$(sed -n 's/^  raw tier on disk, all *\([0-9.]*\) bytes\/sample.*/\1/p' "$W/monbench.out" | head -1)
lp_cpu=$(sed -n 's/.*, \([0-9.]*\) CPU s per million samples.*/\1/p' "$W/monbench.out" | head -1)
lp_rss=$(sed -n 's/^  memory *\([0-9]*\) MiB peak RSS.*/\1/p' "$W/monbench.out" | head -1)

mkdir -p "$W/push"
"$W/monpush" -dir "$W/push" -series "$SERIES" -duration "$PUSH_DURATION" | tee "$W/monpush.out" || rc=$?
rm -rf "$W/push"
push_rate=$(sed -n 's/^RESULT samples_per_second=\([0-9]*\).*/\1/p' "$W/monpush.out")

if [[ $PEER == 1 ]]; then
	echo
	mkdir -p "$W/peer"
	"$W/tsdbpeer" -dir "$W/peer" -series "$SERIES" -duration "$DURATION" | tee "$W/tsdbpeer.out" || rc=$?
	rm -rf "$W/peer"
	res=$(grep '^RESULT' "$W/tsdbpeer.out" || true)
	p_rate=$(sed -n 's/.*samples_per_second=\([0-9]*\).*/\1/p' <<<"$res")
	p_bytes=$(sed -n 's/.*bytes_per_sample=\([0-9.]*\).*/\1/p' <<<"$res")
	p_cpu=$(sed -n 's/.*cpu_per_million=\([0-9.]*\).*/\1/p' <<<"$res")
	p_rss=$(sed -n 's/.*rss_mib=\([0-9]*\).*/\1/p' <<<"$res")
	if [[ -n $lp_rate && -n $p_rate && -n $lp_bytes && -n $p_bytes ]]; then
		echo
		echo "against the peer: the same $SERIES series and samples, this machine, one after the other"
		printf '  %-40s %16s %16s %10s\n' "" "Lightpath" "Prometheus TSDB" "ratio"
		printf '  %-40s %16s %16s %10s\n' "ingest, samples/s" "$lp_rate" "$p_rate" "$(awk -v a="$lp_rate" -v b="$p_rate" 'BEGIN{printf "%.2f", a/b}')"
		printf '  %-40s %16s %16s %10s\n' "  (log fsynced per push?)" "yes" "no" ""
		printf '  %-40s %16s %16s %10s\n' "bytes/sample on disk (raw / blocks)" "$lp_bytes" "$p_bytes" "$(awk -v a="$p_bytes" -v b="$lp_bytes" 'BEGIN{printf "%.2fx smaller", a/b}')"
		printf '  %-40s %16s %16s %10s\n' "CPU s per million samples" "$lp_cpu" "$p_cpu" "$(awk -v a="$lp_cpu" -v b="$p_cpu" 'BEGIN{printf "%.2f", a/b}')"
		printf '  %-40s %16s %16s %10s\n' "peak RSS, MiB" "$lp_rss" "$p_rss" "$(awk -v a="$lp_rss" -v b="$p_rss" 'BEGIN{printf "%.2f", a/b}')"
		[[ -z $push_rate ]] || printf '  %-40s %16s %16s %10s\n' "through the API (HTTP, JSON), samples/s" "$push_rate" "" "$(awk -v a="$push_rate" 'BEGIN{printf "%s", (a >= 100000 ? "PASS" : "FAIL")}')"
	fi
fi
echo "host: $(nproc) CPUs, $(go version | cut -d' ' -f3), filesystem $(stat -f -c %T "$W"); load average $LOAD_START at the start, $(cut -d' ' -f1-3 /proc/loadavg) at the end"
exit "$rc"
