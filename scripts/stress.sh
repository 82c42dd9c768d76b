#!/usr/bin/env bash
# make test-stress: the end-to-end and root suites, N times (default 1),
# while stress-ng keeps one core busy, as on a shared machine. Every
# failure is printed with its test; the last lines say which runs failed.
set -euo pipefail
cd "$(dirname "$0")/.."
n=${1:-1}
cpus=${STRESS_CPUS:-1}
if ! command -v stress-ng >/dev/null; then
	echo "test-stress: stress-ng is missing (make deps installs it as root)" >&2
	exit 1
fi
# The suites that run real processes, namespaces and kernel state: test/e2e,
# test/docs and every package whose tests need root.
mapfile -t pkgs < <(go list -f '{{.ImportPath}} {{join .TestImports " "}} {{join .XTestImports " "}}' ./... |
	awk '$1 ~ /\/test\/(e2e|docs)$/ || / github.com\/lightpath\/lightpath\/internal\/(roottest|cc\/cctest)( |$)/ {print $1}')
echo "test-stress: ${#pkgs[@]} packages, $n run(s), beside stress-ng --cpu $cpus"
stress-ng --cpu "$cpus" --timeout 0 --quiet &
stress=$!
trap 'kill $stress 2>/dev/null; wait $stress 2>/dev/null || true' EXIT
failed=()
for i in $(seq 1 "$n"); do
	echo "== test-stress run $i of $n ($(date -u +%H:%M:%S))"
	start=$SECONDS
	if LIGHTPATH_TEST_LOG=${TMPDIR:-/tmp}/lightpath-stress-$i.json scripts/gotest.sh "${pkgs[@]}"; then
		echo "== run $i passed in $((SECONDS - start)) s"
	else
		echo "== run $i FAILED in $((SECONDS - start)) s"
		failed+=("$i")
	fi
done
if ((${#failed[@]})); then
	echo "test-stress: runs ${failed[*]} of $n failed"
	exit 1
fi
echo "test-stress: all $n runs passed"
