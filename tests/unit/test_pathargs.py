"""The one rule for output paths: every command's output options are found from the parser, and none may
replace the database, its WAL, an input of the same command or a model file it imports."""

from __future__ import annotations

import argparse
import os
import re
from pathlib import Path

import pytest

from stash_core.cli.main import build_parser, main
from stash_core.pathargs import INPUT, OUTPUT, PathArg, role_of

# Options that name something that is not a local path of this machine, with the reason.
NOT_LOCAL = {"--workdir": "a folder on the remote hosts"}
# Flags and positionals that name a file or folder, by their words.
PATH_WORDS = re.compile(r"(^|[-_])(out|csv|file|files|dir|trace|workload|script|state|db|config|key|skypilot|"
                        r"dataset|json-out|path)$")  # fmt: skip


def every_action(parser: argparse.ArgumentParser, where: str = "stash"):
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from every_action(sub, f"{where} {name}")
        else:
            yield where, action


def path_options() -> list[tuple[str, str, argparse.Action]]:
    found = []
    for where, action in every_action(build_parser()):
        names = action.option_strings or [action.dest]
        if (
            action.type is Path
            or isinstance(action.type, PathArg)
            or any(PATH_WORDS.search(n) for n in names)
        ):
            found.append((where, names[0], action))
    return found


def test_every_option_that_names_a_path_has_a_role() -> None:
    """A new option of type Path, or named like a file, must say whether it is read or written."""
    untyped = [
        f"{where} {flag}"
        for where, flag, action in path_options()
        if role_of(action) is None and flag not in NOT_LOCAL and action.nargs != 0
    ]
    assert untyped == []


def test_the_rule_sees_the_outputs_of_many_commands() -> None:
    outputs = {f"{where} {flag}" for where, flag, action in path_options() if role_of(action) == OUTPUT}
    inputs = {f"{where} {flag}" for where, flag, action in path_options() if role_of(action) == INPUT}
    for expected in ("stash profile --out", "stash recommend --csv", "stash schedule --jobs-csv",
                     "stash probe --out", "stash export --out", "stash spot-profile --workload"):  # fmt: skip
        assert expected in outputs
    assert "stash ingest files" in inputs and "stash schedule --trace" in inputs


def every_output() -> list[tuple[str, list[str], argparse.Action]]:
    """(id, the subcommand names, the action) of every output option of every command."""
    found = []

    def walk(parser: argparse.ArgumentParser, names: list[str]) -> None:
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, sub in action.choices.items():
                    walk(sub, [*names, name])
            elif role_of(action) == OUTPUT:
                found.append((f"{' '.join(names)} {action.option_strings[0]}", names, action))

    walk(build_parser(), [])
    return found


def _namespace(names: list[str], output: argparse.Action, value: Path) -> argparse.Namespace:
    """What the parser would give for `stash NAMES` with every option at its default and `output` = value."""
    values: dict = {}
    parser = build_parser()
    for name in [*names, None]:
        subcommands = None
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                subcommands = action
            else:
                values.setdefault(action.dest, action.default)
        if subcommands is None or name is None:
            break
        values[subcommands.dest] = name
        parser = subcommands.choices[name]
    values[output.dest] = value
    return argparse.Namespace(**values)


OUTPUTS = every_output()


@pytest.mark.parametrize("case", OUTPUTS, ids=[case[0] for case in OUTPUTS])
def test_no_output_option_may_name_the_database_or_its_wal(case, tmp_path) -> None:
    """Every output option found in the parser, whatever command it belongs to, is held to the rule."""
    from stash_core.errors import UsageError
    from stash_core.pathargs import check_outputs

    _, names, action = case
    db = tmp_path / "keep.duckdb"
    for target in (db, Path(f"{db}.wal")):
        with pytest.raises(UsageError, match="would replace what it reads"):
            check_outputs(build_parser(), _namespace(names, action, target), db)
    check_outputs(build_parser(), _namespace(names, action, tmp_path / "elsewhere"), db)


def _refusal(argv: list[str], capsys) -> tuple[int, str]:
    capsys.readouterr()
    status = main(argv)
    return status, capsys.readouterr().err


COMPLETE_CASES = [
    ("recommend csv = db", ["recommend", "--model", "resnet18", "--batch-size", "32", "--epochs", "1",
                            "--dataset-images", "1000", "--csv", "{d}/x.duckdb", "--db", "{d}/x.duckdb"]),
    ("recommend csv = wal", ["recommend", "--model", "resnet18", "--batch-size", "32", "--epochs", "1",
                             "--dataset-images", "1000", "--csv", "{d}/x.duckdb.wal", "--db", "{d}/x.duckdb"]),
    ("recommend csv = model file", ["recommend", "--model", "{d}/m.py:make", "--batch-size", "32", "--epochs",
                                    "1", "--dataset-images", "1000", "--csv", "{d}/m.py"]),
    ("schedule jobs-csv = db", ["schedule", "--synthetic-jobs", "5", "--jobs-csv", "{d}/x.duckdb",
                                "--db", "{d}/x.duckdb"]),
    ("schedule jobs-csv = trace", ["schedule", "--trace", "{d}/t.csv", "--jobs-csv", "{d}/t.csv"]),
    ("profile out = db", ["profile", "--model", "resnet10", "--batch-size", "4", "--out", "{d}/x.duckdb",
                          "--db", "{d}/x.duckdb"]),
    ("profile out = model file", ["profile", "--model", "{d}/m.py:make", "--batch-size", "4", "--out",
                                  "{d}/m.py"]),
    ("profile out = script", ["profile", "--script", "{d}/m.py", "--out", "{d}/m.py"]),
    ("profile out = db through a link", ["profile", "--model", "resnet10", "--batch-size", "4", "--out",
                                         "{d}/link", "--db", "{d}/x.duckdb"]),
    ("probe out = db", ["probe", "--out", "{d}/x.duckdb", "--db", "{d}/x.duckdb"]),
    ("spot-profile workload = loss csv", ["spot-profile", "--model", "resnet10", "--workload", "{d}/t.csv",
                                          "--loss-csv", "{d}/t.csv"]),
    ("spot-fit-loss workload = csv", ["spot-fit-loss", "--csv", "{d}/t.csv", "--workload", "{d}/t.csv"]),
    ("export out = db", ["export", "--format", "csv", "--out", "{d}/x.duckdb", "--db", "{d}/x.duckdb"]),
    ("db from STASH_DB with ~", ["profile", "--model", "resnet10", "--batch-size", "4", "--out",
                                 "~/x.duckdb"]),
]  # fmt: skip


@pytest.mark.parametrize(("case_id", "argv"), COMPLETE_CASES, ids=[case[0] for case in COMPLETE_CASES])
def test_an_output_that_names_what_the_command_reads_is_refused(case_id, argv, tmp_path, capsys, monkeypatch):
    files = {"x.duckdb": b"stored runs", "x.duckdb.wal": b"log", "t.csv": b"time_s\n", "m.py": b"make = 1\n"}
    for name, data in files.items():
        (tmp_path / name).write_bytes(data)
    os.symlink(tmp_path / "x.duckdb", tmp_path / "link")
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("STASH_DB", "~/x.duckdb")
    monkeypatch.chdir(tmp_path)
    status, err = _refusal([part.replace("{d}", str(tmp_path)) for part in argv], capsys)
    assert status == 2, err
    assert "would replace what it reads" in err and err.count("\n") == 1
    assert {name: (tmp_path / name).read_bytes() for name in files} == files
    assert sorted(path.name for path in tmp_path.iterdir()) == sorted([*files, "link"])


def test_a_path_with_control_characters_is_refused(capsys) -> None:
    status, err = _refusal(["schedule", "--synthetic-jobs", "5", "--jobs-csv", "a\x1b[2Jb.csv"], capsys)
    assert status == 2 and "control characters" in err and "\x1b" not in err


@pytest.mark.parametrize(
    "argv",
    [["runs", "--db", "http://example.com/x.duckdb"], ["profile", "--model", "resnet10", "--batch-size", "8",
                                                       "--dataset", "s3://bucket/images"]],
)
def test_a_url_given_as_a_path_is_refused_not_made_a_local_folder(argv, tmp_path, capsys, monkeypatch):
    """`--db s3://bucket/x.duckdb` named a local folder "s3:" that the first write would have made."""
    monkeypatch.chdir(tmp_path)
    status, err = _refusal(argv, capsys)
    assert status == 2 and "is a URL: Stash reads and writes local files only; give a path" in err, err
    assert list(tmp_path.iterdir()) == []


def test_a_url_is_refused_by_the_api_and_the_dashboards_setting() -> None:
    import stash_core
    from stash_core.errors import UsageError
    from stash_core.views.common import resolve_db_path

    calls = (lambda: stash_core.runs(db="s3://bucket/x.duckdb"), lambda: resolve_db_path("gs://b/x.duckdb"))
    for call in calls:
        with pytest.raises(UsageError, match="is a URL: Stash reads and writes local files only"):
            call()


def _readers_of_path_variables():
    """(variable, what reads it, the path it gives for a value of `~/chosen`, home being HOME)."""
    from stash_core.campaign.skypilot_task import check_cache_dir
    from stash_core.pathargs import dataset_cache_root
    from stash_core.decide.predict.step_cache import cache_dir
    from stash_core.launch.cluster.names import state_dir_for

    return [
        ("STASH_CACHE_DIR", cache_dir, lambda home: home / "chosen"),
        ("STASH_CACHE_DIR", dataset_cache_root, lambda home: home / "chosen" / "datasets"),
        ("STASH_CACHE_DIR", check_cache_dir, lambda home: home / "chosen" / "sky-checks"),
        ("XDG_CACHE_HOME", cache_dir, lambda home: home / "chosen" / "stash" / "steps"),
        ("XDG_CACHE_HOME", check_cache_dir, lambda home: home / "chosen" / "stash" / "sky-checks"),
        ("STASH_CLUSTER_STATE", lambda: state_dir_for("default"), lambda home: home / "chosen"),
    ]


def test_a_tilde_in_a_path_variable_is_the_home_folder_not_a_folder_named_tilde(tmp_path, monkeypatch):
    """STASH_CACHE_DIR='~/chosen' (quoted, so the shell left the ~) is ~/chosen, as --db ~/x is, wherever
    it is read; a folder named `~` in the current folder was made before."""
    home = tmp_path / "home"
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.chdir(tmp_path)
    for variable in ("STASH_CACHE_DIR", "XDG_CACHE_HOME", "STASH_CLUSTER_STATE"):
        monkeypatch.delenv(variable, raising=False)
    for variable, reader, expected in _readers_of_path_variables():
        monkeypatch.setenv(variable, "~/chosen")
        assert reader() == expected(home), (variable, reader)
        monkeypatch.delenv(variable)
    assert not (tmp_path / "~").exists()


def test_a_database_path_that_names_a_folder_is_refused(tmp_path, monkeypatch, capsys) -> None:
    """`--db mydata/` made a DuckDB file named mydata (and `mkdir mydata` then failed)."""
    from stash_core.cli import main

    monkeypatch.chdir(tmp_path)
    assert main(["runs", "--db", "mydata/"]) == 2
    assert "--db: mydata/ names a directory: give a file, e.g. mydata/results.duckdb" in capsys.readouterr().err
    monkeypatch.setenv("STASH_DB", "mydata/")
    assert main(["runs"]) == 2
    assert "STASH_DB mydata/ names a directory" in capsys.readouterr().err
    assert not (tmp_path / "mydata").exists()


@pytest.mark.parametrize(
    "argv",
    [["schedule", "--synthetic-jobs", "5"], ["probe", "--workers", "1", "--max-size", "64KiB"]],
    ids=["schedule", "probe"],
)
def test_a_database_from_stash_db_is_named_so_not_as_db(tmp_path, capsys, monkeypatch, argv) -> None:
    """A bad database from $STASH_DB was refused as "--db ...", a flag the user never gave."""
    from support import one_line_error, stash_here

    bad = tmp_path / "bad.duckdb"
    bad.mkdir()  # a directory where the database should be
    monkeypatch.setenv("STASH_DB", str(bad))
    said = one_line_error(stash_here(capsys, monkeypatch, *argv))
    assert said.startswith("stash: $STASH_DB") and "--db" not in said, said
    said = one_line_error(stash_here(capsys, monkeypatch, *argv, "--db", str(bad)))
    assert said.startswith("stash: --db"), said
