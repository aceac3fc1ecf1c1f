#!/usr/bin/env bash
# Set up (first time) and open the dashboard on the default database (./results.duckdb).
set -euo pipefail
cd "$(dirname "$0")"
bash scripts/setup.sh
exec .venv/bin/streamlit run app.py "$@"
