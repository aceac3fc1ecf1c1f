"""The spread drawn across each configuration's stall bar on the Recommend page: a measured one's 95%
interval, a predicted one's stated error; the chart had none, beside a card that said "±49%"."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from stash_core.views.step_spread import step_bounds, with_step_bounds


def test_a_predicted_step_spreads_by_its_stated_error_and_a_measured_one_by_its_interval() -> None:
    predicted = {"iteration_s": 0.2, "source": "predicted", "expected_error": 0.4, "comm_error": 0.1}
    assert step_bounds(predicted) == pytest.approx((0.1, 0.3))
    measured = {"iteration_s": 0.2, "source": "measured", "iteration_ci95_s": 0.01, "expected_error": 0.4}
    assert step_bounds(measured) == pytest.approx((0.19, 0.21))
    assert step_bounds({"iteration_s": 0.2, "source": "predicted"}) == (None, None)  # no error stated
    assert step_bounds({"iteration_s": 0.2, "source": "predicted", "expected_error": 1.5})[0] == 0.0


def test_each_bar_gets_one_line_across_its_end() -> None:
    long = pd.DataFrame({"run_label": ["a", "a", "b"], "stall": ["compute", "network", "compute"],
                         "error_low": [0.1, 0.2, 0.3], "error_high": [0.2, 0.3, 0.4]})  # fmt: skip
    options = pd.DataFrame([{"config": "a", "iteration_s": 1.0, "source": "predicted", "expected_error": 0.5},
                            {"config": "b", "iteration_s": 2.0, "source": "measured"}])  # fmt: skip
    drawn = with_step_bounds(long, options)
    assert math.isnan(drawn["step_low"][0])  # one line a bar, on its last part
    assert (drawn["step_low"][1], drawn["step_high"][1]) == (0.5, 1.5)
    assert math.isnan(drawn["step_low"][2])  # a measured one without its interval: nothing drawn
    assert drawn["error_low"].tolist() == [0.1, 0.2, 0.3]  # the parts' own intervals stay
