"""The house keeps its shape: layers, no circles, no SQL in pages, no oversized files without a reason."""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

from importlinter.cli import lint_imports

REPO = Path(__file__).resolve().parent.parent
MAX_FILE_LINES = 400
# Files allowed to be longer, each with its reason.
LONG_FILES: dict[str, str] = {
    "stash_core/spec.py": "the one table of every profile option with the check of each field",
    "stash_core/store/schema_docs.py": "the description of every table and column: data, not logic",
}


def test_import_linter_contracts_hold():
    """Layers (cli > views > decide|spot|sched > catalog > store > engine > results > launch > measure >
    data|zoo > analysis >
    spec > units|proc|interrupts > errors), no streamlit in stash_core, workers never touch the store, and
    no import circles (see .importlinter)."""
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


def test_files_are_small_or_say_why():
    long_files = {
        str(path.relative_to(REPO)): lines
        for path in [*(REPO / "stash_core").rglob("*.py"), *(REPO / "pages").glob("*.py"), REPO / "app.py"]
        if (lines := len(path.read_text().splitlines())) > MAX_FILE_LINES
    }
    unexplained = {path: lines for path, lines in long_files.items() if path not in LONG_FILES}
    assert unexplained == {}, f"files over {MAX_FILE_LINES} lines: split them or give a reason in LONG_FILES"
