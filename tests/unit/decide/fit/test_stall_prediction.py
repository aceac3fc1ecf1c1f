"""The stall of a model never profiled (decide/fit/stall_prediction.py, unprofiled.py)."""

from __future__ import annotations

import pandas as pd
import pytest
from fit_observations import stall_observations

from stash_core.decide.fit import (
    beta_from_gbps,
    fit_stall_models,
    predict_stall,
    ring_factor,
)
from stash_core.errors import UsageError


def test_predict_stall_single_worker_unprofiled_and_ambiguous():
    observations = pd.concat(
        [stall_observations(lambda b, t, n: 1e-9 * b + 0.01, instance=name) for name in ("a", "b")],
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


def test_another_node_count_borrows_the_alpha_beta_scale():
    # Profiled at 2 nodes only; asked about 4 nodes at the same bandwidth.
    def stall_2_nodes(b, t, n):
        return 0.6 * ring_factor(4) * b * beta_from_gbps(10)

    observations = stall_observations(
        stall_2_nodes, "network", nodes=2, bandwidth_gbps=10.0, instance="cloud"
    )
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


def test_a_link_given_answers_where_too_few_profiles_fit_a_model():
    """With the user's link (--alpha-s and --link-gbps), a configuration with two profiles said 'no model:
    not enough profiles' while one with none got the link's uncalibrated answer."""
    counts = {"grad_bytes": 5e7, "grad_tensor_count": 10, "layer_count": 10}
    observations = stall_observations(lambda b, t, n: 1e-9 * b + 0.01, instance="a").head(2)
    link = {"alpha_s": 0.001, "beta_s_per_byte": beta_from_gbps(1.0)}
    report = fit_stall_models(
        observations=observations, probes=pd.DataFrame(), stalls=("interconnect",), **link
    )
    asked = dict(counts=counts, stall="interconnect", workers_per_node=2, instance="a", report=report)
    bare = predict_stall(**asked)  # no link given: nothing to say
    assert bare["stall_s"] is None and bare["status"].startswith("no model")
    answer = predict_stall(**asked, **link)
    unprofiled = predict_stall(**{**asked, "workers_per_node": 3}, **link)
    assert answer["stall_s"] > 0 and "uncalibrated" in answer["status"] and answer["expected_mape"] is None
    assert "no model of this profiled configuration yet" in answer["note"]
    assert "uncalibrated" in unprofiled["status"] and unprofiled["stall_s"] > answer["stall_s"]


def test_a_prediction_at_an_unprofiled_bandwidth_or_node_count_says_when_its_bytes_extrapolate():
    """Only a profiled configuration's answer warned of gradient bytes far outside the profiled ones."""

    def stall(gbps):
        return lambda b, t, n: 0.6 * ring_factor(4) * b * beta_from_gbps(gbps) + 0.001

    observations = pd.concat(
        [stall_observations(stall(gbps), "network", nodes=2, bandwidth_gbps=gbps, instance="c")
         for gbps in (1.0, 2.0)],
        ignore_index=True,
    )  # fmt: skip
    report = fit_stall_models(observations=observations, probes=pd.DataFrame(), stalls=("network",))
    huge = {"grad_bytes": 5e9, "grad_tensor_count": 100, "layer_count": 50}  # 10 to 200 MB profiled
    common = {"counts": huge, "stall": "network", "workers_per_node": 2, "instance": "c", "report": report}
    for nodes, gbps in ((2, 1.5), (3, 1.0)):
        answer = predict_stall(nodes=nodes, bandwidth_gbps=gbps, **common)
        assert answer["stall_s"] is not None and "not profiled" in answer["group"]
        assert "extrapolated: gradient bytes 4.66 GiB" in (answer["note"] or ""), answer
    inside = predict_stall(nodes=2, bandwidth_gbps=1.5, **{**common, "counts": {**huge, "grad_bytes": 5e7}})
    assert inside["note"] is None
