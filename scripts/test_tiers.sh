#!/usr/bin/env bash
# The whole suite in tiers (what ./test.sh runs when given no pytest arguments), keeping the 2-core machine
# busy while the tests that compare measured times get the cores whenever they want them:
#   1. every test but those of the tiers below, in two pytest-xdist processes (`-n 2`), a test file to
#      a process (so a module's fixtures are made once), the files that hold a long test first
#      (tests/conftest.py; --no-loadscope-reorder keeps that order), so that short files fill the end instead
#      of one long file running alone: the tests that start no measuring process and those that start real
#      measuring processes but compare no measured times (`launches`, not `quiet`). At the lowest priority:
#      they take only the CPU time that the tiers beside them leave, which nothing of theirs measures
#      against. That is a cpu cgroup of their own marked idle, where the machine lets us make one (root):
#      SCHED_IDLE alone (chrt) does not do it, because the kernel's autogroups give every session (each
#      launch starts one) an equal share whatever its tasks' policy;
#   2. beside it at normal priority, one after the other (first, with --system, the system packages that
#      tiers 2a and 2c need: scripts/setup_system.sh; test.sh passes it when it set up the Python packages):
#      a. tests/cluster (marker `cluster`), in two pytest-xdist processes of their own, a file to a process
#         (its cluster made once; the files that compare measured times as one, never two at once:
#         tests/conftest.py), every process naming its clusters its own way (clusterkit.py);
#      b. the tests whose orderings of measured stalls need the cores (`quiet`: more loader workers, a lower
#         disk cap), in one process;
#      c. the tests that drive the dashboard in a browser (`e2e`), whose waits for a page (30 s, 120 s) a
#         starved browser ran past.
# The four selections make up the whole suite; each prints its own --durations. Tiers 2a and 2c collect only
# their folder (tests/cluster, tests/e2e: a whole collection costs some 9 CPU-s a process), tier 1 leaves
# those folders out, and tier 2b collects only the files that say mark.quiet; the suite refuses a test
# that would then run in no tier (tests/conftest.py). The cluster tests count
# only launches on the emulated nodes (clusterkit.tagged_processes), so a unit test's local launch beside
# them is not taken for a leftover. The caller (test.sh) has set up already.
set -uo pipefail
cd "$(dirname "$0")/.."
with_system_packages=0
[ "${1:-}" = --system ] && with_system_packages=1
export STASH_TEST_NO_SETUP=1  # each tier's test.sh: set up once by the caller, not by each tier at once
log=$(mktemp)
started=$SECONDS
parallel=(-n 2 --dist loadfile --no-loadscope-reorder)
lowest=(chrt --idle 0)  # util-linux; where it is missing, the lowest nice value
command -v chrt >/dev/null || lowest=(nice -n 19)
idle_group=""  # a cpu cgroup marked idle (cgroup v1 or v2), when one can be made
for parent in /sys/fs/cgroup/cpu /sys/fs/cgroup; do  # v1's cpu hierarchy, else v2's unified one
    [ -w "$parent/cgroup.procs" ] || continue  # a cgroup we may change (not v1's tmpfs above its hierarchies)
    group="$parent/stash-tests-$$"
    mkdir "$group" 2>/dev/null || continue
    if [ -e "$group/cpu.idle" ] && echo 1 >"$group/cpu.idle" 2>/dev/null; then
        idle_group=$group
        break
    fi
    rmdir "$group"
done
if [ -n "$idle_group" ]; then
    lowest=(bash -c 'echo $$ >"$0/cgroup.procs" && exec "$@"' "$idle_group" "${lowest[@]}")
    trap 'rmdir "$idle_group" 2>/dev/null || true' EXIT  # also when stopped; fails only while a process lives on
fi
# The quiet tier's files: those that say mark.quiet (tests/conftest.py refuses a quiet launch elsewhere).
mapfile -t quiet_files < <(grep -rl --include='test_*.py' 'mark\.quiet' tests | grep -v '^tests/cluster/')
{
    if [ "$with_system_packages" = 1 ]; then
        bash scripts/setup_system.sh
        echo "system packages exit code $?"
        echo "=== system packages: $((SECONDS - started)) s ==="
    fi
    bash test.sh -m "cluster" "${parallel[@]}" tests/cluster
    echo "cluster exit code $?"
    echo "=== tier 2a (cluster): $((SECONDS - started)) s ==="
    bash test.sh -m "not cluster and launches and quiet" "${quiet_files[@]}"
    echo "quiet exit code $?"
    echo "=== tier 2b (quiet): $((SECONDS - started)) s ==="
    bash test.sh -m "not cluster and not (launches and quiet) and e2e" tests/e2e
    echo "browser exit code $?"
    echo "=== tier 2c (browser): $((SECONDS - started)) s ==="
} >"$log" 2>&1 &
beside_pid=$!
"${lowest[@]}" bash test.sh -m "not cluster and not (launches and quiet) and not e2e" "${parallel[@]}" \
    --ignore=tests/cluster --ignore=tests/e2e
beside=$?
echo "=== tier 1: $((SECONDS - started)) s${idle_group:+ (in the idle cpu cgroup $idle_group)} ==="
wait "$beside_pid"
echo "=== tier 2: the emulated cluster, the quiet launches, the browser tests (ran beside tier 1) ==="
cat "$log"
cluster=$(sed -n 's/^cluster exit code //p' "$log")
quiet=$(sed -n 's/^quiet exit code //p' "$log")
browser=$(sed -n 's/^browser exit code //p' "$log")
system=$(sed -n 's/^system packages exit code //p' "$log")
[ "$with_system_packages" = 1 ] || system=0
echo "=== all tiers: $((SECONDS - started)) s; exit codes: tier 1 $beside, cluster ${cluster:-?}," \
    "quiet launches ${quiet:-?}, browser ${browser:-?}, system packages ${system:-?} ==="
[ "$beside" = 0 ] && [ "$cluster" = 0 ] && [ "$quiet" = 0 ] && [ "$browser" = 0 ] && [ "$system" = 0 ]
