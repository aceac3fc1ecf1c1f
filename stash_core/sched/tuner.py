"""How the delay timers are set, and said: given, online, or tuned on the first part of the trace.

given   the timers as given (delay_s, scale)
online  set while the simulation runs from what the scheduler can know: delay's timer is the wait for
        a first start observed so far (its exponentially weighted mean); network-delay's and
        network-preempt's are (slowdown - 1) x the ESTIMATED duration (estimate.py: the user's estimate
        or the history of finished jobs), scale 1: a job waits as long as spreading would cost it; every
        one of them then x 2 x the observed GPU busy share (policy.py, by_busy): shorter on a lightly used
        cluster, up to twice on a full one
split   a small grid (TUNING_DELAYS_S, TUNING_SCALES) simulated on the jobs of the first `fraction` (by
        arrival) that had finished when the first reported job arrives (simulated under consolidate: a
        job still running then has no known duration); the value with the lowest average JCT there
        replaces the given timer only where it beats it beyond the noise of those jobs' busy periods
        (gain_interval_s): a grid whose values tie, or differ by less than the periods vary, or jobs that
        keep the cluster busy in one stretch, say nothing, and the given timer is kept. Every policy is reported on the other jobs only, which the tuning never saw. The grid
        holds an infinite timer (wait for consolidation)
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from stash_core.analysis.stats import t_quantile
from stash_core.errors import UsageError
from stash_core.sched.fabric import Fabric
from stash_core.sched.policy import TIMED, Policy
from stash_core.sched.simulator import refuse_too_big, simulate
from stash_core.sched.topology import Cluster
from stash_core.sched.trace import TraceJob

TUNING_MODES = ("split", "online", "given")
TUNING_SCALES = (0.0, 0.25, 0.5, 1.0, 2.0, 4.0, math.inf)
TUNING_DELAYS_S = (0.0, 60.0, 300.0, 900.0, 1800.0, 3600.0, math.inf)


@dataclass(frozen=True)
class Tuned:
    policy: Policy  # the given policy, or the grid's best where it beat the given one beyond the noise
    said: str  # the choice and its evidence: "delay 300 s (-52 s ± 31 s a job against delay 600 s)"


def tune(
    jobs: list[TraceJob],
    cluster: Cluster,
    base: Policy,
    uplink_factor: float = 2.0,
    fabric: Fabric | None = None,
) -> Policy:
    """`base` with the timer (delay) or scale (network-*) tuned on `jobs` (see tuned)."""
    return tuned(jobs, cluster, base, uplink_factor, fabric).policy


def tuned(
    jobs: list[TraceJob], cluster: Cluster, base: Policy, uplink_factor: float = 2.0,
    fabric: Fabric | None = None,
) -> Tuned:  # fmt: skip
    """The grid's value with the lowest average JCT on `jobs` (ties: the first in the grid), kept only where
    its JCTs beat `base`'s (the given timer) beyond their noise (gain_interval_s over the busy periods: the
    interval lies below zero). Otherwise the jobs cannot tell the timers apart and `base` stays."""
    if base.name == "delay":
        grid = [replace(base, delay_s=d, online=False) for d in TUNING_DELAYS_S]
    else:
        grid = [replace(base, scale=k) for k in TUNING_SCALES]
    ordered = sorted(jobs, key=lambda job: (job.submit_s, job.job_id))
    given = _finishes_s(ordered, cluster, base, uplink_factor, fabric)
    scored = []
    for i, policy in enumerate(grid):
        finishes = _finishes_s(ordered, cluster, policy, uplink_factor, fabric)
        jcts = [finish - job.submit_s for finish, job in zip(finishes, ordered, strict=True)]
        scored.append((sum(jcts) / len(jcts), i, finishes))
    _, best_index, best = min(scored, key=lambda score: score[:2])
    differences_s = [mine - theirs for mine, theirs in zip(best, given, strict=True)]
    periods = busy_periods(ordered, given, best)
    gain_s, half_s = gain_interval_s(differences_s, periods, len(grid))
    evidence = f"{gain_s:+,.0f} s ± {half_s:,.0f} s a job against {base.label()}"
    best_label = grid[best_index].label()
    if gain_s + half_s < 0:
        return Tuned(grid[best_index], f"{best_label} ({evidence})")
    if not any(differences_s):
        return Tuned(base, f"{base.label()} kept: no value of the grid did better on these jobs")
    if not math.isfinite(half_s):
        said = (f"the {len(jobs)} job(s) keep the cluster busy in one stretch, too few to judge the best of "
                f"the grid, {best_label} ({gain_s:+,.0f} s a job against it)")  # fmt: skip
        return Tuned(base, f"{base.label()} kept: {said}")
    if gain_s - half_s > 0:
        return Tuned(base, f"{base.label()} kept: it beats every value of the grid, the best {best_label} "
                           f"({evidence})")  # fmt: skip
    return Tuned(base, f"{base.label()} kept: the best of the grid, {best_label}, is within the noise "
                       f"({evidence})")  # fmt: skip


def busy_periods(ordered: list[TraceJob], *finishes_s: list[float]) -> list[int]:
    """Each job's busy period (0, 1, ...), the jobs in arrival order: a new one starts with a job that
    arrives after every earlier job has finished under each of the schedules `finishes_s` (each job's finish,
    in the same order). Jobs of different periods never meet in a queue."""
    periods, period, clear_s = [], -1, -math.inf
    for index, job in enumerate(ordered):
        if job.submit_s >= clear_s:
            period += 1
        periods.append(period)
        clear_s = max(clear_s, *(finishes[index] for finishes in finishes_s))
    return periods


def gain_interval_s(
    differences_s: list[float], periods: list[int], compared: int
) -> tuple[float, float]:
    """The mean of jobs' paired JCT differences and the half-width of its interval: one placement delays
    every job queued behind it, so the jobs of one busy period (`periods`, busy_periods) are one piece of
    evidence (a cluster-robust interval over the periods: Student t with periods - 1 degrees of freedom), at
    95% shared among the `compared` values of the grid the best was picked from (Bonferroni). Infinite with
    fewer than two periods."""
    count = len(differences_s)
    mean_s = math.fsum(differences_s) / count
    sums: dict[int, float] = {}
    sizes: dict[int, int] = {}
    for difference_s, period in zip(differences_s, periods, strict=True):
        sums[period] = sums.get(period, 0.0) + difference_s
        sizes[period] = sizes.get(period, 0) + 1
    groups = len(sums)
    if groups < 2:
        return mean_s, math.inf
    residuals = math.fsum((sums[k] - mean_s * sizes[k]) ** 2 for k in sums)
    standard_error = math.sqrt(groups / (groups - 1) * residuals) / count
    return mean_s, t_quantile(0.05 / compared, groups - 1) * standard_error


def _finishes_s(
    ordered: list[TraceJob], cluster: Cluster, policy: Policy, uplink_factor: float, fabric: Fabric | None
) -> list[float]:
    """Each job's finish under `policy`, in the order of `ordered`."""
    outcomes = simulate(ordered, cluster, policy, uplink_factor, fabric)
    by_id = {o.job.job_id: o.finish_s for o in outcomes}
    return [by_id[job.job_id] for job in ordered]


def split_jobs(jobs: list[TraceJob], fraction: float) -> tuple[list[TraceJob], list[TraceJob]]:
    """The first `fraction` of the jobs by arrival, and the rest (each part at least one job)."""
    ordered = sorted(jobs, key=lambda job: (job.submit_s, job.job_id))
    cut = round(len(ordered) * fraction)
    if not 0 < cut < len(ordered):
        raise UsageError(f"cannot tune on {fraction:.0%} of {len(jobs)} job(s): both parts need a job")
    return ordered[:cut], ordered[cut:]


# finished jobs below which the tuning is said to be thin: a rule of thumb, not a measured bound
FEWEST_TUNING_JOBS = 5


def plan_policies(
    bases: list[Policy], jobs: list[TraceJob], cluster: Cluster, mode: str, fraction: float = 0.3,
    uplink_factor: float = 2.0, fabric: Fabric | None = None,
) -> tuple[list[Policy], list[TraceJob], str]:  # fmt: skip
    """The policies to report, the jobs to report them on, and a sentence saying how timers were set."""
    if mode not in TUNING_MODES:
        raise UsageError(f"unknown tuning {mode!r}: choose {', '.join(TUNING_MODES)}")
    refuse_too_big(jobs, cluster)  # before tuning, whose split would be blamed for a job that never fits
    timed = [p for p in bases if p.name in TIMED]
    if mode == "given":
        return bases, jobs, "timers as given"
    if not timed:
        return bases, jobs, f"no timed policy chosen, none tuned: every policy on all {len(jobs)} jobs"
    if mode == "online":
        policies = [replace(p, online=True, by_busy=True) if p.name == "delay" else
                    replace(p, scale=1.0, by_busy=True) if p.name in TIMED else p for p in bases]  # fmt: skip
        return (
            policies,
            jobs,
            (
                "timers set online: delay = the observed wait for a first start (its exponentially weighted "
                "mean); network timers = (slowdown - 1) x estimated duration (user estimate or finished "
                "jobs' history); each x 2 x observed GPU busy share (time-weighted over the last hour)"
            ),
        )
    first, rest = split_jobs(jobs, fraction)
    known = finished_by(first, rest[0].submit_s, cluster, uplink_factor, fabric)
    if not known and all(job.submit_s == first[0].submit_s for job in jobs):
        raise UsageError(
            f"all {len(jobs)} jobs are submitted at once (as with --arrivals batch), so none finishes before "
            "another arrives and there is nothing to tune on: use --tuning online or given"
        )
    if not known:
        raise UsageError(
            f"{_none_finished(len(first))} when job {rest[0].job_id} arrived, so there "
            "is nothing to tune on: use --tuning online or given, or a larger --tune-fraction"
        )
    choices = {p.name: tuned(known, cluster, p, uplink_factor, fabric) for p in bases if p.name in TIMED}
    policies = [choices[p.name].policy if p.name in choices else p for p in bases]
    few = (
        f"; {len(known)} finished job(s) are too few to tune on (the given timers stay unless a gain stands "
        "out of their noise): use --tuning online or given, or a larger --tune-fraction"
        if len(known) < FEWEST_TUNING_JOBS else ""
    )
    return (
        policies,
        rest,
        (
            f"timers tuned on the {len(known)} of the first {len(first)} jobs ({fraction:.0%} by arrival) "
            f"that had finished when the next arrived (lowest average JCT, where it beats the given timer "
            f"beyond the noise): {'; '.join(choice.said for choice in choices.values())}; every policy "
            f"reported on the other {len(rest)}{few}"
        ),
    )


def finished_by(
    jobs: list[TraceJob], cut_s: float, cluster: Cluster, uplink_factor: float, fabric: Fabric | None
) -> list[TraceJob]:
    """The jobs that had finished by `cut_s` when scheduled by consolidate (no timers to tune): only their
    durations are known then."""
    outcomes = simulate(jobs, cluster, Policy("consolidate"), uplink_factor, fabric)
    return [o.job for o in outcomes if o.finish_s <= cut_s]


def _none_finished(count: int) -> str:
    """'none of the first 5 jobs had finished', or 'the first job had not finished' ('none of the first 1
    jobs' read oddly)."""
    if count == 1:
        return "the first job had not finished"
    return f"none of the first {count:,} jobs had finished"
