"""`stash export` in each format on the shipped examples and on a large synthetic database (make_big_db.py):
wall time of each, best of three, with the CSV's cost over JSON's (and its range over the three). The CSV
export escapes the control characters of every text cell (terminal.printable) and quotes formula-leading
cells; this shows what that costs. Run alone on a quiet machine:

    PYTHONPATH=. .venv/bin/python bench/export.py [--runs 1000]
"""

from __future__ import annotations

import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

from stash_core import store

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "bench"))
from bench_args import bench_parser, positive_int  # noqa: E402
from make_big_db import build  # noqa: E402 - bench/ is not a package

FORMATS = ("csv", "json", "parquet")
REPEATS = 3


def timed_exports(db: Path, folder: Path) -> dict[str, list[float]]:
    times: dict[str, list[float]] = {fmt: [] for fmt in FORMATS}
    for _ in range(REPEATS):
        for fmt in FORMATS:
            out = folder / f"export-{fmt}"
            started = time.perf_counter()
            store.export(db, fmt, out)
            times[fmt].append(time.perf_counter() - started)
            shutil.rmtree(out)
    return times


def report(label: str, times: dict[str, list[float]]) -> None:
    best = {fmt: min(values) for fmt, values in times.items()}
    print(f"{label}:")
    for fmt in FORMATS:
        spread = statistics.pstdev(times[fmt])
        print(f"  {fmt:<8} best {best[fmt]:7.3f} s  (of {REPEATS}: mean {statistics.mean(times[fmt]):.3f} s, "
              f"sd {spread:.3f} s)")  # fmt: skip
    # csv and json of one repetition ran back to back: their ratio per repetition shows how far it moves
    ratios = [csv_s / json_s for csv_s, json_s in zip(times["csv"], times["json"], strict=True)]
    print(f"  csv / json: {best['csv'] / best['json']:.2f}x best over best; per repetition "
          f"{min(ratios):.2f}x to {max(ratios):.2f}x (median {statistics.median(ratios):.2f}x)")  # fmt: skip


def main() -> None:
    parser = bench_parser(__doc__)
    parser.add_argument("--runs", type=positive_int, default=1000, help="profiles in the large database")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder_text:
        folder = Path(folder_text)
        examples = folder / "examples.duckdb"
        store.ingest_files(examples, sorted((REPO / "examples" / "results").glob("*.json")))
        report("shipped examples (3 runs)", timed_exports(examples, folder))
        big = folder / "big.duckdb"
        build(big, args.runs, iterations_per_phase=250, telemetry_points=20)
        report(f"synthetic database ({args.runs:,} runs, 250 iterations a phase)", timed_exports(big, folder))


if __name__ == "__main__":
    main()
