"""Single-GPU predictions on published figures that played no part in any choice of the step model.

stash_core/decide/predict/published_single_gpu_holdout.csv holds training throughputs from four sources
never used to fit, tune or choose anything (docs/single-gpu-holdout.md). This prints, for the step model as
shipped (fitted on published_throughputs.csv), the error of each figure's predicted throughput, the mean
absolute error by framework, source, GPU and batch regime, and how often the printed ± error covers it.
A PyTorch figure is one whose 'measured' column starts with PyTorch; the others are reported beside them.

    .venv/bin/python bench/single_gpu_holdout.py [--rows]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from stash_core.decide.predict.calibration import predicted_s  # noqa: E402
from stash_core.decide.predict.published import load_published, regime  # noqa: E402
from stash_core.decide.predict.stated_error import fitted_params, stated_error  # noqa: E402

HOLDOUT_CSV = ROOT / "stash_core" / "decide" / "predict" / "published_single_gpu_holdout.csv"


def framework(measured: str) -> str:
    return (measured.split(",")[0].split(" ") or ["?"])[0] or "?"


def rows() -> list[dict]:
    published = load_published(HOLDOUT_CSV)
    for reason in published.skipped:
        print(f"skipped: {reason}")
    params = fitted_params()
    found = []
    for point in published.points:
        step_s = predicted_s(point, params)
        error = point.step_s / step_s - 1.0  # predicted throughput over measured, less one
        stated = stated_error("roofline", point.batch_size, point.accelerator).error
        found.append(
            {
                "model": point.model,
                "gpu": point.accelerator,
                "precision": point.precision,
                "layout": point.memory_format or "-",
                "batch": point.batch_size,
                "regime": regime(point.batch_size),
                "source": point.source_id,
                "framework": framework(point.measured),
                "error": error,
                "stated": stated,
                "covered": stated is not None and abs(error) <= stated,
            }
        )
    return found


def table(found: list[dict], key: str) -> None:
    groups: dict[str, list[dict]] = {}
    for row in found:
        groups.setdefault(str(row[key]), []).append(row)
    print(f"\n{key:<32} {'figures':>7} {'MAE':>7} {'bias':>7} {'covered':>8}")
    for name, members in sorted(groups.items()):
        mae = sum(abs(r["error"]) for r in members) / len(members)
        bias = sum(r["error"] for r in members) / len(members)
        covered = sum(r["covered"] for r in members) / len(members)
        print(f"{name:<32} {len(members):7d} {mae:7.1%} {bias:+7.1%} {covered:8.0%}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", action="store_true", help="print every figure's error")
    report(parser.parse_args().rows)
    return 0


def report(print_rows: bool = False) -> None:
    """Every held-out figure's error (with print_rows), then the summaries (bench/cross_instance.py runs it)."""
    found = rows()
    if print_rows:
        for r in found:
            print(
                f"{r['source']:<17} {r['framework']:<12} {r['model']:<13} {r['gpu']:<31} {r['precision']:<4} "
                f"{r['layout']:<5} {r['batch']:>4} {r['error']:+7.1%} (± {r['stated'] or 0:.0%})"
            )
    pytorch = [r for r in found if r["framework"] == "PyTorch"]
    for label, members in (("PyTorch", pytorch), ("all frameworks", found)):
        mae = sum(abs(r["error"]) for r in members) / len(members)
        covered = sum(r["covered"] for r in members) / len(members)
        optimistic = sum(r["error"] > 0 for r in members) / len(members)
        print(
            f"{label}: {len(members)} figures, mean absolute error {mae:.1%}, stated error covers {covered:.0%}, "
            f"{optimistic:.0%} predicted faster than measured"
        )
    for key in ("framework", "source", "gpu", "regime", "layout"):
        table(pytorch if key != "framework" else found, key)


if __name__ == "__main__":
    sys.exit(main())
