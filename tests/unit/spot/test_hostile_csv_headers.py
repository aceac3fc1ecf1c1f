"""CSV inputs of the spot commands and the catalog import with a column named twice, two names for one
column, or rows that are odd but readable. A repeated column is refused in one line (csv.DictReader kept
the last one silently); odd rows get an answer without a traceback."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support import REPO, stash_main

WORKLOAD = {"param_mb": 11.54, "solo_bandwidth_mbps": 142, "a1": 0.1, "b1": 0.2,
            "g": [100.0, -1.0, 1000.0, 1.0, 0.3], "batch_per_gpu": 128,
            "compute_s": {"g3.4xlarge": 0.9, "g3.8xlarge": 0.95, "g3.16xlarge": 1.0}}  # fmt: skip
SKY_HEADER = (
    "InstanceType,AcceleratorName,AcceleratorCount,vCPUs,MemoryGiB,GpuInfo,Price,SpotPrice,Region,Zone"
)
SKY_ROW = "g4dn.xlarge,T4,1.0,4.0,16.0,,0.526,0.2,us-east-1,use1-az1"


def _loss(header: str, extra: str = "") -> str:
    rows = [
        f"{j},{5 / (j + 1) + 0.1},{b},{n}{extra}"
        for b in (64, 128)
        for n in (1, 2)
        for j in range(0, 1000, 100)
    ]
    return header + "\n" + "\n".join(rows) + "\n"


FILES = {
    "loss_repeated.csv": _loss("iteration,loss,batch_size,workers,loss", ",9"),
    "loss_repeated_case.csv": _loss("iteration,Loss,batch_size,workers,LOSS", ",9"),
    "loss_two_names.csv": _loss("iteration,loss,batch_size,workers,step", ",7"),
    "loss_two_worker_names.csv": _loss("iteration,loss,batch_size,workers,world_size", ",2"),
    "trace_repeated_instance.csv": "time_s,instance,instance\n10,g3.4xlarge,g3.8xlarge\n",
    "trace_repeated_time.csv": "time_s,time_s,instance\n10,20,g3.4xlarge\n",
    "trace_unordered.csv": "time_s,instance\n10,g3.4xlarge\n5,g3.4xlarge\n",
    "trace_far.csv": "time_s,instance\n1e308,g3.4xlarge\n",
    "trace_formula.csv": "time_s,instance\n10,=cmd\n",
    "trace_more_than_offered.csv": "time_s,instance\n" + "10,g3.4xlarge\n" * 6,
    "sky_repeated.csv": SKY_HEADER.replace("InstanceType,", "InstanceType,InstanceType,")
    + "\n"
    + SKY_ROW.replace("g4dn.xlarge,", "g4dn.xlarge,x,")
    + "\n",
    "sky_repeated_price.csv": SKY_HEADER + ",Price\n" + SKY_ROW + ",0.001\n",
}
DB = ["--db", "{db}"]
FIT = ["spot-fit-loss", "--csv"]
SIM = ["spot-simulate", "--workload", "{w}", "--instances", "g3.4xlarge:4", "--target-loss", "1",
       "--deadline-s", "100000", *DB]  # fmt: skip
SPOT = ["spot", "--workload", "{w}", "--target-loss", "1", *DB]
REPLAN = ["spot-replan", "--workload", "{w}", "--instances", "g3.4xlarge:4", "--current-loss", "2",
          "--budget-s", "10000", *DB]  # fmt: skip

REFUSED = [
    ("loss-column-twice", [*FIT, "{loss_repeated}", "--workload", "{tmp}/f.json"], "twice"),
    ("loss-column-twice-other-case", ["spot-fit-loss", "--csv", "{loss_repeated_case}", "--workload",
                                      "{tmp}/f.json"], "twice"),
    ("loss-iteration-and-step", ["spot-fit-loss", "--csv", "{loss_two_names}", "--workload", "{tmp}/f.json"],
     "iteration"),
    ("loss-workers-and-world-size", ["spot-fit-loss", "--csv", "{loss_two_worker_names}", "--workload",
                                     "{tmp}/f.json"], "workers"),
    ("trace-instance-twice", [*SIM, "--trace", "{trace_repeated_instance}"], "twice"),
    ("trace-time-twice", [*SIM, "--trace", "{trace_repeated_time}"], "twice"),
    ("trace-formula-instance", [*SIM, "--trace", "{trace_formula}"], "not among the instances"),
    ("sky-instance-type-twice", ["instances", "import", "--skypilot", "{sky_repeated}", *DB], "twice"),
    ("sky-price-twice", ["instances", "import", "--skypilot", "{sky_repeated_price}", *DB], "twice"),
    ("replan-running-beyond-quota", [*REPLAN, "--target-loss", "1", "--running", "g3.4xlarge:9"], "quota"),
    ("replan-running-not-offered", [*REPLAN, "--target-loss", "1", "--running", "g3.8xlarge:1"], "not among"),
    ("replan-target-reached", [*REPLAN, "--target-loss", "5", "--running", "g3.4xlarge:1"], "already"),
    ("spot-target-below-the-floor", [*SPOT, "--instances", "g3.4xlarge:4", "--target-loss", "1e-7",
                                     "--budget-s", "100000"], "floor"),
]  # fmt: skip

ANSWERED = [
    ("trace-out-of-order", [*SIM, "--trace", "{trace_unordered}"], 0),
    ("trace-beyond-any-deadline", [*SIM, "--trace", "{trace_far}"], 0),
    ("trace-more-revocations-than-instances", [*SIM, "--trace", "{trace_more_than_offered}"], 0),
    ("spot-one-type-offered-twice", [*SPOT, "--instances", "g3.4xlarge:4,g3.4xlarge:2", "--budget-s", "9e4"],
     0),
    ("spot-budget-of-a-millisecond", [*SPOT, "--instances", "g3.4xlarge:4", "--budget-s", "0.001"], 1),
    ("spot-json", [*SPOT, "--instances", "g3.4xlarge:4", "--budget-s", "100000", "--json"], 0),
]  # fmt: skip


@pytest.fixture(scope="module")
def world(tmp_path_factory) -> dict[str, str]:
    root = tmp_path_factory.mktemp("hostile-csv")
    db = root / "seeded.duckdb"
    example = sorted((REPO / "examples" / "results").glob("*.json"))[0]
    assert stash_main("ingest", str(example), "--db", str(db)).returncode == 0
    (root / "w.json").write_text(json.dumps(WORKLOAD))
    for name, text in FILES.items():
        (root / name).write_text(text)
    return {"db": str(db), "tmp": str(root), "w": str(root / "w.json"),
            **{name.removesuffix(".csv"): str(root / name) for name in FILES}}  # fmt: skip


def _run(argv, world, capsys, monkeypatch, tmp_path):
    from stash_core.cli.main import main

    monkeypatch.chdir(tmp_path)
    capsys.readouterr()
    status = main([arg.format(**world) if "{" in arg else arg for arg in argv])
    return status, capsys.readouterr()


def test_the_cases_are_named_once():
    ids = [case[0] for case in REFUSED + ANSWERED]
    assert len(ids) == len(set(ids)) >= 19


@pytest.mark.parametrize(("case_id", "argv", "says"), REFUSED, ids=[case[0] for case in REFUSED])
def test_a_repeated_or_impossible_csv_input_is_refused(
    case_id, argv, says, world, capsys, monkeypatch, tmp_path
):
    before = Path(world["db"]).read_bytes()
    status, captured = _run(argv, world, capsys, monkeypatch, tmp_path)
    lines = [line for line in captured.err.splitlines() if line.strip()]
    assert status == 2 and len(lines) == 1 and "Traceback" not in captured.err, captured.err
    assert says in lines[0]
    assert Path(world["db"]).read_bytes() == before and not Path(world["tmp"], "f.json").exists()


@pytest.mark.parametrize(("case_id", "argv", "status"), ANSWERED, ids=[case[0] for case in ANSWERED])
def test_an_odd_but_readable_csv_input_is_answered(
    case_id, argv, status, world, capsys, monkeypatch, tmp_path
):
    code, captured = _run(argv, world, capsys, monkeypatch, tmp_path)
    assert code == status, captured.err
    assert "Traceback" not in captured.err and len(captured.err.strip().splitlines()) <= 1
    if "--json" in argv:
        json.loads(captured.out)
