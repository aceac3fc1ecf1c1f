"""`stash_core.recommend()` and `plan_spot()`: what to rent and a spot cluster's plan, from Python (`stash
recommend`, `stash spot`; the shared cluster's scheduling is api/scheduling.py).

Each value is checked by the rule of its command-line flag (api/options.py); the answers come from decide/,
spot/ and sched/, imported inside the functions (they load pandas and numpy).
"""

from __future__ import annotations

from pathlib import Path

from stash_core.api.options import (
    api_options,
    as_text,
    checked,
    database,
    how_it_trains,
    instance_selection,
    required,
    switch,
    text_value,
)
from stash_core.api.results import Recommendation, SpotPlan
from stash_core.errors import UsageError
from stash_core.pathargs import required_path
from stash_core.spec_parse import (
    BATCH_SIZE,
    Number,
    count,
    identifier,
    offers_text,
    parse_input_shape,
    positive_real,
)

YEAR_S = 365 * 86400.0
GBPS = 1e9 / 8  # bytes per second in one Gbit/s
NON_NEGATIVE_YEAR = Number(0, YEAR_S, whole=False, what="a number >= 0")


# The command's options that a reason names, as this function's arguments ("raise --budget-hours" read as a
# command line to a Python caller)
PYTHON_WORDS = {"--budget-hours": "budget_hours", "--max-instances": "max_instances",
                "--workers-per-instance": "workers_per_instance"}  # fmt: skip


def in_python_words(text: str | None) -> str | None:
    """A reason with the command's options named as this API's arguments."""
    for flag, argument in PYTHON_WORDS.items():
        text = text.replace(flag, argument) if text else text
    return text


@api_options("recommend")
def recommend(
    model: str, batch_size: int, epochs: float, dataset_images: int | None = None, *,
    dataset_samples: int | None = None,
    input_shape: tuple[int, ...] | list[int] | str | None = None, budget_hours: float | None = None,
    max_usd: float | None = None, spot: bool = False, instances: list[str] | str | None = None,
    max_instances: int = 4, workers_per_instance: int | None = None, precision: str = "pytorch",
    memory_format: str = "nchw", optimizer: str | None = None, optimizer_impl: str = "foreach",
    attention: str = "fused", db: Path | str | None = None,
) -> Recommendation:  # fmt: skip
    """The cheapest instances (type and count) that train `model` for `epochs` within a time budget or a
    cost limit (`stash recommend`), measured where profiles are stored, predicted elsewhere.

    Args:
        model: a zoo name, FILE.py:FACTORY or a stored model.
        batch_size: samples per worker.
        epochs: epochs to train.
        dataset_images: samples (images, sequences) in one epoch; or dataset_samples, the same (as
            --dataset-images and --dataset-samples are), not both.
        input_shape: one sample, (C, H, W) or (sequence length,); default the model's.
        budget_hours: the time budget; max_usd: the cost limit (one of them at least).
        spot: price with spot instead of on-demand prices.
        instances: "all" (the default) or catalog instance names; max_instances: most of one type.
        workers_per_instance: GPUs used per instance, one worker each (default all of them); instances
            with fewer GPUs are not evaluated.
        precision, memory_format, optimizer, optimizer_impl, attention: how the job trains (as predict()).
        db: the database (default $STASH_DB, else ./results.duckdb).

    Returns:
        Recommendation: `.best` (None when nothing meets the constraints, with `.infeasible_reason`);
        `.to_frame()` has every configuration evaluated, `.ranked` the feasible ones cheapest first.

    Raises:
        UsageError: a bad value, or a model or instance that does not exist.
    """
    from stash_core.decide.recommend import recommend as recommend_answer

    shape = checked("input_shape", input_shape, parse_input_shape, many=True)
    precision, job = how_it_trains(precision, memory_format, optimizer, optimizer_impl, attention)
    if dataset_samples is not None:
        if dataset_images is not None:
            raise UsageError("recommend: give one of dataset_images and dataset_samples, not both")
        dataset_images = dataset_samples
    answer = recommend_answer(
        database(db), text_value("model", model, identifier), required("batch_size", batch_size, BATCH_SIZE),
        required("epochs", epochs, positive_real(1e6)),
        required("dataset_images", dataset_images, count(10**12)),
        budget_hours=checked("budget_hours", budget_hours, positive_real(1e6)),
        max_usd=checked("max_usd", max_usd, positive_real(1e12)), spot=switch("spot", spot),
        instances=instance_selection(instances, 1000), max_instances=required("max_instances", max_instances,
        count(64)), workers_per_instance=checked("workers_per_instance", workers_per_instance, count(1024)),
        precision=precision, input_shape=tuple(shape) if shape else None,
        habits=job,
    )  # fmt: skip
    from stash_core.cells import plain_row

    return Recommendation(
        request=answer.request, options=answer.options, explanations=answer.explanations,
        best=None if answer.best is None else plain_row(answer.best),  # None, never NaN, for an unknown
        infeasible_reason=in_python_words(answer.infeasible_reason), excluded=answer.excluded,
        label_warnings=answer.label_warnings, answer=answer, profiles_set_aside=answer.profiles_set_aside,
    )  # fmt: skip


@api_options("plan_spot")
def plan_spot(
    workload: Path | str, instances: dict[str, int] | list[str] | str, target_loss: float, budget_s: float, *,
    ps_gbps: float | None = None, pcie_gbps: float = 80.0, revocation_s: float = 0.0, on_demand: bool = False,
    rate_per_h: float | None = None, top: int = 8, db: Path | str | None = None,
) -> SpotPlan:  # fmt: skip
    """The cheapest spot cluster that reaches `target_loss` within `budget_s` (spotDNN's model; `stash spot`).

    Args:
        workload: the workload file (JSON: the model's loss fit and compute times, docs/spot.md).
        instances: offered types with quotas, {"g3.8xlarge": 5}, ["g3.8xlarge:5", "g3.16xlarge:3"] or
            "g3.8xlarge:5,g3.16xlarge:3".
        target_loss: the training loss to reach; budget_s: the time budget, seconds.
        ps_gbps: parameter-server bandwidth, Gbit/s (default the workload's measured one, else 9.6).
        pcie_gbps: PCIe bandwidth within a worker, Gbit/s; revocation_s: overhead of a revoked instance.
        on_demand: price with on-demand instead of spot prices (never revoked: no risk; a revocation_s
            or rate_per_h given with it is refused).
        rate_per_h: revocations per spot instance per hour for the plan's risk (default 0.5).
        top: candidates to keep; db: the database of the catalog.

    Returns:
        SpotPlan: `.best` (None with `.infeasible_reason`), `.to_frame()` one row per candidate.

    Raises:
        UsageError: a bad value, workload file or offer (an instance not in the catalog, no price).
    """
    from stash_core.spot import plan_spot_cluster, plan_table
    from stash_core.spot.fragility import fragile_coefficients
    from stash_core.spot.inputs import (
        build_offers,
        eq10_pairing_notes,
        load_workload,
        parse_offers,
        priced_offers,
        ps_bandwidth_Bps,
    )
    from stash_core.spot.simulate import DEFAULT_RATE_PER_H, RESTART_S, plan_risk

    target_loss = required("target_loss", target_loss, positive_real(1e6))
    budget_s = required("budget_s", budget_s, positive_real(YEAR_S))
    pcie_Bps = required("pcie_gbps", pcie_gbps, positive_real(1e5)) * GBPS
    revocation_s = required("revocation_s", revocation_s, NON_NEGATIVE_YEAR)
    rate = checked("rate_per_h", rate_per_h, Number(0, 3600.0, whole=False, what="a number >= 0"))
    pricing = "on_demand" if switch("on_demand", on_demand) else "spot"
    if pricing == "on_demand" and (revocation_s > 0 or rate is not None):
        raise UsageError(
            "revocation_s and rate_per_h are for spot plans: an on-demand instance is never revoked"
        )
    workload_path = required_path("workload", workload)
    try:
        loaded, doc = load_workload(workload_path)
    except (ValueError, TypeError, RecursionError) as error:  # numbers too long, nesting too deep, text
        raise UsageError(f"workload file {workload}: {error}") from None
    ps_Bps = ps_bandwidth_Bps(checked("ps_gbps", ps_gbps, positive_real(1e5)), doc)
    offered = parse_offers(_offers_text(instances))
    offers, _, unpriced_note = priced_offers(database(db), offered, doc, pricing)
    if not offers:  # no type offered has this price: the first one's refusal, as for a single type
        build_offers(database(db), offered, doc, pricing)
    result = plan_spot_cluster(offers, loaded, target_loss, budget_s, ps_Bps=ps_Bps, pcie_Bps=pcie_Bps,
                               revocation_s=revocation_s)  # fmt: skip
    rows = plan_table(result, required("top", top, count(10_000)))
    fragile, risk = [], None
    if result.best is not None:
        links = (ps_Bps, pcie_Bps, revocation_s)
        fragile = fragile_coefficients(result, offers, loaded, target_loss, budget_s, *links)
        if pricing == "spot":  # on-demand instances are never revoked
            risk = plan_risk(offers, loaded, target_loss, budget_s, ps_Bps, pcie_Bps,
                             rate_per_h=DEFAULT_RATE_PER_H if rate is None else rate,
                             revocation_s=revocation_s or RESTART_S, first=result)  # fmt: skip
    return SpotPlan(
        pricing=pricing, best=rows[0] if result.best is not None else None, candidates=rows,
        bounds=result.bounds, infeasible_reason=result.infeasible_reason, fragile=fragile,
        risk=None if risk is None else vars(risk), plan=result,
        notes=([unpriced_note] if unpriced_note else []) + eq10_pairing_notes(doc, offers),
        request={"target_loss": target_loss, "budget_s": budget_s, "ps_gbps": ps_Bps / GBPS,
                 "pcie_gbps": pcie_Bps / GBPS, "revocation_s": revocation_s, "rate_per_h": (
                     None if pricing == "on_demand" else DEFAULT_RATE_PER_H if rate is None else rate)},
    )  # fmt: skip


def _offers_text(instances: dict[str, int] | list[str] | tuple[str, ...] | str) -> str:
    """The offers as `stash spot --instances` takes them (NAME:QUOTA,...), checked by its rule."""
    if isinstance(instances, dict):
        for name in instances:
            # joined into the command's text, a name with "," or ":" would become other offers or a quota
            if not isinstance(name, str) or "," in name or ":" in name:
                raise UsageError(f"instances: {name!r} is not an instance name (no ',' or ':')"[:200])
        instances = ",".join(f"{name}:{as_text(quota)}" for name, quota in instances.items())
    if isinstance(instances, list | tuple) and instances:  # ["g3.8xlarge:5", ...], a comma list's items
        for offer in instances:
            if not isinstance(offer, str) or "," in offer:  # joined, "a:1,b:2" would be two offers
                raise UsageError(f"instances: {offer!r} is not one 'NAME:QUOTA'"[:200])
        instances = ",".join(instances)
    if not isinstance(instances, str) or not instances.strip():
        expected = "{NAME: QUOTA}, ['NAME:QUOTA', ...] or 'NAME:QUOTA,...'"
        raise UsageError(f"instances: expected {expected}, got {instances!r}"[:200])
    return checked("instances", instances, offers_text)
