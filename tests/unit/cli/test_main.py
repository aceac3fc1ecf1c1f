"""The command line parsed once per process: every command gets defaults of its own. What a command prints
of a path is printable text."""

from __future__ import annotations

import importlib

cli_main = importlib.import_module("stash_core.cli.main")  # the package's `main` is the function


def test_the_parser_is_built_once_per_process() -> None:
    assert cli_main._parser() is cli_main._parser()


def test_a_command_that_changes_a_default_list_leaves_the_next_commands_default_as_it_was() -> None:
    first = cli_main.parse_command(["spot-memory", "--model", "resnet10"])
    default_batches = list(first.batches)
    first.batches.append(4096)
    second = cli_main.parse_command(["spot-memory", "--model", "resnet10"])
    assert second.batches == default_batches
    assert second.batches is not first.batches


def test_parsed_arguments_are_those_of_a_freshly_built_parser() -> None:
    argv = ["profile", "--model", "resnet10", "--workers", "2", "--stalls", "compute,network"]
    assert vars(cli_main.parse_command(argv)) == vars(cli_main.build_parser().parse_args(argv))


def test_ingest_and_export_print_a_paths_control_characters_as_escapes(tmp_path) -> None:
    """A file or folder name may hold a C1 control (U+009B, a terminal's CSI) or a bidirectional override
    (U+202E): printed raw, it acts on the terminal or reorders the line. `stash runs` escaped them; ingest
    and export printed them as they are."""
    import json

    from result_docs import result_doc
    from support import stash_main

    odd = "r\u009b2J\u202egnp."
    result = tmp_path / f"{odd}.json"
    result.write_text(json.dumps(result_doc(run_id="20261122T110600Z-2904421d")))
    db = tmp_path / "r.duckdb"
    ingest = stash_main("ingest", str(result), "--db", str(db))
    folder = tmp_path / odd
    export = stash_main("export", "--format", "csv", "--out", str(folder), "--db", str(db))
    for done in (ingest, export):
        assert done.returncode == 0, done.stderr
        assert "\u009b" not in done.stdout and "\u202e" not in done.stdout, done.stdout
        assert "r\\x9b2J\\u202egnp." in done.stdout, done.stdout


def _refusal(argv: list[str], capsys) -> tuple[int, str]:
    status = cli_main.main(argv)
    return status, capsys.readouterr().err.strip()


def test_version_unknown_options_and_missing_subcommands_are_said_as_typed(capsys) -> None:
    """`stash --version` and `stash --bogus` said "the following arguments are required: command", and a group
    without its subcommand named argparse's internal dest (instances_action) instead of what to type."""
    import pytest

    from stash_core import __version__

    with pytest.raises(SystemExit) as done:
        cli_main.build_parser().parse_args(["--version"])
    assert done.value.code == 0 and capsys.readouterr().out.strip() == f"stash {__version__}"
    status, said = _refusal(["--bogus"], capsys)
    assert status == 2 and "unrecognized option --bogus" in said and len(said.splitlines()) == 1
    for group, choices, internal in (
        ("instances", "list, show, seed", "instances_action"),
        ("cluster", "up, down, status, set", "cluster_command"),
        ("remote", "check", "remote_command"),
    ):
        status, said = _refusal([group], capsys)
        assert status == 2 and f"one of {choices}" in said and internal not in said, said
        # an option in front of the group's command: it goes after one (it said "after the command", where
        # it was after `stash instances`)
        status, said = _refusal([group, "--db", "x.duckdb"], capsys)
        first = choices.split(",")[0]
        assert status == 2 and f"--db goes after a command: one of {choices}" in said, said
        assert f"(`stash {group} {first} --db ...`)" in said and len(said.splitlines()) == 1
    status, said = _refusal([], capsys)
    assert status == 2 and "one of profile, ingest, runs" in said and "command" in said


def test_a_mistyped_subcommand_is_said_as_typed_with_the_close_one(capsys) -> None:
    """`stash instances lst` said "argument instances_action: invalid choice: 'lst'"."""
    for argv, expected in (
        (["instances", "lst"], "instances: unknown command 'lst' (did you mean list?): one of list, show"),
        (["cluster", "upp"], "cluster: unknown command 'upp' (did you mean up?): one of up, down, status"),
        (["remote", "chek"], "remote: unknown command 'chek' (did you mean check?): one of check"),
        (["proflie"], "unknown command 'proflie' (did you mean profile?): one of profile, ingest"),
        (["zzz"], "unknown command 'zzz': one of profile, ingest"),
    ):
        status, said = _refusal(argv, capsys)
        assert status == 2 and said.startswith(f"stash: {expected}") and "_action" not in said, said
    status, said = _refusal(["runs", "--format", "xml"], capsys)  # an option's choices stay argparse's words
    assert "argument --format: invalid choice: 'xml'" in said


def test_an_abbreviated_option_is_refused_naming_the_options_it_starts(capsys) -> None:
    """argparse took any unambiguous start of an option: `--budget 5` ran as --budget-hours 5 for a user who
    meant dollars. A start is refused, naming what it starts, and a misspelling is named before a missing
    option it may have meant."""
    recommend = ["recommend", "--model", "resnet50", "--batch-size", "64", "--epochs", "1"]
    recommend += ["--dataset-images", "9"]
    status, said = _refusal([*recommend, "--budget", "2"], capsys)
    assert status == 2 and said.strip() == (
        "stash: recommend: unrecognized arguments: --budget 2 (did you mean --budget-hours?)"), said
    status, said = _refusal(["predict", "--modle", "resnet50"], capsys)  # --model is required, and mistyped
    assert status == 2 and said.strip() == (
        "stash: predict: unrecognized arguments: --modle (did you mean --model?)"), said
    status, said = _refusal(["runs", "--lim", "3"], capsys)
    assert status == 2 and "unrecognized arguments: --lim 3 (did you mean --limit?)" in said, said
    assert cli_main.parse_command([*recommend, "--budget-hours", "2"]).budget_hours == 2
    from stash_core.cli.args import options_meant

    assert options_meant(["--", "3"], ["--limit", "--db"]) == []  # the separator starts every option


