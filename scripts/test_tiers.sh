#!/usr/bin/env bash
# The whole suite in tiers (what ./test.sh runs when given no pytest arguments), keeping the 2-core machine
# busy while the emulated-cluster tests wait on their shaped links and ssh:
#   1. tests/cluster (marker `cluster`) beside the tests that start no measuring process;
#   2. then, alone, the tests that start real measuring processes or a browser (`launches`, `e2e`): their
#      orderings of measured stalls (more loader workers, a lower disk cap) need the cores to themselves.
# The three selections make up the whole suite; each prints its own --durations. The cluster tests count
# only launches on the emulated nodes (clusterkit.tagged_processes), so a unit test's local launch beside
# them is not taken for a leftover. The caller (test.sh) has set up already.
set -uo pipefail
cd "$(dirname "$0")/.."
export STASH_TEST_NO_SETUP=1  # each tier's test.sh: set up once by the caller, not by each tier at once
log=$(mktemp)
started=$SECONDS
bash test.sh -m cluster >"$log" 2>&1 &
cluster_pid=$!
bash test.sh -m "not cluster and not launches and not e2e"
in_process=$?
wait "$cluster_pid"
cluster=$?
echo "=== tier 1b: emulated cluster (ran beside the tier above) ==="
cat "$log"
echo "=== tier 1: $((SECONDS - started)) s ==="
bash test.sh -m "not cluster and (launches or e2e)"
launches=$?
echo "=== all tiers: $((SECONDS - started)) s; exit codes: in-process $in_process, cluster $cluster, launches $launches ==="
[ "$in_process" = 0 ] && [ "$cluster" = 0 ] && [ "$launches" = 0 ]
