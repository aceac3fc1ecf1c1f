"""The order in which the suite's files run: those that hold a long test first.

CI runs most of the suite in two pytest-xdist processes that take a whole file at a time, in collection order
(scripts/test_tiers.sh: --dist loadfile --no-loadscope-reorder). A long file taken last runs alone while the
other process idles; taken first, the many short files fill in beside it. The longest files start real
measuring processes (`launches`) or a browser (`e2e`); then those with a test marked `slow`.
"""

from __future__ import annotations

import pytest

RANKS = (("launches", "e2e"), ("slow",))  # the first rank runs first; files with none of these marks last


@pytest.hookimpl(trylast=True)  # after -m has deselected: rank what runs
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    rank_of: dict = {}
    for item in items:
        for rank, marks in enumerate(RANKS):
            if any(item.get_closest_marker(mark) for mark in marks):
                rank_of[item.path] = min(rank, rank_of.get(item.path, rank))
    items.sort(key=lambda item: rank_of.get(item.path, len(RANKS)))  # stable: a file's tests keep their order
