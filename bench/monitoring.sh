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
# Targets (issue 6): ingest >= 100,000 samples/s, <= 2 bytes per sample on
# disk in the raw tier (sealed and open chunks together), query p99 <
# 100 ms. Each PASS or FAIL. The workload's generator is the package
# bench/monbench/workload, for peer benchmarks on the same samples.
#
# Environment: DURATION (5m; a shorter value such as 30s for a quick
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

log "building monbench"
(cd "$REPO" && go build -o "$W/monbench" ./bench/monbench) || die "go build ./bench/monbench failed"
LOAD_START=$(cut -d' ' -f1-3 /proc/loadavg)
log "running: $SERIES series, $DURATION of ingest, $HIST history series, $QUERIES queries per row (in $W, $(stat -f -c %T "$W"))"
mkdir -p "$W/data"
rc=0
"$W/monbench" -dir "$W/data" -series "$SERIES" -duration "$DURATION" -hist "$HIST" -queries "$QUERIES" || rc=$?
echo "host: $(nproc) CPUs, $(go version | cut -d' ' -f3), filesystem $(stat -f -c %T "$W"); load average $LOAD_START at the start, $(cut -d' ' -f1-3 /proc/loadavg) at the end"
exit "$rc"
