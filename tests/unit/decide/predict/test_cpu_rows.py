"""A CPU instance's rows in `stash predict`: the configurations its profiles measured, and a line for every
configuration asked that was not profiled."""

from __future__ import annotations

from stash_core.decide.predict.configuration import ConfigPrediction
from stash_core.decide.predict.cpu_rows import CPU_MEASURED, cpu_instance_rows


def _measured(workers: int, count: int) -> ConfigPrediction:
    return ConfigPrediction("mycpu", None, count, workers, "measured", "profile r1", 0.1, 0.0, 0.0, None,
                            None, None, [], measured=True)  # fmt: skip


def test_machine_counts_of_a_profiled_cpu_instance_that_were_not_profiled_are_named():
    """`predict --max-instances 3` gave the profiled 1 x mycpu and left 2 and 3 machines out without a word,
    where `recommend` ranks them (estimated from the profile)."""
    kept, reasons = cpu_instance_rows("mycpu", {"mycpu": [_measured(2, 1)]}, 3, None)
    assert [(found.workers_per_instance, found.instance_count) for found in kept] == [(2, 1)]
    assert len(reasons) == 1
    assert reasons[0].startswith("mycpu: 2, 3 machine(s) not profiled (2 worker(s) each)")
    assert CPU_MEASURED in reasons[0] and "stash recommend" in reasons[0]


def test_every_asked_count_profiled_leaves_nothing_to_say():
    kept, reasons = cpu_instance_rows("mycpu", {"mycpu": [_measured(2, 1), _measured(2, 2)]}, 2, None)
    assert len(kept) == 2 and reasons == []
