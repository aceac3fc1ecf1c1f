"""Which worker counts a spot profile runs here (the measures of a training: spot/ps_exchanges.py)."""

from __future__ import annotations

from stash_core.spot.workload_profile import holdable_counts


def test_counts_beyond_the_memory_are_left_out_with_a_note():
    kept, notes = holdable_counts([1, 2, 4, 7], param_count=10**10)  # 40 GB of parameters per process
    assert kept == [] and "left out 1, 2, 4, 7" in notes[0]
