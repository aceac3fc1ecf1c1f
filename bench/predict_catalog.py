"""How long `stash predict` takes for every instance of the catalog, and where the time goes.

    PYTHONPATH=. .venv/bin/python bench/predict_catalog.py [--model resnet50 --batch-size 32] [--repeat 3]

Times, in one process: importing the prediction code (torch included: the start-up), the first prediction
of the whole catalog (the model's step counted once on the meta device, then every instance from it), a
second one of another batch size, and a repeat of the first (the step already counted: what predicting one
more instance list costs). Also the command as a user runs it (a fresh process, start-up included).
Prints figures; asserts nothing (a timing depends on the machine and its load).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="resnet50")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--input-shape", default=None, help="e.g. 512 for a token model")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    shape = tuple(int(size) for size in args.input_shape.split(",")) if args.input_shape else None

    started, started_cpu = time.perf_counter(), time.process_time()
    from stash_core.catalog import list_instances
    from stash_core.decide.predict import predict_instances

    import_s = (time.perf_counter() - started, time.process_time() - started_cpu)
    with tempfile.TemporaryDirectory() as folder:
        db = Path(folder) / "bench.duckdb"
        instances = len(list_instances(db))
        timings = []
        for label, batch in (
            ("first (step counted)", args.batch_size),
            ("another batch", args.batch_size * 2),
        ):
            began, cpu = time.perf_counter(), time.process_time()
            result = predict_instances(db, args.model, batch, input_shape=shape)
            seconds = (time.perf_counter() - began, time.process_time() - cpu)
            timings.append((label, seconds, len(result.frame), len(result.not_predictable)))
        for _ in range(args.repeat):
            began, cpu = time.perf_counter(), time.process_time()
            result = predict_instances(db, args.model, args.batch_size, input_shape=shape)
            seconds = (time.perf_counter() - began, time.process_time() - cpu)
            timings.append(("again (step known)", seconds, len(result.frame), None))
        command = [sys.executable, "-m", "stash_core", "predict", "--model", args.model, "--batch-size",
                   str(args.batch_size), "--db", str(db), "--format", "json"]  # fmt: skip
        if args.input_shape:
            command += ["--input-shape", args.input_shape]
        began = time.perf_counter()
        subprocess.run(command, capture_output=True, check=False, cwd=REPO, env={"PYTHONPATH": str(REPO)})
        command_s = time.perf_counter() - began

    print(f"{args.model}, batch {args.batch_size}{f', input {args.input_shape}' if shape else ''}: "
          f"{instances} catalog instances")  # fmt: skip
    print("  (wall seconds, and CPU seconds of this process: on a busy machine the second is nearer what a")
    print("  quiet one takes)")
    print(f"  {'import (torch included)':<24} {import_s[0]:6.2f} s wall {import_s[1]:6.2f} s CPU")
    for label, (wall_s, cpu_s), predicted, refused in timings:
        refusals = "" if refused is None else f", {refused} not predicted"
        print(f"  {label:<24} {wall_s:6.2f} s wall {cpu_s:6.2f} s CPU  ({predicted} predicted{refusals})")
    print(f"  `stash predict` in a fresh process:  {command_s:6.2f} s (start-up included)")


if __name__ == "__main__":
    main()
