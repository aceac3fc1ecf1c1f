"""Example results shipped with Stash, a small first profile and the SQL console's example queries, so that a
new user sees real charts and answers at once.

The files in examples/results/ are real `stash profile` runs on a small 2-vCPU virtual machine (no GPU),
recorded with the commands in examples/results/README.md; they are not hand-written numbers.
"""

from __future__ import annotations

from pathlib import Path

from stash_core import PACKAGE_PARENT, store

EXAMPLES_DIR = Path(PACKAGE_PARENT) / "examples" / "results"
TINY_MODEL = Path(PACKAGE_PARENT) / "examples" / "models" / "tiny_cnn.py"

# The SQL console's example queries: (title, query).
EXAMPLE_QUERIES: list[tuple[str, str]] = [
    (
        "Newest runs and their breakdown",
        "SELECT run_id, model, batch_size, workers_per_node, instance, iteration_s,\n"
        "       compute_share, interconnect_share, cpu_share, disk_share\n"
        "FROM stall_breakdown\nORDER BY started_at DESC\nLIMIT 20",
    ),
    (
        "Largest stall of each run",
        "SELECT run_id, model, arg_max(stall, seconds) AS largest_stall, max(seconds) AS seconds\n"
        "FROM stalls JOIN runs USING (run_id)\nWHERE seconds IS NOT NULL\nGROUP BY ALL\n"
        "ORDER BY seconds DESC\nLIMIT 20",
    ),
    (
        "Mean iteration time per model and instance",
        "SELECT model, instance, count(*) AS runs, avg(iteration_s) AS iteration_s\n"
        "FROM runs\nWHERE status = 'completed'\nGROUP BY ALL\nORDER BY model, iteration_s",
    ),
    (
        "Iteration-time percentiles per phase",
        "SELECT run_id, phase, count(*) AS iterations,\n"
        "       quantile_cont(iteration_s, 0.5) AS median_s,\n"
        "       quantile_cont(iteration_s, 0.95) AS p95_s\n"
        "FROM iterations\n"
        "WHERE run_id = (SELECT run_id FROM runs ORDER BY started_at DESC, run_id DESC LIMIT 1)\n"
        "GROUP BY ALL\nORDER BY phase",
    ),
    (
        "Peak CPU and disk use per run",
        "SELECT run_id, metric, max(value) AS peak\nFROM telemetry\n"
        "WHERE metric IN ('cpu_util_pct', 'disk_read_mbps')\nGROUP BY ALL\nORDER BY run_id DESC\nLIMIT 40",
    ),
]


def example_result_files(folder: Path = EXAMPLES_DIR) -> list[Path]:
    """The shipped example result files, sorted by name (empty when the folder is missing)."""
    if not folder.is_dir():
        return []
    return sorted(path for path in folder.glob("*.json") if path.is_file())


def import_examples(db_path: Path | str, folder: Path = EXAMPLES_DIR) -> list[tuple[Path, str, bool]]:
    """Ingest the example results into `db_path`; (file, run_id, inserted) per file. Idempotent."""
    return store.ingest_files(db_path, example_result_files(folder))


def first_profile_args() -> list[str]:
    """`stash profile` arguments of a small local profile that finishes in one to two minutes on a laptop CPU:
    the tiny CNN of examples/models on 32x32 images, compute and CPU pre-processing stalls. The runs are
    launched in rounds (the default --launches) until each interval is within ± 10% or the time cap, so
    that a first profile's stalls come out resolved or said to be within the noise, as any profile's."""
    model = f"{TINY_MODEL}:make" if TINY_MODEL.is_file() else "squeezenet1_0"
    return [
        "--model", model, "--input-shape", "3,32,32", "--num-classes", "10", "--batch-size", "16",
        "--workers", "1", "--stalls", "compute,cpu", "--synthetic-images", "256", "--image-px", "32",
        "--target-ci", "0.1", "--max-phase-seconds", "40", "--instance", "this-machine",
    ]  # fmt: skip
