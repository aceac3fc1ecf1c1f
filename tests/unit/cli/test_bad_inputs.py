"""Every bad input to every command is refused cleanly: the exit status of bad usage (2), exactly one line on
stderr, no traceback, and the database exactly as it was.

The cases run `stash` in-process (stash_core.cli.main.main) against one seeded database (the example results
and the instance catalog), whose bytes, or else whose every table's rows, must be the same after each case;
a few run as real processes. Placeholders in the arguments: {db} the seeded database, {tmp} a scratch
folder, and the named files of `world` ({garbage}, {deep}, ...).
"""

from __future__ import annotations

import copy
import hashlib
import importlib
import json
import shutil
from pathlib import Path

import duckdb
import pytest
from support import REPO, stash

EXAMPLES = sorted((REPO / "examples" / "results").glob("*.json"))
EXAMPLE = EXAMPLES[0]
TABLES = ("runs", "phases", "iterations", "telemetry", "stalls", "models", "instances", "probes")
PROFILE = ["profile", "--model", "resnet18", "--batch-size", "4", "--db", "{db}"]
RECOMMEND = ["recommend", "--model", "resnet18", "--batch-size", "8", "--epochs", "1", "--dataset-images",
             "100", "--budget-hours", "1", "--db", "{db}"]  # fmt: skip
CAMPAIGN = ["campaign", "--dry-run", "--db", "{db}"]
SPOT = ["spot", "--workload", "{workload}", "--instances", "g4dn.xlarge:2", "--db", "{db}"]
SCHEDULE = ["schedule", "--synthetic-jobs", "5", "--db", "{db}"]
# a probe that, were it not refused, would be short and stored nowhere
PROBE_HERE = ["--max-size", "4KiB", "--budget", "0.01", "--no-store"]

SSH_ALONE = ("--ssh-user, --ssh-key and --ssh-config need --hosts; --python and --workdir need --hosts or "
             "--cluster")


def _doc(change) -> dict:
    doc = json.loads(EXAMPLE.read_text())
    change(doc)
    return doc


def _set(path: str, value):
    """A change of the example document: the value at a dotted path (list indices as numbers)."""

    def change(doc: dict) -> None:
        *parents, last = path.split(".")
        place = doc
        for key in parents:
            place = place[int(key)] if isinstance(place, list) else place[key]
        place[int(last) if isinstance(place, list) else last] = value

    return change


# A probe file as `stash probe --out` writes one, and a change of it.
PROBE = {"schema_version": 1, "kind": "stash-probe", "probe_id": "p1",
         "started_at": "2026-11-22T11:00:00+00:00", "hostname": "vm", "world_size": 2,
         "allreduce": [{"size_bytes": 1024, "repetitions": 10, "time_s": 0.001,
                        "busbw_gbps": 0.008}]}  # fmt: skip


def _probe(**change) -> str:
    return json.dumps({**copy.deepcopy(PROBE), **change})


def _nested(value, depth: int):
    for _ in range(depth):
        value = [value]
    return value


# (file name, content): result, probe and workload files that must be refused.
BAD_FILES: dict[str, str | bytes] = {
    "empty.json": "",
    "notjson.json": "{not json",
    "foreign.json": '{"hello": "world"}',
    "newer.json": '{"kind": "stash-profile", "schema_version": 99, "run_id": "x"}',
    "deep.json": "[" * 100_000 + "]" * 100_000,
    "deepdoc.json": json.dumps(_doc(_set("spec.extra", 0))).replace(
        '"extra": 0', '"extra": ' + "[" * 60 + "1" + "]" * 60
    ),
    "digits.json": json.dumps(_doc(_set("spec.batch_size", 0))).replace(
        '"batch_size": 0', '"batch_size": ' + "9" * 5000
    ),
    "huge_float.json": json.dumps(_doc(_set("spec.extra", 0))).replace('"extra": 0', '"extra": 1e400'),
    "infinity.json": json.dumps(_doc(_set("phases.0.samples.iteration_s.0", 0.5))).replace(
        '"iteration_s": [0.5', '"iteration_s": [Infinity'
    ),
    "int_beyond.json": json.dumps(_doc(_set("spec.batch_size", 2**40))),
    "int_beyond64.json": json.dumps(_doc(_set("spec.dataset_images", 10**20))),
    "negative_batch.json": json.dumps(_doc(_set("spec.batch_size", -5))),
    "negative_params.json": json.dumps(_doc(_set("model.param_count", -1))),
    "year1.json": json.dumps(_doc(_set("started_at", "0001-01-01T00:00:00"))),
    "year9999.json": json.dumps(_doc(_set("started_at", "9999-12-31T00:00:00+00:00"))),
    "yesterday.json": json.dumps(_doc(_set("started_at", "yesterday"))),
    "finished_bad.json": json.dumps(_doc(_set("finished_at", "3000-01-01T00:00:00"))),
    "ansi_id.json": json.dumps(_doc(_set("run_id", "run-\x1b[31mred"))),
    "bidi_id.json": json.dumps(_doc(_set("run_id", "run-\u202ecod.exe"))),
    "newline_id.json": json.dumps(_doc(_set("run_id", "run\nid"))),
    "long_id.json": json.dumps(_doc(_set("run_id", "r" * 500))),
    "ansi_model.json": json.dumps(_doc(_set("model.name", "resnet\x07"))),
    "bidi_instance.json": json.dumps(_doc(_set("spec.instance", "vm\u2066x"))),
    "ansi_phase.json": json.dumps(_doc(_set("phases.0.name", "R\x1b0"))),
    "nested_samples.json": json.dumps(_doc(_set("phases.0.samples.iteration_s.0", [0.1, 0.2]))),
    "text_samples.json": json.dumps(_doc(_set("phases.0.samples.forward_s.1", "fast"))),
    "short_samples.json": json.dumps(_doc(_set("phases.0.samples.data_s", [0.1, 0.2]))),
    "telemetry_shape.json": json.dumps(_doc(_set("phases.0.telemetry.t_s", [0.0]))),
    "telemetry_nested.json": json.dumps(_doc(_set("phases.0.telemetry.t_s.0", {"t": 0}))),
    "phases_object.json": json.dumps(_doc(_set("phases", {"R0": {}}))),
    "spec_list.json": json.dumps(_doc(_set("spec", [1, 2]))),
    "status.json": json.dumps(_doc(_set("status", "done"))),
    "phase_status.json": json.dumps(_doc(_set("phases.0.status", "weird"))),
    "twice.json": json.dumps(_doc(lambda doc: doc["phases"].append(copy.deepcopy(doc["phases"][0])))),
    "other_content.json": json.dumps(_doc(_set("breakdown.iteration_ci95_s", 0.5))),
    "rank_fraction.json": json.dumps(_doc(_set("phases.0.samples.slowest_rank.0", 0.5))),
    "batch_text.json": json.dumps(_doc(_set("spec.batch_size", "thirty-two"))),
    "probe_no_id.json": json.dumps({"kind": "stash-probe", "schema_version": 1, "probe_id": " "}),
    "probe_newer.json": json.dumps({"kind": "stash-probe", "schema_version": 9, "probe_id": "p"}),
    "other_stall.json": json.dumps(_doc(_set("breakdown.stalls.compute.ci95_s", 0.123))),
    "other_error.json": json.dumps(_doc(_set("error", "it died"))),
    "probe_entry_number.json": _probe(allreduce=[5]),
    "probe_entry_empty.json": _probe(allreduce=[{"a": 1}]),
    "probe_allreduce_object.json": _probe(allreduce={"a": 1}),
    "probe_gradient_list.json": _probe(gradient_allreduce=[1, 2]),
    "probe_in_result.json": json.dumps(_doc(_set("probes", [{"allreduce": [5]}]))),
    "probe_deep_host.json": _probe(hostname=_nested("vm", 500)),
    "probe_year1.json": _probe(started_at="0001-01-01T00:00:00+01:00"),
    "probe_year9999.json": _probe(started_at="9999-12-31T23:00:00-05:00"),
    "probe_ansi_id.json": _probe(probe_id="p\x1b[2J"),
    "probe_ansi_host.json": _probe(hostname="vm\x1b[2J"),
    "probe_version0.json": _probe(schema_version=0),
    "probe_negative_time.json": _probe(allreduce=[{**PROBE["allreduce"][0], "time_s": -0.001}]),
    "probe_negative_busbw.json": _probe(allreduce=[{**PROBE["allreduce"][0], "busbw_gbps": -0.008}]),
    "binary.json": b"\xff\xfe\x00garbage",
    "workload_deep.json": "{" + '"a":{' * 5000 + "}" * 5001,
    "workload_digits.json": '{"param_mb": ' + "9" * 5000 + "}",
    "workload_text.json": '{"param_mb": 10, "solo_bandwidth_mbps": 100, "a1": 1, "b1": 1, '
    '"g": [1, 2, 3, 4, 5], "contention_margin": "lots"}',
}


@pytest.fixture(scope="module")
def world(tmp_path_factory) -> dict[str, str]:
    """The seeded database and every file the cases name."""
    root = tmp_path_factory.mktemp("bad-inputs")
    db = root / "seeded.duckdb"
    assert stash("ingest", *map(str, EXAMPLES), "--db", str(db)).returncode == 0
    files = {"db": str(db), "tmp": str(root)}
    for name, content in BAD_FILES.items():
        path = root / name
        path.write_bytes(content) if isinstance(content, bytes) else path.write_text(content)
        files[name.removesuffix(".json")] = str(path)
    (root / "garbage.duckdb").write_bytes(bytes(range(256)) * 64)
    (root / "empty.duckdb").write_bytes(b"")
    corrupt = bytearray(db.read_bytes())  # a DuckDB header, then damaged blocks: "... in block ..."
    corrupt[3 * 4096 :] = bytes((value * 7 + 13) & 255 for value in corrupt[3 * 4096 :])
    (root / "corrupt.duckdb").write_bytes(bytes(corrupt))
    whole = db.read_bytes()  # cut short, as a copy that stopped: "Could not read enough bytes"
    (root / "truncated.duckdb").write_bytes(whole[: len(whole) // 2])
    (root / "plain").write_text("a plain file")
    (root / "ok_train.py").write_text("print('a script that parses')\n")
    (root / "launch.sh").write_text("#!/bin/bash\ntorchrun --nproc-per-node 2 ok_train.py\n")
    (root / "go.sh").write_text("python ok_train.py --epochs 3\n")  # no #! line
    (root / "losses.csv").write_text("step,loss\n1,2.0\n")  # parses as Python: it failed in its first run
    # a notebook's JSON parses as a Python expression: it failed at run time ("name 'null' is not defined")
    notebook = {"cells": [{"cell_type": "code", "source": ["x = 1"], "outputs": [], "metadata": {},
                           "execution_count": None}], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}
    (root / "train.ipynb").write_text(json.dumps(notebook))
    (root / "notebook_train.py").write_text(json.dumps(notebook))
    (root / "link_train.py").symlink_to(root / "gone_train.py")  # a link whose target is gone
    (root / "folder").mkdir()
    (root / "workload.json").write_text(
        json.dumps(
            {
                "param_mb": 100,
                "solo_bandwidth_mbps": 900,
                "a1": 0.1,
                "b1": 0.2,
                "g": [1, 2, 3, 4, 5],
                "batch_per_gpu": 32,
                "compute_s": {"g4dn.xlarge": 0.2},
            }
        )  # fmt: skip
    )
    files.update({name: str(root / name) for name in ("plain", "folder", "workload.json")})
    files.update({f"{name}_db": str(root / f"{name}.duckdb") for name in ("garbage", "empty", "corrupt", "truncated")})
    files["workload"] = files.pop("workload.json")
    return files


def snapshot(db: str) -> str:
    return hashlib.sha256(Path(db).read_bytes()).hexdigest()


def table_checksums(db: str) -> dict[str, tuple]:
    with duckdb.connect(db, read_only=True) as con:
        return {
            table: con.execute(f"SELECT count(*), bit_xor(hash(t)) FROM {table} t").fetchone()
            for table in TABLES
        }


# (id, arguments, what the one line must say). Every case must exit with status 2.
CASES: list[tuple[str, list[str], str]] = [
    # ---- stash profile: every numeric option, the machine, the files
    ("batch-zero", [*PROFILE, "--batch-size", "0"], "--batch-size"),
    ("batch-negative", [*PROFILE, "--batch-size", "-3"], "--batch-size"),
    ("batch-nan", [*PROFILE, "--batch-size", "nan"], "--batch-size"),
    ("batch-float", [*PROFILE, "--batch-size", "1e3"], "--batch-size"),
    ("batch-huge", [*PROFILE, "--batch-size", "99999999999"], "--batch-size"),
    ("batch-text", [*PROFILE, "--batch-size", "abc"], "--batch-size"),
    ("batch-empty", [*PROFILE, "--batch-size", ""], "--batch-size"),
    ("workers-zero", [*PROFILE, "--workers", "0"], "--workers"),
    ("workers-huge", [*PROFILE, "--workers", "100000"], "--workers"),
    ("workers-beyond-cores-cpu", [*PROFILE, "--workers", "64", "--device", "cpu"], "--workers 64"),
    ("workers-beyond-cores-auto", [*PROFILE, "--workers", "64", "--device", "auto"], "--workers 64"),
    ("nodes-zero", [*PROFILE, "--nodes", "0"], "--nodes"),
    ("nodes-without-hosts", [*PROFILE, "--nodes", "2"], "say which machines"),
    # one node of the emulated cluster was profiled and shown as a run on the cluster ("± 378.7%")
    ("cluster-of-one-node", [*PROFILE, "--cluster", "emulated"], "--cluster emulated takes --nodes 2"),
    ("stalls-unknown", [*PROFILE, "--stalls", "gpu"], "unknown stall gpu"),
    ("stalls-empty", [*PROFILE, "--stalls", ","], "--stalls"),
    ("synthetic-zero", [*PROFILE, "--synthetic-images", "0"], "--synthetic-images"),
    ("synthetic-huge", [*PROFILE, "--synthetic-images", "1000000000"], "--synthetic-images"),
    ("dataset-missing", [*PROFILE, "--dataset", "/no/such/dir"], "/no/such/dir"),
    ("dataset-and-synthetic", [*PROFILE, "--dataset", "{folder}", "--synthetic-images", "4"], "not allowed"),
    ("dataset-images-zero", [*PROFILE, "--dataset-images", "0"], "--dataset-images"),
    ("dataset-images-negative", [*PROFILE, "--dataset-images", "-1"], "--dataset-images"),
    ("image-px-zero", [*PROFILE, "--image-px", "0"], "--image-px"),
    ("image-px-huge", [*PROFILE, "--image-px", "100000"], "--image-px"),
    ("loader-negative", [*PROFILE, "--loader-workers", "-1"], "--loader-workers"),
    ("loader-huge", [*PROFILE, "--loader-workers", "1000"], "--loader-workers"),
    ("loader-beyond-cores", [*PROFILE, "--loader-workers", "64"], "--loader-workers 64"),
    ("iterations-one", [*PROFILE, "--iterations", "1"], "--iterations"),
    ("iterations-text", [*PROFILE, "--iterations", "some"], "--iterations"),
    ("iterations-huge", [*PROFILE, "--iterations", "99999999999"], "--iterations"),
    ("target-ci-nan", [*PROFILE, "--target-ci", "nan"], "--target-ci"),
    ("target-ci-inf", [*PROFILE, "--target-ci", "inf"], "--target-ci"),
    ("target-ci-zero", [*PROFILE, "--target-ci", "0"], "--target-ci"),
    ("target-ci-one", [*PROFILE, "--target-ci", "1"], "--target-ci"),
    ("target-ci-negative", [*PROFILE, "--target-ci", "-0.5"], "--target-ci"),
    ("max-iterations-one", [*PROFILE, "--max-iterations", "1"], "--max-iterations"),
    ("max-iterations-nan", [*PROFILE, "--max-iterations", "nan"], "--max-iterations"),
    ("max-iterations-float", [*PROFILE, "--max-iterations", "1e9"], "--max-iterations"),
    ("max-iterations-huge", [*PROFILE, "--max-iterations", "99999999999"], "--max-iterations"),
    ("phase-seconds-zero", [*PROFILE, "--max-phase-seconds", "0"], "--max-phase-seconds"),
    ("phase-seconds-nan", [*PROFILE, "--max-phase-seconds", "nan"], "--max-phase-seconds"),
    ("phase-seconds-inf", [*PROFILE, "--max-phase-seconds", "inf"], "--max-phase-seconds"),
    ("phase-seconds-negative", [*PROFILE, "--max-phase-seconds", "-5"], "--max-phase-seconds"),
    ("phase-seconds-huge", [*PROFILE, "--max-phase-seconds", "1e9"], "--max-phase-seconds"),
    ("device-unknown", [*PROFILE, "--device", "tpu"], "--device"),
    ("threads-zero", [*PROFILE, "--threads-per-worker", "0"], "--threads-per-worker"),
    ("threads-huge", [*PROFILE, "--threads-per-worker", "5000"], "--threads-per-worker"),
    ("threads-beyond-cores", [*PROFILE, "--threads-per-worker", "512"], "--threads-per-worker 512"),
    ("shape-zero", [*PROFILE, "--input-shape", "3,0,4"], "--input-shape"),
    ("shape-negative", [*PROFILE, "--input-shape", "-3"], "--input-shape"),
    ("shape-huge", [*PROFILE, "--input-shape", "3,100000,100000"], "--input-shape"),
    ("shape-dims", [*PROFILE, "--input-shape", "1,2,3,4,5"], "--input-shape"),
    ("shape-text", [*PROFILE, "--input-shape", "abc"], "--input-shape"),
    ("classes-zero", [*PROFILE, "--num-classes", "0"], "--num-classes"),
    ("classes-huge", [*PROFILE, "--num-classes", "99999999999"], "--num-classes"),
    ("disk-cap-zero", [*PROFILE, "--disk-read-mbps", "0"], "--disk-read-mbps"),
    ("disk-cap-nan", [*PROFILE, "--disk-read-mbps", "nan"], "--disk-read-mbps"),
    ("disk-cap-negative", [*PROFILE, "--disk-read-mbps", "-1"], "--disk-read-mbps"),
    ("seed-negative", [*PROFILE, "--seed", "-1"], "--seed"),
    ("seed-huge", [*PROFILE, "--seed", "99999999999"], "--seed"),
    ("seed-nan", [*PROFILE, "--seed", "nan"], "--seed"),
    ("master-port-zero", [*PROFILE, "--master-port", "0"], "--master-port"),
    ("master-port-huge", [*PROFILE, "--master-port", "70000"], "--master-port"),
    ("comm-timeout-zero", [*PROFILE, "--comm-timeout", "0"], "--comm-timeout"),
    ("comm-timeout-negative", [*PROFILE, "--comm-timeout", "-5"], "--comm-timeout"),
    ("comm-timeout-nan", [*PROFILE, "--comm-timeout", "nan"], "--comm-timeout"),
    ("comm-timeout-short", [*PROFILE, "--comm-timeout", "2"], "must be 5..3600 seconds"),
    ("comm-timeout-long", [*PROFILE, "--comm-timeout", "7200"], "at most 3,600"),
    ("link-rate-no-unit", [*PROFILE, "--cluster-bandwidth", "5"], "--cluster-bandwidth"),
    ("link-rate-huge", [*PROFILE, "--cluster-bandwidth", "1000tbit"], "--cluster-bandwidth"),
    ("cluster-kind", [*PROFILE, "--cluster", "other"], "--cluster"),
    ("hosts-injection", [*PROFILE, "--nodes", "2", "--hosts", "a;touch x,b"], "invalid host name"),
    ("ssh-user-alone", [*PROFILE, "--ssh-user", "ubuntu"], "need --hosts"),
    # on the emulated cluster they were ignored: it runs as root with its own key
    ("ssh-user-on-cluster", [*PROFILE, "--cluster", "emulated", "--nodes", "2", "--ssh-user", "bob"],
     "--ssh-user, --ssh-key and --ssh-config apply to --hosts only"),
    ("ssh-config-alone", [*PROFILE, "--ssh-config", "{tmp}/ok_train.py"], "--ssh-config need --hosts"),
    ("ssh-config-missing", [*PROFILE, "--nodes", "2", "--hosts", "a,b", "--ssh-config", "{tmp}/no-config"],
     "--ssh-config: ssh_config"),
    # options of other machines on this machine alone: ignored before, the run made here
    ("cluster-state-alone", [*PROFILE, "--cluster-state", "{tmp}"], "--cluster-state applies to --cluster"),
    ("master-addr-alone", [*PROFILE, "--master-addr", "10.0.0.1"], "--master-addr applies to --hosts only"),
    ("master-port-alone", [*PROFILE, "--master-port", "29555"], "--master-port and --comm-timeout need"),
    ("comm-timeout-alone", [*PROFILE, "--comm-timeout", "30"], "--master-port and --comm-timeout need"),
    ("progress-unknown", [*PROFILE, "--progress", "fancy"], "--progress"),
    ("model-empty", ["profile", "--model", " ", "--batch-size", "4", "--db", "{db}"], "--model"),
    (
        "model-unknown",
        ["profile", "--model", "resnet99", "--batch-size", "4", "--db", "{db}"],
        "unknown model",
    ),
    (
        "model-file-missing",
        ["profile", "--model", "no/such.py:make", "--batch-size", "4", "--db", "{db}"],
        "no/such.py",
    ),  # fmt: skip
    ("model-missing", ["profile", "--batch-size", "4", "--db", "{db}"], "--model"),
    ("flag-unknown", [*PROFILE, "--foo"], "--foo"),
    ("db-directory", [*PROFILE, "--db", "{folder}"], "directory"),
    ("db-garbage", [*PROFILE, "--db", "{garbage_db}"], "corrupt"),
    ("db-corrupt-block", [*PROFILE, "--db", "{corrupt_db}"], "corrupt"),
    ("db-empty-file", [*PROFILE, "--db", "{empty_db}"], "empty"),
    ("db-under-a-file", [*PROFILE, "--db", "{plain}/r.duckdb"], "r.duckdb"),
    ("out-directory", [*PROFILE, "--out", "{folder}"], "--out"),
    ("out-under-a-file", [*PROFILE, "--out", "{plain}/run.json"], "--out"),
    # ---- stash ingest: files the store must not take
    ("ingest-missing", ["ingest", "{tmp}/nothing.json", "--db", "{db}"], "does not exist"),
    ("ingest-directory", ["ingest", "{folder}", "--db", "{db}"], "directory"),
    ("ingest-empty", ["ingest", "{empty}", "--db", "{db}"], "empty"),
    ("ingest-not-json", ["ingest", "{notjson}", "--db", "{db}"], "JSON"),
    ("ingest-binary", ["ingest", "{binary}", "--db", "{db}"], "UTF-8"),
    ("ingest-foreign", ["ingest", "{foreign}", "--db", "{db}"], "not a Stash result"),
    ("ingest-newer", ["ingest", "{newer}", "--db", "{db}"], "schema_version"),
    ("ingest-deep-array", ["ingest", "{deep}", "--db", "{db}"], "nested"),
    ("ingest-deep-spec", ["ingest", "{deepdoc}", "--db", "{db}"], "spec.extra"),
    ("ingest-digits", ["ingest", "{digits}", "--db", "{db}"], "too long"),
    ("ingest-huge-float", ["ingest", "{huge_float}", "--db", "{db}"], "spec.extra"),
    ("ingest-infinity", ["ingest", "{infinity}", "--db", "{db}"], "samples.iteration_s"),
    ("ingest-int-beyond-32", ["ingest", "{int_beyond}", "--db", "{db}"], "spec.batch_size"),
    ("ingest-int-beyond-64", ["ingest", "{int_beyond64}", "--db", "{db}"], "spec.dataset_images"),
    ("ingest-negative-batch", ["ingest", "{negative_batch}", "--db", "{db}"], "spec.batch_size"),
    ("ingest-negative-params", ["ingest", "{negative_params}", "--db", "{db}"], "model.param_count"),
    ("ingest-year-1", ["ingest", "{year1}", "--db", "{db}"], "started_at"),
    ("ingest-year-9999", ["ingest", "{year9999}", "--db", "{db}"], "started_at"),
    ("ingest-not-a-time", ["ingest", "{yesterday}", "--db", "{db}"], "started_at"),
    ("ingest-finished-far", ["ingest", "{finished_bad}", "--db", "{db}"], "finished_at"),
    ("ingest-ansi-run-id", ["ingest", "{ansi_id}", "--db", "{db}"], "run_id"),
    ("ingest-bidi-run-id", ["ingest", "{bidi_id}", "--db", "{db}"], "run_id"),
    ("ingest-newline-run-id", ["ingest", "{newline_id}", "--db", "{db}"], "run_id"),
    ("ingest-long-run-id", ["ingest", "{long_id}", "--db", "{db}"], "run_id"),
    ("ingest-ansi-model", ["ingest", "{ansi_model}", "--db", "{db}"], "model.name"),
    ("ingest-bidi-instance", ["ingest", "{bidi_instance}", "--db", "{db}"], "spec.instance"),
    ("ingest-ansi-phase", ["ingest", "{ansi_phase}", "--db", "{db}"], "phase"),
    ("ingest-nested-samples", ["ingest", "{nested_samples}", "--db", "{db}"], "samples.iteration_s"),
    ("ingest-text-samples", ["ingest", "{text_samples}", "--db", "{db}"], "samples.forward_s"),
    ("ingest-short-samples", ["ingest", "{short_samples}", "--db", "{db}"], "differ in length"),
    ("ingest-telemetry-shape", ["ingest", "{telemetry_shape}", "--db", "{db}"], "telemetry"),
    ("ingest-telemetry-nested", ["ingest", "{telemetry_nested}", "--db", "{db}"], "telemetry.t_s"),
    ("ingest-phases-object", ["ingest", "{phases_object}", "--db", "{db}"], "phases"),
    ("ingest-spec-list", ["ingest", "{spec_list}", "--db", "{db}"], "spec"),
    ("ingest-status", ["ingest", "{status}", "--db", "{db}"], "status"),
    ("ingest-phase-status", ["ingest", "{phase_status}", "--db", "{db}"], "status"),
    ("ingest-phase-twice", ["ingest", "{twice}", "--db", "{db}"], "appears twice"),
    ("ingest-other-content", ["ingest", "{other_content}", "--db", "{db}"], "already stored with other"),
    ("ingest-rank-fraction", ["ingest", "{rank_fraction}", "--db", "{db}"], "slowest_rank"),
    ("ingest-batch-text", ["ingest", "{batch_text}", "--db", "{db}"], "spec.batch_size"),
    ("ingest-probe-no-id", ["ingest", "{probe_no_id}", "--db", "{db}"], "probe_id"),
    ("ingest-probe-newer", ["ingest", "{probe_newer}", "--db", "{db}"], "schema_version"),
    ("ingest-other-stall", ["ingest", "{other_stall}", "--db", "{db}"], "with other stall compute ci95_s"),
    ("ingest-other-error", ["ingest", "{other_error}", "--db", "{db}"], "already stored with other error"),
    ("ingest-probe-entry-number", ["ingest", "{probe_entry_number}", "--db", "{db}"], "allreduce[0] must be"),
    ("ingest-probe-entry-empty", ["ingest", "{probe_entry_empty}", "--db", "{db}"], "measured nothing"),
    ("ingest-probe-allreduce-object", ["ingest", "{probe_allreduce_object}", "--db", "{db}"], "allreduce"),
    ("ingest-probe-gradient-list", ["ingest", "{probe_gradient_list}", "--db", "{db}"], "gradient_allreduce"),
    ("ingest-probe-in-result", ["ingest", "{probe_in_result}", "--db", "{db}"], "probes[0].allreduce[0]"),
    ("ingest-probe-deep-host", ["ingest", "{probe_deep_host}", "--db", "{db}"], "nests deeper"),
    ("ingest-probe-year-1", ["ingest", "{probe_year1}", "--db", "{db}"], "started_at"),
    ("ingest-probe-year-9999", ["ingest", "{probe_year9999}", "--db", "{db}"], "started_at"),
    ("ingest-probe-ansi-id", ["ingest", "{probe_ansi_id}", "--db", "{db}"], "probe_id holds the control"),
    ("ingest-probe-ansi-host", ["ingest", "{probe_ansi_host}", "--db", "{db}"], "hostname holds the control"),
    ("ingest-probe-version-0", ["ingest", "{probe_version0}", "--db", "{db}"], "schema_version 0"),
    ("ingest-probe-negative-time", ["ingest", "{probe_negative_time}", "--db", "{db}"], "time_s is -0.001"),
    ("ingest-probe-negative-busbw", ["ingest", "{probe_negative_busbw}", "--db", "{db}"], "busbw_gbps"),
    ("ingest-good-then-bad", ["ingest", str(EXAMPLE), "{status}", "--db", "{db}"], "status"),
    ("ingest-garbage-db", ["ingest", str(EXAMPLE), "--db", "{garbage_db}"], "corrupt"),
    # ---- runs, show, export, models
    ("runs-limit-zero", ["runs", "--limit", "0", "--db", "{db}"], "--limit"),
    ("runs-limit-negative", ["runs", "--limit", "-1", "--db", "{db}"], "--limit"),
    ("runs-limit-text", ["runs", "--limit", "many", "--db", "{db}"], "--limit"),
    ("runs-db-directory", ["runs", "--db", "{folder}"], "directory"),
    ("runs-db-garbage", ["runs", "--db", "{garbage_db}"], "corrupt"),
    ("runs-db-corrupt-block", ["runs", "--db", "{corrupt_db}"], "corrupt"),
    ("runs-db-truncated", ["runs", "--db", "{truncated_db}"], "corrupt or not a DuckDB database"),
    ("show-unknown", ["show", "no-such-run", "--db", "{db}"], "no-such-run"),
    ("show-db-garbage", ["show", "x", "--db", "{garbage_db}"], "corrupt"),
    ("export-format", ["export", "--format", "xml", "--out", "{tmp}/export", "--db", "{db}"], "--format"),
    ("models-classes-zero", ["models", "--num-classes", "0"], "--num-classes"),
    ("models-classes-nan", ["models", "--num-classes", "nan"], "--num-classes"),
    # ---- remote and the emulated cluster (refused before anything needs root or a host)
    ("remote-injection", ["remote", "check", "a;touch /tmp/x"], "a;touch"),
    ("remote-bad-user", ["remote", "check", "host", "--ssh-user", "root;id"], "root;id"),
    ("cluster-nodes-zero", ["cluster", "up", "--nodes", "0"], "--nodes"),
    ("cluster-nodes-huge", ["cluster", "up", "--nodes", "1000"], "--nodes"),
    ("cluster-rate-no-unit", ["cluster", "up", "--nodes", "2", "--bandwidth", "5"], "--bandwidth"),
    ("cluster-rate-nan", ["cluster", "up", "--nodes", "2", "--bandwidth", "nanmbit"], "--bandwidth"),
    ("cluster-rate-huge", ["cluster", "up", "--nodes", "2", "--bandwidth", "9tbit"], "--bandwidth"),
    ("cluster-latency-long", ["cluster", "up", "--nodes", "2", "--latency", "100s"], "--latency"),
    ("cluster-latency-text", ["cluster", "up", "--nodes", "2", "--latency", "soon"], "--latency"),
    # a negative value with its unit is the option's to refuse, not an option ("expected one argument")
    ("cluster-latency-negative", ["cluster", "up", "--nodes", "2", "--latency", "-5ms"], "duration '-5ms'"),
    ("cluster-rate-negative", ["cluster", "up", "--nodes", "2", "--bandwidth", "-1gbit"], "'-1gbit'"),
    ("cluster-loss-over", ["cluster", "up", "--nodes", "2", "--loss", "150"], "--loss"),
    ("cluster-loss-nan", ["cluster", "up", "--nodes", "2", "--loss", "nan"], "--loss"),
    # a path ssh_config and sshd_config would split (space) or expand (%h): refused before anything is made
    (
        "cluster-state-dir-space",
        ["cluster", "up", "--nodes", "1", "--state-dir", "{tmp}/a b"],
        "holds a space",
    ),
    ("cluster-state-dir-percent", ["cluster", "up", "--nodes", "1", "--state-dir", "{tmp}/a%h"], "holds '%'"),
    (
        "cluster-subnet-loopback",
        ["cluster", "up", "--nodes", "1", "--subnet", "127.1.2.0/24"],
        "invalid subnet",
    ),
    (
        "cluster-subnet-reserved",
        ["cluster", "up", "--nodes", "1", "--subnet", "240.0.0.0/24"],
        "invalid subnet",
    ),
    # below a file: "stash: Not a directory", exit 1, from the folder's making
    (
        "cluster-state-dir-below-a-file",
        ["cluster", "up", "--name", "fixcbad", "--nodes", "1", "--state-dir", "{plain}/sub"],
        "is a file, not a folder",
    ),
    ("cluster-set-node-text", ["cluster", "set", "--node", "x"], "--node"),
    ("cluster-set-node-far", ["cluster", "set", "--node", "999"], "--node"),
    ("cluster-set-rate-zero", ["cluster", "set", "--bandwidth", "0mbit"], "--bandwidth"),
    ("cluster-set-loss-negative", ["cluster", "set", "--loss", "-1"], "--loss"),
    # ---- stash probe
    ("probe-workers-zero", ["probe", "--workers", "0"], "--workers"),
    ("probe-nodes-zero", ["probe", "--nodes", "0"], "--nodes"),
    ("probe-min-size-zero", ["probe", "--min-size", "0"], "--min-size"),
    ("probe-min-size-odd", ["probe", "--min-size", "5", "--max-size", "8"], "--min-size 5: messages are whole"),
    ("probe-max-size-odd", ["probe", "--min-size", "4", "--max-size", "7"], "--max-size 7: messages are whole"),
    ("probe-max-size-huge", ["probe", "--max-size", "1TB"], "--max-size"),
    ("probe-max-size-digits", ["probe", "--max-size", "9" * 400 + "GiB"], "--max-size"),
    ("probe-budget-nan", ["probe", "--budget", "nan"], "--budget"),
    ("probe-budget-zero", ["probe", "--budget", "0"], "--budget"),
    ("probe-budget-huge", ["probe", "--budget", "1e9"], "--budget"),
    ("probe-threads-zero", ["probe", "--threads-per-worker", "0"], "--threads-per-worker"),
    ("probe-p2p-text", ["probe", "--p2p-size", "abc"], "--p2p-size"),
    ("probe-gradient-negative", ["probe", "--gradient-size", "-1"], "--gradient-size"),
    # under one byte: 0 B messages measured, multiplied forever (--min-size) or dropped (--gradient-size)
    (
        "probe-min-size-half-byte",
        ["probe", "--min-size", "0.5B"],
        "--min-size: invalid size '0.5B': less than one byte",
    ),
    (
        "probe-max-size-fraction",
        ["probe", "--max-size", "0.3"],
        "--max-size: invalid size '0.3': less than one byte",
    ),
    (
        "probe-p2p-under-byte",
        ["probe", "--p2p-size", "0.9B"],
        "--p2p-size: invalid size '0.9B': less than one byte",
    ),
    ("probe-gradient-half-byte", ["probe", "--gradient-size", "0.5B"], "less than one byte"),
    # no larger than the latency message (8 B, or 9-11 B sent as two float32 values): a second latency row
    ("probe-p2p-one-byte", ["probe", "--p2p-size", "1B", *PROBE_HERE], "larger than the 8 B latency message"),
    ("probe-p2p-eleven-bytes", ["probe", "--p2p-size", "11", *PROBE_HERE], "give at least 12 B"),
    (
        "probe-sizes-swapped",
        ["probe", "--min-size", "1MiB", "--max-size", "4KiB", "--no-store"],
        "--min-size",
    ),
    ("probe-port", ["probe", "--master-port", "99999"], "--master-port"),
    # the options of other machines without them (the probe measured this machine), as `stash profile` says
    *[
        (f"probe{flag}-alone", ["probe", flag, value, *PROBE_HERE], says)
        for flag, value, says in (
            ("--cluster-name", "bench", "--cluster-name applies to --cluster emulated only"),
            ("--cluster-state", "{tmp}", "--cluster-state applies to --cluster emulated only"),
            ("--ssh-user", "ubuntu", SSH_ALONE),
            ("--python", "python3", SSH_ALONE),
            ("--workdir", "/srv", SSH_ALONE),
            ("--master-addr", "10.0.0.1", "--master-addr applies to --hosts only"),
            ("--master-port", "29555", "--master-port and --comm-timeout need --hosts"),
        )
    ],
    ("probe-hosts-twice", ["probe", "--nodes", "2", "--hosts", "a,a", *PROBE_HERE], "names a twice"),
    ("probe-out-directory", ["probe", "--out", "{folder}"], "--out"),
    ("probe-db-garbage", ["probe", "--db", "{garbage_db}"], "corrupt"),
    # ---- stash fit
    ("fit-alpha-negative", ["fit", "--alpha-s", "-1", "--db", "{db}"], "--alpha-s"),
    ("fit-alpha-nan", ["fit", "--alpha-s", "nan", "--db", "{db}"], "--alpha-s"),
    ("fit-beta-zero", ["fit", "--beta-s-per-byte", "0", "--db", "{db}"], "--beta-s-per-byte"),
    ("fit-link-inf", ["fit", "--link-gbps", "inf", "--db", "{db}"], "--link-gbps"),
    ("fit-link-zero", ["fit", "--link-gbps", "0", "--db", "{db}"], "--link-gbps"),
    ("fit-workers-zero", ["fit", "--workers", "0", "--db", "{db}"], "--workers"),
    ("fit-nodes-zero", ["fit", "--nodes", "0", "--db", "{db}"], "--nodes"),
    ("fit-classes-zero", ["fit", "--num-classes", "0", "--db", "{db}"], "--num-classes"),
    ("fit-shape-zero", ["fit", "--input-shape", "0", "--db", "{db}"], "--input-shape"),
    ("fit-bandwidth-huge", ["fit", "--bandwidth", "500tbit", "--db", "{db}"], "out of range (1e-06 to"),
    ("fit-bandwidth-nan", ["fit", "--bandwidth", "nan", "--db", "{db}"], "--bandwidth"),
    ("fit-device", ["fit", "--device", "tpu", "--db", "{db}"], "--device"),
    ("fit-stall", ["fit", "--stall", "gpu", "--db", "{db}"], "--stall"),
    ("fit-predict-no-workers", ["fit", "--predict", "resnet50", "--db", "{db}"], "--workers"),
    # a prediction's options without --predict: the fit printed as if they were not given
    ("fit-workers-without-predict", ["fit", "--workers", "2", "--instance", "x", "--db", "{db}"],
     "--workers, --instance: only with --predict MODEL"),
    # an empty model read as no --predict: "--workers: only with --predict MODEL"
    ("fit-predict-empty", ["fit", "--predict", "", "--workers", "2", "--db", "{db}"],
     "argument --predict: must not be empty"),
    ("fit-bandwidth-zero", ["fit", "--predict", "resnet50", "--workers", "2", "--nodes", "2", "--bandwidth",
                            "0", "--db", "{db}"], "out of range (1e-06 to 100000 Gbit/s)"),  # fmt: skip
    ("fit-batch-without-by-batch", ["fit", "--predict", "resnet50", "--workers", "2", "--batch-size", "64",
                                    "--db", "{db}"], "give --by-batch-size too"),  # fmt: skip
    ("fit-alpha-without-beta", ["fit", "--alpha-s", "0.001", "--db", "{db}"], "--alpha-s"),
    # ---- stash instances
    ("instances-vcpus-zero", ["instances", "add", "box", "--vcpus", "0", "--db", "{db}"], "--vcpus"),
    (
        "instances-vcpus-huge",
        ["instances", "add", "box", "--vcpus", "99999999999", "--db", "{db}"],
        "--vcpus",
    ),
    ("instances-vcpus-nan", ["instances", "add", "box", "--vcpus", "nan", "--db", "{db}"], "--vcpus"),
    (
        "instances-gpus-float",
        ["instances", "add", "box", "--accelerator-count", "1.5", "--db", "{db}"],
        "--accelerator-count",
    ),  # fmt: skip
    (
        "instances-memory-negative",
        ["instances", "add", "box", "--memory-gib", "-1", "--db", "{db}"],
        "--memory-gib",
    ),  # fmt: skip
    (
        "instances-memory-inf",
        ["instances", "add", "box", "--memory-gib", "inf", "--db", "{db}"],
        "--memory-gib",
    ),
    (
        "instances-network-zero",
        ["instances", "add", "box", "--network-gbps", "0", "--db", "{db}"],
        "--network-gbps",
    ),  # fmt: skip
    (
        "instances-price-negative",
        ["instances", "add", "box", "--on-demand-usd-per-h", "-1", "--db", "{db}"],
        "--on-demand-usd-per-h",
    ),  # fmt: skip
    (
        "instances-price-nan",
        ["instances", "add", "box", "--spot-usd-per-h", "nan", "--db", "{db}"],
        "--spot-usd-per-h",
    ),  # fmt: skip
    (
        "instances-date",
        ["instances", "add", "box", "--price-date", "2025-13-01", "--db", "{db}"],
        "--price-date",
    ),
    (
        "instances-date-far",
        ["instances", "set", "g4dn.xlarge", "--price-date", "0001-01-01", "--db", "{db}"],
        "--price-date",
    ),
    ("instances-name-ansi", ["instances", "add", "bad\x1b[2Jname", "--db", "{db}"], "U+001B"),
    ("instances-name-bidi", ["instances", "add", "box\u202e", "--db", "{db}"], "U+202E"),
    ("instances-name-empty", ["instances", "add", " ", "--db", "{db}"], "empty"),
    ("instances-exists", ["instances", "add", "g4dn.xlarge", "--vcpus", "4", "--db", "{db}"], "already"),
    ("instances-set-unknown", ["instances", "set", "nosuch", "--vcpus", "4", "--db", "{db}"], "nosuch"),
    ("instances-set-nothing", ["instances", "set", "g4dn.xlarge", "--db", "{db}"], "nothing to change"),
    (
        "instances-set-gpus-huge",
        ["instances", "set", "g4dn.xlarge", "--accelerator-count", "5000", "--db", "{db}"],
        "--accelerator-count",
    ),  # fmt: skip
    ("instances-show-unknown", ["instances", "show", "nosuch", "--db", "{db}"], "nosuch"),
    ("instances-db-garbage", ["instances", "add", "box", "--vcpus", "4", "--db", "{garbage_db}"], "corrupt"),
    # ---- stash recommend
    ("recommend-epochs-nan", [*RECOMMEND, "--epochs", "nan"], "--epochs"),
    ("recommend-epochs-zero", [*RECOMMEND, "--epochs", "0"], "--epochs"),
    ("recommend-epochs-negative", [*RECOMMEND, "--epochs", "-1"], "--epochs"),
    ("recommend-budget-inf", [*RECOMMEND, "--budget-hours", "inf"], "--budget-hours"),
    ("recommend-usd-negative", [*RECOMMEND, "--max-usd", "-5"], "--max-usd"),
    ("recommend-batch-zero", [*RECOMMEND, "--batch-size", "0"], "--batch-size"),
    ("recommend-images-zero", [*RECOMMEND, "--dataset-images", "0"], "--dataset-images"),
    ("recommend-instances-zero", [*RECOMMEND, "--max-instances", "0"], "--max-instances"),
    ("recommend-instances-huge", [*RECOMMEND, "--max-instances", "1000"], "--max-instances"),
    ("recommend-model-unknown", [*RECOMMEND, "--model", "nosuch"], "not in the zoo"),
    (
        "recommend-no-budget",
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
            "--db",
            "{db}",
        ],
        "budget",
    ),  # fmt: skip
    ("recommend-unknown-instance", [*RECOMMEND, "--instances", "nosuch"], "nosuch"),
    # ---- stash whatif
    ("whatif-share-nan", ["whatif", "x", "--target-share", "nan", "--db", "{db}"], "--target-share"),
    ("whatif-share-zero", ["whatif", "x", "--target-share", "0", "--db", "{db}"], "--target-share"),
    ("whatif-share-over", ["whatif", "x", "--target-share", "1.5", "--db", "{db}"], "--target-share"),
    ("whatif-unknown-run", ["whatif", "no-such-run", "--db", "{db}"], "no-such-run"),
    # ---- stash campaign
    ("campaign-model-path", [*CAMPAIGN, "--models", "/etc/passwd"], "/etc/passwd"),
    # as a profile refuses it: the dry run approved it, then every profile of the campaign stopped on it
    ("campaign-instance-comma", [*CAMPAIGN, "--models", "resnet10", "--instance", "a,b"], "holds a comma"),
    # it said to give --synthetic-images, which campaign does not take
    ("campaign-stalls-disk", [*CAMPAIGN, "--models", "resnet10", "--stalls", "disk"],
     "disk: a campaign measures compute, interconnect and network"),
    ("campaign-model-relative", [*CAMPAIGN, "--models", "../../x"], "../../x"),
    ("campaign-model-file-missing", [*CAMPAIGN, "--models", "nosuch.py:make"], "nosuch.py"),
    ("campaign-model-unknown", [*CAMPAIGN, "--models", "resnet99"], "resnet99"),
    ("campaign-depth-zero", [*CAMPAIGN, "--family", "resnet", "--depths", "0"], "--depths"),
    ("campaign-depth-unknown", [*CAMPAIGN, "--family", "resnet", "--depths", "99"], "resnet99"),
    ("campaign-batch-zero", [*CAMPAIGN, "--family", "resnet", "--batch-sizes", "0"], "--batch-sizes"),
    ("campaign-batch-nan", [*CAMPAIGN, "--family", "resnet", "--batch-sizes", "nan"], "--batch-sizes"),
    ("campaign-workers-negative", [*CAMPAIGN, "--family", "resnet", "--workers", "-1"], "--workers"),
    ("campaign-nodes-zero", [*CAMPAIGN, "--family", "resnet", "--nodes", "0"], "--nodes"),
    (
        "campaign-rate-no-unit",
        [*CAMPAIGN, "--family", "resnet", "--nodes", "2", "--bandwidths", "5"],
        "--bandwidths",
    ),  # fmt: skip
    ("campaign-rate-one-node", [*CAMPAIGN, "--family", "resnet", "--bandwidths", "1gbit"], "--bandwidths"),
    ("campaign-iterations", [*CAMPAIGN, "--family", "resnet", "--iterations", "1"], "--iterations"),
    ("campaign-shape", [*CAMPAIGN, "--family", "resnet", "--input-shape", "0"], "--input-shape"),
    ("campaign-classes", [*CAMPAIGN, "--family", "resnet", "--num-classes", "0"], "--num-classes"),
    ("campaign-stalls", [*CAMPAIGN, "--family", "resnet", "--stalls", "gpu"], "--stalls"),
    ("campaign-depths-without-family", [*CAMPAIGN, "--models", "resnet18", "--depths", "10"], "--depths"),
    (
        "campaign-results-dir-file",
        [*CAMPAIGN, "--models", "resnet18", "--results-dir", "{plain}"],
        "--results-dir",
    ),  # fmt: skip
    # the first profile found it, 4 s in, as "the disk holding /proc has 0.0 MiB free"
    ("campaign-results-dir-proc", [*CAMPAIGN, "--models", "resnet18", "--results-dir", "/proc/stash"],
     "/proc is a virtual file system (no disk holds files there)"),
    # ---- stash spot
    ("spot-loss-nan", [*SPOT, "--target-loss", "nan", "--budget-s", "100"], "--target-loss"),
    ("spot-loss-zero", [*SPOT, "--target-loss", "0", "--budget-s", "100"], "--target-loss"),
    ("spot-budget-inf", [*SPOT, "--target-loss", "1", "--budget-s", "inf"], "--budget-s"),
    ("spot-budget-negative", [*SPOT, "--target-loss", "1", "--budget-s", "-1"], "--budget-s"),
    ("spot-ps-zero", [*SPOT, "--target-loss", "1", "--budget-s", "100", "--ps-gbps", "0"], "--ps-gbps"),
    (
        "spot-pcie-nan",
        [*SPOT, "--target-loss", "1", "--budget-s", "100", "--pcie-gbps", "nan"],
        "--pcie-gbps",
    ),
    (
        "spot-revocation-negative",
        [*SPOT, "--target-loss", "1", "--budget-s", "100", "--revocation-s", "-1"],
        "--revocation-s",
    ),  # fmt: skip
    ("spot-top-zero", [*SPOT, "--target-loss", "1", "--budget-s", "100", "--top", "0"], "--top"),
    (
        "spot-quota-negative",
        [*SPOT, "--target-loss", "1", "--budget-s", "100", "--instances", "a:-1"],
        "quota",
    ),
    ("spot-quota-zero", [*SPOT, "--target-loss", "1", "--budget-s", "100", "--instances", "a:0"], "quota"),
    ("spot-quota-text", [*SPOT, "--target-loss", "1", "--budget-s", "100", "--instances", "a:abc"], "quota"),
    (
        "spot-quota-huge",
        [*SPOT, "--target-loss", "1", "--budget-s", "100", "--instances", "a:99999999"],
        "quota",
    ),
    (
        "spot-instances-empty",
        [*SPOT, "--target-loss", "1", "--budget-s", "100", "--instances", ","],
        "--instances",
    ),  # fmt: skip
    (
        "spot-workload-missing",
        [
            "spot",
            "--workload",
            "{tmp}/nothing.json",
            "--instances",
            "g4dn.xlarge",
            "--target-loss",
            "1",
            "--budget-s",
            "100",
            "--db",
            "{db}",
        ],
        "nothing.json",
    ),  # fmt: skip
    (
        "spot-workload-deep",
        [
            "spot",
            "--workload",
            "{workload_deep}",
            "--instances",
            "g4dn.xlarge",
            "--target-loss",
            "1",
            "--budget-s",
            "100",
            "--db",
            "{db}",
        ],
        "workload",
    ),  # fmt: skip
    (
        "spot-workload-digits",
        [
            "spot",
            "--workload",
            "{workload_digits}",
            "--instances",
            "g4dn.xlarge",
            "--target-loss",
            "1",
            "--budget-s",
            "100",
            "--db",
            "{db}",
        ],
        "workload",
    ),  # fmt: skip
    (
        "spot-workload-text",
        [
            "spot",
            "--workload",
            "{workload_text}",
            "--instances",
            "g4dn.xlarge",
            "--target-loss",
            "1",
            "--budget-s",
            "100",
            "--db",
            "{db}",
        ],
        "workload",
    ),  # fmt: skip
    # ---- stash schedule
    ("schedule-jobs-zero", ["schedule", "--synthetic-jobs", "0", "--db", "{db}"], "--synthetic-jobs"),
    ("schedule-jobs-huge", ["schedule", "--synthetic-jobs", "10000000", "--db", "{db}"], "--synthetic-jobs"),
    ("schedule-seed-negative", [*SCHEDULE, "--seed", "-1"], "--seed"),
    ("schedule-las-limits-down", [*SCHEDULE, "--las-limits-gpu-h", "10,1"], "--las-limits-gpu-h"),
    ("schedule-las-limits-nan", [*SCHEDULE, "--las-limits-gpu-h", "nan"], "--las-limits-gpu-h"),
    ("schedule-starve-negative", [*SCHEDULE, "--starve-factor", "-1"], "--starve-factor"),
    ("schedule-gap-zero", [*SCHEDULE, "--mean-gap-s", "0"], "--mean-gap-s"),
    ("schedule-gap-nan", [*SCHEDULE, "--mean-gap-s", "nan"], "--mean-gap-s"),
    ("schedule-cluster-zero", [*SCHEDULE, "--cluster", "0x4x8"], "--cluster"),
    ("schedule-cluster-short", [*SCHEDULE, "--cluster", "2x4"], "--cluster"),
    ("schedule-cluster-huge", [*SCHEDULE, "--cluster", "1000x1000x1000"], "--cluster"),
    ("schedule-delay-negative", [*SCHEDULE, "--delay-s", "-1"], "--delay-s"),
    ("schedule-delay-inf", [*SCHEDULE, "--delay-s", "inf"], "--delay-s"),
    ("schedule-scale-nan", [*SCHEDULE, "--scale", "nan"], "--scale"),
    ("schedule-uplink-nan", [*SCHEDULE, "--uplink-factor", "nan"], "--uplink-factor"),
    ("schedule-uplink-below-one", [*SCHEDULE, "--uplink-factor", "0.5"], "--uplink-factor"),
    ("schedule-policy", [*SCHEDULE, "--policies", "fastest"], "--policies"),
    ("schedule-trace-missing", ["schedule", "--trace", "{tmp}/nothing.csv", "--db", "{db}"], "nothing.csv"),
    ("schedule-trace-format", [*SCHEDULE, "--trace-format", "slurm"], "--trace-format"),
    ("schedule-tuning", [*SCHEDULE, "--tuning", "guess"], "--tuning"),
    ("schedule-tune-fraction-zero", [*SCHEDULE, "--tune-fraction", "0"], "--tune-fraction"),
    ("schedule-checkpoint-nan", [*SCHEDULE, "--checkpoint-s", "nan"], "--checkpoint-s"),
    ("schedule-max-preemptions-negative", [*SCHEDULE, "--max-preemptions", "-1"], "--max-preemptions"),
    ("schedule-timer-with-online", [*SCHEDULE, "--tuning", "online", "--scale", "2"], "--tuning given"),
    *[
        (
            f"schedule-trace-with{flag}",
            ["schedule", "--trace", "{plain}", flag, value, "--db", "{db}"],
            f"{flag} shapes a synthetic trace",
        )
        for flag, value in (("--generator", "philly"), ("--mean-gap-s", "5"), ("--seed", "5"))
    ],
    (
        "schedule-philly-not-json",
        ["schedule", "--trace", "{plain}", "--trace-format", "philly", "--db", "{db}"],
        "philly trace is not valid JSON",
    ),
    # ---- no command, unknown command
    ("no-command", [], "command"),
    ("unknown-command", ["frobnicate"], "frobnicate"),
    # ---- stash profile --script: the user's own training script
    ("script-missing", ["profile", "--script", "{tmp}/no_train.py", "--db", "{db}"], "no such file"),
    ("script-does-not-parse", ["profile", "--script", "{plain}", "--db", "{db}"], "does not parse"),
    # said as the link typed, not only as its missing target
    # its arguments typed into --script, and a launcher in place of the script: said as such
    ("script-arguments-in-its-path", ["profile", "--script", "{tmp}/ok_train.py 5 --lr 3", "--db", "{db}"],
     "no such file (a script's own arguments go after --: --script "),
    ("script-is-a-shell-launcher", ["profile", "--script", "{tmp}/launch.sh", "--db", "{db}"],
     "is a shell script (#!/bin/bash), not a Python script"),
    # said "does not parse (line 1): invalid syntax"
    ("script-is-a-shell-file-without-its-line", ["profile", "--script", "{tmp}/go.sh", "--db", "{db}"],
     "is a shell script (a .sh file), not a Python script: give the Python training script it starts"),
    ("script-is-data", ["profile", "--script", "{tmp}/losses.csv", "--db", "{db}"],
     "is a .csv file, not a Python script"),
    ("script-dangling-link", ["profile", "--script", "{tmp}/link_train.py", "--db", "{db}"],
     "link_train.py: a link to"),
    ("script-is-a-folder", ["profile", "--script", "{folder}", "--db", "{db}"], "is a directory"),
    ("script-notebook", ["profile", "--script", "{tmp}/train.ipynb", "--db", "{db}"],
     "is a Jupyter notebook"),
    ("script-notebook-named-py", ["profile", "--script", "{tmp}/notebook_train.py", "--db", "{db}"],
     "is a Jupyter notebook"),
    (
        "script-instance-control-character",
        ["profile", "--script", "{tmp}/ok_train.py", "--instance", "a\nb", "--db", "{db}"],
        "U+000A",
    ),
    (
        "script-name-too-long",
        ["profile", "--script", "{tmp}/" + "a" * 300 + ".py", "--db", "{db}"],
        "File name too long",
    ),
    ("script-and-model", ["profile", "--script", "{plain}", *PROFILE[1:]], "--script excludes --model"),
    ("script-args-without-script", [*PROFILE, "--", "--epochs", "1"], "need --script"),
    ("no-model-no-script", ["profile", "--batch-size", "4", "--db", "{db}"], "--model is required"),
    ("data-dir-without-script", [*PROFILE, "--data-dir", "{folder}"], "--data-dir applies to --script"),
    # said before the missing --batch-size, which a script would not need either
    ("data-dir-with-a-model-alone",
     ["profile", "--model", "resnet18", "--data-dir", "{folder}", "--db", "{db}"],
     "--data-dir applies to --script"),
    (
        "start-timeout-without-script",
        [*PROFILE, "--script-start-timeout", "30"],
        "--script-start-timeout applies to --script only",
    ),  # fmt: skip
    ("image-px-without-synthetic", [*PROFILE, "--image-px", "32"], "--image-px applies to --synthetic"),
    # what the script makes itself: taken and never used before (--loader-workers 5 met the core check)
    *[
        (
            f"script-with{flag}",
            ["profile", "--script", "{tmp}/ok_train.py", flag, value, "--db", "{db}"],
            f"{flag} does not go with --script",
        )
        for flag, value in (
            ("--input-shape", "3,32,32"),
            ("--num-classes", "10"),
            ("--image-px", "64"),
            ("--loader-workers", "5"),
        )
    ],
    # accepted, and the script's workers were never pinned anyway
    ("script-with-no-pin", ["profile", "--script", "{tmp}/ok_train.py", "--no-pin", "--db", "{db}"],
     "--no-pin does not go with --script: its workers are never pinned to cores"),
    # given at their default values, they were taken without a word
    *[
        (
            f"script-with{flag}-at-its-default",
            ["profile", "--script", "{tmp}/ok_train.py", flag, value, "--db", "{db}"],
            f"{flag} does not go with --script",
        )
        for flag, value in (("--image-px", "256"), ("--loader-workers", "2"))
    ],
    # the message named --dataset for --synthetic-images
    (
        "script-with-synthetic-images",
        ["profile", "--script", "{tmp}/ok_train.py", "--synthetic-images", "10", "--db", "{db}"],
        "--script reads its own data: give --data-dir, not --synthetic-images",
    ),  # fmt: skip
    (
        "script-data-dir-missing",
        ["profile", "--script", "{tmp}/ok_train.py", "--data-dir", "{tmp}/none", "--db", "{db}"],
        "--data-dir",
    ),  # fmt: skip
    (
        "script-start-timeout-zero",
        ["profile", "--script", "{tmp}/ok_train.py", "--script-start-timeout", "0", "--db", "{db}"],
        "--script-start-timeout",
    ),  # fmt: skip
]

# The cases that also run as real processes (what a user's shell sees).
SUBPROCESS_CASES = ("target-ci-nan", "ingest-deep-array", "runs-db-corrupt-block", "instances-vcpus-nan",
                    "schedule-uplink-nan", "cluster-nodes-zero", "recommend-model-unknown")  # fmt: skip


def expand(argv: list[str], world: dict[str, str]) -> list[str]:
    return [arg.format(**world) if "{" in arg else arg for arg in argv]


def assert_unchanged(db: str, before: tuple[str, dict]) -> None:
    digest, tables = before
    assert not Path(db + ".wal").exists()
    if snapshot(db) != digest:  # the bytes may move without a change; the rows may not
        assert table_checksums(db) == tables


PREDICT = ["predict", "--model", "resnet18", "--batch-size", "8", "--db", "{db}"]
CASES += [
    ("predict-unknown-model", ["predict", "--model", "resnet5", "--batch-size", "8", "--db", "{db}"],
     "unknown model"),
    ("predict-unknown-instance", [*PREDICT, "--instances", "p9.huge"], "unknown instance"),
    ("predict-zero-batch", ["predict", "--model", "resnet18", "--batch-size", "0", "--db", "{db}"],
     "batch-size"),
    ("predict-bad-precision", [*PREDICT, "--precision", "fp8"], "precision"),
    ("predict-no-batch", ["predict", "--model", "resnet18", "--db", "{db}"], "--batch-size is required"),
    ("predict-bad-input-shape", [*PREDICT, "--input-shape", "3,-224"], "--input-shape"),
    ("predict-shape-of-tokens-for-images", [*PREDICT, "--input-shape", "128"], "C,H,W"),
    ("predict-script-and-model", [*PREDICT, "--script-run", "r1"], "not allowed with"),
    ("predict-script-with-batch", ["predict", "--script-run", "r1", "--batch-size", "8", "--db", "{db}"],
     "from the run"),
    ("predict-script-run-unknown", ["predict", "--script-run", "no-such-run", "--db", "{db}"], "no run"),
    ("predict-instances-empty", [*PREDICT, "--instances", ""], "expected a comma list"),
    ("predict-instances-commas", [*PREDICT, "--instances", ",,"], "expected a comma list"),
    ("predict-instances-control", [*PREDICT, "--instances", "a\x01b"], "U+0001"),
    ("predict-shape-with-letters", [*PREDICT, "--input-shape", "3,32,x,32"], "--input-shape"),
    ("predict-shape-empty-part", [*PREDICT, "--input-shape", "3,,32"], "--input-shape"),
    ("not-utf8-argument", ["instances", "show", "\udcff", "--db", "{db}"], "not UTF-8"),
    ("predict-script-run-of-a-model", ["predict", "--script-run", json.loads(EXAMPLE.read_text())["run_id"],
                                       "--db", "{db}"], "not a script"),
]  # fmt: skip

# stash instances import --skypilot: malformed SkyPilot catalogs (vms.csv format) are refused whole.
_SKY_HEADER = (
    "InstanceType,AcceleratorName,AcceleratorCount,vCPUs,MemoryGiB,GpuInfo,Price,SpotPrice,Region,Zone\n"
)
_SKY_ROW = "g4dn.xlarge,T4,1.0,4.0,16.0,,0.526,0.2,us-east-1,use1-az1\n"
BAD_FILES.update(
    {
        "sky_ok": _SKY_HEADER + _SKY_ROW,
        "sky_bad_number": _SKY_HEADER + _SKY_ROW + _SKY_ROW.replace(",4.0,", ",four,"),
        "sky_no_region": _SKY_HEADER.replace("Region", "Place") + _SKY_ROW,
        "sky_short_row": _SKY_HEADER + "g4dn.xlarge,T4,1.0\n",
        "sky_bad_gpuinfo": _SKY_HEADER + _SKY_ROW.replace(",16.0,,", ",16.0,{'Gpus': [,"),
        "sky_negative_price": _SKY_HEADER + _SKY_ROW.replace("0.526", "-1"),
    }
)
SKY = ["instances", "import", "--db", "{db}", "--skypilot"]
CASES += [
    ("sky-bad-number", [*SKY, "{sky_bad_number}"], "row 3, column vCPUs"),
    ("sky-missing-column", [*SKY, "{sky_no_region}"], "no column Region"),
    ("sky-short-row", [*SKY, "{sky_short_row}"], "row 2"),
    ("sky-bad-gpuinfo", [*SKY, "{sky_bad_gpuinfo}"], "row 2, column GpuInfo"),
    ("sky-negative-price", [*SKY, "{sky_negative_price}"], "row 2, column Price"),
    ("sky-missing-path", [*SKY, "{tmp}/no-such-catalog"], "no such file"),
    ("sky-folder-without-catalog", [*SKY, "{folder}"], "no vms.csv"),
    ("sky-region-not-in-file", [*SKY, "{sky_ok}", "--region", "mars-1"], "no instance type in region"),
    ("sky-bad-price-date", [*SKY, "{sky_ok}", "--price-date", "yesterday"], "--price-date"),
    ("sky-no-path", ["instances", "import", "--db", "{db}"], "--skypilot"),
]  # fmt: skip
SPOT_PROFILE = ["spot-profile", "--model", "resnet10", "--workload", "{tmp}/profiled.json", "--db", "{db}"]
SPOT_REPLAN = ["spot-replan", *SPOT[1:], "--target-loss", "1", "--running", "g4dn.xlarge:1"]
SPOT_SIM = ["spot-simulate", *SPOT[1:], "--target-loss", "1", "--deadline-s", "100"]
CASES += [
    ("spot-profile-one-count", [*SPOT_PROFILE, "--workers", "1,2"], "--workers"),
    ("spot-profile-workers-zero", [*SPOT_PROFILE, "--workers", "0,2,4"], "--workers"),
    ("spot-profile-duration-zero", [*SPOT_PROFILE, "--duration-s", "0"], "--duration-s"),
    ("spot-profile-batch-nan", [*SPOT_PROFILE, "--batch", "nan"], "--batch"),
    ("spot-profile-bad-workload", [*SPOT_PROFILE[:4], "{binary}", *SPOT_PROFILE[5:]], "not UTF-8"),
    ("spot-profile-unknown-instance", [*SPOT_PROFILE, "--instances", "nope.large"], "not in the catalog"),
    ("spot-replan-loss-nan", [*SPOT_REPLAN, "--current-loss", "nan", "--budget-s", "10"], "--current-loss"),
    ("spot-replan-budget-zero", [*SPOT_REPLAN, "--current-loss", "2", "--budget-s", "0"], "--budget-s"),
    ("spot-replan-running-negative", [*SPOT_REPLAN[:-1], "g4dn.xlarge:-1", "--current-loss", "2",
                                      "--budget-s", "10"], "the count running"),
    ("spot-simulate-no-revocations", SPOT_SIM, "--rate-per-h"),
    ("spot-simulate-rate-negative", [*SPOT_SIM, "--rate-per-h", "-1"], "--rate-per-h"),
    ("spot-simulate-runs-zero", [*SPOT_SIM, "--rate-per-h", "1", "--runs", "0"], "--runs"),
    ("spot-simulate-trace-missing", [*SPOT_SIM, "--trace", "{tmp}/no-trace.csv"], "trace does not exist"),
    ("spot-simulate-rate-and-trace", [*SPOT_SIM, "--rate-per-h", "1", "--trace", "{plain}"], "not allowed"),
]  # fmt: skip


@pytest.fixture(scope="module")
def seeded(world):
    return snapshot(world["db"]), table_checksums(world["db"])


def test_there_are_enough_cases():
    assert len(CASES) >= 150 and len({case_id for case_id, _, _ in CASES}) == len(CASES)


@pytest.mark.parametrize(("case_id", "argv", "says"), CASES, ids=[case[0] for case in CASES])
def test_a_bad_input_is_refused_cleanly(case_id, argv, says, world, seeded, capsys, monkeypatch, tmp_path):
    main = importlib.import_module("stash_core.cli.main").main
    monkeypatch.chdir(tmp_path)  # a default results/ or database would land here, not in the checkout
    monkeypatch.setenv("STASH_DB", world["db"])
    monkeypatch.setenv("STASH_CLUSTER_STATE", str(tmp_path / "cluster-state"))
    status = main(expand(argv, world))
    captured = capsys.readouterr()
    lines = [line for line in captured.err.splitlines() if line.strip()]
    assert status == 2, captured.err
    assert len(lines) == 1 and "Traceback" not in captured.err, captured.err
    assert says in lines[0]
    assert_unchanged(world["db"], seeded)
    assert not (tmp_path / "results").exists() and not (tmp_path / "results.duckdb").exists()


@pytest.mark.parametrize("case_id", SUBPROCESS_CASES)
def test_a_bad_input_is_refused_cleanly_by_the_command(case_id, world, seeded, tmp_path):
    argv, says = next((argv, says) for key, argv, says in CASES if key == case_id)
    result = stash(*expand(argv, world), cwd=tmp_path, env_extra={"STASH_DB": world["db"]})
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert result.returncode == 2, result.stderr
    assert len(lines) == 1 and "Traceback" not in result.stderr and says in lines[0]
    assert_unchanged(world["db"], seeded)


def test_the_seeded_database_still_opens_and_holds_the_examples(world):
    with duckdb.connect(world["db"], read_only=True) as con:
        assert con.execute("SELECT count(*) FROM runs").fetchone()[0] == len(EXAMPLES)
    shutil.copy(world["db"], Path(world["tmp"]) / "copy.duckdb")  # and is a plain file


def test_a_cuda_campaign_on_a_machine_without_a_gpu_is_refused_before_its_plan_is_approved(tmp_path, capsys):
    """The dry run approved every profile of a --device cuda campaign that each would then refuse."""
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has a CUDA device")
    main = importlib.import_module("stash_core.cli.main").main
    status = main([*expand(CAMPAIGN, {"db": str(tmp_path / "c.duckdb")}), "--models", "resnet10", "--device",
                   "cuda"])  # fmt: skip
    lines = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert status == 2 and lines == ["stash: --device cuda: no CUDA device is visible on this machine"]
