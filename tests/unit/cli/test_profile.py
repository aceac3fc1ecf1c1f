"""`stash profile` end to end: real torchrun launches, a real JPEG data set, a real DuckDB file."""

from __future__ import annotations

import json

import duckdb
import pytest
from support import REPO, SMALL, one_line_error, stash_here, stash_main


@pytest.fixture(scope="module")
def full_profile(tmp_path_factory):
    """One profile through all four single-machine runs (R0, R1, R3, R2)."""
    tmp = tmp_path_factory.mktemp("profile")
    db = tmp / "results.duckdb"
    out = tmp / "run.json"
    result = stash_main(  # main() in this process; its launches are real processes
        "profile", *SMALL, "--workers", "2", "--synthetic-images", "96", "--image-px", "64",
        "--iterations", "12", "--instance", "test-box", "--db", str(db), "--out", str(out),
        env_extra={"STASH_CACHE_DIR": str(tmp / "cache")},
    )  # fmt: skip
    return result, db, out


@pytest.mark.launches
def test_full_profile_runs_all_four_runs_and_stores_a_consistent_breakdown(full_profile):
    result, db, out = full_profile
    assert result.returncode == 0, result.stderr
    assert "compute" in result.stdout and "disk fetch" in result.stdout and "CPU prep" in result.stdout
    doc = json.loads(out.read_text())
    assert doc["status"] == "completed"
    assert [phase["name"] for phase in doc["phases"]] == ["R0", "R1", "R3", "R2"]
    assert [phase["workers"] for phase in doc["phases"]] == [1, 2, 2, 2]
    with duckdb.connect(str(db), read_only=True) as con:
        row = con.execute(
            "SELECT iteration_s, compute_s, interconnect_s, network_s, cpu_s, disk_s, "
            "compute_ci95_s, interconnect_ci95_s, cpu_ci95_s, disk_ci95_s, instance, workers_per_node "
            "FROM stall_breakdown WHERE run_id = ?",
            [doc["run_id"]],
        ).fetchone()
        phases = dict(
            con.execute("SELECT phase, iterations FROM phases WHERE run_id = ?", [doc["run_id"]]).fetchall()
        )
        iteration_rows = con.execute(
            "SELECT count(*) FROM iterations WHERE run_id = ?", [doc["run_id"]]
        ).fetchone()[0]
    iteration_s, compute_s, interconnect_s, network_s, cpu_s, disk_s = row[:6]
    assert network_s is None  # one machine: not measured
    stall_sum = compute_s + interconnect_s + cpu_s + disk_s
    # Equal by construction, up to stalls clamped to zero within their own noise.
    clamped_noise = sum(
        s["ci95_s"] for s in doc["breakdown"]["stalls"].values() if s["status"] == "clamped_zero"
    )
    assert abs(stall_sum - iteration_s) <= clamped_noise + 1e-9
    assert row[10] == "test-box" and row[11] == 2
    assert all(ci is not None and ci >= 0 for ci in row[6:10])
    assert set(phases) == {"R0", "R1", "R3", "R2"} and all(n >= 12 for n in phases.values())
    assert iteration_rows == sum(phases.values())


@pytest.mark.launches
def test_cache_state_is_measured_at_the_start_of_the_real_data_runs(full_profile):
    _, _, out = full_profile
    phases = {phase["name"]: phase for phase in json.loads(out.read_text())["phases"]}
    assert phases["R3"]["resident_fraction_start"] > 0.95
    assert phases["R2"]["resident_fraction_start"] < 0.2
    assert phases["R0"]["resident_fraction_start"] is None


@pytest.mark.launches
def test_telemetry_and_fingerprint_are_recorded(full_profile):
    _, _, out = full_profile
    doc = json.loads(out.read_text())
    telemetry = doc["phases"][1]["telemetry"]
    assert len(telemetry["t_s"]) >= 1
    assert len(telemetry["metrics"]["cpu_util_pct"]) == len(telemetry["t_s"])
    assert doc["fingerprint"]["instance"] == "test-box"
    assert doc["model"]["grad_tensor_count"] > 0 and doc["model"]["layer_count"] > 0


@pytest.mark.launches
def test_show_and_ingest_are_idempotent(full_profile, tmp_path):
    _, db, out = full_profile
    run_id = json.loads(out.read_text())["run_id"]
    shown = stash_main("show", run_id[:12], "--db", str(db))
    assert shown.returncode == 0 and "interconnect" in shown.stdout
    # the communication table the profile printed (probes, lower bound, overlap) comes back from the store
    assert json.loads(out.read_text())["breakdown"]["communication"]
    assert "lower bound" in shown.stdout and "from the probes" in shown.stdout
    again = stash_main("ingest", str(out), "--db", str(db))
    assert again.returncode == 0 and "already stored" in again.stdout
    with duckdb.connect(str(db), read_only=True) as con:
        assert con.execute("SELECT count(*) FROM runs").fetchone()[0] == 1


@pytest.mark.parametrize(
    "args, expected",
    [
        (["--model", "resnet99", "--batch-size", "2"], "unknown model"),
        (["--model", "no/such/file.py:make", "--batch-size", "2"], "no/such/file.py"),
        (["--model", f"{REPO}/examples/models/tiny_cnn.py:nothere", "--batch-size", "2"], "nothere"),
        (["--model", "resnet18", "--batch-size", "0"], "batch-size"),
        (["--model", "resnet18", "--batch-size", "-3"], "batch-size"),
        (["--model", "resnet18", "--batch-size", "2", "--workers", "512", "--device", "cpu"], "512"),
        (["--model", "resnet18", "--batch-size", "2", "--dataset", "/no/such/dir"], "/no/such/dir"),
        (["--model", "resnet18", "--batch-size", "2", "--stalls", "gpu"], "unknown stall"),
        (["--model", "resnet18", "--batch-size", "2", "--iterations", "some"], "--iterations"),
        (["--model", "resnet18", "--batch-size", "2", "--input-shape", "3,0,4"], "--input-shape"),
        (["--model", "resnet18", "--batch-size", "2", "--loader-workers", "-1"], "--loader-workers"),
        (["--model", "resnet18", "--batch-size", "2", "--nodes", "2"], "say which machines"),
        (["--model", "resnet18", "--batch-size", "2", "--ssh-user", "ubuntu"], "need --hosts"),
        (
            ["--model", "m", "--batch-size", "2", "--nodes", "2", "--hosts", "a,b", "--ssh-key", "/no/key"],
            "/no/key",
        ),
    ],
)
def test_bad_input_is_one_line_and_exit_2_and_writes_nothing(tmp_path, args, expected, capsys, monkeypatch):
    db = tmp_path / "r.duckdb"
    result = stash_here(capsys, monkeypatch, "profile", *args, "--db", str(db), cwd=tmp_path)
    assert result.returncode == 2
    assert expected in one_line_error(result)
    assert not db.exists() and not (tmp_path / "results").exists()


def test_a_factory_that_raises_is_reported(tmp_path, capsys, monkeypatch):
    factory = tmp_path / "broken.py"
    factory.write_text("def make(num_classes=10):\n    raise ValueError('weights missing')\n")
    result = stash_here(
        capsys, monkeypatch, "profile", "--model", f"{factory}:make", "--batch-size", "2",
        "--db", str(tmp_path / "r.duckdb"),
    )  # fmt: skip
    assert result.returncode == 2
    assert "weights missing" in one_line_error(result)


def test_empty_and_corrupt_data_sets_are_refused(tmp_path, capsys, monkeypatch):
    empty = tmp_path / "empty"
    empty.mkdir()
    db = str(tmp_path / "r.duckdb")
    result = stash_here(capsys, monkeypatch, "profile", *SMALL, "--dataset", str(empty), "--db", db)
    assert result.returncode == 2
    assert "no class folders" in one_line_error(result)
    corrupt = tmp_path / "corrupt" / "cls"
    corrupt.mkdir(parents=True)
    for index in range(10):
        (corrupt / f"{index}.jpg").write_bytes(b"not a jpeg at all")
    result = stash_here(capsys, monkeypatch, "profile", *SMALL, "--dataset", str(corrupt.parent), "--db", db)
    assert result.returncode == 2
    assert "corrupt" in one_line_error(result).lower()
    assert not (tmp_path / "r.duckdb").exists()


def test_an_unwritable_database_path_is_refused_before_measuring(tmp_path, capsys, monkeypatch):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    db = str(blocker / "r.duckdb")
    args = ["profile", *SMALL, "--stalls", "compute", "--db", db]
    result = stash_here(capsys, monkeypatch, *args, cwd=tmp_path)
    assert result.returncode == 2
    assert "r.duckdb" in one_line_error(result) or "cannot write" in result.stderr


@pytest.mark.parametrize(
    "content, expected",
    [
        ("{not json", "JSON"),
        ('{"hello": "world"}', "not a Stash result"),
        ('{"kind": "stash-profile", "schema_version": 99, "run_id": "x"}', "schema_version"),
    ],
)
def test_ingest_refuses_corrupt_foreign_and_newer_files(tmp_path, content, expected, capsys, monkeypatch):
    bad = tmp_path / "bad.json"
    bad.write_text(content)
    db = tmp_path / "r.duckdb"
    result = stash_here(capsys, monkeypatch, "ingest", str(bad), "--db", str(db))
    assert result.returncode == 2
    assert expected.lower() in one_line_error(result).lower()
