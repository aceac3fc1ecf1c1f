"""A database an older Stash seeded keeps that Stash's catalog rows until `stash instances seed`: predict and
recommend say so where such a row is among those they answer for (a newer Stash may know its GPU link or
network, so the row may be refused or mispriced only for being old), and stop saying it once seeded."""

from __future__ import annotations

import json

from stash_core import store
from stash_core.catalog import seed_catalog
from stash_core.cli.main import main

OLD = "Standard_NC96ads_A100_v4"  # four GPUs: what an older Stash shipped without their link


def old_database(tmp_path):
    db = tmp_path / "older.duckdb"
    seed_catalog(db)
    with store.connect(db) as con:  # as the older Stash left it: origin still 'builtin'
        con.execute(f"UPDATE instances SET interconnect = NULL, network_gbps = NULL WHERE name = '{OLD}'")
    return str(db)


def answer(capsys, *argv: str) -> tuple[int, str]:
    status = main(list(argv))
    return status, capsys.readouterr().out


def test_predict_names_the_old_rows_it_answers_for_until_seeded(tmp_path, capsys) -> None:
    db = old_database(tmp_path)
    job = ("predict", "--model", "resnet18", "--batch-size", "32", "--db", db)
    status, out = answer(capsys, *job, "--instances", f"{OLD},p3.2xlarge")
    assert status == 0
    said = (f"warning: 1 built-in instance(s) hold an older Stash's values: {OLD} (network_gbps, "
            "interconnect); `stash instances seed")
    assert said in out
    assert f"{OLD}: " in out.split("not predicted")[1]  # refused for the link the old row lacks
    status, out = answer(capsys, *job, "--instances", f"{OLD},p3.2xlarge", "--format", "json")
    warnings = json.loads(out)["warnings"]
    assert len(warnings) == 1 and OLD in warnings[0]
    status, out = answer(capsys, *job, "--instances", "p3.2xlarge", "--format", "json")
    assert json.loads(out)["warnings"] == []  # the old row plays no part in this answer
    assert main(["instances", "seed", "--db", db]) == 0
    capsys.readouterr()
    status, out = answer(capsys, *job, "--instances", f"{OLD},p3.2xlarge")
    assert "older Stash" not in out and "not predicted" not in out


def test_recommend_warns_of_old_rows_among_those_it_ranks(tmp_path, capsys) -> None:
    db = old_database(tmp_path)
    job = ("recommend", "--model", "resnet18", "--batch-size", "32", "--epochs", "1", "--dataset-images",
           "100000", "--max-usd", "1000", "--db", db, "--format", "json")  # fmt: skip
    status, out = answer(capsys, *job, "--instances", f"{OLD},p3.2xlarge")
    assert status == 0
    warnings = json.loads(out)["warnings"]
    assert any(OLD in warning and "stash instances seed" in warning for warning in warnings)
    status, out = answer(capsys, *job, "--instances", "p3.2xlarge")
    assert not any("older Stash" in warning for warning in json.loads(out)["warnings"])
