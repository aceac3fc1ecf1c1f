"""One cloud campaign at a time on a cluster: a second one is refused in one line before it launches."""

from __future__ import annotations

import os

import pytest

from stash_core.campaign.cluster_locks import hold_clusters, release_clusters
from stash_core.errors import UsageError


def test_a_cluster_held_by_one_campaign_is_refused_to_another_until_it_ends(monkeypatch, tmp_path):
    monkeypatch.setenv("STASH_CACHE_DIR", str(tmp_path))
    first = hold_clusters(["stash-g6-xlarge-aaaaaa", "stash-g5-xlarge-bbbbbb"])
    with pytest.raises(UsageError) as refused:
        hold_clusters(["stash-g4dn-xlarge-cccccc", "stash-g5-xlarge-bbbbbb"])
    assert str(refused.value) == (
        f"cluster stash-g5-xlarge-bbbbbb is in use by another cloud campaign of this database (process "
        f"{os.getpid()}): let it end first, or give this one another --db"
    )
    release_clusters(hold_clusters(["stash-g4dn-xlarge-cccccc"]))  # the refused campaign held nothing
    release_clusters(first)
    release_clusters(hold_clusters(["stash-g5-xlarge-bbbbbb"]))  # released when the first campaign ended


def test_a_lock_that_cannot_be_made_is_refused_in_one_line(monkeypatch, tmp_path):
    """A campaign that cannot hold its clusters would run unguarded where the docs promise a refusal."""
    (tmp_path / "file").write_text("")
    monkeypatch.setenv("STASH_CACHE_DIR", str(tmp_path / "file"))  # a file: no folder can be made in it
    with pytest.raises(UsageError, match=r"^cannot hold cluster stash-g6-xlarge-aaaaaa for this campaign: "):
        hold_clusters(["stash-g6-xlarge-aaaaaa"])
    monkeypatch.setenv("STASH_CACHE_DIR", str(tmp_path / "cache"))
    (tmp_path / "cache" / "cloud-clusters").mkdir(parents=True)
    (tmp_path / "cache" / "cloud-clusters" / "stash-g6-xlarge-aaaaaa.lock").symlink_to(tmp_path / "elsewhere")
    with pytest.raises(UsageError, match="cannot hold cluster"):  # a link put there: not followed
        hold_clusters(["stash-g6-xlarge-aaaaaa"])
    assert not (tmp_path / "elsewhere").exists()
