"""What the fits read from the store (decide/fit/observations.py): runs, stalls and probes, end to end."""

from __future__ import annotations

import math

import pytest
from fit_observations import MODELS
from result_docs import result_doc

from stash_core.decide.fit import (
    ALPHA_BETA,
    allreduce_time_s,
    beta_from_gbps,
    fit_stall_models,
    predict_stall,
    ring_factor,
    split_instance_label,
)
from stash_core.store import connect, ingest_result


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
    # which probe sets were pooled is said: a `stash probe` stored later moves the fit
    assert "link from 6 probe sets (all from stash probe)" in model.note
    assert model.link.alpha_s == pytest.approx(alpha_s, rel=1e-3)
    assert model.scale == pytest.approx(0.5, rel=1e-6)
    assert model.lomo_mape == pytest.approx(0.0, abs=1e-9)
    assert math.isclose(model.link.bandwidth_gbps, 4.0, rel_tol=1e-3)


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


def test_an_interconnect_stall_is_grouped_by_the_workers_its_r1_ran_on_one_machine(tmp_path):
    """A 1 worker x 2 machines profile measures its interconnect stall with R1's 2 workers on one machine: it
    was grouped as "1 workers", kept out of the 2-worker group where it belongs."""
    from stash_core.decide.fit.observations import load_observations

    db = tmp_path / "r.duckdb"
    stalls = {"compute": 0.1, "interconnect": 0.02, "network": 0.3}
    doc = result_doc("resnet18", workers=1, nodes=2, stalls=stalls)
    r1 = next(phase for phase in doc["phases"] if phase["name"] == "R1")
    r1["workers"] = 2  # as the engine runs it: the run's workers, on one machine
    assert ingest_result(db, doc)
    rows = load_observations(db).set_index("stall")
    assert rows.loc["interconnect", "workers_per_node"] == 2
    assert rows.loc["network", "workers_per_node"] == 1 and rows.loc["network", "nodes"] == 2


def test_runs_whose_links_changed_or_whose_breakdown_cannot_be_are_left_out_of_the_fits_and_said(tmp_path):
    """A run whose emulated links were changed while it ran was fitted as if its network were the first one
    (its warning said its figures mix both); an impossible breakdown's stalls were fitted too."""
    from stash_core.analysis.coherence import IMPOSSIBLE, LINKS_CHANGED

    db = tmp_path / "fit.duckdb"
    stalls = {"compute": 0.3, "interconnect": 0.02, "network": 0.05}
    clean = result_doc("resnet18", nodes=2, stalls=stalls)
    changed = f"{LINKS_CHANGED} (from rate 200 Mbit/s to rate 25 Mbit/s): its figures may mix both"
    mixed = result_doc("resnet18", nodes=2, stalls=stalls, warnings=[changed])
    impossible = result_doc("resnet18", nodes=2, stalls=stalls, warnings=[f"{IMPOSSIBLE}: R1 faster than R0"])
    # stored before the warning existed: its compute beyond the whole iteration marks it all the same
    shares = result_doc("resnet18", nodes=2, stalls={"compute": 0.92, "interconnect": 0.02, "network": -0.70})
    for doc in (clean, mixed, impossible, shares):
        ingest_result(db, doc)
    report = fit_stall_models(db)
    kept = set(zip(report.observations["run_id"], report.observations["stall"], strict=True))
    assert (clean["run_id"], "network") in kept and (clean["run_id"], "interconnect") in kept
    assert (mixed["run_id"], "interconnect") in kept  # one machine's links are not the emulated ones
    assert (mixed["run_id"], "network") not in kept
    assert not any(run in (impossible["run_id"], shares["run_id"]) for run, _ in kept)
    said = report.left_out
    assert any(shares["run_id"] in line and "its breakdown is impossible" in line for line in said)
    assert f"run {mixed['run_id']} left out of the network fit: its network changed while it ran" in said[0]
    assert sum(impossible["run_id"] in warning for warning in said) == 2  # interconnect and network
