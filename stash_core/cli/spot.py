"""`stash spot`: plan the cheapest spot cluster that reaches a target loss within a time budget (spotDNN).

cli/main.py wires it in with `add_commands(subparsers, parser_class)` and dispatches through COMMANDS.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from stash_core.cli.args import add_db_argument, db_path
from stash_core.decide.spot import plan_spot_cluster, plan_table
from stash_core.decide.spot.inputs import build_offers, load_workload, parse_offers
from stash_core.errors import UsageError

GBPS = 1e9 / 8  # bytes per second in one Gbit/s


def add_commands(subparsers: Any, parser_class: type[argparse.ArgumentParser] | None = None) -> None:
    spot = subparsers.add_parser(
        "spot", help="cheapest spot cluster that reaches a target loss within a time budget (spotDNN model)"
    )
    spot.add_argument("--workload", required=True, type=Path, help="workload file (JSON), see docs")
    spot.add_argument("--instances", required=True, help="offered types with quotas: NAME[:QUOTA],...")
    spot.add_argument("--target-loss", required=True, type=float, help="training loss to reach")
    spot.add_argument("--budget-s", required=True, type=float, help="time budget in seconds")
    spot.add_argument("--ps-gbps", type=float, default=9.6, help="parameter-server bandwidth (Gbit/s)")
    spot.add_argument("--pcie-gbps", type=float, default=80.0, help="PCIe bandwidth within a worker")
    spot.add_argument("--revocation-s", type=float, default=0.0, help="overhead of a revoked instance")
    spot.add_argument("--on-demand", action="store_true", help="price with on-demand instead of spot")
    spot.add_argument("--top", type=int, default=8, help="candidates to list")
    spot.add_argument("--json", action="store_true", help="print the plan as JSON")
    add_db_argument(spot)


def cmd_spot(args: argparse.Namespace) -> int:
    if args.top < 1:
        raise UsageError("--top must be at least 1")
    workload, doc = load_workload(args.workload)
    pricing = "on_demand" if args.on_demand else "spot"
    offers = build_offers(db_path(args), parse_offers(args.instances), doc, pricing)
    result = plan_spot_cluster(
        offers, workload, args.target_loss, args.budget_s,
        ps_Bps=args.ps_gbps * GBPS, pcie_Bps=args.pcie_gbps * GBPS, revocation_s=args.revocation_s,
    )  # fmt: skip
    rows = plan_table(result, args.top)
    if args.json:
        best = rows[0] if result.best is not None else None
        print(json.dumps({"pricing": pricing, "best": best, "candidates": rows, "bounds": result.bounds,
                          "infeasible_reason": result.infeasible_reason}, indent=2))  # fmt: skip
        return 0 if result.best is not None else 1
    print(format_plan(result, rows, pricing, args.target_loss, args.budget_s))
    return 0 if result.best is not None else 1


def format_plan(result: Any, rows: list[dict[str, Any]], pricing: str, target_loss: float,
                budget_s: float) -> str:  # fmt: skip
    price = "spot" if pricing == "spot" else "on-demand"
    lines = [
        f"target loss {target_loss:g} within {budget_s:.0f} s, {price} prices; "
        f"workers between {result.bounds[0]} and {result.bounds[1]} (eqs. 15-16)"
    ]
    if result.best is None:
        lines.append(f"no plan: {result.infeasible_reason}")
    else:
        best = result.best
        lines.append(
            f"cheapest: {best.label()}  - {best.training_s:.0f} s, ${best.cost_usd:.2f} "
            f"(${best.usd_per_h:.2f}/h; {best.iterations:.0f} iterations of {best.iteration_s:.3f} s, "
            f"R {best.convergence:.2f})"
        )
    lines.append("")
    width = max([len("cluster"), *(len(row["cluster"]) for row in rows)]) + 2
    lines.append(f"  {'cluster':<{width}}{'workers':>8}{'time s':>10}{'cost $':>10}{'$/h':>8}  within budget")
    for row in rows:
        lines.append(
            f"  {row['cluster']:<{width}}{row['workers']:>8}{row['training_s']:>10.0f}"
            f"{row['cost_usd']:>10.2f}{row['usd_per_h']:>8.2f}  {'yes' if row['within_budget'] else 'no'}"
        )
    lines.append("predicted by the spotDNN model (asynchronous PS training); not a measurement")
    return "\n".join(lines)


COMMANDS = {"spot": cmd_spot}
