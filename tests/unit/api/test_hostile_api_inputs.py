"""A hostile caller of the Python API: wrong types, nan and inf, empty lists, control characters, SQL-like
run ids, paths that are folders, FIFOs or the database. Each gets one clear UsageError (one line), never
another exception, and nothing is written. Cases beyond tests/unit/api/test_options.py and the others here.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
from pathlib import Path

import pytest
from result_docs import result_doc

import stash_core as stash
from stash_core import store
from stash_core.errors import UsageError

WORKLOAD = {"param_mb": 100, "solo_bandwidth_mbps": 900, "a1": 0.1, "b1": 0.2, "g": [1, 2, 3, 4, 5],
            "batch_per_gpu": 32, "compute_s": {"g4dn.xlarge": 0.2}}  # fmt: skip


@pytest.fixture(scope="module")
def world(tmp_path_factory) -> dict[str, str]:
    root = tmp_path_factory.mktemp("hostile-api")
    db = root / "r.duckdb"
    for run_id in ("20261124T100000Z-aaaa0001", "20261124T110000Z-aaaa0002"):
        store.ingest_result(db, result_doc("resnet18", run_id=run_id))
    (root / "w.json").write_text(json.dumps(WORKLOAD))
    (root / "empty_obj.json").write_text("{}")
    (root / "t.csv").write_text("a,b\n1,2\n")
    os.mkfifo(root / "fifo")
    return {"db": str(db), "tmp": str(root), "w": str(root / "w.json"), "fifo": str(root / "fifo"),
            "empty_obj": str(root / "empty_obj.json"), "t": str(root / "t.csv")}  # fmt: skip


def _predict(**kw):
    return lambda w: stash.predict(**{"model": "resnet18", "batch_size": 8, "db": w["db"], **kw})


def _recommend(**kw):
    job = {"model": "resnet18", "batch_size": 8, "epochs": 1, "dataset_images": 100, "budget_hours": 1}
    return lambda w: stash.recommend(**{**job, "db": w["db"], **kw})


def _spot(**kw):
    plan = {"instances": "g4dn.xlarge:2", "target_loss": 1, "budget_s": 100}
    return lambda w: stash.plan_spot(**{"workload": w["w"], **plan, "db": w["db"], **kw})


def _schedule(**kw):
    return lambda w: stash.simulate_schedule(
        **{"synthetic_jobs": 5, "db": w["db"], "out": f"{w['tmp']}/sim", **kw}
    )


# (id, call, what the UsageError says)
CASES = [
    ("predict-batch-true", _predict(batch_size=True), "batch_size"),
    ("predict-batch-fraction", _predict(batch_size=8.5), "batch_size"),
    ("predict-batch-nan", _predict(batch_size=math.nan), "batch_size"),
    ("predict-batch-10e30", _predict(batch_size=10**30), "batch_size"),
    ("predict-no-model", _predict(model=None), "model"),
    ("predict-model-number", _predict(model=5), "model: expected a text"),
    ("predict-model-list", _predict(model=["resnet18", "vgg16"]), "model: expected a text"),
    ("predict-max-instances-none", _predict(max_instances=None), "max_instances: a value is required"),
    ("predict-db-nul", _predict(db="/tmp/a\x00b.duckdb"), "control characters"),
    ("predict-model-empty", _predict(model=""), "model"),
    ("predict-shape-negative", _predict(input_shape=(3, -1, 4)), "input_shape"),
    ("predict-shape-text", _predict(input_shape="abc"), "input_shape"),
    ("predict-shape-fraction", _predict(input_shape=(3.5, 32, 32)), "input_shape"),
    ("predict-shape-empty", _predict(input_shape=()), "input_shape"),
    ("predict-instances-number", _predict(instances=5), "instances"),
    ("predict-instances-empty", _predict(instances=[]), "instances"),
    ("predict-instances-escape", _predict(instances=["a\x1b"]), "U+001B"),
    ("predict-precision-fp64", _predict(precision="fp64"), "precision"),
    ("predict-workers-zero", _predict(workers_per_instance=0), "workers_per_instance"),
    ("predict-max-instances-negative", _predict(max_instances=-2), "max_instances"),
    ("predict-gpu-number", _predict(gpu=7), "gpu"),
    ("predict-db-folder", _predict(db="/tmp"), "directory"),
    ("predict-db-number", _predict(db=5), "db"),
    ("predict-db-tilde-of-no-user", _predict(db="~nosuchuser-stash/x.duckdb"), "nosuchuser"),
    ("predict-db-below-a-file", lambda w: _predict(db=f"{w['w']}/x.duckdb")(w), "is a file, not a folder"),
    ("runs-db-below-a-file", lambda w: stash.runs(db=f"{w['w']}/x.duckdb"), "is a file, not a folder"),
    ("recommend-epochs-zero", _recommend(epochs=0), "epochs"),
    ("recommend-epochs-inf", _recommend(epochs=math.inf), "epochs"),
    ("recommend-no-limit", _recommend(budget_hours=None), "budget"),
    ("recommend-budget-negative", _recommend(budget_hours=-1), "budget_hours"),
    ("recommend-usd-nan", _recommend(budget_hours=None, max_usd=math.nan), "max_usd"),
    ("recommend-images-1e308", _recommend(dataset_images=1e308), "dataset_images"),
    ("recommend-images-text", _recommend(dataset_images="many"), "dataset_images"),
    ("recommend-instance-unknown", _recommend(instances=["zzz"]), "zzz"),
    ("recommend-max-instances-zero", _recommend(max_instances=0), "max_instances"),
    ("recommend-epochs-none", _recommend(epochs=None), "epochs: a value is required"),
    ("recommend-batch-none", _recommend(batch_size=None), "batch_size: a value is required"),
    ("recommend-spot-text", _recommend(spot="no"), "spot: expected True or False"),
    ("recommend-model-list", _recommend(model=("resnet18",)), "model: expected a text"),
    ("spot-workload-missing", _spot(workload="/nonexistent/none.json"), "does not exist"),
    ("spot-workload-folder", _spot(workload="/tmp"), "directory"),
    ("spot-workload-fifo", lambda w: _spot(workload=w["fifo"])(w), "FIFO"),
    ("spot-workload-empty-object", lambda w: _spot(workload=w["empty_obj"])(w), "param_mb"),
    ("spot-instances-empty-dict", _spot(instances={}), "instances"),
    ("spot-on-demand-revocation", _spot(on_demand=True, revocation_s=60), "an on-demand instance is never"),
    ("spot-on-demand-rate", _spot(on_demand=True, rate_per_h=1.0), "revocation_s and rate_per_h are for"),
    ("spot-quota-negative", _spot(instances={"g4dn.xlarge": -1}), "the quota must be a positive integer"),
    ("spot-quota-zero", _spot(instances={"g4dn.xlarge": 0}), "the quota must be a positive integer, got 0"),
    ("spot-quota-over-the-cap", _spot(instances={"g4dn.xlarge": 50000}), "the quota must be at most 10,000"),
    ("spot-quota-over-the-cap-text", _spot(instances="g4dn.xlarge:50000"), "at most 10,000"),
    ("spot-quota-true", _spot(instances={"g4dn.xlarge": True}), "whole number"),
    ("spot-name-with-comma", _spot(instances={"g3.8xlarge,g3.16xlarge": 2}),
     "'g3.8xlarge,g3.16xlarge' is not"),
    ("spot-name-with-colon", _spot(instances={"g4dn.xlarge:9": 2}), "no ',' or ':'"),
    ("spot-name-number", _spot(instances={5: 2}), "instances: 5 is not an instance name"),
    ("spot-unknown-keyword", _spot(budget=100),
     "plan_spot: unknown option 'budget' (did you mean 'budget_s'?)"),
    ("predict-unknown-keyword", _predict(max_instance=2),
     "predict: unknown option 'max_instance' (did you mean 'max_instances'?)"),
    ("predict-too-many-positional", lambda w: stash.predict("resnet18", 8, 2, db=w["db"]),
     "predict: too many positional arguments"),
    ("recommend-unknown-keyword", _recommend(budget_hour=1),
     "recommend: unknown option 'budget_hour' (did you mean 'budget_hours'?)"),
    ("recommend-missing-argument", lambda w: stash.recommend("resnet18", 8, db=w["db"]),
     "recommend: missing a required argument: 'epochs'"),
    ("schedule-unknown-keyword", _schedule(seeds=3), "simulate_schedule: unknown option 'seeds'"),
    ("spot-quota-fraction", _spot(instances={"g4dn.xlarge": 1.5}), "whole number"),
    ("spot-instances-list", _spot(instances=["g4dn.xlarge"]), "instances"),
    ("spot-name-escape", _spot(instances={"g4\x1bdn": 2}), "U+001B"),
    ("spot-loss-nan", _spot(target_loss=math.nan), "target_loss"),
    ("spot-budget-inf", _spot(budget_s=math.inf), "budget_s"),
    ("spot-budget-none", _spot(budget_s=None), "budget_s: a value is required"),
    ("spot-pcie-none", _spot(pcie_gbps=None), "pcie_gbps: a value is required"),
    ("spot-revocation-none", _spot(revocation_s=None), "revocation_s: a value is required"),
    ("spot-workload-none", _spot(workload=None), "workload: a value is required"),
    ("spot-on-demand-text", _spot(on_demand="yes"), "on_demand: expected True or False"),
    ("schedule-no-jobs", _schedule(synthetic_jobs=None), "synthetic_jobs"),
    ("schedule-trace-and-jobs", lambda w: _schedule(trace=w["t"])(w), "one of"),
    ("schedule-jobs-zero", _schedule(synthetic_jobs=0), "synthetic_jobs"),
    ("schedule-jobs-negative", _schedule(synthetic_jobs=-5), "synthetic_jobs"),
    ("schedule-jobs-fraction", _schedule(synthetic_jobs=5.5), "synthetic_jobs"),
    ("schedule-cluster-zero", _schedule(cluster=(0, 4, 8)), "cluster"),
    ("schedule-cluster-short", _schedule(cluster=(2, 4)), "cluster"),
    ("schedule-cluster-letters", _schedule(cluster="axbxc"), "cluster"),
    ("schedule-policy-unknown", _schedule(policies=["best"]), "best"),
    ("schedule-policies-none", _schedule(policies=[]), "policies"),
    ("schedule-tuning-unknown", _schedule(tuning="magic"), "tuning"),
    ("schedule-las-text", _schedule(las_limits_gpu_h="x"), "las_limits_gpu_h"),
    ("schedule-out-is-db", lambda w: _schedule(out=w["db"])(w), "is the database"),
    ("schedule-jobs-csv-is-db", lambda w: _schedule(jobs_csv=w["db"])(w), "is the database"),
    ("schedule-max-jobs-zero", _schedule(max_jobs=0), "max_jobs"),
    ("schedule-seed-negative", _schedule(seed=-1), "seed"),
    ("schedule-seed-fraction", _schedule(seed=1.5), "seed: "),  # None is the default seed, as not given
    # an option no simulation here uses was run as if not given, where `stash schedule` refuses it
    ("schedule-starve-fifo", _schedule(policies="fifo", starve_factor=3),
     "starve_factor sets las, not run here (policies fifo)"),
    ("schedule-delay-fifo", _schedule(policies="fifo", delay_s=60), "delay_s sets delay, not run here"),
    ("schedule-checkpoint-sjf", _schedule(policies="sjf", checkpoint_s=10), "checkpoint_s sets las and "
     "network-preempt, not run here"),
    ("schedule-format-synthetic", _schedule(trace_format="philly"), "trace_format reads a trace file; "
     "synthetic_jobs makes its own jobs"),
    ("schedule-fraction-online", _schedule(tuning="online", tune_fraction=0.5), "tune_fraction is the share"),
    ("schedule-gap-batch", _schedule(arrivals="batch", mean_gap_s=5), "mean_gap_s spaces the arrivals"),
    ("schedule-uplink-links", _schedule(node_gbps=10, uplink_factor=3),
     "uplink_factor is the stall multiplier"),
    ("schedule-reference-no-links", _schedule(reference_gbps=10.0), "reference_gbps is the rate the link"),
    ("schedule-cluster-none", _schedule(cluster=None), "cluster"),
    ("schedule-cluster-number", _schedule(cluster=8), "cluster"),
    ("schedule-policies-number", _schedule(policies=5), "policies"),
    ("schedule-no-store-text", _schedule(no_store="no"), "no_store: expected True or False"),
    ("schedule-node-gbps-nan", _schedule(node_gbps=math.nan), "node_gbps"),
    ("schedule-trace-missing", _schedule(synthetic_jobs=None, trace="/nonexistent/t.csv"), "does not exist"),
    ("schedule-trace-format", lambda w: _schedule(synthetic_jobs=None, trace=w["t"], trace_format="slurm")(w),
     "trace_format"),
    ("runs-db-folder", lambda w: stash.runs("/tmp"), "directory"),
    ("runs-db-fifo", lambda w: stash.runs(w["fifo"]), "FIFO"),
    ("runs-db-number", lambda w: stash.runs(5), "db"),
    ("runs-db-is-a-csv", lambda w: stash.runs(w["t"]), "not a DuckDB database"),
    ("breakdown-empty-id", lambda w: stash.breakdown("", db=w["db"]), "run"),
    ("breakdown-prefix-of-two", lambda w: stash.breakdown("2026", db=w["db"]), "several"),
    ("breakdown-unknown", lambda w: stash.breakdown("zzz", db=w["db"]), "zzz"),
    ("breakdown-sql", lambda w: stash.breakdown("' OR '1'='1", db=w["db"]), "no run"),
    ("breakdown-none", lambda w: stash.breakdown(None, db=w["db"]), "run_id"),
    ("breakdown-escape", lambda w: stash.breakdown("\x1b[2J", db=w["db"]), "no run"),
    ("load-missing", lambda w: stash.load_result("/nonexistent/none.json"), "does not exist"),
    ("load-folder", lambda w: stash.load_result("/tmp"), "directory"),
    ("load-the-database", lambda w: stash.load_result(w["db"]), "not a Stash result"),
    ("load-fifo", lambda w: stash.load_result(w["fifo"]), "FIFO"),
    ("load-empty-object", lambda w: stash.load_result(w["empty_obj"]), "not a Stash result"),
    ("load-a-workload", lambda w: stash.load_result(w["w"]), "not a Stash result"),
    ("load-none", lambda w: stash.load_result(None), "path"),
    ("load-empty-text", lambda w: stash.load_result(""), "path"),
]  # fmt: skip


def _id(case) -> str:
    return case.values[0] if hasattr(case, "values") else case[0]


def test_the_cases_are_many_and_named_once():
    ids = [_id(case) for case in CASES]
    assert len(ids) == len(set(ids)) >= 70


@pytest.mark.parametrize(("case_id", "call", "says"), CASES, ids=[_id(case) for case in CASES])
def test_a_hostile_call_gets_one_clear_usage_error(case_id, call, says, world, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    before = hashlib.sha256(Path(world["db"]).read_bytes()).hexdigest()
    with pytest.raises(UsageError) as raised:
        call(world)
    message = str(raised.value)
    assert says in message and len(message.splitlines()) == 1 and "\x1b" not in message, message
    assert hashlib.sha256(Path(world["db"]).read_bytes()).hexdigest() == before
    assert not list(tmp_path.iterdir()) and not Path(world["tmp"], "sim").exists()
