"""A phase's samples and telemetry, held to what was measured."""

from __future__ import annotations

import pytest

from stash_core.errors import UsageError
from stash_core.results.phase_series import check_samples, check_telemetry


def test_pooled_launches_are_checked_against_their_iteration_weighted_means():
    """A slow launch stopped early has few iterations: the phase's mean (each launch weighing the same) was
    3.9 times the samples' average, and a file the profile wrote itself would have been refused."""
    samples = {"iteration_s": [0.01] * 96 + [0.5] * 4}
    launches = [{"round": 0, "mean_s": 0.01, "iterations": 96}, {"round": 1, "mean_s": 0.5, "iterations": 4}]
    check_samples("R3", samples, (0.01 + 0.5) / 2, launches)
    with pytest.raises(UsageError, match="far from the phase's mean, 0.255 s, though they are the same"):
        check_samples("R3", samples, (0.01 + 0.5) / 2)  # without launches: the phase's mean
    edited = {"iteration_s": [1e300] + [0.01] * 95 + [0.5] * 4}
    with pytest.raises(UsageError, match="far from its launches' means weighted by their iterations, 0.0296"):
        check_samples("R3", edited, (0.01 + 0.5) / 2, launches)


def test_a_launch_left_out_of_the_pooled_figures_is_left_out_of_the_check():
    """A round that not every run completed is not pooled, and its iterations are not among the samples: it
    was weighed in, and a profile's own file refused."""
    samples = {"iteration_s": [0.01] * 100}
    launches = [{"round": 0, "pooled": True, "mean_s": 0.01, "iterations": 100},
                {"round": 1, "pooled": False, "mean_s": 0.08, "iterations": 900}]  # fmt: skip
    check_samples("R1", samples, 0.01, launches)
    # launch figures no mean comes of (a file's hostile numbers): the phase's mean is the measure
    for bad in ({"mean_s": 0.01, "iterations": 10**400}, {"mean_s": -0.5, "iterations": 10}):
        check_samples("R1", samples, 0.01, [{"round": 0, **bad}])
    with pytest.raises(UsageError, match="far from the phase's mean"):
        check_samples("R1", samples, 0.5, [{"round": 0, "mean_s": -0.5, "iterations": 10}])


def test_samples_without_times_or_a_mean_are_left_as_they_are():
    check_samples("R0", {}, 0.1)
    check_samples("R0", {"iteration_s": [None, None]}, 0.1)  # iterations that were not timed
    check_samples("R0", {"iteration_s": [0.2, 0.3]}, None)  # a phase with no mean: nothing to hold them to


def test_telemetry_holds_measured_values_only():
    metrics = {"gpu0_util_pct": [0.0, 100.0], "gpu0_power_w": [70.0, None]}
    check_telemetry("R0", {"t_s": [0.0, 0.5], "metrics": metrics})
    with pytest.raises(UsageError, match="gpu0_util_pct holds 100.5; a measured value lies between 0 and"):
        check_telemetry("R0", {"t_s": [0.0], "metrics": {"gpu0_util_pct": [100.5]}})
