#!/usr/bin/env bash
# The demo, for now: a server on loopback with a temporary root, a mixed
# dataset pushed to it with cp and pulled back, both copies verified byte
# for byte against the original, the summaries printed, everything removed.
set -euo pipefail
cd "$(dirname "$0")/.."
bin=$PWD/bin/lightpath
work=$(mktemp -d /dev/shm/lightpath-demo.XXXXXX 2>/dev/null || mktemp -d)
pid=
cleanup() {
	[ -n "$pid" ] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null || true
	rm -rf "$work"
}
trap cleanup EXIT

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
