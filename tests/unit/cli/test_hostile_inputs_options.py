"""A hostile user's option values, run ids and catalog edits on the command line: each is refused with one
line and exit 2 (the database as it was), or, where the value is odd but usable, answered without a
traceback. Cases beyond tests/unit/cli/test_bad_inputs.py and test_bad_files_and_edge_values.py.

Placeholders: {db} a database seeded with the example results, {tmp} a scratch folder, {w} a good workload.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import pytest
from support import REPO, stash_main

EXAMPLES = sorted((REPO / "examples" / "results").glob("*.json"))
DB = ["--db", "{db}"]
PREDICT = ["predict", "--model", "resnet18", "--batch-size", "8", *DB]
RECOMMEND = ["recommend", "--model", "resnet18", "--batch-size", "8", "--epochs", "1",
             "--dataset-images", "100", *DB]  # fmt: skip
MEMORY = ["spot-memory", "--model", "resnet10", "--batches"]
SPOT = ["spot", "--workload", "{w}", "--instances", "g4dn.xlarge:2", *DB]
SIM = ["spot-simulate", "--workload", "{w}", "--instances", "g4dn.xlarge:2", "--target-loss", "1", *DB]
REPLAN = ["spot-replan", "--workload", "{w}", "--instances", "g4dn.xlarge:2", "--target-loss", "1", *DB]
SCHED = ["schedule", "--synthetic-jobs", "5", *DB]
ADD = ["instances", "add"]
SET = ["instances", "set", "g4dn.xlarge"]
WORKLOAD = {"param_mb": 100, "solo_bandwidth_mbps": 900, "a1": 0.1, "b1": 0.2, "g": [1, 2, 3, 4, 5],
            "batch_per_gpu": 32, "compute_s": {"g4dn.xlarge": 0.2}}  # fmt: skip


@pytest.fixture(scope="module")
def world(tmp_path_factory) -> dict[str, str]:
    root = tmp_path_factory.mktemp("hostile-options")
    db = root / "seeded.duckdb"
    assert stash_main("ingest", *map(str, EXAMPLES), "--db", str(db)).returncode == 0
    (root / "w.json").write_text(json.dumps(WORKLOAD))
    return {"db": str(db), "tmp": str(root), "w": str(root / "w.json")}


def expand(argv: list[str], world: dict[str, str]) -> list[str]:
    return [arg.format(**world) if "{" in arg else arg for arg in argv]


def digest(path: str) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


# (id, arguments, what the one line must say): refused with exit 2.
REFUSED: list[tuple[str, list[str], str]] = [
    # ---- run ids: SQL-like, LIKE wildcards, empty, escapes, a prefix of several runs
    ("whatif-sql-id", ["whatif", "'; DROP TABLE runs; --", *DB], "no run"),
    ("whatif-empty-id", ["whatif", "", *DB], "must not be empty"),
    ("whatif-percent-id", ["whatif", "%", *DB], "no run"),
    ("whatif-share-nan", ["whatif", "x", "--target-share", "nan", *DB], "--target-share"),
    ("whatif-share-negative", ["whatif", "x", "--target-share", "-1", *DB], "--target-share"),
    ("whatif-share-two", ["whatif", "x", "--target-share", "2", *DB], "--target-share"),
    ("whatif-share-zero", ["whatif", "x", "--target-share", "0", *DB], "--target-share"),
    ("show-percent-id", ["show", "%", *DB], "no run"),
    ("show-underscore-id", ["show", "_", *DB], "no run"),
    ("show-empty-id", ["show", "", *DB], "must not be empty"),
    ("show-sql-id", ["show", "' OR 1=1 --", *DB], "no run"),
    ("show-escape-id", ["show", "\x1b[2J", *DB], "\\x1b"),
    ("show-prefix-of-several", ["show", "2", *DB], "matches several runs"),
    ("show-db-empty-text", ["show", "x", "--db", ""], "--db"),
    ("confirm-unknown-run", ["instances", "confirm", "nosuchrun", *DB], "no run"),
    ("confirm-empty-run", ["instances", "confirm", "", *DB], "must not be empty"),
    # ---- runs
    ("runs-limit-20-digits", ["runs", "--limit", "9" * 20, *DB], "--limit"),
    ("runs-limit-exponent", ["runs", "--limit", "1e3", *DB], "--limit"),
    ("runs-limit-inf", ["runs", "--limit", "inf", *DB], "--limit"),
    # ---- predict
    ("predict-workers-zero", [*PREDICT, "--workers-per-instance", "0"], "--workers-per-instance"),
    ("predict-workers-negative", [*PREDICT, "--workers-per-instance", "-1"], "--workers-per-instance"),
    ("predict-workers-huge", [*PREDICT, "--workers-per-instance", "100000"], "--workers-per-instance"),
    ("predict-max-instances-zero", [*PREDICT, "--max-instances", "0"], "--max-instances"),
    ("predict-max-instances-huge", [*PREDICT, "--max-instances", "99999999999"], "--max-instances"),
    ("predict-rows-zero", [*PREDICT, "--rows", "0"], "--rows"),
    ("predict-rows-negative", [*PREDICT, "--rows", "-3"], "--rows"),
    ("predict-rows-text", [*PREDICT, "--rows", "some"], "--rows"),
    ("predict-gpu-empty", [*PREDICT, "--gpu", ""], "--gpu"),
    ("predict-gpu-unknown", [*PREDICT, "--gpu", "TPUv4"], "unknown GPU"),
    ("predict-gpu-escape", [*PREDICT, "--gpu", "\x1b[31m"], "U+001B"),
    ("predict-batch-14-digits", [*PREDICT[:3], "--batch-size", "9" * 14, *DB], "--batch-size"),
    ("predict-shape-too-many-elements", [*PREDICT, "--input-shape", "3,99999,99999"], "--input-shape"),
    ("predict-model-not-python", ["predict", "--model", "/etc/passwd:make", "--batch-size", "8", *DB], ".py"),
    ("predict-model-folder", ["predict", "--model", "{tmp}:make", "--batch-size", "8", *DB], "folder"),
    ("predict-model-zoo-with-factory", ["predict", "--model", "resnet18:make", "--batch-size", "8", *DB],
     "resnet18"),
    ("predict-model-no-factory", ["predict", "--model", "x.py:", "--batch-size", "8", *DB], "FACTORY"),
    # ---- recommend
    ("recommend-usd-nan", [*RECOMMEND, "--max-usd", "nan"], "--max-usd"),
    ("recommend-usd-negative", [*RECOMMEND, "--max-usd", "-1"], "--max-usd"),
    ("recommend-usd-1e308", [*RECOMMEND, "--max-usd", "1e308"], "--max-usd"),
    ("recommend-epochs-1e308", [*RECOMMEND, "--epochs", "1e308", "--budget-hours", "1"], "--epochs"),
    ("recommend-images-1e308", [*RECOMMEND[:-4], "--dataset-images", "1e308", "--budget-hours", "1", *DB],
     "--dataset-images"),
    ("recommend-max-instances-zero", [*RECOMMEND, "--budget-hours", "1", "--max-instances", "0"],
     "--max-instances"),
    ("recommend-instances-commas", [*RECOMMEND, "--budget-hours", "1", "--instances", ","], "--instances"),
    ("recommend-instances-unknown", [*RECOMMEND, "--budget-hours", "1", "--instances", "nosuch"], "nosuch"),
    ("recommend-csv-folder", [*RECOMMEND, "--budget-hours", "1", "--csv", "{tmp}"], "directory"),
    ("recommend-csv-empty", [*RECOMMEND, "--budget-hours", "1", "--csv", ""], "--csv"),
    ("recommend-csv-dev-full", [*RECOMMEND, "--budget-hours", "1", "--csv", "/dev/full"], "character device"),
    # ---- models, fit, remote, cluster
    ("models-classes-11-digits", ["models", "--num-classes", "99999999999"], "--num-classes"),
    ("models-classes-negative", ["models", "--num-classes", "-1"], "--num-classes"),
    ("models-classes-exponent", ["models", "--num-classes", "1e3"], "--num-classes"),
    ("fit-workers-huge", ["fit", "--predict", "resnet50", "--workers", "99999999", *DB], "--workers"),
    ("fit-predict-unknown-model", ["fit", "--predict", "nosuch", "--workers", "2", *DB], "unknown model"),
    ("fit-unknown-flag", ["fit", "--batch-size", "0", *DB], "--batch-size"),
    ("remote-empty-host", ["remote", "check", ""], "empty"),
    ("remote-ssh-option-host", ["remote", "check", "-oProxyCommand=touch /tmp/pwn"], "invalid host name"),
    ("remote-ssh-option-user", ["remote", "check", "host", "--ssh-user", "-oProxyCommand=x"], "--ssh-user"),
    ("remote-escape-host", ["remote", "check", "host\x1b[2J"], "invalid host name"),
    ("cluster-down-unknown-flag", ["cluster", "down", "--nodes", "-1"], "--nodes"),
    ("cluster-latency-negative", ["cluster", "set", "--latency", "-5ms"], "--latency"),
    # ---- instances add / set / show: odd values
    ("add-region-escape", [*ADD, "box2", "--region", "us\x1b[31m", *DB], "U+001B"),
    ("add-provider-5000", [*ADD, "box4", "--provider", "a" * 5000, *DB], "at most 200"),
    ("add-accelerator-bidi", [*ADD, "box6", "--accelerator", "\u202eT4", *DB], "U+202E"),
    ("add-name-100000", [*ADD, "x" * 100_000, *DB], "at most 200"),
    ("add-network-1e308", [*ADD, "box8", "--network-gbps", "1e308", *DB], "--network-gbps"),
    ("add-vcpus-minus-zero", [*ADD, "box9", "--vcpus", "-0", *DB], "--vcpus"),
    ("add-price-date-2999", [*ADD, "box12", "--price-date", "2999-01-01", *DB], "--price-date"),
    ("set-region-empty", [*SET, "--region", "", *DB], "--region"),
    ("set-vcpus-hex", [*SET, "--vcpus", "0x10", *DB], "--vcpus"),
    ("set-name-other-case", ["instances", "set", "G4DN.XLARGE", "--vcpus", "8", *DB], "unknown instance"),
    ("show-instance-wildcard", ["instances", "show", "g4dn%", *DB], "unknown instance"),
    ("show-instance-percent", ["instances", "show", "%", *DB], "unknown instance"),
    # ---- spot family
    ("spot-loss-negative", [*SPOT, "--target-loss", "-1", "--budget-s", "100"], "--target-loss"),
    ("spot-loss-1e308", [*SPOT, "--target-loss", "1e308", "--budget-s", "100"], "--target-loss"),
    ("spot-budget-1e308", [*SPOT, "--target-loss", "1", "--budget-s", "1e308"], "--budget-s"),
    ("spot-top-huge", [*SPOT, "--target-loss", "1", "--budget-s", "100", "--top", "99999999999"], "--top"),
    ("spot-rate-nan", [*SPOT, "--target-loss", "1", "--budget-s", "9", "--rate-per-h", "nan"],
     "--rate-per-h"),
    ("spot-osc-title-instance", ["spot", "--workload", "{w}", "--instances", "\x1b]0;x\x07:2",
                                 "--target-loss", "1", "--budget-s", "100", *DB], "U+001B"),
    ("simulate-seed-negative", [*SIM, "--deadline-s", "100", "--rate-per-h", "1", "--seed", "-1"], "--seed"),
    ("simulate-deadline-1e308", [*SIM, "--deadline-s", "1e308", "--rate-per-h", "1"], "--deadline-s"),
    ("simulate-rate-1e308", [*SIM, "--deadline-s", "100", "--rate-per-h", "1e308"], "--rate-per-h"),
    ("simulate-runs-huge", [*SIM, "--deadline-s", "100", "--rate-per-h", "1", "--runs", "9" * 11], "--runs"),
    ("replan-budget-nan", [*REPLAN, "--running", "g4dn.xlarge:1", "--current-loss", "2", "--budget-s", "nan"],
     "--budget-s"),
    ("replan-running-text", [*REPLAN, "--running", "g4dn.xlarge:x", "--current-loss", "2", "--budget-s", "9"],
     "the count running"),
    ("memory-batches-zero", [*MEMORY, "0", *DB], "--batches"),
    ("memory-batches-negative", [*MEMORY, "-1,2", *DB], "--batches"),
    ("memory-batches-one", [*MEMORY, "4", *DB], "--batches"),
    ("memory-device-tpu", [*MEMORY, "4,8,16", "--device", "tpu", *DB],
     "--device"),
    ("memory-workload-is-db", [*MEMORY, "4,8,16", "--workload", "{db}", *DB], "is the database"),
    # ---- schedule
    ("schedule-node-gbps-zero", [*SCHED, "--node-gbps", "0"], "--node-gbps"),
    ("schedule-node-gbps-nan", [*SCHED, "--node-gbps", "nan"], "--node-gbps"),
    ("schedule-node-gbps-1e308", [*SCHED, "--node-gbps", "1e308"], "--node-gbps"),
    ("schedule-reference-negative", [*SCHED, "--reference-gbps", "-1"], "--reference-gbps"),
    ("schedule-uplink-gbps-inf", [*SCHED, "--uplink-gbps", "inf", "--node-gbps", "10"], "--uplink-gbps"),
    ("schedule-oversubscription-zero", [*SCHED, "--oversubscription", "0", "--node-gbps", "10"],
     "--oversubscription"),
    ("schedule-min-run-negative", [*SCHED, "--min-run-s", "-1"], "--min-run-s"),
    ("schedule-min-run-nan", [*SCHED, "--min-run-s", "nan"], "--min-run-s"),
    ("schedule-tune-fraction-over-one", [*SCHED, "--tune-fraction", "1.5"], "--tune-fraction"),
    ("schedule-arrivals-unknown", [*SCHED, "--arrivals", "weird"], "--arrivals"),
    ("schedule-generator-unknown", [*SCHED, "--generator", "weird"], "--generator"),
    ("schedule-policies-empty", [*SCHED, "--policies", ""], "--policies"),
    ("schedule-policies-twice", [*SCHED, "--policies", "fifo,fifo"], "more than once"),
    ("schedule-policies-commas", [*SCHED, "--policies", ",,"], "--policies"),
    ("schedule-seed-20-digits", [*SCHED, "--seed", "9" * 20], "--seed"),
    ("schedule-las-empty", [*SCHED, "--las-limits-gpu-h", ""], "--las-limits-gpu-h"),
    ("schedule-las-equal", [*SCHED, "--las-limits-gpu-h", "1,1"], "--las-limits-gpu-h"),
    ("schedule-cluster-four-parts", [*SCHED, "--cluster", "2x4x8x1"], "--cluster"),
    ("schedule-cluster-negative", [*SCHED, "--cluster", "-2x4x8"], "--cluster"),
    ("schedule-trace-and-synthetic", [*SCHED, "--trace", "{w}"], "not allowed"),
    ("schedule-no-jobs", ["schedule", *DB], "--synthetic-jobs"),
    # a mistyped folder is not made, as a shell's `> folder/file` is not (--jobs-csv refused it, --csv made it)
    ("recommend-csv-new-folders", [*RECOMMEND, "--budget-hours", "1", "--csv", "{tmp}/new/folders/x.csv"],
     "folders does not exist"),
]  # fmt: skip

# (id, arguments, exit status): odd values that are still answerable, answered without a traceback.
ANSWERED: list[tuple[str, list[str], int]] = [
    ("whatif-short-id-json", ["whatif", "2904421d", "--json", *DB], 0),
    ("recommend-budget-1e-300", [*RECOMMEND, "--budget-hours", "1e-300"], 1),
    ("fit-missing-database", ["fit", "--db", "{tmp}/none.duckdb"], 2),  # said, as a mistyped --db
    ("add-source-formula", [*ADD, "box3", "--source", '=HYPERLINK("x")', *DB], 0),
    ("add-sql-name", [*ADD, "'; DROP TABLE instances; --", "--vcpus", "2", *DB], 0),
    ("add-formula-name", [*ADD, "=cmd|' /C calc'!A0", "--vcpus", "2", *DB], 0),
    ("set-memory-underscores", [*SET, "--memory-gib", "1_000", *DB], 0),
]  # fmt: skip


def test_the_cases_are_many_and_named_once():
    ids = [case[0] for case in REFUSED + ANSWERED]
    assert len(ids) == len(set(ids)) and len(ids) >= 100


@pytest.mark.parametrize(("case_id", "argv", "says"), REFUSED, ids=[case[0] for case in REFUSED])
def test_a_hostile_value_is_refused_in_one_line(case_id, argv, says, world, capsys, monkeypatch, tmp_path):
    from stash_core.cli.main import main

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("STASH_DB", world["db"])
    monkeypatch.setenv("STASH_CLUSTER_STATE", str(tmp_path / "cluster-state"))
    before = digest(world["db"])
    capsys.readouterr()
    status = main(expand(argv, world))
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.strip()]
    assert status == 2, err
    assert len(lines) == 1 and "Traceback" not in err, err
    assert says in lines[0]
    assert "\x1b" not in err
    assert digest(world["db"]) == before
    assert not list(tmp_path.iterdir())


@pytest.mark.parametrize(("case_id", "argv", "status"), ANSWERED, ids=[case[0] for case in ANSWERED])
def test_an_odd_but_usable_value_is_answered(case_id, argv, status, world, capsys, monkeypatch, tmp_path):
    from stash_core.cli.main import main

    db = tmp_path / "own.duckdb"
    shutil.copy(world["db"], db)
    own = {**world, "db": str(db), "tmp": str(tmp_path)}
    monkeypatch.chdir(tmp_path)
    capsys.readouterr()
    code = main(expand(argv, own))
    captured = capsys.readouterr()
    assert code == status, captured.err
    assert "Traceback" not in captured.err and len(captured.err.strip().splitlines()) <= 1
    assert "\x1b" not in captured.out + captured.err
