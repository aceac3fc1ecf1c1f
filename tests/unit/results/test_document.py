"""The result document's declared keys (results/document.py) are the documented ones (docs/schema.md's
table, rendered from results/doc.py): a key added to one and not the other fails here."""

from __future__ import annotations

import re

from stash_core.results import doc
from stash_core.results.document import TOP_KEYS


def test_the_declared_top_keys_are_the_documented_ones():
    documented = set()
    for row in doc._key_rows():
        documented |= set(re.findall(r"`([a-z_]+)`", row.split("|")[1]))
    assert documented == set(TOP_KEYS)


def test_the_declared_iteration_statistics_are_what_the_summary_writes():
    from dataclasses import fields

    from stash_core.analysis.stats import SampleSummary
    from stash_core.results.document import IterationStats

    assert list(IterationStats.__annotations__) == [field.name for field in fields(SampleSummary)]
