"""Every command in the README's code blocks runs as written, in README order, on a fresh copy of the
repository, so that the README and Stash cannot drift apart. The commands are found, not listed here: a
line of a code block whose first word is a program (`stash`, `.venv/bin/...`, `python`, `sudo`, `./...`,
`bash`, `export`) is a command, with its indented or backslash-continued lines; `&&` separates commands;
`# ...` is a comment. The SQL of ```sql blocks and of inline `SELECT ...` spans runs against the database
the commands made.

What is not run, each with its reason in the skip message:
  - root (`sudo`) or a remote host (`--hosts`, `remote check`, `user@host`);
  - synopses: options in [brackets], alternatives with |, `...`, or UPPER-CASE placeholders (RUN_ID);
  - files of the user's that do not ship (train.py, losses.csv, /data/...);
  - `./run.sh` (opens the dashboard and stays) and `./test.sh` (the suite itself), and `export` (the test
    applies it: the copy's .venv/bin is on PATH for every command);
  - benchmarks (bench/..., minutes on a quiet machine) unless STASH_README_FULL=1.
Profiles (`stash profile`, `stash campaign`) run as written with `--max-phase-seconds 4 --launches 1`
appended (a later option wins), to keep the test to a minute, unless STASH_README_FULL=1; they are marked
slow. The fresh copy holds the files git tracks (and untracked ones not ignored); its `.venv/bin` holds
`stash` and `python` that run this Python on the copy, as `./run.sh` would have set it up.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import stat
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import duckdb
import pytest

REPO = Path(__file__).resolve().parents[1]
FULL = os.environ.get("STASH_README_FULL") == "1"
PROGRAMS = ("stash", ".venv/bin/", "python", "sudo", "./", "bash", "export")
QUICK_PROFILE = ["--max-phase-seconds", "4", "--launches", "1"]
TIMEOUT_S = 600


@dataclass(frozen=True)
class Command:
    text: str
    line: int
    skip: str | None = None


def readme_commands(text: str) -> list[Command]:
    """The commands of the README's code blocks (not sql), in order, each with why it is skipped or None."""
    commands = []
    for block in re.finditer(r"^```(\w*)\n(.*?)^```", text, re.M | re.S):
        if block.group(1) == "sql":
            continue
        start = text.count("\n", 0, block.start()) + 2
        for line, joined in _joined_lines(block.group(2), start):
            for part in joined.split(" && "):
                part = _without_comment(part).strip()
                if part.startswith(PROGRAMS):
                    commands.append(Command(part, line, skip_reason(part)))
    return commands


def _joined_lines(body: str, first_line: int) -> list[tuple[int, str]]:
    """Lines with their continuations: a trailing backslash, or (in synopses) an indented next line."""
    joined: list[tuple[int, str]] = []
    continues = False
    for offset, raw in enumerate(body.splitlines()):
        if joined and (
            continues or (raw[:1].isspace() and raw.strip() and joined[-1][1].startswith(PROGRAMS))
        ):
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


def skip_reason(command: str) -> str | None:
    words = shlex.split(command)
    if words[0] == "sudo":
        return "needs root"
    if "--hosts" in words or "remote" in words[:3] or any(re.fullmatch(r"\w+@[\w.-]+", w) for w in words):
        return "needs a remote host"
    if re.search(r"\[|\||\.\.\.", command) or any(
        re.fullmatch(r"[A-Z][A-Z_]{2,}(\.\.\.)?", w) for w in words
    ):
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
    return None


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
COMMANDS = readme_commands(README)


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
        words = shlex.split(command.text)
        slow = "profile" in words[:3] or "campaign" in words[:3]
        marks = [pytest.mark.slow, pytest.mark.launches] if slow else []  # a real profile
        params.append(pytest.param(command, marks=marks, id=f"line{command.line}-{'-'.join(words[:2])}"))
    return params


def test_the_readme_has_commands_to_run() -> None:
    runnable = [command for command in COMMANDS if command.skip is None]
    assert len(runnable) >= 4, COMMANDS
    assert any("spot --workload examples/workload.json" in command.text for command in runnable)


@pytest.mark.parametrize("command", _params())
def test_a_readme_command_runs_as_written(command: Command, fresh_copy: Path) -> None:
    if command.skip:
        pytest.skip(f"README line {command.line}: {command.skip}")
    text = command.text
    words = shlex.split(text)
    if not FULL and ("profile" in words[:3] or "campaign" in words[:3]):
        text += " " + " ".join(QUICK_PROFILE)
    done = subprocess.run(["bash", "-c", text], cwd=fresh_copy, env=_env(fresh_copy), capture_output=True,
                          text=True, timeout=TIMEOUT_S)  # fmt: skip
    assert done.returncode == 0, (
        f"README line {command.line}: {text}\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}"
    )
    assert "Traceback" not in done.stderr


def test_the_readme_sql_runs_on_a_stash_database(fresh_copy: Path, tmp_path: Path) -> None:
    db = tmp_path / "results.duckdb"
    seed = ["stash", "instances", "seed", "--db", str(db)]  # makes the database with every table
    made = subprocess.run(
        seed, cwd=fresh_copy, env=_env(fresh_copy), capture_output=True, text=True, timeout=120
    )
    assert made.returncode == 0, made.stderr
    queries = readme_sql(README)
    assert queries
    with duckdb.connect(str(db), read_only=True) as con:
        for query in queries:
            con.execute(query).fetchall()
        columns = con.execute("SELECT count(*) FROM duckdb_columns() WHERE NOT internal").fetchone()[0]
        described = con.execute(
            "SELECT count(*) FROM duckdb_columns() WHERE NOT internal AND comment IS NOT NULL"
        ).fetchone()[0]
    assert columns == described  # the README's query lists Stash's own columns, each with its meaning
