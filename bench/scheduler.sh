#!/usr/bin/env bash
# scheduler.sh: the scheduler and the store, measured directly on the
# workload of issue 4: a generated topology of 1,000 nodes and 3,000 links
# with 100,000 existing bookings (reserve.GenerateWorkload). It does NOT go
# through the controller's HTTP API, which does not exist yet; the
# controller issue will extend this script to measure through it.
#
#   bench/scheduler.sh [--json]
#
# It builds bench/schedbench and runs it twice:
#   SQLite      a database file on /dev/shm: every query kind QUERIES times
#               (p50, p99, max latency, share that found nothing), then LOAD
#               existing bookings stored (1,000 per transaction) and CREATES
#               creates from 8 goroutines, each one store.Tx running
#               admission on the in-memory schedule (FixedSlot, or Admit on
#               a given path), inserting the reservation and adding it to
#               the schedule.
#   PostgreSQL  the same load and creates against a throwaway cluster
#               (scripts/postgres.sh, fsync off); "unavailable (why)" when
#               not root or PostgreSQL is not installed.
# The in-memory schedule always holds all 100,000 bookings; LOAD only says
# how many of them are also rows in the database the creates write to.
#
# Targets (issue 4): fixed-slot p99 < 10 ms, earliest-start p99 < 100 ms
# (fixed path and any path), >= 500 creates/s on SQLite; each PASS or FAIL.
#
# Environment: QUERIES (1000 per kind), CREATES (2000), LOAD (100000, at
# most 100000; fewer makes a quicker run), SEED
# (1), JSON=1 (same as --json: NDJSON on stdout, the table on stderr).
# Exit 0 when the measurements completed (whatever the targets), 2 on the
# script's own errors.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$HERE/.." && pwd)
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$HERE/lib.sh"

QUERIES=${QUERIES:-1000}
CREATES=${CREATES:-2000}
LOAD=${LOAD:-100000}
SEED=${SEED:-1}
JSON=${JSON:-0}
ONLY=

parse_args "$@"
[[ -z $ONLY ]] || die "--only is not supported here"
[[ $QUERIES =~ ^[0-9]+$ ]] || die "QUERIES must be a whole number, not '$QUERIES'"
[[ $CREATES =~ ^[0-9]+$ ]] || die "CREATES must be a whole number, not '$CREATES'"
if ! [[ $LOAD =~ ^[0-9]+$ ]] || ((LOAD > 100000)); then die "LOAD must be a whole number up to 100000, not '$LOAD'"; fi
[[ $SEED =~ ^-?[0-9]+$ ]] || die "SEED must be an integer, not '$SEED'"

PATH=$PATH:/usr/local/go/bin
[[ $(stat -f -c %T /dev/shm 2>/dev/null) == tmpfs ]] || die "/dev/shm is not a tmpfs"
W=$(mktemp -d /dev/shm/lpsched.XXXXXX) || die "cannot create a work directory in /dev/shm"
# mktemp makes it 0700; the postgres user must get through it.
chmod 755 "$W"
PGDIR=
cleanup() {
	local rc=$?
	trap - EXIT INT TERM
	if [[ -n $PGDIR ]]; then "$REPO/scripts/postgres.sh" stop "$PGDIR" >/dev/null 2>&1 || true; fi
	rm -rf -- "$W"
	exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

log "building schedbench"
(cd "$REPO" && go build -o "$W/schedbench" ./bench/schedbench) || die "go build ./bench/schedbench failed"

args=(-creates "$CREATES" -load "$LOAD" -seed "$SEED" -json)

SQLITE_ERR=
log "SQLite: $QUERIES queries per kind, $LOAD bookings loaded, $CREATES creates"
timed "$W/sqlite.json" 1800 "$W/schedbench" -queries "$QUERIES" -db "sqlite:$W/bench.db" "${args[@]}" ||
	SQLITE_ERR=$RUN_ERROR
cat "$W/sqlite.json.err" >&2 || true

PG_ERR=
if [[ $(id -u) -ne 0 ]]; then
	PG_ERR="not root"
elif ! ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1; then
	PG_ERR="PostgreSQL not installed"
else
	PGDIR=$W/pg
	if PGURL=$("$REPO/scripts/postgres.sh" start "$PGDIR" 2>"$W/pg-start.err"); then
		log "PostgreSQL: $LOAD bookings loaded, $CREATES creates"
		timed "$W/pg.json" 1800 "$W/schedbench" -queries 0 -db "$PGURL" "${args[@]}" || PG_ERR=$RUN_ERROR
		cat "$W/pg.json.err" >&2 || true
	else
		PG_ERR="start failed: $(last_line "$W/pg-start.err")"
	fi
fi

# The table, with the targets judged; NDJSON of both runs first with --json.
if [[ $JSON == 1 ]]; then
	[[ -z $SQLITE_ERR ]] && cat "$W/sqlite.json"
	[[ -z $PG_ERR ]] && cat "$W/pg.json"
fi
python3 - "$W/sqlite.json" "$SQLITE_ERR" "$W/pg.json" "$PG_ERR" "$JSON" <<'PY' >&"$([[ $JSON == 1 ]] && echo 2 || echo 1)"
import json, sys
sq_file, sq_err, pg_file, pg_err, as_json = sys.argv[1:6]
def rows(f, err):
    if err:
        return None
    return [json.loads(l) for l in open(f) if l.strip()]
sq, pg = rows(sq_file, sq_err), rows(pg_file, pg_err)
def fmt(v, f="%.3f"):
    return "-" if v is None else f % v
summ = (sq or [{}])[-1]
print("scheduler benchmark: %s nodes, %s links, %s bookings in the schedule (seed %s); "
      "scheduler and store measured directly, not through the controller's HTTP API"
      % (summ.get("nodes", 1000), summ.get("links", 3000), summ.get("bookings", 100000), summ.get("seed", "?")))
print()
if sq is None:
    print("queries: unavailable (%s)" % sq_err)
else:
    gen = [r for r in sq if r["row"] == "generate"][0]
    print("workload generated in %.1f s" % gen["seconds"])
    print()
    print("%-26s %6s %9s %9s %9s %7s  %s" % ("query", "n", "p50 ms", "p99 ms", "max ms", "none %", "algorithm"))
    for r in sq:
        if r["row"] == "query":
            print("%-26s %6d %9s %9s %9s %7s  %s" % (r["kind"], r["n"], fmt(r.get("p50_ms")), fmt(r.get("p99_ms")),
                  fmt(r.get("max_ms")), fmt(r.get("none_pct"), "%.1f"), r.get("algorithm", "")))
print()
print("%-12s %-44s %-44s" % ("store", "SQLite (/dev/shm)", "PostgreSQL (fsync off)"))
def col(rs, err, key):
    if rs is None:
        return "unavailable (%s)" % err
    load = [r for r in rs if r["row"] == "load"]
    cr = [r for r in rs if r["row"] == "creates"]
    if key == "load":
        return ("%d rows in %.1f s (%.0f/s)" % (load[0]["n"], load[0]["seconds"], load[0]["per_s"])) if load else "-"
    if not cr:
        return "-"
    c = cr[0]
    if key == "creates":
        return "%.0f/s (%d accepted, %d rejected)" % (c["per_s"], c.get("accepted", 0), c.get("rejected", 0))
    return "p50 %.1f ms, p99 %.1f ms, max %.1f ms" % (c["p50_ms"], c["p99_ms"], c["max_ms"])
for key, label in (("load", "load"), ("creates", "creates"), ("latency", "create lat.")):
    print("%-12s %-44s %-44s" % (label, col(sq, sq_err, key), col(pg, pg_err, key)))
print("(creates from %s goroutines, each one store.Tx: admission on the schedule, insert, add)" %
      next((r.get("workers") for r in (sq or pg or []) if r["row"] == "creates"), "?"))
print()
print("targets")
def target(name, value, ok, unit):
    if value is None:
        print("  %-40s %-14s UNAVAILABLE" % (name, "-"))
    else:
        print("  %-40s %-14s %s" % (name, unit % value, "PASS" if ok(value) else "FAIL"))
target("fixed-slot p99 < 10 ms", summ.get("fixed_slot_p99_ms"), lambda v: v < 10, "%.3f ms")
target("earliest-start (fixed path) p99 < 100 ms", summ.get("earliest_start_path_p99_ms"), lambda v: v < 100, "%.3f ms")
target("earliest-start (any path) p99 < 100 ms", summ.get("earliest_start_any_p99_ms"), lambda v: v < 100, "%.3f ms")
target("creates on SQLite >= 500/s", summ.get("creates_per_s"), lambda v: v >= 500, "%.0f/s")
PY
