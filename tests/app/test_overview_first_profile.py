"""The Overview's one-click first profile waits for a confirmation while another measurement runs on the
machine (as the Run page does), and its terminal block says a command that works here."""

from __future__ import annotations

from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest
from support import REPO

from stash_core.engine import job_state


def overview() -> AppTest:
    app = AppTest.from_file(str(REPO / "app.py"), default_timeout=90)
    app.run()
    assert not app.exception, [e.value for e in app.exception]
    return app


def test_the_first_profile_waits_while_another_measurement_runs(
    empty_db: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    other = [{"pid": 4242, "command": "python -m stash_core profile --model resnet18"}]
    monkeypatch.setattr(job_state, "measuring_processes", lambda known_pids=frozenset(): other)
    app = overview()
    assert app.button(key="first-profile").disabled
    assert any("Another measurement is running" in w.value and "4242" in w.value for w in app.warning)
    app.checkbox(key="first-profile-anyway").check().run()
    assert not app.button(key="first-profile").disabled


def test_the_first_profile_is_offered_on_a_quiet_machine_with_a_working_command(empty_db: Path) -> None:
    app = overview()
    assert not app.button(key="first-profile").disabled and not app.warning
    [block] = [code.value for code in app.code]
    program = block.split()[0]
    assert program == "stash" or Path(program).is_file()
    assert f"--db {empty_db}" in block  # the dashboard's database, not the terminal's current folder


def test_another_measurement_s_command_line_is_shown_as_data(
    empty_db: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A command line with Markdown in it (a model file's folder) was rendered: bold, a link, a formula."""
    from stash_core.views.common import plain

    command = "stash profile --model '/tmp/**BOLD**/[link](http://x.example)/$x^2$/m.py:make'"
    other = [{"pid": 4243, "command": command}]
    monkeypatch.setattr(job_state, "measuring_processes", lambda known_pids=frozenset(): other)
    assert any(plain(command) in warning.value for warning in overview().warning)


def test_the_first_profile_opens_the_run_page_on_the_database_chosen(
    empty_db: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The Run page it opened was on the default database again: "No profile job ... next to this
    database", the job neither followed nor cancellable, and the next start on the default one."""
    from stash_core.engine import jobs

    chosen = tmp_path / "chosen" / "other.duckdb"
    started: list[Path] = []
    monkeypatch.setattr(jobs, "start_profile_job", lambda db, args, label=None: started.append(db) or "job-1")
    app = overview()
    app.text_input(key="stash_db_setting").set_value(str(chosen)).run()
    app.button(key="first-profile").click().run()
    assert started == [chosen]
    assert app.text_input(key="stash_db_setting").value == str(chosen)
    assert app.session_state["stash_db_path"] == str(chosen)
