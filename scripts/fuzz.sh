#!/usr/bin/env bash
# Runs every fuzz target for a short while (CI) or as long as asked.
set -euo pipefail
t=${1:-10s}
cd "$(dirname "$0")/.."
for pkg in $(go list ./...); do
	dir=$(go list -f '{{.Dir}}' "$pkg")
	for fn in $(grep -ho '^func Fuzz[A-Za-z0-9_]*' "$dir"/*_test.go 2>/dev/null | sed 's/^func //'); do
		echo "fuzz $pkg $fn ($t)"
		if ! out=$(go test -run '^$' -fuzz "^$fn\$" -fuzztime "$t" "$pkg" 2>&1); then
			echo "$out"
			exit 1
		fi
	done
done
