"""A command asked for JSON answers a failure with JSON on stdout as well as its line on stderr: a script
that parses stdout got nothing to parse (an unknown instance, a flag the model cannot take, a bad number)."""

from __future__ import annotations

import json

import pytest

from stash_core.cli.main import asks_for_json, main

REFUSED = [
    ["predict", "--model", "bert_base", "--batch-size", "8", "--memory-format", "channels_last",
     "--format", "json"],
    ["predict", "--model", "resnet50", "--batch-size", "64", "--instances", "nosuch", "--format=json"],
    ["predict", "--model", "resnet50", "--batch-size", "0", "--format", "json"],
    ["recommend", "--model", "resnet50", "--format", "json"],
    ["spot", "--workload", "examples/workload.json", "--instances", "nosuch:3", "--target-loss", "0.8",
     "--budget-s", "5000", "--json"],
]  # fmt: skip


@pytest.mark.parametrize("argv", REFUSED, ids=lambda argv: " ".join(argv[:5]))
def test_a_refusal_asked_for_json_is_a_json_object_on_stdout_and_one_line_on_stderr(argv, tmp_path, capsys):
    from support import REPO

    argv = [str(REPO / arg) if arg.startswith("examples/") else arg for arg in argv]
    status = main([*argv, "--db", str(tmp_path / "r.duckdb")])
    out = capsys.readouterr()
    answer = json.loads(out.out)
    assert status == 2 and answer["exit_status"] == 2
    assert out.err == f"stash: {answer['error']}\n" and "\n" not in answer["error"]


def test_a_refusal_of_a_table_stays_off_stdout(tmp_path, capsys):
    status = main(["predict", "--model", "resnet50", "--batch-size", "0", "--db", str(tmp_path / "r.duckdb")])
    out = capsys.readouterr()
    assert status == 2 and out.out == "" and out.err.startswith("stash: predict: argument --batch-size")


@pytest.mark.parametrize(
    ("argv", "asked"),
    [
        (["predict", "--format", "json"], True),
        (["recommend", "--format=json"], True),
        (["spot", "--json"], True),
        (["spot", "--js"], True),  # refused as a start of --json, in JSON
        (["predict", "--form", "json"], True),
        (["predict", "--form=json"], True),
        (["spot", "--"], False),
        (["predict", "--format", "table"], False),
        (["export", "--format", "json", "--out", "x"], False),  # files, not stdout
        (["profile", "--script", "train.py", "--", "--json"], False),  # the script's own argument
    ],
)
def test_which_command_lines_ask_for_json(argv, asked):
    assert asks_for_json(argv) is asked


@pytest.mark.parametrize(
    ("argv", "hint"),
    [
        (["predict", "--model", "resnet50", "--json"], "this command takes --format json"),
        (["whatif", "RUN", "--format", "json"], "this command takes --json"),
        (["show", "RUN", "--json"], "this command takes --format json"),
        (["models", "--json"], "this command prints no JSON: `stash export --format json`"),
    ],
)
def test_the_other_spelling_of_json_says_the_commands_own(argv, hint, tmp_path, capsys):
    """`predict --json` said only "unrecognized arguments: --json", and `whatif --format json` likewise."""
    status = main([*argv, "--db", str(tmp_path / "r.duckdb")])
    err = capsys.readouterr().err
    assert status == 2 and err.startswith(f"stash: {argv[0]}: unrecognized arguments: ") and f"({hint}" in err


def test_a_cluster_status_that_exits_1_says_why_in_its_json(tmp_path, capsys):
    """`cluster status --json` of no cluster exited 1 with a status object and no reason in it."""
    state = str(tmp_path / "none")
    status = main(["cluster", "status", "--name", "jsonless20", "--state-dir", state, "--json"])
    answer = json.loads(capsys.readouterr().out)
    assert status == 1 and answer["exit_status"] == 1
    assert answer["error"] == "emulated cluster jsonless20 cannot be used: none is up"
    assert answer["nodes"] == []  # the status as before, the reason beside it
