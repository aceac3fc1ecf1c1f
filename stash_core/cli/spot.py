"""`stash spot`: plan the cheapest spot cluster that reaches a target loss within a time budget (spotDNN).

cli/main.py wires it in with `add_commands(subparsers, parser_class)` and dispatches through COMMANDS.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from stash_core.cli import spot_profile as cli_spot_profile
from stash_core.cli import spot_replan as cli_spot_replan
from stash_core.cli.args import (
    MAX_REVOCATIONS_PER_H,
    add_db_argument,
    comma_list,
    count,
    db_path,
    identifier,
    non_negative,
    positive_real,
    shape_text,
)
from stash_core.errors import UsageError
from stash_core.pathargs import input_path, output_path
from stash_core.spec_parse import offers_text
from stash_core.terminal import printable
from stash_core.units import usd_words
from stash_core.userfiles import json_text
from stash_core.zoo_names import canonical_model

# The planner is imported inside cmd_spot: building `stash --help` must not load pandas.

YEAR_S = 365 * 86400.0


def add_commands(subparsers: Any, parser_class: type[argparse.ArgumentParser] | None = None) -> None:
    spot = subparsers.add_parser(
        "spot", help="cheapest spot cluster that reaches a target loss within a time budget (spotDNN model)"
    )
    spot.add_argument("--workload", required=True, type=input_path, help="workload file (JSON), see docs")
    spot.add_argument(
        "--instances", required=True, type=offers_text, help="offered types with quotas: NAME[:QUOTA],..."
    )
    spot.add_argument("--target-loss", required=True, type=positive_real(1e6), help="training loss to reach")
    spot.add_argument("--budget-s", required=True, type=positive_real(YEAR_S), help="time budget in seconds")
    spot.add_argument(
        "--ps-gbps",
        type=positive_real(1e5),
        default=None,
        help="parameter-server bandwidth (Gbit/s; default: the workload's measured one, else 9.6)",
    )
    spot.add_argument(
        "--pcie-gbps", type=positive_real(1e5), default=80.0, help="PCIe bandwidth within a worker, Gbit/s"
    )
    spot.add_argument(
        "--revocation-s", type=non_negative(YEAR_S), default=0.0, help="overhead of a revoked instance"
    )
    spot.add_argument("--on-demand", action="store_true", help="price with on-demand instead of spot")
    spot.add_argument(
        "--rate-per-h", type=non_negative(MAX_REVOCATIONS_PER_H), default=None,
        help="revocations per spot instance per hour at which the plan's risk is simulated (default 0.5)",
    )  # fmt: skip
    spot.add_argument("--top", type=count(10_000), default=8, help="candidates to list")
    spot.add_argument("--json", action="store_true", help="print the plan as JSON")
    add_db_argument(spot)

    fit_loss = subparsers.add_parser(
        "spot-fit-loss",
        help="fit spotDNN's loss model g1..g5 (eq. 3) to loss curves; write them to a workload",
    )
    fit_loss.add_argument(
        "--csv",
        required=True,
        type=input_path,
        help="loss curves: iteration (updates over all workers), loss, batch_size, workers [, R]",
    )
    fit_loss.add_argument(
        "--workload", required=True, type=output_path, help="workload file to write g and the fit into"
    )
    fit_loss.add_argument("--json", action="store_true", help="print the fit as JSON")

    memory = subparsers.add_parser(
        "spot-memory", help="largest batch per GPU against memory (spotDNN eq. 10): measure, fit a2, b2"
    )
    memory.add_argument("--model", required=True, type=identifier, help="zoo model (or file.py:FACTORY)")
    memory.add_argument(
        "--batches", type=comma_list(count(1 << 20), most=16), default=[8, 32, 128],
        help="3 or more different batch sizes to measure, one process each",
    )  # fmt: skip
    memory.add_argument("--device", default="cpu", help="cpu or cuda[:N]")
    memory.add_argument("--num-classes", type=count(10**7), default=None, help="classes of the output")
    memory.add_argument("--input-shape", type=shape_text, default=None, help="input shape, e.g. 3,32,32")
    memory.add_argument("--workload", type=output_path, help="workload file to write a2, b2 and the fit into")
    memory.add_argument("--json", action="store_true", help="print the fit and the table as JSON")
    add_db_argument(memory)
    cli_spot_profile.add_commands(subparsers)
    cli_spot_replan.add_commands(subparsers, offers_text)


def cmd_spot(args: argparse.Namespace) -> int:
    from stash_core.api.decisions import plan_spot

    if args.on_demand and (args.revocation_s > 0 or args.rate_per_h is not None):
        raise UsageError(
            "--revocation-s and --rate-per-h are for spot plans: an on-demand instance is never revoked"
        )
    plan = plan_spot(
        args.workload, args.instances, args.target_loss, args.budget_s, ps_gbps=args.ps_gbps,
        pcie_gbps=args.pcie_gbps, revocation_s=args.revocation_s, on_demand=args.on_demand,
        rate_per_h=args.rate_per_h, top=args.top, db=db_path(args),
    )  # fmt: skip
    feasible = 0 if plan.best is not None else 1
    if feasible:  # on stderr too, as every command's failure (recommend's "no recommendation")
        print(printable(f"stash: no plan: {plan.infeasible_reason}"), file=sys.stderr)
    if args.json:  # no plan: "error" and "exit_status" as every command's failure
        failure = {"error": f"no plan: {plan.infeasible_reason}", "exit_status": 1} if feasible else {}
        print(json_text({**plan.to_dict(), **failure}, indent=2))
        return feasible
    risk = None
    if plan.risk is not None:
        from stash_core.spot.simulate import PlanRisk

        risk = PlanRisk(**plan.risk)
    print(format_plan(plan.plan, plan.candidates, plan.pricing, args.target_loss, args.budget_s, risk))
    for note in plan.notes:
        print(f"note: {note}")
    if plan.fragile:
        from stash_core.spot.fragility import fragile_text

        print(f"fragile plan: it changes when {fragile_text(plan.fragile)} (a fitted coefficient moved by "
              "its error): refit the workload with more data before renting on it")  # fmt: skip
    return feasible


def format_plan(result: Any, rows: list[dict[str, Any]], pricing: str, target_loss: float,
                budget_s: float, risk: Any = None) -> str:  # fmt: skip
    from stash_core.spot.planner import PLAN_BASIS, searched_workers
    from stash_core.spot.simulate import below_plan

    price = "spot" if pricing == "spot" else "on-demand"
    head = f"target loss {target_loss:g} within {budget_s:.0f} s, {price} prices"
    lines = [f"{head}; workers {searched_workers(result)}"]
    if result.best is None:
        lines.append(f"no plan: {result.infeasible_reason}")
    else:
        best = result.best
        lines.append(
            f"{'cheapest' if result.search != 'window' else 'cheapest found'}: {best.label()}  - "
            f"{best.training_s:.0f} s, {usd_words(best.cost_usd)} "
            f"(${best.usd_per_h:.2f}/h; {best.iterations:.0f} iterations of {best.iteration_s:.3f} s, "
            f"R {best.convergence:.2f})"
        )
        if risk is not None:
            planned = f"as planned: {usd_words(best.cost_usd)}, {best.training_s:.0f} s"
            if why := below_plan(risk, best.cost_usd):
                planned += f"; {why}"
            lines.append(f"risk: {risk.text()} ({planned})")
    if rows:
        lines += ["", *_candidate_lines(rows)]
    lines.append(PLAN_BASIS)
    return "\n".join(lines)


def _candidate_lines(rows: list[dict[str, Any]]) -> list[str]:
    """The candidates as a table; a cluster outside the loss model has no time or cost (the model predicts
    none there), said in words rather than as inf."""
    width = max([len("cluster"), *(len(row["cluster"]) for row in rows)]) + 2
    lines = [f"  {'cluster':<{width}}{'workers':>8}{'time s':>10}{'cost $':>10}{'$/h':>8}  within budget"]
    for row in rows:
        if row.get("outside_loss_model"):
            time_s, cost, within = "-", "-", "no: outside the loss model"
        else:
            time_s, cost = f"{row['training_s']:.0f}", f"{row['cost_usd']:.2f}"
            within = "yes" if row["within_budget"] else "no"
        lines.append(f"  {row['cluster']:<{width}}{row['workers']:>8}{time_s:>10}{cost:>10}"
                     f"{row['usd_per_h']:>8.2f}  {within}")  # fmt: skip
    return lines


def cmd_spot_fit_loss(args: argparse.Namespace) -> int:
    from stash_core.spot.inputs import check_writable, update_workload
    from stash_core.spot.lossfit import MAX_FIT_ERROR, fit_loss, flat_fit_reason, read_loss_csv

    check_writable(args.workload)
    existed = os.path.exists(args.workload)
    kept = f"{args.workload} is " + ("left as it was" if existed else "not made")
    curves = read_loss_csv(args.csv)
    fit = fit_loss(curves)
    report = {"g": list(fit.g), **fit.as_dict(), "source": str(args.csv)}
    if not fit.acceptable:
        raise UsageError(
            f"the loss fit's mean error {fit.mean_rel_error:.1%} is beyond {MAX_FIT_ERROR:.0%} (max "
            f"{fit.max_rel_error:.1%}); {kept}"
        )
    flat = flat_fit_reason(fit, curves)
    if flat:  # the planner refuses it: no loss left to lose
        raise UsageError(f"{flat} (the loss must fall with training): do the curves fall? {kept}")
    if fit.g[3] < 0:  # the planner refuses it: sqrt(R + g4) at R = 0, one worker
        raise UsageError(
            f"the loss fit gives g4 = {fit.g[3]:.4g} < 0, which the planner cannot use for one worker: "
            f"record curves with 1 worker too; {kept}"
        )
    if fit.g[0] < 0:  # the planner refuses it: eq. 3 divides by j + g1, from iteration 0
        raise UsageError(
            f"the loss fit gives g1 = {fit.g[0]:.4g} < 0, which the planner cannot use (eq. 3 divides by "
            f"j + g1 from iteration 0): record the curves from the training's start; {kept}"
        )
    update_workload(args.workload, {"g": list(fit.g), "loss_fit": {**fit.as_dict(), "source": str(args.csv)}})
    # a new file holds the fit alone: `stash spot` then says the first field it lacks, with no word of why
    alone = "" if existed else (
        " (a new file: it holds the loss fit alone; `stash spot` also needs the model's size, compute times "
        "and contention, which spot-profile and spot-memory write, docs/spot.md)"
    )
    if args.json:
        print(json_text({**report, "written_to": str(args.workload), "new_file": not existed}, indent=2))
        return 0
    g = ", ".join(f"g{i + 1} = {v:.6g}" for i, v in enumerate(fit.g))
    print(f"{g}\nfit over {fit.rows} points (batches {list(fit.batches)}, "
          f"workers {list(fit.worker_counts)}): mean error {fit.mean_rel_error:.2%}, within the "
          f"{MAX_FIT_ERROR:.0%} a fit's mean may reach (max {fit.max_rel_error:.2%}); written to "
          f"{args.workload}{alone}")  # fmt: skip
    return 0


def cmd_spot_memory(args: argparse.Namespace) -> int:
    from stash_core.catalog import list_instances
    from stash_core.spec_parse import parse_input_shape
    from stash_core.spot.batch_memory import (
        MAX_FIT_ERROR,
        MIN_BATCHES,
        batch_table,
        check_device,
        profile_memory,
    )
    from stash_core.spot.inputs import check_writable, update_workload

    try:
        check_device(args.device)
    except UsageError as error:  # "device ...": the option's name
        raise UsageError(f"--{error}") from None
    if len(set(args.batches)) < MIN_BATCHES:
        raise UsageError(f"--batches: give {MIN_BATCHES} or more different batch sizes (two always fit a "
                         "line, so the linearity check could not fire), e.g. 8,32,128")  # fmt: skip
    if args.workload is not None:
        _same_model(check_writable(args.workload), args.model, args.workload)
    shape = parse_input_shape(args.input_shape) if args.input_shape else None
    fit = profile_memory(args.model, sorted(set(args.batches)), args.device, args.num_classes, shape)
    if fit.max_rel_error > MAX_FIT_ERROR:
        raise UsageError(
            f"peak memory is not linear in the batch (error {fit.max_rel_error:.1%} > {MAX_FIT_ERROR:.0%}): "
            "measure at more or larger batch sizes"
        )
    rows = batch_table(fit, list_instances(db_path(args)).to_dict(orient="records"))
    if args.workload is not None:
        memory_fit = {**fit.as_dict(), "model": canonical_model(args.model)}
        update_workload(args.workload, {"a2": fit.a2, "b2": fit.b2, "memory_fit": memory_fit})
    written = {} if args.workload is None else {"written_to": str(args.workload)}
    if args.json:
        print(json_text({**fit.as_dict(), "batch_per_gpu": rows, **written}, indent=2))
        return 0
    peaks = ", ".join(f"{b}: {p / 2**20:.0f} MiB" for b, p in zip(fit.batches, fit.peak_bytes, strict=True))
    where = "GPU allocation" if fit.device != "cpu" else "CPU peak resident set, a stand-in for a GPU's"
    lines = [f"peak memory of a training step ({where}): {peaks}",
             f"a2 = {fit.a2:.4g} samples/GiB, b2 = {fit.b2:.4g} (fit error {fit.max_rel_error:.1%})",
             "largest batch per GPU, b_k = 2^floor(log2(a2 mem + b2)):", *batch_lines(rows)]  # fmt: skip
    if any(row.get("extrapolated") for row in rows):
        measured = f"{min(fit.batches)} to {max(fit.batches)}"
        lines.append(f"*: outside the batches measured ({measured}), the fit extrapolated; measure at such "
                     "batches (--batches) before planning with it")  # fmt: skip
    if args.workload is not None:  # the file changed: said, as spot-fit-loss says it
        lines.append(f"a2, b2 and memory_fit written to {args.workload}")
    print("\n".join(lines))
    return 0


def _same_model(workload: dict, model: str, path: object) -> None:
    """UsageError when the workload file is of another model: its a2 and b2 would size that model's batches
    from this one's memory."""
    written = workload.get("model")
    if isinstance(written, str) and canonical_model(written) != canonical_model(model):
        raise UsageError(
            f"--workload {path} is of model {printable(written)}, not {printable(model)}: give a workload "
            "file of this model (or a new one)"
        )


def batch_lines(rows: list[dict[str, Any]]) -> list[str]:
    """eq. 10's batch per GPU of each instance, in columns as wide as their longest name (catalog names such
    as Standard_NC24ads_A100_v4 are longer than any fixed width)."""
    cells = []
    for row in rows:
        gib = "?" if row["gpu_memory_gib"] is None else f"{row['gpu_memory_gib']:g} GiB"
        batch = "unknown memory" if row["gpu_memory_gib"] is None else (row["batch_per_gpu"] or "none fits")
        mark = "*" if row.get("extrapolated") else ""  # outside the batches measured
        cells.append((row["instance"], row["accelerator"] or "", gib, f"{batch}{mark}"))
    widths = [max((len(cell[i]) for cell in cells), default=0) for i in range(3)]
    return [f"  {name:<{widths[0]}}  {accelerator:<{widths[1]}}  {gib:>{widths[2]}}  {batch}"
            for name, accelerator, gib, batch in cells]  # fmt: skip


COMMANDS = {
    "spot": cmd_spot,
    "spot-fit-loss": cmd_spot_fit_loss,
    "spot-memory": cmd_spot_memory,
    **cli_spot_profile.COMMANDS,
    **cli_spot_replan.COMMANDS,
}
