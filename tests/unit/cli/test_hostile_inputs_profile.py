"""A hostile user's `stash profile`: labels the store would refuse after the run, a host named twice, files
where folders belong, the database or a FIFO as the script or model. Each is refused in one line before any
worker starts; what is odd but usable starts the profile (the launch is replaced by a stand-in here, so no
case measures anything). Cases beyond tests/unit/cli/test_bad_inputs.py."""

from __future__ import annotations

import os

import pytest
from PIL import Image

PROFILE = ["profile", "--model", "resnet10", "--batch-size", "4", "--db", "{tmp}/p.duckdb"]
SCRIPT = ["profile", "--script", "{tmp}/train.py", "--db", "{tmp}/p.duckdb"]
MODEL = ["profile", "--model"]


class Started(Exception):
    """The profile got as far as launching its first run."""


@pytest.fixture()
def world(tmp_path, monkeypatch) -> dict[str, str]:
    from stash_core.engine import profiler

    def launch(*_, **__):
        raise Started

    monkeypatch.setattr(profiler, "run_phase", launch)
    root = tmp_path / "w"
    root.mkdir()
    os.mkfifo(root / "fifo")
    (root / "train.py").write_text("print(1)\n")
    (root / "train.sh").write_text("#!/usr/bin/env python3\nprint(1)\n")  # Python, named .sh
    (root / "t.csv").write_text("a,b\n1,2\n")
    (root / "db.duckdb").write_bytes(b"\x00" * 16 + b"DUCK")
    (root / "dsdir").mkdir()
    for folder in ("ds", "ds_empty_class"):
        (root / folder / "a").mkdir(parents=True)
        Image.new("RGB", (8, 8)).save(root / folder / "a" / "0.jpg")
    (root / "ds" / "link.duckdb").symlink_to(root / "p.duckdb")  # its results/ would be made in the data set
    (root / "ds_empty_class" / "results").mkdir()
    (root / "ds_empty_class" / "results" / "r.json").write_text("{}")
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    monkeypatch.chdir(cwd)
    monkeypatch.setenv("STASH_CACHE_DIR", str(root / "cache"))
    return {"tmp": str(root)}


REFUSED = [
    ("instance-300-characters", [*PROFILE, "--instance", "i" * 300], "--instance"),
    ("instance-empty-for-a-script", [*SCRIPT, "--instance", ""], "--instance"),
    ("instance-blank", [*PROFILE, "--instance", "   "], "--instance"),
    ("hosts-one-machine-twice", [*PROFILE, "--nodes", "2", "--hosts", "a,a"], "twice"),
    ("hosts-a-thousand", [*PROFILE, "--nodes", "2", "--hosts", ",".join(f"h{i}" for i in range(999))], "999"),
    ("dataset-fifo", [*PROFILE, "--dataset", "{tmp}/fifo"], "--dataset"),
    ("dataset-a-file", [*PROFILE, "--dataset", "{tmp}/t.csv"], "--dataset"),
    ("dataset-without-classes", [*PROFILE, "--dataset", "{tmp}/dsdir"], "class"),
    ("out-a-folder", [*PROFILE, "--out", "{tmp}/dsdir"], "directory"),
    ("model-the-database", [*MODEL, "{tmp}/db.duckdb:make", "--batch-size", "4"], ".py"),
    ("model-missing-py", [*MODEL, "{tmp}/fifo.py:make", "--batch-size", "4"], "not found"),
    ("script-the-database", ["profile", "--script", "{tmp}/db.duckdb", "--db", "{tmp}/p.duckdb"], "--script"),
    ("script-fifo", ["profile", "--script", "{tmp}/fifo", "--db", "{tmp}/p.duckdb"], "FIFO"),
    ("script-is-out", [*SCRIPT, "--out", "{tmp}/train.py"], "would replace"),
    ("script-is-db", ["profile", "--script", "{tmp}/train.py", "--db", "{tmp}/train.py"], "DuckDB"),
    ("data-dir-a-file", [*SCRIPT, "--data-dir", "{tmp}/t.csv"], "--data-dir"),
    # "Permission denied: /proc/1/cwd", exit 1, with no word of --data-dir
    ("data-dir-proc", [*SCRIPT, "--data-dir", "/proc/sys/vm"], "--data-dir /proc/sys/vm is a virtual"),
    ("launches-zero", [*PROFILE, "--launches", "0"], "--launches"),
    ("launches-huge", [*PROFILE, "--launches", "100000"], "--launches"),
    ("iterations-negative", [*PROFILE, "--iterations", "-5"], "--iterations"),
    ("ssh-key-fifo", [*PROFILE, "--ssh-key", "{tmp}/fifo", "--nodes", "2", "--hosts", "a,b"], "--ssh-key"),
    ("image-px-nan", [*PROFILE, "--image-px", "nan"], "--image-px"),
    ("disk-read-1e308", [*PROFILE, "--disk-read-mbps", "1e308"], "--disk-read-mbps"),
    ("out-is-db-by-another-name", ["profile", "--model", "resnet10", "--batch-size", "4", "--db",
                                   "{tmp}/dsdir/../p.duckdb", "--out", "{tmp}/p.duckdb"], "is the database"),
    ("stalls-network-on-one-machine", [*PROFILE, "--stalls", "network"], "network needs --nodes 2"),
    ("stalls-cpu-disk-without-data", [*PROFILE, "--stalls", "cpu,disk"], "cpu needs real data"),
    ("stalls-interconnect-one-worker", [*PROFILE, "--workers", "1", "--stalls", "interconnect"],
     "interconnect needs --workers 2"),
    # known not separable before any run: it ran R2 alone and then said so
    ("stalls-disk-of-a-script-without-data-dir", [*SCRIPT, "--stalls", "disk"],
     "--stalls disk: not separable for a script without --data-dir"),
    ("stalls-disk-and-compute-of-a-script-without-data-dir", [*SCRIPT, "--stalls", "compute,disk"],
     "(ask for cpu too, or give --data-dir DIR"),
    # the first profile wrote results/ into the data set, and the next read it as one more class
    ("db-inside-the-dataset", ["profile", "--model", "resnet10", "--batch-size", "4", "--dataset", "{tmp}/ds",
                               "--db", "{tmp}/ds/x.duckdb"], "/ds/x.duckdb is inside --dataset"),
    ("db-linked-from-inside-the-dataset", ["profile", "--model", "resnet10", "--batch-size", "4", "--dataset",
                                           "{tmp}/ds", "--db", "{tmp}/ds/link.duckdb"],
     "/ds/link.duckdb is inside"),
    ("out-inside-the-data-dir", [*SCRIPT, "--data-dir", "{tmp}/ds", "--out", "{tmp}/ds/r.json"],
     "/ds/r.json is inside --data-dir"),
    # read as an image of class a by the next profile ("skipping 1 of 27 image files: 1 corrupt")
    ("out-inside-a-class-folder", ["profile", "--model", "resnet10", "--batch-size", "4", "--dataset",
                                   "{tmp}/ds", "--out", "{tmp}/ds/a/zz.png", "--db", "{tmp}/p.duckdb"],
     "/ds/a/zz.png is inside --dataset"),
    # every later profile of the generated set failed: "class folder 'results' holds no image files"
    ("db-inside-the-generated-data-sets", ["profile", "--model", "resnet10", "--batch-size", "4",
                                           "--synthetic-images", "64", "--db",
                                           "{tmp}/cache/datasets/synthetic-64/x.duckdb"],
     "is inside the folder of generated data sets ("),
    # the same without making a set: the set a later profile makes or reuses there broke likewise
    ("db-inside-a-generated-set-not-read-here", ["profile", "--model", "resnet10", "--batch-size", "4",
                                                 "--db", "{tmp}/cache/datasets/synthetic-64/x.duckdb"],
     "is inside the folder of generated data sets ("),
    ("export-inside-a-generated-set", ["export", "--format", "csv", "--db", "{tmp}/p.duckdb", "--out",
                                       "{tmp}/cache/datasets/synthetic-64/x"],
     "/cache/datasets/synthetic-64/x is inside the folder of generated data sets"),
    ("dataset-class-without-images", [*PROFILE, "--dataset", "{tmp}/ds_empty_class"],
     "class folder 'results' holds no image files"),
    # options that would be stored and never used
    ("dataset-images-with-a-dataset", [*PROFILE, "--dataset", "{tmp}/dsdir", "--dataset-images", "1000"],
     "--dataset's epoch is its files"),
    ("dataset-images-with-generated-files", [*PROFILE, "--synthetic-images", "64", "--dataset-images", "9"],
     "--synthetic-images's epoch is its files"),
    ("disk-read-without-data", [*PROFILE, "--disk-read-mbps", "5"], "this profile has none"),
    ("disk-read-compute-only", [*PROFILE, "--synthetic-images", "64", "--stalls", "compute",
                                "--disk-read-mbps", "5"], "this profile has none"),
    ("image-px-of-a-token-model", ["profile", "--model", "bert_tiny", "--batch-size", "4", "--db",
                                   "{tmp}/p.duckdb", "--synthetic-images", "64", "--image-px", "64"],
     "bert_tiny takes token ids"),
    ("target-ci-with-fixed-iterations", [*PROFILE, "--iterations", "10", "--target-ci", "0.1"],
     "--target-ci steers --iterations auto"),
    # it ran, and then said it stopped "at the --max-iterations cap after 8 kept iterations of the 50 asked"
    ("max-iterations-below-fixed-iterations", [*PROFILE, "--iterations", "50", "--max-iterations", "10"],
     "--max-iterations 10 is below --iterations 50"),
]  # fmt: skip

STARTED = [
    ("instance-formula", [*PROFILE, "--instance", "=cmd|'/C calc'!A0"]),
    ("stalls-twice", [*PROFILE, "--stalls", "compute,compute"]),
    ("stalls-upper-case", [*PROFILE, "--stalls", "COMPUTE"]),
    ("iterations-auto", [*PROFILE, "--iterations", "auto"]),
    ("iterations-auto-with-its-target", [*PROFILE, "--target-ci", "0.05", "--max-iterations", "500"]),
    ("iterations-fixed-with-a-cap", [*PROFILE, "--iterations", "10", "--max-iterations", "500"]),
    # beside the generated sets, not in one: its results/ is no set's class folder
    ("db-at-the-top-of-the-generated-data-sets", ["profile", "--model", "resnet10", "--batch-size", "1",
                                                  "--synthetic-images", "64", "--db",
                                                  "{tmp}/cache/datasets/x.duckdb"]),
    # above the default cap, which nobody typed: started, its cap said after as before
    ("iterations-above-the-default-cap", [*PROFILE, "--iterations", "3000"]),
    ("one-class", [*PROFILE, "--input-shape", "3,32,32", "--num-classes", "1"]),
    ("instance-of-200", [*PROFILE, "--instance", "i" * 200]),
    # a data set is read as its class folders: a result file at its top is no class; --no-store writes no
    # database (nor its results/) there
    ("out-at-the-top-of-the-dataset", ["profile", "--model", "resnet10", "--batch-size", "1", "--dataset",
                                       "{tmp}/ds", "--out", "{tmp}/ds/r.json", "--db", "{tmp}/p.duckdb"]),
    ("no-store-from-inside-the-dataset", ["profile", "--model", "resnet10", "--batch-size", "1", "--dataset",
                                          "{tmp}/ds", "--db", "{tmp}/ds/x.duckdb", "--no-store", "--out",
                                          "{tmp}/r.json"]),
    # CPU and disk of a script without --data-dir: one input-pipeline stall (the Run page asks so by default)
    ("stalls-cpu-and-disk-of-a-script-without-data-dir", [*SCRIPT, "--stalls", "compute,cpu,disk"]),
    ("python-script-named-sh", ["profile", "--script", "{tmp}/train.sh", "--db", "{tmp}/p.duckdb"]),
]


def _id(case) -> str:
    return case.values[0] if hasattr(case, "values") else case[0]


def _run(argv, world, capsys):
    from stash_core.cli.main import main

    capsys.readouterr()
    return main([arg.format(**world) for arg in argv])


def test_the_cases_are_named_once():
    ids = [_id(case) for case in REFUSED + STARTED]
    assert len(ids) == len(set(ids)) >= 29


@pytest.mark.parametrize(("case_id", "argv", "says"), REFUSED, ids=[_id(case) for case in REFUSED])
def test_a_hostile_profile_is_refused_before_it_starts(case_id, argv, says, world, capsys, tmp_path):
    status = _run(argv, world, capsys)
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.strip()]
    assert status == 2 and len(lines) == 1 and "Traceback" not in err, err
    assert says in lines[0]
    assert not (tmp_path / "w" / "p.duckdb").exists() and not list((tmp_path / "cwd").iterdir())


@pytest.mark.parametrize(("case_id", "argv"), STARTED, ids=[case[0] for case in STARTED])
def test_an_odd_but_usable_profile_starts(case_id, argv, world, capsys):
    with pytest.raises(Started):
        _run(argv, world, capsys)
