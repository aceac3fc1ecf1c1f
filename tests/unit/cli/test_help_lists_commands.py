"""`stash --help` lists every command with its one-line description, and every command and subcommand has one
(README.md sends readers to `stash --help` for the list of commands)."""

from __future__ import annotations

import argparse
import re

import pytest

from stash_core.cli.main import build_parser, main

Command = tuple[tuple[str, ...], str]


def _commands(parser: argparse.ArgumentParser, prefix: tuple[str, ...] = ()) -> list[Command]:
    """(command words, help) of every subcommand under `parser`, nested ones included."""
    found = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            helps = {choice.dest: choice.help for choice in action._choices_actions}
            for name, sub in action.choices.items():
                found.append(((*prefix, name), helps.get(name) or ""))
                found.extend(_commands(sub, (*prefix, name)))
    return found


COMMANDS = _commands(build_parser())


def test_there_are_commands_and_subcommands() -> None:
    names = {words for words, _ in COMMANDS}
    assert {("profile",), ("predict",), ("recommend",), ("spot",), ("schedule",)} <= names
    assert ("cluster", "up") in names and ("instances", "seed") in names


@pytest.mark.parametrize("words,help_text", COMMANDS, ids=[" ".join(words) for words, _ in COMMANDS])
def test_every_command_has_a_one_line_description(words: tuple[str, ...], help_text: str) -> None:
    assert help_text.strip(), f"stash {' '.join(words)}: add help= to its add_parser"
    assert "\n" not in help_text and len(help_text) <= 120, help_text


def test_stash_help_lists_every_command_on_a_line_with_its_description(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "400")  # a wide terminal: argparse wraps nothing
    with pytest.raises(SystemExit) as exited:
        main(["--help"])
    assert exited.value.code == 0
    lines = [line.strip() for line in capsys.readouterr().out.splitlines()]
    for words, help_text in COMMANDS:
        if len(words) == 1:
            line_of_it = rf"{re.escape(words[0])}\s+{re.escape(help_text)}"
            assert any(re.fullmatch(line_of_it, line) for line in lines), words[0]


@pytest.mark.parametrize("default", [[8, 32], 30.0, "auto"])
def test_an_option_without_help_says_its_default_once(default) -> None:
    from stash_core.cli.main import DefaultsFormatter

    parser = argparse.ArgumentParser(formatter_class=DefaultsFormatter)
    parser.add_argument("--value", default=default)
    parser.add_argument("--said", default=default, help="with its own words")
    text = " ".join(parser.format_help().split())
    shown = "8,32" if isinstance(default, list) else f"{default}"
    assert text.count(f"default: {shown}") == 2, text  # once for each option


def _parser_of(words: tuple[str, ...]) -> argparse.ArgumentParser:
    parser = build_parser()
    for word in words:
        sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
        parser = sub.choices[word]
    return parser


@pytest.mark.parametrize("words", [words for words, _ in COMMANDS], ids=[" ".join(w) for w, _ in COMMANDS])
def test_no_option_says_its_default_twice(words: tuple[str, ...]) -> None:
    """The help appends "(default: X)" itself: an option's own text naming its default too says it twice."""
    parser = _parser_of(words)
    formatter = parser._get_formatter()
    for action in parser._actions:
        if not action.option_strings or action.help in (None, argparse.SUPPRESS):
            continue
        appended = formatter._get_help_string(action) != action.help
        assert not (appended and re.search(r"\bdefault\b", action.help)), (words, action.help)


def test_refresh_catalogs_help_gives_its_whole_first_paragraph(monkeypatch) -> None:
    """scripts/refresh_catalog.py --help cut its description after the docstring's first line."""
    import subprocess
    import sys
    from pathlib import Path

    script = Path(__file__).resolve().parents[3] / "scripts" / "refresh_catalog.py"
    monkeypatch.setenv("COLUMNS", "400")
    done = subprocess.run([sys.executable, str(script), "--help"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    whole = "(the GPU instance types of AWS, GCP and Azure), keeping every row the file already has."
    assert whole in done.stdout


def _options(parser: argparse.ArgumentParser, words: tuple[str, ...] = ()) -> list[tuple[str, str]]:
    """(command, --option) of every option of every command and subcommand under `parser`."""
    found = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                found += _options(sub, (*words, name))
        found += [(" ".join(words), flag) for flag in action.option_strings if flag.startswith("--")]
    return [(words, flag) for words, flag in found if flag != "--help"]


def test_every_option_of_every_command_is_named_in_the_docs() -> None:
    """`runs --limit`, `spot --top`, `fit --residuals`, `instances add --vcpus` and others were in no page."""
    from pathlib import Path

    repo = Path(__file__).resolve().parents[3]
    text = " ".join(page.read_text() for page in [repo / "README.md", *sorted((repo / "docs").glob("*.md"))])
    missing = [f"{words} {flag}" for words, flag in _options(build_parser())
               if not re.search(rf"(?<![\w-]){re.escape(flag)}(?![\w-])", text)]  # fmt: skip
    assert not missing, f"no page of docs/ names: {', '.join(missing)}"


def _parsers(parser: argparse.ArgumentParser, prefix: tuple[str, ...] = ()) -> list:
    """(command words, parser) of every command that takes arguments, nested ones included."""
    found = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                found.append(((*prefix, name), sub))
                found.extend(_parsers(sub, (*prefix, name)))
    return found


def test_every_argument_says_what_it_takes() -> None:
    """ingest's files, export --format, whatif's run id and others had no help line."""
    silent = [
        f"stash {' '.join(words)} {action.option_strings[0] if action.option_strings else action.dest}"
        for words, sub in _parsers(build_parser())
        for action in sub._actions
        if not isinstance(action, argparse._HelpAction | argparse._SubParsersAction) and not action.help
    ]
    assert not silent, silent
