#!/usr/bin/env bash
# Set up (first time) and open the dashboard on the default database (results.duckdb here, or $STASH_DB).
# Private by default: bound to 127.0.0.1. `./run.sh --listen ADDRESS` (or STASH_LISTEN=ADDRESS) binds it to
# ADDRESS and requires a token, printed once (STASH_DASHBOARD_TOKEN sets one of your own).
# Further arguments go to `streamlit run`, but --server.address (--listen chooses the address).
set -euo pipefail
case "${1:-}" in
    -h | --help) sed -n '2,5s/^# \{0,1\}//p' "$0"; exit 0 ;;  # its own usage, before any set-up
esac
# A relative STASH_DB names a file where the command was typed, as for `stash`; the dashboard runs from here.
if [ -n "${STASH_DB:-}" ] && [ "${STASH_DB#/}" = "$STASH_DB" ]; then
    export STASH_DB="$PWD/$STASH_DB"
fi
cd "$(dirname "$0")"
listen="${STASH_LISTEN:-127.0.0.1}"
hosts=()  # Host names it answers: .streamlit/config.toml's (this machine's own) unless --listen
passed=()
while [ $# -gt 0 ]; do
    case "$1" in
        --listen) [ $# -ge 2 ] || { echo "run.sh: --listen needs an address, e.g. --listen 0.0.0.0" >&2; exit 2; }
                  listen="$2"; shift 2 ;;
        --listen=*) listen="${1#--listen=}"; shift ;;
        # Streamlit takes the last --server.address: passed on, it would bind beyond this machine with no token.
        --server.address | --server.address=*)
            echo "run.sh: $1 is not taken: --listen ADDRESS chooses the address (beyond this machine, with a token)" >&2
            exit 2 ;;
        *) passed+=("$1"); shift ;;
    esac
done
case "$listen" in
    127.0.0.1 | localhost | ::1) unset STASH_DASHBOARD_TOKEN ;;
    -* | *[!0-9A-Za-z.:-]* | "") echo "run.sh: --listen $listen is not an address" >&2; exit 2 ;;
    *)
        # One line, not the server's traceback, for a name that does not resolve or an address not on this machine.
        python3 -c 'import socket, sys
family, kind, _, _, where = socket.getaddrinfo(sys.argv[1], 0, type=socket.SOCK_STREAM)[0]
socket.socket(family, kind).bind(where)' "$listen" 2>/dev/null ||
            { echo "run.sh: --listen $listen: not an address of this machine" >&2; exit 2; }
        if [ -z "${STASH_DASHBOARD_TOKEN:-}" ]; then
            STASH_DASHBOARD_TOKEN=$(python3 -c 'import secrets; print(secrets.token_urlsafe(24))')
        fi
        export STASH_DASHBOARD_TOKEN
        hosts=(--server.allowedHosts "*")  # reached by whatever name the machine has; the token guards it
        # an error shown to a browser that has no token must not show the server's code and paths
        hosts+=(--client.showErrorDetails none)
        echo "warning: the dashboard listens on $listen: anyone who can reach this port and has the token can run code here" >&2
        echo "open it with ?token=$STASH_DASHBOARD_TOKEN at the end of the URL below, or give the token in its page" >&2
        echo "(a browser keeps it until it closes; an SSH tunnel needs no --listen)" >&2
        ;;
esac
bash scripts/setup.sh
# The stash command lives in the environment; a script cannot change its caller's PATH, so say how.
echo "stash: $PWD/.venv/bin/stash  (to type just \"stash\": export PATH=\"$PWD/.venv/bin:\$PATH\")"
exec .venv/bin/streamlit run app.py --server.address "$listen" ${hosts[@]+"${hosts[@]}"} ${passed[@]+"${passed[@]}"}
