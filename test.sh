#!/usr/bin/env bash
# Set up (first time, including system packages when root) and run the whole test suite.
set -euo pipefail
cd "$(dirname "$0")"
bash scripts/setup.sh --system
# --durations: where the time of a run goes, in every CI log.
exec .venv/bin/python -m pytest -q -rs --durations=25 "$@"
