"""`stash spot-replan` and `stash spot-simulate`: spotDNN after a revocation, and over many revocations.

spot-replan: the cheapest cluster of the instances still running plus offered ones that reaches the target
loss from the loss reached, within what is left of the budget. spot-simulate: cost and deadline outcome of
spotDNN against on-demand and against planning without contention, over a revocation rate (Monte Carlo) or a
revocation trace. cli/spot.py adds the commands.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from stash_core.cli.args import (
    MAX_REVOCATIONS_PER_H,
    add_db_argument,
    count,
    db_path,
    non_negative,
    positive_real,
    seed,
)
from stash_core.errors import UsageError
from stash_core.pathargs import input_path
from stash_core.spec_parse import running_text
from stash_core.terminal import printable
from stash_core.units import usd_words
from stash_core.userfiles import json_text

# The planner is imported inside the commands: building `stash --help` must not load pandas.

YEAR_S = 365 * 86400.0


def _common(parser: argparse.ArgumentParser, offers_text: Any) -> None:
    parser.add_argument("--workload", required=True, type=input_path, help="workload file (JSON)")
    parser.add_argument(
        "--instances", required=True, type=offers_text, help="offered types with quotas: NAME[:QUOTA],..."
    )
    parser.add_argument(
        "--target-loss", required=True, type=positive_real(1e6), help="training loss to reach"
    )
    parser.add_argument(
        "--ps-gbps", type=positive_real(1e5), default=None,
        help="parameter-server bandwidth (Gbit/s; default: the workload's measured one, else 9.6)",
    )  # fmt: skip
    parser.add_argument("--pcie-gbps", type=positive_real(1e5), default=80.0, help="PCIe bandwidth, Gbit/s")
    parser.add_argument("--json", action="store_true", help="print the answer as JSON")
    add_db_argument(parser)


def add_commands(subparsers: Any, offers_text: Any) -> None:
    replan = subparsers.add_parser(
        "spot-replan", help="re-plan a spot cluster after a revocation: running instances kept (spotDNN)"
    )
    _common(replan, offers_text)
    replan.add_argument(
        "--running", required=True, type=running_text,
        help="instances still running: NAME[:COUNT],... (a count of 0: every one of that type was revoked)"
    )
    replan.add_argument("--current-loss", required=True, type=positive_real(1e6), help="loss reached so far")
    replan.add_argument(
        "--budget-s", required=True, type=positive_real(YEAR_S), help="seconds of budget left"
    )
    replan.add_argument(
        "--revocation-s", type=non_negative(YEAR_S), default=30.0, help="overhead of the revocation"
    )
    replan.add_argument(
        "--on-demand", action="store_true",
        help="price every instance of the new cluster, the running ones too, at on-demand rates",
    )

    simulate = subparsers.add_parser(
        "spot-simulate",
        help="revocations simulated: spotDNN against on-demand and against planning without contention",
    )
    _common(simulate, offers_text)
    simulate.add_argument("--deadline-s", required=True, type=positive_real(YEAR_S), help="time budget")
    how = simulate.add_mutually_exclusive_group(required=True)
    how.add_argument("--rate-per-h", type=non_negative(MAX_REVOCATIONS_PER_H),
                     help="revocations per spot instance per hour")  # fmt: skip
    how.add_argument("--trace", type=input_path, help="revocation trace CSV: time_s,instance")
    simulate.add_argument(
        "--revocation-s", type=non_negative(YEAR_S), default=30.0, help="overhead of each revocation"
    )
    simulate.add_argument(
        "--runs", type=count(100_000), default=None, help="Monte Carlo runs with --rate-per-h (200)"
    )
    simulate.add_argument("--seed", type=seed, default=None, help="random seed with --rate-per-h (1)")


def _inputs(
    args: argparse.Namespace, pricing: str
) -> tuple[Any, dict, list, float, float, list[str], str | None]:
    """(workload, its file, the offers, PS and PCIe bytes/s, the types left out, the note that says so): a
    type without a price of `pricing` is left out as `stash spot` leaves it, while another type has one;
    where none has, the first one's refusal."""
    from stash_core.spot.inputs import (
        build_offers,
        load_workload,
        parse_offers,
        priced_offers,
        ps_bandwidth_Bps,
    )

    try:
        workload, doc = load_workload(args.workload)
    except (ValueError, TypeError, RecursionError) as error:
        raise UsageError(f"workload file {args.workload}: {error}") from None
    offered = parse_offers(args.instances)
    offers, unpriced, note = priced_offers(db_path(args), offered, doc, pricing)
    if not offers:  # none priced: the first one's refusal
        offers, unpriced, note = build_offers(db_path(args), offered, doc, pricing), [], None
    links = ps_bandwidth_Bps(args.ps_gbps, doc), args.pcie_gbps * 1e9 / 8
    return workload, doc, offers, *links, unpriced, note


def cmd_spot_replan(args: argparse.Namespace) -> int:
    from stash_core.spot.inputs import eq10_pairing_notes, parse_offers
    from stash_core.spot.model import most_workers
    from stash_core.spot.planner import WINDOW_NOTE
    from stash_core.spot.replan import replan

    pricing = "on_demand" if args.on_demand else "spot"
    # a type offered without a price of the plan's kind is left out with a note, as `stash spot` leaves it
    workload, doc, offers, ps, pcie, unpriced, unpriced_note = _inputs(args, pricing)
    notes = ([unpriced_note] if unpriced_note else []) + eq10_pairing_notes(doc, offers)
    by_name = {offer.worker.instance: offer for offer in offers}
    running = []
    for name, number in parse_offers(args.running):
        if name in unpriced and number:
            kind = "on-demand" if args.on_demand else "spot"
            raise UsageError(f"--running {name}: it has no {kind} price in the catalog to re-plan with (set "
                             "one with `stash instances set`)")  # fmt: skip
        if name in unpriced:
            continue  # none of it runs: left out of the plan like any type without that price
        if name not in by_name:
            raise UsageError(f"--running {name}: not among --instances (its price and speed come from there)")
        if number > by_name[name].quota:
            typed = [part.partition(":")[0].strip() for part in args.running.split(",")]
            said = f"--running {name}:{number}" if typed.count(name) == 1 else (
                f"--running names {name} {typed.count(name)} times, {number} together")  # fmt: skip
            raise UsageError(f"{said}: more than its quota of {by_name[name].quota}")
        running += [by_name[name].worker] * number
    if args.current_loss <= args.target_loss:
        raise UsageError(
            f"--current-loss {args.current_loss:g} already reaches --target-loss {args.target_loss:g}"
        )
    result = replan(running, offers, workload, args.target_loss, args.current_loss, args.budget_s, ps, pcie,
                    args.revocation_s)  # fmt: skip
    best = result.best
    upper = most_workers(workload)
    tried = len({plan.label() for plan in result.candidates})  # windows over identical instances: one cluster
    answer = {
        "running": len(running), "pricing": pricing, "infeasible_reason": result.infeasible_reason,
        "most_workers": upper,
        "best": None if best is None else {
            "cluster": best.label(), "workers": best.workers, "added": best.workers - len(running),
            "training_s": best.training_s, "cost_usd": best.cost_usd, "usd_per_h": best.usd_per_h,
        },
        "tried": tried,
        "search": result.search,  # "exact": every mix tried; "window": spotDNN's heuristic
        "notes": notes,
    }  # fmt: skip
    if best is None:  # on stderr too, as every command's failure (recommend's "no recommendation")
        print(printable(f"stash: no plan: {result.infeasible_reason}"), file=sys.stderr)
    if args.json:  # no plan: "error" and "exit_status" as every command's failure
        failure = {"error": f"no plan: {result.infeasible_reason}", "exit_status": 1} if best is None else {}
        print(json_text({**answer, **failure}, indent=2))
    elif best is None:
        print(f"no plan: {result.infeasible_reason}")
    else:
        clusters = f"{tried} cluster{'' if tried == 1 else 's'} tried"
        if result.search == "window":  # too many mixes to try all: a cheaper one may exist
            clusters += f"; {WINDOW_NOTE}"
        # the cost is the whole cluster's from now on: the running instances are paid for too
        print(f"keep {len(running)} running, add {best.workers - len(running)}: {best.label()}  - "
              f"trains in {best.training_s:.0f} s of the {args.budget_s:.0f} s left (revocation overhead "
              f"{args.revocation_s:.0f} s included), {usd_words(best.cost_usd)} from now for the whole "
              f"cluster ({clusters})\npredicted by the spotDNN model; not a measurement")  # fmt: skip
    for note in notes if not args.json else []:
        print(f"note: {note}")
    if len(running) > upper and not args.json:
        # Eq. 15 plans no cluster this large: the parameter server saturates, outside the contention model.
        print(f"warning: the {len(running)} running workers are more than the {upper} the parameter server "
              "serves before it saturates (eq. 15); consider stopping some", file=sys.stderr)  # fmt: skip
    return 0 if best is not None else 1


def cmd_spot_simulate(args: argparse.Namespace) -> int:
    from stash_core.spot.inputs import eq10_pairing_notes, on_demand_offers, parse_offers
    from stash_core.spot.simulate import DEFAULT_SEED, NoStartingPlan, read_trace, simulate, simulation_notes

    if args.trace is not None and (args.runs is not None or args.seed is not None):
        raise UsageError("--runs and --seed apply to --rate-per-h: a --trace is replayed once, as it is")
    trace = read_trace(args.trace) if args.trace is not None else None
    workload, doc, spot_offers, ps, pcie, no_spot, no_spot_note = _inputs(args, "spot")
    on_demand, unpriced, unpriced_note = on_demand_offers(db_path(args), parse_offers(args.instances), doc)
    try:
        rows = simulate(spot_offers, on_demand, workload, args.target_loss, args.deadline_s, ps, pcie,
                        rate_per_h=args.rate_per_h or 0.0, revocation_s=args.revocation_s,
                        runs=args.runs or 200, seed=DEFAULT_SEED if args.seed is None else args.seed,
                        trace=trace)  # fmt: skip
    except NoStartingPlan as exc:  # an answer, as `stash spot` says it: exit status 1
        reason = "no plan: " + str(exc).removeprefix("simulation: ")
        print(json_text({"error": reason, "exit_status": 1}, indent=2) if args.json else printable(reason))
        print(printable(f"stash: {reason}"), file=sys.stderr)
        return 1
    # every strategy without a plan that meets the deadline (its runs train the fastest cluster): no
    # configuration meets it, an answer that exits 1 as `stash spot` does
    reasons = [row.get("infeasible_reason") for row in rows]
    unmet = reasons[0] if reasons and all(reasons) else None
    if args.json:
        scenario = {"target_loss": args.target_loss, "deadline_s": args.deadline_s,
                    "revocation_s": args.revocation_s}  # fmt: skip
        if trace is not None:
            scenario["trace"] = str(args.trace)
        else:
            scenario |= {"rate_per_h": args.rate_per_h or 0.0, "runs": args.runs or 200,
                         "seed": DEFAULT_SEED if args.seed is None else args.seed}  # fmt: skip
        failure = {} if unmet is None else {"error": f"no plan meets the deadline: {unmet}", "exit_status": 1}
        print(json_text({**scenario, "strategies": rows, "no_on_demand_price": unpriced,
                         "no_spot_price": no_spot, "notes": eq10_pairing_notes(doc, spot_offers), **failure},
                        indent=2))  # fmt: skip
        return 0 if unmet is None else 1
    source = f"trace {args.trace}" if trace is not None else f"{args.rate_per_h:g} revocations/h per instance"
    lines = [f"target loss {args.target_loss:g} by {args.deadline_s:.0f} s; {source}; "
             f"{args.revocation_s:.0f} s per revocation",
             f"  {'strategy':<15}{'first plan':<34}{'runs':>6}{'P(deadline)':>13}{'95% interval':>14}"
             f"{'mean s':>9}{'p90 s':>9}{'mean $':>9}{'± $':>8}{'revoked':>9}"]  # fmt: skip
    for row in rows:
        ci = row["p_deadline_ci95"]  # none where one run is the whole answer
        interval = "-" if ci is None else f"{ci[0]:.0%}-{ci[1]:.0%}"
        lines.append(f"  {row['strategy']:<15}{row['first_plan']:<34}{row['runs']:>6}"
                     f"{row['p_deadline']:>13.0%}{interval:>14}"
                     f"{_seconds(row['mean_time_s']):>9}{_seconds(row['p90_time_s']):>9}"
                     f"{row['mean_cost_usd']:>9.2f}{_cost_spread(row['mean_cost_ci95_usd']):>8}"
                     f"{row['mean_revocations']:>9.1f}")  # fmt: skip
    lines += simulation_notes(rows)
    lines += [note for note in (no_spot_note, unpriced_note) if note] + eq10_pairing_notes(doc, spot_offers)
    lines.append("simulated with the spotDNN model (no contention: planned with P = 0, trained with the true "
                 "contention); on-demand instances are never revoked")  # fmt: skip
    print("\n".join(lines))
    return 0 if unmet is None else 1


def _cost_spread(half_usd: float | None) -> str:
    """The mean cost's 95% half-width: '-' where one run is the whole answer."""
    return "-" if half_usd is None else f"{half_usd:.2f}"


def _seconds(value: float | None) -> str:
    return "never" if value is None else f"{value:.0f}"


COMMANDS = {"spot-replan": cmd_spot_replan, "spot-simulate": cmd_spot_simulate}
