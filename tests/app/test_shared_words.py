"""pages._shared's words for figures: how long ago a run was, and a run from a clock that runs ahead."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from pages._shared import ago_text


def test_a_run_is_said_ago_and_one_from_a_clock_ahead_is_said_so():
    """A run started 20 hours ahead of this machine's clock (within the day's leeway a result file gets) was
    "Last run 0 s ago"."""
    now = datetime.now(UTC)
    assert ago_text(now - timedelta(minutes=3)) == "3 min ago"
    assert ago_text(now - timedelta(days=3)) == "3 days ago"
    assert ago_text(now + timedelta(seconds=20)) == "0 s ago"  # the clocks' usual disagreement
    assert ago_text(now + timedelta(hours=20)) == "20 h ahead of this clock"
    assert ago_text(None) == "–"
