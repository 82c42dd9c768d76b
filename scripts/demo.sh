#!/usr/bin/env bash
# The demo: the whole system on its embedded default.
#
# As root, the SC|05 bandwidth challenge in miniature: the two-site testbed
# (examples/two-site.yaml) with an agent in every node, a controller on
# SQLite in a temporary directory, and a data node (lightpath serve
# --controller) on each of the four hosts: a1 and a2 serve endpoint site-a,
# b1 and b2 endpoint site-b, each site's data nodes sharing one directory.
# A physicist (user alice) hands over a dataset with a deadline (lightpath
# transfer submit site-a:run site-b:in --deadline +10m): the service lists
# it on a source node, plans it jointly over both node pairs and every
# path (the controller's joint planner, dedicated link first), books one
# reservation per pair's path (held, then committed), and the
# copy runs over both pairs at once, each on its reservation, steered and
# paced by the agents; then every file is verified, and the demo prints the
# booking, the aggregate against what was booked, the bytes each inter-site
# link carried, the service's metrics and a screenshot of the live dashboard
# taken during the job (headless Chromium). The web UI's address is kept up
# until Ctrl-C when standard output is a terminal. Everything is torn down
# at the end, also when interrupted half-way.
#
# Otherwise (not root): what runs on loopback: the controller booking,
# refusing with alternatives and finding slots, and the mover pushing and
# pulling a mixed dataset, verified; it says what it skipped.
set -euo pipefail
cd "$(dirname "$0")/.."
bin=$PWD/bin/lightpath
work=$(mktemp -d /dev/shm/lightpath-demo.XXXXXX 2>/dev/null || mktemp -d)
pid=
cpid=
tbname=
dnpids=()
cleanup() {
	for p in "${dnpids[@]}"; do pkill -P "$p" 2>/dev/null; kill "$p" 2>/dev/null; wait "$p" 2>/dev/null; done || true
	[ -n "$tbname" ] && "$bin" testbed down --name "$tbname" >/dev/null 2>&1 || true
	[ -n "$pid" ] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null || true
	[ -n "$cpid" ] && kill "$cpid" 2>/dev/null && wait "$cpid" 2>/dev/null || true
	rm -rf "$work"
}
trap cleanup EXIT


waitport() { for _ in $(seq 100); do (exec 3<>"/dev/tcp/$1/$2") 2>/dev/null && return 0; sleep 0.1; done; return 1; }

if [ "$(id -u)" -eq 0 ]; then
	cport=$(( 20000 + RANDOM % 20000 ))
	sock="$work/controller.sock"
	echo "== controller on SQLite in $work, topology examples/two-site.yaml, rules examples/rules.yaml"
	"$bin" controller --listen "127.0.0.1:$cport" --listen "unix:$sock" --db "sqlite:$work/controller.db" \
		--topology examples/two-site.yaml --admin-token-file "$work/admin.token" --rules examples/rules.yaml 2>"$work/controller.log" &
	cpid=$!
	waitport 127.0.0.1 "$cport" || { cat "$work/controller.log"; exit 1; }
	export LIGHTPATH_CONTROLLER="unix:$sock" LIGHTPATH_CONTROLLER_TOKEN="$(cat "$work/admin.token")"
	# Agents and data nodes each have a user of their own (role agent).
	"$bin" user add agents --role agent >/dev/null
	"$bin" user token create agents --out "$work/agent.token" >/dev/null
	"$bin" user add datanodes --role agent >/dev/null
	# Which nodes serve an endpoint is the admin's decision; each data
	# node gets a token bound to its node.
	"$bin" endpoint add site-a --site site-a --node a1,a2 >/dev/null
	"$bin" endpoint add site-b --site site-b --node b1,b2 >/dev/null
	for node in a1 a2 b1 b2; do
		"$bin" user token create datanodes --node "$node" --out "$work/datanode-$node.token" >/dev/null
	done
	"$bin" user add alice --role user >/dev/null
	"$bin" user token create alice --out "$work/alice.token" >/dev/null
	tbname=demo$$
	echo "== testbed $tbname with an agent in every node"
	"$bin" testbed up examples/two-site.yaml --name "$tbname" --agents --controller "unix:$sock" --controller-token-file "$work/agent.token"
	echo "== dataset on site-a: four files of 256 MiB of random data and 500 small files"
	mkdir -p "$work/site-a/run/raw" "$work/site-a/run/calib" "$work/site-b"
	for i in 1 2 3 4; do head -c 256M /dev/urandom >"$work/site-a/run/raw/events-$i.bin"; done
	for i in $(seq 1 500); do head -c $(( (RANDOM % 64 + 1) * 1024 )) /dev/urandom >"$work/site-a/run/calib/calib-$i.dat"; done
	echo "== data nodes: lightpath serve --controller in a1, a2 (endpoint site-a) and b1, b2 (endpoint site-b), 600 Mbit/s each at most"
	for n in a1:198.18.1.1:site-a b1:198.18.2.1:site-b a2:198.18.1.2:site-a b2:198.18.2.2:site-b; do
		IFS=: read -r node addr ep <<<"$n"
		"$bin" testbed exec --name "$tbname" "$node" -- "$bin" serve --listen "$addr:7070" --root "$work/$ep" \
			--controller "unix:$sock" --controller-token-file "$work/datanode-$node.token" --node "$node" --endpoint "$ep" \
			--max-rate 600M --transfer-log /dev/null >"$work/serve-$node.log" 2>&1 &
		dnpids+=($!)
	done
	for _ in $(seq 200); do
		[ "$("$bin" endpoint list --json 2>/dev/null | grep -o '"alive":true' | wc -l)" -eq 4 ] && break
		sleep 0.1
	done
	"$bin" endpoint allow site-a --user alice >/dev/null
	"$bin" endpoint allow site-b --user alice >/dev/null
	"$bin" endpoint list | sed 's/^/  /'
	before=$("$bin" testbed status --name "$tbname" --json)
	# The dashboard, photographed while the job runs.
	shot=${LIGHTPATH_ARTIFACTS:-/tmp}/lightpath-demo-dashboard.png
	shotpid=
	if [ -x "$PWD/bin/dashshot" ]; then
		"$PWD/bin/dashshot" -url "http://127.0.0.1:$cport" -token-file "$work/admin.token" -out "$shot" -wait 4s 2>"$work/dashshot.log" &
		shotpid=$!
	fi
	export LIGHTPATH_CONTROLLER_TOKEN="$(cat "$work/alice.token")"
	echo "== alice: lightpath transfer submit site-a:run site-b:in --deadline +10m"
	"$bin" transfer submit site-a:run site-b:in --deadline +10m --json >"$work/submit.json"
	jid=$(sed -n 's/.*"id":"\(j-[0-9a-f]*\)".*/\1/p' "$work/submit.json" | head -1)
	"$bin" transfer status "$jid" | sed 's/^/  /'
	echo "== lightpath transfer wait $jid"
	"$bin" transfer wait "$jid"
	after=$("$bin" testbed status --name "$tbname" --json)
	diff -r "$work/site-a/run" "$work/site-b/in/run" && verified=yes || verified=NO
	"$bin" transfer status "$jid" --json >"$work/status.json"
	python3 - "$work/status.json" "$before" "$after" "$verified" <<'PY'
import json, sys
from datetime import datetime
page = json.loads(open(sys.argv[1]).read().strip().splitlines()[-1])
j = page["job"]
before, after, verified = json.loads(sys.argv[2]), json.loads(sys.argv[3]), sys.argv[4]
def ts(s):
    return datetime.fromisoformat(s.replace("Z", "+00:00")).timestamp()
def moved(st, link, frm):
    for l in st["links"]:
        if l["name"] == link:
            for d in l["directions"]:
                if d["from"] == frm:
                    return d["bytes"]
    return 0
active = ts(j["ended_at"]) - ts(j["started_at"])
booked = sum(p.get("rate_bps") or 0 for p in j.get("pairs") or [])
print("== summary")
print(f"  job {j['id']} {j['state']}: {j['bytes_done']/2**30:.2f} GiB in {j['files_done']} files, "
      f"booked by {j.get('algorithm') or 'no booking'}, before its deadline: {ts(j['ended_at']) < ts(j['deadline'])}")
for p in j.get("pairs") or []:
    print(f"  pair {p['from']} -> {p['to']}: reservation {p.get('reservation') or '-'} at {(p.get('rate_bps') or 0)/1e6:.0f} Mbit/s, "
          f"moved {p['bytes_done']/2**20:.0f} MiB{(' (routed: ' + p['routed'] + ')') if p.get('routed') else ''}")
if booked:
    print(f"  aggregate over both pairs: {j['bytes_done']*8/active/1e6:.0f} Mbit/s while ACTIVE ({active:.1f} s), "
          f"{j['bytes_done']*8/active/booked:.0%} of the {booked/1e6:.0f} Mbit/s booked")
for link in ("dedicated", "wan"):
    print(f"  {link:10s} ra > rb carried {(moved(after, link, 'ra') - moved(before, link, 'ra'))/2**20:9.1f} MiB")
print(f"  verified: every file by the service ({j['files_done']} of {j['files_total']}), the whole tree by diff -r: {verified}")
PY
	moved=$(python3 -c 'import sys, urllib.request
for l in urllib.request.urlopen(sys.argv[1]).read().decode().splitlines():
    if l.startswith("lightpath_service_moved_bytes_total"):
        print(l.split()[-1])' "http://127.0.0.1:$cport/metrics" | head -1 || echo "?")
	echo "== monitoring: lightpath_service_moved_bytes_total $moved on http://127.0.0.1:$cport/metrics (and each link, node and agent on the same scrape)"
	export LIGHTPATH_CONTROLLER_TOKEN="$(cat "$work/admin.token")"
	if [ -n "$shotpid" ]; then
		if wait "$shotpid"; then
			echo "== the dashboard during the job: $shot"
		else
			echo "== no dashboard screenshot: $(tail -1 "$work/dashshot.log")"
		fi
	fi
	if [ -t 1 ]; then
		# The address only while it answers: everything stays up until Ctrl-C.
		link=$(sed -n 's/.*sign in to the web UI.* url="\{0,1\}\([^" ]*\).*/\1/p' "$work/controller.log" | head -1)
		echo "== web UI (live dashboard), up until Ctrl-C: http://127.0.0.1:$cport/"
		[ -n "$link" ] && echo "   sign in once with $link (within 10 minutes of the start),"
		echo "   or paste the token in $work/admin.token"
		trap 'echo; echo "== stopping everything: the web UI at http://127.0.0.1:$cport/ goes with it"; exit 0' INT
		while :; do sleep 3600; done
	fi
	echo "== the web UI ran at http://127.0.0.1:$cport/ during the demo and has stopped with it (run make demo on a terminal to keep it up until Ctrl-C)"
	exit 0
fi
echo "(not root: the testbed, the agents and the reserved copy across them are skipped; what runs on loopback follows)"
cport=$(( 20000 + RANDOM % 20000 ))
echo "== controller: lightpath controller --listen 127.0.0.1:$cport --topology examples/two-site.yaml"
"$bin" controller --listen "127.0.0.1:$cport" --db "sqlite:$work/controller.db" --topology examples/two-site.yaml \
	--admin-token-file "$work/admin.token" 2>"$work/controller.log" &
cpid=$!
for _ in $(seq 50); do [ -s "$work/admin.token" ] && (exec 3<>"/dev/tcp/127.0.0.1/$cport") 2>/dev/null && break; sleep 0.1; done
export LIGHTPATH_CONTROLLER="http://127.0.0.1:$cport" LIGHTPATH_CONTROLLER_TOKEN="$(cat "$work/admin.token")"
echo "== reserve 800 Mbit/s a1 -> b1 and a2 -> b2 from +1m for 1h: both take the dedicated link (circuits first, 1.8 Gbit/s reservable)"
"$bin" reserve create --from a1 --to b1 --bandwidth 800M --start +1m --duration 1h
"$bin" reserve create --from a2 --to b2 --bandwidth 800M --start +1m --duration 1h
echo "== 500 Mbit/s a1 -> b2 in the same hour: 200 Mbit/s are left on the dedicated link, so the routed wan takes it"
"$bin" reserve create --from a1 --to b2 --bandwidth 500M --start +1m --duration 1h
echo "== 1.5 Gbit/s a1 -> b1 in the same hour does not fit: the controller says what would"
"$bin" reserve create --from a1 --to b1 --bandwidth 1.5G --start +1m --duration 1h || true
echo "== find the earliest hour with 1.5 Gbit/s"
"$bin" reserve find --from a1 --to b1 --bandwidth 1.5G --start +1m --duration 1h --earliest
"$bin" reserve list
echo "(web UI at $LIGHTPATH_CONTROLLER/ with the token in $work/admin.token, until the demo ends)"

echo "== dataset in $work/data"
mkdir -p "$work/data/run 42/raw" "$work/data/run 42/calib" "$work/data/empty dir" "$work/root" "$work/back"
head -c 512M /dev/urandom >"$work/data/run 42/raw/events.bin"
for i in $(seq 1 2000); do
	head -c $(( (RANDOM % 64 + 1) * 1024 )) /dev/urandom >"$work/data/run 42/calib/constants-$i.dat"
done
truncate -s 1G "$work/data/sparse.img"
printf 'header' | dd of="$work/data/sparse.img" conv=notrunc status=none
echo "Größe und Maß" >"$work/data/run 42/näme with spaces ✓.txt"
touch "$work/data/empty file"
ln -s "raw/events.bin" "$work/data/run 42/latest"
du -sh --apparent-size "$work/data"

port=$(( 20000 + RANDOM % 20000 ))
"$bin" serve --listen "127.0.0.1:$port" --root "$work/root" --transfer-log "$work/transfer.log" 2>"$work/serve.log" &
pid=$!
for _ in $(seq 50); do (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && break; sleep 0.1; done

echo "== push: lightpath cp -r data lp://127.0.0.1:$port/"
"$bin" cp -r "$work/data" "lp://127.0.0.1:$port/"
echo "== pull: lightpath cp -r lp://127.0.0.1:$port/data back/"
"$bin" cp -r "lp://127.0.0.1:$port/data" "$work/back/"

echo "== verify"
diff -r --no-dereference "$work/data" "$work/root/data"
diff -r --no-dereference "$work/data" "$work/back/data"
echo "both copies are identical to the original ($(wc -l <"$work/transfer.log") lines in the server's transfer log)"
echo "(the demo is over: its controller and web UI stop now)"
