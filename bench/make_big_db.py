"""Generate a large Stash database for the dashboard load benchmark (bench/dashboard.py).

    python bench/make_big_db.py /tmp/big.duckdb [--runs 10000] [--iterations-per-phase 250]

10,000 profiles x 4 phases x 250 iterations = 10 million iteration rows, plus phases, stalls, telemetry and an
instance catalog, all made by DuckDB SQL (range() and random()) in seconds. The numbers are synthetic and only
need to look like real profiles (stalls add up to the iteration time); the schema is the real one, created by
stash_core.store.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench_args import bench_parser, positive_int  # noqa: E402

from stash_core import store  # noqa: E402

MODELS = [
    ("resnet18", 11689512, 62, 41), ("resnet34", 21797672, 110, 73), ("resnet50", 25557032, 161, 107),
    ("resnet101", 44549160, 314, 209), ("vgg11", 132863336, 22, 11), ("vgg16", 138357544, 32, 16),
    ("alexnet", 61100840, 16, 8), ("mobilenet_v2", 3504872, 158, 105), ("squeezenet1_0", 1248424, 52, 26),
    ("shufflenet_v2", 2278604, 170, 113), ("bert_tiny", 4514920, 33, 18), ("bert_base", 110251240, 153, 78),
]  # fmt: skip
INSTANCES = [
    ("p3.2xlarge", "aws", "V100", 1, 8, 61, 10.0, "NVLink", 3.06, 0.92),
    ("p3.8xlarge", "aws", "V100", 4, 32, 244, 10.0, "NVLink", 12.24, 3.67),
    ("p3.16xlarge", "aws", "V100", 8, 64, 488, 25.0, "NVLink", 24.48, 7.34),
    ("g4dn.12xlarge", "aws", "T4", 4, 48, 192, 50.0, "PCIe", 3.91, 1.17),
    ("n1-v100x4", "gcp", "V100", 4, 32, 208, 32.0, "NVLink", 10.88, 3.26),
    ("a2-highgpu-4g", "gcp", "A100", 4, 48, 340, 50.0, "NVLink", 14.69, 4.41),
    ("lab-box", None, "RTX 3090", 2, 16, 64, 1.0, "PCIe", None, None),
    ("laptop", None, None, 0, 8, 16, 1.0, None, None, None),
]
PHASES = [("R0", 0, "synthetic", "1 worker, synthetic data on the device"),
          ("R1", 1, "synthetic", "all workers on one machine, synthetic data"),
          ("R3", 2, "cached", "all workers, real data cached in memory"),
          ("R2", 3, "cold", "all workers, real data read cold from disk")]  # fmt: skip
METRICS = [
    "cpu_util_pct",
    "mem_used_bytes",
    "disk_read_mbps",
    "net_rx_mbps",
    "gpu0_util_pct",
    "gpu0_mem_used_bytes",
]


def _values(rows: list[tuple]) -> str:
    def literal(value: object) -> str:
        if value is None:
            return "NULL"
        if isinstance(value, str):
            return "'" + value.replace("'", "''") + "'"
        return repr(value)

    return ", ".join("(" + ", ".join(literal(v) for v in row) + ")" for row in rows)


def _pick(expr: str, count: int) -> str:
    """SQL for a pseudo-random whole number in [0, count) derived from expr (stable across runs)."""
    return f"CAST(hash({expr}) % {count} AS BIGINT)"


def build(db_path: Path, runs: int, iterations_per_phase: int, telemetry_points: int) -> dict[str, float]:
    """Fill a new database; returns seconds spent per table."""
    if db_path.exists():
        raise SystemExit(f"{db_path} exists; remove it first")
    timings: dict[str, float] = {}
    with store.connect(db_path) as con:
        con.execute(
            "CREATE TEMP TABLE model_list (idx INT, name VARCHAR, params BIGINT, grads INT, layers INT)"
        )
        con.execute(f"INSERT INTO model_list VALUES {_values([(i, *m) for i, m in enumerate(MODELS)])}")
        con.execute("CREATE TEMP TABLE instance_list (idx INTEGER, name VARCHAR, gpus INTEGER)")
        instance_rows = [(i, row[0], row[3]) for i, row in enumerate(INSTANCES)]
        con.execute(f"INSERT INTO instance_list VALUES {_values(instance_rows)}")
        con.execute(
            "CREATE TEMP TABLE phase_list (phase VARCHAR, idx INTEGER, data VARCHAR, description VARCHAR)"
        )
        con.execute(f"INSERT INTO phase_list VALUES {_values(PHASES)}")
        start = time.perf_counter()
        # One row per run with its stall seconds drawn at random; iteration = sum of the stalls. Run ids grow
        # with the start time, as real ones do, so each run's rows lie together (DuckDB's zone maps work).
        began = "TIMESTAMPTZ '2026-01-01 00:00:00+00' + to_seconds(r * 2400 + " + _pick("r", 600) + ")"
        con.execute(f"""
            CREATE TEMP TABLE gen AS
            SELECT r AS n,
                   strftime({began}, '%Y%m%dT%H%M%SZ') || '-'
                       || lpad(to_hex({_pick("r", 2**32)}), 8, '0') AS run_id,
                   {began} AS started_at,
                   {_pick("r * 7", len(MODELS))} AS model_idx,
                   {_pick("r * 11", len(INSTANCES))} AS instance_idx,
                   [16, 32, 64, 128][1 + {_pick("r * 13", 4)}] AS batch_size,
                   [1, 2, 4, 8][1 + {_pick("r * 17", 4)}] AS workers,
                   CASE WHEN {_pick("r * 19", 5)} = 0 THEN 2 ELSE 1 END AS nodes,
                   CASE WHEN {_pick("r * 23", 40)} = 0 THEN 'failed' ELSE 'completed' END AS status,
                   0.05 + random() * 0.4 AS compute_s,
                   random() * 0.1 AS interconnect_s,
                   random() * 0.05 AS network_raw_s,
                   random() * 0.08 AS cpu_s,
                   random() * 0.06 AS disk_s
            FROM range({runs}) t(r)
        """)
        con.execute("""
            INSERT INTO runs
            SELECT g.run_id, g.started_at, g.started_at + INTERVAL 5 MINUTE, g.status,
                   CASE WHEN g.status = 'failed' THEN 'phase R1 failed: worker 1 exited with code 1' END,
                   m.name, CASE WHEN m.name LIKE 'bert%' THEN 'tokens' ELSE 'image' END, g.batch_size,
                   g.workers,
                   g.nodes, i.name, CASE WHEN i.gpus > 0 THEN 'cuda' ELSE 'cpu' END,
                   CASE WHEN i.gpus > 0 THEN 'nccl' ELSE 'gloo' END, '/data/imagenet', 1281167,
                   1281167 // (g.batch_size * g.workers * g.nodes), 4, m.params, m.grads, m.layers,
                   m.params * 4,
                   it.iteration_s, it.iteration_s * 0.02,
                   it.iteration_s * (1281167 // (g.batch_size * g.workers * g.nodes)), 'R2', 'bench-host',
                   '0.1.0',
                   1, '{}', '{}', '[]',
                   0.0, 0.0,  -- unattributed_s and its interval: the stalls below add up to iteration_s
                   NULL, NULL, NULL, NULL, now()  -- network_reference, communication, hosts, source_file
            FROM gen g
            JOIN model_list m ON m.idx = g.model_idx
            JOIN instance_list i ON i.idx = g.instance_idx
            CROSS JOIN LATERAL (SELECT g.compute_s + g.interconnect_s
                                       + CASE WHEN g.nodes > 1 THEN g.network_raw_s ELSE 0 END
                                       + g.cpu_s + g.disk_s AS iteration_s) it
        """)
        con.execute(
            "UPDATE runs SET iteration_s = NULL, epoch_s = NULL, iteration_ci95_s = NULL "
            "WHERE status = 'failed'"
        )
        con.execute(
            "INSERT INTO models SELECT name, CASE WHEN name LIKE 'bert%' THEN 'tokens' ELSE 'image' END, "
            "params, grads, layers, params * 4 FROM model_list"
        )
        rows = [(*row, "2026-01-15", "bench", None, "user") for row in INSTANCES]  # and region, origin
        con.execute(f"INSERT OR REPLACE INTO instances VALUES {_values(rows)}")
        timings["runs"] = time.perf_counter() - start

        start = time.perf_counter()
        con.execute("""
            INSERT INTO stalls (run_id, stall, seconds, ci95_s, share, epoch_s, status, note, raw_s)
            SELECT g.run_id, s.stall, s.seconds, s.seconds * 0.05, s.seconds / r.iteration_s,
                   s.seconds * r.iterations_per_epoch,
                   CASE WHEN s.seconds IS NULL THEN 'not_measured' ELSE 'measured' END, '', s.seconds
            FROM gen g JOIN runs r ON r.run_id = g.run_id
            CROSS JOIN LATERAL (VALUES ('compute', g.compute_s), ('interconnect', g.interconnect_s),
                                       ('network', CASE WHEN g.nodes > 1 THEN g.network_raw_s END),
                                       ('cpu', g.cpu_s), ('disk', g.disk_s)) s(stall, seconds)
            WHERE g.status = 'completed'
        """)
        con.execute(f"""
            INSERT INTO phases
            SELECT g.run_id, p.phase, p.idx, p.description, CASE WHEN p.idx = 0 THEN 1 ELSE g.workers END,
                   g.nodes, p.data, 'completed', NULL, 10, {iterations_per_phase}, t.mean_s, t.mean_s * 0.02,
                   t.mean_s * 0.05,
                   t.mean_s, t.mean_s * 0.93, t.mean_s * 1.08, 0.002, t.mean_s * 0.35, t.mean_s * 0.55,
                   t.mean_s * 0.05, 0.001, CASE p.data WHEN 'cached' THEN 1.0 WHEN 'cold' THEN 0.0 END,
                   t.mean_s * {iterations_per_phase} + 4.0, 0.5
            FROM gen g CROSS JOIN phase_list p
            CROSS JOIN LATERAL (SELECT g.compute_s
                + CASE WHEN p.idx >= 1 THEN g.interconnect_s ELSE 0 END
                + CASE WHEN p.idx >= 2 THEN g.cpu_s ELSE 0 END
                + CASE WHEN p.idx >= 3 THEN g.disk_s ELSE 0 END AS mean_s) t
        """)
        timings["stalls+phases"] = time.perf_counter() - start

        start = time.perf_counter()
        con.execute(f"""
            INSERT INTO iterations
            SELECT p.run_id, p.phase, i::INTEGER, p.mean_s * (0.95 + random() * 0.1), p.data_s,
                   p.forward_s, p.backward_s, p.optimizer_s, (i % p.workers)::INTEGER
            FROM phases p CROSS JOIN range({iterations_per_phase}) t(i)
            ORDER BY p.run_id, p.phase_index, i  -- as ingest writes them: each run's rows together
        """)
        timings["iterations"] = time.perf_counter() - start

        start = time.perf_counter()
        metrics = ", ".join(f"('{metric}')" for metric in METRICS)
        con.execute(f"""
            INSERT INTO telemetry
            SELECT p.run_id, p.phase, 0.5 * (k + 1), m.metric,
                   CASE WHEN m.metric LIKE '%bytes' THEN 2e9 + random() * 1e9 ELSE random() * 100 END
            FROM phases p CROSS JOIN (VALUES {metrics}) m(metric) CROSS JOIN range({telemetry_points}) t(k)
            ORDER BY p.run_id, p.phase_index, m.metric, k
        """)
        timings["telemetry"] = time.perf_counter() - start
        con.execute("CHECKPOINT")
    return timings


def main() -> None:
    parser = bench_parser(__doc__)
    parser.add_argument("db", type=Path)
    parser.add_argument("--runs", type=positive_int, default=10_000)
    parser.add_argument("--iterations-per-phase", type=positive_int, default=250)
    parser.add_argument(
        "--telemetry-points", type=positive_int, default=20, help="samples per metric and phase"
    )
    args = parser.parse_args()
    started = time.perf_counter()
    try:
        timings = build(args.db, args.runs, args.iterations_per_phase, args.telemetry_points)
    except SystemExit:  # "exists, remove it first": not ours to remove
        raise
    except BaseException:
        for made in (args.db, args.db.with_name(args.db.name + ".wal")):
            made.unlink(missing_ok=True)  # no half-built database left to be measured
        raise
    summary = store.database_summary(args.db)
    print(f"{args.db}: {summary['runs']:,} runs, {summary['iterations']:,} iteration rows, "
          f"{args.db.stat().st_size / 1e6:.0f} MB in {time.perf_counter() - started:.1f} s")  # fmt: skip
    for table, seconds in timings.items():
        print(f"  {table:<14} {seconds:6.2f} s")


if __name__ == "__main__":
    main()
