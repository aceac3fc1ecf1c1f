"""Cost per iteration, epoch and training, on-demand and spot; a missing price is a status, never a guess."""

from __future__ import annotations

import pytest
from result_docs import result_doc

from stash_core.decide.catalog import confirm_label, set_instance
from stash_core.decide.cost import hourly_price, iterations_per_epoch, run_cost, training_cost
from stash_core.errors import UsageError
from stash_core.store import ingest_result

P2_8XLARGE = {"name": "p2.8xlarge", "on_demand_usd_per_h": 7.20, "spot_usd_per_h": 2.16}


def on_gpus(doc: dict, count: int, name: str = "Tesla K80") -> dict:
    """The document of a run on a machine with `count` GPUs named `name` (result_doc's machine has none)."""
    gpus = [{"index": index, "name": name} for index in range(count)]
    doc["fingerprint"].update(gpu_count=count, gpus=gpus, gpu_status=f"{count} GPU(s)")
    return doc


def test_cost_counts_the_epoch_the_profiler_measures():
    # one definition: 500 images per worker / 32 = 15 full steps, the partial one dropped as in the loop
    assert iterations_per_epoch(1000, 32, 2) == 15
    assert iterations_per_epoch(1024, 32, 2) == 16


def test_training_cost_scales_with_instances_and_epochs():
    cost = training_cost(0.5, 1000, 10, P2_8XLARGE, "p2.8xlarge", instance_count=2)
    assert cost["epoch_s"] == 500.0
    assert cost["training_h"] == pytest.approx(5000 / 3600)
    on_demand = cost["on_demand"]
    assert on_demand["usd_per_h"] == pytest.approx(14.40)
    assert on_demand["iteration_usd"] == pytest.approx(0.5 * 14.40 / 3600)
    assert on_demand["epoch_usd"] == pytest.approx(500 * 14.40 / 3600)
    assert on_demand["training_usd"] == pytest.approx(10 * on_demand["epoch_usd"])
    assert cost["spot"]["training_usd"] / on_demand["training_usd"] == pytest.approx(2.16 / 7.20)
    assert on_demand["status"] == cost["spot"]["status"] == "ok"


def test_missing_prices_are_reported_not_invented():
    cost = training_cost(0.5, 100, 1, {"name": "p3.8xlarge", "on_demand_usd_per_h": 12.24}, "p3.8xlarge")
    assert cost["spot"]["training_usd"] is None
    assert (
        cost["spot"]["status"] == "no spot price for instance p3.8xlarge (set one with `stash instances set`)"
    )
    unknown = training_cost(0.5, 100, 1, None, "my-laptop")
    assert unknown["on_demand"]["training_usd"] is None
    assert "no price for instance my-laptop" in unknown["on_demand"]["status"]
    assert hourly_price(None, None)[1].startswith("no price")
    no_epoch = training_cost(0.5, None, 1, P2_8XLARGE, "p2.8xlarge")
    assert no_epoch["on_demand"]["iteration_usd"] == pytest.approx(0.001)
    assert (
        no_epoch["on_demand"]["training_usd"] is None and "epoch unknown" in no_epoch["on_demand"]["status"]
    )


def test_run_cost_uses_the_runs_instance_and_nodes(tmp_path):
    db = tmp_path / "cost.duckdb"
    doc = result_doc(
        "resnet18",
        instance="p2.8xlarge",
        workers=8,
        nodes=2,
        batch_size=32,
        dataset_images=51200,
        stalls={"compute": 0.3, "interconnect": 0.1, "network": 0.1},
    )
    ingest_result(db, on_gpus(doc, 8))
    cost = run_cost(db, doc["run_id"], epochs=3)
    assert cost["instance_count"] == 2
    assert cost["epoch_s"] == pytest.approx(0.5 * 100)  # 51200 / (32 x 16) = 100 iterations
    assert cost["on_demand"]["training_usd"] == pytest.approx(150 * 14.40 / 3600)
    bigger = run_cost(db, doc["run_id"], epochs=1, dataset_images=102400)
    assert bigger["epoch_s"] == pytest.approx(2 * cost["epoch_s"])
    set_instance(db, "p2.8xlarge", spot_usd_per_h=1.0)
    assert run_cost(db, doc["run_id"])["spot"]["usd_per_h"] == pytest.approx(2.0)
    with pytest.raises(UsageError, match="no run"):
        run_cost(db, "nope")


def test_a_run_whose_machine_contradicts_its_label_has_no_price_until_confirmed(tmp_path):
    db = tmp_path / "cost.duckdb"
    doc = result_doc("resnet18", instance="g4dn.xlarge", workers=1, dataset_images=3200)  # a CPU-only machine
    ingest_result(db, doc)
    cost = run_cost(db, doc["run_id"])
    assert cost["on_demand"]["usd_per_h"] is None and cost["on_demand"]["training_usd"] is None
    assert "does not fit the machine: the machine has no GPU" in cost["on_demand"]["status"]
    assert "g4dn.xlarge has 1 NVIDIA T4" in cost["label_warning"]
    confirm_label(db, doc["run_id"][-8:])  # the short suffix the pages show is enough
    confirmed = run_cost(db, doc["run_id"])
    assert confirmed["on_demand"]["usd_per_h"] == pytest.approx(0.526)
    assert "confirmed by the user" in confirmed["label_warning"]
