#!/usr/bin/env bash
# The whole suite in tiers (what ./test.sh runs when given no pytest arguments), keeping the 2-core machine
# busy while the emulated-cluster tests wait on their shaped links and ssh:
#   1. tests/cluster (marker `cluster`), then the tests that start real measuring processes but compare no
#      measured times (`launches`, not `quiet`), beside the tests that start no measuring process;
#   2. then, alone, the tests whose orderings of measured stalls need the cores to themselves (`quiet`: more
#      loader workers, a lower disk cap) and those that drive a browser (`e2e`).
# The four selections make up the whole suite; each prints its own --durations. The cluster tests count
# only launches on the emulated nodes (clusterkit.tagged_processes), so a unit test's local launch beside
# them is not taken for a leftover. The caller (test.sh) has set up already.
set -uo pipefail
cd "$(dirname "$0")/.."
export STASH_TEST_NO_SETUP=1  # each tier's test.sh: set up once by the caller, not by each tier at once
log=$(mktemp)
started=$SECONDS
{
    bash test.sh -m cluster
    echo "cluster exit code $?"
    echo "=== tier 1c: launches that compare no measured times (after the cluster tests) ==="
    bash test.sh -m "not cluster and launches and not quiet and not e2e"
    echo "launches exit code $?"
} >"$log" 2>&1 &
beside_pid=$!
bash test.sh -m "not cluster and not launches and not e2e"
in_process=$?
wait "$beside_pid"
echo "=== tier 1b: emulated cluster, then launches (ran beside the tier above) ==="
cat "$log"
cluster=$(sed -n 's/^cluster exit code //p' "$log")
launches=$(sed -n 's/^launches exit code //p' "$log")
echo "=== tier 1: $((SECONDS - started)) s ==="
bash test.sh -m "not cluster and ((launches and quiet) or e2e)"
quiet=$?
echo "=== all tiers: $((SECONDS - started)) s; exit codes: in-process $in_process, cluster ${cluster:-?}," \
    "launches ${launches:-?}, quiet launches and browser $quiet ==="
[ "$in_process" = 0 ] && [ "$cluster" = 0 ] && [ "$launches" = 0 ] && [ "$quiet" = 0 ]
