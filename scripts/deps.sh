#!/usr/bin/env bash
# Installs the Debian packages the tests and the demo use, only when missing.
set -euo pipefail
need=()
command -v setpriv >/dev/null || need+=(util-linux)
command -v mkfs.ext4 >/dev/null || need+=(e2fsprogs)
# The testbed's tests: ping (iputils-ping), ip and ss (iproute2), pgrep (procps).
command -v ping >/dev/null || need+=(iputils-ping)
command -v ip >/dev/null || need+=(iproute2)
command -v ss >/dev/null || need+=(iproute2)
command -v pgrep >/dev/null || need+=(procps)
# FAST TCP's testbed test (test/e2e/fast_test.go) and bench/fast.sh: iperf3.
command -v iperf3 >/dev/null || need+=(iperf3)
# make test-stress keeps a core busy with stress-ng while the suites run.
command -v stress-ng >/dev/null || need+=(stress-ng)
# lightpath run's tests (test/e2e/run_test.go) steer xrdcp and globus-url-copy.
command -v xrdcp >/dev/null || need+=(xrootd-client)
command -v xrootd >/dev/null || need+=(xrootd-server)
command -v globus-url-copy >/dev/null || need+=(globus-gass-copy-progs)
command -v globus-gridftp-server >/dev/null || need+=(globus-gridftp-server-progs)
command -v pg_ctlcluster >/dev/null || need+=(postgresql) # the store's PostgreSQL tests (scripts/postgres.sh)
# The web UI's end-to-end test drives a headless Chromium (test/e2e/webui_test.go).
command -v chromium >/dev/null || command -v chromium-browser >/dev/null ||
	command -v google-chrome >/dev/null || need+=(chromium)
command -v python3 >/dev/null || need+=(python3) # the demo's summary
# The docs' examples (test/docs) use jq and curl, as their readers do.
command -v jq >/dev/null || need+=(jq)
command -v curl >/dev/null || need+=(curl)
if ((${#need[@]})); then
	if [ "$(id -u)" -ne 0 ]; then
		echo "deps: missing ${need[*]}; run as root or install them" >&2
		exit 0
	fi
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq && apt-get install -y -qq "${need[@]}" >/dev/null
fi

# promtool checks the controller's /metrics (internal/api's TestPromtool).
# Only the binary is taken from Debian's prometheus package: installing the
# package would also start a Prometheus server.
if ! command -v promtool >/dev/null && [ ! -x /usr/local/lib/lightpath/promtool ]; then
	if [ "$(id -u)" -eq 0 ]; then
		tmp=$(mktemp -d)
		if (cd "$tmp" && { apt-get download -qq prometheus >/dev/null 2>&1 ||
			{ apt-get update -qq && apt-get download -qq prometheus >/dev/null 2>&1; }; } &&
			dpkg-deb -x prometheus_*.deb x && install -D -m 0755 x/usr/bin/promtool /usr/local/lib/lightpath/promtool); then
			:
		else
			echo "deps: could not fetch promtool (Debian package prometheus); its test will skip" >&2
		fi
		rm -rf "$tmp"
	else
		echo "deps: promtool missing; run as root to fetch it" >&2
	fi
fi
