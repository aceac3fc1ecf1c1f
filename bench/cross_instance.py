"""Leave-one-GPU-out error of Stash's predicted training throughput against published figures.

For each GPU of stash_core/decide/predict/published_throughputs.csv (ResNet-50 and BERT-large SQuAD
fine-tuning at sequence length 384): fit the roofline's efficiencies on the other GPUs' figures, predict the
held-out GPU's throughput, print the error per model, GPU and precision. Then the same with the prediction
scaled from a measurement of the same model on another GPU (the roofline ratio), and with the peak ratio of
the two GPUs alone (the path of a profiled script, whose operators are unknown).
Run: .venv/bin/python bench/cross_instance.py
"""

from __future__ import annotations

import pandas as pd

from stash_core.decide.predict.validation import published_points, summary, validation_frames

TITLES = {
    "roofline": "roofline only (efficiencies fitted without the held-out GPU)",
    "scaled": "scaled from a measurement on another GPU (roofline ratio)",
    "script": "peak ratio to a measurement on another GPU (profiled scripts)",
}


def main() -> None:
    pd.set_option("display.width", 160)
    points = published_points()
    models = sorted({point.model for point in points})
    print(
        f"{len(points)} single-GPU published figures of {', '.join(models)} on "
        f"{len({point.accelerator for point in points})} GPUs"
    )
    columns = ["model", "accelerator", "precision", "batch_size", "method", "measured_samples_per_s",
               "predicted_samples_per_s", "error"]  # fmt: skip
    for path, frame in validation_frames().items():
        print(f"\n== {TITLES[path]}")
        print(frame[columns].round({"predicted_samples_per_s": 0, "error": 3}).to_string(index=False))
        print(summary(frame).to_string(index=False))
        print(summary(frame, ("model",)).to_string(index=False))
        print(f"mean absolute error: {frame['abs_error'].mean():.1%} over {len(frame)} predictions")


if __name__ == "__main__":
    main()
