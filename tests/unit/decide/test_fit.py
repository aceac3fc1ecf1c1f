"""Stall models: least squares recovers known coefficients, the alpha-beta arithmetic, held-out validation."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from result_docs import result_doc

from stash_core.decide.fit import (
    ALPHA_BETA,
    DDP_BUCKET_BYTES,
    POOLED,
    allreduce_time_s,
    beta_from_gbps,
    bucket_count,
    fit_linear,
    fit_stall_models,
    link_from_probes,
    mape,
    parse_rate_gbps,
    predict_stall,
    ring_factor,
    split_instance_label,
)
from stash_core.errors import UsageError
from stash_core.store import connect, ingest_result

# (grad_bytes, grad_tensor_count, layer_count): spread so that bytes and tensors are not collinear.
MODELS = {
    "m1": (10e6, 20, 15),
    "m2": (40e6, 60, 41),
    "m3": (80e6, 100, 70),
    "m4": (120e6, 160, 110),
    "m5": (200e6, 40, 30),
    "m6": (30e6, 300, 200),
}


def _observations(stall_of, stall: str = "interconnect", **config) -> pd.DataFrame:
    rows = []
    for name, (grad_bytes, tensors, layers) in MODELS.items():
        rows.append(
            {
                "run_id": f"run-{name}-{config.get('bandwidth_gbps')}",
                "started_at": None,
                "stall": stall,
                "stall_s": stall_of(grad_bytes, tensors, layers),
                "ci95_s": 0.0,
                "stall_status": "measured",
                "model": name,
                "batch_size": 32,
                "device": "cpu",
                "backend": "gloo",
                "workers_per_node": config.get("workers_per_node", 2),
                "nodes": config.get("nodes", 1),
                "world_size": config.get("workers_per_node", 2)
                * (config.get("nodes", 1) if stall == "network" else 1),
                "instance": config.get("instance", "box"),
                "instance_label": config.get("instance", "box"),
                "bandwidth_gbps": config.get("bandwidth_gbps"),
                "grad_bytes": grad_bytes,
                "grad_tensor_count": float(tensors),
                "layer_count": float(layers),
            }
        )
    return pd.DataFrame(rows)


def test_least_squares_recovers_known_coefficients():
    rng = np.random.default_rng(3)
    x = rng.uniform(0, 1e8, size=(30, 2)) * [1, 1e-6]
    y = 0.004 + 2e-9 * x[:, 0] + 3e-4 * x[:, 1]
    fit = fit_linear(x, y, ("grad_bytes", "grad_tensor_count"))
    assert fit.intercept == pytest.approx(0.004, rel=1e-6)
    assert fit.coefficients == pytest.approx((2e-9, 3e-4), rel=1e-6)
    assert fit.r2 == pytest.approx(1.0)
    assert fit.predict([[5e7, 50.0]])[0] == pytest.approx(0.004 + 0.1 + 0.015)


def test_least_squares_with_noise_keeps_r2_below_one_and_too_few_points_gives_none():
    rng = np.random.default_rng(0)
    x = rng.uniform(0, 10, size=(40, 1))
    y = 1.0 + 0.5 * x[:, 0] + rng.normal(0, 0.3, 40)
    fit = fit_linear(x, y, ("x",))
    assert 0.8 < fit.r2 < 1.0
    assert fit.coefficients[0] == pytest.approx(0.5, abs=0.05)
    assert fit_linear(x[:1], y[:1], ("x",)) is None


def test_mape_ignores_zero_measurements():
    assert mape(np.array([1.1, 0.9, 5.0]), np.array([1.0, 1.0, 0.0])) == pytest.approx(0.1)
    assert mape(np.array([1.0]), np.array([0.0])) is None


def test_alpha_beta_arithmetic():
    assert ring_factor(1) == 0.0
    assert ring_factor(2) == 1.0
    assert ring_factor(8) == pytest.approx(1.75)
    assert bucket_count(0) == 0
    assert bucket_count(1) == 1
    # 1 MiB first bucket, then 25 MiB ones: 26 MiB fits in two, 26 MiB + 1 byte needs three.
    assert bucket_count(26 * 1024 * 1024) == 2
    assert bucket_count(26 * 1024 * 1024 + 1) == 3
    assert bucket_count(50 * 1024 * 1024, first_bucket_bytes=None) == 2
    beta = beta_from_gbps(8.0)  # 8 Gbit/s = 1 GB/s
    assert beta == pytest.approx(1e-9)
    grad_bytes = 100 * DDP_BUCKET_BYTES
    expected = bucket_count(grad_bytes) * 1e-4 + 1.75 * grad_bytes * 1e-9
    assert allreduce_time_s(grad_bytes, 8, 1e-4, beta) == pytest.approx(expected)
    assert allreduce_time_s(grad_bytes, 1, 1e-4, beta) == 0.0


def test_link_from_probes_recovers_alpha_and_beta():
    alpha_s, beta = 50e-6, 1e-9
    sizes = [2**k for k in range(10, 28, 2)]
    probes = pd.DataFrame(
        {
            "kind": "allreduce",
            "world_size": 4,
            "nodes": 1,
            "instance": "box",
            "device": "cpu",
            "size_bytes": sizes,
            "time_s": [alpha_s + ring_factor(4) * size * beta for size in sizes],
        }
    )
    link = link_from_probes(probes)
    assert link.alpha_s == pytest.approx(alpha_s, rel=1e-6)
    assert link.beta_s_per_byte == pytest.approx(beta, rel=1e-6)
    assert link.bandwidth_gbps == pytest.approx(8.0, rel=1e-6)
    assert link_from_probes(probes.iloc[:1]) is None


def test_rates_and_labels():
    assert parse_rate_gbps("1gbit") == 1.0
    assert parse_rate_gbps("200mbit") == pytest.approx(0.2)
    assert parse_rate_gbps("10mbps") == pytest.approx(0.08)  # tc: mbps are megabytes per second
    assert parse_rate_gbps("25") == 25.0
    assert parse_rate_gbps("fast") is None
    assert split_instance_label("local@1gbit") == ("local", 1.0)
    assert split_instance_label("p3.8xlarge") == ("p3.8xlarge", None)


def test_fit_marks_the_true_feature_set_best_and_reports_held_out_error():
    observations = _observations(lambda b, t, n: 0.002 + 1e-9 * b + 1e-4 * t)
    report = fit_stall_models(observations=observations, probes=pd.DataFrame(), stalls=("interconnect",))
    summary = report.summary().set_index("model")
    best = summary[summary["best"]]
    assert list(best.index) == ["linear: bytes+tensors"]
    assert best["lomo_mape"].iloc[0] < 1e-6
    # A model missing the tensor term cannot predict a held-out DNN as well.
    assert summary.loc["linear: bytes", "lomo_mape"] > 0.05
    assert summary.loc["linear: tensors", "r2"] < summary.loc["linear: bytes", "r2"]
    fit = report.best("interconnect", report.groups("interconnect")[0]).linear
    assert fit.intercept == pytest.approx(0.002, rel=1e-6)
    assert fit.coefficients == pytest.approx((1e-9, 1e-4), rel=1e-6)
    residuals = report.residuals()
    assert set(residuals["model"]) == set(MODELS)
    assert residuals["heldout_s"].notna().all()


def test_alpha_beta_calibrates_overlap_and_predicts_a_held_out_bandwidth():
    # Network stall = 70% of the wire time (30% hidden behind backward) plus 1 ms per bucket.
    def stall_at(gbps):
        return lambda b, t, n: 0.7 * ring_factor(4) * b * beta_from_gbps(gbps) + 1e-3 * bucket_count(b)

    observations = pd.concat(
        [
            _observations(stall_at(gbps), "network", nodes=2, bandwidth_gbps=gbps, instance="emu")
            for gbps in (1, 2, 4)
        ],
        ignore_index=True,
    )
    report = fit_stall_models(observations=observations, probes=pd.DataFrame(), stalls=("network",))
    summary = report.summary()
    alpha_beta = summary[summary["model"] == ALPHA_BETA]
    assert len(alpha_beta) == 3
    assert alpha_beta["lobo_mape"].notna().all()
    assert (alpha_beta["lobo_mape"] < 0.1).all()
    pooled = summary[summary["model"] == POOLED]
    assert (pooled["lobo_mape"] < 1e-6).all() and pooled["best"].all()
    counts = {"grad_bytes": 60e6, "grad_tensor_count": 50, "layer_count": 40}
    answer = predict_stall(
        counts=counts,
        stall="network",
        workers_per_node=2,
        nodes=2,
        instance="emu",
        bandwidth_gbps=3.0,
        report=report,
    )
    truth = stall_at(3.0)(60e6, 50, 40)
    assert answer["status"] == "predicted"
    assert answer["validated_by"] == "leave-one-bandwidth-out"
    assert answer["stall_s"] == pytest.approx(truth, rel=1e-6)
    alpha_beta_answer = next(row for row in answer["candidates"] if row["fit"] == ALPHA_BETA)
    assert alpha_beta_answer["stall_s"] == pytest.approx(truth, rel=0.1)


def test_predict_stall_single_worker_unprofiled_and_ambiguous():
    observations = pd.concat(
        [_observations(lambda b, t, n: 1e-9 * b + 0.01, instance=name) for name in ("a", "b")],
        ignore_index=True,
    )
    report = fit_stall_models(observations=observations, probes=pd.DataFrame(), stalls=("interconnect",))
    counts = {"grad_bytes": 5e7, "grad_tensor_count": 10, "layer_count": 10}
    single = predict_stall(counts=counts, stall="interconnect", workers_per_node=1, report=report)
    assert single["stall_s"] == 0.0
    with pytest.raises(UsageError, match="several"):
        predict_stall(counts=counts, stall="interconnect", workers_per_node=2, report=report)
    answer = predict_stall(
        counts=counts, stall="interconnect", workers_per_node=2, instance="a", report=report
    )
    assert answer["stall_s"] == pytest.approx(0.06, rel=1e-6)
    missing = predict_stall(
        counts=counts, stall="interconnect", workers_per_node=4, instance="a", report=report
    )
    assert missing["stall_s"] is None and missing["status"].startswith("no model")
    bound = predict_stall(
        counts=counts, stall="network", workers_per_node=2, nodes=2, bandwidth_gbps=8.0, report=report
    )
    assert bound["stall_s"] == pytest.approx(ring_factor(4) * 5e7 * 1e-9)
    assert "uncalibrated" in bound["status"] and bound["expected_mape"] is None


def test_fit_reads_the_store_and_predicts_a_zoo_model(tmp_path):
    db = tmp_path / "fit.duckdb"
    for name, (grad_bytes, tensors, layers) in MODELS.items():
        stall_s = 0.003 + 2e-9 * grad_bytes
        ingest_result(
            db,
            result_doc(
                name,
                grad_bytes=int(grad_bytes),
                grad_tensor_count=tensors,
                layer_count=layers,
                stalls={"compute": 0.3, "interconnect": stall_s},
            ),
        )
    ingest_result(db, result_doc("failed", status="failed"))
    report = fit_stall_models(db, stalls=("interconnect",))
    assert len(report.observations) == len(MODELS)
    answer = predict_stall(
        db, "resnet18", stall="interconnect", workers_per_node=2, instance="box", report=report
    )
    assert answer["counts"]["grad_tensor_count"] == 62
    assert answer["stall_s"] == pytest.approx(0.003 + 2e-9 * answer["counts"]["grad_bytes"], rel=1e-6)


def test_probes_table_feeds_the_alpha_beta_model(tmp_path):
    db = tmp_path / "probes.duckdb"
    alpha_s, beta = 2e-4, beta_from_gbps(4.0)
    for name, (grad_bytes, tensors, layers) in MODELS.items():
        wire_s = allreduce_time_s(grad_bytes, 2, alpha_s, beta)
        ingest_result(
            db,
            result_doc(
                name,
                grad_bytes=int(grad_bytes),
                grad_tensor_count=tensors,
                layer_count=layers,
                stalls={"compute": 0.3, "interconnect": 0.5 * wire_s},
            ),
        )
    with connect(db) as con:
        # The probes table as documented for the bandwidth probes (created here if the schema lacks it yet).
        con.execute(
            "CREATE TABLE IF NOT EXISTS probes (probe_id VARCHAR, run_id VARCHAR, started_at TIMESTAMPTZ,"
            " hostname VARCHAR, instance VARCHAR, backend VARCHAR, device VARCHAR, world_size INTEGER,"
            " nodes INTEGER, kind VARCHAR, size_bytes BIGINT, time_s DOUBLE, algbw_gbps DOUBLE,"
            " busbw_gbps DOUBLE)"
        )
        for index, size in enumerate(2**k for k in range(12, 28, 3)):
            time_s = alpha_s + ring_factor(2) * size * beta
            con.execute(
                "INSERT INTO probes (probe_id, started_at, hostname, instance, backend, device, world_size,"
                " nodes, kind, size_bytes, time_s) VALUES (?, now(), 'box1', 'box', 'gloo', 'cpu', 2, 1,"
                " 'allreduce', ?, ?)",
                [f"p{index}", size, time_s],
            )
    report = fit_stall_models(db, stalls=("interconnect",))
    model = next(m for m in report.models if m.name == ALPHA_BETA)
    assert model.link.source == "probe"
    assert model.link.alpha_s == pytest.approx(alpha_s, rel=1e-3)
    assert model.scale == pytest.approx(0.5, rel=1e-6)
    assert model.lomo_mape == pytest.approx(0.0, abs=1e-9)
    assert math.isclose(model.link.bandwidth_gbps, 4.0, rel_tol=1e-3)


def test_another_node_count_borrows_the_alpha_beta_scale():
    # Profiled at 2 nodes only; asked about 4 nodes at the same bandwidth.
    def stall_2_nodes(b, t, n):
        return 0.6 * ring_factor(4) * b * beta_from_gbps(10)

    observations = _observations(stall_2_nodes, "network", nodes=2, bandwidth_gbps=10.0, instance="cloud")
    report = fit_stall_models(observations=observations, probes=pd.DataFrame(), stalls=("network",))
    counts = {"grad_bytes": 1e8, "grad_tensor_count": 100, "layer_count": 50}
    answer = predict_stall(
        counts=counts,
        stall="network",
        workers_per_node=2,
        nodes=4,
        instance="cloud",
        bandwidth_gbps=10.0,
        report=report,
    )
    assert answer["stall_s"] == pytest.approx(0.6 * ring_factor(8) * 1e8 * beta_from_gbps(10), rel=1e-6)
    assert answer["expected_mape"] is None and "other node counts" in answer["status"]


def test_runs_without_an_instance_label_are_fitted_as_their_own_configuration(tmp_path):
    # Some runs carry no instance label (NULL instance): pandas reads the column with NaN for them, which
    # once broke the label split with a TypeError.
    db = tmp_path / "unlabelled.duckdb"
    for index, (name, (grad_bytes, tensors, layers)) in enumerate(MODELS.items()):
        for instance in ("box", None):
            doc = result_doc(
                name, run_id=f"{name}-{instance}", instance=instance, grad_bytes=int(grad_bytes),
                grad_tensor_count=tensors, layer_count=layers,
                stalls={"compute": 0.3, "interconnect": 0.003 + 2e-9 * grad_bytes + 1e-4 * index},
            )  # fmt: skip
            doc["fingerprint"]["instance"] = doc["spec"]["instance"] = instance
            ingest_result(db, doc)
    report = fit_stall_models(db, stalls=("interconnect",))
    assert len(report.observations) == 2 * len(MODELS)
    labels = report.observations["instance"].map(lambda value: value if isinstance(value, str) else "-")
    assert set(labels) == {"box", "-"}
    assert len(report.summary()["group"].unique()) == 2
    assert split_instance_label(None) == (None, None) and split_instance_label(float("nan")) == (None, None)
