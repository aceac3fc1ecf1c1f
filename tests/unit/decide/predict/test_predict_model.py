"""The compute model of stash_core.decide.predict: FLOP counts, the accelerator table, calibration."""

import pytest

from stash_core.catalog.accelerators import find_accelerator
from stash_core.decide.predict.calibration import GRID, Point, arrays_for, fit_efficiencies, predicted_s
from stash_core.decide.predict.memory import memory_check
from stash_core.decide.predict.roofline import Efficiency, compute_time
from stash_core.decide.predict.step_cost import step_cost
from stash_core.errors import UsageError


def test_resnet50_forward_flops_match_the_published_figure():
    # ~4.1 G multiply-adds per 224x224 image; torch's counter counts a multiply-add as 2 FLOPs.
    cost = step_cost("resnet50", 1)
    assert cost.forward_flops / 2 == pytest.approx(4.1e9, rel=0.02)
    assert cost.param_count == 25_557_032
    # Backward costs about twice the forward (gradients of inputs and of weights).
    assert cost.total_flops / cost.forward_flops == pytest.approx(3.0, rel=0.05)
    assert cost.device == "meta"


def test_flops_scale_with_the_batch_and_vgg16_matches_its_figure():
    assert step_cost("resnet50", 8).forward_flops == pytest.approx(8 * step_cost("resnet50", 1).forward_flops)
    # VGG-16: ~15.5 G multiply-adds per image.
    assert step_cost("vgg16", 1).forward_flops / 2 == pytest.approx(15.5e9, rel=0.03)


def test_unknown_model_and_bad_batch_are_usage_errors():
    with pytest.raises(UsageError, match="unknown model"):
        step_cost("resnet5", 4)
    with pytest.raises(UsageError, match="batch size"):
        step_cost("resnet50", 0)


def test_catalog_and_skypilot_names_find_the_same_accelerator():
    assert find_accelerator("NVIDIA V100 16 GB").name == "NVIDIA V100 16 GB"
    assert find_accelerator("V100").name == "NVIDIA V100 16 GB"
    assert find_accelerator("A100-80GB").name == "NVIDIA A100 80 GB"
    assert find_accelerator("A100").name == "NVIDIA A100 40 GB"
    assert find_accelerator("Gaudi HL-205") is None
    assert all(
        row.source for row in [find_accelerator(n) for n in ("K80", "M60", "T4", "L4", "H200", "L40S")]
    )


def test_calibration_recovers_efficiencies_from_synthetic_measurements():
    truth = Efficiency({"fp32": 0.55, "amp": 0.35}, memory=0.6)
    points = []
    for gpu in ("NVIDIA V100 16 GB", "NVIDIA T4", "NVIDIA A100 40 GB"):
        for precision in ("fp32", "amp"):
            probe = Point("resnet18", 32, gpu, precision, 1.0, "synthetic")
            seconds = float(predicted_s(arrays_for(probe), truth.for_precision(precision), truth.memory)[0])
            points.append(Point("resnet18", 32, gpu, precision, seconds, "synthetic"))
    fitted = fit_efficiencies(points)
    step = GRID[1] / GRID[0]  # one grid step of the geometric grid
    assert fitted.memory == pytest.approx(0.6, rel=step - 1)
    assert fitted.matrix["fp32"] == pytest.approx(0.55, rel=step - 1)
    assert fitted.matrix["amp"] == pytest.approx(0.35, rel=step - 1)


def test_roofline_is_faster_on_a_faster_gpu_and_memory_check_refuses():
    cost = step_cost("resnet18", 32)
    efficiency = Efficiency({"pooled": 0.5}, 0.5)
    t4 = compute_time(cost, find_accelerator("T4"), "fp32", efficiency).step_s
    a100 = compute_time(cost, find_accelerator("A100"), "fp32", efficiency).step_s
    assert a100 < t4
    big = step_cost("resnet50", 512)
    check = memory_check(big, find_accelerator("T4"), "fp32")
    assert not check.fits and "16 GB" in check.note
    assert memory_check(step_cost("resnet50", 64), find_accelerator("T4"), "fp32").fits


def test_more_workers_per_instance_than_gpus_is_a_reason_not_a_silent_cap(tmp_path):
    from stash_core.decide.predict import predict_instances

    result = predict_instances(tmp_path / "p.duckdb", "resnet18", 8, instances=["g4dn.xlarge", "p3.8xlarge"],
                               workers_per_instance=4)  # fmt: skip
    assert list(result.frame["instance"]) == ["p3.8xlarge"]
    reason = "g4dn.xlarge: not predicted - it has 1 GPU(s), the job uses 4 per machine"
    assert result.not_predictable == [reason]
