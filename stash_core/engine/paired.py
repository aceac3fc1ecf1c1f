"""R0 and R1 timed in one launch (measure/paired_loop.py): whether a profile pairs them, the launch that
does, and its outcome split into the two runs' launches, whose groups of blocks are sub-rounds of both.

Separate launches of R0 and R1 land on whatever speed the machine has at each start, and on a virtual
machine that speed moves by 10-20% in level shifts of seconds: the interconnect stall, their difference,
then carries the spread of two launches (bench/launch_variance.py). Paired, both runs are timed in the same
seconds, and the stall's interval comes from the groups' paired differences (bench/paired_blocks.py). No
stall formula changes: compute is still t(R0), the interconnect stall t(R1) - t(R0).

The paired launch takes R0's and R1's place in every round, so that its groups come from across the
profile; each stops once the groups of all paired launches so far reach the target (measure/paired_loop.py),
or, where rounds may follow, after as many groups as what launches disagree by makes worth it
(launch_groups): more launches, not longer ones, narrow that.
It applies to Stash's own loop on this machine's CPU (gloo) with R0 and R1 both planned; a GPU, a script,
or remote hosts launch the runs separately, as does --paired off.
"""

from __future__ import annotations

import math
import statistics

from stash_core.analysis.stats import group_round_key, mean, pool_rounds, summarise
from stash_core.engine.plan import PhasePlan
from stash_core.errors import UsageError
from stash_core.spec import ProfileSpec

PAIRED_RUNS = ("R0", "R1")
PAIRED_OFF_HINT = " (--paired off: separate launches)"  # the command's way out; the Run page has no field
FIRST_STARTUP_ESTIMATE_S = 5.0  # kept out of the first paired launch's loop cap: its start-up and probe
FIRST_LAUNCH_GROUPS = 8  # the first paired launch's groups: enough to show how groups vary
LATER_LAUNCH_GROUPS = 4  # the second's, before two launches show how launches disagree
MIN_LAUNCH_GROUPS = 3  # fewer would leave a launch's own mean too loose to tell launches apart
# Steps per block, sent to the workers in the job (measure/paired_loop.py): long enough to hold a step's
# parts, short enough to pair within a shift.
BLOCK_STEPS = 3


def why_not_paired(spec: ProfileSpec, names: list[str], on_remote_hosts: bool) -> str | None:
    """Why R0 and R1 are launched separately (None: they are paired); names: the planned runs."""
    if not all(name in names for name in PAIRED_RUNS):
        return "R0 and R1 are not both planned"
    if spec.script:
        return "a script's own loop cannot alternate blocks"
    if on_remote_hosts:
        return "runs on remote hosts are launched separately"
    if spec.device != "cpu" or (spec.backend or "gloo") != "gloo":
        return "pairing runs on this machine's CPU with gloo only"
    if spec.fixed_iterations is not None:
        return "a fixed --iterations count times each run alone"
    if spec.find_unused_parameters:  # DDP's reducer then expects every step's gradients through its forward
        return "--find-unused-parameters: DDP's search for them fails on rank 0's steps outside DDP"
    return None


def pairs_runs(spec: ProfileSpec, names: list[str], remote) -> bool:
    """Whether this profile times R0 and R1 in one launch: --paired auto where it applies, on (or a clear
    error where it cannot), off never."""
    if spec.paired == "off":
        return False
    reason = why_not_paired(spec, names, remote is not None)
    if reason is not None and spec.paired == "on":
        raise UsageError(f"--paired on: {reason}")
    return reason is None


def launch_plans(plans: list[PhasePlan], paired: bool) -> list[PhasePlan]:
    """The launches of a round: R0 folds into R1's launch when paired."""
    if not paired or not any(plan.name == "R1" for plan in plans):
        return list(plans)
    return [plan for plan in plans if plan.name != "R0"]


def launches_of_round(plans: list[PhasePlan], paired: bool, needed: list[str] | None) -> list[PhasePlan]:
    """A later round's launches: the runs still needed, R0 or R1 needed meaning the paired launch."""
    if needed is None:
        return launch_plans(plans, paired)
    wanted = set(needed)
    if paired and wanted & set(PAIRED_RUNS):
        wanted |= {"R1"}
    return [plan for plan in launch_plans(plans, paired) if plan.name in wanted]


def record_names(launch_names: list[str], paired: bool) -> list[str]:
    """The runs a round's launches measure (R0 and R1 for the paired one)."""
    if not paired:
        return list(launch_names)
    found: list[str] = []
    for name in launch_names:
        found.extend(PAIRED_RUNS if name == "R1" else (name,))
    return found


def paired_job(launched, target: float | None = None) -> dict:
    """The paired part of R1's job: its blocks, the groups of the earlier paired launches (one list per
    launch, in time order) that the launch's stop rule pools with its own (launched: LaunchedRuns), and,
    where the profile's rounds may add launches (target given), how many groups this launch keeps."""
    job: dict = {"block_steps": BLOCK_STEPS}
    prior = {
        run: [o["groups_s"] for _, o in launched.outcomes.get(run, []) if o.get("groups_s")]
        for run in PAIRED_RUNS
    }
    if prior["R1"]:
        job.update(prior_a_s=prior["R1"], prior_b_s=prior["R0"])
    if target is not None:
        groups = launch_groups(prior["R1"], prior["R0"], latest_startup_s(launched), target)
        if groups is not None:
            job["launch_groups"] = groups
    return job


def latest_startup_s(launched) -> float:
    """The last paired launch's cost beyond its timed groups (start-up, warm-up steps and cut groups): what
    another launch costs. Not the first launch's, which also ran the probe and waited for the warm start."""
    found = launched.outcomes.get("R1") or []
    if not found:
        return 0.0
    _, last = found[-1]
    _, last_r0 = (launched.outcomes.get("R0") or [(None, {})])[-1]
    timed_s = BLOCK_STEPS * 2 * (sum(last.get("groups_s") or []) + sum(last_r0.get("groups_s") or []))
    wall_s = (last.get("wall_s") or 0.0) + (last_r0.get("wall_s") or 0.0)
    return max(wall_s - timed_s, 0.0)


def launch_groups(
    prior_a_s: list[list[float]], prior_b_s: list[list[float]], startup_s: float, target: float
) -> int | None:
    """Groups the next paired launch keeps: two-stage sampling's optimum m = sqrt(w C / (b c)), where w is
    the variance of one group, b the variance of what launches disagree by, C a launch's start-up and c a
    group's time, for whichever of R1, R0 and their difference is furthest from its target over the
    launches so far. Launches narrow b, groups only w: when launches disagree, shorter launches and more of
    them reach the target sooner. FIRST_LAUNCH_GROUPS in the first launch and LATER_LAUNCH_GROUPS in the
    second, before two launches can show b; None (no cap: the stop rule's target decides) where launches
    agree as far as their groups tell, or the optimum is above FIRST_LAUNCH_GROUPS."""
    if len(prior_a_s) < 2:
        return FIRST_LAUNCH_GROUPS if not prior_a_s else LATER_LAUNCH_GROUPS
    differences = [
        [a - b for a, b in zip(la, lb, strict=True)] for la, lb in zip(prior_a_s, prior_b_s, strict=True)
    ]
    r1_level = mean([g for launch in prior_a_s for g in launch])
    group_s = 2 * BLOCK_STEPS * (r1_level + mean([g for launch in prior_b_s for g in launch]))
    widest, groups = -1.0, LATER_LAUNCH_GROUPS
    for series in (prior_a_s, prior_b_s, differences):
        means = [mean(launch) for launch in series]
        level = abs(mean(means))
        spread = pool_rounds(means, [0.0] * len(means)).ci95
        # the difference counts where it is a stall held to the target (at least the target's share of R1)
        small = series is differences and level < target * r1_level
        if level <= 0 or small or spread / (target * level) <= widest:
            continue
        widest = spread / (target * level)
        within, between = variance_components(series)
        if between <= 0 or group_s <= 0:  # launches agree as far as their groups tell: longer launches
            groups = None
            continue
        optimum = math.sqrt(within * max(startup_s, 0.0) / (between * group_s))
        groups = None if optimum > FIRST_LAUNCH_GROUPS else max(round(optimum), MIN_LAUNCH_GROUPS)
    return groups


def variance_components(launches: list[list[float]]) -> tuple[float, float]:
    """(within, between): the groups' variance within a launch, pooled, and the launches' means' variance
    beyond what their groups' explains (below 0 where the launches agree better; 0 with one launch)."""
    within = within_variance(launches)
    if len(launches) < 2:
        return within, 0.0
    means = [mean(launch) for launch in launches]
    return within, statistics.variance(means) - within * mean([1 / len(launch) for launch in launches])


def within_variance(launches: list[list[float]]) -> float:
    """The groups' variance within a launch, pooled over the launches."""
    spread = sum(statistics.variance(launch) * (len(launch) - 1) for launch in launches if len(launch) > 1)
    freedom = sum(len(launch) - 1 for launch in launches if len(launch) > 1)
    return spread / freedom if freedom else 0.0


def loop_cap_s(spec: ProfileSpec, run_wall_s: float, launches_left: int, launched=None) -> float:
    """A paired launch's loop cap: the time of both runs (--max-phase-seconds each) less what their launches
    took so far, shared over the launches still due, less a start-up: the last paired launch's once there
    have been two (latest_startup_s; a forked launch starts in under a second), else
    FIRST_STARTUP_ESTIMATE_S (the first launch's own also ran the probe and waited for the warm start)."""
    later = launched is not None and len(launched.outcomes.get("R1") or []) >= 2
    startup_s = latest_startup_s(launched) if later else FIRST_STARTUP_ESTIMATE_S
    return max(2.0, (2 * spec.max_phase_s - run_wall_s) / max(launches_left, 1) - startup_s)


def split_outcome(outcome: dict) -> tuple[dict, dict]:
    """(R0's outcome, R1's outcome) from a paired launch's: each with its kept steps, its mean and interval
    over the groups, and the groups themselves; the launch's wall time split by the B blocks' share."""
    paired = outcome.pop("paired")
    r1 = dict(outcome)
    r1["groups_s"] = paired["groups_a_s"]
    r0 = {key: value for key, value in outcome.items() if key not in ("probe", "ranks")}
    r0.update(
        name="R0", workers_per_node=1, workers=1, nodes=1,
        description="1 worker, synthetic data on the device (in R1's launch, rank 1 asleep)",
        samples={**paired["b_samples"], "slowest_rank": [0] * len(paired["b_samples"]["iteration_s"])},
        rank_skew_s=0.0, groups_s=paired["groups_b_s"],
    )  # fmt: skip
    wall_s = outcome.get("wall_s") or 0.0
    r0["wall_s"] = min(paired["b_loop_s"], wall_s)
    r1["wall_s"] = wall_s - r0["wall_s"]
    for run, groups in ((r0, paired["groups_b_s"]), (r1, paired["groups_a_s"])):
        own = summarise(run["samples"]["iteration_s"]).to_dict()  # the groups' mean is the kept steps' mean
        # Groups vary among themselves from two on; a lone group gives no spread: its iterations' own
        # interval then, as a launch of the run alone would give (never a spread of 0 from one value).
        ci95 = pool_rounds(groups, [0.0] * len(groups)).ci95 if len(groups) > 1 else own["ci95"]
        run["iteration_s"] = {**own, "ci95": ci95}
        run["iterations"] = len(run["samples"]["iteration_s"])
    r0["parts_mean_s"] = {
        part: sum(values) / len(values) if values else None
        for part, values in paired["b_samples"].items()
        if part != "iteration_s"
    }
    r1["paired_blocks"] = r0["paired_blocks"] = {
        "block_steps": paired["block_steps"], "groups": len(paired["groups_a_s"]),
        "warmup_groups": paired["warmup_groups"],
    }  # fmt: skip
    return r0, r1


def group_rounds(round_index: int, outcome: dict) -> dict[int, tuple[float, float]]:
    """A paired launch's groups as rounds of its run: keyed by analysis/stats.group_round_key, no within part;
    a launch of one group keeps its iterations' interval as that part (split_outcome): one value alone
    tells nothing of its spread."""
    groups = outcome["groups_s"]
    within_s = outcome["iteration_s"]["ci95"] if len(groups) == 1 else 0.0
    return {group_round_key(round_index, i): (mean_s, within_s) for i, mean_s in enumerate(groups)}
