"""A form keeps what was typed while the user looks at another page: Streamlit drops a widget's value once
its page is left, so a half-filled Run or Schedule form came back empty."""

from __future__ import annotations

from pathlib import Path

from streamlit.testing.v1 import AppTest
from support import REPO


def _app() -> AppTest:
    app = AppTest.from_file(str(REPO / "app.py"), default_timeout=120)
    app.run()
    assert not app.exception, [e.value for e in app.exception]
    return app


def _visit(app: AppTest, page: str) -> AppTest:
    app.switch_page(f"pages/{page}.py").run()
    assert not app.exception, [e.value for e in app.exception]
    return app


def test_typed_values_survive_a_visit_to_another_page(empty_db: Path) -> None:
    app = _visit(_app(), "run")
    app.text_input(key="run-instance").set_value("my-box")
    app.radio(key="run-where").set_value("hosts").run()
    app.text_input(key="run-hosts").set_value("gpu-a,gpu-b").run()
    app = _visit(app, "schedule")
    app.number_input(key="sched-switches").set_value(7)
    app.multiselect(key="sched-policies").set_value(["fifo", "las"]).run()
    app = _visit(_visit(app, "overview"), "run")
    assert app.text_input(key="run-instance").value == "my-box"
    assert app.radio(key="run-where").value == "hosts"
    assert app.text_input(key="run-hosts").value == "gpu-a,gpu-b"
    app = _visit(app, "schedule")
    assert app.number_input(key="sched-switches").value == 7
    assert app.multiselect(key="sched-policies").value == ["fifo", "las"]

