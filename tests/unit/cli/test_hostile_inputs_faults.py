"""Faults a hostile or unlucky user meets: an export that fails or is interrupted part of the way, an ingest
interrupted between the rows of one run, two writers at once, no HOME, a recommendation over instances that
cannot be predicted. Nothing is half-written, every end is one line, and the answer names its cause."""

from __future__ import annotations

import errno
import hashlib
import importlib
import os
import subprocess
import sys
from pathlib import Path

import duckdb
import pytest
from support import REPO, stash_main

from stash_core import store
from stash_core.errors import UsageError

export_module = importlib.import_module("stash_core.store.export")
ingest_module = importlib.import_module("stash_core.store.ingest")

EXAMPLES = sorted((REPO / "examples" / "results").glob("*.json"))


@pytest.fixture(scope="module")
def seeded(tmp_path_factory) -> Path:
    db = tmp_path_factory.mktemp("hostile-faults") / "seeded.duckdb"
    assert stash_main("ingest", *map(str, EXAMPLES), "--db", str(db)).returncode == 0
    return db


def _digests(folder: Path) -> dict[str, str]:
    return {
        p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(folder.iterdir()) if p.is_file()
    }


def _failing_on(call: int, error: BaseException, real):
    """`real`, failing with `error` at its `call`-th call."""
    calls = {"n": 0}

    def replacement(*args, **kwargs):
        calls["n"] += 1
        if calls["n"] == call:
            raise error
        return real(*args, **kwargs)

    return replacement


EXPORT_FAULTS = [
    ("disk-full-at-the-third-file", 3, OSError(errno.ENOSPC, "No space left on device"), UsageError),
    ("interrupted-at-the-third-file", 3, KeyboardInterrupt(), KeyboardInterrupt),
    (
        "disk-full-at-the-last-file",
        2 * len(export_module.EXPORTED),
        OSError(errno.ENOSPC, "full"),
        UsageError,
    ),
    ("interrupted-at-the-first-file", 1, KeyboardInterrupt(), KeyboardInterrupt),
]


@pytest.mark.parametrize(
    ("case_id", "call", "error", "raised"), EXPORT_FAULTS, ids=[c[0] for c in EXPORT_FAULTS]
)
def test_an_export_that_fails_part_of_the_way_leaves_the_previous_one_whole(
    case_id, call, error, raised, seeded, tmp_path, monkeypatch
):
    out = tmp_path / "export"
    store.export(seeded, "csv", out)
    (out / "notes.txt").write_text("the user's own file")
    before = _digests(out)
    monkeypatch.setattr(export_module.os, "replace", _failing_on(call, error, os.replace))
    with pytest.raises(raised):
        store.export(seeded, "json", out) if "last" not in case_id else store.export(seeded, "csv", out)
    assert _digests(out) == before
    assert not [p for p in out.iterdir() if p.name.startswith(".stash-export-")]


def test_a_first_export_that_fails_leaves_no_folder(seeded, tmp_path, monkeypatch):
    monkeypatch.setattr(export_module.os, "replace", _failing_on(4, OSError(errno.EIO, "I/O"), os.replace))
    with pytest.raises(UsageError):
        store.export(seeded, "parquet", tmp_path / "new")
    assert not (tmp_path / "new").exists()


def test_a_folder_named_like_an_exported_file_is_refused_and_kept(seeded, tmp_path):
    out = tmp_path / "export"
    (out / "runs.csv").mkdir(parents=True)
    (out / "runs.csv" / "mine.txt").write_text("keep")
    with pytest.raises(UsageError, match="runs.csv there is a folder"):
        store.export(seeded, "csv", out)
    assert (out / "runs.csv" / "mine.txt").read_text() == "keep"
    assert sorted(p.name for p in out.iterdir()) == ["runs.csv"]


INGEST_FAULTS = [
    ("interrupted-between-rows", KeyboardInterrupt(), 130),
    ("disk-full-between-rows", OSError(errno.ENOSPC, "No space left on device"), 1),
]


@pytest.mark.parametrize(("case_id", "error", "status"), INGEST_FAULTS, ids=[c[0] for c in INGEST_FAULTS])
def test_an_ingest_stopped_between_the_rows_of_a_run_stores_none_of_it(
    case_id, error, status, tmp_path, monkeypatch, capsys
):
    from stash_core.cli.main import main

    db = tmp_path / "r.duckdb"
    assert main(["ingest", str(EXAMPLES[0]), "--db", str(db)]) == 0
    monkeypatch.setattr(ingest_module, "_insert_frame", _failing_on(3, error, ingest_module._insert_frame))
    capsys.readouterr()
    assert main(["ingest", str(EXAMPLES[1]), "--db", str(db)]) == status
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err, err
    with duckdb.connect(str(db), read_only=True) as con:
        assert con.execute("SELECT count(*) FROM runs").fetchone()[0] == 1
        assert con.execute("SELECT count(DISTINCT run_id) FROM phases").fetchone()[0] == 1


def _stash(*args: str, cwd: Path, env: dict | None = None) -> subprocess.Popen:
    full = {**os.environ, "PYTHONPATH": str(REPO), **(env or {})}
    return subprocess.Popen([sys.executable, "-m", "stash_core", *args], cwd=cwd, env=full, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)  # fmt: skip


def test_two_writers_at_once_both_land_and_one_file_is_stored_once(tmp_path):
    db = str(tmp_path / "r.duckdb")
    first = _stash("ingest", str(EXAMPLES[0]), "--db", db, cwd=tmp_path)
    second = _stash("ingest", str(EXAMPLES[0]), str(EXAMPLES[1]), "--db", db, cwd=tmp_path)
    third = _stash("instances", "add", "box-of-a-writer", "--vcpus", "4", "--db", db, cwd=tmp_path)
    results = [process.communicate(timeout=120) + (process.returncode,) for process in (first, second, third)]
    assert [code for *_, code in results] == [0, 0, 0], results
    lines = [line for out, *_ in results[:2] for line in out.splitlines() if not line.startswith("note: ")]
    first = [line for line in lines if EXAMPLES[0].name in line]
    assert len(lines) == 3 and sorted(line.split()[0] for line in first) == ["already", "stored"], lines
    with duckdb.connect(db, read_only=True) as con:
        assert con.execute("SELECT count(*) FROM runs").fetchone()[0] == 2
        assert con.execute("SELECT count(*) FROM instances WHERE name = 'box-of-a-writer'").fetchone()[0] == 1


HOMELESS = [  # a database not there is said (exit 2, on stderr) by the path the command resolved
    ("runs-default-database", ["runs"], "stash: no database results.duckdb ("),
    ("runs-tilde-database", ["runs", "--db", "~/stash-x.duckdb"], "/stash-x.duckdb (check --db"),
    ("models-list", ["models"], "resnet"),
]


@pytest.mark.parametrize(("case_id", "argv", "says"), HOMELESS, ids=[c[0] for c in HOMELESS])
def test_without_home_commands_still_answer(case_id, argv, says, tmp_path, monkeypatch, capsys):
    from stash_core.cli.main import main

    monkeypatch.delenv("HOME", raising=False)
    monkeypatch.delenv("STASH_DB", raising=False)
    monkeypatch.chdir(tmp_path)
    capsys.readouterr()
    status = main(argv)
    captured = capsys.readouterr()
    assert status == (0 if argv == ["models"] else 2)
    assert says in (captured.err if status else captured.out) and "Traceback" not in captured.err
    assert not list(tmp_path.iterdir())


def test_a_recommendation_over_instances_without_gpus_names_them(seeded, tmp_path, capsys):
    from stash_core.cli.main import main

    db = tmp_path / "own.duckdb"
    db.write_bytes(seeded.read_bytes())
    for name in ("cpu-box-a", "cpu-box-b"):
        add = ["instances", "add", name, "--vcpus", "4", "--on-demand-usd-per-h", "0.1", "--db", str(db)]
        assert main(add) == 0
    capsys.readouterr()
    job = ["--model", "resnet18", "--batch-size", "8", "--epochs", "1", "--dataset-images", "100"]
    status = main(
        ["recommend", *job, "--budget-hours", "1", "--instances", "cpu-box-a,cpu-box-b", "--db", str(db)]
    )
    err = capsys.readouterr().err
    assert status in (1, 2) and len(err.strip().splitlines()) == 1
    assert "cpu-box-a" in err and "no instances to consider" not in err


def test_a_database_that_is_not_there_is_said_by_runs_and_fit(tmp_path, capsys):
    """A mistyped --db read as an empty database: "no runs", "no measured stalls" as if it held nothing; then
    said, but with exit 0 (2 for the same database with --format json): `stash runs || exit 1` passed."""
    from stash_core.cli.main import main

    missing = str(tmp_path / "typo.duckdb")
    for args in (["runs"], ["runs", "--format", "json"], ["fit"]):
        assert main([*args, "--db", missing]) == 2, args
        assert f"no database {'at ' if args == ['fit'] else ''}{missing}" in capsys.readouterr().err
    assert not (tmp_path / "typo.duckdb").exists()
