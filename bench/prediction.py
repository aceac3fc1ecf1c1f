"""Leave-one-out prediction error of communication stall over a campaign, per model type.

    python bench/prediction.py --db campaign.duckdb      # score a campaign that is already stored
    python bench/prediction.py --run                     # run a small campaign first (resumable), then score

Every model of a configuration is predicted by models fitted without it (leave-one-model-out) and, where
a configuration was profiled at several emulated bandwidths, by models fitted without that bandwidth
(leave-one-bandwidth-out). The table gives the MAPE (and the mean absolute error, which stays meaningful
when a stall is close to zero) per stall, configuration and model type (resnet, vgg, ...), for the best
model of each configuration and for the alpha-beta model.

--run profiles a CPU model family (or --models) on the emulated cluster when `stash profile` supports it
(--cluster emulated: needs root, network namespaces and a cluster that is up, sudo stash cluster up
--nodes 2); otherwise it profiles single-node interconnect stall of the resnet family at a small input
shape with 2 workers, and says so. Prints figures; asserts nothing.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench_args import bench_parser, positive_int, shape  # noqa: E402

from stash_core.campaign.local import run_campaign  # noqa: E402
from stash_core.campaign.plan import CampaignSettings, family_models, plan_campaign  # noqa: E402
from stash_core.decide.fit import ALPHA_BETA, fit_stall_models  # noqa: E402

PUBLISHED = "Habitat 11.8% across GPUs, Srifty 8%, dPRO and Ceer under 5%, Lumos 3.3%"


def model_type(name: str) -> str:
    match = re.match(r"[a-z_]+?(?=\d|_v\d|$)", str(name).lower())
    return match.group(0).rstrip("_") if match else str(name)


def emulated_cluster_available() -> str | None:
    """None when `stash profile` takes --cluster emulated and this machine can build it; else why not."""
    help_text = subprocess.run(
        [sys.executable, "-m", "stash_core", "profile", "--help"], capture_output=True, text=True, cwd=REPO
    ).stdout
    if "--cluster-bandwidth" not in help_text:
        return "`stash profile` has no --cluster-bandwidth option yet"
    try:
        from stash_core.launch.cluster import cluster_support_problem
    except ImportError:
        return "stash_core.launch.cluster is missing"
    return cluster_support_problem()


def run_campaign_for_bench(args: argparse.Namespace) -> str:
    why_not = emulated_cluster_available() if not args.single_node else "--single-node given"
    emulated = why_not is None
    if args.models:
        models = [name.strip() for name in args.models.split(",") if name.strip()]
    else:
        models = family_models(args.family, [int(d) for d in args.depths.split(",")])
    if emulated:
        plan = plan_campaign(
            models, [args.batch_size], [args.workers], [2], args.bandwidths.split(","), "bench"
        )
        scope = (
            f"network stall on the emulated cluster: 2 nodes x {args.workers} workers at {args.bandwidths}"
        )
    else:
        plan = plan_campaign(models, [args.batch_size], [args.workers], [1], None, "bench")
        scope = (
            f"single-node interconnect stall only ({why_not}): {args.workers} CPU workers, "
            f"input {args.input_shape}"
        )
    settings = CampaignSettings(
        db_path=Path(args.db),
        iterations=str(args.iterations),
        input_shape=args.input_shape,
        num_classes=10,
        device="cpu",
        results_dir=Path(args.db).with_suffix("") / "results",
    )
    print(f"campaign: {len(plan)} profiles of {', '.join(models)} - {scope}", file=sys.stderr)
    started = time.monotonic()
    outcome = run_campaign(plan, settings, report=lambda line: print(line, file=sys.stderr, flush=True))
    print(
        f"campaign took {(time.monotonic() - started) / 60:.1f} min; {len(outcome.failed)} failed",
        file=sys.stderr,
    )
    return scope


def score(db: str, by_batch_size: bool = False) -> pd.DataFrame:
    report = fit_stall_models(db, by_batch_size=by_batch_size)
    residuals = report.residuals()
    summary = report.summary()
    rows = []
    for (stall, group), models in summary.groupby(["stall", "group"], sort=False):
        best = models[models["best"]]
        chosen = {"best": best.iloc[0]["model"]} if len(best) else {}
        if (models["model"] == ALPHA_BETA).any() and models.loc[
            models["model"] == ALPHA_BETA, "lomo_mape"
        ].notna().any():
            chosen["alpha-beta"] = ALPHA_BETA
        for role, fit in chosen.items():
            points = residuals[
                (residuals["stall"] == stall) & (residuals["group"] == group) & (residuals["fit"] == fit)
            ]
            points = points.assign(type=points["model"].map(model_type))
            lobo = models.loc[models["model"] == fit, "lobo_mape"].iloc[0]
            for kind, part in points.groupby("type"):
                usable = part.dropna(subset=["heldout_s"])
                usable = usable[usable["measured_s"] > 0]
                if usable.empty:
                    continue
                error = np.abs(usable["heldout_s"] - usable["measured_s"])
                rows.append(
                    {
                        "stall": stall,
                        "configuration": group,
                        "model type": kind,
                        "fit": f"{role}: {fit}",
                        "models": usable["model"].nunique(),
                        "leave-one-model-out MAPE": float((error / usable["measured_s"]).mean()),
                        "mean abs error (ms)": float(error.mean() * 1e3),
                        "mean stall (ms)": float(usable["measured_s"].mean() * 1e3),
                        "leave-one-bandwidth-out MAPE": lobo,
                    }
                )
    return pd.DataFrame(rows)


def no_scores_reason(db: str) -> str:
    """Why nothing could be scored: no communication stall stored, or too few models to leave one out."""
    summary = fit_stall_models(db).summary()
    if summary.empty:
        return f"no measured interconnect or network stalls in {db}: run with --run first"
    shortfalls = sorted(set(summary["shortfall"].dropna()))
    said = f" ({shortfalls[0]})" if shortfalls else ""
    return (f"the stalls stored in {db} are too few to predict one model without it{said}: "
            "--run adds a campaign of more models")


def per_model(db: str, by_batch_size: bool = False) -> pd.DataFrame:
    report = fit_stall_models(db, by_batch_size=by_batch_size)
    residuals = report.residuals()
    best = {(model.stall, model.group_label): model.name for model in report.models if model.best}
    keep = residuals[[best.get((row.stall, row.group)) == row.fit for row in residuals.itertuples()]]
    frame = keep.assign(ape=(keep["heldout_s"] - keep["measured_s"]).abs() / keep["measured_s"])
    return frame[
        [
            "stall",
            "group",
            "fit",
            "model",
            "grad_bytes",
            "grad_tensor_count",
            "measured_s",
            "heldout_s",
            "ape",
        ]
    ]


def main() -> int:
    parser = bench_parser(__doc__)
    parser.add_argument(
        "--db",
        default=str(REPO / "results" / "prediction-campaign.duckdb"),
        help="the campaign's database; default %(default)s (in the repository: results/ is git-ignored)",
    )
    parser.add_argument("--run", action="store_true", help="run (or resume) the campaign before scoring")
    parser.add_argument("--single-node", action="store_true", help="do not try the emulated cluster")
    parser.add_argument("--family", default="resnet")
    parser.add_argument("--depths", default="10,12,16,18,34,50")
    parser.add_argument("--models", default=None, help="zoo models instead of a family, comma-separated")
    parser.add_argument("--batch-size", type=positive_int, default=8)
    parser.add_argument("--workers", type=positive_int, default=2)
    parser.add_argument("--iterations", type=positive_int, default=30)
    parser.add_argument("--input-shape", type=shape, default="3,32,32")
    parser.add_argument("--bandwidths", default="1gbit,400mbit,200mbit")
    parser.add_argument("--by-batch-size", action="store_true", help="a configuration per batch size")
    args = parser.parse_args()
    if not args.run and not Path(args.db).is_file():  # else it would read as a database without stalls
        print(f"prediction.py: no database at {args.db}: --db names one, or --run makes it", file=sys.stderr)
        return 2
    scope = run_campaign_for_bench(args) if args.run else f"campaign stored in {args.db}"
    table = score(args.db, args.by_batch_size)
    if table.empty:
        print(no_scores_reason(args.db), file=sys.stderr)
        return 1
    pd.set_option("display.width", 200)
    pd.set_option("display.max_colwidth", 60)
    print(f"Leave-one-out prediction error of communication stall ({scope})")
    print(table.to_string(index=False, float_format=lambda v: f"{v:.3f}"))
    print()
    print("per model (best fit of each configuration, predicted without that model):")
    print(per_model(args.db, args.by_batch_size).to_string(index=False, float_format=lambda v: f"{v:.4f}"))
    print(f"\npublished predictors, for scale: {PUBLISHED}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
