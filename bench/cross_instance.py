"""Leave-one-GPU-out error of Stash's predicted training throughput against published figures.

For each GPU of stash_core/decide/predict/published_throughputs.csv: fit the roofline's efficiencies on the
other GPUs' figures, predict the held-out GPU's throughput, print the error per model, GPU and precision.
Then the same with the prediction scaled from a measurement of the same model on another GPU.
Run: .venv/bin/python bench/cross_instance.py
"""

from __future__ import annotations

import pandas as pd

from stash_core.decide.predict.validation import (
    leave_one_gpu_out,
    published_points,
    scaled_from_other_gpu,
    summary,
)


def main() -> None:
    pd.set_option("display.width", 160)
    points = published_points()
    print(f"{len(points)} single-GPU published figures, {len({p.accelerator for p in points})} GPUs")
    columns = ["model", "accelerator", "precision", "batch_size", "method", "measured_samples_per_s",
               "predicted_samples_per_s", "error"]  # fmt: skip
    for title, frame in (
        ("roofline only (efficiencies fitted without the held-out GPU)", leave_one_gpu_out(points)),
        ("scaled from a measurement on another GPU", scaled_from_other_gpu(points)),
    ):
        print(f"\n== {title}")
        print(frame[columns].round({"predicted_samples_per_s": 0, "error": 3}).to_string(index=False))
        print(summary(frame).to_string(index=False))
        print(f"mean absolute error: {frame['abs_error'].mean():.1%} over {len(frame)} predictions")


if __name__ == "__main__":
    main()
