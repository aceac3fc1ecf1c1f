"""`stash_core.recommend()`, `plan_spot()` and `simulate_schedule()`: what to rent, a spot cluster's plan and
a shared cluster's scheduling, from Python (`stash recommend`, `stash spot`, `stash schedule`).

Each value is checked by the rule of its command-line flag (api/options.py); the answers come from decide/,
spot/ and sched/, imported inside the functions (they load pandas and numpy).
"""

from __future__ import annotations

import re
from pathlib import Path

from stash_core.api.options import checked, choice, database, names
from stash_core.api.results import Recommendation, Schedule, SpotPlan
from stash_core.errors import UsageError
from stash_core.habits import TrainingJob
from stash_core.spec_parse import identifier
from stash_core.spec_parse import BATCH_SIZE, Number, count, parse_input_shape, positive_real

YEAR_S = 365 * 86400.0
GBPS = 1e9 / 8  # bytes per second in one Gbit/s
NON_NEGATIVE_YEAR = Number(0, YEAR_S, whole=False, what="a number >= 0")


def recommend(
    model: str, batch_size: int, epochs: float, dataset_images: int, *,
    input_shape: tuple[int, ...] | list[int] | str | None = None, budget_hours: float | None = None,
    max_usd: float | None = None, spot: bool = False, instances: list[str] | str | None = None,
    max_instances: int = 4, precision: str = "fp32", memory_format: str = "nchw",
    optimizer: str | None = None, optimizer_impl: str = "foreach", attention: str = "fused",
    db: Path | str | None = None,
) -> Recommendation:  # fmt: skip
    """The cheapest instances (type and count) that train `model` for `epochs` within a time budget or a
    cost limit (`stash recommend`), measured where profiles are stored, predicted elsewhere.

    Args:
        model: a zoo name, FILE.py:FACTORY or a stored model.
        batch_size: samples per worker.
        epochs: epochs to train.
        dataset_images: samples (images, sequences) in one epoch.
        input_shape: one sample, (C, H, W) or (sequence length,); default the model's.
        budget_hours: the time budget; max_usd: the cost limit (one of them at least).
        spot: price with spot instead of on-demand prices.
        instances: catalog instances to consider (default all); max_instances: most of one type.
        precision, memory_format, optimizer, optimizer_impl, attention: how the job trains (as predict()).
        db: the database (default $STASH_DB, else ./results.duckdb).

    Returns:
        Recommendation: `.best` (None when nothing meets the constraints, with `.infeasible_reason`);
        `.to_frame()` has every configuration evaluated, `.ranked` the feasible ones cheapest first.

    Raises:
        UsageError: a bad value, or a model or instance that does not exist.
    """
    from stash_core.decide.recommend import recommend as recommend_answer

    shape = checked("input_shape", input_shape, parse_input_shape)
    answer = recommend_answer(
        database(db), checked("model", model, identifier), checked("batch_size", batch_size, BATCH_SIZE),
        checked("epochs", epochs, positive_real(1e6)),
        checked("dataset_images", dataset_images, count(10**12)),
        budget_hours=checked("budget_hours", budget_hours, positive_real(1e6)),
        max_usd=checked("max_usd", max_usd, positive_real(1e12)), spot=bool(spot),
        instances=names("instances", instances, 1000), max_instances=checked("max_instances", max_instances,
        count(64)), precision=precision, input_shape=tuple(shape) if shape else None,
        habits=TrainingJob(memory_format, optimizer, optimizer_impl, attention),
    )  # fmt: skip
    return Recommendation(
        request=answer.request, options=answer.options, best=answer.best, explanations=answer.explanations,
        infeasible_reason=answer.infeasible_reason, excluded=answer.excluded,
        label_warnings=answer.label_warnings, answer=answer,
    )  # fmt: skip


def plan_spot(
    workload: Path | str, instances: dict[str, int] | str, target_loss: float, budget_s: float, *,
    ps_gbps: float | None = None, pcie_gbps: float = 80.0, revocation_s: float = 0.0, on_demand: bool = False,
    rate_per_h: float | None = None, top: int = 8, db: Path | str | None = None,
) -> SpotPlan:  # fmt: skip
    """The cheapest spot cluster that reaches `target_loss` within `budget_s` (spotDNN's model; `stash spot`).

    Args:
        workload: the workload file (JSON: the model's loss fit and compute times, docs/spot.md).
        instances: offered types with quotas, {"g3.8xlarge": 5} or "g3.8xlarge:5,g3.16xlarge:3".
        target_loss: the training loss to reach; budget_s: the time budget, seconds.
        ps_gbps: parameter-server bandwidth, Gbit/s (default the workload's measured one, else 9.6).
        pcie_gbps: PCIe bandwidth within a worker, Gbit/s; revocation_s: overhead of a revoked instance.
        on_demand: price with on-demand instead of spot prices (never revoked: no risk).
        rate_per_h: revocations per spot instance per hour for the plan's risk (default 0.5).
        top: candidates to keep; db: the database of the catalog.

    Returns:
        SpotPlan: `.best` (None with `.infeasible_reason`), `.to_frame()` one row per candidate.

    Raises:
        UsageError: a bad value, workload file or offer (an instance not in the catalog, no price).
    """
    from stash_core.spot import plan_spot_cluster, plan_table
    from stash_core.spot.fragility import fragile_coefficients
    from stash_core.spot.inputs import build_offers, load_workload, parse_offers, ps_bandwidth_Bps
    from stash_core.spot.simulate import DEFAULT_RATE_PER_H, plan_risk

    target_loss = checked("target_loss", target_loss, positive_real(1e6))
    budget_s = checked("budget_s", budget_s, positive_real(YEAR_S))
    pcie_Bps = checked("pcie_gbps", pcie_gbps, positive_real(1e5)) * GBPS
    revocation_s = checked("revocation_s", revocation_s, NON_NEGATIVE_YEAR)
    rate = checked("rate_per_h", rate_per_h, Number(0, 3600.0, whole=False, what="a number >= 0"))
    try:
        loaded, doc = load_workload(checked("workload", workload, Path))
    except (ValueError, TypeError, RecursionError) as error:  # numbers too long, nesting too deep, text
        raise UsageError(f"workload file {workload}: {error}") from None
    ps_Bps = ps_bandwidth_Bps(checked("ps_gbps", ps_gbps, positive_real(1e5)), doc)
    pricing = "on_demand" if on_demand else "spot"
    offers = build_offers(database(db), parse_offers(_offers_text(instances)), doc, pricing)
    result = plan_spot_cluster(offers, loaded, target_loss, budget_s, ps_Bps=ps_Bps, pcie_Bps=pcie_Bps,
                               revocation_s=revocation_s)  # fmt: skip
    rows = plan_table(result, checked("top", top, count(10_000)))
    fragile, risk = [], None
    if result.best is not None:
        links = (ps_Bps, pcie_Bps, revocation_s)
        fragile = fragile_coefficients(result, offers, loaded, target_loss, budget_s, *links)
        if pricing == "spot":  # on-demand instances are never revoked
            risk = plan_risk(offers, loaded, target_loss, budget_s, ps_Bps, pcie_Bps,
                             rate_per_h=DEFAULT_RATE_PER_H if rate is None else rate)  # fmt: skip
    return SpotPlan(
        pricing=pricing, best=rows[0] if result.best is not None else None, candidates=rows,
        bounds=result.bounds, infeasible_reason=result.infeasible_reason, fragile=fragile,
        risk=None if risk is None else vars(risk), plan=result,
    )  # fmt: skip


def simulate_schedule(
    trace: Path | str | None = None, *, synthetic_jobs: int | None = None, trace_format: str = "auto",
    generator: str = "basic", arrivals: str | None = None, seed: int = 0, mean_gap_s: float | None = None,
    cluster: tuple[int, int, int] | str = (2, 4, 8), policies: list[str] | str | None = None,
    tuning: str | None = None, delay_s: float | None = None, scale: float | None = None,
    node_gbps: float | None = None, out: Path | str = "results", no_store: bool = False,
    db: Path | str | None = None,
) -> Schedule:  # fmt: skip
    """Simulate how a shared GPU cluster places network-sensitive jobs, policy by policy (`stash schedule`);
    the result file sim-*.json is written to `out` and stored in the database.

    Args:
        trace: a trace file (docs/traces.md), or None with `synthetic_jobs`.
        synthetic_jobs: generate a trace of this many jobs (with `generator`, `arrivals`, `seed`,
            `mean_gap_s`) instead of reading one.
        trace_format: "auto" (told from the file's columns) or the trace's format.
        cluster: (switches, nodes per switch, GPUs per node), or "2x4x8".
        policies: the policies to compare (default all: fifo, sjf, las, consolidate, delay, ...).
        tuning: "split" (the default), "online" or "given" (with `delay_s`, `scale`).
        node_gbps: node uplink bandwidth, Gbit/s: links shared max-min fairly (default: no link model).
        out: the folder of the result file; no_store: write the file only, not the database.
        db: the database (default $STASH_DB, else ./results.duckdb).

    Returns:
        Schedule: `.to_frame()` one row per policy with its metrics; `.doc` the whole simulation.

    Raises:
        UsageError: a bad value, both or neither of trace and synthetic_jobs, or an unreadable trace.
    """
    from dataclasses import replace

    from stash_core.sched import Cluster, Policy, defaults, jobs_from_frame, load_trace, synthetic_trace
    from stash_core.sched.detect import detect_format
    from stash_core.sched.fabric import Fabric
    from stash_core.sched.generate import philly_like_trace
    from stash_core.sched.report import run_simulation, save_simulation

    if (trace is None) == (synthetic_jobs is None):
        raise UsageError("simulate_schedule: give one of trace and synthetic_jobs")
    shape = Cluster(*_cluster(cluster))
    chosen = _policies(policies, defaults.POLICY_NAMES)
    if tuning is None:
        tuning = "given" if delay_s is not None or scale is not None else defaults.TUNING
    choice("tuning", tuning, ("split", "online", "given"))
    if tuning != "given" and (delay_s is not None or scale is not None):
        raise UsageError("--delay-s and --scale set the timers: use them with --tuning given")
    db_path = database(db)
    if trace is not None:
        trace_path = checked("trace", trace, Path)
        trace_format = detect_format(trace_path) if trace_format == "auto" else trace_format
        jobs, source = load_trace(trace_path, db_path, trace_format), f"{trace_path} ({trace_format})"
        if choice("arrivals", arrivals, ("batch",)) == "batch":
            jobs, source = [replace(job, submit_s=0.0) for job in jobs], f"{source}, all submitted at 0"
    else:
        jobs_count = checked("synthetic_jobs", synthetic_jobs, count(100_000))
        arrivals = arrivals or defaults.ARRIVALS
        choice("arrivals", arrivals, defaults.ARRIVAL_KINDS)
        gap_s = checked("mean_gap_s", mean_gap_s, positive_real(YEAR_S)) or defaults.MEAN_GAP_S
        seed = checked("seed", seed, Number(0, 2**31 - 1, what="an integer >= 0"))
        if choice("generator", generator, ("basic", "philly")) == "philly":
            frame = philly_like_trace(jobs_count, seed, gap_s, arrivals)
        else:
            frame = synthetic_trace(jobs_count, seed, list(defaults.MODELS), gap_s, arrivals)
        jobs, trace_format = jobs_from_frame(frame, db_path, "synthetic trace"), "synthetic"
        kind = "Philly-like" if generator == "philly" else "synthetic"
        source = f"{kind}({len(jobs)} jobs, seed {seed}, {arrivals} arrivals)"
    delay_s = checked("delay_s", delay_s, NON_NEGATIVE_YEAR)
    scale = checked("scale", scale, Number(0, 1e6, whole=False, what="a number >= 0"))
    timers = {"delay_s": defaults.DELAY_S if delay_s is None else delay_s,
              "scale": defaults.SCALE if scale is None else scale}  # fmt: skip
    node_gbps = checked("node_gbps", node_gbps, positive_real(1e6))
    fabric = None
    if node_gbps is not None:
        fabric = Fabric.oversubscribed(node_gbps, defaults.OVERSUBSCRIPTION, shape.nodes_per_switch,
                                       defaults.REFERENCE)  # fmt: skip
    doc, _ = run_simulation(
        jobs, shape, [Policy(name, **timers) for name in chosen], tuning=tuning,
        fraction=defaults.TUNE_FRACTION, uplink_factor=defaults.UPLINK_FACTOR, fabric=fabric, trace=source,
        trace_format=trace_format,
    )  # fmt: skip
    stored = None if no_store else db_path
    path = save_simulation(doc, checked("out", out, Path), stored)
    return Schedule(simulation_id=doc["simulation_id"], result_file=path, db=stored, doc=doc)


def _cluster(value: tuple[int, int, int] | str) -> tuple[int, int, int]:
    text = value if isinstance(value, str) else "x".join(str(part) for part in value)
    match = re.fullmatch(r"\s*(\d{1,7})\s*x\s*(\d{1,7})\s*x\s*(\d{1,7})\s*", text)
    if not match or min(int(part) for part in match.groups()) < 1:
        raise UsageError(f"cluster: {value!r}: give (switches, nodes per switch, GPUs per node), e.g. 2x4x8")
    switches, nodes, gpus = (int(part) for part in match.groups())
    return switches, nodes, gpus


def _policies(value: list[str] | str | None, known: tuple[str, ...]) -> list[str]:
    chosen = list(known) if value is None else [name.strip() for name in _split(value) if name.strip()]
    unknown = [name for name in chosen if name not in known]
    if unknown or not chosen:
        unknown_text = ", ".join(unknown) or "(none)"
        raise UsageError(f"policies: unknown policy {unknown_text}; choose from {', '.join(known)}")
    if len(set(chosen)) < len(chosen):
        raise UsageError("policies: give each policy once")
    return chosen


def _split(value: list[str] | str) -> list[str]:
    return value.split(",") if isinstance(value, str) else [str(name) for name in value]


def _offers_text(instances: dict[str, int] | str) -> str:
    """The offers as `stash spot --instances` takes them: NAME:QUOTA,..."""
    if isinstance(instances, dict):
        instances = ",".join(f"{name}:{quota}" for name, quota in instances.items())
    if not isinstance(instances, str) or not instances.strip():
        raise UsageError(f"instances: expected {{NAME: QUOTA}} or 'NAME:QUOTA,...', got {instances!r}")
    for part in instances.split(","):
        checked("instances", part.partition(":")[0].strip(), identifier)
    return instances
