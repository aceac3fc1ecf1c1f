#!/usr/bin/env bash
# The whole suite in tiers (what ./test.sh runs when given no pytest arguments), keeping the 2-core machine
# busy while the emulated-cluster tests wait on their shaped links and ssh:
#   1. tests/cluster (marker `cluster`), in two pytest-xdist processes of their own, a file to a process (its
#      cluster made once; the files that compare measured times as one, never two at once: tests/conftest.py),
#      every process naming its clusters its own way (clusterkit.py), beside one pytest session of every
#      other test but the quiet ones:
#      those that start no measuring process, those that start real measuring processes but compare no
#      measured times (`launches`, not `quiet`) and those that drive a browser (`e2e`), in two pytest-xdist
#      processes (`-n 2`), a test file to a process (so a module's fixtures are made once), the files that
#      hold a long test first (tests/conftest.py; --no-loadscope-reorder keeps that order), so that short
#      files fill the end instead of one long file running alone; at a lower priority than the cluster
#      tests (`nice`), whose nodes then get the cores when their shaped links let them compute;
#   2. then, alone, the tests whose orderings of measured stalls need the cores to themselves (`quiet`: more
#      loader workers, a lower disk cap).
# The three selections make up the whole suite; each prints its own --durations. The cluster tests count
# only launches on the emulated nodes (clusterkit.tagged_processes), so a unit test's local launch beside
# them is not taken for a leftover. The caller (test.sh) has set up already.
set -uo pipefail
cd "$(dirname "$0")/.."
export STASH_TEST_NO_SETUP=1  # each tier's test.sh: set up once by the caller, not by each tier at once
log=$(mktemp)
started=$SECONDS
parallel=(-n 2 --dist loadfile --no-loadscope-reorder)
{
    bash test.sh -m "cluster" "${parallel[@]}"
    echo "cluster exit code $?"
} >"$log" 2>&1 &
beside_pid=$!
nice -n 10 bash test.sh -m "not cluster and not (launches and quiet)" "${parallel[@]}"
beside=$?
wait "$beside_pid"
echo "=== tier 1b: emulated cluster (ran beside the tier above) ==="
cat "$log"
cluster=$(sed -n 's/^cluster exit code //p' "$log")
echo "=== tier 1: $((SECONDS - started)) s ==="
bash test.sh -m "not cluster and launches and quiet"
quiet=$?
echo "=== all tiers: $((SECONDS - started)) s; exit codes: beside the cluster $beside, cluster ${cluster:-?}," \
    "quiet launches $quiet ==="
[ "$beside" = 0 ] && [ "$cluster" = 0 ] && [ "$quiet" = 0 ]
