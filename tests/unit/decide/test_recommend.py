"""Recommendations on a hand-made catalog and hand-made profiles whose right answer is known."""

from __future__ import annotations

import json
import math
import re
import shutil

import pytest
from result_docs import result_doc as _cpu_machine_doc

from stash_core.catalog import add_instance
from stash_core.decide.recommend import recommend, slowdown_cause
from stash_core.errors import UsageError
from stash_core.store import ingest_result


def result_doc(*args, **kwargs):
    """result_docs.result_doc on a machine that fits its device: a CUDA run's machine has a GPU per worker
    (result_doc's fingerprint has none, which would contradict a GPU instance label)."""
    doc = _cpu_machine_doc(*args, **kwargs)
    if doc["spec"]["device"] == "cuda":
        count = doc["spec"]["workers_per_node"]
        gpus = [{"index": index, "name": "Tesla V100-SXM2-16GB"} for index in range(count)]
        doc["fingerprint"].update(gpu_count=count, gpus=gpus, gpu_status=f"{count} GPU(s)")
    return doc


IMAGES = 1_281_167
GPU = "Test GPU"


def _catalog(db):
    # Two shapes with the same 8 accelerators for the same money, and a small cheap one.
    add_instance(
        db,
        name="big8",
        accelerator=GPU,
        accelerator_count=8,
        vcpus=64,
        network_gbps=25,
        on_demand_usd_per_h=24.0,
        spot_usd_per_h=8.0,
    )
    add_instance(
        db,
        name="half4",
        accelerator=GPU,
        accelerator_count=4,
        vcpus=32,
        network_gbps=10,
        on_demand_usd_per_h=12.0,
    )
    add_instance(
        db,
        name="one1",
        accelerator=GPU,
        accelerator_count=1,
        vcpus=8,
        network_gbps=10,
        on_demand_usd_per_h=3.0,
    )


@pytest.fixture(scope="module")
def _db_template(tmp_path_factory):
    path = tmp_path_factory.mktemp("recommend") / "rec.duckdb"
    _catalog(path)
    ingest_result(
        path,
        result_doc(
            "resnet50",
            instance="big8",
            workers=8,
            device="cuda",
            batch_size=64,
            stalls={"compute": 0.20, "interconnect": 0.03, "cpu": 0.01, "disk": 0.01},
        ),
    )
    ingest_result(
        path,
        result_doc(
            "resnet50",
            instance="half4",
            workers=4,
            nodes=2,
            device="cuda",
            batch_size=64,
            stalls={"compute": 0.20, "interconnect": 0.02, "network": 0.10, "cpu": 0.01, "disk": 0.01},
        ),
    )
    return path


@pytest.fixture
def db(_db_template, tmp_path):
    """A fresh copy (a test may write to it) of a catalog of three instances and two resnet50 profiles:
    made once for the module, since creating and filling a database costs seconds."""
    path = tmp_path / "rec.duckdb"
    shutil.copyfile(_db_template, path)
    return path


def _ask(db, **overrides):
    request = {"budget_hours": 24.0, "instances": ["big8", "half4", "one1"], "max_instances": 2}
    request.update(overrides)
    return recommend(db, "resnet50", 64, 90, IMAGES, **request)


def test_one_big_instance_beats_two_half_ones_because_of_network_stall(db):
    result = _ask(db)
    best = result.best
    assert (best["instance"], best["instance_count"], best["source"]) == ("big8", 1, "measured")
    per_epoch = math.ceil(math.ceil(IMAGES / 8) / 64)  # every sample each epoch, as PyTorch's defaults
    assert best["training_h"] == pytest.approx(0.25 * per_epoch * 90 / 3600)
    assert best["training_usd"] == pytest.approx(best["training_h"] * 24.0)
    ranked = result.ranked
    assert list(ranked["rank"]) == list(range(1, len(ranked) + 1))
    assert ranked["training_usd"].is_monotonic_increasing
    assert ranked["training_h"].le(24.0).all()
    # 2 x half4: same 8 GPUs, same $24/h, but 0.34 s per iteration instead of 0.25 s.
    text = " ".join(result.explanations)
    assert "network stall makes 2 x half4 36% slower than 1 x big8" in text
    assert result.infeasible_reason is None


def test_cheap_single_gpu_is_predicted_from_the_same_accelerator_and_loses_on_time(db):
    result = _ask(db)
    options = result.options.set_index("config")
    single = options.loc["1 x one1"]
    assert single["source"] == "predicted"
    # compute and disk of big8, no communication; big8's loaders took R3 = 0.24 s a step with 8 vCPUs per
    # worker, as one1 has, and one1's step without the interconnect stall (0.2 s) hides 0.2 s of it
    assert single["iteration_s"] == pytest.approx(0.2 + 0.01 + 0.04)
    assert single["cpu_s"] == pytest.approx(0.04)
    assert single["training_h"] > 24 and not single["feasible"]
    assert any("1 x one1" in line and "over the 24 h budget" in line for line in result.explanations)
    # Stall composition of every option adds up to its iteration time.
    stalls = result.options[[f"{s}_s" for s in ("compute", "interconnect", "network", "cpu", "disk")]]
    assert stalls.sum(axis=1).to_numpy() == pytest.approx(result.options["iteration_s"].to_numpy())


def test_pareto_front_is_not_dominated(db):
    result = _ask(db)
    front = result.pareto
    assert len(front) >= 1
    everything = result.options.dropna(subset=["training_usd"])
    for row in front.itertuples():
        better = everything[
            (everything["training_h"] <= row.training_h)
            & (everything["training_usd"] <= row.training_usd)
            & ((everything["training_h"] < row.training_h) | (everything["training_usd"] < row.training_usd))
        ]
        assert better.empty
    assert "1 x big8" in set(front["config"])


def test_budget_too_tight_is_explained(db):
    result = _ask(db, budget_hours=1.0)
    assert result.best is None and result.ranked.empty
    reason = result.infeasible_reason
    assert reason.startswith("no configuration finishes 90 epochs of 1,281,167 samples within 1 h")
    assert "the fastest" in reason and "needs" in reason


def test_cost_cap_too_low_is_explained(db):
    result = _ask(db, max_usd=50.0)
    assert result.best is None
    assert "finish within 24 h, but the cheapest of them, 1 x big8" in result.infeasible_reason
    assert "over the $50.00 limit" in result.infeasible_reason


def test_spot_pricing_uses_spot_prices_and_skips_instances_without_them(db):
    result = _ask(db, spot=True)
    assert result.best["instance"] == "big8"
    assert result.best["usd_per_h"] == 8.0
    half = result.options[result.options["instance"] == "half4"]
    assert half["training_usd"].isna().all()
    assert half["note"].str.contains("no spot price for instance half4").all()


def test_no_profile_at_all_explains_what_to_run(tmp_path):
    db = tmp_path / "empty.duckdb"
    _catalog(db)
    result = recommend(db, "vgg16", 32, 10, 100_000, budget_hours=5, instances=["big8"])
    assert result.best is None
    assert result.infeasible_reason.startswith("no configuration could be evaluated for vgg16 at batch 32")
    assert "stash profile --model vgg16 --batch-size 32 --workers 8 --instance big8" in result.infeasible_reason


def test_prediction_from_a_validated_stall_model_carries_its_expected_error(tmp_path):
    db = tmp_path / "pred.duckdb"
    add_instance(
        db,
        name="quad",
        accelerator=GPU,
        accelerator_count=4,
        vcpus=32,
        network_gbps=10,
        on_demand_usd_per_h=10.0,
    )
    add_instance(
        db,
        name="solo",
        accelerator=GPU,
        accelerator_count=1,
        vcpus=8,
        network_gbps=10,
        on_demand_usd_per_h=2.0,
    )
    noise = [1.02, 0.97, 1.01, 0.99, 1.03, 0.98]
    for index, grad_mb in enumerate((10, 30, 60, 90, 150, 220)):
        stall_s = (0.004 + 0.4e-9 * grad_mb * 1e6) * noise[index]
        ingest_result(
            db,
            result_doc(
                f"other{index}",
                instance="quad",
                workers=4,
                device="cuda",
                grad_bytes=grad_mb * 10**6,
                grad_tensor_count=20 + 30 * index,
                layer_count=15 + 20 * index,
                stalls={"compute": 0.1, "interconnect": stall_s},
            ),
        )
    # The model to train was only profiled on the one-GPU shape.
    ingest_result(
        db,
        result_doc(
            "target",
            instance="solo",
            workers=1,
            device="cuda",
            grad_bytes=120 * 10**6,
            grad_tensor_count=100,
            layer_count=70,
            stalls={"compute": 0.3},
        ),
    )
    result = recommend(
        db, "target", 32, 1, 100_000, budget_hours=100, instances=["quad", "solo"], max_instances=1
    )
    quad = result.options.set_index("config").loc["1 x quad"]
    assert quad["source"] == "predicted"
    assert quad["interconnect_s"] == pytest.approx(0.004 + 0.4e-9 * 120e6, rel=0.1)
    # compute measured (no model error); the fitted stall model's error is the communication's
    assert quad["expected_error"] is None and 0 < quad["comm_error"] < 0.05
    assert "interconnect by linear" in quad["basis"]


def test_a_zoo_models_communication_is_predicted_from_its_own_counts_not_another_runs(tmp_path):
    """The models table keeps the counts of the run stored last under a name: a resnet18 profiled with 25,000
    classes there. The job (resnet18 at its default classes) has 46.8 MB of gradients, not that run's 97 MB:
    its interconnect stall is predicted from its own."""
    from stash_core.decide.fit import model_counts

    db = tmp_path / "counts.duckdb"
    for name, gpus, usd in (("quad", 4, 10.0), ("solo", 1, 2.0)):
        add_instance(db, name=name, accelerator=GPU, accelerator_count=gpus, vcpus=8 * gpus, network_gbps=10,
                     on_demand_usd_per_h=usd)  # fmt: skip
    for index, grad_mb in enumerate((10, 30, 60, 90, 150, 220)):
        stall_s = (0.004 + 0.4e-9 * grad_mb * 1e6) * (1.02, 0.97, 1.01, 0.99, 1.03, 0.98)[index]
        ingest_result(db, result_doc(f"other{index}", instance="quad", workers=4, device="cuda",
                                     grad_bytes=grad_mb * 10**6, grad_tensor_count=20 + 30 * index,
                                     layer_count=15 + 20 * index,
                                     stalls={"compute": 0.1, "interconnect": stall_s}))  # fmt: skip
    own, wide = model_counts("resnet18"), model_counts("resnet18", num_classes=25_000)
    counts = {key: wide[key] for key in ("grad_bytes", "grad_tensor_count", "layer_count")}
    ingest_result(db, result_doc("resnet18", instance="solo", workers=1, device="cuda",
                                 stalls={"compute": 0.3}, **counts))  # fmt: skip
    result = recommend(
        db, "resnet18", 32, 1, 100_000, budget_hours=100, instances=["quad", "solo"], max_instances=1
    )
    quad = result.options.set_index("config").loc["1 x quad"]
    assert "interconnect by linear" in quad["basis"]
    assert quad["interconnect_s"] == pytest.approx(0.004 + 0.4e-9 * own["grad_bytes"], rel=0.1)


def test_bad_requests(db):
    with pytest.raises(UsageError, match="unknown instance"):
        _ask(db, instances=["nope"])
    with pytest.raises(UsageError, match="time budget"):
        recommend(db, "resnet50", 64, 90, IMAGES)
    with pytest.raises(UsageError, match="epochs"):
        recommend(db, "resnet50", 64, -1, IMAGES, budget_hours=2)


def test_slowdown_cause_names_the_growing_stall():
    fast = {
        "instance": "a",
        "instance_count": 1,
        "epoch_s": 100.0,
        "iterations_per_epoch": 100,
        "compute_s": 0.8,
        "interconnect_s": 0.2,
        "network_s": 0.0,
        "cpu_s": 0.0,
        "disk_s": 0.0,
    }
    slow = {**fast, "instance": "b", "instance_count": 2, "epoch_s": 150.0, "network_s": 0.5}
    assert slowdown_cause(slow, fast) == "network stall makes 2 x b 50% slower than 1 x a"


def test_a_stall_that_makes_only_part_of_a_slowdown_is_given_its_share_not_the_whole():
    """Two machines spread over the network, each with a slower GPU: the network stall was said to make the
    whole 468% where compute made a third of it."""
    fast = {"instance": "a", "instance_count": 1, "epoch_s": 100.0, "iterations_per_epoch": 100,
            "compute_s": 0.8, "interconnect_s": 0.2, "network_s": 0.0, "cpu_s": 0.0,
            "disk_s": 0.0}  # fmt: skip
    slow = {**fast, "instance": "b", "instance_count": 2, "epoch_s": 568.0, "compute_s": 2.3,
            "network_s": 3.1}  # fmt: skip
    said = ("network stall makes 2 x b 310% slower than 1 x a, of 468% in all (compute +150%, not separated "
            "+8%)")
    assert slowdown_cause(slow, fast) == said


def test_the_parts_of_a_slowdown_add_up_to_the_whole():
    """A profile whose stalls add up to more than its step (a negative "not separated"), and a stall smaller
    on the slower side: "711% slower ..., of 1466% in all (compute +685%, cpu +203%)" left out -133%."""
    fast = {"instance": "a", "instance_count": 1, "epoch_s": 100.0, "iterations_per_epoch": 100,
            "compute_s": 0.8, "interconnect_s": 0.2, "network_s": 0.0, "cpu_s": 0.0,
            "disk_s": 0.0}  # fmt: skip
    slow = {**fast, "instance": "b", "epoch_s": 300.0, "compute_s": 1.6, "interconnect_s": 0.1, "cpu_s": 1.5}
    said = slowdown_cause(slow, fast)
    assert said == ("cpu stall makes 1 x b 150% slower than 1 x a, of 200% in all (compute +80%, "
                    "interconnect -10%, not separated -20%)")  # fmt: skip


def test_stalls_measured_on_one_side_only_are_said_to_be_part_of_the_gap():
    """A profile's CPU and disk stalls beside a prediction that has none: the gap was all laid on compute."""
    predicted = {"instance": "p4de.24xlarge", "instance_count": 1, "epoch_s": 63.0,
                 "iterations_per_epoch": 1000, "compute_s": 0.063, "interconnect_s": 0.0, "network_s": 0.0,
                 "cpu_s": None, "disk_s": None}  # fmt: skip
    measured = {**predicted, "instance": "p4d.24xlarge", "epoch_s": 101.0, "compute_s": 0.080, "cpu_s": 0.012,
                "disk_s": 0.009}  # fmt: skip
    said = slowdown_cause(measured, predicted)
    assert said.startswith("compute (fewer or slower accelerators) makes 1 x p4d.24xlarge 27% slower than "
                           "1 x p4de.24xlarge, of 60% in all (cpu +19%, disk +14%)")  # fmt: skip
    assert said.endswith(
        "(its cpu and disk stalls, measured, are not predicted for 1 x p4de.24xlarge: part of the gap)"
    )


@pytest.mark.slow
def test_recommend_on_a_fresh_database_ranks_predicted_options_for_every_gpu_instance(tmp_path):
    from stash_core.decide.recommend import recommend as recommend_fn

    result = recommend_fn(tmp_path / "fresh.duckdb", "resnet50", 64, 90, 1_281_167, budget_hours=24)
    ranked = result.ranked
    assert result.best is not None and len(ranked) >= 3
    assert (ranked["source"] == "predicted").all()
    assert ranked["expected_error"].notna().all()
    assert list(ranked["rank"]) == list(range(1, len(ranked) + 1))
    assert ranked["training_usd"].is_monotonic_increasing
    assert result.pareto["pareto"].all() and len(result.pareto) >= 1
    assert ranked["basis"].str.startswith("roofline").all()
    assert {"p3.2xlarge", "g4dn.xlarge", "p4d.24xlarge"} <= set(result.options["instance"])
    # M60s (8 GB) cannot hold ResNet-50 at batch 128: said per instance, not silently dropped.
    larger = recommend_fn(tmp_path / "fresh.duckdb", "resnet50", 128, 90, 1_281_167, budget_hours=24)
    assert any(line.startswith("g3.4xlarge: does not fit") for line in larger.excluded)
    assert "g3.4xlarge" not in set(larger.options["instance"])


def _profiled_v100(db):
    ingest_result(
        db,
        result_doc(
            "resnet50", instance="p3.2xlarge", workers=1, device="cuda", batch_size=64,
            stalls={"compute": 0.20, "cpu": 0.01, "disk": 0.01},
        ),
    )  # fmt: skip


def test_a_profile_stands_only_for_the_job_it_measured(tmp_path):
    """An FP32 profile is not a measurement of an amp job, nor a 224 px profile of a 128 px job: both are
    set aside with the reason, and the instance is predicted instead."""
    db = tmp_path / "r.duckdb"
    _profiled_v100(db)
    asked = dict(epochs=1, dataset_images=IMAGES, budget_hours=1000, instances=["p3.2xlarge"])
    same = recommend(db, "resnet50", 64, **asked)
    assert same.best["source"] == "measured" and same.request["input_shape"] == [3, 224, 224]
    amp = recommend(db, "resnet50", 64, precision="amp", **asked)
    assert amp.best["source"] == "predicted" and amp.request["precision"] == "amp"
    assert any("ran in fp32 or tf32 and the job trains in amp" in line for line in amp.profiles_set_aside)
    small = recommend(db, "resnet50", 64, input_shape=(3, 128, 128), **asked)
    assert small.best["source"] == "predicted"
    assert any("ran with input 3x224x224, the job's is 3x128x128" in line for line in small.profiles_set_aside)
    assert small.best["compute_s"] < same.best["compute_s"]  # fewer pixels, less work


def test_stalls_that_are_not_predicted_are_none_not_zero_and_json_is_plain(tmp_path):
    import json
    import math

    db = tmp_path / "r.duckdb"
    result = recommend(
        db, "gpt2", 4, 1, 100_000, budget_hours=1000, instances=["g5.xlarge", "p3.8xlarge"],
        precision="tf32", input_shape=(128,),
    )  # fmt: skip
    best = result.best
    assert best["source"] == "predicted" and best["cpu_s"] is None and best["disk_s"] is None
    assert best["iteration_s"] == pytest.approx(
        best["compute_s"] + best["interconnect_s"] + best["network_s"]
    )
    answer = json.loads(json.dumps(result.to_json(), allow_nan=False))
    assert answer["job"]["input_shape"] == [128] and answer["job"]["precision"] == "tf32"
    assert answer["recommended"]["config"] == best["config"] and answer["recommended"]["cpu_s"] is None
    assert [option["rank"] for option in answer["options"]] == list(range(1, len(answer["options"]) + 1))
    for option in answer["predictions"]:
        assert option["workers"] == option["workers_per_instance"] * option["instance_count"]
        assert math.isclose(option["samples_per_s"], 4 * option["workers"] / option["step_s"])


def test_a_seven_billion_model_in_fp32_is_not_evaluated_on_a_24_gb_gpu(tmp_path):
    result = recommend(
        tmp_path / "r.duckdb", "llama2_7b", 1, 1, 1000, budget_hours=1000, instances=["g5.xlarge"],
        input_shape=(128,),
    )  # fmt: skip
    assert result.best is None
    assert any("does not fit" in line and "24 GB" in line for line in result.excluded)
    assert "does not fit" in result.infeasible_reason


def test_a_shape_the_model_cannot_take_is_refused(tmp_path):
    with pytest.raises(UsageError, match="one sequence length"):
        recommend(tmp_path / "r.duckdb", "gpt2", 4, 1, 1000, budget_hours=1, input_shape=(3, 32, 32))
    with pytest.raises(UsageError, match="precision"):
        recommend(tmp_path / "r.duckdb", "resnet18", 4, 1, 1000, budget_hours=1, precision="fp8")


def test_two_options_of_the_same_cost_are_explained_not_a_crash(tmp_path):
    db = tmp_path / "r.duckdb"
    for name in ("twin-a", "twin-b"):  # the same GPU for the same money: the same cost to the cent
        add_instance(
            db, name=name, accelerator="T4", accelerator_count=1, vcpus=4, network_gbps=10,
            on_demand_usd_per_h=0.5,
        )  # fmt: skip
    result = recommend(
        db, "resnet18", 32, 1, 100_000, budget_hours=1000, instances=["twin-a", "twin-b"], max_instances=1
    )
    assert result.best["config"] == "1 x twin-a"
    [line] = [line for line in result.explanations if line.startswith("1 x twin-b has")]
    # "the same 1 accelerators ... in 9.3 h against 9.3 h": the same time said once, and why it ranks after
    assert line.startswith("1 x twin-b has the same 1 accelerator for $0.500/h and the training costs")
    assert "too (ranked after it by name)" in line


def test_the_pareto_mask_keeps_exactly_the_options_nothing_beats_on_both() -> None:
    """Against the definition, pair by pair, on options with ties and unknown figures."""
    import random

    import pandas as pd

    from stash_core.decide.recommend.pareto import pareto_mask

    rng = random.Random(7)
    values = [1.0, 2.0, 3.0, None]
    frame = pd.DataFrame(
        {
            "training_h": [rng.choice(values) for _ in range(60)],
            "training_usd": [rng.choice(values) for _ in range(60)],
        }
    )
    known = [
        (h, u) if h == h and u == u else None
        for h, u in zip(frame["training_h"], frame["training_usd"], strict=True)
    ]

    def beaten(point) -> bool:
        return any(o and o[0] <= point[0] and o[1] <= point[1] and o != point for o in known)

    expected = [point is not None and not beaten(point) for point in known]
    assert pareto_mask(frame).tolist() == expected
    assert any(expected) and not all(expected)
    # Times equal but for their last bits (two steps on one host-overhead floor) are one time: the dearer
    # option, 53% above, was on the front.
    floor = pd.DataFrame({"training_h": [0.14844690619580767, 0.14844697490093633],
                          "training_usd": [0.12, 0.08]})  # fmt: skip
    assert pareto_mask(floor).tolist() == [False, True]


def test_a_cpu_stall_profiled_on_few_vcpus_shrinks_on_an_instance_with_more(tmp_path):
    """A profile on 2 vCPUs a worker with 8 loader workers (2 of them in parallel): R3 = 0.4 s against a 0.2 s
    step. The same accelerator with 3 vCPUs a worker loads in 0.4 x 2 / 3 s, with 8 in 0.1 s (hidden)."""
    db = tmp_path / "cpu.duckdb"
    for name, vcpus in (("small2", 2), ("mid3", 3), ("large8", 8)):
        add_instance(db, name=name, accelerator=GPU, accelerator_count=1, vcpus=vcpus, network_gbps=10,
                     on_demand_usd_per_h=1.0)  # fmt: skip
    doc = result_doc("resnet50", instance="small2", workers=1, device="cuda", batch_size=64, loader_workers=8,
                     stalls={"compute": 0.2, "cpu": 0.2, "disk": 0.0})  # fmt: skip
    ingest_result(db, doc)
    result = recommend(db, "resnet50", 64, 1, IMAGES, budget_hours=1000.0,
                       instances=["small2", "mid3", "large8"], max_instances=1)  # fmt: skip
    cpu = result.options.set_index("config")["cpu_s"]
    assert cpu["1 x small2"] == pytest.approx(0.2)  # measured there
    assert cpu["1 x mid3"] == pytest.approx(0.4 * 2 / 3 - 0.2)
    assert cpu["1 x large8"] == pytest.approx(0.0)
    note = result.options.set_index("config")["note"]
    assert "CPU stall for 3 vCPUs per worker" in note["1 x mid3"] and "vCPUs" not in note["1 x small2"]
    # Recomputed for a machine, a stall of 0 too, is the model's answer, which no figure validates.
    unvalidated = result.options.set_index("config")["unvalidated"]
    assert unvalidated["1 x mid3"] and unvalidated["1 x large8"] and not unvalidated["1 x small2"]


def test_a_cpu_stall_of_unknown_loader_workers_is_kept_as_profiled_and_said(tmp_path):
    """A script's profile whose loader workers are unknown: its CPU stall is not recomputed for another
    machine's vCPUs, and the row says so."""
    db = tmp_path / "cpu.duckdb"
    for name, vcpus in (("small2", 2), ("large8", 8)):
        add_instance(db, name=name, accelerator=GPU, accelerator_count=1, vcpus=vcpus, network_gbps=10,
                     on_demand_usd_per_h=1.0)  # fmt: skip
    doc = result_doc("resnet50", instance="small2", workers=1, device="cuda", batch_size=64, loader_workers=8,
                     stalls={"compute": 0.2, "cpu": 0.2, "disk": 0.0})  # fmt: skip
    doc["spec"]["loader_workers"] = None
    ingest_result(db, doc)
    result = recommend(db, "resnet50", 64, 1, IMAGES, budget_hours=1000.0,
                       instances=["small2", "large8"], max_instances=1)  # fmt: skip
    rows = result.options.set_index("config")
    assert rows["cpu_s"]["1 x large8"] == pytest.approx(0.2)  # as profiled, not the 0 of 8 vCPUs
    assert "loader workers are unknown" in rows["note"]["1 x large8"]
    assert "loader workers" not in rows["note"]["1 x small2"]


def test_a_one_gpu_profile_takes_no_configuration_away_and_leaves_communication_to_the_bandwidths(tmp_path):
    """With a V100 profile of one GPU, the multi-GPU V100 instances were 'not evaluated' (no profiled
    interconnect), and two machines' network came from an uncalibrated line-rate model with no error, half
    of what the empty database predicted."""
    asked = dict(epochs=1, dataset_images=IMAGES, budget_hours=1000, max_instances=2,
                 instances=["p3.2xlarge", "p3.8xlarge", "p3.16xlarge"])  # fmt: skip
    empty = recommend(tmp_path / "empty.duckdb", "resnet50", 64, **asked)
    db = tmp_path / "r.duckdb"
    _profiled_v100(db)
    profiled = recommend(db, "resnet50", 64, **asked)
    by_config = {option["config"]: option for option in profiled.options.to_dict(orient="records")}
    spec = {option["config"]: option for option in empty.options.to_dict(orient="records")}
    assert set(by_config) == set(spec)
    assert not any("cannot be predicted" in line for line in profiled.excluded)
    for config in ("1 x p3.8xlarge", "2 x p3.2xlarge", "2 x p3.16xlarge"):
        for stall in ("interconnect_s", "network_s"):
            # the same model; its overlap with backward follows the compute, which the profile measured
            assert by_config[config][stall] == pytest.approx(spec[config][stall], rel=0.1), (config, stall)
        assert by_config[config]["expected_error"] is None and by_config[config]["comm_error"] is not None


def test_a_measured_option_says_what_its_stalls_leave_of_its_step():
    from stash_core.decide.recommend.costs import measured_estimate

    row = {"run_id": "r1", "iteration_s": 0.2051, "compute_s": 0.15, "interconnect_s": 0.0, "network_s": 0.0,
           "cpu_s": 0.05, "disk_s": 0.0188, "cpu_status": "resolved", "disk_status": "resolved"}  # fmt: skip
    estimate = measured_estimate(row)
    assert estimate.iteration_s == pytest.approx(0.2051)
    assert any("add up to 0.2188 s of the measured 0.2051 s" in note and "-0.0137 s" in note
               for note in estimate.notes), estimate.notes  # fmt: skip
    row["disk_s"] = 0.0051  # they add up to the step
    assert not any("add up to" in note for note in measured_estimate(row).notes)


def test_a_measured_option_on_one_machine_has_no_network_stall_not_an_unknown_one(db):
    """A measured one-machine option showed its network stall as '?' (null in JSON), predicted ones 0."""
    result = _ask(db)
    measured = result.options.set_index("config").loc["1 x big8"]
    assert measured["source"] == "measured" and measured["network_s"] == 0.0
    assert measured["interconnect_s"] == pytest.approx(0.03)
    option = next(row for row in result.to_json()["predictions"] if row["config"] == "1 x big8")
    assert option["network_s"] == 0.0


def test_a_suggested_profile_is_one_shell_word_per_name_and_never_one_that_cannot_fit(tmp_path):
    """'my inst' was pasted unquoted into `stash profile ... --instance my inst`, and a batch the line said
    does not fit was suggested for a profile."""
    db = tmp_path / "r.duckdb"
    add_instance(db, name="my inst", accelerator="Google TPU v9", accelerator_count=4, vcpus=8,
                 on_demand_usd_per_h=1.0)  # fmt: skip
    odd = recommend(db, "resnet18", 32, 1, 10_000, budget_hours=10, instances=["my inst"])
    assert odd.excluded == [
        "my inst: not predictable - Google TPU v9 has no entry in the accelerator table (a profile there "
        "makes it measured: `stash profile --model resnet18 --batch-size 32 --workers 4 --instance "
        "'my inst'`)"
    ]
    huge = recommend(db, "resnet50", 100_000, 1, 10**6, budget_hours=10, instances=["g5.xlarge"])
    assert len(huge.excluded) == 1 and "g5.xlarge: does not fit - " in huge.excluded[0]
    assert "stash profile" not in huge.excluded[0]


def test_a_note_with_a_semicolon_inside_its_parentheses_stays_one_note_in_the_json(tmp_path, capsys):
    from support import REPO

    from stash_core.cli.main import main
    from stash_core.decide.predict.instances import note_list

    assert note_list("a; b (c; d); e") == ["a", "b (c; d)", "e"] and note_list(None) == note_list("") == []
    db = str(tmp_path / "r.duckdb")
    example = REPO / "examples" / "results" / "resnet10-b8-2workers-vm-2vcpu.json"
    assert main(["ingest", str(example), "--db", db]) == 0
    assert main(["instances", "add", "vm-2vcpu", "--provider", "local", "--accelerator-count", "0", "--vcpus",
                 "2", "--memory-gib", "8", "--on-demand-usd-per-h", "0.1", "--network-gbps", "1",
                 "--db", db]) == 0  # fmt: skip
    capsys.readouterr()
    assert main(["recommend", "--model", "resnet10", "--batch-size", "8", "--input-shape", "3,64,64",
                 "--epochs", "1", "--dataset-images", "256", "--budget-hours", "1", "--instances", "vm-2vcpu",
                 "--max-instances", "2", "--format", "json", "--db", db]) == 0  # fmt: skip
    options = json.loads(capsys.readouterr().out)["options"]
    two = [option for option in options if option["instance_count"] == 2]
    assert any(note.startswith("network stall predicted (") and note.endswith("error unknown)")
               for note in two[0]["notes"]), two[0]["notes"]  # fmt: skip


def test_the_advice_for_an_unpredicted_option_gets_it_past_its_reason(tmp_path):
    """"A profile there makes it measured" was said of every option with an unknown GPU link: a profile of
    one GPU (the command named no --workers) left all of them unranked, and a profile of one machine never
    measures the network between several. The catalog's missing values are what answer them."""
    from stash_core.catalog import set_instance

    db = tmp_path / "r.duckdb"
    add_instance(db, name="two-v100", accelerator="NVIDIA V100 16 GB", accelerator_count=2, vcpus=12,
                 on_demand_usd_per_h=3.0)  # fmt: skip
    asked = {"budget_hours": 1000, "instances": ["two-v100"], "max_instances": 2}
    before = recommend(db, "resnet50", 64, 1, 100_000, **asked)
    link = ("give its GPU link: `stash instances set two-v100 --interconnect LINK` (NVSwitch, NVLink, PCIe, "
            "PCIe peer-to-peer or none)")  # fmt: skip
    profile = "`stash profile --model resnet50 --batch-size 64 --workers 2 --instance two-v100`"
    assert any(reason.startswith("1 x two-v100: ") and f"({link}; or a profile there makes it measured: "
               f"{profile})" in reason for reason in before.excluded), before.excluded  # fmt: skip
    assert any(reason.startswith("2 x two-v100: ") and reason.endswith(f"({link})")
               for reason in before.excluded)  # fmt: skip
    set_instance(db, "two-v100", interconnect="PCIe")  # the advice followed
    after = recommend(db, "resnet50", 64, 1, 100_000, **asked)
    assert "1 x two-v100" in set(after.options["config"])
    assert any("give its network: `stash instances set two-v100 --network-gbps GBPS`" in reason
               for reason in after.excluded), after.excluded  # fmt: skip
    set_instance(db, "two-v100", network_gbps=25)
    both = recommend(db, "resnet50", 64, 1, 100_000, **asked)
    assert {"1 x two-v100", "2 x two-v100"} <= set(both.options["config"]), both.excluded


def test_without_a_budget_the_api_names_its_own_arguments(tmp_path):
    """It said "give a time budget (hours), a cost limit (USD) or both", naming neither argument."""
    said = r"^give budget_hours \(a time budget\), max_usd \(a cost limit\) or both$"
    with pytest.raises(UsageError, match=said):
        recommend(tmp_path / "r.duckdb", "resnet18", 32, 1, 10_000)


def test_the_recommended_time_is_never_shown_over_the_budget_it_meets(tmp_path, capsys):
    """A budget of 15.98 h recommended a row shown as "16.0 h": the row met the budget, not its rounding."""
    from stash_core.cli.main import main

    job = ["recommend", "--model", "resnet50", "--batch-size", "64", "--epochs", "90", "--dataset-samples",
           "1281167", "--db", str(tmp_path / "r.duckdb")]  # fmt: skip
    assert main([*job, "--budget-hours", "1000", "--format", "json"]) == 0
    best_h = json.loads(capsys.readouterr().out)["recommended"]["training_h"]
    budget_h = math.ceil(best_h * 1e4) / 1e4  # a budget just above the cheapest option's time
    assert main([*job, "--budget-hours", str(budget_h)]) == 0
    out = capsys.readouterr().out
    hours = {"min": 1 / 60, "h": 1.0, "d": 24.0}
    shown = re.search(r"meets the constraints: ([0-9.]+) (min|h|d) ", out)
    assert shown and float(shown.group(1)) * hours[shown.group(2)] <= budget_h, out
    first_row = next(line for line in out.splitlines() if line.strip().startswith("1 "))
    row = re.search(r"predicted +\S+ \S+ +([0-9.]+) (min|h|d) ", first_row)
    assert row and float(row.group(1)) * hours[row.group(2)] <= budget_h, first_row


def test_recommend_and_predict_state_the_workers_of_their_job_under_one_key(tmp_path, capsys):
    from stash_core.cli.main import main

    db = str(tmp_path / "r.duckdb")
    job = ["--model", "resnet18", "--batch-size", "32", "--format", "json", "--db", db]
    budget = ["--epochs", "1", "--dataset-samples", "10000", "--budget-hours", "10"]
    assert main(["recommend", *job, *budget]) == 0
    recommended = json.loads(capsys.readouterr().out)["job"]
    assert main(["predict", *job]) == 0
    predicted = json.loads(capsys.readouterr().out)["job"]
    assert recommended["workers_per_instance"] == predicted["workers_per_instance"] == "all GPUs"
    assert "workers" not in recommended


def test_a_job_on_fewer_gpus_than_an_instance_has_uses_that_many_of_each(db, capsys):
    from stash_core.cli.main import main
    from stash_core.decide.recommend.explain import job_headline

    result = _ask(db, workers_per_instance=4)
    options = result.options.set_index("config")
    assert set(result.options["workers_per_instance"]) == {4}
    assert options.loc["2 x half4", "source"] == "measured"  # the 2 x 4-worker profile is this job
    assert "one1: 1 GPU(s), fewer than the 4 workers per instance asked (one per GPU)" in result.excluded
    # big8's 8-worker profile is not: its interconnect stall on 4 GPUs has no figure (no link in the catalog)
    unpredicted = "1-2 x big8: interconnect stall cannot be predicted"  # one reason for both counts
    assert any(line.startswith(unpredicted) for line in result.excluded)
    assert result.request["workers_per_instance"] == 4
    assert "4 worker(s) per instance, one per GPU" in job_headline(result.request)
    one = _ask(db, workers_per_instance=1).options.set_index("config")
    assert one.loc["1 x big8 (1 of 8 GPUs each)", "source"] == "predicted"  # from big8's compute
    assert one.loc["1 x big8 (1 of 8 GPUs each)", "interconnect_s"] == 0.0

    argv = ["recommend", "--model", "resnet50", "--batch-size", "64", "--epochs", "90", "--dataset-images",
            str(IMAGES), "--budget-hours", "1000", "--instances", "big8,half4", "--db", str(db)]  # fmt: skip
    assert main([*argv, "--workers-per-instance", "1", "--all"]) == 0
    lines = capsys.readouterr().out.splitlines()
    header = next(line for line in lines if "configuration" in line)
    row = next(line for line in lines if "2 x big8 (1 of 8 GPUs each)" in line)
    # the label is wider than the column was: the workers column still lines up under its heading
    assert row.index("1/8") + 3 == header.index("workers") + len("workers")
    assert main([*argv, "--workers-per-instance", "0"]) == 2
    assert "--workers-per-instance: must be a positive integer, got 0" in capsys.readouterr().err


def test_a_cpu_machine_profiled_with_other_workers_than_asked_says_so(tmp_path) -> None:
    """It said "no GPU and no profile of this job on it" beside a 2-worker profile of the job there."""
    db = tmp_path / "cpu.duckdb"
    add_instance(db, name="box2", vcpus=2, on_demand_usd_per_h=0.1)
    ingest_result(db, result_doc("resnet50", instance="box2", workers=2, batch_size=64,
                                 stalls={"compute": 0.2, "interconnect": 0.05, "cpu": 0.01, "disk": 0.01}))
    result = recommend(db, "resnet50", 64, 1, 10_000, budget_hours=1000.0, instances=["box2"],
                       workers_per_instance=1)  # fmt: skip
    assert result.excluded == [
        "box2: no GPU, and no profile of this job on it has the 1 worker(s) per machine asked (it ran 2)"
    ]
    assert recommend(db, "resnet50", 64, 1, 10_000, budget_hours=1000.0, instances=["box2"],
                     workers_per_instance=2).best["source"] == "measured"  # fmt: skip


def test_a_measured_option_carries_its_profiles_interval_in_the_table_and_the_json(db, capsys):
    """`stash recommend` printed a measured option's ±err as '-' and its JSON had no interval, while the
    dashboard's card showed the profile's 95% interval: each now carries it, of the option's step."""
    from stash_core.cli.main import main

    best = _ask(db).best
    assert best["source"] == "measured"
    assert best["iteration_ci95_s"] == pytest.approx(0.01 * best["iteration_s"])  # result_doc stores 1%
    job = ["recommend", "--model", "resnet50", "--batch-size", "64", "--epochs", "90", "--dataset-samples",
           str(IMAGES), "--budget-hours", "24", "--instances", "big8,half4,one1", "--max-instances", "2",
           "--db", str(db)]  # fmt: skip
    assert main(job) == 0
    out = capsys.readouterr().out
    measured = next(line for line in out.splitlines() if line.strip().startswith("1 "))
    assert "measured" in measured and re.search(r" 1\.0% +- ", measured), measured
    assert "of a measured row its profile's 95% interval" in out
    assert main([*job, "--format", "json"]) == 0
    recommended = json.loads(capsys.readouterr().out)["recommended"]
    assert recommended["step_ci95_s"] == pytest.approx(0.01 * recommended["step_s"])
    predicted = [o for o in json.loads(json.dumps(_ask(db).to_json()))["options"] if o["source"] == "predicted"]
    assert predicted and all(option["step_ci95_s"] is None for option in predicted)
