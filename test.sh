#!/usr/bin/env bash
# Set up (first time, including system packages when root) and run the whole test suite.
set -euo pipefail
cd "$(dirname "$0")"
# Byte-code written as Python does by default, even where PYTHONDONTWRITEBYTECODE is set: a module that set-up
# did not compile (scripts/setup.sh) is then compiled once, not again in every process the suite starts.
unset PYTHONDONTWRITEBYTECODE
# STASH_TEST_NO_SETUP=1: the caller has set up already (scripts/test_tiers.sh runs tiers of this suite at once)
set_up=1
[ "${STASH_TEST_NO_SETUP:-}" = 1 ] && set_up=0
# No pytest arguments: the whole suite, in tiers that keep both cores busy (scripts/test_tiers.sh). Only
# the cluster and browser tiers need the system packages (sshd, chromium): the tiers install them beside
# tier 1, which starts once the Python packages are in.
if [ $# -eq 0 ]; then
    [ "$set_up" = 0 ] && exec bash scripts/test_tiers.sh
    bash scripts/setup.sh
    exec bash scripts/test_tiers.sh --system
fi
[ "$set_up" = 0 ] || bash scripts/setup.sh --system
# -q unless the caller chose the verbosity (a second -q would make `--co -q` print per-file counts).
quiet=(-q)
for arg in "$@"; do
    case "$arg" in -q | -qq | -v | -vv | --quiet | --verbose) quiet=() ;; esac
done
# --durations: where the time of a run goes, in every CI log.
exec .venv/bin/python -m pytest "${quiet[@]}" -rs --durations=25 "$@"
