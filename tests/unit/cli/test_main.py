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
