"""The launches of each run, pooled into the run's record: its figures over rounds of launches.

Every run is launched once per round (engine/plan.py round_order). A run's record keeps each launch's own
figures under `launches` and, where it always had them, the pooled ones: `iteration_s.mean` is the plain
mean of the launches' means and `iteration_s.ci95` the interval of stats.pool_rounds (the rounds and the
iterations); the samples are the launches' kept samples one after the other, and so is the telemetry, its
times on the profile's clock (seconds since the first launch started). Only rounds that every run
completed are pooled, so that every stall's runs have the same rounds to pair; a profile ended during its
first round pools the first launch of each run that has one (one launch per run, as before rounds).

With --iterations auto, rounds go on past the planned ones while a run's pooled interval is short of the
target (next_round): up to plan.max_rounds_of and while the next round fits in the time budget, the runs'
--max-phase-seconds together, start-up included. A run short of its target says which of the two ended it.
"""

from __future__ import annotations

import math

from stash_core.analysis.stats import Pooled, pool_rounds, summarise

CAP_REASONS = ("max_time", "max_iterations")
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

    def add(self, name: str, round_index: int, outcome: dict) -> None:
        self.outcomes[name].append((round_index, outcome))

    def pooled_rounds(self) -> list[int]:
        """The rounds every run completed; [0] when none was (a profile ended in its first round)."""
        per_run = [{round_index for round_index, _ in self.outcomes[name]} for name in self.names]
        common = sorted(set.intersection(*per_run)) if per_run else []
        return common or [0]

    def pooled(self, name: str) -> Pooled | None:
        """A run's figure over the pooled rounds, or None when it has no launch in them."""
        rounds = set(self.pooled_rounds())
        used = [outcome["iteration_s"] for r, outcome in self.outcomes[name] if r in rounds]
        if not used:
            return None
        return pool_rounds([x["mean"] for x in used], [x["ci95"] for x in used])

    def short_of_target(self, target_relative_ci: float) -> list[str]:
        """The runs whose pooled interval is wider than the target (relative to their mean)."""
        short = []
        for name in self.names:
            pooled = self.pooled(name)
            if pooled is None or not pooled.mean > 0 or pooled.ci95 > target_relative_ci * pooled.mean:
                short.append(name)
        return short

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

    def launch_cap_s(self, name: str, max_phase_s: float, launches_left: int, planned_cap_s: float) -> float:
        """The time cap of a run's next planned launch, so that its launches keep to --max-phase-seconds in
        all, start-up included: what the run has left, shared over its launches still due, less a start-up
        like its largest so far; never above the planned share, nor below MIN_LAUNCH_CAP_S."""
        left_s = (max_phase_s - self.run_wall_s(name)) / max(launches_left, 1) - self.startup_s(name)
        return max(MIN_LAUNCH_CAP_S, min(planned_cap_s, left_s))

    def next_round(
        self, rounds_done: int, max_rounds: int, target_relative_ci: float, budget_s: float
    ) -> list[str]:
        """The runs still short of the target when one more round is due (a sequential rule: rounds go on
        until every run reaches the target), [] when the rounds are over. The rounds end short of the target
        at max_rounds, or when one more round like the last would take the launches past budget_s; which of
        the two is kept in stopped_by."""
        short = self.short_of_target(target_relative_ci)
        if not short:
            return []
        if rounds_done >= max_rounds:
            self.stopped_by = ROUNDS_BY_COUNT
            return []
        if self.wall_s() + self.wall_s(rounds_done - 1) > budget_s:
            self.stopped_by = ROUNDS_BY_TIME
            return []
        return short

    def pool_into(self, records: list[dict]) -> None:
        """Fill each record (not failed) that has launches in the pooled rounds with their pooled figures,
        and keep every launch's own figures under `launches`."""
        rounds = set(self.pooled_rounds())
        for record in records:
            outcomes = self.outcomes.get(record["name"]) or []
            if not outcomes:
                continue
            record["launches_planned"] = self.launches
            record["launches"] = [launch_entry(r, outcome, r in rounds) for r, outcome in outcomes]
            used = [outcome for r, outcome in outcomes if r in rounds]
            if record.get("status") == "failed" or not used:
                continue
            pool_record(record, used)


def launch_entry(round_index: int, outcome: dict, pooled: bool) -> dict:
    """One launch as the record keeps it: its own mean and interval, iterations and why it stopped."""
    summary = outcome["iteration_s"]
    return {
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
    }


def pool_record(record: dict, used: list[dict]) -> None:
    """The run's figures from its launches `used` (one per pooled round, in round order)."""
    samples: dict[str, list] = {key: [] for key in used[0]["samples"]}
    for outcome in used:
        for key in samples:
            samples[key].extend(outcome["samples"].get(key) or [])
    pooled = pool_rounds([o["iteration_s"]["mean"] for o in used], [o["iteration_s"]["ci95"] for o in used])
    summary = summarise(samples["iteration_s"]).to_dict()
    summary.update(mean=pooled.mean, ci95=pooled.ci95)  # the rounds' mean, as every stall pairs them
    first = used[0]
    record.update({key: value for key, value in first.items() if key not in ("name", "status", "error")})
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
            "rank_skew_s": math.fsum(o["rank_skew_s"] for o in used) / len(used),
            "stop_reason": stop_reason_of(used),
            "wall_s": math.fsum(o.get("wall_s") or 0.0 for o in used),
            "telemetry": joined_telemetry(used),
        }
    )


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


def rounds_of(record: dict) -> list[tuple[float, float]] | None:
    """A pooled run's (mean_s, ci95_s) per pooled round, for the paired intervals of its stalls."""
    launches = [launch for launch in record.get("launches") or [] if launch.get("pooled")]
    if not launches:
        return None
    return [(launch["mean_s"], launch["ci95_s"]) for launch in sorted(launches, key=lambda x: x["round"])]


def pooled_warnings(
    records: list[dict],
    target_relative_ci: float,
    fixed: bool,
    max_phase_s: float,
    launches: int,
    stopped_by: str | None = None,
) -> list[str]:
    """What a reader must know of the pooled runs: a run short of its target (why, and what to do), and a
    profile that ended before all its planned rounds."""
    warnings: list[str] = []
    completed = [r for r in records if r.get("status") == "completed" and r.get("launches")]
    for record in completed:
        summary = record["iteration_s"]
        relative = summary["ci95"] / summary["mean"] if summary["mean"] > 0 else math.inf
        if fixed or relative <= target_relative_ci:
            continue
        used = [launch for launch in record["launches"] if launch["pooled"]]
        count = f"{len(used)} launch{'es' if len(used) != 1 else ''}"
        target = f"target ± {target_relative_ci:.0%}"
        reached = f"± {relative:.1%} after {summary['n']} kept iterations over {count} ({target})"
        pooled = record.get("pooled") or {}
        disagree = (pooled.get("between_ci95") or 0.0) > (pooled.get("within_ci95") or 0.0)
        more_time = f"more time (--max-phase-seconds, now {max_phase_s:g} s per run)"
        if disagree:
            why = {
                ROUNDS_BY_TIME: f"the rounds stopped at the time budget: {more_time} allows more rounds",
                ROUNDS_BY_COUNT: "the rounds stopped at their cap: a quieter machine would narrow it",
            }.get(stopped_by or "", "more launches (--launches) would narrow it")
            warnings.append(
                f"{record['name']}: {reached}: its launches disagree more than their iterations do (other "
                f"load on the machine); {why}; or accept a wider --target-ci"
            )
        elif record["stop_reason"] in CAP_REASONS:
            cap = "iteration" if record["stop_reason"] == "max_iterations" else "time"
            warnings.append(
                f"{record['name']}: stopped at the {cap} cap with {reached}; to reach the target give it "
                f"{more_time}, measure fewer stalls (--stalls), or accept a wider --target-ci"
            )
    rounds = {launch["round"] for record in completed for launch in record["launches"] if launch["pooled"]}
    if completed and len(rounds) < launches:
        warnings.append(
            f"intervals from {len(rounds)} of {launches} rounds of launches: the profile ended before the "
            "others"
        )
    return warnings


def epoch_boundary_warning(records: list[dict], iterations_per_epoch: int | None) -> str | None:
    """Mark each real-data run with whether one of its launches ran past an epoch's end (the loader's restart
    and reshuffle are then in its figures); a warning when a real-data run never did."""
    missed = []
    for record in records:
        if record.get("data") == "synthetic" or not record.get("launches") or not iterations_per_epoch:
            continue
        longest = max(launch["iterations"] + launch["warmup_iterations"] for launch in record["launches"])
        record["epoch_boundary_crossed"] = longest > iterations_per_epoch
        if not record["epoch_boundary_crossed"]:
            missed.append((record["name"], longest))
    if not missed:
        return None
    runs = ", ".join(f"{name} (longest launch {longest} iterations)" for name, longest in missed)
    return (
        f"no launch of {runs} ran past an epoch's end ({iterations_per_epoch} iterations per epoch): the "
        "cost at the start of each epoch (loader restart, reshuffle) is not in these figures; a smaller data "
        "set or more iterations per launch would include it"
    )
