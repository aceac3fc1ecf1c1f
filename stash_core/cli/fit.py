"""`stash fit`: fit and validate the models of interconnect and network stall, or predict a model's stall."""

from __future__ import annotations

import argparse
import statistics
import sys
from typing import TYPE_CHECKING, Any

from stash_core.analysis.comm import beta_from_gbps
from stash_core.cli.args import (
    add_db_argument,
    count,
    db_path,
    gbps_text,
    identifier,
    non_negative,
    positive_real,
    shape_text,
)
from stash_core.cli.figures import fixed, percent
from stash_core.errors import UsageError
from stash_core.spec_parse import WORKERS, Number
from stash_core.terminal import one_line, printable
from stash_core.units import decimals_for, finite_float

if TYPE_CHECKING:
    from stash_core.decide.fit import FitReport

# The decisions are imported inside the functions: building `stash --help` must not load pandas.

PUBLISHED_ERRORS = "Habitat 11.8%, Srifty 8%, dPRO and Ceer under 5%, Lumos 3.3%"


def add_commands(subparsers: Any, parser_class: type[argparse.ArgumentParser] | None = None) -> None:
    """Add `fit` to `stash`'s subparsers."""
    fit = subparsers.add_parser("fit", help="fit and validate models of interconnect and network stall")
    fit.add_argument("--stall", choices=["interconnect", "network", "all"], default="all",
                     help="the stall to fit")
    fit.add_argument("--by-batch-size", action="store_true", help="fit each batch size separately")
    fit.add_argument(
        "--alpha-s", type=non_negative(10), default=None, help="per-bucket latency for the alpha-beta model"
    )
    beta = fit.add_mutually_exclusive_group()
    beta.add_argument(
        "--beta-s-per-byte", type=positive_real(1.0), default=None, help="seconds per byte of the link"
    )
    beta.add_argument(
        "--link-gbps",
        type=Number(1e-6, 1e5, whole=False, what="from 1e-06 (1 kbit/s) to 1e+05"),
        default=None,
        help="link bandwidth instead of beta (either one link for every configuration, in place of its "
        "probes and known bandwidth)",
    )
    fit.add_argument("--all-models", action="store_true", help="show every model, not only the best two")
    fit.add_argument("--residuals", action="store_true", help="print every point's residual")
    fit.add_argument(
        "--predict", metavar="MODEL", type=identifier, default=None, help="predict the stall of this model"
    )
    fit.add_argument("--workers", type=WORKERS, default=None, help="with --predict: workers per node")
    fit.add_argument("--nodes", type=WORKERS, default=None, help="with --predict: nodes (default: 1)")
    fit.add_argument(
        "--instance", type=identifier, default=None,
        help="with --predict: instance label (without it: the runs made without one, where others match too)",
    )
    fit.add_argument(
        "--bandwidth", type=gbps_text, default=None, help="with --predict: link bandwidth (e.g. 1gbit, 25)"
    )
    fit.add_argument("--device", choices=["cpu", "cuda"], default=None, help="with --predict: cpu or cuda")
    fit.add_argument(
        "--batch-size", type=count(2**20), default=None, help="with --predict and --by-batch-size: per worker"
    )
    fit.add_argument(
        "--num-classes", type=count(10**7), default=None, help="with --predict: the model's classes"
    )
    fit.add_argument(
        "--input-shape", type=shape_text, default=None, help="with --predict: C,H,W of the model's input"
    )
    add_db_argument(fit)


def cmd_fit(args: argparse.Namespace) -> int:
    from stash_core.decide.fit import MODELLED_STALLS, fit_stall_models

    stalls = MODELLED_STALLS if args.stall == "all" else (args.stall,)
    beta = args.beta_s_per_byte
    if args.link_gbps is not None:
        if args.link_gbps <= 0:
            raise UsageError("--link-gbps must be positive")
        beta = beta_from_gbps(args.link_gbps)
    if args.alpha_s is not None and beta is None:
        raise UsageError("--alpha-s needs --beta-s-per-byte or --link-gbps")
    _refuse_unused(args)
    report = fit_stall_models(
        db_path(args),
        stalls=stalls,
        alpha_s=args.alpha_s,
        beta_s_per_byte=beta,
        by_batch_size=args.by_batch_size,
    )
    if args.predict:
        return _print_predictions(args, report, stalls, beta)
    if _no_database(args, report):  # a mistyped --db is no empty database: exit 2, as runs and show
        raise UsageError(f"no database at {db_path(args)} (--db or $STASH_DB chooses one): nothing to fit")
    # group labels and model names are text from the database: data, never a terminal escape
    print(printable(format_fit_report(report, all_models=args.all_models, stalls=stalls)))
    if args.residuals:
        residuals = report.residuals(fitted_only=True)  # as the table above: no figures of an unfitted model
        if not residuals.empty:
            columns = ["stall", "group", "fit", "model", "measured_s", "fitted_s", "residual_s", "heldout_s"]
            table = residuals[columns].copy()
            for column in ("stall", "group", "fit", "model"):
                table[column] = table[column].map(one_line)
            print()
            print(table.to_string(index=False, float_format=lambda v: f"{v:.5f}", na_rep="-"))
    return 0


def _no_database(args: argparse.Namespace, report: FitReport) -> bool:
    """Whether the database named is missing (and so nothing was fitted): said, not taken for no profiles."""
    return not db_path(args).exists() and report.summary().empty


PREDICT_ONLY = (
    "workers", "nodes", "instance", "bandwidth", "device", "batch_size", "num_classes", "input_shape",
)  # fmt: skip


def _refuse_unused(args: argparse.Namespace) -> None:
    """A prediction's options without --predict (or --batch-size without --by-batch-size) were ignored
    without a word: the fit printed as if they had not been given."""
    given = [f"--{name.replace('_', '-')}" for name in PREDICT_ONLY if getattr(args, name) is not None]
    if given and not args.predict:
        raise UsageError(f"{', '.join(given)}: only with --predict MODEL (the stall of that model)")
    if args.batch_size is not None and not args.by_batch_size:
        raise UsageError("--batch-size picks one batch size's fit: give --by-batch-size too")


def _print_predictions(
    args: argparse.Namespace, report: FitReport, stalls: tuple[str, ...], beta_s_per_byte: float | None
) -> int:
    """Print each stall's prediction; exit status 2 when none of them could be predicted (as `predict`)."""
    from stash_core.decide.fit import parse_rate_gbps, predict_stall
    from stash_core.decide.fit.unprofiled import NO_LINK

    if args.workers is None:
        raise UsageError("--predict needs --workers (workers per node)")
    bandwidth = None
    if args.bandwidth is not None:
        bandwidth = parse_rate_gbps(args.bandwidth)
        if bandwidth is None:
            raise UsageError(f"--bandwidth {args.bandwidth!r}: give e.g. 1gbit, 200mbit or 25 (Gbit/s)")
    if bandwidth is not None and (args.nodes or 1) <= 1:  # one machine has no network: it was ignored
        raise UsageError("--bandwidth is the network's between machines: give --nodes 2 or more")
    if bandwidth is not None and beta_s_per_byte is not None:  # the one link for every configuration wins
        given = "--link-gbps" if args.link_gbps is not None else "--beta-s-per-byte"
        raise UsageError(f"--bandwidth and {given} both give the link's rate: give one of them")
    shape = _shape(args.input_shape)
    if _no_database(args, report):
        where = f"no database at {db_path(args)} (--db or $STASH_DB chooses one)"
        if args.alpha_s is None and beta_s_per_byte is None:  # nothing to predict from: as plain fit says
            raise UsageError(f"{where}: nothing to fit (--link-gbps gives a wire time without profiles)")
        print(printable(where))
    predicted, no_link = 0, False
    for stall in stalls:
        if stall == "network" and (args.nodes or 1) <= 1:
            if args.stall == "network":  # asked for, so said: nothing printed looked like a failure
                print(f"network stall of {args.predict}: none on one machine (give --nodes 2 or more)")
                predicted += 1  # an answer: none
            continue
        answer = predict_stall(
            model=args.predict,
            stall=stall,
            workers_per_node=args.workers,
            nodes=args.nodes or 1,
            device=args.device,
            instance=args.instance,
            bandwidth_gbps=bandwidth,
            batch_size=args.batch_size,
            report=report,
            num_classes=args.num_classes,
            input_shape=shape,
            alpha_s=args.alpha_s,
            beta_s_per_byte=beta_s_per_byte,
        )
        print(printable(format_prediction(answer)))
        predicted += answer["stall_s"] is not None or answer.get("measured_s") is not None  # an answer too
        no_link |= answer["stall_s"] is None and NO_LINK in (answer["status"] or "")
    if predicted:
        return 0
    # exit status 2 is one line on stderr, as `predict` says it; the reasons per stall are above
    rates = "--bandwidth (network) or --link-gbps" if (args.nodes or 1) > 1 else "--link-gbps"
    hint = f"; a stall never profiled is bounded by its link's rate: give {rates}"
    said = f"stash: no stall of {printable(args.predict)} could be predicted (see above)"
    print(said + (hint if no_link else ""), file=sys.stderr)
    return 2


def format_fit_report(report: FitReport, all_models: bool = False, stalls: tuple[str, ...] = ()) -> str:
    """Per stall and configuration: each model's R², held-out errors and coefficients; best marked *.

    A model fitted from fewer points than its parameters plus two shows "not enough profiles (n of m
    needed)" instead of figures, and a configuration where every model is short has no best model."""
    summary = report.summary()
    if summary.empty:
        asked = stalls or ("interconnect", "network")
        # a campaign's default plan is one machine: it measures no network stall
        network = (
            "; a network stall needs two machines: `stash campaign --family resnet --nodes 2 --bandwidths "
            "1gbit` (an emulated cluster, as root) or `stash profile --nodes 2 --hosts A,B` of several models"
        )
        campaign = "`stash campaign --family resnet` (or several `stash profile` runs of different models)"
        return (
            f"no measured {' or '.join(asked)} stalls in the database yet: run {campaign} first"
            + (network if "network" in asked else "")
        )
    lines = []
    best_errors = []
    shortfalls = {(model.stall, model.group_label): report.shortfall(model.stall, model.group)
                  for model in report.models}  # fmt: skip
    for (stall, group), frame in summary.groupby(["stall", "group"], sort=False):
        runs, models = int(frame["points"].max()), int(frame["models"].max())
        lines.append(
            f"{stall} stall  |  {one_line(group)}  |  {runs} run{'s' * (runs != 1)} of {models} "
            f"model{'s' * (models != 1)}"
        )
        frame = frame.sort_values(["enough_points", "lomo_mape"], ascending=[False, True], na_position="last")
        shown = frame if all_models else frame[frame["best"] | (frame.index.isin(frame.index[:2]))]
        if not frame["best"].any():
            lines.append(f"    no best model: {shortfalls.get((stall, group)) or 'no model could be fitted'}")
        for row in shown.itertuples(index=False):
            if not row.enough_points:
                lines.append(f"    {row.model:<30} {row.shortfall}")
                continue
            mark = "*" if row.best else " "
            lines.append(
                f"  {mark} {row.model:<30} R² {fixed(row.r2, '.3f'):>6}  leave-one-model-out "
                f"{percent(row.lomo_mape):>6}  leave-one-bandwidth-out {percent(row.lobo_mape):>6}  "
                f"{row.coefficients}"
            )
            if row.note:
                lines.append(f"      {one_line(row.note)}")
            if row.best and (warning := _weak_fit(row.r2, row.lomo_mape)):
                lines.append(f"      {warning}")
        best = frame[frame["best"]]
        error = finite_float(best.iloc[0]["lomo_mape"]) if len(best) else None
        if error is not None:
            best_errors.append(error)
    if best_errors:
        lines.append("")
        lines.append(
            "held-out error (MAPE) of the best model per configuration: "
            f"median {percent(statistics.median(best_errors))}"
            f" over {len(best_errors)} configuration(s); published predictors report {PUBLISHED_ERRORS}"
        )
    if any(line.startswith("  * ") for line in lines):  # a legend for a mark that is there
        lines.append("* = best (lowest leave-one-model-out error)")
    lines += [f"warning: {one_line(warning)}" for warning in (*report.left_out, *report.label_warnings)]
    return "\n".join(lines)


def _weak_fit(r2: Any, held_out_error: Any) -> str | None:
    from stash_core.decide.fit.report import weak_fit  # pandas: not for --help

    return weak_fit(r2, held_out_error)


def format_prediction(answer: dict[str, Any]) -> str:
    measured = answer.get("measured_s")
    spread = answer.get("measured_ci95_s")
    profiled = "" if measured is None else (
        f"\n  profiled in this configuration: {measured * 1e3:.2f} ms"
        + ("" if spread is None else f" ± {spread * 1e3:.2f}")
        + f" per iteration (mean of {answer['measured_runs']} run{'s' * (answer['measured_runs'] != 1)})"
    )
    if answer["stall_s"] is None:
        status = answer["status"] or "no prediction"
        return f"{answer['stall']} stall of {answer['model']}: {status}{profiled}"
    error = answer["expected_mape"]
    if error is not None:
        expected = f", expected error {percent(error)} ({answer['validated_by']})"
    else:  # said, not left out: a prediction no held-out figure stands behind
        expected = f", {answer['validated_by'] or 'not validated'}"
    note = f"\n  warning: {answer['note']}" if answer.get("note") else ""
    return (
        f"{answer['stall']} stall of {answer['model']}: {milliseconds(answer['stall_s'])} ms per iteration "
        f"[{answer['status']}; {answer['method'] or '-'}; {answer['group'] or '-'}{expected}]{note}{profiled}"
    )


def milliseconds(seconds: float) -> str:
    """A predicted stall in ms at three significant figures (311.97 ms read as known to 0.01 ms)."""
    value_ms = seconds * 1e3
    return f"{value_ms:.{decimals_for(value_ms, 3)}f}" if value_ms else "0"


def _shape(text: str | None) -> tuple[int, ...] | None:
    if not text:
        return None
    from stash_core.spec_parse import parse_input_shape

    return tuple(parse_input_shape(text))


COMMANDS = {"fit": cmd_fit}
