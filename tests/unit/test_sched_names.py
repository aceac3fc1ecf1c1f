"""The simulator's names, held in one place below it: the simulator, the store's check and the database's
documentation say the same."""

from __future__ import annotations

from pathlib import Path

from stash_core import sched_names
from stash_core.sched import detect, formats, policy

SCHEMA_DOC = Path(__file__).resolve().parents[2] / "docs" / "schema.md"


def test_the_simulator_uses_the_names_the_store_holds_files_to() -> None:
    assert policy.POLICIES is sched_names.POLICIES
    assert detect.FORMATS is formats.FORMATS is sched_names.TRACE_FORMATS


def test_the_database_documentation_names_every_policy_and_trace_format() -> None:
    lines = SCHEMA_DOC.read_text().splitlines()
    policy_row = next(line for line in lines if line.startswith("| `policy` |"))
    format_row = next(line for line in lines if line.startswith("| `trace_format` |"))
    assert all(f"`{name}`" in policy_row for name in sched_names.POLICIES)
    trace_formats = (*sched_names.TRACE_FORMATS, sched_names.SYNTHETIC_TRACE)
    assert all(f"`{name}`" in format_row for name in trace_formats)
