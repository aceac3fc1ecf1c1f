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
    if "--script" in args:  # most likely the script's own, typed before `--`: said where they go
        hint = "unrecognized arguments: interconnect (a script's own arguments go after --)"
        assert one_line_error(result) == f"stash: {args[0]}: {hint}"
    else:
        assert one_line_error(result) == f"stash: {args[0]}: unrecognized arguments: interconnect"


@pytest.mark.parametrize("command", ["profile", "campaign"])
def test_a_script_s_option_typed_before_the_separator_is_never_an_abbreviated_stash_option(
    command, tmp_path, capsys, monkeypatch
) -> None:
    """`--batch 8` (the script's) was taken as --batch-size 8, `--iter 5` as --iterations, `--work 2` as
    --workers, and the script ran without them; they are said in the order typed."""
    extra = ["--dry-run"] if command == "campaign" else []
    db = str(tmp_path / "r.duckdb")
    typed = [command, "--script", SCRIPT, *extra, "--batch", "8", "--iter", "5", "--db", db]
    result = stash_here(capsys, monkeypatch, *typed)
    assert result.returncode == 2
    assert one_line_error(result) == (
        f"stash: {command}: unrecognized arguments: --batch 8 --iter 5 (a script's own arguments go after "
        f"--; did you mean --batch-size{'s' if command == 'campaign' else ''} or --iterations?)"
    )


def test_the_api_refuses_two_names_of_one_option_and_script_arguments_that_are_no_text() -> None:
    from stash_core.api.options import profile_argv

    with pytest.raises(UsageError, match=r"workers_per_node and workers are one option \(--workers\)"):
        profile_argv(None, {"model": "resnet10", "batch_size": 8, "workers_per_node": 2, "workers": 3})
    with pytest.raises(UsageError, match="script_args must be text, got None"):
        profile_argv(None, {"script": SCRIPT, "script_args": ["--epochs", None]})
    assert profile_argv(None, {"script": SCRIPT, "script_args": ["--epochs", 3]})[-2:] == ["--epochs", "3"]


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
