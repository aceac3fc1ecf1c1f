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
        """A run's (mean_s, ci95_s) in each of its pooled rounds, for the paired intervals of its stalls."""
        rounds = set(self.pooled_rounds(name))
        return {
            r: (outcome["iteration_s"]["mean"], outcome["iteration_s"]["ci95"])
            for r, outcome in self.outcomes[name]
            if r in rounds
        }

    def pooled(self, name: str) -> Pooled | None:
        """A run's figure over its pooled rounds, or None when it has no launch in them."""
        rounds = set(self.pooled_rounds(name))
        used = [outcome["iteration_s"] for r, outcome in self.outcomes[name] if r in rounds]
        if not used:
            return None
        return pool_rounds([x["mean"] for x in used], [x["ci95"] for x in used])

    def launch_wall_s(self, name: str) -> float:
        """The mean wall time of a run's launches so far, start-up included (0 before its first)."""
        walls = [outcome.get("wall_s") or 0.0 for _, outcome in self.outcomes.get(name, [])]
        return math.fsum(walls) / len(walls) if walls else 0.0

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

    def pool_into(self, records: list[dict]) -> None:
        """Fill each record (not failed) that has launches in the pooled rounds with their pooled figures,
        and keep every launch's own figures under `launches`."""
        for record in records:
            rounds = set(self.pooled_rounds(record["name"]))
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
        "other_cores": other_cores(outcome.get("machine_load")),
    }


def other_cores(load: dict | None) -> float | None:
    """Cores other processes kept busy during a launch, on average (engine/machine_load.py); None unknown."""
    if not load or not load.get("wall_s"):
        return None
    return round((load["other_cpu_s"] + load["steal_s"]) / load["wall_s"], 3)


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


def rounds_of(record: dict) -> dict[int, tuple[float, float]] | None:
    """A pooled run's (mean_s, ci95_s) by pooled round, for the paired intervals of its stalls."""
    launches = [launch for launch in record.get("launches") or [] if launch.get("pooled")]
    if not launches:
        return None
    return {launch["round"]: (launch["mean_s"], launch["ci95_s"]) for launch in launches}


def pooled_warnings(
    records: list[dict],
    target_relative_ci: float,
    fixed: bool,
    max_phase_s: float,
    launches: int,
    stopped_by: str | None = None,
    shortfalls: list | None = None,
) -> list[str]:
    """What a reader must know of the pooled runs: a stall (or the iteration time) short of its target, with
    the rounds it would still need, what the measurements say of why and what to do (engine/rounds.py
    Shortfall); and a profile that ended before all its planned rounds."""
    warnings: list[str] = []
    completed = [r for r in records if r.get("status") == "completed" and r.get("launches")]
    by_name = {record["name"]: record for record in completed}
    more_time = f"more time (--max-phase-seconds, now {max_phase_s:g} s per run)"
    why = {
        ROUNDS_BY_TIME: f"the rounds stopped at the time budget: {more_time} allows more",
        ROUNDS_BY_COUNT: "the rounds stopped at their cap",
    }.get(stopped_by or "", "more launches (--launches) would narrow it")
    for shortfall in [] if fixed else shortfalls or []:
        cause = spread_cause([by_name[run] for run in shortfall.runs if run in by_name])
        text = shortfall.text(target_relative_ci)
        warnings.append(f"{text}: {cause}; {why}; or accept a wider --target-ci")
    warnings.extend(filter(None, (script_end_warning(record) for record in completed)))
    rounds = {launch["round"] for record in completed for launch in record["launches"] if launch["pooled"]}
    if completed and len(rounds) < launches:
        warnings.append(
            f"intervals from {len(rounds)} of {launches} rounds of launches: the profile ended before the "
            "others"
        )
    return warnings


SCRIPT_ENDED = "script_ended"  # a profiled script's own loop ran out (measure/script_stop.py)


def script_end_warning(record: dict) -> str | None:
    """A run of a user's script whose launches ended because the script did: it is said, with what to do."""
    launches = record.get("launches") or []
    ended = [launch for launch in launches if launch.get("stop_reason") == SCRIPT_ENDED]
    if not ended:
        return None
    steps = max(launch["iterations"] + launch["warmup_iterations"] for launch in ended)
    return (
        f"{record['name']}: the script ended by itself in {len(ended)} of its {len(launches)} launches (after "
        f"{steps} steps at most), so those launches timed only the steps it had; to let each run go on to its "
        "target or --max-phase-seconds, give the script more to do (more epochs or steps after --)"
    )


# Other processes busy on this many cores on average during a run's launches (or on this many in one launch)
# are other load worth naming as the cause of a spread.
OTHER_LOAD_MEAN_CORES = 0.25
OTHER_LOAD_PEAK_CORES = 0.5


def spread_cause(records: list[dict]) -> str:
    """What the runs' launches say about why their interval is wide: measured other load, launches that
    disagree without it (a first launch apart, a drift, or spread from launch to launch), or iterations
    that vary within launches that agree."""
    launches = [launch for record in records for launch in record.get("launches") or [] if launch["pooled"]]
    if any(launch.get("stop_reason") == SCRIPT_ENDED for launch in launches):
        return "the script ended by itself before its launches reached the target (see the warning on it)"
    loads = [launch["other_cores"] for launch in launches if launch.get("other_cores") is not None]
    mean_load = sum(loads) / len(loads) if loads else None
    load_text = (f"other processes kept {mean_load:.2f} cores busy on average during its launches (up to "
                 f"{max(loads):.2f})") if loads else "other load could not be measured there"  # fmt: skip
    if loads and (mean_load >= OTHER_LOAD_MEAN_CORES or max(loads) >= OTHER_LOAD_PEAK_CORES):
        return f"other load on the machine: {load_text}; a quieter machine would narrow it"
    disagree = [record for record in records if launches_disagree(record)]
    if not disagree:
        caps = sorted({launch["stop_reason"] for launch in launches} & set(CAP_REASONS))
        if caps:
            cap = "iteration" if caps == ["max_iterations"] else "time"
            return f"its launches stopped at the {cap} cap with their iterations still varying ({load_text})"
        return f"its iterations vary within launches that agree ({load_text}): longer launches narrow it"
    record = disagree[0]
    means = [launch["mean_s"] for launch in record["launches"] if launch["pooled"]]
    finding = launch_spread_finding(means)
    lag1 = within_launch_lag1(record)
    if lag1 is not None and lag1 >= LEVEL_SHIFT_LAG1:
        finding = (f"the machine's speed shifts within its launches too: its iterations' lag-1 autocorrelation "
                   f"is {lag1:.2f}, as on a CPU shared with other machines or throttled; {finding}")  # fmt: skip
    return (
        f"{record['name']}'s launches disagree more than their iterations do ({finding}), and not from other "
        f"load ({load_text})"
    )


def launches_disagree(record: dict) -> bool:
    """Whether a run's launches disagree more than their iterations do (one launch never does)."""
    pooled = record.get("pooled") or {}
    return (pooled.get("between_ci95") or 0.0) > (pooled.get("within_ci95") or 0.0)


# Iterations this correlated with the one before (within a launch) move in levels, not about one level.
LEVEL_SHIFT_LAG1 = 0.5


def within_launch_lag1(record: dict) -> float | None:
    """The mean lag-1 autocorrelation of the iteration times within a run's pooled launches: near 0 when they
    scatter about one level, near 1 when the level itself shifts inside a launch. None when unknown."""
    samples = (record.get("samples") or {}).get("iteration_s") or []
    found, at = [], 0
    for launch in [launch for launch in record.get("launches") or [] if launch.get("pooled")]:
        series = samples[at : at + launch["iterations"]]
        at += launch["iterations"]
        mean_s = sum(series) / len(series) if len(series) >= 4 else 0.0
        var = sum((x - mean_s) ** 2 for x in series)
        if len(series) >= 4 and var > (1e-9 * mean_s) ** 2 * len(series):  # not rounding alone
            found.append(sum((a - mean_s) * (b - mean_s) for a, b in zip(series, series[1:])) / var)
    return sum(found) / len(found) if found else None


def slope(values: list[float]) -> float:
    """The least-squares slope of values against their index (at least two values): the drift per launch."""
    n = len(values)
    x_mean, y_mean = (n - 1) / 2, sum(values) / n
    sxx = sum((i - x_mean) ** 2 for i in range(n))
    return sum((i - x_mean) * (v - y_mean) for i, v in enumerate(values)) / sxx


def launch_spread_finding(means: list[float]) -> str:
    """The shape of the spread of a run's launch means: a first launch apart from the rest, a drift over the
    profile, or launch-to-launch spread."""
    if len(means) < 3:
        return f"{len(means)} launches"
    rest = means[1:]
    rest_mean = sum(rest) / len(rest)
    rest_sd = math.sqrt(sum((m - rest_mean) ** 2 for m in rest) / max(len(rest) - 1, 1))
    first = means[0] / rest_mean - 1
    if abs(means[0] - rest_mean) > 3 * rest_sd:
        return f"its first launch was {first:+.0%} off the others (a warm-up left in it, or the machine's speed then)"
    n = len(means)
    y_mean = sum(means) / n
    drift = slope(means)
    spread = math.sqrt(sum((m - y_mean) ** 2 for m in means) / (n - 1)) / y_mean
    if abs(drift) * (n - 1) > 2 * spread * y_mean:
        return f"they drift by {drift / y_mean:+.1%} a launch over the profile (clocks, caches)"
    return f"they vary by {spread:.0%} from one to the next"


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
