"""Leave-one-GPU-out validation and the predictions per instance, on small fixtures."""

import pandas as pd
import pytest

from stash_core.decide.predict.calibration import Point, arrays_for, predicted_s
from stash_core.decide.predict.configuration import Predictor
from stash_core.decide.predict.roofline import Efficiency
from stash_core.decide.predict.validation import leave_one_gpu_out, published_points, scaled_from_other_gpu


def _synthetic(efficiency, gpus, model="resnet18", batch=16):
    points = []
    for gpu in gpus:
        probe = Point(model, batch, gpu, "fp32", 1.0, "fixture")
        seconds = float(
            predicted_s(arrays_for(probe), efficiency.for_precision("fp32"), efficiency.memory)[0]
        )
        points.append(Point(model, batch, gpu, "fp32", seconds, "fixture"))
    return points


def test_leave_one_gpu_out_is_exact_when_every_gpu_has_the_same_efficiency():
    points = _synthetic(Efficiency({"fp32": 0.4}, 0.5), ("NVIDIA T4", "NVIDIA V100 16 GB", "NVIDIA A10G"))
    frame = leave_one_gpu_out(points)
    assert len(frame) == 3 and set(frame["accelerator"]) == {"NVIDIA T4", "NVIDIA V100 16 GB", "NVIDIA A10G"}
    assert frame["abs_error"].max() < 0.06  # one grid step


def test_leave_one_gpu_out_shows_the_error_of_a_gpu_unlike_the_others():
    points = _synthetic(Efficiency({"fp32": 0.4}, 0.5), ("NVIDIA T4", "NVIDIA V100 16 GB"))
    slow = Point("resnet18", 16, "NVIDIA A10G", "fp32", 1.0, "fixture")
    seconds = float(predicted_s(arrays_for(slow), 0.2, 0.25)[0])  # half the efficiency
    points.append(Point("resnet18", 16, "NVIDIA A10G", "fp32", seconds, "fixture"))
    frame = leave_one_gpu_out(points).set_index("accelerator")
    assert frame.loc["NVIDIA A10G", "error"] == pytest.approx(1.0, abs=0.15)  # predicted twice as fast


def test_published_figures_have_a_source_each_and_scaling_is_validated():
    points = published_points()
    assert len(points) >= 6 and all("DeepLearningExamples" in point.source for point in points)
    scaled = scaled_from_other_gpu(points)
    assert len(scaled) and scaled["method"].str.startswith("scaled from").all()


def _catalog():
    return {
        "t4box": {"accelerator": "NVIDIA T4", "accelerator_count": 1, "interconnect": "none",
                  "network_gbps": 25.0},
        "v100x4": {"accelerator": "NVIDIA V100 16 GB", "accelerator_count": 4, "interconnect": "NVLink",
                   "network_gbps": 10.0},
        "tpu": {"accelerator": "Google TPU v9", "accelerator_count": 1},
    }  # fmt: skip


def test_a_measured_profile_on_one_instance_scales_the_prediction_of_another():
    fresh = Predictor("resnet18", 32, _catalog())
    before = fresh.predict("v100x4", 4, 1)
    assert before.path == "roofline"
    # A profile on the T4 machine that took twice what the roofline says for the T4.
    t4_roofline = fresh.predict("t4box", 1, 1).compute_s
    profile = {"run_id": "r1", "model": "resnet18", "batch_size": 32, "instance": "t4box",
               "workers_per_node": 1, "compute_s": 2 * t4_roofline}  # fmt: skip
    informed = Predictor("resnet18", 32, _catalog(), [profile])
    measured = informed.predict("t4box", 1, 1)
    assert measured.path == "measured" and measured.compute_s == pytest.approx(2 * t4_roofline)
    after = informed.predict("v100x4", 4, 1)
    assert after.path == "scaled" and "r1" in after.basis
    # The V100 keeps its roofline ratio to the T4 (from the recalibrated efficiencies) times the measurement.
    ratio_efficiency = informed.efficiency
    from stash_core.catalog.accelerators import find_accelerator
    from stash_core.decide.predict.roofline import compute_time

    cost = informed.cost
    ratio = (
        compute_time(cost, find_accelerator("V100"), "fp32", ratio_efficiency).step_s
        / compute_time(cost, find_accelerator("T4"), "fp32", ratio_efficiency).step_s
    )
    assert after.compute_s == pytest.approx(2 * t4_roofline * ratio)
    assert after.compute_s > before.compute_s  # the slower-than-predicted T4 slows the V100's prediction


def test_unknown_accelerator_and_multi_gpu_communication():
    predictor = Predictor("resnet18", 32, _catalog())
    assert "no entry in the accelerator table" in predictor.predict("tpu", 1, 1)
    single = predictor.predict("v100x4", 4, 1)
    double = predictor.predict("v100x4", 4, 2)
    assert single.network_s == 0 and single.interconnect_s > 0
    assert double.network_s > 0 and double.iteration_s > single.iteration_s
    assert isinstance(pd.DataFrame([vars(single)]), pd.DataFrame)
