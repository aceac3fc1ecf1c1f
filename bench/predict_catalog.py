"""How long `stash predict` takes for every instance of the catalog, and where the time goes.

    PYTHONPATH=. .venv/bin/python bench/predict_catalog.py [--model resnet50 --batch-size 32] [--repeat 3]

Times, in one process: importing the prediction code (torch included: the start-up), the first prediction
of the whole catalog (the model's step counted once on the meta device, then every instance from it), a
second one of another batch size, and a repeat of the first (the step already counted: what predicting one
more instance list costs). Also the command as a user runs it (a fresh process, start-up included). All on a
step cache of its own (a temporary $STASH_CACHE_DIR, removed at the end): the first prediction counts the step
however often the bench has run, and the user's cache is neither read nor written.
Prints figures; asserts nothing (a timing depends on the machine and its load).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench_args import bench_parser, model_name, positive_int, shape

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from stash_core.errors import StashError, first_line  # noqa: E402


def main() -> int:
    parser = bench_parser(__doc__)
    parser.add_argument("--model", type=model_name, default="resnet50")
    parser.add_argument("--batch-size", type=positive_int, default=32)
    parser.add_argument("--input-shape", type=shape, default=None, help="e.g. 512 for a token model")
    parser.add_argument("--repeat", type=positive_int, default=3)
    args = parser.parse_args()
    input_shape = tuple(int(size) for size in args.input_shape.split(",")) if args.input_shape else None
    try:
        timings, instances, import_s, command_s = time_predictions(args, input_shape)
    except StashError as error:  # a model or shape Stash refuses: its one line, as `stash predict` says it
        sys.exit(f"predict_catalog.py: {first_line(error)}")
    if command_s is None:
        return 1
    print(f"{args.model}, batch {args.batch_size}{f', input {args.input_shape}' if input_shape else ''}: "
          f"{instances} catalog instances")  # fmt: skip
    print("  (wall seconds, and CPU seconds of this process: on a busy machine the second is nearer what a")
    print("  quiet one takes)")
    print(f"  {'import (torch included)':<24} {import_s[0]:6.2f} s wall {import_s[1]:6.2f} s CPU")
    for label, (wall_s, cpu_s), predicted, refused in timings:
        refusals = "" if refused is None else f", {refused} not predicted"
        print(f"  {label:<24} {wall_s:6.2f} s wall {cpu_s:6.2f} s CPU  ({predicted} predicted{refusals})")
    print(f"  `stash predict` in a fresh process:  {command_s:6.2f} s (start-up included)")

    return 0


@contextlib.contextmanager
def fresh_step_cache():
    """A step cache of its own ($STASH_CACHE_DIR, a new temporary folder) while the block runs, removed after
    it: a first prediction is then counted, not read back from an earlier run, and the user's own cache is
    neither read nor written."""
    before = os.environ.get("STASH_CACHE_DIR")
    with tempfile.TemporaryDirectory(prefix="stash-steps-") as folder:
        os.environ["STASH_CACHE_DIR"] = folder
        try:
            yield Path(folder)
        finally:
            if before is None:
                os.environ.pop("STASH_CACHE_DIR", None)
            else:
                os.environ["STASH_CACHE_DIR"] = before


def time_predictions(args: argparse.Namespace, input_shape: tuple[int, ...] | None) -> tuple:
    """The in-process timings, the catalog's size, the import's seconds and the fresh command's (None when
    it failed: said on stderr), all on a fresh step cache (the fresh command's included)."""
    with fresh_step_cache():
        return _timed(args, input_shape)


def _timed(args: argparse.Namespace, input_shape: tuple[int, ...] | None) -> tuple:
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
            result = predict_instances(db, args.model, batch, input_shape=input_shape)
            seconds = (time.perf_counter() - began, time.process_time() - cpu)
            timings.append((label, seconds, len(result.frame), len(result.not_predictable)))
        for _ in range(args.repeat):
            began, cpu = time.perf_counter(), time.process_time()
            result = predict_instances(db, args.model, args.batch_size, input_shape=input_shape)
            seconds = (time.perf_counter() - began, time.process_time() - cpu)
            timings.append(("again (step known)", seconds, len(result.frame), None))
        command = [sys.executable, "-m", "stash_core", "predict", "--model", args.model, "--batch-size",
                   str(args.batch_size), "--db", str(db), "--format", "json"]  # fmt: skip
        if args.input_shape:
            command += ["--input-shape", args.input_shape]
        began = time.perf_counter()
        # from the caller's folder, as a user types it (a model file's relative path is theirs)
        done = subprocess.run(
            command, capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(REPO)}
        )
        command_s = time.perf_counter() - began
        if done.returncode != 0:  # a failure is not a timing
            said = (done.stderr.strip().splitlines() or ["no error output"])[-1]
            print(f"`stash predict` failed (exit status {done.returncode}): {said}", file=sys.stderr)
            return timings, instances, import_s, None
    return timings, instances, import_s, command_s


if __name__ == "__main__":
    sys.exit(main())
