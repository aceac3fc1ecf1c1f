"""The measures of one PS training from its RESULT payloads: bandwidth, the busy-PS share, B_ps."""

from __future__ import annotations

import pytest

from stash_core.errors import MeasurementError
from stash_core.spot.ps_exchanges import summarise_ps_training


def _results():
    # 1000 parameters = 4000 bytes; worker 1 pushes at 0 and 10 (the PS idle), worker 2 at 1 and 11 (the PS
    # busy with worker 1 until 2 and 12): half the pushes met a busy PS.
    ps = {
        "role": "ps",
        "param_count": 1000,
        "services": [[1, 0.0, 0.5, 2.0], [2, 2.0, 2.1, 3.0], [1, 3.0, 10.5, 12.0], [2, 12.0, 12.1, 13.0]],
    }
    w1 = {
        "role": "worker",
        "rank": 1,
        "batch": 8,
        "records": [[0.1, 0.0, 2.0, 2.3, 1], [0.1, 10.0, 2.0, 2.1, 3]],
    }
    w2 = {
        "role": "worker",
        "rank": 2,
        "batch": 8,
        "records": [[0.3, 1.0, 2.0, 2.2, 2], [0.3, 11.0, 2.0, 2.0, 4]],
    }
    return [w2, ps, w1]


def test_the_busy_share_bandwidth_and_ps_rate_of_a_hand_worked_run():
    param_count, measure = summarise_ps_training(_results(), warmup=0)
    assert param_count == 1000 and measure.workers == 2 and measure.exchanges == 4
    assert measure.p_bottleneck == 0.5  # worker 2's pushes, both during worker 1's service
    assert measure.bandwidth_Bps == pytest.approx(2 * 4000 / 2.0)
    # 4 services of 8000 bytes over 2 + 1 + 2 + 1 = 6 s of serving
    assert measure.ps_Bps == pytest.approx(4 * 8000 / 6.0)
    assert measure.compute_s == pytest.approx(0.2)
    assert measure.loss_rows[0] == (1, 2.3, 8, 2)


def test_the_ps_bandwidth_leaves_out_the_warm_up_services_as_the_worker_bandwidth_does():
    """One worker: a cold first exchange of 2 s, then 0.5 s. Without the warm-up, B_req = 8000 / 0.5 and the
    PS served its 8000 bytes in 0.5 s; counting the cold service too gave B_ps 16000 / 2.5 < B_req."""
    ps = {"role": "ps", "param_count": 1000, "services": [[1, 0.0, 1.5, 2.0], [1, 10.0, 10.2, 10.5]]}
    worker = {"role": "worker", "rank": 1, "batch": 8,
              "records": [[0.1, 0.0, 2.0, 2.3, 1], [0.1, 10.0, 0.5, 2.1, 2]]}  # fmt: skip
    _, measure = summarise_ps_training([ps, worker], warmup=1)
    assert measure.bandwidth_Bps == pytest.approx(8000 / 0.5)
    assert measure.ps_Bps == pytest.approx(8000 / 0.5)


def test_a_run_too_short_for_the_warmup_is_a_measurement_error():
    # the worker count, and a duration from the slowest step seen (2.3 s: 10 exchanges, 23 s): it named none
    said = (r"^with 2 worker\(s\), no exchange past the first 5 of each \(at most 2 made\): a step took up to "
            r"2\.3 s, so give --duration-s well above 23$")
    with pytest.raises(MeasurementError, match=said):
        summarise_ps_training(_results(), warmup=5)
