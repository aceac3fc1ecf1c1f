"""The launches of each run, pooled into the run's record: its figures over rounds of launches.

Every run is launched once per round (engine/plan.py round_order). A run's record keeps each launch's own
figures under `launches` and, where it always had them, the pooled ones: `iteration_s.mean` is the plain
mean of the launches' means and `iteration_s.ci95` the interval of stats.pool_rounds (the rounds and the
iterations); the samples are the launches' kept samples one after the other, and so is the telemetry, its
times on the profile's clock (seconds since the first launch started). Only rounds that every run
completed are pooled (a round past the planned ones launches only the runs still needed: engine/rounds.py),
so that a stall's runs have the same rounds to pair; a profile ended during its first round pools the first
launch of each run that has one (one launch per run, as before rounds).
"""

from __future__ import annotations

import math

from stash_core.analysis.stats import Pooled, launch_of_rounds, pool_rounds, summarise
from stash_core.engine.paired import FIRST_STARTUP_ESTIMATE_S, PAIRED_RUNS, group_rounds
from stash_core.engine.spread_cause import (  # noqa: F401 - where the rounds' warnings and tests find them
    CAP_REASONS,
    OTHER_LOAD_MEAN_CORES,
    SCRIPT_ENDED,
    launch_spread_finding,
    slope,
    spread_cause,
    within_launch_lag1,
)

# Why the rounds ended before every run reached its target (LaunchedRuns.stopped_by).
ROUNDS_BY_TIME = "time"
ROUNDS_BY_COUNT = "rounds"
MIN_LAUNCH_CAP_S = 2.0  # a launch's timed loop gets at least this, even when start-up ate the run's budget


class LaunchedRuns:
    """The completed launches of a profile's runs, by run name, each with its round."""

    def __init__(self, names: list[str], launches: int) -> None:
        self.names = list(names)
        self.launches = launches
        self.outcomes: dict[str, list[tuple[int, dict]]] = {name: [] for name in names}
        self.stopped_by: str | None = None  # ROUNDS_BY_TIME or ROUNDS_BY_COUNT when runs were left short
        self.planned: dict[int, list[str]] = {}  # round -> the runs it launches (every run when not given)

    def add(self, name: str, round_index: int, outcome: dict) -> None:
        self.outcomes[name].append((round_index, outcome))

    def plan_round(self, round_index: int, names: list[str]) -> None:
        """The runs a round launches: all of them in the planned rounds, those still needed after."""
        self.planned[round_index] = list(names)

    def pooled_rounds(self, name: str | None = None) -> list[int]:
        """The complete rounds (every run planned for them completed it), or those of one run; [0] when no
        round is complete (a profile ended in its first round keeps the first launch of each run)."""
        done = {n: {round_index for round_index, _ in self.outcomes[n]} for n in self.names}
        seen = sorted(set().union(*done.values())) if done else []
        complete = [r for r in seen if all(r in done[n] for n in self.planned.get(r, self.names))]
        complete = complete or [0]
        return complete if name is None else [r for r in complete if r in done.get(name, set())]

    def round_figures(self, name: str) -> dict[int, tuple[float, float]]:
        """A run's (mean_s, ci95_s) in each of its pooled rounds, for the paired intervals of its stalls (a
        launch of R0 and R1 together gives one sub-round per group of blocks: engine/paired.py)."""
        rounds = set(self.pooled_rounds(name))
        return figures_by_round([(r, outcome) for r, outcome in self.outcomes[name] if r in rounds])

    def pooled(self, name: str) -> Pooled | None:
        """A run's figure over its pooled rounds, or None when it has no launch in them."""
        by_round = self.round_figures(name)
        if not by_round:
            return None
        return pooled_figures(by_round)

    def launch_wall_s(self, name: str) -> float:
        """The mean wall time of a run's launches so far, start-up included (0 before its first)."""
        walls = [outcome.get("wall_s") or 0.0 for _, outcome in self.outcomes.get(name, [])]
        return math.fsum(walls) / len(walls) if walls else 0.0

    def grouped(self, name: str) -> bool:
        """Whether a run's rounds are groups of blocks (R0 and R1 timed in one launch)."""
        return any("groups_s" in outcome for _, outcome in self.outcomes.get(name, []))

    def round_cost_s(self, runs: tuple[str, ...]) -> float:
        """The wall time of one more round of `runs`: a launch of each; runs timed in one launch (R0 and R1,
        paired) count once, at that launch's mean time (start-up included)."""
        grouped = [name for name in runs if self.grouped(name)]
        cost = math.fsum(self.launch_wall_s(name) for name in runs if name not in grouped)
        if grouped:
            cost += math.fsum(self.launch_wall_s(name) for name in self.names if name in PAIRED_RUNS)
        return cost

    def rounds_done(self, name: str) -> int:
        """A run's pooled launches: the rounds a further one adds to (for paired runs too, whose groups of
        blocks are their rounds within a launch, since more launches, not longer ones, narrow what launches
        disagree by)."""
        rounds = set(self.pooled_rounds(name))
        return sum(1 for r, _ in self.outcomes[name] if r in rounds)

    def wall_s(self, round_index: int | None = None) -> float:
        """Wall time of the launches so far (start-up included), or of one round's."""
        return math.fsum(
            outcome.get("wall_s") or 0.0
            for outcomes in self.outcomes.values()
            for r, outcome in outcomes
            if round_index is None or r == round_index
        )

    def run_wall_s(self, name: str) -> float:
        """Wall time of one run's launches so far, start-up included."""
        return math.fsum(outcome.get("wall_s") or 0.0 for _, outcome in self.outcomes.get(name, []))

    def startup_s(self, name: str) -> float:
        """A run's start-up per launch so far: wall time minus the time of its iterations (warm-up
        included), the largest of its launches (0 before its first)."""
        found = [0.0]
        for _, outcome in self.outcomes.get(name, []):
            summary = outcome.get("iteration_s") or {}
            kept = outcome.get("iterations") or summary.get("n") or 0
            loop_s = (summary.get("mean") or 0.0) * (kept + (outcome.get("warmup_iterations") or 0))
            found.append(max(0.0, (outcome.get("wall_s") or 0.0) - loop_s))
        return max(found)

    def expected_startup_s(self, name: str) -> float:
        """The start-up a run's next launch is expected to take: its own largest so far; before its first
        launch the largest any run of the profile took, and FIRST_STARTUP_ESTIMATE_S before any launch."""
        if self.outcomes.get(name):
            return self.startup_s(name)
        others = [self.startup_s(other) for other, outcomes in self.outcomes.items() if outcomes]
        return max(others) if others else FIRST_STARTUP_ESTIMATE_S

    def launch_cap_s(self, name: str, max_phase_s: float, launches_left: int, planned_cap_s: float) -> float:
        """The time cap of a run's next planned launch, its first included, so that its launches keep to
        --max-phase-seconds in all, start-up included: what the run has left, shared over its launches still
        due, less the start-up expected; never above the planned share, nor below MIN_LAUNCH_CAP_S."""
        left_s = (max_phase_s - self.run_wall_s(name)) / max(launches_left, 1) - self.expected_startup_s(name)
        return max(MIN_LAUNCH_CAP_S, min(planned_cap_s, left_s))

    def pool_into(self, records: list[dict]) -> list[str]:
        """Fill each record that has launches in the pooled rounds with their pooled figures, and keep every
        launch's own figures under `launches`. A run whose later launch failed keeps the rounds it completed
        before, as an interrupted run does (the profile is still the failed one): the warnings that say so
        are returned."""
        warnings = []
        for record in records:
            rounds = set(self.pooled_rounds(record["name"]))
            outcomes = self.outcomes.get(record["name"]) or []
            if not outcomes:
                continue
            record["launches_planned"] = self.launches
            record["launches"] = [launch_entry(r, outcome, r in rounds) for r, outcome in outcomes]
            used = [(r, outcome) for r, outcome in outcomes if r in rounds]
            if not used:
                continue
            if record.get("status") == "failed":
                warnings.append(f"{record['name']}: a later launch failed ({record.get('error')}); its "
                                f"figure is from the {len(used)} launch(es) it completed before")  # fmt: skip
            pool_record(record, used)
        return warnings


def figures_by_round(launched: list[tuple[int, dict]]) -> dict[int, tuple[float, float]]:
    """(mean_s, ci95_s) by round of a run's launches (round, outcome): one per launch, or one per group of
    blocks of a launch that timed R0 and R1 together (engine/paired.py)."""
    figures: dict[int, tuple[float, float]] = {}
    for round_index, outcome in launched:
        if outcome.get("groups_s"):
            figures.update(group_rounds(round_index, outcome))
        else:
            figures[round_index] = (outcome["iteration_s"]["mean"], outcome["iteration_s"]["ci95"])
    return figures


def pooled_figures(by_round: dict[int, tuple[float, float]]) -> Pooled:
    """A run's figure over its rounds in time order (groups of blocks never narrower than their launches)."""
    keys = sorted(by_round)
    return pool_rounds([by_round[k][0] for k in keys], [by_round[k][1] for k in keys], launch_of_rounds(keys))


def launch_entry(round_index: int, outcome: dict, pooled: bool) -> dict:
    """One launch as the record keeps it: its own mean and interval, iterations and why it stopped (and the
    means of its groups of blocks when R0 and R1 were timed together)."""
    summary = outcome["iteration_s"]
    groups = {"groups_s": outcome["groups_s"]} if outcome.get("groups_s") else {}
    return {
        **groups,
        "round": round_index,
        "pooled": pooled,
        "mean_s": summary["mean"],
        "ci95_s": summary["ci95"],
        "iterations": outcome["iterations"],
        "warmup_iterations": outcome["warmup_iterations"],
        "stop_reason": outcome["stop_reason"],
        "wall_s": outcome.get("wall_s"),
        "started_s": outcome.get("started_s"),
        "resident_fraction_start": outcome.get("resident_fraction_start"),
        "other_cores": other_cores(outcome.get("machine_load")),
    }


def other_cores(load: dict | None) -> float | None:
    """Cores other processes kept busy during a launch, on average (engine/machine_load.py); None unknown."""
    if not load or not load.get("wall_s"):
        return None
    return round((load["other_cpu_s"] + load["steal_s"]) / load["wall_s"], 3)


def pool_record(record: dict, launched: list[tuple[int, dict]]) -> None:
    """The run's figures from its launches (round, outcome), one per pooled round, in round order."""
    used = [outcome for _, outcome in launched]
    samples: dict[str, list] = {key: [] for key in used[0]["samples"]}
    for outcome in used:
        for key in samples:
            samples[key].extend(outcome["samples"].get(key) or [])
    pooled = pooled_figures(figures_by_round(launched))
    summary = summarise(samples["iteration_s"]).to_dict()
    summary.update(mean=pooled.mean, ci95=pooled.ci95)  # the rounds' mean, as every stall pairs them
    first = used[0]
    own = ("name", "status", "error", "groups_s")  # groups_s stays with each launch's entry
    record.update({key: value for key, value in first.items() if key not in own})
    record.update(
        {
            "status": "completed",
            "error": None,
            "iterations": summary["n"],
            "warmup_iterations": sum(o["warmup_iterations"] for o in used),
            "iteration_s": summary,
            "pooled": pooled.to_dict(),
            "parts_mean_s": _mean_parts([o["parts_mean_s"] for o in used]),
            "samples": samples,
            "rank_skew_s": mean_measured([o["rank_skew_s"] for o in used]),
            "stop_reason": stop_reason_of(used),
            "wall_s": math.fsum(o.get("wall_s") or 0.0 for o in used),
            "telemetry": joined_telemetry(used),
        }
    )
    scripts = [o["script"] for o in used if isinstance(o.get("script"), dict)]
    if scripts:  # the ranks were gathered only if every launch gathered them, not as the first one did
        gathered = [s.get("ranks_gathered") for s in scripts]
        ended = [s["group_ended_after"] for s in scripts if s.get("group_ended_after") is not None]
        record["script"] = {**scripts[0], "ranks_gathered": False if False in gathered else gathered[0],
                            "group_ended_after": min(ended, default=None)}  # fmt: skip


def mean_measured(values: list[float | None]) -> float | None:
    """The mean of the launches' figures that were measured (None: a launch that could not measure it)."""
    measured = [value for value in values if value is not None]
    return math.fsum(measured) / len(measured) if measured else None


def on_profile_clock(outcome: dict, started_s: float) -> dict:
    """The launch `outcome` (as run_phase gives it), started `started_s` seconds after the profile's first
    launch, with its telemetry's times moved from the launch's clock to the profile's (in place)."""
    outcome["started_s"] = round(started_s, 3)
    telemetry = outcome.get("telemetry")
    if isinstance(telemetry, dict):
        telemetry["t_s"] = [round(t + started_s, 3) for t in telemetry.get("t_s") or []]
        for event in telemetry.get("events") or []:
            event["t_s"] = round(event["t_s"] + started_s, 3)
    return outcome


def joined_telemetry(used: list[dict]) -> dict:
    """The telemetry of a run's launches `used`, one after the other on the profile's clock, so that the
    samples show when each launch ran between the other runs' launches. A metric one launch lacks holds None
    over its samples."""
    blocks = [o.get("telemetry") or {} for o in used]
    names = list(dict.fromkeys(name for block in blocks for name in block.get("metrics") or {}))
    joined: dict = {"interval_s": next((b["interval_s"] for b in blocks if b.get("interval_s")), None),
                    "gpu_status": next((b["gpu_status"] for b in blocks if b.get("gpu_status")), None),
                    "t_s": [], "metrics": {name: [] for name in names}}  # fmt: skip
    for block in blocks:
        times = block.get("t_s") or []
        joined["t_s"].extend(times)
        for name in names:
            joined["metrics"][name].extend((block.get("metrics") or {}).get(name) or [None] * len(times))
        if block.get("events"):
            joined.setdefault("events", []).extend(block["events"])
    return joined


def stop_reason_of(used: list[dict]) -> str:
    """A cap when any launch stopped at one (the time cap first), else the first launch's reason."""
    reasons = [o["stop_reason"] for o in used]
    return next((cap for cap in CAP_REASONS if cap in reasons), reasons[0])


def _mean_parts(parts: list[dict]) -> dict:
    keys = parts[0].keys()
    return {
        key: None if any(p.get(key) is None for p in parts) else math.fsum(p[key] for p in parts) / len(parts)
        for key in keys
    }


def rounds_of(record: dict) -> dict[int, tuple[float, float]] | None:
    """A pooled run's (mean_s, ci95_s) by pooled round, for the paired intervals of its stalls."""
    launches = [launch for launch in record.get("launches") or [] if launch.get("pooled")]
    if not launches:
        return None
    return figures_by_round(
        [(launch["round"], {**launch, "iteration_s": {"mean": launch["mean_s"], "ci95": launch["ci95_s"]}})
         for launch in launches]
    )  # fmt: skip
