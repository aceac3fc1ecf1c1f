#!/usr/bin/env bash
# The system packages that the emulated cluster (OpenSSH, iproute2) and the browser tests (chromium) need,
# on a Debian machine as root; nothing to do when they are there, or without root or apt-get. Run by
# scripts/setup.sh --system beside the Python packages, and by scripts/test_tiers.sh beside tier 1.
set -euo pipefail
[ "$(id -u)" = "0" ] && command -v apt-get >/dev/null || exit 0
needed=()
command -v sshd >/dev/null || [ -x /usr/sbin/sshd ] || needed+=(openssh-server)
command -v ssh >/dev/null || needed+=(openssh-client)
command -v ip >/dev/null || needed+=(iproute2)
command -v chromium >/dev/null || needed+=(chromium)
[ ${#needed[@]} -gt 0 ] || exit 0
echo "installing system packages: ${needed[*]}"
apt-get update -qq
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${needed[@]}" >/dev/null
