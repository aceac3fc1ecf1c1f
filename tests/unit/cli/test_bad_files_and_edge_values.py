"""Bad files and edge values on every command: special files where a file is read or written (FIFOs,
devices, folders, links to /dev/zero), another program's database, byte-order marks and bad encodings,
JSON nested too deeply, numbers at the edge of a double, model factories that hang or exit (the plainer bad
values of every option are test_bad_inputs.py's).

Each case runs `stash` in-process against one seeded database and must end with exit status 2 and one line
on stderr that says the reason, the database's rows unchanged, no file of the world replaced or changed
(a FIFO or a device stays what it was), and no process left behind.
"""

from __future__ import annotations

import hashlib
import importlib
import json
import os
import stat
import time
from pathlib import Path

import duckdb
import psutil
import pytest
from support import REPO, stash

EXAMPLES = sorted((REPO / "examples" / "results").glob("*.json"))
TABLES = ("runs", "phases", "iterations", "telemetry", "stalls", "models", "instances", "probes")
WORKLOAD = {"param_mb": 100, "solo_bandwidth_mbps": 900, "a1": 0.1, "b1": 0.2, "g": [1, 2, 3, 4, 5],
            "batch_per_gpu": 32, "compute_s": {"g4dn.xlarge": 0.2}}  # fmt: skip
SKY_HEADER = (
    "InstanceType,AcceleratorName,AcceleratorCount,vCPUs,MemoryGiB,GpuInfo,Price,SpotPrice,Region,Zone\n"
)
SKY_ROW = "g4dn.xlarge,T4,1.0,4.0,16.0,{info},0.526,0.2,us-east-1,use1-az1\n"
PHILLY_JOB = {"jobid": "j1", "user": "u", "vc": "v", "status": "Pass",
              "submitted_time": "2017-10-03 03:04:45",
              "attempts": [{"start_time": "2017-10-03 03:05:00", "end_time": "2017-10-03 04:05:00",
                            "detail": [{"ip": "m1", "gpus": ["gpu0", "gpu1"]}]}]}  # fmt: skip


def _gpu(memory: object = 16384, maker: object = "NVIDIA") -> str:
    info = {"Gpus": [{"Name": "T4", "Manufacturer": maker, "Count": 1, "MemoryInfo": {"SizeInMiB": memory}}]}
    return '"' + repr(info) + '"'


def _philly(**change) -> str:
    return json.dumps([{**PHILLY_JOB, **change}])


def _workload(**change) -> str:
    return json.dumps({**WORKLOAD, **change})


# Regular files of the world: name -> content.
FILES: dict[str, str | bytes] = {
    "ok_workload.json": _workload(),
    "philly_now.json": _philly(submitted_time="now"),
    "philly_today.json": _philly(submitted_time="today"),
    "philly_offset.json": json.dumps(
        [PHILLY_JOB, {**PHILLY_JOB, "jobid": "j2", "submitted_time": "2017-10-03 03:04:45+14:00"}]
    ),
    "philly_deep.json": "[" * 200 + "]" * 200,
    "philly_very_deep.json": "[" * 100_000 + "]" * 100_000,
    "philly_object.json": json.dumps({"jobs": [PHILLY_JOB]}),
    "philly_bom.json": "\ufeff" + _philly(submitted_time="yesterday"),
    "philly_digits.json": "[" + "9" * 5000 + "]",
    "philly_nul.json": _philly() + "\x00",
    "philly_latin1.json": json.dumps([{**PHILLY_JOB, "user": "caf\u00e9"}], ensure_ascii=False).encode(
        "latin-1"
    ),
    "philly_empty.json": "",
    "pai_job_table.csv": "j1,i1,u,Terminated,100,200\n",
    "pai_task_table.csv": "j1,t1,1e300,Terminated,100,200,100,10,1e300,V100\n",
    "tiresias_bom_bad.csv": "\ufeffjob_id,num_gpu,submit_time,duration\n1,-4,0,10\n",
    "tiresias_nul.csv": "job_id,num_gpu,submit_time,duration\n1,\x004,0,10\n",
    "tiresias_latin1.csv": "job_id,num_gpu,submit_time,duration\nj\u00e9,4,0,10\n".encode("latin-1"),
    "tiresias_empty.csv": "",
    "helios_nul.csv": "\x00\x00\x00",
    "workload_deep.json": '{"a":' * 100 + "1" + "}" * 100,
    "workload_a1_tiny.json": _workload(a1=1e-300),
    "workload_b1_huge.json": _workload(b1=-1e308),
    "workload_neg_error.json": _workload(loss_fit={"mean_rel_error": -1}),
    "workload_inf_param.json": '{"param_mb": 1e400, "solo_bandwidth_mbps": 900, "a1": 0.1, "b1": 0.2, '
    '"g": [1, 2, 3, 4, 5], "batch_per_gpu": 32}',
    "workload_bigint.json": _workload(param_mb=10**400),
    "workload_bigint_g.json": _workload(g=[10**400, 2, 3, 4, 5]),
    "workload_bom_list.json": "\ufeff[1, 2]",
    "workload_list.json": "[]",
    "workload_nul.json": _workload() + "\x00",
    "workload_latin1.json": b'{"param_mb": 1, "name": "caf\xe9"}',
    "workload_empty.json": "",
    "workload_text_a1.json": _workload(a1="0.1"),
    "workload_bool_a1.json": _workload(a1=True),
    "workload_null_g.json": _workload(g=None),
    "workload_g_short.json": _workload(g=[1, 2, 3]),
    "workload_margin_nan.json": _workload(contention_margin=float("nan")).replace("NaN", "NaN"),
    "workload_ps_zero.json": _workload(ps_bandwidth_mbps=0),
    "workload_ps_text.json": _workload(ps_bandwidth_mbps="fast"),
    "workload_error_text.json": _workload(loss_fit={"mean_rel_error": "small"}),
    "workload_error_big.json": _workload(loss_fit={"mean_rel_error": 5}),
    "workload_fit_list.json": _workload(loss_fit=[1]),
    "loss_bom_bad.csv": "\ufeffiteration,loss,batch_size,workers\n1,nan,32,1\n",
    "loss_nul.csv": "iteration,loss,batch_size,workers\n1,\x00,32,1\n",
    "loss_flat.csv": "iteration,loss,batch_size,workers\n100,5.0,256,1\n100,5.0,256,2\n100,5.0,512,1\n100,5.0,512,2\n500,5.0,256,1\n500,5.0,256,2\n500,5.0,512,1\n500,5.0,512,2\n1000,5.0,256,1\n1000,5.0,256,2\n1000,5.0,512,1\n1000,5.0,512,2\n",  # a loss that never falls
    "loss_latin1.csv": "it\u00e9ration,loss\n".encode("latin-1"),
    "loss_empty.csv": "",
    "loss_header_only.csv": "iteration,loss,batch_size,workers\n",
    "loss_inf.csv": "iteration,loss,batch_size,workers\n1,inf,32,1\n2,1,32,1\n",
    "loss_huge_batch.csv": "iteration,loss,batch_size,workers\n1,2,1e300,1\n2,1,1e300,1\n",
    "revocations_bom_bad.csv": "\ufefftime_s,instance\n-5,g4dn.xlarge\n",
    "revocations_nul.csv": "time_s,instance\n\x00,g4dn.xlarge\n",
    "revocations_latin1.csv": "time_s,instance\n1,g\u00e9\n".encode("latin-1"),
    "revocations_empty.csv": "",
    "revocations_inf.csv": "time_s,instance\ninf,g4dn.xlarge\n",
    "revocations_unknown.csv": "time_s,instance\n10,p9.nowhere\n",
    "sky_size_true.csv": SKY_HEADER + SKY_ROW.format(info=_gpu(memory=True)),
    "sky_size_one.csv": SKY_HEADER + SKY_ROW.format(info=_gpu(memory=1)),
    "sky_size_text.csv": SKY_HEADER + SKY_ROW.format(info=_gpu(memory="16GB")),
    "sky_maker_list.csv": SKY_HEADER + SKY_ROW.format(info=_gpu(maker=["N"])),
    "sky_maker_empty.csv": SKY_HEADER + SKY_ROW.format(info=_gpu(maker=" ")),
    "sky_maker_control.csv": SKY_HEADER + SKY_ROW.format(info=_gpu(maker="NV\x07")),
    "sky_info_deep.csv": SKY_HEADER + SKY_ROW.format(info='"' + "[" * 3000 + "]" * 3000 + '"'),
    "sky_bom_bad.csv": "\ufeff" + SKY_HEADER + SKY_ROW.format(info="").replace("0.526", "-1"),
    "sky_nul.csv": SKY_HEADER + "\x00" + SKY_ROW.format(info=""),
    "sky_latin1.csv": (SKY_HEADER + SKY_ROW.format(info="").replace("T4", "T\u00e94")).encode("latin-1"),
    "sky_empty.csv": "",
    "model_sleeps.py": "import time\ndef make():\n    time.sleep(600)\n",
    "model_sleeps_at_import.py": "import time\ntime.sleep(600)\ndef make():\n    pass\n",
    "model_exits.py": "import os\nos._exit(0)\n",
    "model_exits_in_factory.py": "import os\ndef make():\n    os._exit(3)\n",
    "model_raises.py": "def make():\n    raise ValueError('boom')\n",
    "model_sys_exit.py": "import sys\ndef make():\n    sys.exit(0)\n",
    "model_returns_int.py": "def make():\n    return 42\n",
    "model_keyboard.py": "def make():\n    raise RecursionError('deep')\n",
    "script_nul.py": "print('x')\x00\n",
    "script_latin1.py": "# caf\xe9\nprint(1)\n".encode("latin-1"),
    "not_a_result.json": json.dumps({"hello": "world"}),
}
SPECIALS = ("fifo", "zero", "null", "folder", "urandom")


@pytest.fixture(scope="module")
def world(tmp_path_factory) -> dict[str, str]:
    root = tmp_path_factory.mktemp("bad-files")
    db = root / "seeded.duckdb"
    assert stash("ingest", *map(str, EXAMPLES), "--db", str(db)).returncode == 0
    places = {"db": str(db), "tmp": str(root)}
    for name, content in FILES.items():
        path = root / name
        path.write_bytes(content) if isinstance(content, bytes) else path.write_text(content)
        places[name.rsplit(".", 1)[0]] = str(path)
    os.mkfifo(root / "fifo")
    (root / "zero").symlink_to("/dev/zero")
    (root / "null").symlink_to("/dev/null")
    (root / "urandom").symlink_to("/dev/urandom")
    (root / "folder").mkdir()
    (root / "big_workload.json").write_text(" " * (17 * 2**20) + "{}")
    places["big_workload"] = str(root / "big_workload.json")
    for name in SPECIALS:
        places[name] = str(root / name)
    foreign = root / "foreign.duckdb"
    with duckdb.connect(str(foreign)) as con:
        con.execute("CREATE TABLE accounts (id INTEGER, owner TEXT)")
        con.execute("INSERT INTO accounts VALUES (1, 'someone')")
    places["foreign"] = str(foreign)
    sqlite = root / "other.sqlite"
    sqlite.write_bytes(b"SQLite format 3\x00" + bytes(4080))
    places["sqlite"] = str(sqlite)
    places["link_to_workload"] = str(root / "link_to_workload.json")
    (root / "link_to_workload.json").symlink_to(root / "ok_workload.json")
    return places


def _digest(root: Path) -> dict[str, tuple]:
    """What each entry of the world is: a regular file's bytes, a special file's kind, a link's target."""
    seen = {}
    for path in sorted(root.iterdir()):
        if path.name.endswith((".wal", ".writer-waiting", ".reader-waiting")) or path.name.startswith("."):
            continue
        info = os.lstat(path)
        if stat.S_ISLNK(info.st_mode):
            seen[path.name] = ("link", os.readlink(path))
        elif stat.S_ISREG(info.st_mode) and not path.name.endswith(".duckdb"):
            seen[path.name] = ("file", hashlib.sha256(path.read_bytes()).hexdigest())
        else:
            seen[path.name] = ("kind", stat.S_IFMT(info.st_mode))
    return seen


def _rows(db: str) -> dict[str, tuple]:
    with duckdb.connect(db, read_only=True) as con:
        return {t: con.execute(f"SELECT count(*), bit_xor(hash(x)) FROM {t} x").fetchone() for t in TABLES}


def _foreign_rows(db: str) -> list:
    with duckdb.connect(db, read_only=True) as con:
        return con.execute("SELECT table_name FROM information_schema.tables ORDER BY 1").fetchall()


DB = ["--db", "{db}"]
SCHED = ["schedule", "--no-store", "--out", "{tmp}/sims"]
SPOT = ["spot", "--instances", "g4dn.xlarge:2", "--target-loss", "1", "--budget-s", "3600", *DB]
REPLAN = ["spot-replan", "--instances", "g4dn.xlarge:2", "--target-loss", "1", "--running", "g4dn.xlarge:1",
          "--current-loss", "2", "--budget-s", "100", *DB]  # fmt: skip
SIM = ["spot-simulate", "--instances", "g4dn.xlarge:2", "--target-loss", "1", "--deadline-s", "100", *DB]
PREDICT = ["predict", "--batch-size", "8", *DB]
RECOMMEND = ["recommend", "--batch-size", "8", "--epochs", "1", "--dataset-images", "100", "--budget-hours",
             "1", *DB]  # fmt: skip
SPECIAL_SAYS = {"fifo": "FIFO", "zero": "character device", "null": "character device", "folder": "director",
                "urandom": "character device"}  # fmt: skip

CASES: list[tuple[str, list[str], str]] = []

# ---- every reader of a user's file, given a FIFO, /dev/zero, /dev/null, /dev/urandom or a folder
READERS = {
    "philly": [*SCHED, "--trace-format", "philly", "--trace", "{X}", *DB],
    "tiresias": [*SCHED, "--trace", "{X}", *DB],
    "helios": [*SCHED, "--trace-format", "helios", "--trace", "{X}", *DB],
    "spot-workload": ["spot", "--workload", "{X}", *SPOT[1:]],
    "replan-workload": [*REPLAN, "--workload", "{X}"],
    "simulate-workload": [*SIM, "--workload", "{X}", "--rate-per-h", "1"],
    "simulate-trace": [*SIM, "--workload", "{ok_workload}", "--trace", "{X}"],
    "fit-loss-csv": ["spot-fit-loss", "--csv", "{X}", "--workload", "{tmp}/fitted.json"],
    "profile-script": ["profile", "--script", "{X}", *DB],
    "sky": ["instances", "import", "--skypilot", "{X}", *DB],
}
for reader, argv in READERS.items():
    for special in SPECIALS:
        if reader == "sky" and special == "folder":
            continue  # a folder of catalogs is what the option takes
        says = SPECIAL_SAYS[special]
        if reader == "profile-script" and special == "folder":
            says = "directory"
        CASES.append((f"{reader}-{special}", [a.replace("{X}", "{" + special + "}") for a in argv], says))

# ---- outputs that are special files: refused, never replaced
for special in ("fifo", "zero", "null", "folder"):
    says = "not a regular file" if special != "folder" else "director"
    CASES += [
        (f"jobs-csv-{special}", [*SCHED, "--synthetic-jobs", "3", "--jobs-csv", "{" + special + "}", *DB],
         says),
        (f"recommend-csv-{special}", [*RECOMMEND, "--model", "resnet18", "--csv", "{" + special + "}"], says),
        (f"fit-loss-workload-{special}", ["spot-fit-loss", "--csv", "{loss_header_only}", "--workload",
                                          "{" + special + "}"], "workload file"),
        (f"spot-profile-loss-csv-{special}", ["spot-profile", "--model", "resnet10", "--workload",
                                              "{tmp}/sp.json", "--loss-csv", "{" + special + "}", *DB], says),
    ]  # fmt: skip

# ---- another program's database, an SQLite file, a FIFO or a device as --db: refused by every command
DB_COMMANDS = {
    "runs": ["runs"], "ingest": ["ingest", str(EXAMPLES[0])], "schedule": [*SCHED, "--synthetic-jobs", "3"],
    "predict": ["predict", "--model", "resnet18", "--batch-size", "8"],
    "recommend": RECOMMEND[:-2] + ["--model", "resnet18"], "instances-list": ["instances", "list"],
    "instances-add": ["instances", "add", "my.box", "--vcpus", "4"],
    "instances-set": ["instances", "set", "g4dn.xlarge", "--vcpus", "4"],
    "spot": ["spot", "--workload", "{ok_workload}", *SPOT[1:-2]],
    "show": ["show", "some-run"], "campaign": ["campaign", "--dry-run", "--models", "resnet18"],
    "export": ["export", "--format", "csv", "--out", "{tmp}/exported"],
}  # fmt: skip
DB_KINDS = {"foreign": "not Stash's", "sqlite": "SQLite", "fifo": "FIFO", "zero": "character device"}
for command, argv in DB_COMMANDS.items():
    for kind, says in DB_KINDS.items():
        if kind in ("fifo", "zero") and command not in (
            "runs",
            "ingest",
            "schedule",
            "instances-add",
            "spot",
        ):
            continue
        CASES.append((f"db-{kind}-{command}", [*argv, "--db", "{" + kind + "}"], says))

# ---- the contents of traces, workloads, loss curves, revocation traces and catalogs
CASES += [
    ("philly-now", [*READERS["philly"][:-3], "{philly_now}", *DB], "is not a time"),
    ("philly-today", [*READERS["philly"][:-3], "{philly_today}", *DB], "is not a time"),
    ("philly-offset", [*READERS["philly"][:-3], "{philly_offset}", *DB], "UTC offset"),
    ("philly-deep", [*READERS["philly"][:-3], "{philly_deep}", *DB], "deeper than"),
    ("philly-very-deep", [*READERS["philly"][:-3], "{philly_very_deep}", *DB], "deeper than"),
    ("philly-object", [*READERS["philly"][:-3], "{philly_object}", *DB], "JSON list of jobs"),
    ("philly-bom-yesterday", [*READERS["philly"][:-3], "{philly_bom}", *DB], "is not a time"),
    ("philly-digits", [*READERS["philly"][:-3], "{philly_digits}", *DB], "too long"),
    ("philly-nul", [*READERS["philly"][:-3], "{philly_nul}", *DB], "NUL"),
    ("philly-latin1", [*READERS["philly"][:-3], "{philly_latin1}", *DB], "not UTF-8"),
    ("philly-empty", [*READERS["philly"][:-3], "{philly_empty}", *DB], "empty"),
    ("pai-huge", [*SCHED, "--trace-format", "pai2020", "--trace", "{pai_job_table}", *DB], "GPUs"),
    ("tiresias-bom-negative", [*READERS["tiresias"][:-3], "{tiresias_bom_bad}", *DB], "num_gpu"),
    ("tiresias-nul", [*READERS["tiresias"][:-3], "{tiresias_nul}", *DB], "NUL"),
    ("tiresias-latin1", [*READERS["tiresias"][:-3], "{tiresias_latin1}", *DB], "not UTF-8"),
    ("tiresias-empty", [*READERS["tiresias"][:-3], "{tiresias_empty}", *DB], "is empty"),
    ("helios-nul", [*READERS["helios"][:-3], "{helios_nul}", *DB], "NUL"),
    ("spot-workload-deep", ["spot", "--workload", "{workload_deep}", *SPOT[1:]], "deeper than"),
    ("spot-workload-too-big", ["spot", "--workload", "{big_workload}", *SPOT[1:]], "at most"),
    ("spot-negative-fit-error", ["spot", "--workload", "{workload_neg_error}", *SPOT[1:]], "mean_rel_error"),
    ("spot-inf-param", ["spot", "--workload", "{workload_inf_param}", *SPOT[1:]], "param_mb"),
    ("spot-bigint-param", ["spot", "--workload", "{workload_bigint}", *SPOT[1:]], "param_mb"),
    ("spot-bigint-g", ["spot", "--workload", "{workload_bigint_g}", *SPOT[1:]], "g must be"),
    ("spot-bom-list", ["spot", "--workload", "{workload_bom_list}", *SPOT[1:]], "JSON object"),
    ("spot-list", ["spot", "--workload", "{workload_list}", *SPOT[1:]], "JSON object"),
    ("spot-workload-nul", ["spot", "--workload", "{workload_nul}", *SPOT[1:]], "NUL"),
    ("spot-workload-latin1", ["spot", "--workload", "{workload_latin1}", *SPOT[1:]], "not UTF-8"),
    ("spot-workload-empty", ["spot", "--workload", "{workload_empty}", *SPOT[1:]], "empty"),
    ("spot-a1-text", ["spot", "--workload", "{workload_text_a1}", *SPOT[1:]], "a1"),
    ("spot-a1-bool", ["spot", "--workload", "{workload_bool_a1}", *SPOT[1:]], "a1"),
    ("spot-g-null", ["spot", "--workload", "{workload_null_g}", *SPOT[1:]], "g must be"),
    ("spot-g-short", ["spot", "--workload", "{workload_g_short}", *SPOT[1:]], "g must be"),
    ("spot-ps-zero", ["spot", "--workload", "{workload_ps_zero}", *SPOT[1:]], "ps_bandwidth_mbps"),
    ("spot-ps-text", ["spot", "--workload", "{workload_ps_text}", *SPOT[1:]], "ps_bandwidth_mbps"),
    ("spot-error-text", ["spot", "--workload", "{workload_error_text}", *SPOT[1:]], "mean_rel_error"),
    ("spot-error-big", ["spot", "--workload", "{workload_error_big}", *SPOT[1:]], "beyond"),
    ("spot-fit-list", ["spot", "--workload", "{workload_fit_list}", *SPOT[1:]], "mean_rel_error"),
    ("replan-workload-deep", [*REPLAN, "--workload", "{workload_deep}"], "deeper than"),
    ("replan-negative-error", [*REPLAN, "--workload", "{workload_neg_error}"], "mean_rel_error"),
    ("simulate-workload-deep", [*SIM, "--workload", "{workload_deep}", "--rate-per-h", "1"], "deeper than"),
    ("fit-loss-bom-nan", ["spot-fit-loss", "--csv", "{loss_bom_bad}", "--workload", "{tmp}/f.json"], "loss"),
    ("fit-loss-nul", ["spot-fit-loss", "--csv", "{loss_nul}", "--workload", "{tmp}/f.json"], "NUL"),
    ("fit-loss-flat", ["spot-fit-loss", "--csv", "{loss_flat}", "--workload", "{tmp}/f.json"],
     "the loss must fall with training"),
    ("fit-loss-latin1", ["spot-fit-loss", "--csv", "{loss_latin1}", "--workload", "{tmp}/f.json"], "UTF-8"),
    ("fit-loss-empty", ["spot-fit-loss", "--csv", "{loss_empty}", "--workload", "{tmp}/f.json"], "no rows"),
    ("fit-loss-header-only", ["spot-fit-loss", "--csv", "{loss_header_only}", "--workload", "{tmp}/f.json"],
     "no rows"),
    ("fit-loss-inf", ["spot-fit-loss", "--csv", "{loss_inf}", "--workload", "{tmp}/f.json"], "loss"),
    ("fit-loss-huge-batch", ["spot-fit-loss", "--csv", "{loss_huge_batch}", "--workload", "{tmp}/f.json"],
     "batch"),
    ("fit-loss-workload-deep", ["spot-fit-loss", "--csv", "{loss_inf}", "--workload", "{workload_deep}"],
     "deeper than"),
    ("fit-loss-workload-list", ["spot-fit-loss", "--csv", "{loss_inf}", "--workload", "{workload_list}"],
     "JSON object"),
    ("fit-loss-workload-folder-missing", ["spot-fit-loss", "--csv", "{loss_inf}", "--workload",
                                          "{tmp}/no/such/folder/w.json"], "does not exist"),
    ("simulate-trace-bom-negative", [*SIM, "--workload", "{ok_workload}", "--trace", "{revocations_bom_bad}"],
     "line 2"),
    ("simulate-trace-nul", [*SIM, "--workload", "{ok_workload}", "--trace", "{revocations_nul}"], "NUL"),
    ("simulate-trace-latin1", [*SIM, "--workload", "{ok_workload}", "--trace", "{revocations_latin1}"],
     "UTF-8"),
    ("simulate-trace-empty", [*SIM, "--workload", "{ok_workload}", "--trace", "{revocations_empty}"],
     "header line"),
    ("simulate-trace-inf", [*SIM, "--workload", "{ok_workload}", "--trace", "{revocations_inf}"], "line 2"),
    ("sky-size-true", ["instances", "import", "--skypilot", "{sky_size_true}", *DB], "SizeInMiB True"),
    ("sky-size-one", ["instances", "import", "--skypilot", "{sky_size_one}", *DB], "SizeInMiB 1"),
    ("sky-size-text", ["instances", "import", "--skypilot", "{sky_size_text}", *DB], "SizeInMiB"),
    ("sky-maker-list", ["instances", "import", "--skypilot", "{sky_maker_list}", *DB], "Manufacturer"),
    ("sky-maker-empty", ["instances", "import", "--skypilot", "{sky_maker_empty}", *DB], "Manufacturer"),
    ("sky-maker-control", ["instances", "import", "--skypilot", "{sky_maker_control}", *DB], "Manufacturer"),
    ("sky-info-deep", ["instances", "import", "--skypilot", "{sky_info_deep}", *DB], "GpuInfo"),
    ("sky-bom-negative", ["instances", "import", "--skypilot", "{sky_bom_bad}", *DB], "column Price"),
    ("sky-nul", ["instances", "import", "--skypilot", "{sky_nul}", *DB], "NUL"),
    ("sky-latin1", ["instances", "import", "--skypilot", "{sky_latin1}", *DB], "not UTF-8"),
    ("sky-empty", ["instances", "import", "--skypilot", "{sky_empty}", *DB], "no column"),
    ("sky-price-date-future", ["instances", "import", "--skypilot", "{sky_size_true}", "--price-date",
                               "2200-01-01", *DB], "in the future"),
    ("sky-price-date-year-one", ["instances", "import", "--skypilot", "{sky_empty}", "--price-date",
                                 "0001-01-01", *DB], "--price-date"),
    ("profile-script-nul", ["profile", "--script", "{script_nul}", *DB], "--script"),
    ("profile-script-missing", ["profile", "--script", "{tmp}/nowhere.py", *DB], "no such file"),
    ("ingest-fifo", ["ingest", "{fifo}", *DB], "FIFO"),
    ("ingest-zero", ["ingest", "{zero}", *DB], "character device"),
    ("ingest-folder", ["ingest", "{folder}", *DB], "director"),
    ("ingest-not-a-result", ["ingest", "{not_a_result}", *DB], "not a Stash result"),
]  # fmt: skip

# ---- link bandwidths and other numbers at the edges
for flag, value in (("--node-gbps", "1e-300"), ("--node-gbps", "0.0001"), ("--node-gbps", "1e7"),
                    ("--uplink-gbps", "1e-9"), ("--oversubscription", "1e9")):  # fmt: skip
    extra = ["--node-gbps", "10"] if flag != "--node-gbps" else []
    says = {"1e7": "--node-gbps", "1e9": "--oversubscription"}.get(value, "bandwidth")
    CASES.append(
        (f"schedule{flag}-{value}", [*SCHED, "--synthetic-jobs", "5", *extra, flag, value, *DB], says)
    )

# ---- a user's model: one that hangs, exits, raises, or returns no model; said once, exit 2
MODELS = {
    "model_sleeps": "time limit", "model_sleeps_at_import": "time limit", "model_exits": "os._exit",
    "model_exits_in_factory": "os._exit", "model_raises": "raised ValueError", "model_sys_exit": "SystemExit",
    "model_returns_int": "returned an int, not a torch.nn.Module", "model_keyboard": "RecursionError",
}  # fmt: skip
for name, says in MODELS.items():
    CASES.append((f"predict-{name}", [*PREDICT, "--model", "{" + name + "}:make"], says))
    CASES.append((f"recommend-{name}", [*RECOMMEND, "--model", "{" + name + "}:make"], says))
for special in ("fifo", "folder"):
    CASES.append((f"predict-model-{special}", [*PREDICT, "--model", "{" + special + "}:make"], "model file"))
CASES.append(("predict-model-no-factory", [*PREDICT, "--model", "{model_raises}:missing"], "no factory"))
CASES.append(("recommend-model-no-factory", [*RECOMMEND, "--model", "{model_raises}:missing"], "no factory"))
CASES.append(("spot-memory-model-sleeps", ["spot-memory", "--model", "{model_sleeps}:make", "--batches",
                                           "1,2,3", *DB], "time limit"))  # fmt: skip
CASES.append(("spot-memory-model-exits", ["spot-memory", "--model", "{model_exits}:make", "--batches",
                                          "1,2,3", *DB], "os._exit"))  # fmt: skip
CASES.append(("spot-profile-model-exits", ["spot-profile", "--model", "{model_exits}:make", "--workload",
                                           "{tmp}/sp.json", *DB], "os._exit"))  # fmt: skip


def _expand(argv: list[str], world: dict[str, str]) -> list[str]:
    return [arg.format(**world) if "{" in arg else arg for arg in argv]


def _children(started_before: frozenset[int] = frozenset()) -> list[psutil.Process]:
    """Live child processes, less those alive before the command ran (a multiprocessing resource tracker
    an earlier test of this process started is not the command's, whatever order the tests run in)."""
    alive = []
    for child in psutil.Process().children(recursive=True):
        try:
            if child.status() != psutil.STATUS_ZOMBIE and child.pid not in started_before:
                alive.append(child)
        except psutil.Error:
            pass
    return alive


def _file_states(world) -> list[tuple | None]:
    """(inode, size, modified ns) of both databases and their WALs: equal to the seeded ones, nothing wrote to
    them (a write sets the modification time), so their rows need not be read again (some 60 ms a case)."""
    states: list[tuple | None] = []
    for db in (world["db"], world["foreign"]):
        for path in (Path(db), Path(db + ".wal")):
            info = path.stat() if path.exists() else None
            states.append(info and (info.st_ino, info.st_size, info.st_mtime_ns))
    return states


@pytest.fixture(scope="module")
def seeded(world):
    return (_rows(world["db"]), _foreign_rows(world["foreign"])), _file_states(world)


def test_the_table_has_200_cases_each_named_once():
    assert len(CASES) >= 200 and len({case_id for case_id, _, _ in CASES}) == len(CASES)


@pytest.mark.parametrize(("case_id", "argv", "says"), CASES, ids=[case[0] for case in CASES])
def test_a_bad_input_is_refused_cleanly(case_id, argv, says, world, seeded, capsys, monkeypatch, tmp_path):
    main = importlib.import_module("stash_core.cli.main").main
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("STASH_DB", world["db"])
    monkeypatch.setenv("STASH_USER_CODE_LIMIT_S", "2")
    monkeypatch.setenv("STASH_CLUSTER_STATE", str(tmp_path / "cluster-state"))
    before = _digest(Path(world["tmp"]))
    earlier = frozenset(child.pid for child in _children())
    status = main(_expand(argv, world))
    captured = capsys.readouterr()
    lines = [line for line in captured.err.splitlines() if line.strip()]
    assert status == 2, captured.err
    assert len(lines) == 1 and "Traceback" not in captured.err, captured.err
    assert says in lines[0], lines[0]
    assert _digest(Path(world["tmp"])) == before  # no file replaced, written, or turned into another kind
    seeded_rows, seeded_states = seeded
    if _file_states(world) != seeded_states:  # written to or replaced: the rows must still be the seeded ones
        assert (_rows(world["db"]), _foreign_rows(world["foreign"])) == seeded_rows
    deadline = time.monotonic() + 10
    while _children(earlier) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert _children(earlier) == []
    assert not (tmp_path / "results.duckdb").exists()
