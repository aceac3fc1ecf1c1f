#!/usr/bin/env bash
# Set up (first time) and open the dashboard on the default database (./results.duckdb).
set -euo pipefail
cd "$(dirname "$0")"
bash scripts/setup.sh
# The stash command lives in the environment; a script cannot change its caller's PATH, so say how.
echo "stash: $PWD/.venv/bin/stash  (to type just \"stash\": export PATH=\"$PWD/.venv/bin:\$PATH\")"
exec .venv/bin/streamlit run app.py "$@"
