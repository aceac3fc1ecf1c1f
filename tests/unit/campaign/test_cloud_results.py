"""A cloud campaign's result files brought back: each run in a file of its own, under the results folder
beside the database unless --results-dir says where, named in the database by its full path."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import duckdb
from result_docs import result_doc

from stash_core.campaign import cloud, cloud_results
from stash_core.campaign.cloud_plan import InstancePlan, Offer, ProfileEstimate
from stash_core.campaign.plan import CampaignItem
from stash_core.campaign.remote import Finished

ITEM = CampaignItem("resnet18", 32, 1, 1, "g6.xlarge")
OFFER = Offer("g6.xlarge", "aws", "us-east-1", "us-east-1", 1, "L4", 0.8048, False, "2026-11-25")
PLAN = InstancePlan(OFFER, "stash-g6-xlarge-50296e", [ProfileEstimate(ITEM, 90.0, "step model")], [])


def _copied_back(monkeypatch, copier, doc: dict) -> tuple[str, str]:
    text = json.dumps(doc)
    def cat(target, argv, timeout_s):  # `ssh CLUSTER cat FILE`
        return subprocess.CompletedProcess(argv, 0, text, "")

    monkeypatch.setattr(cloud_results, "run_remote", cat)
    return copier.fetch(PLAN, ITEM, Finished(1, 1, 0, copier.file_name(ITEM)))


def test_two_runs_of_one_configuration_keep_a_file_each(monkeypatch, tmp_path):
    """The file was named by the configuration alone: a second run of it (a retry, another --input-shape)
    replaced the first one's file, which the database still named as its source."""
    db = tmp_path / "c.duckdb"
    copier = cloud_results.ResultCopier(db, tmp_path / "results")
    runs = ["20261201T000000Z-aaaaaaaa", "20261202T000000Z-bbbbbbbb"]
    for run_id in runs:
        assert _copied_back(monkeypatch, copier, result_doc(run_id=run_id)) == ("completed", run_id)
    with duckdb.connect(str(db), read_only=True) as con:
        rows = con.execute("SELECT run_id, source_file FROM runs ORDER BY run_id").fetchall()
    assert [run_id for run_id, _ in rows] == runs
    for run_id, source in rows:
        assert Path(source).name.endswith(f"-{run_id}.json")
        assert json.loads(Path(source).read_text())["run_id"] == run_id


def test_a_run_id_that_is_no_plain_name_is_not_taken_into_the_file_name(monkeypatch, tmp_path):
    copier = cloud_results.ResultCopier(tmp_path / "c.duckdb", tmp_path / "results")
    _copied_back(monkeypatch, copier, result_doc(run_id="../../x"))
    (written,) = (tmp_path / "results" / PLAN.cluster).iterdir()
    assert "x.json" not in written.name and written.parent == tmp_path / "results" / PLAN.cluster


def test_the_results_go_beside_the_database_by_full_path_wherever_the_campaign_starts(monkeypatch, tmp_path):
    """They went to results/ of the folder the command was started in, and the database named them by that
    relative path."""
    seen = {}

    class Recording(cloud_results.ResultCopier):
        def __init__(self, db_path, results_dir):
            seen["results_dir"] = results_dir
            super().__init__(db_path, results_dir)

    monkeypatch.setattr(cloud, "ResultCopier", Recording)
    monkeypatch.chdir(tmp_path)
    settings = cloud.CampaignSettings(db_path=Path("sub") / "c.duckdb")
    (tmp_path / "sub").mkdir()
    plan = cloud.CloudPlan([], spot=False)
    assert cloud.run_cloud_campaign(plan, settings, sky=None) == []
    assert seen["results_dir"] == tmp_path / "sub" / "results"
