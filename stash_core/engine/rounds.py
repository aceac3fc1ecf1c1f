"""After the planned rounds: which runs the next round launches, from the stalls still short of the target.

The target (--target-ci) holds for the iteration time and for every stall of at least that share of it (at
± 10%, a stall of 10% of the iteration or more); a smaller stall is reported at the precision the rounds
reach, since holding it to its own ± 10% could take more time than the whole profile. A round past the
planned ones launches only the runs of the stalls still short: the time goes where the intervals are widest,
not to runs whose stalls are done. It goes only to the stalls that can reach the target in the time left:
from the interval reached so far and how a Student-t interval over the rounds narrows (t(k-1) / sqrt(k) at
the spread seen), the rounds each still needs and their time; one that cannot is said at once, with the
time it would need, and the rounds go to the others.
"""

from __future__ import annotations

import math
from collections.abc import Collection
from dataclasses import dataclass

from stash_core.analysis.stalls import STALL_OF_PHASE, PhaseTime, breakdown
from stash_core.analysis.stats import launch_of_rounds, t_quantile_975
from stash_core.engine.data_setup import cold_start_cached
from stash_core.engine.launches import ROUNDS_BY_COUNT, ROUNDS_BY_TIME
from stash_core.engine.paired import variance_components
from stash_core.engine.script_job import no_loader_stalls, uncommunicating, unread_data_dir_stalls

ITERATION = "iteration"  # the iteration time (the last run of the chain), held to the target like a stall
MAX_ROUNDS_ESTIMATED = 1000


@dataclass(frozen=True)
class Shortfall:
    """A stall (or the iteration time) whose interval is still wider than its goal."""

    stall: str
    runs: tuple[str, ...]  # the runs its figure is made of
    value_s: float
    ci95_s: float
    goal_s: float  # target x value
    rounds: int  # rounds its figure pools so far
    rounds_needed: int | None  # total rounds to reach the goal at the spread seen; None: not within 1000
    seconds_needed: float | None  # wall time of the rounds still needed, its runs' launches only

    @property
    def relative_ci(self) -> float:
        return self.ci95_s / abs(self.value_s) if self.value_s else math.inf

    def text(self, target: float) -> str:
        """'interconnect: ± 18% after 3 rounds (target ± 10%); about 6 more rounds of R0 R1 (50 s)'."""
        label = "the iteration time" if self.stall == ITERATION else self.stall
        rounds = f"{self.rounds} round" + ("" if self.rounds == 1 else "s")
        reached = f"{self.relative_ci:.0%}"
        if reached == f"{target:.0%}":  # 2.2% against 2%: a digit more, or it reads as met
            reached = f"{self.relative_ci:.1%}"
        head = f"{label}: ± {reached} after {rounds} (target ± {target:.0%})"
        if self.rounds_needed is None or self.seconds_needed is None:
            return f"{head}; more than {MAX_ROUNDS_ESTIMATED} rounds would be needed at this spread"
        more = self.rounds_needed - self.rounds
        return f"{head}; about {more} more round{'s' if more != 1 else ''} of {' '.join(self.runs)} " \
               f"({self.seconds_needed:.0f} s)"  # fmt: skip


def rounds_needed(
    ci95_s: float, goal_s: float, rounds: int, groups: list[list[float]] | None = None
) -> int | None:
    """Rounds (launches) for an interval of ci95_s over `rounds` of them to narrow to goal_s at the same
    spread: the Student-t interval over k rounds is t(k-1) * sd / sqrt(k). Where the figure is made of
    groups of blocks (R0 and R1 timed together: `groups`, each launch's), from their spread within and
    between launches (launches_needed). None when more than MAX_ROUNDS_ESTIMATED."""
    if ci95_s <= goal_s:
        return rounds
    if groups and sum(len(launch) for launch in groups) > len(groups):
        return launches_needed(groups, goal_s)
    if rounds < 2:  # no spread over rounds yet: take the launch's own interval as one round's
        spread = ci95_s / 1.96
    else:
        spread = ci95_s * math.sqrt(rounds) / t_quantile_975(rounds - 1)
    for k in range(max(rounds + 1, 2), MAX_ROUNDS_ESTIMATED + 1):
        if t_quantile_975(k - 1) * spread / math.sqrt(k) <= goal_s:
            return k
    return None


def launches_needed(groups: list[list[float]], goal_s: float) -> int | None:
    """Launches for the mean of launches of groups to reach an interval of goal_s, as stats.pool_rounds pools
    them (Student's t over the launches' means): a later launch's mean varies by the launches' own spread
    (between) and by its groups' (within, over as many groups as the last launch kept). Taking the interval
    over all the groups for a launch's asked for twice the launches a simulation of the pooling needs; taking
    it as the launches' alone, half."""
    kept = [launch for launch in groups if launch]
    within, between = variance_components(kept)
    sd = math.sqrt(max(between, 0.0) + within / len(kept[-1]))
    for k in range(len(kept) + 1, MAX_ROUNDS_ESTIMATED + 1):
        if t_quantile_975(k - 1) * sd / math.sqrt(k) <= goal_s:
            return k
    return None


def stall_groups(
    runs: tuple[str, ...], figures: dict[str, dict[int, tuple[float, float]]]
) -> list[list[float]] | None:
    """A stall's figure in each group of blocks its runs were timed in together, by launch (its one run's
    mean, or the second run's less the first's); None where they were not timed in groups."""
    keys = sorted(set.intersection(*(set(figures.get(run) or {}) for run in runs)))
    launches = launch_of_rounds(keys) if keys else None
    if launches is None:
        return None
    by_launch: dict[int, list[float]] = {}
    for key, launch in zip(keys, launches, strict=True):
        value = figures[runs[-1]][key][0] - (figures[runs[0]][key][0] if len(runs) > 1 else 0.0)
        by_launch.setdefault(launch, []).append(value)
    return list(by_launch.values())


def stall_runs(chain: list[str], measured: list[str]) -> dict[str, tuple[str, ...]]:
    """Each stall's runs, as the breakdown differences them: the first measured run alone (compute), then
    each run with the measured run before it when they are next to each other in the chain."""
    found: dict[str, tuple[str, ...]] = {}
    previous = None
    for phase in [p for p in chain if p in measured]:
        if previous is None:
            if phase == "R0":
                found[STALL_OF_PHASE[phase]] = (phase,)
        elif chain.index(phase) - chain.index(previous) == 1:
            found[STALL_OF_PHASE[phase]] = (previous, phase)
        previous = phase
    return found


def shortfalls(
    breakdown: dict,
    chain: list[str],
    target: float,
    rounds_by_run: dict[str, int],
    launch_wall_s: dict[str, float],
    round_cost_s=None,
    figures_by_run: dict[str, dict[int, tuple[float, float]]] | None = None,
) -> list[Shortfall]:
    """The iteration time and the stalls of at least `target` of it whose interval is wider than target x
    their value, with the rounds and time each would still need (launch_wall_s: a run's mean launch time;
    round_cost_s(runs), where given: one more round of the runs, e.g. LaunchedRuns.round_cost_s;
    figures_by_run: each run's (mean_s, ci95_s) by round key, groups of blocks where it has them)."""
    if round_cost_s is None:
        round_cost_s = lambda runs: math.fsum(launch_wall_s.get(run, 0.0) for run in runs)  # noqa: E731
    iteration_s = breakdown.get("iteration_s") or 0.0
    measured = [name for name in chain if name in rounds_by_run]
    figures: list[tuple[str, tuple[str, ...], float, float | None]] = []
    runs_of = stall_runs(chain, measured)
    for stall, runs in runs_of.items():
        entry = (breakdown.get("stalls") or {}).get(stall) or {}
        value_s = entry.get("raw_s") if entry.get("raw_s") is not None else entry.get("seconds")
        if entry.get("status") in (None, "not_measured", "not_separable") or value_s is None:
            continue
        if abs(value_s) < target * iteration_s:
            continue  # a small stall: reported at the precision reached
        figures.append((stall, runs, value_s, entry.get("ci95_s")))
    if measured and (measured[-1],) not in runs_of.values():  # R0 alone is the compute stall already
        figures.append((ITERATION, (measured[-1],), iteration_s, breakdown.get("iteration_ci95_s")))
    found = []
    for stall, runs, value_s, ci95_s in figures:
        goal_s = target * abs(value_s)
        if ci95_s is None or not value_s or ci95_s <= goal_s:
            continue
        done = min(rounds_by_run.get(run, 0) for run in runs)
        groups = stall_groups(runs, figures_by_run) if figures_by_run else None
        needed = rounds_needed(ci95_s, goal_s, done, groups)
        seconds = None
        if needed is not None:
            seconds = (needed - done) * round_cost_s(runs)
        found.append(Shortfall(stall, runs, value_s, ci95_s, goal_s, done, needed, seconds))
    return found


def next_runs(short: list[Shortfall], time_left_s: float) -> tuple[list[str], list[Shortfall]]:
    """The runs of the next round (those of the shortfalls that can reach their goal in time_left_s, in
    chain order as the caller orders them) and the shortfalls that cannot."""
    feasible = [s for s in short if s.seconds_needed is not None and s.seconds_needed <= time_left_s]
    hopeless = [s for s in short if s not in feasible]
    runs = list(dict.fromkeys(run for s in feasible for run in s.runs))
    return runs, hopeless


def given_up_notes(
    hopeless: list[Shortfall], next_runs_: list[str], said: set[str], target: float, time_left_s: float
) -> list[str]:
    """Notes, while the profile runs, of stalls whose rounds stop while others' go on; each once (said holds
    the stalls said so far). With no round left, the profile's closing warning says it, so nothing is."""
    notes = []
    for shortfall in hopeless if next_runs_ else []:
        if shortfall.stall not in said:
            said.add(shortfall.stall)
            left = f"more than the time left ({max(time_left_s, 0):.0f} s)"
            notes.append(f"note: {shortfall.text(target)}: {left}, so no round is run for it alone; those "
                         "of the other stalls go on")  # fmt: skip
    return notes


def current_shortfalls(
    launched, chain: list[str], target: float, asked: Collection[str] | None = None
) -> list[Shortfall]:
    """The shortfalls of the launches so far (engine/launches.LaunchedRuns), each run over its pooled rounds
    and each stall over its runs' paired rounds, as the profile's breakdown will take them; of the stalls
    `asked` (None: all) and the iteration time. A stall the chain measures on the way (interconnect, of a
    profile asked for the network) gets no rounds and no advice of its own."""
    times, rounds = {}, {}
    for name in launched.names:
        pooled = launched.pooled(name)
        if pooled is None or not pooled.mean > 0:
            continue
        times[name] = PhaseTime(pooled.mean, pooled.ci95)
        rounds[name] = launched.round_figures(name)
    if not times:
        return []
    # A stall with nothing to measure gets no round and no advice: the disk stall of a cold run that started
    # cached; a script's communication where it sets up no process group, its CPU and disk stalls where it
    # iterates no DataLoader, its disk stall where it reads nothing under --data-dir (the breakdown says
    # why: profiler.breakdown_of_completed).
    cached = cold_start_cached(
        outcome.get("resident_fraction_start") for _, outcome in launched.outcomes.get("R2", [])
    )
    outcomes = launched.outcomes
    latest = [dict(outcomes[name][-1][1], name=name) for name in times if outcomes.get(name)]
    unmeasured = {**uncommunicating(latest), **unread_data_dir_stalls(latest, ("disk",)),
                  **no_loader_stalls(latest, ("cpu", "disk"))}  # fmt: skip
    if cached is not None:
        unmeasured["disk"] = "R2 started cached"
    result = breakdown(times, chain, None, unmeasured or None, rounds)
    walls = {name: launched.launch_wall_s(name) for name in times}
    counts = {name: launched.rounds_done(name) for name in times}
    found = shortfalls(result, chain, target, counts, walls, launched.round_cost_s, rounds)
    return [s for s in found if asked is None or s.stall == ITERATION or s.stall in asked]


def decide_next_round(
    launched, chain: list[str], target: float, rounds_done: int, max_rounds: int, budget_s: float,
    asked: Collection[str] | None = None,
) -> tuple[list[str], list[Shortfall], list[Shortfall]]:
    """(the runs of the next round, every shortfall, those that cannot reach the target in the time left).
    No runs: the rounds are over, with launched.stopped_by saying why when something is still short."""
    short = current_shortfalls(launched, chain, target, asked)
    if not short:
        return [], [], []
    if rounds_done >= max_rounds:
        launched.stopped_by = ROUNDS_BY_COUNT
        return [], short, []
    runs, hopeless = next_runs(short, budget_s - launched.wall_s())
    if not runs:
        launched.stopped_by = ROUNDS_BY_TIME
    return runs, short, hopeless
