#!/usr/bin/env bash
# scheduler.sh: the scheduler of issue 4 on its workload, a generated
# topology of 1,000 nodes and 3,000 links with 100,000 existing bookings
# (reserve.GenerateWorkload), measured through the controller's real HTTP
# API and, for comparison, directly on the layers under it.
#
#   bench/scheduler.sh [--json]
#
# It builds bench/schedbench and runs it four times, each on a fresh
# database (a file on /dev/shm for SQLite; for PostgreSQL a throwaway
# cluster, scripts/postgres.sh, fsync off, with one database per run;
# "unavailable (why)" when not root or PostgreSQL is not installed):
#   api     (SQLite, PostgreSQL) the 100,000 bookings stored as RESERVED
#           reservations (1,000 per transaction); controller.Open on them,
#           timed (start-up: every live reservation restored and booked);
#           api.NewServer served on 127.0.0.1 and, from a plain net/http
#           client with keep-alive and a user's bearer token, QUERIES
#           POST /api/v1/find per mode one after the other (p50, p99, max of
#           the round trip, and the share answered 409: nothing fits), then
#           CREATES POST /api/v1/reservations from 8 concurrent clients,
#           each with its own idempotency key (creates/s, accepted and
#           refused). Any answer but 2xx or 409 fails the run. Then the
#           heartbeat row (issue 14): an agent on each of the 1,000 nodes,
#           each with a token bound to its node and alive from the start
#           (its lease in the store before the controller opens), sends
#           POST /api/v1/agents/{node}/heartbeat every 2 s for
#           HEARTBEAT_ROUNDS rounds (p50, p99 of the round trip; the
#           process's CPU time per heartbeat, getrusage over the row; and
#           the rate reached against the 500/s asked).
#   direct  (SQLite, PostgreSQL; informational) every query kind of
#           internal/reserve QUERIES times on the in-memory schedule (SQLite
#           run only), LOAD bookings stored, and CREATES creates from 8
#           goroutines, each one store.Tx running admission on the schedule,
#           inserting the reservation and adding it to the schedule: what
#           the controller costs on top shows against these.
#
# Targets (issue 4), judged on the api rows: fixed-slot p99 < 10 ms and
# earliest-start p99 < 100 ms (fixed path and any path), on every store
# measured; >= 500 creates/s on SQLite. Each PASS or FAIL.
#
# Environment: QUERIES (1000 per kind), CREATES (2000), HEARTBEAT_ROUNDS
# (5; 0 skips the heartbeat row), LOAD (100000, at
# most 100000; direct runs only, the api runs always store all 100,000),
# SEED (1), JSON=1 (same as --json: NDJSON of every run on stdout, the
# table on stderr).
# Exit 0 when the measurements completed (whatever the targets), 2 on the
# script's own errors.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$HERE/.." && pwd)
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$HERE/lib.sh"

QUERIES=${QUERIES:-1000}
CREATES=${CREATES:-2000}
HEARTBEAT_ROUNDS=${HEARTBEAT_ROUNDS:-5}
LOAD=${LOAD:-100000}
SEED=${SEED:-1}
JSON=${JSON:-0}
ONLY=

parse_args "$@"
[[ -z $ONLY ]] || die "--only is not supported here"
[[ $QUERIES =~ ^[0-9]+$ ]] || die "QUERIES must be a whole number, not '$QUERIES'"
[[ $CREATES =~ ^[0-9]+$ ]] || die "CREATES must be a whole number, not '$CREATES'"
[[ $HEARTBEAT_ROUNDS =~ ^[0-9]+$ ]] || die "HEARTBEAT_ROUNDS must be a whole number, not '$HEARTBEAT_ROUNDS'"
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

args=(-creates "$CREATES" -seed "$SEED" -json)
# What else the host was doing shows in latencies: say so in the table.
LOAD_START=$(cut -d' ' -f1-3 /proc/loadavg)

# bench NAME ARG... runs schedbench with its NDJSON in $W/NAME.json and its
# progress passed on to stderr; ERR[NAME] is empty, or why it failed.
declare -A ERR=()
bench() {
	local name=$1
	shift
	ERR[$name]=
	timed "$W/$name.json" 1800 "$W/schedbench" "$@" "${args[@]}" || ERR[$name]=$RUN_ERROR
	cat "$W/$name.json.err" >&2 || true
}

log "SQLite, api: 100000 reservations, controller start-up, $QUERIES finds per mode, $CREATES creates, $HEARTBEAT_ROUNDS rounds of 1000 heartbeats"
bench sqlite-api -api -queries "$QUERIES" -heartbeat-rounds "$HEARTBEAT_ROUNDS" -db "sqlite:$W/api.db"
rm -f -- "$W"/api.db*
log "SQLite, direct: $QUERIES queries per kind, $LOAD bookings loaded, $CREATES creates"
bench sqlite-direct -queries "$QUERIES" -load "$LOAD" -db "sqlite:$W/direct.db"
rm -f -- "$W"/direct.db*

PG_ERR=
if [[ $(id -u) -ne 0 ]]; then
	PG_ERR="not root"
elif ! ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1; then
	PG_ERR="PostgreSQL not installed"
else
	PGDIR=$W/pg
	if PGURL=$("$REPO/scripts/postgres.sh" start "$PGDIR" 2>"$W/pg-start.err"); then
		# A second database for the api run: both runs store the same
		# bookings under the same IDs, each wants an empty database.
		pgbins=(/usr/lib/postgresql/*/bin)
		PGBIN=$(printf '%s\n' "${pgbins[@]}" | sort -V | tail -n 1)
		[[ $PGURL =~ port=([0-9]+) ]] || die "no port in the URL postgres.sh printed: $PGURL"
		if runuser -u postgres -- "$PGBIN/psql" -h "$PGDIR" -p "${BASH_REMATCH[1]}" -U postgres -d postgres -qAt \
			-c 'CREATE DATABASE lpapi' >"$W/pg-createdb.err" 2>&1; then
			log "PostgreSQL, api: 100000 reservations, controller start-up, $QUERIES finds per mode, $CREATES creates, $HEARTBEAT_ROUNDS rounds of 1000 heartbeats"
			bench pg-api -api -queries "$QUERIES" -heartbeat-rounds "$HEARTBEAT_ROUNDS" -db "${PGURL/\/lightpath\?//lpapi?}"
		else
			ERR[pg-api]="create database failed: $(last_line "$W/pg-createdb.err")"
		fi
		log "PostgreSQL, direct: $LOAD bookings loaded, $CREATES creates"
		bench pg-direct -queries 0 -load "$LOAD" -db "$PGURL"
	else
		PG_ERR="start failed: $(last_line "$W/pg-start.err")"
	fi
fi
if [[ -n $PG_ERR ]]; then ERR[pg-api]=$PG_ERR ERR[pg-direct]=$PG_ERR; fi

# The table, with the targets judged; NDJSON of every run first with --json.
runs=(sqlite-api pg-api sqlite-direct pg-direct)
if [[ $JSON == 1 ]]; then
	for r in "${runs[@]}"; do
		if [[ -z ${ERR[$r]} ]]; then cat "$W/$r.json"; fi
	done
fi
targs=()
for r in "${runs[@]}"; do targs+=("$W/$r.json" "${ERR[$r]}"); done
targs+=("$(nproc) CPUs, $(go version | cut -d' ' -f3); load average $LOAD_START at the start, $(cut -d' ' -f1-3 /proc/loadavg) at the end")
python3 - "${targs[@]}" <<'PY' >&"$([[ $JSON == 1 ]] && echo 2 || echo 1)"
import json, sys
a = sys.argv[1:]
def rows(f, err):
    if err:
        return None
    return [json.loads(l) for l in open(f) if l.strip()]
sq_api, pg_api, sq_dir, pg_dir = [rows(a[i], a[i + 1]) for i in range(0, 8, 2)]
err = {name: a[i + 1] for name, i in (("sq_api", 0), ("pg_api", 2), ("sq_dir", 4), ("pg_dir", 6))}
def fmt(v, f="%.3f"):
    return "-" if v is None else f % v
def summ(rs):
    return rs[-1] if rs else {}
first = next((r for r in (sq_api, sq_dir, pg_api, pg_dir) if r), None)
s0 = summ(first)
print("scheduler benchmark: %s nodes, %s links, %s bookings (seed %s); "
      "\"api\" rows through the controller's HTTP API, \"direct\" rows on the scheduler and the store alone"
      % (s0.get("nodes", 1000), s0.get("links", 3000), s0.get("bookings", 100000), s0.get("seed", "?")))
print("host: %s" % a[8])
if first:
    gen = [r for r in first if r["row"] == "generate"][0]
    print("workload generated in %.1f s" % gen["seconds"])
print()

def find_rows(rs, store):
    return [(store, r) for r in (rs or []) if r["row"] == "api-find"]
print("api find: POST /api/v1/find, one request at a time on one keep-alive connection, round trip timed")
print("%-32s %-10s %6s %9s %9s %9s %7s  %s" % ("mode", "store", "n", "p50 ms", "p99 ms", "max ms", "409 %", "algorithm"))
fr = find_rows(sq_api, "sqlite") + find_rows(pg_api, "postgres")
order = []
for _, r in fr:
    if r["kind"] not in order:
        order.append(r["kind"])
for k in order:
    for store, r in fr:
        if r["kind"] == k:
            print("%-32s %-10s %6d %9s %9s %9s %7s  %s" % ("api " + k, store, r["n"], fmt(r.get("p50_ms")), fmt(r.get("p99_ms")),
                  fmt(r.get("max_ms")), fmt(r.get("none_pct"), "%.1f"), r.get("algorithm", "")))
for name, store in (("sq_api", "sqlite"), ("pg_api", "postgres")):
    if err[name]:
        print("%-32s %-10s unavailable (%s)" % ("api find", store, err[name]))
print()

print("direct queries: the same questions asked of internal/reserve in process (informational)")
if sq_dir is None:
    print("direct queries: unavailable (%s)" % err["sq_dir"])
else:
    print("%-32s %-10s %6s %9s %9s %9s %7s  %s" % ("query", "", "n", "p50 ms", "p99 ms", "max ms", "none %", "algorithm"))
    for r in sq_dir:
        if r["row"] == "query":
            print("%-32s %-10s %6d %9s %9s %9s %7s  %s" % ("direct " + r["kind"], "", r["n"], fmt(r.get("p50_ms")), fmt(r.get("p99_ms")),
                  fmt(r.get("max_ms")), fmt(r.get("none_pct"), "%.1f"), r.get("algorithm", "")))
print()

print("%-16s %-46s %-46s" % ("store", "SQLite (/dev/shm)", "PostgreSQL (fsync off)"))
def one(rs, kind):
    x = [r for r in (rs or []) if r["row"] == kind]
    return x[0] if x else None
def col(rs, e, key):
    if rs is None:
        return "unavailable (%s)" % e
    if key in ("api-load", "load"):
        r = one(rs, key)
        return ("%d rows in %.1f s (%.0f/s)" % (r["n"], r["seconds"], r["per_s"])) if r else "-"
    if key == "api-startup":
        r = one(rs, key)
        return ("%.1f s (%d live reservations)" % (r["seconds"], r["n"])) if r else "-"
    r = one(rs, key.split(":")[0])
    if r is None:
        return "-"
    if key.endswith(":lat"):
        return "p50 %.1f ms, p99 %.1f ms, max %.1f ms" % (r["p50_ms"], r["p99_ms"], r["max_ms"])
    refused = "refused" if key.startswith("api") else "rejected"
    return "%.0f/s (%d accepted, %d %s)" % (r["per_s"], r.get("accepted", 0), r.get("rejected", 0), refused)
for key, label, a_, b_ in (
        ("api-load", "api load", sq_api, pg_api), ("api-startup", "api start-up", sq_api, pg_api),
        ("api-creates", "api creates", sq_api, pg_api), ("api-creates:lat", "api create lat.", sq_api, pg_api),
        ("load", "direct load", sq_dir, pg_dir), ("creates", "direct creates", sq_dir, pg_dir),
        ("creates:lat", "direct cr. lat.", sq_dir, pg_dir)):
    ea = err["sq_api"] if a_ is sq_api else err["sq_dir"]
    eb = err["pg_api"] if b_ is pg_api else err["pg_dir"]
    print("%-16s %-46s %-46s" % (label, col(a_, ea, key), col(b_, eb, key)))
notes = ["%s %s" % (store, r["note"]) for store, rs in (("sqlite", sq_api), ("postgres", pg_api))
         for r in (rs or []) if r["row"] == "api-creates" and r.get("note")]
workers = next((r.get("workers") for r in (sq_api or pg_api or sq_dir or pg_dir or []) if r["row"] in ("api-creates", "creates")), "?")
print("(api creates: POST /api/v1/reservations from %s HTTP clients, each request with its own idempotency key;"
      % workers)
print(" refused = answered 409%s;" % ((" (" + "; ".join(notes) + ")") if notes else ""))
print(" api start-up: controller.Open restoring every live reservation; direct creates: %s goroutines, each one store.Tx)" % workers)
print()

print("api heartbeat: 1,000 agents, each with a token bound to its node, POST /api/v1/agents/{node}/heartbeat every 2 s")
print("%-16s %8s %9s %9s %9s %12s %9s  %s" % ("store", "n", "p50 ms", "p99 ms", "max ms", "CPU ms each", "per s", "note"))
for name, store, rs in (("sq_api", "sqlite", sq_api), ("pg_api", "postgres", pg_api)):
    if rs is None:
        print("%-16s unavailable (%s)" % (store, err[name]))
        continue
    r = one(rs, "api-heartbeat")
    if r is None:
        print("%-16s -" % store)
        continue
    print("%-16s %8d %9s %9s %9s %12s %9s  %s" % (store, r["n"], fmt(r.get("p50_ms")), fmt(r.get("p99_ms")), fmt(r.get("max_ms")),
          fmt(r.get("cpu_ms")), fmt(r.get("per_s"), "%.0f"), r.get("note", "")))
print()

print("targets (judged on the api rows)")
def target(name, vals, ok, unit):
    avail = [(s, v) for s, v in vals if v is not None]
    if not avail:
        print("  %-44s %-38s UNAVAILABLE" % (name, "-"))
        return
    shown = ", ".join("%s %s" % (s, unit % v) for s, v in avail)
    print("  %-44s %-38s %s" % (name, shown, "PASS" if all(ok(v) for _, v in avail) else "FAIL"))
def both(key):
    return [("sqlite", summ(sq_api).get(key)), ("postgres", summ(pg_api).get(key))]
target("fixed-slot p99 < 10 ms", both("fixed_slot_p99_ms"), lambda v: v < 10, "%.3f ms")
target("earliest-start (fixed path) p99 < 100 ms", both("earliest_start_path_p99_ms"), lambda v: v < 100, "%.3f ms")
target("earliest-start (any path) p99 < 100 ms", both("earliest_start_any_p99_ms"), lambda v: v < 100, "%.3f ms")
target("creates on SQLite >= 500/s", [("sqlite", summ(sq_api).get("creates_per_s"))], lambda v: v >= 500, "%.0f/s")
d = summ(sq_dir)
if d:
    print("  direct, informational: fixed-slot p99 %s ms, earliest-start p99 %s ms (fixed path), %s ms (any path), creates on SQLite %s/s"
          % (fmt(d.get("fixed_slot_p99_ms")), fmt(d.get("earliest_start_path_p99_ms")), fmt(d.get("earliest_start_any_p99_ms")),
             fmt(d.get("creates_per_s"), "%.0f")))
PY
