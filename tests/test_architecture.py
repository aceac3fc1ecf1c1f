"""The house keeps its shape: layers, no circles, no SQL outside the store, no oversized files without a
reason."""

from __future__ import annotations

import contextlib
import fnmatch
import io
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from importlinter.cli import lint_imports

REPO = Path(__file__).resolve().parent.parent
MAX_FILE_LINES = 400
# Files allowed to be longer, each with its reason.
LONG_FILES: dict[str, str] = {}


def test_import_linter_contracts_hold():
    """Layers (cli > views > decide|spot|sched > catalog > store > engine > results > launch > measure >
    data|zoo > analysis > spec_checks|spec_argparse > spec > spec_parse > units|cells|proc|interrupts >
    errors), no streamlit in stash_core, workers never touch the store, no import circles, decide, spot and
    sched independent (see .importlinter)."""
    output = io.StringIO()
    with contextlib.redirect_stdout(output), contextlib.chdir(REPO):
        exit_code = lint_imports(config_filename=str(REPO / ".importlinter"), no_cache=True, no_logo=True)
    assert exit_code == 0, output.getvalue()


def test_pages_hold_no_sql():
    """Pages get their data from stash_core.views; only the SQL console passes the user's own query on."""
    sql = re.compile(
        r"\b(SELECT|INSERT|UPDATE|DELETE)\b[^\n]*\bFROM\b|(?<![.\w])duckdb\b|query_readonly|store\.connect"
    )
    offenders = [
        f"{path.name}:{number}"
        for path in sorted((REPO / "pages").glob("*.py"))
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if sql.search(line) and not line.lstrip().startswith("#")
    ]
    assert offenders == []


# SQL in Python source: a statement's keywords, a transaction, the schema catalogue, or a call that runs SQL.
SQL_OUTSIDE_STORE = re.compile(
    r"\b(SELECT\b[^\n]*\bFROM|INSERT\s+INTO|UPDATE\s+\w+\s+SET|DELETE\s+FROM|BEGIN\s+TRANSACTION"
    r"|CREATE\s+(TABLE|VIEW)|information_schema)\b|\.(execute|executemany|sql)\(|query_readonly\(|run_readonly_query\("
)
# The one place outside stash_core/store/ that hands SQL to the store, with its reason.
SQL_ALLOWED = {
    "stash_core/views/sql.py": "the SQL console passes the user's own query on to store/console.py",
}


def _sql_lines(path: Path) -> list[str]:
    return [
        f"{path.relative_to(REPO)}:{number}"
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if SQL_OUTSIDE_STORE.search(line) and not line.lstrip().startswith("#")
    ]


def test_sql_lives_in_the_store():
    """Every SQL statement is in stash_core/store/ (queries grouped by what they serve); the rest of the core
    calls functions that return frames or rows, so renaming a column touches the store only."""
    offenders = [
        line
        for path in sorted((REPO / "stash_core").rglob("*.py"))
        if "store" not in path.relative_to(REPO / "stash_core").parts[:1]
        and str(path.relative_to(REPO)) not in SQL_ALLOWED
        for line in _sql_lines(path)
    ]
    assert offenders == [], "SQL outside stash_core/store/: move it into a store module"


def test_sql_detection_sees_sql():
    """The check above would catch each kind of statement (so its silence means something)."""
    for line in (
        'con.execute("SELECT count(*) FROM runs")',
        '"INSERT INTO instances (name) VALUES (?)"',
        '"UPDATE runs SET spec = ? WHERE run_id = ?"',
        '"DELETE FROM runs"',
        "relation_frame(con.sql(query))",
        "frame = query_readonly(db_path, text)",
    ):
        assert SQL_OUTSIDE_STORE.search(line), line
    assert not SQL_OUTSIDE_STORE.search("select the run with the largest stall from the list")
    assert all(_sql_lines(REPO / path) for path in SQL_ALLOWED), "an allowed file no longer needs it"


# In docs/architecture.md's map: a package line ("  engine/   ...", "    fit/   ...") opens the section of
# that package, ended by a line indented as much or less; any "name.py" (or a pattern such as "cluster*.py")
# on a line of the section names a module of that package. "other/name.py" names another package's file.
_PACKAGE_LINE = re.compile(r"^(\s*)((?:[a-z_]+/)(?: [a-z_]+/)*)(?=\s|$)")
_MODULE_NAME = re.compile(r"(?<![\w/*.-])([\w*-]+\.py)\b")


def mapped_modules(map_text: str) -> dict[str, set[str]]:
    """{package folder relative to the repository: the module names (or patterns) its section names}."""
    block = map_text.split("## The map", 1)[1].split("```", 2)[1]
    sections: list[tuple[int, list[str]]] = []
    named: dict[str, set[str]] = {}
    for line in block.splitlines():
        if not line.strip():
            continue
        indent = len(line) - len(line.lstrip())
        while sections and sections[-1][0] >= indent:
            sections.pop()
        package = _PACKAGE_LINE.match(line)
        if package:
            parent = sections[-1][1][0] if sections else ""
            folders = [f"{parent}/{name.rstrip('/')}".lstrip("/") for name in package.group(2).split()]
            sections.append((indent, folders))
            line = line[package.end() :]
        for folder in sections[-1][1] if sections else [""]:
            named.setdefault(folder, set()).update(_MODULE_NAME.findall(line))
    return named


def unmapped_modules(map_text: str) -> list[str]:
    named = mapped_modules(map_text)
    modules = [*(REPO / "stash_core").rglob("*.py"), *(REPO / "pages").glob("*.py"), REPO / "app.py"]
    missing = []
    for path in sorted(modules):
        relative = path.relative_to(REPO)
        folder = "" if relative.parent == Path(".") else relative.parent.as_posix()
        patterns = named.get(folder, set())
        if path.name != "__init__.py" and not any(fnmatch.fnmatch(path.name, p) for p in patterns):
            missing.append(str(relative))
    return missing


def test_the_map_names_every_module():
    """docs/architecture.md names every module (stash_core/, pages/, app.py) with its one job, in the section
    of its package (a package is named by its own line, so __init__.py files need none)."""
    assert unmapped_modules((REPO / "docs" / "architecture.md").read_text()) == [], (
        "add a line for each module to the map in docs/architecture.md"
    )


def test_an_unmapped_module_is_found():
    """The check above fails for a module the map leaves out, and reads sections by package."""
    text = (REPO / "docs" / "architecture.md").read_text()
    assert "stash_core/engine/machine.py" in unmapped_modules(text.replace("machine.py", "gone.py"))
    named = mapped_modules(
        "## The map\n```\nstash_core/\n  a/   x.py\n    b/   y.py other/z.py\n  c.py\n```\n"
    )
    assert named == {"stash_core": {"c.py"}, "stash_core/a": {"x.py"}, "stash_core/a/b": {"y.py"}}


def test_files_are_small_or_say_why():
    long_files = {
        str(path.relative_to(REPO)): lines
        for path in [*(REPO / "stash_core").rglob("*.py"), *(REPO / "pages").glob("*.py"), REPO / "app.py"]
        if (lines := len(path.read_text().splitlines())) > MAX_FILE_LINES
    }
    unexplained = {path: lines for path, lines in long_files.items() if path not in LONG_FILES}
    assert unexplained == {}, f"files over {MAX_FILE_LINES} lines: split them or give a reason in LONG_FILES"


# The top level is the design card's shape plus the two commands and the project's own settings.
TOP_LEVEL_FILES = {
    ".ci", ".gitignore", ".importlinter", ".streamlit", "README.md", "app.py", "pyproject.toml",
    "requirements.txt", "requirements-cloud.txt", "requirements-dev.txt", "run.sh", "test.sh",
    "stash_core", "pages", "tests", "docs", "bench", "examples", "scripts",
}


def test_the_top_level_holds_only_the_project():
    """No stray file is committed beside app.py (a scratch script at the top would ship with every clone)."""
    if shutil.which("git") is None or not (REPO / ".git").exists():
        pytest.skip("not a git checkout")
    tracked = subprocess.run(
        ["git", "ls-files"], cwd=REPO, capture_output=True, text=True, check=True
    ).stdout.split()
    assert {name.split("/", 1)[0] for name in tracked} - TOP_LEVEL_FILES == set()


def test_every_test_module_has_a_name_of_its_own():
    """Test folders are not packages, so pytest imports each file by its name alone: a second file of the same
    name fails to collect (in one worker and not another, under xdist) and its tests never run."""
    modules: dict[str, list[str]] = {}
    for path in (REPO / "tests").rglob("*.py"):
        if "__pycache__" not in path.parts and path.name != "conftest.py":
            modules.setdefault(path.stem, []).append(str(path.relative_to(REPO)))
    assert {name: paths for name, paths in modules.items() if len(paths) > 1} == {}
