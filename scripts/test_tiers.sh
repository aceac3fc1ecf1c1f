#!/usr/bin/env bash
# The whole suite in two selections at once (what ./test.sh runs when given no pytest arguments), keeping the
# 2-core machine busy while the emulated-cluster tests wait on their shaped links and ssh:
#   1. the measuring tier: tests/cluster (marker `cluster`) and the tests that compare times measured in
#      separate runs (`launches and quiet`), in two pytest-xdist processes of their own, a file to a process
#      (a cluster made once per file), except that every file with a `quiet` test is one unit (--quiet-unit,
#      tests/conftest.py): one process runs those files one after the other, never two at once, at normal
#      priority, while the other takes the rest of the cluster files at nice +5 (tests/cluster/conftest.py),
#      every process naming its clusters its own way (clusterkit.py);
#   2. beside it, at a lower priority (`nice -n 10`), every other test: those that start no measuring process,
#      those that start real measuring processes but compare no measured times (`launches`, not `quiet`) and
#      those that drive a browser (`e2e`), in two pytest-xdist processes (`-n 2`), a test file to a process (so
#      a module's fixtures are made once), the files that hold a long test first (tests/conftest.py;
#      --no-loadscope-reorder keeps that order), so that short files fill the end instead of one long file
#      running alone.
# The quiet tests keep the cores their measurements need by priority (nice 0 against 5 and 10), as the cluster
# tests that compare measured times did beside the second selection before. The two selections make up the
# whole suite; each prints its own --durations. The cluster tests count only launches on the emulated nodes
# (clusterkit.tagged_processes), so a unit test's local launch beside them is not taken for a leftover. The
# caller (test.sh) has set up already.
set -uo pipefail
cd "$(dirname "$0")/.."
export STASH_TEST_NO_SETUP=1  # each selection's test.sh: set up once by the caller, not by each at once
log=$(mktemp)
started=$SECONDS
parallel=(-n 2 --dist loadfile --no-loadscope-reorder)
{
    bash test.sh -m "cluster or (launches and quiet)" "${parallel[@]}" --quiet-unit
    echo "measuring exit code $?"
} >"$log" 2>&1 &
measuring_pid=$!
nice -n 10 bash test.sh -m "not cluster and not (launches and quiet)" "${parallel[@]}"
beside=$?
echo "=== the rest: $((SECONDS - started)) s ==="
wait "$measuring_pid"
echo "=== measuring tier: emulated cluster and quiet launches (ran beside the tier above) ==="
cat "$log"
measuring=$(sed -n 's/^measuring exit code //p' "$log")
echo "=== all tiers: $((SECONDS - started)) s; exit codes: the rest $beside, measuring ${measuring:-?} ==="
[ "$beside" = 0 ] && [ "$measuring" = 0 ]
