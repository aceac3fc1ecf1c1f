#!/usr/bin/env bash
# The whole suite in tiers (what ./test.sh runs when given no pytest arguments), keeping the 2-core machine
# busy while the emulated-cluster tests wait on their shaped links and ssh:
#   1. tests/cluster (marker `cluster`) beside, one after the other, the tests that start no measuring
#      process and those that start real measuring processes but compare no measured times (`launches`,
#      not `quiet`); those two run in two pytest-xdist processes (`-n 2`), a test file to a process (so a
#      module's fixtures are made once), at a lower priority than the cluster tests (`nice`), whose nodes
#      then get the cores when their shaped links let them compute;
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
} >"$log" 2>&1 &
beside_pid=$!
parallel=(-n 2 --dist loadfile)
nice -n 10 bash test.sh -m "not cluster and not launches and not e2e" "${parallel[@]}"
in_process=$?
echo "=== tier 1c: launches that compare no measured times (after the tier above, beside the cluster) ==="
nice -n 10 bash test.sh -m "not cluster and launches and not quiet and not e2e" "${parallel[@]}"
launches=$?
wait "$beside_pid"
echo "=== tier 1b: emulated cluster (ran beside the tiers above) ==="
cat "$log"
cluster=$(sed -n 's/^cluster exit code //p' "$log")
echo "=== tier 1: $((SECONDS - started)) s ==="
bash test.sh -m "not cluster and ((launches and quiet) or e2e)"
quiet=$?
echo "=== all tiers: $((SECONDS - started)) s; exit codes: in-process $in_process, cluster ${cluster:-?}," \
    "launches $launches, quiet launches and browser $quiet ==="
[ "$in_process" = 0 ] && [ "$cluster" = 0 ] && [ "$launches" = 0 ] && [ "$quiet" = 0 ]
