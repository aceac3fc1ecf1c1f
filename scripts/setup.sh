#!/usr/bin/env bash
# Set up everything Stash needs on a fresh Debian machine: system packages (when root) and a
# virtual environment in .venv with the pinned Python packages. Safe to run again.
set -euo pipefail
cd "$(dirname "$0")/.."

with_system_packages="${1:-}"
apt_pid=""
if [ "$with_system_packages" = "--system" ] && [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null; then
    needed=()
    command -v sshd >/dev/null || [ -x /usr/sbin/sshd ] || needed+=(openssh-server)
    command -v ssh >/dev/null || needed+=(openssh-client)
    command -v ip >/dev/null || needed+=(iproute2)
    command -v chromium >/dev/null || needed+=(chromium)
    if [ ${#needed[@]} -gt 0 ]; then
        echo "installing system packages: ${needed[*]}"
        # beside the Python packages below: neither needs the other, and both mostly wait on downloads
        (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${needed[@]}" >/dev/null) &
        apt_pid=$!
    fi
fi

if [ ! -x .venv/bin/python ]; then
    python3 -m venv .venv
fi
# Byte-compiled by compileall on every core afterwards, not file by file by pip (some 20 s less on 2 cores);
# the few files of the packages' own tests that are not Python 3 are skipped (-qq, status ignored).
.venv/bin/pip install -q --no-compile -r requirements-dev.txt
.venv/bin/pip install -q --no-deps -e .
compiled=".venv/compiled-$(cat requirements.txt requirements-dev.txt | sha256sum | cut -c1-16)"
if [ ! -e "$compiled" ]; then  # once per set of pins: checking every file again costs some 7 s
    site_packages=$(.venv/bin/python -c 'import sysconfig; print(sysconfig.get_path("purelib"))')
    .venv/bin/python -m compileall -qq -j 0 "$site_packages" || true
    touch "$compiled"
fi
if [ -n "$apt_pid" ]; then
    wait "$apt_pid" || { echo "installing system packages failed" >&2; exit 1; }
fi
