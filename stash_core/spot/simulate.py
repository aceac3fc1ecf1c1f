"""What revocations do to a spot plan: Monte Carlo over a revocation-rate model, or one pass over a trace.

Three strategies, each trained on the true model (the workload as fitted, contention included):
  spotDNN        plans with contention at spot prices and re-plans at every revocation (replan.py);
  no contention  plans as if the parameter server never saturated (P = 0), re-plans the same way, but
                 trains at the true, slower speed: it under-estimates time and may miss the deadline;
  on-demand      plans with contention at on-demand prices; on-demand instances are never revoked.
Revocations: every spot instance is revoked at `rate_per_h` (a Poisson process, so the next revocation of a
cluster of n is exponential with rate n x rate, and memoryless: re-drawn after every change), or at the times
of a trace (rows of time_s, instance: one instance of that type is revoked, if the cluster holds one).
After a revocation the cluster stands still for `revocation_s` (paid), the loss reached is kept and the rest
of the deadline is re-planned. A run that finds no plan in time goes on with the fastest candidate; a run
revoked more than MAX_REVOCATIONS times never finishes: its time is None (never) and it misses the deadline.
"""

from __future__ import annotations

import csv
import dataclasses
import io
import math
import statistics
from pathlib import Path

import numpy as np

from stash_core.analysis.stats import share_ci95, t_quantile_975
from stash_core.errors import UsageError
from stash_core.spot.model import Worker, Workload, most_workers
from stash_core.spot.planner import InstanceOffer, PlanResult, plan_spot_cluster
from stash_core.spot.replan import loss_after, remaining_plan, replan, workers_of
from stash_core.units import usd_words
from stash_core.userfiles import read_user_text, refuse_repeated_columns

MAX_TRACE_BYTES = 256 * 1024 * 1024  # a revocation trace is a few lines per instance and hour
# Per strategy, over all its runs: a replan takes 10-30 ms at quotas of tens (2 cores), so about a minute.
MAX_SIMULATED_REVOCATIONS = 2_000
# A re-plan's work is its candidate clusters (some 60-150 us each on 2 cores): quotas of 40 of seven types
# are about 1,200 a re-plan, where the re-plan limits alone let a simulation run for minutes.
MAX_SIMULATED_CLUSTERS = 300_000  # per strategy, as MAX_SIMULATED_REVOCATIONS
MAX_REVOCATIONS = 500  # per run: beyond it the run is counted as missing its deadline
# What a revocation costs the risk's simulation where the plan was made with no overhead (--revocation-s 0):
# a restart is never free (the risk line says the overhead it used).
RESTART_S = 30.0
DEFAULT_RATE_PER_H = 0.5  # revocations per spot instance per hour, the rate a plan's risk is stated at
RISK_RUNS = 200  # Monte Carlo runs behind a plan's stated risk
# The revocations' random seed where none is given: one for `stash spot`'s risk, `spot-simulate` and the Spot
# page, so that one scenario gives one figure wherever it is asked
DEFAULT_SEED = 1
# Bounded work for a plan's risk, some 10-30 s: a long training at a high rate asks for 200 runs of hundreds
# of revocations each (an hour); the runs done by then are the risk's. Above MAX_REVOCATIONS: one run fits.
MAX_RISK_REPLANS = 1_000
MAX_RISK_CLUSTERS = 100_000  # candidate clusters over all the risk's re-plans: some 6-15 s on 2 cores


def without_contention(workload: Workload) -> Workload:
    """The workload as a planner that ignores parameter-server contention sees it (P = 0 at any n)."""
    return dataclasses.replace(workload, contention_a1=1e-9, contention_b1=-1.0, contention_margin=0.0)


def read_trace(path: Path) -> list[tuple[float, str]]:
    """Revocation events (time_s, instance) from a CSV with a header time_s,instance, in time order."""
    text = read_user_text(path, "revocation trace", MAX_TRACE_BYTES)
    try:
        reader = csv.DictReader(io.StringIO(text, newline=""))
        rows = list(reader)
        header = [name.strip() for name in reader.fieldnames or []]
    except csv.Error as exc:
        raise UsageError(f"cannot read revocation trace {path}: {exc}") from None
    if "time_s" not in header or "instance" not in header:
        raise UsageError(f"revocation trace {path}: needs a header line time_s,instance")
    refuse_repeated_columns(header, f"revocation trace {path}")
    events = []
    for line, row in enumerate(rows, start=2):
        if None in row:  # DictReader keeps fields beyond the header under the key None: never read
            raise UsageError(f"revocation trace {path} line {line}: {len(header) + len(row[None])} fields, "
                             f"expected {len(header)} (the header's columns)")  # fmt: skip
        row = {str(key).strip(): value for key, value in row.items()}
        time_text, instance = row.get("time_s"), row.get("instance")
        try:
            time_s = float(time_text)  # type: ignore[arg-type]
        except (TypeError, ValueError):
            time_s = math.nan
        if not math.isfinite(time_s) or time_s < 0 or not isinstance(instance, str) or not instance.strip():
            raise UsageError(
                f"revocation trace {path} line {line}: needs time_s (a number >= 0) and an instance name"
            )
        events.append((time_s, instance.strip()))
    if not events:
        raise UsageError(
            f"revocation trace {path}: no revocations (rows of time_s,instance after the header)"
        )
    return sorted(events)


def check_trace(trace: list[tuple[float, str]], offers: list[InstanceOffer]) -> None:
    """Refuse a trace that names instance types not on offer: its revocations could never happen."""
    unknown = sorted({name for _, name in trace} - {offer.worker.instance for offer in offers})
    if unknown:
        raise UsageError(
            f"revocation trace: instance(s) {', '.join(unknown)} not among the instances on offer"
        )


class NoStartingPlan(UsageError):
    """No cluster can start the training: the answer is "no plan", as `stash spot` gives it (exit status 1),
    not bad input."""


def starting_plan(offers: list[InstanceOffer], plan_workload: Workload, target_loss: float, deadline_s: float,
                  links: dict) -> PlanResult:  # fmt: skip
    """The plan every simulated training starts from (the same for each: planned once per strategy)."""
    first = plan_spot_cluster(offers, plan_workload, target_loss, deadline_s, **links)
    no_cluster = f"simulation: no cluster to start training with: {first.infeasible_reason}"
    if not first.candidates and most_workers(plan_workload) >= 1:
        # eq. 16: the deadline needs more workers than the quotas hold, so no cluster was evaluated; the
        # training starts on the fastest cluster there is, as where every cluster evaluated misses it
        try:
            anyway = replan([], offers, plan_workload, target_loss, math.inf, deadline_s, **links)
        except UsageError:  # more clusters than a search takes (quotas of thousands): no cluster to start on
            raise NoStartingPlan(no_cluster) from None
        first = dataclasses.replace(anyway, infeasible_reason=first.infeasible_reason)
    if not first.candidates:  # not even a cluster to start with and miss the deadline on
        raise NoStartingPlan(no_cluster)
    if all(plan.untrained for plan in first.candidates):  # the target is above where training starts
        raise NoStartingPlan(f"simulation: {first.infeasible_reason}")
    return first


def run_once(first: PlanResult, offers: list[InstanceOffer], plan_workload: Workload, true_workload: Workload,
             target_loss: float, deadline_s: float, links: dict, revocation_s: float,
             rng: np.random.Generator | None, rate_per_h: float = 0.0,
             trace: list[tuple[float, str]] | None = None,
             replans_left: float = math.inf, clusters_left: float = math.inf) -> dict | None:  # fmt: skip
    """One training from the starting plan `first` to target: time, cost, revocations, the candidate clusters
    its re-plans evaluated and whether it met the deadline; None where it needs more than `replans_left`
    re-plans or `clusters_left` clusters (a work limit: the run is not counted)."""
    chosen = first.best or min(first.candidates, key=lambda plan: plan.training_s)
    cluster: list[Worker] = workers_of(chosen, offers)
    t = cost = 0.0
    loss = math.inf  # nothing trained yet
    revocations = clusters = 0
    replayed: set[int] = set()  # the trace's rows already applied, or passed while no such instance ran
    while True:
        truth = remaining_plan(cluster, true_workload, target_loss, loss, math.inf, **links)
        left = truth.training_s
        wait, victim = _next_revocation(cluster, t, rng, rate_per_h, trace, replayed)
        if wait >= left or not math.isfinite(left) and not math.isfinite(wait):
            t, cost = t + left, cost + left / 3600 * truth.usd_per_h
            break
        loss = loss_after(truth, true_workload, target_loss, loss, wait)
        t, cost = t + wait, cost + wait / 3600 * truth.usd_per_h
        cluster.pop(victim)
        revocations += 1
        if revocations > MAX_REVOCATIONS:
            t = math.inf
            break
        if revocations > replans_left:
            return None
        t += revocation_s
        again = replan(cluster, offers, plan_workload, target_loss, loss, deadline_s - t, **links)
        clusters += len(again.candidates)
        if clusters > clusters_left:
            return None
        chosen = again.best or min(again.candidates, key=lambda plan: plan.training_s)
        cluster = workers_of(chosen, offers)
        # the restart is paid by the cluster that resumes: survivors wait, replacements boot (billed to the
        # survivors alone, a lone worker's revocation cost nothing)
        cost += revocation_s / 3600 * sum(w.usd_per_h for w in cluster)
    return {"time_s": t, "cost_usd": cost, "revocations": revocations, "met": t <= deadline_s,
            "first_plan": (first.best or chosen).label(), "clusters": clusters}  # fmt: skip


def _next_revocation(
    cluster, t, rng, rate_per_h, trace, replayed: set[int] | None = None
) -> tuple[float, int]:
    """Seconds to the next revocation of an instance of `cluster` and its index (inf when none comes). A
    trace's rows are replayed once each, in time order: a row at the same time as the last revocation, or
    during its restart, revokes at once (wait 0); a row passed while no instance of its type ran revokes
    nothing, even when an instance of its type is rented later. `replayed` holds the rows used up (one set per
    training)."""
    if trace is not None:
        replayed = set() if replayed is None else replayed
        names = [w.instance for w in cluster]
        passed = []  # rows of types not running before the next revocation: passed while this cluster runs
        for row, (time_s, instance) in enumerate(trace):
            if row in replayed:
                continue
            if instance in names:  # rows at its own time still revoke at once after a re-plan (docstring)
                replayed.update((r for r in passed if trace[r][0] < time_s), (row,))
                return max(time_s - t, 0.0), names.index(instance)
            passed.append(row)
        replayed.update(row for row in passed if trace[row][0] <= t)
        return math.inf, -1
    if rate_per_h <= 0 or rng is None or not cluster:
        return math.inf, -1
    wait = float(rng.exponential(3600 / (rate_per_h * len(cluster))))
    return wait, int(rng.integers(len(cluster)))


def simulate(spot_offers: list[InstanceOffer], on_demand_offers: list[InstanceOffer], workload: Workload,
             target_loss: float, deadline_s: float, ps_Bps: float, pcie_Bps: float, rate_per_h: float = 0.0,
             revocation_s: float = RESTART_S, runs: int = 200, seed: int = DEFAULT_SEED,
             trace: list[tuple[float, str]] | None = None,
             plan_overhead_s: float = 0.0) -> list[dict]:  # fmt: skip
    """Per strategy: probability of meeting the deadline, mean and 90th-percentile time, mean cost. The spot
    strategies start from the plan made with `plan_overhead_s` of revocation overhead in its time (as
    `stash spot --revocation-s` plans it), on-demand from its own (never revoked; no row without offers)."""
    if runs < 1 or rate_per_h < 0 or not math.isfinite(rate_per_h):
        raise UsageError("simulation: runs >= 1 and a revocation rate >= 0 per hour")
    if trace is not None:
        check_trace(trace, spot_offers)
    links = {"ps_Bps": ps_Bps, "pcie_Bps": pcie_Bps}
    strategies = [
        ("spotDNN", spot_offers, workload, True),
        ("no contention", spot_offers, without_contention(workload), True),
        ("on-demand", on_demand_offers, workload, False),
    ][: 3 if on_demand_offers else 2]  # on-demand only where an instance offered has an on-demand price
    rows = []
    for name, offers, plan_workload, revoked in strategies:
        sampled = revoked and trace is None and rate_per_h > 0  # else one run is the whole answer
        asked = runs if sampled else 1
        overhead = {"revocation_s": plan_overhead_s if revoked else 0.0}
        # each strategy meets the same revocations (common random numbers): one generator for all gave two
        # strategies that plan and train alike deadlines 6 points apart, sampling noise read as a difference
        rng = np.random.default_rng(seed)
        first = starting_plan(offers, plan_workload, target_loss, deadline_s, {**links, **overhead})
        outcomes, replans, clusters = [], 0, 0
        # Bounded work: each revocation is a replan (milliseconds, more at large quotas), and --runs 100000 at
        # a high rate asks for millions; the runs done by then are what the row reports (its "runs" says how
        # many). The first run is always done.
        while len(outcomes) < asked and replans < MAX_SIMULATED_REVOCATIONS:
            clusters_left = MAX_SIMULATED_CLUSTERS - clusters if outcomes else math.inf
            outcome = run_once(first, offers, plan_workload, workload, target_loss, deadline_s, links,
                               revocation_s, rng, rate_per_h if revoked else 0.0, trace if revoked else None,
                               clusters_left=clusters_left)  # fmt: skip
            if outcome is None:
                break
            outcomes.append(outcome)
            replans += outcome["revocations"]
            clusters += outcome["clusters"]
        count = len(outcomes)
        times = [o["time_s"] for o in outcomes]
        rows.append({
            "strategy": name, "first_plan": outcomes[0]["first_plan"],
            # no plan meets the deadline: the runs train the fastest cluster, and say so
            "infeasible_reason": None if first.best is not None else first.infeasible_reason,
            "runs": count, "runs_asked": asked,
            "p_deadline": float(np.mean([o["met"] for o in outcomes])),
            # the share of `count` random runs: its 95% interval (none where one run is the whole answer:
            # never revoked, or a trace replayed)
            "p_deadline_ci95": list(share_ci95(sum(o["met"] for o in outcomes), count)) if sampled else None,
            "never_finishes": sum(1 for t in times if not math.isfinite(t)),
            "mean_time_s": _finite_or_none(float(np.mean(times)) if all(map(math.isfinite, times)) else None),
            "p90_time_s": _finite_or_none(_p90(times)),
            "mean_cost_usd": float(np.mean([o["cost_usd"] for o in outcomes])),
            # its 95% interval's half-width over the independent random runs (a t interval; none where one run
            # is the whole answer, or where one run was made)
            "mean_cost_ci95_usd": _mean_half_width([o["cost_usd"] for o in outcomes]) if sampled else None,
            "mean_revocations": float(np.mean([o["revocations"] for o in outcomes])),
        })  # fmt: skip
    return rows


def simulation_notes(rows: list[dict]) -> list[str]:
    """What the table of a simulation does not show: a strategy stopped by the work limit, trainings that
    never finish."""
    lines = []
    for row in rows:
        if row.get("infeasible_reason"):
            lines.append(f"{row['strategy']}: no plan meets the deadline even without revocations "
                         f"({row['infeasible_reason']}); its runs train the fastest cluster")  # fmt: skip
        if row["runs"] < row["runs_asked"]:
            lines.append(f"{row['strategy']}: stopped after {row['runs']:,} of {row['runs_asked']:,} runs, "
                         f"at the work limit ({MAX_SIMULATED_REVOCATIONS:,} simulated revocations or "
                         f"{MAX_SIMULATED_CLUSTERS:,} candidate clusters re-planned)")  # fmt: skip
        if row["never_finishes"]:
            lines.append(f"{row['strategy']}: the training never finishes in {row['never_finishes']} of "
                         f"{row['runs']} run(s) (revoked more than {MAX_REVOCATIONS} times); they miss the "
                         "deadline")  # fmt: skip
    return lines


@dataclasses.dataclass(frozen=True)
class PlanRisk:
    """What revocations do to a spot plan at a revocation rate: the chance of meeting the deadline and the
    expected cost with revocations (re-planning after each), over `runs` simulated trainings."""

    rate_per_h: float
    runs: int
    p_deadline: float
    mean_cost_usd: float
    mean_revocations: float
    revocation_s: float = 0.0  # the overhead each revocation cost in the simulation
    unfinished: int = 0  # runs stopped at MAX_REVOCATIONS: their cost until then is in the mean
    runs_asked: int | None = None  # more than `runs` where the work limit stopped the simulation
    p_deadline_ci95: list[float] | None = None  # its 95% interval over the random runs; None: no revocations

    def text(self) -> str:
        never = (
            f"; {self.unfinished} never finished (stopped after {MAX_REVOCATIONS} revocations; their cost "
            "until then is in the expected cost)"
            if self.unfinished
            else ""
        )
        if self.rate_per_h == 0:  # one training, never revoked: no simulation to speak of
            met = "meets the deadline" if self.p_deadline == 1 else "misses the deadline"
            return f"never revoked (0 revocations per hour): {met}, cost {usd_words(self.mean_cost_usd)}"
        runs = f"{self.runs} simulated run{'' if self.runs == 1 else 's'}"
        if self.runs_asked and self.runs < self.runs_asked:
            runs = (f"{self.runs} of {self.runs_asked} simulated runs, at the work limit of "
                    f"{MAX_RISK_REPLANS:,} re-plans or {MAX_RISK_CLUSTERS:,} candidate clusters")  # fmt: skip
        low, high = self.p_deadline_ci95 or share_ci95(round(self.p_deadline * self.runs), self.runs)
        return (
            f"at {self.rate_per_h:g} revocations per instance per hour ({runs}, {self.revocation_s:g} s "
            f"lost a revocation): meets the deadline in {self.p_deadline:.0%} of runs ({low:.0%} to "
            f"{high:.0%}, 95%), expected cost "
            f"{usd_words(self.mean_cost_usd)} with revocations{never}"
        )


BELOW_PLAN = ("below it because a re-plan after a revocation may finish on cheaper, slower instances that "
              "the time left allows")  # fmt: skip


def below_plan(risk: PlanRisk, planned_usd: float) -> str | None:
    """Why an expected cost with revocations is below the plan's (read as revocations saving money)."""
    return BELOW_PLAN if risk.rate_per_h > 0 and risk.mean_cost_usd < planned_usd else None


def plan_risk(spot_offers: list[InstanceOffer], workload: Workload, target_loss: float, deadline_s: float,
              ps_Bps: float, pcie_Bps: float, rate_per_h: float = DEFAULT_RATE_PER_H,
              revocation_s: float = RESTART_S, runs: int = RISK_RUNS, seed: int = DEFAULT_SEED,
              first: PlanResult | None = None) -> PlanRisk:  # fmt: skip
    """The spotDNN plan's risk at `rate_per_h` (the simulation's spotDNN strategy alone), from `first`: the
    plan as printed (planned with its revocation overhead), else planned here."""
    rng = np.random.default_rng(seed)
    links = {"ps_Bps": ps_Bps, "pcie_Bps": pcie_Bps}
    first = (
        first
        if first is not None and first.candidates
        else starting_plan(spot_offers, workload, target_loss, deadline_s, links)
    )
    asked = runs if rate_per_h > 0 else 1
    outcomes: list[dict] = []
    replans = clusters = 0
    while len(outcomes) < asked:
        clusters_left = MAX_RISK_CLUSTERS - clusters if outcomes else math.inf  # the first run is always done
        outcome = run_once(first, spot_offers, workload, workload, target_loss, deadline_s, links,
                           revocation_s, rng, rate_per_h, replans_left=MAX_RISK_REPLANS - replans,
                           clusters_left=clusters_left)  # fmt: skip
        if outcome is None:  # the work limit: the runs done are the risk's (the first fits the re-plans)
            break
        outcomes.append(outcome)
        replans += outcome["revocations"]
        clusters += outcome["clusters"]
    met = sum(o["met"] for o in outcomes)
    interval = list(share_ci95(met, len(outcomes))) if rate_per_h > 0 else None  # random runs only
    return PlanRisk(rate_per_h, len(outcomes), met / len(outcomes),
                    float(np.mean([o["cost_usd"] for o in outcomes])),
                    float(np.mean([o["revocations"] for o in outcomes])), revocation_s,
                    sum(not math.isfinite(o["time_s"]) for o in outcomes), runs_asked=asked,
                    p_deadline_ci95=interval)  # fmt: skip


def _mean_half_width(values: list[float]) -> float | None:
    """The 95% half-width of the mean of independent draws (Student's t); None for fewer than two."""
    if len(values) < 2:
        return None
    return t_quantile_975(len(values) - 1) * statistics.stdev(values) / math.sqrt(len(values))


def _p90(times: list[float]) -> float:
    """The 90th percentile (interpolated); inf when it falls among runs that never finish."""
    if all(map(math.isfinite, times)):
        return float(np.percentile(times, 90))
    ordered = sorted(times)
    return ordered[min(math.ceil(0.9 * len(ordered)), len(ordered)) - 1]


def _finite_or_none(value: float | None) -> float | None:
    """None for a training that never finishes (JSON has no infinity)."""
    return value if value is not None and math.isfinite(value) else None
