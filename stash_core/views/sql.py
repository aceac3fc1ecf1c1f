"""SQL console: the schema browser, column documentation and example queries."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from stash_core import PACKAGE_PARENT, store
from stash_core.results.file import STALL_NAMES

SCHEMA_DOC = Path(PACKAGE_PARENT) / "docs" / "schema.md"


# ---------------------------------------------------------------------------------------------------------
# SQL console: schema browser and examples

EXAMPLE_QUERIES: list[tuple[str, str]] = [
    (
        "Newest runs and their breakdown",
        "SELECT run_id, model, batch_size, workers_per_node, instance, iteration_s,\n"
        "       compute_share, interconnect_share, cpu_share, disk_share\n"
        "FROM stall_breakdown\nORDER BY started_at DESC\nLIMIT 20",
    ),
    (
        "Largest stall of each run",
        "SELECT run_id, model, arg_max(stall, seconds) AS largest_stall, max(seconds) AS seconds\n"
        "FROM stalls JOIN runs USING (run_id)\nWHERE seconds IS NOT NULL\nGROUP BY ALL\n"
        "ORDER BY seconds DESC\nLIMIT 20",
    ),
    (
        "Mean iteration time per model and instance",
        "SELECT model, instance, count(*) AS runs, avg(iteration_s) AS iteration_s\n"
        "FROM runs\nWHERE status = 'completed'\nGROUP BY ALL\nORDER BY model, iteration_s",
    ),
    (
        "Iteration-time percentiles per phase",
        "SELECT run_id, phase, count(*) AS iterations,\n"
        "       quantile_cont(iteration_s, 0.5) AS median_s,\n"
        "       quantile_cont(iteration_s, 0.95) AS p95_s\n"
        "FROM iterations\nWHERE run_id = (SELECT max(run_id) FROM runs)\nGROUP BY ALL\nORDER BY phase",
    ),
    (
        "Peak CPU and disk use per run",
        "SELECT run_id, metric, max(value) AS peak\nFROM telemetry\n"
        "WHERE metric IN ('cpu_util_pct', 'disk_read_mbps')\nGROUP BY ALL\nORDER BY run_id DESC\nLIMIT 40",
    ),
]


def schema_browser(db_path: Path | str) -> dict[str, dict[str, Any]]:
    """Per table and view of the store: kind, row count (tables), columns with type and documented meaning."""
    documented = schema_documentation()
    names = [*store.TABLES, *store.VIEWS]
    with store.connect(db_path, read_only=True) as con:
        columns = con.execute(
            "SELECT table_name, column_name, data_type FROM information_schema.columns "
            "WHERE table_schema = 'main' AND list_contains(?, table_name) "
            "ORDER BY table_name, ordinal_position",
            [names],
        ).fetchall()
        counts = {}
        for table in store.TABLES:
            row = con.execute(
                "SELECT estimated_size FROM duckdb_tables() WHERE schema_name = 'main' AND table_name = ?",
                [table],
            ).fetchone()
            counts[table] = None if row is None else int(row[0])
    browser: dict[str, dict[str, Any]] = {
        name: {
            "kind": "view" if name in store.VIEWS else "table",
            "rows": counts.get(name),
            "columns": [],
            "about": documented.get(name, {}).get("", ""),
        }  # fmt: skip
        for name in names
    }
    for table, column, data_type in columns:
        meaning = documented.get(table, {}).get(column, "")
        browser[table]["columns"].append({"column": column, "type": data_type, "meaning": meaning})
    return browser


def schema_documentation(path: Path = SCHEMA_DOC) -> dict[str, dict[str, str]]:
    """Column meanings from docs/schema.md: {table: {column: meaning, "": what the table holds}}.

    Reads a heading that names a table or view (e.g. "### `runs` - one row per profile") followed by a
    Markdown table with a "column" header and a "meaning" header (a "unit" column is added in brackets).
    A cell may name several columns (`a`, `b`) or a pattern with `<stall>`; "as in `runs`" borrows the runs
    table's meaning. A missing file gives an empty result.
    """
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError:
        return {}
    known = {*store.TABLES, *store.VIEWS}
    docs: dict[str, dict[str, str]] = {}
    current: str | None = None
    header: list[str] = []
    summary = ""  # the heading's own description ("### `runs` - one row per profile")
    paragraph: list[str] = []  # the first paragraph under the heading
    paragraph_done = False

    def finish() -> None:
        if current is not None:
            text = " ".join(paragraph)
            parts = [summary[:1].upper() + summary[1:] if summary else "", text]
            docs[current][""] = ". ".join(part.rstrip(".") for part in parts if part) + (
                "." if any(parts) else ""
            )

    for index, line in enumerate(lines):
        heading = re.match(r"^#{2,4}\s+(.*)$", line)
        if heading:
            finish()
            name_part, _, description = heading.group(1).partition(" - ")
            words = re.findall(r"[A-Za-z_]+", name_part)
            current = next((word for word in words if word in known), None)
            header, paragraph, paragraph_done = [], [], False
            summary = description.strip()
            if current is not None:
                docs.setdefault(current, {})
            continue
        if current is None:
            continue
        if not line.startswith("|"):
            if line.strip() and not header and not paragraph_done:
                paragraph.append(line.strip())
            elif paragraph:
                paragraph_done = True
            continue
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        following = lines[index + 1] if index + 1 < len(lines) else ""
        if re.fullmatch(r"\|?[\s:|-]+\|?", following.strip() or "x"):
            header = [cell.lower() for cell in cells]  # the header row sits above the separator
            continue
        if set("".join(cells)) <= set("-: ") or not header or "meaning" not in header:
            continue
        meaning = cells[header.index("meaning")].replace("`", "") if len(cells) == len(header) else cells[-1]
        unit = cells[header.index("unit")] if "unit" in header and len(cells) == len(header) else ""
        text = f"{meaning} ({unit})" if unit else meaning
        for name in _column_names(cells[0]):
            borrowed = re.fullmatch(r"as in (\w+)", meaning.strip())
            if borrowed and borrowed.group(1) in docs and name in docs[borrowed.group(1)]:
                docs[current][name] = docs[borrowed.group(1)][name]
            else:
                docs[current][name] = text
    finish()
    return docs


def _column_names(cell: str) -> list[str]:
    names = re.findall(r"`([^`]+)`", cell) or [cell.strip("* ")]
    expanded = []
    for name in names:
        if "<stall>" in name:
            expanded += [name.replace("<stall>", stall) for stall in STALL_NAMES]
        elif re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
            expanded.append(name)
    return expanded
