"""Inputs that are odd but right get the right answer: a byte-order mark is read past, a symlinked workload
stays a link, --price-date dates an import, contention numbers at the edge of a double plan; and outputs on
a full disk leave nothing half-written, with one line that names the file."""

from __future__ import annotations

import json
import math
import os
from pathlib import Path

import duckdb
import pytest
from support import fill, mounted_tmpfs

from stash_core.cli.main import main

WORKLOAD = {
    "param_mb": 11.54, "solo_bandwidth_mbps": 142, "a1": 0.1, "b1": 0.2,
    "g": [100.0, -1.0, 1000.0, 1.0, 0.3], "batch_per_gpu": 128,
    "compute_s": {"g3.4xlarge": 0.9, "g3.8xlarge": 0.95, "g3.16xlarge": 1.0},
}  # fmt: skip
OFFERS = "g3.4xlarge:4,g3.8xlarge:5,g3.16xlarge:3"
BOM = "\ufeff"


def _loss_csv(path: Path, bom: str = "") -> Path:
    g = (876.5, -0.2, 300.0, 1.0, 0.5)
    lines = ["iteration,loss,batch_size,workers"]
    for b in (64, 128, 256):
        for n in (1, 2, 4):
            r = math.sqrt((n - 1) / n)
            for j in range(0, 6001, 500):
                lines.append(
                    f"{j},{(g[1] * b + g[2]) * math.sqrt((r + g[3]) * n) / (j + g[0]) + g[4]},{b},{n}"
                )
    path.write_text(bom + "\n".join(lines) + "\n")
    return path


def test_a_loss_csv_with_a_bom_is_fitted_and_a_linked_workload_stays_a_link(tmp_path, capsys):
    target = tmp_path / "real-workload.json"
    target.write_text(json.dumps(WORKLOAD))
    link = tmp_path / "workload.json"
    link.symlink_to(target)
    status = main(
        ["spot-fit-loss", "--csv", str(_loss_csv(tmp_path / "loss.csv", BOM)), "--workload", str(link)]
    )
    assert status == 0, capsys.readouterr().err
    assert link.is_symlink() and os.readlink(link) == str(target)
    assert json.loads(target.read_text())["g"] == pytest.approx([876.5, -0.2, 300.0, 1.0, 0.5], rel=1e-3)


def test_a_revocation_trace_with_a_bom_is_replayed(tmp_path, capsys):
    workload = tmp_path / "workload.json"
    workload.write_text(json.dumps(WORKLOAD))
    trace = tmp_path / "trace.csv"
    trace.write_text(BOM + "time_s,instance\n200,g3.4xlarge\n")
    db = str(tmp_path / "r.duckdb")
    status = main(["spot-simulate", "--workload", str(workload), "--instances", OFFERS, "--target-loss",
                   "0.8", "--deadline-s", "3000", "--trace", str(trace), "--db", db])  # fmt: skip
    assert status == 0, capsys.readouterr().err
    assert "P(deadline)" in capsys.readouterr().out


@pytest.mark.parametrize("change", [{"a1": 1e-300}, {"b1": -1e308}, {"a1": 1e-300, "b1": -1e308}])
def test_contention_numbers_at_the_edge_of_a_double_still_plan(tmp_path, capsys, change):
    workload = tmp_path / "workload.json"
    workload.write_text(json.dumps({**WORKLOAD, **change}))
    status = main(["spot", "--workload", str(workload), "--instances", OFFERS, "--target-loss", "0.8",
                   "--budget-s", "30000", "--json", "--db", str(tmp_path / "r.duckdb")])  # fmt: skip
    captured = capsys.readouterr()
    assert status == 0, captured.err
    assert "Traceback" not in captured.err and json.loads(captured.out)["best"] is not None


SKY = (
    "InstanceType,AcceleratorName,AcceleratorCount,vCPUs,MemoryGiB,GpuInfo,Price,SpotPrice,Region,Zone\n"
    "x9.large,T4,1.0,4.0,16.0,,0.526,0.2,us-east-1,use1-az1\n"
)


@pytest.mark.parametrize("price_date", ["2025-06-01", "none"])
def test_an_import_with_a_bom_and_a_price_date(tmp_path, capsys, price_date):
    catalog = tmp_path / "vms.csv"
    catalog.write_text(BOM + SKY)
    db = tmp_path / "r.duckdb"
    status = main(
        ["instances", "import", "--skypilot", str(catalog), "--price-date", price_date, "--db", str(db)]
    )
    assert status == 0, capsys.readouterr().err
    with duckdb.connect(str(db), read_only=True) as con:
        stored = con.execute("SELECT price_date FROM instances WHERE name = 'x9.large'").fetchone()
    assert stored is not None and (price_date == "none" or str(stored[0]) == price_date)


def test_a_philly_trace_with_a_bom_is_simulated(tmp_path, capsys):
    job = {"jobid": "j1", "user": "u", "submitted_time": "2017-10-03 03:04:45",
           "attempts": [{"start_time": "2017-10-03 03:05:00", "end_time": "2017-10-03 04:05:00",
                         "detail": [{"ip": "m1", "gpus": ["g0", "g1"]}]}]}  # fmt: skip
    trace = tmp_path / "philly.json"
    trace.write_text(BOM + json.dumps([job, {**job, "jobid": "j2"}, {**job, "jobid": "j3"}]))
    out, db = str(tmp_path / "sims"), str(tmp_path / "r.duckdb")
    status = main(["schedule", "--trace", str(trace), "--trace-format", "philly", "--tuning", "given",
                   "--no-store", "--out", out, "--db", db])  # fmt: skip
    assert status == 0, capsys.readouterr().err
    doc = json.loads(next((tmp_path / "sims").glob("sim-*.json")).read_text())
    from stash_core import __version__

    assert doc["stash_version"] == __version__ and doc["jobs"] == 3


# ---------------------------------------------------------------- a full disk (a small tmpfs, root)


@pytest.fixture
def full_disk(tmp_path):
    with mounted_tmpfs(tmp_path / "full", "8m") as target:
        yield target


def test_a_csv_on_a_full_disk_is_never_half_written(full_disk, tmp_path, capsys):
    db = tmp_path / "r.duckdb"
    fill(full_disk)
    status = main(
        [
            "recommend",
            "--model",
            "resnet18",
            "--batch-size",
            "8",
            "--epochs",
            "1",
            "--dataset-images",
            "100",
            "--budget-hours",
            "1",
            "--csv",
            str(full_disk / "options.csv"),
            "--db",
            str(db),
        ]
    )
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.strip()]
    assert status == 1 and len(lines) == 1 and "No space left" in lines[0], err  # the machine's, not the input's
    assert sorted(path.name for path in full_disk.iterdir()) == ["filler"]


def test_a_simulation_on_a_full_disk_names_the_file_and_leaves_nothing(full_disk, tmp_path, capsys):
    fill(full_disk)
    db = str(tmp_path / "r.duckdb")
    status = main(["schedule", "--synthetic-jobs", "5", "--tuning", "online", "--no-store",
                   "--out", str(full_disk / "sims"), "--jobs-csv", str(full_disk / "jobs.csv"),
                   "--db", db])  # fmt: skip
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.strip()]
    assert status == 1 and len(lines) == 1 and "(None)" not in lines[0] and "No space left" in lines[0], err
    assert sorted(path.name for path in full_disk.iterdir()) == ["filler"]


def test_an_instance_added_on_a_full_disk_is_one_line(full_disk, capsys):
    db = full_disk / "r.duckdb"
    assert main(["instances", "add", "first.box", "--vcpus", "2", "--db", str(db)]) == 0
    capsys.readouterr()
    fill(full_disk)
    status = main(["instances", "add", "my.box", "--vcpus", "4", "--memory-gib", "8", "--db", str(db)])
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.strip()]
    assert status == 1 and len(lines) == 1 and "Traceback" not in err, err
    (full_disk / "filler").unlink()
    with duckdb.connect(str(db), read_only=True) as con:
        names = {row[0] for row in con.execute("SELECT name FROM instances").fetchall()}
    assert "first.box" in names and "my.box" not in names


@pytest.mark.parametrize("existing", [False, True])
def test_a_database_on_a_full_disk_leaves_no_empty_files(full_disk, capsys, existing):
    db = full_disk / "r.duckdb"
    if existing:
        assert main(["instances", "add", "first.box", "--vcpus", "2", "--db", str(db)]) == 0
    before = sorted(path.name for path in full_disk.iterdir())
    fill(full_disk)
    status = main(["instances", "add", "my.box", "--vcpus", "4", "--db", str(db)])
    err = capsys.readouterr().err
    assert status == 1 and len([line for line in err.splitlines() if line.strip()]) == 1, err
    left = sorted(path.name for path in full_disk.iterdir() if path.name != "filler")
    empty = [name for name in left if (full_disk / name).stat().st_size == 0 and not name.endswith("waiting")]
    assert empty == [] and set(left) <= set(before) | {"r.duckdb.writer-waiting", "r.duckdb.reader-waiting"}


def test_an_export_on_a_full_disk_fails_as_the_machine_did_and_leaves_no_folder(full_disk, tmp_path, capsys):
    db = tmp_path / "r.duckdb"
    assert main(["instances", "add", "first.box", "--vcpus", "2", "--db", str(db)]) == 0
    capsys.readouterr()
    fill(full_disk)
    status = main(["export", "--format", "csv", "--out", str(full_disk / "out" / "csv"), "--db", str(db)])
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.strip()]
    assert status == 1 and len(lines) == 1 and "No space left" in lines[0], err
    assert sorted(path.name for path in full_disk.iterdir()) == ["filler"]


def test_a_new_database_on_a_full_disk_fails_as_the_machine_did(full_disk, capsys):
    fill(full_disk)
    status = main(["instances", "add", "my.box", "--vcpus", "4", "--db", str(full_disk / "new.duckdb")])
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.strip()]
    assert status == 1 and len(lines) == 1 and "Traceback" not in err, err
