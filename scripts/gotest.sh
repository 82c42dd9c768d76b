#!/usr/bin/env bash
# Runs go test with the race detector on the packages given (default ./...)
# and prints, through scripts/testreport, a line per package, the whole
# output of every failure, then the failures in one list, the slowest
# tests and each package's time. The raw `go test -json` stream is kept in
# $LIGHTPATH_TEST_LOG (default: a file under ${TMPDIR:-/tmp}, named at the
# end) for a closer look. Extra go test flags come from $GOTESTFLAGS;
# $TESTPARALLEL (default 4) is how many tests of one package that call
# t.Parallel run at once (the e2e tests mostly wait on emulated links and
# agents' rounds, not on the CPU).
#
# The longest packages (test/e2e, then test/docs) start first, so that the
# others run beside them instead of before them: go test starts packages
# in the order it is given them, two at a time on two cores.
set -euo pipefail
cd "$(dirname "$0")/.."
(($#)) || set -- ./...
go build -o bin/testreport ./scripts/testreport
log=${LIGHTPATH_TEST_LOG:-$(mktemp "${TMPDIR:-/tmp}/lightpath-test-XXXXXX.json")}
mapfile -t pkgs < <(go list "$@" | awk '/\/test\/e2e$/ { print 0, $0; next } /\/test\/docs$/ { print 1, $0; next } { print 2, $0 }' | sort -s -k1,1n | cut -d" " -f2)
# shellcheck disable=SC2086 # GOTESTFLAGS is a list of flags
go test -race -count=1 -timeout "${TESTTIMEOUT:-30m}" -parallel "${TESTPARALLEL:-4}" ${GOTESTFLAGS:-} -json "${pkgs[@]}" 2>&1 | tee "$log" | bin/testreport -slowest "${SLOWEST:-20}"
echo "(go test -json output: $log)"
