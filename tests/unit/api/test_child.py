"""The profile child (`python -m stash_core.api.child`): what the dashboard and a campaign start, never the
`stash` command; a refused profile is one line and exit 2, as under `stash profile`."""

from __future__ import annotations

import re
import subprocess
import sys

from support import REPO

from stash_core.engine.job_state import _measures
from stash_core.engine.profile_child import PROFILE_CHILD_MODULE, child_env, profile_command

# The `stash` command started as a module: ["python", "-m", "stash_core", ...] (a submodule such as
# stash_core.api.child is fine).
BARE_CLI = re.compile(r"""["']-m["']\s*,\s*["']stash_core["']""")


def test_no_module_outside_the_cli_starts_the_stash_command():
    package = REPO / "stash_core"
    found = [
        f"{path.relative_to(REPO)}:{number}"
        for path in sorted(package.rglob("*.py"))
        if path.relative_to(package).parts[0] != "cli"
        for number, line in enumerate(path.read_text().splitlines(), start=1)
        if BARE_CLI.search(line)
    ]
    assert found == [], "start the profile child (engine/profile_child.py), not `python -m stash_core`"


def test_the_grep_sees_the_bare_command_and_not_a_submodule():
    assert BARE_CLI.search('[sys.executable, "-m", "stash_core", "profile"]')
    assert not BARE_CLI.search('[sys.executable, "-m", "stash_core.api.child"]')


def test_the_child_command_and_that_it_counts_as_a_measurement(tmp_path):
    argv = profile_command(tmp_path / "x.duckdb", ["--model", "resnet10"], python="python3")
    assert argv[:4] == ["python3", "-P", "-m", PROFILE_CHILD_MODULE]  # -P: no current folder on sys.path
    assert argv[-4:] == ["--db", str((tmp_path / "x.duckdb").resolve()), "--progress", "json"]
    assert _measures(argv)  # the registry's "is something measuring here" sees it


def test_a_refused_profile_is_one_line_and_exit_2(tmp_path):
    db = tmp_path / "x.duckdb"
    argv = profile_command(db, ["--model", "resnet10", "--batch-size", "0"], python=sys.executable)
    done = subprocess.run(argv, capture_output=True, text=True, env=child_env(db), cwd=tmp_path, timeout=120)
    assert done.returncode == 2
    assert done.stderr == "stash: profile: argument --batch-size: must be a positive integer, got 0\n"
    assert done.stdout == "" and not db.exists()


def test_a_json_py_in_the_current_folder_is_not_the_childs_json(tmp_path):
    ran = tmp_path / "stray-ran.txt"
    (tmp_path / "json.py").write_text(f"open({str(ran)!r}, 'w').write('ran')\nraise SystemExit(7)\n")
    db = tmp_path / "x.duckdb"
    argv = profile_command(db, ["--model", "resnet10", "--batch-size", "0"], python=sys.executable)
    done = subprocess.run(argv, capture_output=True, text=True, env=child_env(db), cwd=tmp_path, timeout=120)
    assert done.stderr == "stash: profile: argument --batch-size: must be a positive integer, got 0\n"
    assert done.returncode == 2 and not ran.exists()
