"""Every command in the code blocks of README.md and docs/*.md runs as written, page by page in order, on a
fresh copy of the repository, so that the pages and Stash cannot drift apart. The commands are found, not
listed here: a line of a shell code block (```bash, or ``` without a language) whose first word, after any
`NAME=value` settings, is a program (`stash`, `.venv/bin/...`, `python`, `sudo`, `./...`, `bash`, `export`) is
a command, with its indented or backslash-continued lines; `&&` separates commands; `# ...` is a comment. The
SQL of ```sql blocks and of inline `SELECT ...` spans runs against the database the commands made.

What is not run, each with its reason in the skip message:
  - root (`sudo`) or a remote host (`--hosts`, `remote check`, `user@host`);
  - a GPU or a cloud account: a line whose comment says `# needs a GPU` (or `a CUDA GPU`), `# needs a cloud`;
  - synopses: options in [brackets], alternatives with |, `...`, or UPPER-CASE placeholders (RUN_ID);
  - files of the user's that do not ship (train.py, losses.csv, /data/...);
  - `./run.sh` (opens the dashboard and stays) and `./test.sh` (the suite itself), and `export` (the test
    applies it: the copy's .venv/bin is on PATH for every command);
  - benchmarks (bench/..., minutes on a quiet machine) unless STASH_README_FULL=1;
  - profiles (`stash profile`, `stash campaign` but its `--dry-run`) anywhere but README.md: the README's first
    profile is the one that runs.
That one runs as written with `--max-phase-seconds 4 --launches 1` appended (a later option wins), to keep
the test to a minute, unless STASH_README_FULL=1; it is marked slow. The fresh copy holds the files git tracks
(and untracked ones not ignored); its `.venv/bin` holds `stash` and `python` that run this Python on the copy,
as `./run.sh` would have set it up.

Every `stash` command, run or skipped, is also read by the real command line: one that is not a synopsis is
parsed by `stash`'s own parser, and a synopsis names only options its command (or subcommands) has. The
README's Python calls the API with options the API takes.
"""

from __future__ import annotations

import argparse
import ast
import inspect
import os
import re
import shlex
import shutil
import stat
import subprocess
import sys
from dataclasses import dataclass, replace
from pathlib import Path

import duckdb
import pytest

REPO = Path(__file__).resolve().parents[1]
FULL = os.environ.get("STASH_README_FULL") == "1"
PROGRAMS = ("stash", "python", "python3", "sudo", "bash", "export")  # the first word, or a path below
PROGRAM_PREFIXES = (".venv/bin/", "./")
SHELL_BLOCKS = ("", "bash", "sh", "shell", "console")
QUICK_PROFILE = ["--max-phase-seconds", "4", "--launches", "1"]
TIMEOUT_S = 600
NEEDS = (
    (re.compile(r"#\s*needs an? (CUDA )?GPU\b"), "needs a GPU"),
    (re.compile(r"#\s*needs a cloud\b"), "needs a cloud account"),
)
PAGES = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]


@dataclass(frozen=True)
class Command:
    text: str
    line: int
    skip: str | None = None
    page: str = "README.md"


def readme_commands(text: str, page: str = "README.md") -> list[Command]:
    """The commands of a page's shell code blocks, in order, each with why it is skipped or None."""
    commands = []
    for block in re.finditer(r"^```(\w*)\n(.*?)^```", text, re.M | re.S):
        if block.group(1) not in SHELL_BLOCKS:
            continue
        start = text.count("\n", 0, block.start()) + 2
        for line, joined in _joined_lines(block.group(2), start):
            needs = next((reason for marker, reason in NEEDS if marker.search(joined)), None)
            for part in _without_comment(joined).split(" && "):
                part = part.strip()
                if _is_command(part):
                    skip = needs or skip_reason(part, page)
                    commands.append(Command(part, line, skip, page))
    return commands


def _program_words(command: str) -> list[str]:
    """The command's words from its program on (`NAME=value` settings before it left out)."""
    words = command.split()
    while words and re.fullmatch(r"[A-Z_][A-Z0-9_]*=\S*", words[0]):
        words = words[1:]
    return words


def _is_command(line: str) -> bool:
    words = _program_words(line)
    return bool(words) and (words[0] in PROGRAMS or words[0].startswith(PROGRAM_PREFIXES))


def _joined_lines(body: str, first_line: int) -> list[tuple[int, str]]:
    """Lines with their continuations: a trailing backslash, or (in synopses) an indented next line."""
    joined: list[tuple[int, str]] = []
    continues = False
    for offset, raw in enumerate(body.splitlines()):
        if joined and (continues or (raw[:1].isspace() and raw.strip() and _is_command(joined[-1][1]))):
            joined[-1] = (joined[-1][0], joined[-1][1] + " " + raw.strip().rstrip("\\").strip())
        else:
            joined.append((first_line + offset, raw.rstrip("\\").strip()))
        continues = raw.rstrip().endswith("\\")
    return joined


def _without_comment(command: str) -> str:
    """The command without a trailing `# comment` (outside quotes), and without a synopsis' description
    column (three or more spaces, then words)."""
    out, quote = [], None
    for index, char in enumerate(command):
        if quote:
            quote = None if char == quote else quote
        elif char in "'\"":
            quote = char
        elif char == "#" and (index == 0 or command[index - 1].isspace()):
            break
        out.append(char)
    return re.split(r"\s{3,}(?=[a-z])", "".join(out))[0]


def skip_reason(command: str, page: str = "README.md") -> str | None:
    words = _program_words(" ".join(shlex.split(command)))
    if words[0] == "sudo":
        return "needs root"
    if "--hosts" in words or "remote" in words[:3] or any(re.fullmatch(r"\w+@[\w.-]+", w) for w in words):
        return "needs a remote host"
    if is_synopsis(command):
        return "a synopsis (options in brackets, alternatives, placeholders), not a command"
    if words[0] == "export":
        return "environment set-up: the copy's .venv/bin is on PATH for every command"
    if words[0] in ("./run.sh", "./test.sh"):
        return f"{words[0]} opens the dashboard or runs this suite"
    if any(word.startswith("bench/") for word in words) and not FULL:
        return "a benchmark (minutes on a quiet machine): STASH_README_FULL=1 runs it"
    missing = [word for word in words[1:] if _user_file(word)]
    if missing:
        return f"needs files of the user's that do not ship: {', '.join(missing)}"
    if page != "README.md" and _is_profile(words):
        return "a real profile: the README's first one runs; this one's options are parsed (test below)"
    return None


def is_synopsis(command: str) -> bool:
    words = shlex.split(command)
    return bool(re.search(r"\[|\||\.\.\.", command)) or any(
        re.fullmatch(r"[A-Z][A-Z_]{2,}(\.\.\.)?", w) for w in words
    )


def _is_profile(words: list[str]) -> bool:
    """A command that profiles: `stash profile`, `stash campaign` but a dry run (which only plans)."""
    return ("profile" in words[:3] or "campaign" in words[:3]) and "--dry-run" not in words


def _user_file(word: str) -> bool:
    if word.startswith("-") or "=" in word or word.startswith("bench/"):
        return False
    looks_like_path = "/" in word or re.search(r"\.(py|csv|json|npy|txt)$", word)
    return bool(looks_like_path) and not (REPO / word).exists() and ":" not in word


def readme_sql(text: str) -> list[str]:
    blocks = [block.group(1) for block in re.finditer(r"^```sql\n(.*?)^```", text, re.M | re.S)]
    inline = [span for span in re.findall(r"`(SELECT [^`]+)`", text)]
    return blocks + inline


README = (REPO / "README.md").read_text()
TEXTS = {page.relative_to(REPO).as_posix(): page.read_text() for page in PAGES}


def _once(commands: list[Command]) -> list[Command]:
    """The commands, a command that runs already on an earlier page or line skipped (it would run twice)."""
    first: dict[str, Command] = {}
    kept = []
    for command in commands:
        earlier = first.setdefault(command.text, command) if command.skip is None else command
        if earlier is not command:
            command = replace(command, skip=f"runs as written at {earlier.page} line {earlier.line}")
        kept.append(command)
    return kept


COMMANDS = _once([command for page, text in TEXTS.items() for command in readme_commands(text, page)])


@pytest.fixture(scope="module")
def fresh_copy(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The repository as a fresh clone would hold it, with the environment ./run.sh would have made."""
    copy = tmp_path_factory.mktemp("readme") / "stash"
    git = subprocess.run(["git", "ls-files", "-co", "--exclude-standard"], cwd=REPO, capture_output=True,
                         text=True)  # fmt: skip
    if git.returncode == 0:
        listed = git.stdout.splitlines()
    else:  # not a git checkout (an unpacked archive): its files, less what set-up and runs leave behind
        left_behind = {".git", ".venv", "results", ".pytest_cache"}  # at the top
        relative = [path.relative_to(REPO) for path in REPO.rglob("*")]
        listed = [
            str(p) for p in relative
            if p.parts[0] not in left_behind and "__pycache__" not in p.parts and p.suffix != ".duckdb"
        ]  # fmt: skip
    for name in listed:
        source = REPO / name
        if source.is_file():
            (copy / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, copy / name)
    bin_dir = copy / ".venv" / "bin"
    bin_dir.mkdir(parents=True)
    for name, run in (("stash", f'"{sys.executable}" -m stash_core'), ("python", f'"{sys.executable}"')):
        wrapper = bin_dir / name
        wrapper.write_text(f'#!/bin/sh\nPYTHONPATH="{copy}" exec {run} "$@"\n')
        wrapper.chmod(wrapper.stat().st_mode | stat.S_IXUSR)
    return copy


def _env(copy: Path) -> dict[str, str]:
    env = {key: value for key, value in os.environ.items() if key not in ("STASH_DB", "PYTHONPATH")}
    env["PATH"] = f"{copy / '.venv' / 'bin'}:{env.get('PATH', '')}"
    env["STASH_CACHE_DIR"] = str(copy / ".cache")
    return env


def _params() -> list:
    params = []
    for command in COMMANDS:
        words = _program_words(command.text)
        marks = []
        if command.skip is None and _is_profile(words):
            marks = [pytest.mark.slow, pytest.mark.launches]  # a real profile
        elif command.skip is None and words[1:2] in (["predict"], ["recommend"]):
            marks = [pytest.mark.slow]  # counts a model's step on the meta device, some seconds
        page = Path(command.page).stem
        params.append(
            pytest.param(command, marks=marks, id=f"{page}-line{command.line}-{'-'.join(words[:2])}")
        )
    return params


def test_the_pages_have_commands_to_run() -> None:
    runnable = [command for command in COMMANDS if command.skip is None]
    assert len(runnable) >= 4, COMMANDS
    assert any("spot --workload examples/workload.json" in command.text for command in runnable)
    in_readme = [command.text for command in runnable if command.page == "README.md"]
    assert any(" profile " in text for text in in_readme), in_readme
    assert any("stash predict" in text for text in in_readme), in_readme


@pytest.mark.parametrize("command", _params())
def test_a_readme_command_runs_as_written(command: Command, fresh_copy: Path) -> None:
    if command.skip:
        pytest.skip(f"{command.page} line {command.line}: {command.skip}")
    text = command.text
    if not FULL and _is_profile(_program_words(text)):
        text += " " + " ".join(QUICK_PROFILE)
    done = subprocess.run(["bash", "-c", text], cwd=fresh_copy, env=_env(fresh_copy), capture_output=True,
                          text=True, timeout=TIMEOUT_S)  # fmt: skip
    assert done.returncode == 0, (
        f"{command.page} line {command.line}: {text}\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}"
    )
    assert "Traceback" not in done.stderr


def test_the_readme_sql_runs_on_a_stash_database(fresh_copy: Path, tmp_path: Path) -> None:
    db = tmp_path / "results.duckdb"
    seed = ["stash", "instances", "seed", "--db", str(db)]  # makes the database with every table
    made = subprocess.run(
        seed, cwd=fresh_copy, env=_env(fresh_copy), capture_output=True, text=True, timeout=120
    )
    assert made.returncode == 0, made.stderr
    queries = [query for text in TEXTS.values() for query in readme_sql(text)]
    assert any("stall_breakdown" in query for query in queries)
    with duckdb.connect(str(db), read_only=True) as con:
        for query in queries:
            con.execute(query).fetchall()
        columns = con.execute("SELECT count(*) FROM duckdb_columns() WHERE NOT internal").fetchone()[0]
        described = con.execute(
            "SELECT count(*) FROM duckdb_columns() WHERE NOT internal AND comment IS NOT NULL"
        ).fetchone()[0]
    assert columns == described  # the pages' query lists Stash's own columns, each with its meaning


# --- every `stash` command read by the real command line, whether it runs here or not ---


def stash_argv(command: str) -> list[str] | None:
    """The arguments after `stash` (or `python -m stash_core`), or None for another program."""
    words = _program_words(" ".join(shlex.split(command, comments=True)))
    if words[:1] == ["sudo"]:
        words = words[1:]
    if words and Path(words[0]).name == "stash":
        return words[1:]
    if len(words) >= 3 and Path(words[0]).name.startswith("python") and words[1:3] == ["-m", "stash_core"]:
        return words[3:]
    return None


def _parser_of(parser: argparse.ArgumentParser, words: list[str]) -> list[argparse.ArgumentParser]:
    """The parsers a synopsis names: its command's, descended into every subcommand it names (`cluster status
    | down | set` names three), or all of a command's subcommands where it names none."""
    subparsers = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    if not subparsers:
        return [parser]
    choices = subparsers[0].choices
    named = [word for word in words if word in choices]
    if not named:
        return [parser, *[sub for choice in choices.values() for sub in _parser_of(choice, [])]]
    return [parser, *[sub for name in named for sub in _parser_of(choices[name], words)]]


def _options(parsers: list[argparse.ArgumentParser]) -> set[str]:
    return {flag for parser in parsers for action in parser._actions for flag in action.option_strings}


def _documented_options(argv: list[str]) -> list[str]:
    """The --options a synopsis names (up to a `--` that starts a script's own arguments), less placeholders
    like `--field...`."""
    text = " ".join(argv).split(" -- ")[0]
    return [match.group(1) for match in re.finditer(r"(?<![\w-])(--[a-z][\w-]*)(\.\.\.)?", text)
            if not match.group(2)]  # fmt: skip


STASH_COMMANDS = [
    pytest.param(command, argv, id=f"{Path(command.page).stem}-line{command.line}-{'-'.join(argv[:2])}")
    for command in COMMANDS
    if (argv := stash_argv(command.text)) is not None
]


def test_the_pages_have_stash_commands_to_parse() -> None:
    pages = {command.page for command, _ in (param.values for param in STASH_COMMANDS)}
    assert {"README.md", "docs/commands.md", "docs/machines.md", "docs/spot.md"} <= pages


@pytest.mark.parametrize("command,argv", STASH_COMMANDS)
def test_a_documented_stash_command_is_read_by_the_command_line(command: Command, argv: list[str]) -> None:
    from stash_core.cli.main import build_parser

    parser = build_parser()
    where = f"{command.page} line {command.line}: {command.text}"
    if is_synopsis(command.text):
        commands = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices
        command_parser = commands.get(argv[0])
        assert command_parser is not None, f"{where}: no command {argv[0]!r}"
        known = _options(_parser_of(command_parser, argv[1:]))
        unknown = [option for option in _documented_options(argv[1:]) if option not in known]
        assert not unknown, f"{where}: {argv[0]} has no {', '.join(unknown)}"
        return
    parser.parse_args(argv)  # a usage error raises UsageError with the line `stash` would print


def test_the_synopses_of_profile_name_every_option_it_has_and_the_script_form() -> None:
    """docs/commands.md showed only the --model form: no --script, --data-dir, --script-start-timeout."""
    from stash_core.cli.main import build_parser

    commands = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction)).choices
    synopses = [
        argv for command in COMMANDS
        if command.page == "docs/commands.md" and is_synopsis(command.text)
        and (argv := stash_argv(command.text)) is not None and argv[0] == "profile"
    ]  # fmt: skip
    named = {option for argv in synopses for option in _documented_options(argv[1:])}
    named |= set(re.findall(r"`(--[a-z][\w-]*)`", TEXTS["docs/commands.md"]))  # the options both forms take
    missing = _options([commands["profile"]]) - named - {"-h", "--help"}
    assert not missing, f"docs/commands.md names no {', '.join(sorted(missing))} of stash profile"
    script_forms = [argv for argv in synopses if "--script" in argv]
    assert script_forms and "SCRIPT_ARGS" in " ".join(script_forms[0])


def test_the_readme_python_calls_the_api_with_options_it_takes() -> None:
    import stash_core
    from stash_core.api.options import parse_profile, profile_argv

    blocks = re.findall(r"^```python\n(.*?)^```", README, re.M | re.S)
    assert blocks, "README.md shows the Python API"
    calls = 0
    for block in blocks:
        tree = ast.parse(block)
        aliases = {alias.asname or alias.name for node in ast.walk(tree) if isinstance(node, ast.Import)
                   for alias in node.names if alias.name == "stash_core"}  # fmt: skip
        for node in ast.walk(tree):
            if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
                continue
            if not (isinstance(node.func.value, ast.Name) and node.func.value.id in aliases):
                continue
            function = getattr(stash_core, node.func.attr)  # an AttributeError names a function the API lacks
            args = [ast.literal_eval(arg) for arg in node.args]
            kwargs = {keyword.arg: ast.literal_eval(keyword.value) for keyword in node.keywords}
            inspect.signature(function).bind(*args, **kwargs)
            if node.func.attr == "profile":  # its **options, checked as `stash profile` checks its flags
                parse_profile(profile_argv(None, kwargs))
            calls += 1
    assert calls >= 2
