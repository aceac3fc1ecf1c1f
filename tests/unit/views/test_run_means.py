"""Several runs of one job on one instance as one row: the interval of their mean is no narrower than the
runs' disagreement says (it was the mean of their own intervals: 122 and 244 ms read "183 ± 14 ms")."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from stash_core.analysis.stats import t_quantile_975
from stash_core.views.run_means import mean_ci95_of, mean_of


def test_runs_that_disagree_state_the_spread_of_their_mean() -> None:
    runs = pd.DataFrame({"iteration_s": [0.122, 0.244], "iteration_ci95_s": [0.014, 0.014]})
    assert mean_of(runs, "iteration_s") == pytest.approx(0.183)
    spread = t_quantile_975(1) * pd.Series([0.122, 0.244]).std() / math.sqrt(2)
    assert mean_ci95_of(runs, "iteration_s") == pytest.approx(spread)
    assert mean_ci95_of(runs, "iteration_s") > 0.061  # holds both runs


def test_runs_that_agree_keep_their_own_intervals_combined() -> None:
    runs = pd.DataFrame({"compute_s": [0.100, 0.1001], "compute_ci95_s": [0.010, 0.010]})
    assert mean_ci95_of(runs, "compute_s") == pytest.approx(math.sqrt(2 * 0.010**2) / 2)


def test_one_run_and_missing_figures() -> None:
    one = pd.DataFrame({"disk_s": [0.2], "disk_ci95_s": [0.05]})
    assert mean_ci95_of(one, "disk_s") == pytest.approx(0.05)
    assert math.isnan(mean_of(one, "network_s")) and math.isnan(mean_ci95_of(one, "network_s"))
