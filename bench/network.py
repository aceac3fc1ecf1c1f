"""Network stall at several emulated bandwidths, beside the ring lower bound and the alpha-beta prediction.

Brings up a 2-node emulated cluster of its own, named "benchnet" (root; taken down again at the end, and
no other cluster on the machine is touched), then for each bandwidth runs

    stash profile --model M --workers 1 --nodes 2 --cluster emulated --cluster-bandwidth RATE --stalls network

and prints, per bandwidth: the measured network stall (t(R1n) - t(R1)) with its 95% interval; the physical
limit of the link (2(n-1)/n x gradient bytes / rate); the probe's ring lower bound (buckets x latency +
2(n-1)/n x gradient bytes / wire bus bandwidth); the probe's measured gradient all-reduce; the alpha-beta
prediction of the stall, with alpha (per all-reduce call) and beta (per byte) least-squares fitted to the
probe's all-reduce sizes on R1n minus the same on R1 (the reference's own all-reduce); and
measured/predicted. Then the catalog predictor's formulas (decide/predict/ddp_overlap.py: DDP's buckets
made as backward runs, one collective at a time, what is left after backward exposed), each bucket timed at
the bus bandwidth the R1n probe measured at its size (Stash's own probe in place of the published table), less
the same over the R1 probe's (the reference's own all-reduce, as decide/predict/network.py takes one machine's
communication from the whole), backward from R1's measured parts, no fitted factor (contention and jitter 0:
those are GPU figures), beside the measured stall. Several models with --models. Latency is not emulated on a
kernel without netem (sch_netem); the table says so.

    sudo python bench/network.py [--models resnet10,resnet18] [--input-shape 3,32,32]
        [--bandwidths 200mbit,...]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
BENCH_CLUSTER = "benchnet"  # its own cluster: a user's "default" one may be up beside it
sys.path.insert(0, str(REPO))

from bench_args import bench_parser, positive_int, shape  # noqa: E402

from stash_core.analysis.comm import alpha_beta_allreduce_s, probe_alpha_beta  # noqa: E402
from stash_core.campaign.plan import check_model_names  # noqa: E402
from stash_core.cli.probe_text import format_size, format_time  # noqa: E402
from stash_core.decide.predict.collectives import BusCurve, Fabric  # noqa: E402
from stash_core.decide.predict.ddp_overlap import CommParams, ddp_overlap  # noqa: E402
from stash_core.errors import UsageError, first_line  # noqa: E402
from stash_core.launch import cluster  # noqa: E402


def _names(text: str) -> list[str]:
    return [name.strip() for name in text.split(",") if name.strip()]


def bandwidth_list(text: str) -> list[str]:
    """A comma list of tc-style rates (200mbit,1gbit), each checked as the emulated cluster reads it: a bad
    one is refused before the cluster is brought up."""
    rates = _names(text)
    if not rates:
        raise argparse.ArgumentTypeError(f"{text!r}: no bandwidth, e.g. 100mbit,200mbit")
    for rate in rates:
        try:
            cluster.parse_bandwidth_bps(rate)
        except UsageError as error:
            raise argparse.ArgumentTypeError(first_line(error)) from None
    return rates


def model_list(text: str) -> list[str]:
    """A comma list of zoo models or user factories (FILE.py:FACTORY), checked as `stash campaign --models`
    checks them, before the cluster is brought up."""
    models = _names(text)
    if not models:
        raise argparse.ArgumentTypeError(f"{text!r}: no model, e.g. resnet10,resnet18")
    try:
        check_model_names(models)
    except UsageError as error:
        raise argparse.ArgumentTypeError(first_line(error)) from None
    return models


def profile(args, model: str, rate: str, state: Path, out: Path) -> dict:
    argv = [
        sys.executable, "-m", "stash_core", "profile", "--model", model,
        "--input-shape", args.input_shape, "--num-classes", "10", "--batch-size", str(args.batch_size),
        "--workers", "1", "--nodes", "2",
        "--cluster", "emulated", "--cluster-state", str(state), "--cluster-bandwidth", rate,
        "--stalls", "network", "--iterations", str(args.iterations), "--out", str(out), "--no-store",
        "--progress", "none", "--instance", f"emulated@{rate}",
    ]  # fmt: skip
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    result = subprocess.run(argv, capture_output=True, text=True, env=env)
    if result.returncode != 0:
        raise SystemExit(f"profile of {model} at {rate} failed: {result.stderr.strip().splitlines()[-1]}")
    return json.loads(out.read_text())


def _probe_links(probe: dict | None, nodes: int) -> Fabric | None:
    """The links a probe of 2 ranks measured, as a bus-bandwidth curve by message size: between 2 machines
    (nodes=2) or inside one (nodes=1); None without its figures."""
    rows = [row for row in (probe or {}).get("allreduce") or [] if row.get("busbw_gbps")]
    if not rows:
        return None
    rows.sort(key=lambda row: row["size_bytes"])
    sizes = tuple(float(row["size_bytes"]) for row in rows)
    curve = BusCurve("probe", sizes, tuple(row["busbw_gbps"] / 8 for row in rows), ("probe",))
    if nodes > 1:
        return Fabric(None, curve, 1.0, 1, nodes, "probe")
    return Fabric(curve, None, 0.0, 2, 1, "probe")


def scheduled_stall_s(doc: dict) -> float | None:
    """The network stall the catalog predictor's formula gives for this run (decide/predict/network.py: what
    the machines add to one machine's communication): DDP's buckets over the R1n probe's measured bus
    bandwidth, less the same buckets over the R1 probe's (the reference's own all-reduce, inside t(R1)), each
    beside R1's measured backward."""
    probes = {probe["phase"]: probe for probe in doc.get("probes") or []}
    phases = {phase["name"]: phase for phase in doc["phases"]}
    reference = phases.get("R1") or {}
    step_s = (reference.get("iteration_s") or {}).get("mean")
    backward_s = (reference.get("parts_mean_s") or {}).get("backward_s")
    far, near = _probe_links(probes.get("R1n"), 2), _probe_links(probes.get("R1"), 1)
    if far is None or near is None or not step_s or backward_s is None:
        return None
    grad_bytes = doc["model"]["grad_bytes"]

    def added(links: Fabric) -> float:
        return ddp_overlap(grad_bytes, step_s, backward_s, links.allreduce_s, 2, CommParams(), 0).added_s

    return max(0.0, added(far) - added(near))  # as the predictor clamps the network stall


def predicted_stall_s(doc: dict) -> tuple[float | None, tuple[float, float] | None]:
    """alpha-beta wire time of the gradients on R1n minus that on the reference R1."""
    grad_bytes = doc["model"]["grad_bytes"]
    probes = {probe["phase"]: probe for probe in doc.get("probes") or []}
    far = probe_alpha_beta(probes["R1n"]) if "R1n" in probes else None
    if far is None:
        return None, None
    predicted = alpha_beta_allreduce_s(grad_bytes, probes["R1n"]["world_size"], *far)
    near = probe_alpha_beta(probes["R1"]) if "R1" in probes else None
    if near is not None:
        predicted -= alpha_beta_allreduce_s(grad_bytes, probes["R1"]["world_size"], *near)
    return predicted, far


def main() -> None:
    parser = bench_parser(__doc__)
    parser.add_argument(
        "--models", type=model_list, default="resnet10", help="comma list of zoo models (or FILE.py:FACTORY)"
    )
    parser.add_argument("--input-shape", type=shape, default="3,32,32")
    parser.add_argument("--batch-size", type=positive_int, default=8)
    parser.add_argument("--iterations", type=positive_int, default=12)
    parser.add_argument(
        "--bandwidths",
        type=bandwidth_list,
        default="100mbit,200mbit,400mbit,800mbit",
        help="comma list of rates",
    )
    parser.add_argument("--keep", type=Path, default=None, help="keep the result files in this directory")
    args = parser.parse_args()
    problem = cluster.cluster_support_problem(probe_namespace=True)
    if problem:
        raise SystemExit(f"cannot run: {problem}")
    rates = args.bandwidths
    with tempfile.TemporaryDirectory(prefix="stash-bench-network-") as tmp:
        state = Path(tmp) / "cluster"
        status = cluster.cluster_up(2, bandwidth=rates[0], latency="0ms", state_dir=state, name=BENCH_CLUSTER)
        try:
            where = args.keep or Path(tmp)
            where.mkdir(parents=True, exist_ok=True)
            runs = {
                model: {
                    rate: profile(args, model, rate, state, where / f"{model}-{rate}.json") for rate in rates
                }
                for model in args.models
            }
        finally:
            cluster.cluster_down(state)
    errors = []
    for model, docs in runs.items():
        errors += report(args, model, docs, status)
    if errors:
        mean = sum(abs(error) for error in errors) / len(errors)
        print(f"\nschedule prediction against the measured network stall: mean absolute error {mean:.1%} "
              f"over {len(errors)} runs, largest {max(errors, key=abs):+.1%}")  # fmt: skip


def report(args, model: str, docs: dict, status: dict) -> list[float]:
    """The table of one model; the schedule prediction's relative errors."""
    first = next(iter(docs.values()))
    grad_bytes = first["model"]["grad_bytes"]
    buckets = first["breakdown"]["communication"]["network"]["buckets"]
    print(
        f"\n{model} ({args.input_shape}, batch {args.batch_size}): {format_size(grad_bytes)} of gradients "
        f"in {buckets} DDP buckets, 1 worker on each of 2 nodes; network = t(R1n) - t(R1), "
        f"{first['breakdown']['network_reference']}"
    )
    if not status.get("netem"):
        print("kernel without netem: only the link rate is emulated (no added latency)")
    header = (
        f"{'bandwidth':>10} {'stall (95% CI)':>19} {'link limit':>11} {'ring bound':>11} {'all-reduce':>11} "
        f"{'alpha':>8} {'beta->rate':>11} {'predicted':>10} {'meas/pred':>10} {'hidden':>7} {'schedule':>9} "
        f"{'error':>7}"
    )
    print(header)
    errors = []
    for rate, doc in docs.items():
        stall = doc["breakdown"]["stalls"]["network"]
        network = doc["breakdown"]["communication"]["network"]
        predicted, fit = predicted_stall_s(doc)
        ratio = stall["seconds"] / predicted if predicted else None
        hidden = network.get("overlap_share")
        scheduled = scheduled_stall_s(doc)
        error = scheduled / stall["seconds"] - 1 if scheduled is not None and stall["seconds"] > 0 else None
        if error is not None:
            errors.append(error)
        print(
            f"{rate:>10} {format_time(stall['seconds']):>10} ± {format_time(stall['ci95_s']):>6} "
            f"{format_time(network.get('link_lower_bound_s')):>11} "
            f"{format_time(network.get('lower_bound_s')):>11} "
            f"{format_time(network.get('allreduce_s')):>11} {format_time(fit[0] if fit else None):>8} "
            f"{(f'{8 / fit[1] / 1e6:.0f} Mbit/s' if fit else '-'):>11} {format_time(predicted):>10} "
            f"{(f'{ratio:.2f}' if ratio else '-'):>10} {(f'{hidden:.0%}' if hidden is not None else '-'):>7} "
            f"{format_time(scheduled):>9} {(f'{error:+.0%}' if error is not None else '-'):>7}"
        )
    return errors


if __name__ == "__main__":
    main()
