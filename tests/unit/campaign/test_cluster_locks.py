"""One cloud campaign at a time on a cluster: a second one is refused in one line before it launches."""

from __future__ import annotations

import os

import pytest

from stash_core.campaign.cluster_locks import clusters_held
from stash_core.errors import UsageError


def test_a_cluster_held_by_one_campaign_is_refused_to_another_until_it_ends(monkeypatch, tmp_path):
    monkeypatch.setenv("STASH_CACHE_DIR", str(tmp_path))
    with clusters_held(["stash-g6-xlarge-aaaaaa", "stash-g5-xlarge-bbbbbb"]):
        with pytest.raises(UsageError) as refused, clusters_held(["stash-g5-xlarge-bbbbbb"]):
            pass
        assert str(refused.value) == (
            f"cluster stash-g5-xlarge-bbbbbb is in use by another cloud campaign of this database (process "
            f"{os.getpid()}): let it end first, or give this one another --db"
        )
        with clusters_held(["stash-g4dn-xlarge-cccccc"]):  # another cluster: no conflict
            pass
    with clusters_held(["stash-g5-xlarge-bbbbbb"]):  # released when the first campaign ended
        pass


def test_a_cache_folder_that_cannot_be_written_runs_the_campaign_unguarded(monkeypatch, tmp_path):
    (tmp_path / "file").write_text("")
    monkeypatch.setenv("STASH_CACHE_DIR", str(tmp_path / "file"))  # a file: no folder can be made in it
    with clusters_held(["stash-g6-xlarge-aaaaaa"]):
        pass
