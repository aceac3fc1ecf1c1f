#!/usr/bin/env bash
# Set up everything Stash needs on a fresh Debian machine: system packages (when root) and a
# virtual environment in .venv with the pinned Python packages. Safe to run again.
set -euo pipefail
cd "$(dirname "$0")/.."

with_system_packages="${1:-}"
if [ "$with_system_packages" = "--system" ] && [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null; then
    needed=()
    command -v sshd >/dev/null || [ -x /usr/sbin/sshd ] || needed+=(openssh-server)
    command -v ssh >/dev/null || needed+=(openssh-client)
    command -v ip >/dev/null || needed+=(iproute2)
    command -v chromium >/dev/null || needed+=(chromium)
    if [ ${#needed[@]} -gt 0 ]; then
        echo "installing system packages: ${needed[*]}"
        apt-get update -qq
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${needed[@]}" >/dev/null
    fi
fi

if [ ! -x .venv/bin/python ]; then
    python3 -m venv .venv
fi
.venv/bin/pip install -q -r requirements-dev.txt
.venv/bin/pip install -q --no-deps -e .
