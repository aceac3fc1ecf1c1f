#!/usr/bin/env bash
# Set up (first time, including system packages when root) and run the whole test suite.
set -euo pipefail
cd "$(dirname "$0")"
# STASH_TEST_NO_SETUP=1: the caller has set up already (scripts/test_tiers.sh runs tiers of this suite at once)
[ "${STASH_TEST_NO_SETUP:-}" = 1 ] || bash scripts/setup.sh --system
# No pytest arguments: the whole suite, in tiers that keep both cores busy (scripts/test_tiers.sh).
[ $# -gt 0 ] || exec bash scripts/test_tiers.sh
# -q unless the caller chose the verbosity (a second -q would make `--co -q` print per-file counts).
quiet=(-q)
for arg in "$@"; do
    case "$arg" in -q | -qq | -v | -vv | --quiet | --verbose) quiet=() ;; esac
done
# --durations: where the time of a run goes, in every CI log.
exec .venv/bin/python -m pytest "${quiet[@]}" -rs --durations=25 "$@"
