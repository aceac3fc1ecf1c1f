"""The fit / instances / recommend / whatif / campaign subcommands, through argparse like `stash` does."""

from __future__ import annotations

import argparse
import re

import pytest
from result_docs import result_doc as _cpu_machine_doc

from stash_core.catalog import get_instance
from stash_core.cli import decisions as cli_decisions
from stash_core.errors import UsageError
from stash_core.store import ingest_result


def result_doc(*args, **kwargs):
    """result_docs.result_doc on a machine that fits its device: a CUDA run's machine has a GPU per worker
    (result_doc's fingerprint has none, which would contradict a GPU instance label)."""
    doc = _cpu_machine_doc(*args, **kwargs)
    if doc["spec"]["device"] == "cuda":
        count = doc["spec"]["workers_per_node"]
        gpus = [{"index": index, "name": "Tesla V100-SXM2-16GB"} for index in range(count)]
        doc["fingerprint"].update(gpu_count=count, gpus=gpus, gpu_status=f"{count} GPU(s)")
    return doc


class Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        raise UsageError(f"{self.prog}: {message}")


def stash(*argv: str) -> int:
    parser = Parser(prog="stash")
    commands = parser.add_subparsers(dest="command", required=True, parser_class=Parser)
    cli_decisions.add_commands(commands, Parser)
    args = parser.parse_args(list(argv))
    return cli_decisions.COMMANDS[args.command](args)


def test_instances_set_names_its_database_and_says_when_it_is_new(tmp_path, capsys):
    """`instances set` on a mistyped --db made a new database without a word and named none."""
    db = tmp_path / "typo.duckdb"
    assert stash("instances", "set", "g5.xlarge", "--vcpus", "8", "--db", str(db)) == 0
    first = capsys.readouterr().out.splitlines()
    assert first == [  # the note first, as every command says a new database
        f"note: {db} did not exist: it is a new database, holding the built-in catalog",
        f"updated g5.xlarge in {db}: vcpus=8",
    ]
    assert stash("instances", "set", "g5.xlarge", "--vcpus", "4", "--db", str(db)) == 0
    assert capsys.readouterr().out.splitlines() == [f"updated g5.xlarge in {db}: vcpus=4"]
    # a value cleared reads as it is typed, not as Python's None
    assert stash("instances", "set", "g5.xlarge", "--spot-usd-per-h", "none", "--db", str(db)) == 0
    assert capsys.readouterr().out.splitlines()[0] == f"updated g5.xlarge in {db}: spot_usd_per_h=none"
    # 'none' clears a text field as it clears a number: --provider none had stored a provider named "none"
    for field in ("provider", "region", "source"):
        assert stash("instances", "set", "g5.xlarge", f"--{field}", "none", "--db", str(db)) == 0
        assert get_instance(db, "g5.xlarge")[field] is None, field
    capsys.readouterr()
    with pytest.raises(UsageError) as refused:  # a link no model knows: the values it names, it takes
        stash("instances", "set", "g5.xlarge", "--interconnect", "foo", "--db", str(db))
    assert str(refused.value).endswith("give NVSwitch, NVLink, PCIe, PCIe peer-to-peer or none")
    seeded = tmp_path / "seeded.duckdb"  # seed on a new database said so nowhere
    assert stash("instances", "seed", "--db", str(seeded)) == 0
    assert capsys.readouterr().out.splitlines()[0] == (
        f"note: {seeded} did not exist: it is a new database, holding the built-in catalog")
    assert stash("instances", "seed", "--db", str(seeded)) == 0
    assert "new database" not in capsys.readouterr().out


def test_instances_list_set_show(tmp_path, capsys):
    db = str(tmp_path / "c.duckdb")
    assert stash("instances", "list", "--db", db) == 0
    assert "p3.16xlarge" in capsys.readouterr().out
    assert stash("instances", "set", "p3.16xlarge", "--spot-usd-per-h", "7.5", "--db", db) == 0
    assert get_instance(db, "p3.16xlarge")["spot_usd_per_h"] == 7.5
    assert (
        stash(
            "instances",
            "add",
            "box",
            "--vcpus",
            "2",
            "--accelerator-count",
            "0",
            "--on-demand-usd-per-h",
            "0.1",
            "--db",
            db,
        )
        == 0
    )
    capsys.readouterr()
    assert stash("instances", "show", "box", "--db", db) == 0
    assert "on_demand_usd_per_h   0.1" in capsys.readouterr().out
    with pytest.raises(UsageError, match="--on-demand-usd-per-h: must be a number >= 0"):
        stash("instances", "set", "box", "--on-demand-usd-per-h", "-3", "--db", db)
    with pytest.raises(UsageError, match="unknown instance"):
        stash("instances", "show", "nope", "--db", db)


def test_db_defaults_to_stash_db(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("STASH_DB", str(tmp_path / "env.duckdb"))
    assert stash("instances", "seed") == 0
    assert "env.duckdb" in capsys.readouterr().out


def test_recommend_exit_status_and_explanation(tmp_path, capsys):
    db = str(tmp_path / "c.duckdb")
    ingest_result(
        db,
        result_doc(
            "resnet50",
            instance="p3.16xlarge",
            workers=8,
            device="cuda",
            batch_size=64,
            stalls={"compute": 0.2, "interconnect": 0.05},
        ),
    )
    base = [
        "recommend",
        "--model",
        "resnet50",
        "--batch-size",
        "64",
        "--epochs",
        "90",
        "--dataset-images",
        "1281167",
        "--instances",
        "p3.16xlarge",
        "--max-instances",
        "1",
        "--db",
        db,
    ]
    assert stash(*base, "--budget-hours", "24") == 0
    out = capsys.readouterr().out
    assert "1 x p3.16xlarge" in out and "measured" in out
    assert stash(*base, "--budget-hours", "1") == 1
    assert "no recommendation: no configuration finishes 90 epochs" in capsys.readouterr().out


def test_fit_whatif_and_campaign_dry_run(tmp_path, capsys):
    db = str(tmp_path / "c.duckdb")
    for index in range(5):
        ingest_result(
            db,
            result_doc(
                f"m{index}",
                grad_bytes=(index + 1) * 10**7,
                grad_tensor_count=10 + 7 * index,
                stalls={"compute": 0.2, "interconnect": 0.01 + 0.01 * index},
                instance="lab",
            ),
        )
    assert stash("fit", "--db", db) == 0
    out = capsys.readouterr().out
    assert "interconnect stall" in out and "* linear: bytes" in out and "published predictors" in out
    assert stash("fit", "--predict", "resnet18", "--workers", "2", "--instance", "lab", "--db", db) == 0
    assert "interconnect stall of resnet18" in capsys.readouterr().out
    far = ("fit", "--predict", "resnet18", "--num-classes", "10000000", "--workers", "2", "--instance", "lab")
    assert stash(*far, "--db", db) == 0  # some 20 GB of gradients against 10 to 50 MB profiled
    assert "\n  warning: extrapolated: gradient bytes" in capsys.readouterr().out
    given = ("fit", "--predict", "resnet18", "--workers", "2", "--instance", "elsewhere", "--alpha-s", "1e-4")
    assert stash(*given, "--beta-s-per-byte", "1e-9", "--stall", "interconnect", "--db", db) == 0
    assert "alpha-beta (uncalibrated" in capsys.readouterr().out  # the link given, not "no link bandwidth"
    assert stash("fit", "--predict", "resnet18", "--workers", "2", "--stall", "network", "--db", db) == 0
    assert "none on one machine (give --nodes 2 or more)" in capsys.readouterr().out
    run_id = result_doc("x")["run_id"]
    ingest_result(
        db, result_doc("x", run_id=run_id, stalls={"compute": 0.2, "interconnect": 0.05, "cpu": 0.2})
    )
    assert stash("whatif", run_id, "--db", db) == 0
    assert "CPU cores" in capsys.readouterr().out
    assert (
        stash(
            "campaign",
            "--family",
            "resnet",
            "--depths",
            "10,12",
            "--workers",
            "2",
            "--instance",
            "lab",
            "--dry-run",
            "--db",
            db,
        )
        == 0
    )
    assert "2 configuration(s): 2 to run, 0 stored" in capsys.readouterr().out
    with pytest.raises(UsageError, match="--bandwidths needs --nodes"):
        stash("campaign", "--models", "resnet10", "--bandwidths", "1gbit", "--dry-run", "--db", db)
    with pytest.raises(UsageError, match="--bandwidths: expected a rate"):
        stash(
            "campaign",
            "--models",
            "resnet10",
            "--nodes",
            "2",
            "--bandwidths",
            "fast",
            "--dry-run",
            "--db",
            db,
        )


def test_a_contradicted_instance_label_is_warned_about_until_confirmed(tmp_path, capsys):
    from stash_core.cli.main import main
    from stash_core.cli.show import show_run

    db = str(tmp_path / "labels.duckdb")
    # A CPU-only machine (result_doc's fingerprint) labelled as a 4-GPU instance.
    doc = _cpu_machine_doc("resnet50", instance="p3.8xlarge", workers=4, batch_size=64,
                           stalls={"compute": 0.2, "interconnect": 0.05})  # fmt: skip
    ingest_result(db, doc)
    suffix = doc["run_id"].rsplit("-", 1)[-1]  # the short id the pages show
    assert main(["show", suffix, "--db", db]) == 0
    out = capsys.readouterr().out
    assert f"run {doc['run_id']}" in out
    assert "warning: instance label p3.8xlarge" in out and "the machine has no GPU" in out
    assert "does not fit the machine" in show_run(db, suffix)
    ask = ["recommend", "--model", "resnet50", "--batch-size", "64", "--epochs", "1", "--dataset-images",
           "100000", "--budget-hours", "100", "--instances", "p3.8xlarge", "--db", db]  # fmt: skip
    stash(*ask)
    out = capsys.readouterr().out
    assert "warning: instance label p3.8xlarge" in out and "set aside" in out
    assert stash("instances", "confirm", suffix, "--db", db) == 0
    assert f"confirmed: run {doc['run_id']} counts as a measurement of p3.8xlarge" in capsys.readouterr().out
    assert "confirmed by the user" in show_run(db, suffix)
    with pytest.raises(UsageError, match="no run"):
        stash("instances", "confirm", "nope", "--db", db)


def test_recommends_help_names_every_key_of_its_json_and_what_all_lists(tmp_path, capsys):
    """recommend --help gave predict's {job, predictions, not_predicted}, and --all did not say the JSON's
    options hold only the configurations that meet the constraints."""
    import json

    from stash_core.cli.main import main

    assert main(["recommend", "--model", "resnet18", "--batch-size", "8", "--epochs", "1", "--dataset-images",
                 "100", "--budget-hours", "1", "--instances", "g5.xlarge", "--format", "json", "--db",
                 str(tmp_path / "x.duckdb")]) == 0  # fmt: skip
    keys = list(json.loads(capsys.readouterr().out))
    with pytest.raises(SystemExit):
        main(["recommend", "--help"])
    help_text = " ".join(capsys.readouterr().out.split())
    assert "{" + ", ".join(keys) + "; with none: error, exit_status}" in help_text
    all_help = (
        "also those that miss the constraints (JSON: predictions; its options are those that meet them)"
    )
    assert all_help in help_text


def test_recommend_without_a_budget_or_a_cost_limit_names_both_flags(tmp_path, capsys):
    """It said "give a time budget (hours), a cost limit (USD) or both", naming no flag, and the help showed
    both as plainly optional."""
    from stash_core.cli.main import main

    job = ["recommend", "--model", "resnet18", "--batch-size", "8", "--epochs", "1",
           "--dataset-images", "100"]  # fmt: skip
    assert main([*job, "--db", str(tmp_path / "x.duckdb")]) == 2
    err = capsys.readouterr().err
    assert err == "stash: give --budget-hours, --max-usd or both: one of them is required\n"
    with pytest.raises(SystemExit):
        main(["recommend", "--help"])
    help_text = " ".join(capsys.readouterr().out.split())
    assert help_text.count("one of --budget-hours and --max-usd is required") == 2


def test_a_short_cheap_job_is_said_in_seconds_and_fractions_of_a_cent(tmp_path, capsys):
    """Hours to one decimal and cents read "0.0 h" and "$0.00" for a job of seconds: the CLI's USD column,
    its explanations and the page said so."""
    job = ["--model", "resnet18", "--batch-size", "8", "--epochs", "1", "--dataset-images", "5000"]
    where = ["--instances", "g5.xlarge,g4dn.xlarge", "--db", str(tmp_path / "c.duckdb")]
    assert stash("recommend", *job, "--budget-hours", "1", *where) == 0
    out = capsys.readouterr().out
    assert "$0.00 " not in out and " 0.0 h" not in out
    assert re.search(r"meets the constraints: \d+ s and \$0\.00[1-9]\d* for 1 epoch", out), out


def test_figures_wider_than_their_column_never_run_into_the_column_before(tmp_path, capsys):
    job = ["--model", "resnet50", "--batch-size", "64", "--epochs", "1000000"]
    job += ["--dataset-images", "1000000000000"]
    where = ["--max-usd", "1e12", "--instances", "g5.xlarge", "--db", str(tmp_path / "c.duckdb")]
    assert stash("recommend", *job, *where) == 0
    row = next(line for line in capsys.readouterr().out.splitlines() if " 1 x g5.xlarge " in line)
    assert re.search(r"predicted +[\d,]+ d [\d,]+ d \$[\d,.]+ +1\.01 ", row), row


def test_recommend_takes_all_instances_as_predict_does(tmp_path, capsys):
    """`recommend --instances all` was refused as "unknown instance(s) all", though docs/commands.md, the API
    and `predict` take it."""
    from stash_core.cli.main import main

    job = ["recommend", "--model", "resnet18", "--batch-size", "8", "--epochs", "1", "--dataset-images",
           "1000", "--budget-hours", "5", "--db", str(tmp_path / "r.duckdb"), "--format", "json"]  # fmt: skip
    assert main([*job, "--instances", "all"]) == 0
    every = capsys.readouterr().out
    assert main(job) == 0
    assert capsys.readouterr().out == every


def test_all_among_instance_names_is_refused_for_what_it_is(capsys):
    """`--instances all,p5.48xlarge` said "unknown instance(s) all"."""
    from stash_core.cli.predict import instance_selection

    assert instance_selection("ALL") is None and instance_selection("a,b") == ["a", "b"]
    with pytest.raises(argparse.ArgumentTypeError, match="'all' stands for every catalog instance: give it"):
        instance_selection("all,p5.48xlarge")


def test_a_campaign_this_machine_cannot_run_part_of_is_refused_before_it_runs(tmp_path, monkeypatch):
    """--workers 3,1 on two cores: the dry run listed both as "to run", and the campaign stopped at the
    3-worker profile without running the one that fits."""
    from stash_core.engine import machine

    monkeypatch.setattr(machine, "usable_cpu_count", lambda: 2)
    db = str(tmp_path / "c.duckdb")
    for dry_run in (["--dry-run"], []):
        with pytest.raises(UsageError, match=r"3 worker\(s\): --workers 3: this machine has 2 usable CPU"):
            stash("campaign", "--models", "resnet10", "--workers", "3,1", "--device", "cpu", "--db", db,
                  *dry_run)  # fmt: skip
