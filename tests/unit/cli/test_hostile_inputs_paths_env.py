"""A hostile user's paths and environment: FIFOs, devices, links to the database, a database that is a text
file, a folder whose export would replace the database, STASH_DB with odd values, `~user` of no user, names
too long for the file system. Each is refused with one line and exit 2 and nothing written, or answered
without a traceback. Cases beyond tests/unit/cli/test_bad_inputs.py and tests/unit/test_pathargs.py.

Placeholders: {db} a seeded database, {link} a link to it, {fifo} a FIFO, {text} a small CSV file,
{short} a 5-byte file, {empty_obj} the JSON `{}`, {w} a workload, {tmp} the scratch folder.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from pathlib import Path

import pytest
from support import REPO, stash_main

EXAMPLES = sorted((REPO / "examples" / "results").glob("*.json"))
DB = ["--db", "{db}"]
RECOMMEND = ["recommend", "--model", "resnet18", "--batch-size", "8", "--epochs", "1",
             "--dataset-images", "100", "--budget-hours", "1", *DB]  # fmt: skip
FIT_LOSS = ["spot-fit-loss", "--csv"]
WORKLOAD = {"param_mb": 100, "solo_bandwidth_mbps": 900, "a1": 0.1, "b1": 0.2, "g": [1, 2, 3, 4, 5],
            "compute_s": {"g4dn.xlarge": 0.2}}  # fmt: skip
SPOT = ["--instances", "g4dn.xlarge:2", "--target-loss", "1", "--budget-s", "100", *DB]
LONG = "x" * 5000
NOT_UTF8 = {"STASH_DB": "{tmp}/a\udcff.duckdb"}  # a byte that is not UTF-8, kept by Python as a surrogate
LOOP = {"link:loop1": "{tmp}/loop2", "link:loop2": "{tmp}/loop1"}


@pytest.fixture(scope="module")
def seeded(tmp_path_factory) -> Path:
    db = tmp_path_factory.mktemp("hostile-paths") / "seeded.duckdb"
    assert stash_main("ingest", *map(str, EXAMPLES), "--db", str(db)).returncode == 0
    return db


def build_world(root: Path, seeded: Path) -> dict[str, str]:
    """The files the cases name, in `root`, with a copy of the seeded database."""
    root.mkdir()
    db = root / "seeded.duckdb"
    shutil.copy(seeded, db)
    (root / "link.duckdb").symlink_to(db)
    os.mkfifo(root / "fifo")
    (root / "t.csv").write_text("a,b\n1,2\n")
    (root / "short.duckdb").write_text("hello")
    (root / "empty_obj.json").write_text("{}")
    (root / "plain").write_text("a plain file")
    (root / "w.json").write_text(json.dumps(WORKLOAD))
    names = ("link.duckdb", "fifo", "t.csv", "short.duckdb", "empty_obj.json", "plain", "w.json")
    return {"db": str(db), "tmp": str(root), **{n.split(".")[0]: str(root / n) for n in names}}


def expand(argv, world):
    return [arg.format(**world) if "{" in arg else arg for arg in argv]


def digest(path: str) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


PROFILE = ["profile", "--model", "resnet10", "--batch-size", "2", "--input-shape", "3,8,8", "--iterations", "3",
           "--stalls", "compute"]  # fmt: skip

# (id, arguments, environment, what the one line must say): refused with exit 2.
REFUSED = [
    # ---- the database is not a database
    ("runs-db-fifo", ["runs", "--db", "{fifo}"], {}, "FIFO"),
    ("runs-db-dev-null", ["runs", "--db", "/dev/null"], {}, "character device"),
    ("runs-db-root", ["runs", "--db", "/"], {}, "directory"),
    ("runs-db-proc-file", ["runs", "--db", "/proc/self/status"], {}, "not a DuckDB database"),
    ("runs-db-five-bytes", ["runs", "--db", "{short}"], {}, "not a DuckDB database"),
    ("runs-db-is-a-csv", ["runs", "--db", "{t}"], {}, "not a DuckDB database"),
    ("ingest-db-is-a-csv", ["ingest", str(EXAMPLES[0]), "--db", "{t}"], {}, "not a DuckDB database"),
    ("seed-db-fifo", ["instances", "seed", "--db", "{fifo}"], {}, "FIFO"),
    # ---- inputs that are not what they claim
    ("ingest-the-database", ["ingest", "{db}", *DB], {}, "not a Stash result"),
    ("ingest-a-link-to-the-database", ["ingest", "{link}", *DB], {}, "not a Stash result"),
    ("ingest-empty-object", ["ingest", "{empty_obj}", *DB], {}, "not a Stash result"),
    ("ingest-no-files", ["ingest", *DB], {}, "files"),
    ("import-the-database", ["instances", "import", "--skypilot", "{db}", *DB], {}, "not UTF-8"),
    ("import-fifo", ["instances", "import", "--skypilot", "{fifo}", *DB], {}, "FIFO"),
    ("import-other-csv", ["instances", "import", "--skypilot", "{t}", *DB], {}, "no column"),
    ("schedule-trace-fifo", ["schedule", "--trace", "{fifo}", *DB], {}, "FIFO"),
    ("schedule-trace-the-database", ["schedule", "--trace", "{db}", *DB], {}, "cannot tell the format"),
    ("schedule-trace-folder", ["schedule", "--trace", "{tmp}", *DB], {}, "directory"),
    ("schedule-trace-dev-zero", ["schedule", "--trace", "/dev/zero", *DB], {}, "character device"),
    ("fit-loss-other-csv", [*FIT_LOSS, "{t}", "--workload", "{tmp}/new.json"], {}, "no iteration"),
    ("fit-loss-csv-is-database", ["spot-fit-loss", "--csv", "{db}", "--workload", "{tmp}/new.json"], {},
     "not UTF-8"),
    ("fit-loss-workload-is-database", [*FIT_LOSS, "{t}", "--workload", "{db}"], {}, "is a DuckDB database"),
    ("fit-loss-csv-fifo", ["spot-fit-loss", "--csv", "{fifo}", "--workload", "{tmp}/new.json"], {}, "FIFO"),
    ("spot-workload-fifo", ["spot", "--workload", "{fifo}", *SPOT], {}, "FIFO"),
    ("spot-workload-database", ["spot", "--workload", "{db}", *SPOT], {}, "not UTF-8"),
    ("spot-workload-empty-object", ["spot", "--workload", "{empty_obj}", *SPOT], {}, "param_mb"),
    # ---- outputs that would replace what is read, or are no file
    ("export-out-fifo", ["export", "--format", "csv", "--out", "{fifo}", *DB], {}, "{fifo}"),
    ("export-out-link-to-db", ["export", "--format", "csv", "--out", "{link}", *DB], {}, "is the database"),
    ("export-out-empty", ["export", "--format", "csv", "--out", "", *DB], {}, "--out"),
    ("export-out-dev-null", ["export", "--format", "parquet", "--out", "/dev/null", *DB], {}, "/dev/null"),
    ("export-beside-a-database-named-like-a-table",
     ["export", "--format", "csv", "--out", "{tmp}/exp", "--db", "{tmp}/exp/runs.csv"], {}, "database"),
    ("export-beside-a-link-to-the-database",
     ["export", "--format", "json", "--out", "{tmp}/exp", *DB], {"link:exp/stalls.json": "{db}"}, "database"),
    ("recommend-csv-link-to-db", [*RECOMMEND, "--csv", "{link}"], {}, "is the database"),
    ("recommend-csv-fifo", [*RECOMMEND, "--csv", "{fifo}"], {}, "FIFO"),
    ("recommend-csv-wal", [*RECOMMEND, "--csv", "{db}.wal"], {}, "write-ahead log"),
    ("schedule-jobs-csv-link-to-db", ["schedule", "--synthetic-jobs", "5", "--jobs-csv", "{link}", *DB], {},
     "is the database"),
    ("schedule-out-fifo", ["schedule", "--synthetic-jobs", "5", "--out", "{fifo}", *DB], {}, "--out"),
    ("schedule-out-database", ["schedule", "--synthetic-jobs", "5", "--out", "{db}", *DB], {},
     "is the database"),
    ("probe-out-link-to-db", ["probe", "--out", "{link}", *DB], {}, "is the database"),
    ("probe-out-fifo", ["probe", "--out", "{fifo}", *DB], {}, "FIFO"),
    ("probe-out-below-a-file", ["probe", "--out", "{t}/p.json", *DB], {}, "Not a directory"),
    # --out replaced any file with the result (another database: every run in it lost)
    ("probe-out-other-file", ["probe", "--out", "{t}", *DB], {}, "not a Stash result file"),
    ("profile-out-other-file", [*PROFILE, "--out", "{t}", *DB], {}, "not a Stash result file"),
    ("profile-out-dev-null", [*PROFILE, "--out", "/dev/null", *DB], {}, "character device"),
    # --loss-csv was taken as an input: the database was overwritten by the loss curves, after the training
    ("spot-profile-loss-csv-is-db", ["spot-profile", "--model", "resnet10", "--workload", "{tmp}/w.json",
                                     "--loss-csv", "{db}", *DB], {}, "is the database"),
    ("spot-profile-loss-csv-is-workload",
     ["spot-profile", "--model", "resnet10", "--workload", "{tmp}/w.json", "--loss-csv", "{tmp}/w.json", *DB],
     {}, "is the workload file"),
    # ---- ~ of a user that does not exist, names too long, STASH_DB odd values
    ("db-tilde-of-no-user", ["runs", "--db", "~nosuchuser-stash/x.duckdb"], {}, "~nosuchuser-stash"),
    ("csv-tilde-of-no-user", [*RECOMMEND, "--csv", "~nosuchuser-stash/x.csv"], {}, "~nosuchuser-stash"),
    ("env-db-tilde-of-no-user", ["runs"], {"STASH_DB": "~nosuchuser-stash/x.duckdb"}, "~nosuchuser-stash"),
    ("env-db-fifo", ["runs"], {"STASH_DB": "{fifo}"}, "FIFO"),
    ("env-db-root", ["runs"], {"STASH_DB": "/"}, "directory"),
    ("env-db-newline", ["runs"], {"STASH_DB": "a\nb.duckdb"}, "STASH_DB"),
    ("env-db-escape", ["runs"], {"STASH_DB": "\x1b[31m.duckdb"}, "STASH_DB"),
    ("env-db-blank", ["runs"], {"STASH_DB": "   "}, "STASH_DB"),
    # not UTF-8: DuckDB failed with std::bad_cast, a profile measured everything before it could not store it
    ("env-db-not-utf8-ingest", ["ingest", str(EXAMPLES[0])], NOT_UTF8, "not UTF-8"),
    ("env-db-not-utf8-runs", ["runs"], NOT_UTF8, "STASH_DB is not UTF-8"),
    ("env-db-not-utf8-profile", PROFILE, NOT_UTF8, "STASH_DB is not UTF-8"),
    # below a file, through a symlink loop: "File exists" from a writer, "no database there yet" from a reader
    ("ingest-env-db-below-a-file", ["ingest", str(EXAMPLES[0])], {"STASH_DB": "{plain}/x.duckdb"},
     "{plain} is a file, not a folder"),
    ("runs-db-below-a-file", ["runs", "--db", "{plain}/x.duckdb"], {}, "{plain} is a file, not a folder"),
    ("runs-db-symlink-loop", ["runs", "--db", "{tmp}/loop1"], LOOP, "{tmp}/loop1 is a symlink loop"),
    ("export-db-symlink-loop", ["export", "--format", "csv", "--out", "{tmp}/e", "--db", "{tmp}/loop1/x.db"],
     LOOP, "{tmp}/loop1 is a symlink loop"),
    ("instances-list-db-symlink-loop", ["instances", "list", "--db", "{tmp}/loop1"], LOOP, "symlink loop"),
    ("profile-db-symlink-loop", [*PROFILE, "--db", "{tmp}/loop1"], LOOP, "symlink loop"),
    ("env-db-dev-null", ["instances", "list"], {"STASH_DB": "/dev/null"}, "character device"),
    ("env-db-fifo-predict", ["predict", "--model", "resnet18", "--batch-size", "8"], {"STASH_DB": "{fifo}"},
     "FIFO"),
    ("env-db-root-recommend", RECOMMEND[:-2], {"STASH_DB": "/"}, "directory"),
    ("env-db-name-too-long", ["runs"], {"STASH_DB": LONG}, "too long"),
    ("db-name-too-long", ["runs", "--db", LONG], {}, "too long"),
    ("csv-name-too-long", [*RECOMMEND, "--csv", f"{{tmp}}/{LONG}.csv"], {}, "too long"),
]  # fmt: skip

# (id, arguments, environment, exit status): odd but usable, answered without a traceback.
ANSWERED = [
    ("runs-db-through-a-link", ["runs", "--db", "{link}"], {}, 0),
    ("runs-db-missing", ["runs", "--db", "{tmp}/none.duckdb"], {}, 2),  # said, as a mistyped --db
    ("runs-env-db-empty-is-the-default", ["runs"], {"STASH_DB": ""}, 2),  # no results.duckdb here
    ("runs-columns-zero", ["runs", *DB], {"COLUMNS": "0"}, 0),
    ("runs-c-locale", ["runs", *DB], {"LANG": "C", "LC_ALL": "C"}, 0),
    ("runs-unknown-time-zone", ["runs", *DB], {"TZ": "Nowhere/Never"}, 0),
    ("show-escape-time-zone", ["show", "2904421d", *DB], {"TZ": "\x1b"}, 0),
    ("predict-columns-negative", ["predict", "--model", "resnet18", "--batch-size", "8", "--rows", "1", *DB],
     {"COLUMNS": "-5"}, 0),
    ("predict-columns-text", ["predict", "--model", "resnet18", "--batch-size", "8", "--rows", "1", *DB],
     {"COLUMNS": "abc"}, 0),
    ("export-into-the-databases-folder", ["export", "--format", "json", "--out", "{tmp}", *DB], {}, 0),
    ("export-over-a-link-elsewhere", ["export", "--format", "csv", "--out", "{tmp}/exp2", *DB],
     {"link:exp2/runs.csv": "{plain}"}, 0),
]  # fmt: skip


def test_the_cases_are_named_once():
    ids = [case[0] for case in REFUSED + ANSWERED]
    assert len(ids) == len(set(ids)) and len(ids) >= 60


def _prepare(seeded, env, monkeypatch, tmp_path):
    """The world of one case (cases write next to it) and the environment of the case; returns the world."""
    own = build_world(tmp_path / "w", seeded)
    for key, value in env.items():
        if key.startswith("link:"):
            link = Path(own["tmp"]) / key.removeprefix("link:")
            link.parent.mkdir(parents=True, exist_ok=True)
            link.symlink_to(value.format(**own))
        else:
            monkeypatch.setenv(key, value.format(**own) if "{" in value else value)
    if "STASH_DB" not in env:
        monkeypatch.setenv("STASH_DB", own["db"])
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    monkeypatch.chdir(cwd)
    return own


def _run(argv, own, capsys):
    from stash_core.cli.main import main

    capsys.readouterr()
    status = main(expand(argv, own))
    return status, capsys.readouterr()


@pytest.mark.parametrize(("case_id", "argv", "env", "says"), REFUSED, ids=[case[0] for case in REFUSED])
def test_a_hostile_path_or_environment_is_refused(
    case_id, argv, env, says, seeded, capsys, monkeypatch, tmp_path
):
    own = _prepare(seeded, env, monkeypatch, tmp_path)
    before = digest(own["db"])
    status, captured = _run(argv, own, capsys)
    lines = [line for line in captured.err.splitlines() if line.strip()]
    assert status == 2, captured.err
    assert len(lines) == 1 and "Traceback" not in captured.err, captured.err
    assert says.format(**own) in lines[0]
    assert "\x1b" not in captured.err and len(lines[0]) < 1000
    assert digest(own["db"]) == before
    assert not list((tmp_path / "cwd").iterdir())


@pytest.mark.parametrize(("case_id", "argv", "env", "status"), ANSWERED, ids=[case[0] for case in ANSWERED])
def test_an_odd_but_usable_place_is_answered(
    case_id, argv, env, status, seeded, capsys, monkeypatch, tmp_path
):
    own = _prepare(seeded, env, monkeypatch, tmp_path)
    before = digest(own["db"])
    code, captured = _run(argv, own, capsys)
    assert code == status, captured.err
    assert "Traceback" not in captured.err and "\x1b" not in captured.out + captured.err
    assert digest(own["db"]) == before
    assert Path(own["plain"]).read_text() == "a plain file"
