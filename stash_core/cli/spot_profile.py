"""`stash spot-profile`: spotDNN's workload profiling by real asynchronous parameter-server trainings.

A PS and 1, 2, 4, 7 workers (one training per count) on this machine over loopback, or with --cluster NAME
on an emulated cluster's nodes (the PS on node 0, each worker on its own node); fits a1, b1 (eq. 9),
measures B_req, S_parm and the PS bandwidth, takes T_comp of the named instances from stored profiles, and
writes them into the workload file that `stash spot` reads (its other fields, g1..g5 for one, are kept).
cli/spot.py adds the command.
"""

from __future__ import annotations

import argparse
import csv
import io
from pathlib import Path
from typing import Any

from stash_core.cli.args import (
    add_db_argument,
    comma_list,
    count,
    db_path,
    identifier,
    positive_real,
    shape_text,
)
from stash_core.csv_outputs import check_csv_replaceable
from stash_core.errors import UsageError
from stash_core.pathargs import input_text, output_path, refuse_overwrite
from stash_core.userfiles import check_output, json_text, write_atomic

LOSS_CSV_HEADER = "iteration,loss,batch_size,workers"

# The engine and the fit are imported inside the command: `stash --help` must not load torch or pandas.


def add_commands(subparsers: Any) -> None:
    profile = subparsers.add_parser(
        "spot-profile",
        help="measure a workload for spotDNN: real async parameter-server trainings with 1, 2, 4, 7 workers",
    )
    profile.add_argument("--model", required=True, type=identifier, help="zoo model (or file.py:FACTORY)")
    profile.add_argument(
        "--workload", required=True, type=output_path, help="workload file to write (fields kept)"
    )
    profile.add_argument("--batch", type=count(1 << 16), default=32, help="batch per worker")
    profile.add_argument(
        "--workers", type=comma_list(count(64), most=8), default=[1, 2, 4, 7],
        help="worker counts, one training each: 1 (it gives B_req) and two or more counts of 2 or more",
    )  # fmt: skip
    profile.add_argument(
        "--duration-s", type=positive_real(3600), default=5.0, help="training time per worker count"
    )
    profile.add_argument("--num-classes", type=count(10**7), default=None, help="classes of the output")
    profile.add_argument("--input-shape", type=shape_text, default=None, help="input shape, e.g. 3,32,32")
    profile.add_argument(
        "--instances", type=comma_list(identifier, most=64), default=[],
        help="instance types whose T_comp to take from stored profiles (at --batch per GPU)",
    )  # fmt: skip
    profile.add_argument(
        "--cluster", type=identifier, default=None, metavar="NAME",
        help="run on emulated cluster NAME (stash cluster up --name NAME): PS on node 0, a node per worker",
    )  # fmt: skip
    profile.add_argument(
        "--cluster-state", type=input_text, default=None, metavar="DIR",
        help="with --cluster: the folder its state is in, where `stash cluster up --state-dir DIR` put it",
    )  # fmt: skip
    profile.add_argument(
        "--loss-csv", type=output_path,
        help="also write the loss curves (fixed synthetic batches: memorisation, not a data set's curve)",
    )  # fmt: skip
    profile.add_argument("--json", action="store_true", help="print the profile as JSON")
    add_db_argument(profile)


def cmd_spot_profile(args: argparse.Namespace) -> int:
    from stash_core.catalog import get_instance
    from stash_core.spot.contention import (
        fit_contention,
        merged_compute_s,
        replaced_job_notes,
        stored_compute_times,
        workload_fields,
    )
    from stash_core.spot.inputs import check_writable, update_workload
    from stash_core.spot.workload_profile import measure_contention

    if args.cluster_state is not None and args.cluster is None:
        raise UsageError("--cluster-state is an emulated cluster's state folder: give --cluster NAME too")
    counts = sorted(set(args.workers))
    if 1 not in counts or len([n for n in counts if n >= 2]) < 2:
        raise UsageError("--workers: give 1 (for B_req) and at least two counts of 2 or more, e.g. 1,2,4,7")
    if args.loss_csv is not None:
        refuse_overwrite("--loss-csv", args.loss_csv, [("the workload file", args.workload)])
        check_csv_replaceable(args.loss_csv, "--loss-csv", "a loss curves CSV", LOSS_CSV_HEADER)
    existing = check_writable(args.workload)  # unwritable or broken: refused before minutes of measuring
    from stash_core.spec_parse import parse_input_shape
    from stash_core.zoo.build import describe_model

    # An unknown model, a factory that fails, hangs or exits: one line, before any process starts.
    shape = parse_input_shape(args.input_shape) if args.input_shape else None
    describe_model(args.model, args.num_classes, shape)
    if args.loss_csv is not None:
        check_output(args.loss_csv, "loss curves CSV")
    instances = []
    for name in args.instances:
        instance = get_instance(db_path(args), name)
        if instance is None:
            from stash_core.catalog.unknown_names import not_in_catalog_text

            advice = f" (stash instances add {name} ...)"
            raise UsageError(not_in_catalog_text(db_path(args), name, f"instance {name!r}", advice))
        instances.append((name, int(instance.get("accelerator_count") or 0)))
    cluster_state = Path(args.cluster_state) if args.cluster_state is not None else None
    say = (lambda *_: None) if args.json else _print_count
    profile = measure_contention(args.model, args.batch, counts, args.duration_s, args.num_classes,
                                 args.input_shape, on_count=say, cluster=args.cluster,
                                 cluster_state=cluster_state)  # fmt: skip
    fit = fit_contention([(m.workers, m.p_bottleneck) for m in profile.counts])
    fields = {**workload_fields(profile, fit), "source": profile.source}
    found, missing = stored_compute_times(db_path(args), args.model, args.batch, instances)
    fields["compute_s"] = merged_compute_s(existing, profile.model, profile.batch, found)
    notes = replaced_job_notes(existing, profile.model, profile.batch, fields["compute_s"])
    if args.loss_csv is not None:
        _write_loss_csv(args.loss_csv, [row for m in profile.counts for row in m.loss_rows])
    update_workload(args.workload, fields)
    report = {**fields, "compute_s_missing": missing, "notes": notes, "workload": str(args.workload)}
    if args.json:
        print(json_text(report, indent=2))
        return 0
    print(format_profile(fields, missing, args.workload, db_path(args), notes))
    return 0


def _print_count(measure: Any) -> None:
    low, high = measure.bandwidth_spread_Bps
    print(f"  {measure.workers} worker(s): {measure.exchanges} exchanges, "
          f"{measure.bandwidth_Bps / 1e6:.0f} MB/s per worker (workers {low / 1e6:.0f}-{high / 1e6:.0f}), "
          f"PS busy at {measure.p_bottleneck:.0%} of pushes, compute {measure.compute_s * 1e3:.1f} ms",
          flush=True)  # fmt: skip


def format_profile(
    fields: dict[str, Any], missing: list[str], path: Path, db: Path | None = None, notes: list[str] = ()
) -> str:
    fit = fields["contention_fit"]
    lines = [
        f"S_parm {fields['param_bytes'] / 1e6:.2f} MB; B_req {fields['solo_bandwidth_mbps']:.0f} MB/s; "
        f"PS moved up to {fit['ps_mbps']:.0f} MB/s",
        f"P = min({fields['a1']:.4g} sqrt(n) {'-' if fields['b1'] < 0 else '+'} {abs(fields['b1']):.4g}, 1): "
        f"error in P rms {fit['rms_error']:.3f}, max {fit['max_error']:.3f}",
    ]
    if len(fit["points"]) == 2:
        lines.append(
            "  (two worker counts of 2 or more: the line passes through both; eq. 8 below is the check)"
        )
    for row in fit["bandwidth"]:
        lines.append(f"  eq. 8 at {row['workers']} worker(s): {row['predicted_mbps']:.0f} MB/s predicted, "
                     f"{row['measured_mbps']:.0f} measured ({row['rel_error']:.1%})")  # fmt: skip
    lines += [f"note: {note}" for note in fit["notes"]]
    if fields["compute_s"]:
        lines.append("T_comp: " + ", ".join(f"{k} {v:.3f} s" for k, v in sorted(fields["compute_s"].items())))
    if missing and db is not None and not Path(db).exists():  # a mistyped --db, not missing profiles
        lines.append(f"no database at {db} (--db or $STASH_DB chooses one): no T_comp for "
                     f"{', '.join(missing)}; give the database or add compute_s to the workload")  # fmt: skip
    elif missing:
        lines.append(f"no stored profile for {', '.join(missing)} at batch {fields['batch_per_gpu']} "
                     "per GPU: profile them or add compute_s to the workload file")  # fmt: skip
    name = (fields.get("source") or {}).get("cluster")
    where = f"the emulated cluster {name}" if name else "this machine over loopback"
    lines.append(f"measured on {where}; written to {path}")
    lines += [f"note: {note}" for note in notes]
    return "\n".join(lines)


def _write_loss_csv(path: Path, rows: list[tuple[float, float, int, int]]) -> None:
    text = io.StringIO(newline="")
    writer = csv.writer(text)
    writer.writerow(LOSS_CSV_HEADER.split(","))
    writer.writerows(rows)
    write_atomic(path, text.getvalue(), "loss curves CSV")


COMMANDS = {"spot-profile": cmd_spot_profile}
