"""Every model of every group fitted, the best marked by held-out error (fit/selection.py, alpha_beta.py)."""

from __future__ import annotations

import pandas as pd
import pytest
from fit_observations import MODELS, stall_observations

from stash_core.decide.fit import (
    ALPHA_BETA,
    POOLED,
    beta_from_gbps,
    bucket_count,
    fit_stall_models,
    predict_stall,
    ring_factor,
)
from stash_core.errors import UsageError


def test_fit_marks_the_true_feature_set_best_and_reports_held_out_error():
    observations = stall_observations(lambda b, t, n: 0.002 + 1e-9 * b + 1e-4 * t)
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
            stall_observations(stall_at(gbps), "network", nodes=2, bandwidth_gbps=gbps, instance="emu")
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


def test_names_of_one_network_count_once_and_a_fit_they_cannot_tell_apart_is_never_best():
    """Six names with the same counts (shufflenet_v2 and shufflenet_v2_x1_0 are one network) are one DNN:
    no fit has enough DNNs, none is best, and a prediction says so (it was 'best', 0.0% expected error)."""
    observations = stall_observations(lambda b, t, n: 0.5)
    for column, value in (("grad_bytes", 10e6), ("grad_tensor_count", 20.0), ("layer_count", 15.0)):
        observations[column] = value
    report = fit_stall_models(observations=observations, probes=pd.DataFrame(), stalls=("interconnect",))
    summary = report.summary()
    assert not summary["best"].any() and (summary["models"] <= 1).all()
    counts = {"grad_bytes": 100e6, "grad_tensor_count": 161, "layer_count": 50}
    answer = predict_stall(counts=counts, stall="interconnect", workers_per_node=2, report=report)
    assert answer["stall_s"] is None and "not enough profiles" in answer["status"]


def test_a_bandwidth_never_profiled_is_not_predicted_from_fewer_dnns_than_a_profiled_one_needs():
    """One DNN profiled at 1 Gbit/s: no model there (1 of 3 DNNs), and so at 0.999 Gbit/s (it answered there
    with a bare 'predicted', its scale calibrated on the one DNN); the bandwidth asked for answers with its
    uncalibrated wire time, which says why."""
    one = stall_observations(lambda b, t, n: 1e-9 * b, "network", nodes=2, bandwidth_gbps=1.0, instance="emu")
    report = fit_stall_models(observations=one.iloc[:1], probes=pd.DataFrame(), stalls=("network",))
    counts = {"grad_bytes": 60e6, "grad_tensor_count": 50, "layer_count": 40}
    for gbps in (1.0, 0.999):
        answer = predict_stall(counts=counts, stall="network", workers_per_node=2, nodes=2, instance="emu",
                               bandwidth_gbps=gbps, report=report)  # fmt: skip
        assert "uncalibrated" in answer["method"] and "uncalibrated" in answer["status"], answer
        assert "not enough profiles (1 of 3" in answer["note"], answer


def test_a_prediction_far_outside_the_profiled_models_or_bandwidths_says_it_extrapolates():
    observations = stall_observations(lambda b, t, n: 0.002 + 1e-9 * b + 1e-4 * t)  # 10 to 200 MB
    report = fit_stall_models(observations=observations, probes=pd.DataFrame(), stalls=("interconnect",))
    inside = {"grad_bytes": 60e6, "grad_tensor_count": 50, "layer_count": 40}
    answer = predict_stall(counts=inside, stall="interconnect", workers_per_node=2, report=report)
    assert answer["stall_s"] is not None and answer["note"] is None
    far = {**inside, "grad_bytes": 82e9}
    answer = predict_stall(counts=far, stall="interconnect", workers_per_node=2, report=report)
    assert (
        "extrapolated: gradient bytes 76.4 GiB is far outside the profiled 9.54 MiB to 191 MiB"
        in answer["note"]
    )

    def stall_at(gbps):
        return lambda b, t, n: 0.7 * ring_factor(4) * b * beta_from_gbps(gbps) + 1e-3 * bucket_count(b)

    network = pd.concat(
        [stall_observations(stall_at(gbps), "network", nodes=2, bandwidth_gbps=gbps, instance="emu")
         for gbps in (1, 2, 4)], ignore_index=True
    )  # fmt: skip
    report = fit_stall_models(observations=network, probes=pd.DataFrame(), stalls=("network",))
    for gbps, extrapolated in ((3.0, False), (8e-6, True), (400.0, True)):
        answer = predict_stall(counts=inside, stall="network", workers_per_node=2, nodes=2, instance="emu",
                               bandwidth_gbps=gbps, report=report)  # fmt: skip
        assert answer["stall_s"] is not None and (answer["note"] is not None) == extrapolated, answer["note"]


def test_an_instance_label_with_a_rate_picks_its_bandwidth_and_a_batch_size_picks_its_group():
    """emulated@1gbit (as campaigns label runs) is the 1 Gbit/s configuration; with a bandwidth that says
    otherwise it is refused. Groups by batch size are told apart by the batch size."""
    network = pd.concat(
        [stall_observations(lambda b, t, n, g=gbps: 1e-9 * b / g, "network", nodes=2, bandwidth_gbps=gbps,
                            instance="emulated") for gbps in (0.2, 1.0)], ignore_index=True
    )  # fmt: skip
    report = fit_stall_models(observations=network, probes=pd.DataFrame(), stalls=("network",))
    counts = {"grad_bytes": 60e6, "grad_tensor_count": 50, "layer_count": 40}
    common = {"counts": counts, "stall": "network", "workers_per_node": 2, "nodes": 2, "report": report}
    labelled = predict_stall(instance="emulated@1gbit", **common)
    assert labelled["group"].endswith("1 Gbit/s") and labelled["stall_s"] is not None
    with pytest.raises(UsageError, match="is at 1 Gbit/s and the bandwidth given is 0.2 Gbit/s"):
        predict_stall(instance="emulated@1gbit", bandwidth_gbps=0.2, **common)
    sizes = (8, 16)
    by_batch = pd.concat([stall_observations(lambda b, t, n: 1e-9 * b).assign(batch_size=s) for s in sizes])
    report = fit_stall_models(observations=by_batch.reset_index(drop=True), probes=pd.DataFrame(),
                              stalls=("interconnect",), by_batch_size=True)  # fmt: skip
    with pytest.raises(UsageError, match="name the instance, bandwidth or batch size"):
        predict_stall(counts=counts, stall="interconnect", workers_per_node=2, report=report)
    answer = predict_stall(counts=counts, stall="interconnect", workers_per_node=2, batch_size=8,
                           report=report)  # fmt: skip
    assert "batch 8" in answer["group"] and answer["stall_s"] is not None


def test_a_fit_whose_features_are_collinear_is_never_best_even_with_the_lowest_held_out_error():
    """Its coefficients split the stall between collinear features arbitrarily, so a model off that line is
    predicted arbitrarily: the next-best fit is marked best instead."""
    from stash_core.decide.fit.linear import LinearFit
    from stash_core.decide.fit.selection import mark_best
    from stash_core.decide.fit.stall_model import StallModel

    def model(name, features, lomo, rank_deficient):
        fit = LinearFit(features, 0.0, tuple(0.0 for _ in features), 1.0, rank_deficient)
        return StallModel(stall="interconnect", group={"device": "cpu"}, name=name, kind="linear",
                          features=features, points=6, models=6, r2=1.0, lomo_mape=lomo,
                          linear=fit)  # fmt: skip

    collinear = model("linear: tensors+layers", ("grad_tensor_count", "layer_count"), 0.01, True)
    plain = model("linear: bytes", ("grad_bytes",), 0.05, False)
    mark_best([collinear, plain])
    assert (collinear.best, plain.best) == (False, True)


def test_a_stall_no_profile_measured_says_so_even_where_a_link_is_known():
    """All-zero stalls with a link (here the emulated bandwidth): the best was 'best by default: too few
    models for a held-out error' beside six models, where no percentage error of zero exists."""
    observations = stall_observations(lambda *_: 0.0, "network", nodes=2, bandwidth_gbps=1, instance="emu")
    report = fit_stall_models(observations=observations, probes=pd.DataFrame(), stalls=("network",))
    best = report.best("network", report.groups("network")[0])
    assert "every profiled model measured none of this stall" in best.note
    assert "too few models" not in best.note


def test_no_instance_named_picks_the_runs_made_without_one_beside_a_labelled_configuration():
    """A labelled and an unlabelled configuration of one device and worker count: the Models page, which
    predicts each configuration it lists, showed only 'several profiled configurations match' for both."""
    labelled = stall_observations(lambda b, t, n: 0.002 + 1e-9 * b, instance="box")
    unlabelled = stall_observations(lambda b, t, n: 0.004 + 2e-9 * b, instance=None)
    unlabelled["run_id"] += "-bare"
    observations = pd.concat([labelled, unlabelled], ignore_index=True)
    report = fit_stall_models(observations=observations, probes=pd.DataFrame(), stalls=("interconnect",))
    counts = {"grad_bytes": 60e6, "grad_tensor_count": 50, "layer_count": 40}
    bare = predict_stall(counts=counts, stall="interconnect", workers_per_node=2, device="cpu", report=report)
    assert bare["stall_s"] == pytest.approx(0.004 + 2e-9 * 60e6, rel=1e-6)
    boxed = predict_stall(counts=counts, stall="interconnect", workers_per_node=2, device="cpu",
                          instance="box", report=report)  # fmt: skip
    assert boxed["stall_s"] == pytest.approx(0.002 + 1e-9 * 60e6, rel=1e-6)


def test_runs_of_several_unlabelled_machines_fitted_together_say_so():
    """Profiles made without --instance on two machines were one configuration, fitted as if of one machine,
    without a word (the held-out error read 107%)."""
    observations = stall_observations(lambda b, t, n: 0.002 + 1e-9 * b, instance=None)
    observations["hostname"] = ["laptop", "laptop", "laptop", "gpu-box", "gpu-box", "gpu-box"]
    report = fit_stall_models(observations=observations, probes=pd.DataFrame(), stalls=("interconnect",))
    said = "runs of 2 machines without an instance label (gpu-box, laptop) fitted together"
    assert all(said in model.note for model in report.models)
    observations["hostname"] = "laptop"
    report = fit_stall_models(observations=observations, probes=pd.DataFrame(), stalls=("interconnect",))
    assert not any("machines without" in model.note for model in report.models)
    observations["instance"] = "box"  # labelled: the label is the machine
    observations["hostname"] = ["a", "b", "c", "d", "e", "f"]
    report = fit_stall_models(observations=observations, probes=pd.DataFrame(), stalls=("interconnect",))
    assert not any("machines without" in model.note for model in report.models)


def test_a_pooled_fit_on_one_bucket_count_is_collinear_says_so_and_answers_no_bandwidth():
    """Every profiled model in DDP's second bucket: the bucket count is the intercept again, and the pooled
    fit (R² 1.000, no note) answered a bandwidth never profiled for a model of three buckets."""
    def stall_at(gbps):
        return lambda b, t, n: 0.7 * ring_factor(4) * b * beta_from_gbps(gbps) + 2e-3

    frames = []
    for gbps in (0.2, 0.4, 0.8):
        frame = stall_observations(lambda *_: 0.0, "network", nodes=2, bandwidth_gbps=gbps, instance="emu")
        frame["grad_bytes"] = [5e6, 8e6, 12e6, 16e6, 20e6, 25e6]  # all two buckets (1 MiB, then 25 MiB)
        frame["stall_s"] = [stall_at(gbps)(b, 0, 0) for b in frame["grad_bytes"]]
        frames.append(frame)
    report = fit_stall_models(observations=pd.concat(frames, ignore_index=True), probes=pd.DataFrame(),
                              stalls=("network",))  # fmt: skip
    pooled = [model for model in report.models if model.name == POOLED]
    assert pooled and all("features are collinear here" in model.note for model in pooled)
    counts = {"grad_bytes": 60e6, "grad_tensor_count": 50, "layer_count": 40}  # three buckets
    answer = predict_stall(counts=counts, stall="network", workers_per_node=2, nodes=2, instance="emu",
                           bandwidth_gbps=0.6, report=report)  # fmt: skip
    assert answer["method"] == ALPHA_BETA and POOLED not in [row["fit"] for row in answer["candidates"]]


def test_a_stalls_residuals_without_a_group_are_all_of_its_groups():
    observations = stall_observations(lambda b, t, n: 0.002 + 1e-9 * b)
    report = fit_stall_models(observations=observations, probes=pd.DataFrame(), stalls=("interconnect",))
    assert len(report.residuals("interconnect")) == len(report.residuals()) > 0
    group = report.groups("interconnect")[0]
    assert len(report.residuals("interconnect", group)) == len(report.residuals())
    assert report.residuals("network").empty
