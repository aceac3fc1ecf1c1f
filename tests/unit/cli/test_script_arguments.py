"""A script's own arguments are only what follows a literal `--` on `stash profile` and `stash campaign`
command lines (and the API's): a stray word elsewhere is an unrecognized argument, one line and exit 2, not
"arguments after -- are the script's" (no `--` was typed) nor a word passed to the script."""

from __future__ import annotations

import pytest
from support import REPO, one_line_error, stash_here

from stash_core.api.options import parse_profile
from stash_core.cli.main import parse_command
from stash_core.errors import UsageError

SCRIPT = str(REPO / "examples" / "scripts" / "train_ddp.py")


@pytest.mark.parametrize(
    "args",
    [
        ["profile", "--model", "resnet10", "--batch-size", "8", "--stalls", "compute,", "interconnect"],
        ["profile", "--script", SCRIPT, "interconnect", "--workers", "2"],
        ["profile", "--script", SCRIPT, "--workers", "2", "interconnect", "--", "--epochs", "3"],
        ["campaign", "--models", "resnet10", "--dry-run", "interconnect"],
        ["campaign", "--script", SCRIPT, "--dry-run", "interconnect"],
    ],
    ids=["model", "script", "script-and-separator", "campaign-models", "campaign-script"],
)
def test_a_stray_word_is_an_unrecognized_argument(args, tmp_path, capsys, monkeypatch) -> None:
    result = stash_here(capsys, monkeypatch, *args, "--db", str(tmp_path / "r.duckdb"))
    assert result.returncode == 2
    assert one_line_error(result) == "stash: unrecognized arguments: interconnect"


def test_the_script_takes_what_follows_the_first_separator_word_for_word() -> None:
    args = parse_command(["profile", "--script", SCRIPT, "--workers", "2", "--", "--epochs", "3", "--", "x"])
    assert (args.workers, args.script_args) == (2, ["--epochs", "3", "--", "x"])
    args = parse_command(["campaign", "--script", SCRIPT, "--dry-run", "--", "--epochs", "3"])
    assert args.script_args == ["--epochs", "3"]
    assert parse_command(["profile", "--model", "resnet10", "--batch-size", "8"]).script_args == []


def test_the_api_reads_its_arguments_as_the_command_does() -> None:
    args, _ = parse_profile(["--script", SCRIPT, "--", "--epochs", "3"])
    assert args.script_args == ["--epochs", "3"]
    with pytest.raises(UsageError, match="^profile: unrecognized arguments: interconnect$"):
        parse_profile(["--model", "resnet10", "--batch-size", "8", "interconnect"])
