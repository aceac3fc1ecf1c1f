"""The Upload page's reading of an exported table's bytes: a CSV as `stash export` wrote it, a Parquet file
only where its footer says it stays within what the dashboard's process may hold, and a table's number
columns read as numbers cell by cell."""

from __future__ import annotations

import functools
import io

import pandas as pd

from stash_core.errors import UsageError
from stash_core.terminal import clipped, csv_unescaped, formula_unquoted, one_line


def read_csv(data: bytes) -> pd.DataFrame:
    """A CSV table as `stash export` wrote it: a column that holds text in the exported tables read as text (a
    text that looks like a number stays that text, "0.10" not 0.1), only an empty cell missing (an error or a
    name "NA", "null" or "N/A" is that text, as exported), the quote put before a formula-leading cell taken
    off and the escapes taken back (terminal.csv_unescaped: a control character written as \\x1b), except in
    JSON columns, written as they are. An empty text reads as missing too (a CSV cannot tell them apart to
    pandas' reader)."""
    header = pd.read_csv(io.BytesIO(data), nrows=0).columns
    texts = [column for column in header if column not in _number_columns()]
    as_text = dict.fromkeys(texts, str)
    frame = pd.read_csv(io.BytesIO(data), keep_default_na=False, na_values=[""], dtype=as_text)
    for column in (column for column in texts if column not in _json_columns()):  # JSON is written as it is
        cells = frame[column]
        changed = cells.map(_changed_by_writer).astype(bool)
        if changed.any():
            frame.loc[changed, column] = cells[changed].map(_cell_as_written)
    return frame


@functools.cache
def _number_columns() -> frozenset[str]:
    """The names of the columns that hold numbers in every exported table that has them (a name that holds
    text in one of them is read as text, and numbers_read makes numbers of it where its table says so)."""
    from stash_core.store.export import EXPORTED, numeric_columns, text_columns

    numbers = set().union(*(numeric_columns(table) for table in EXPORTED))
    return frozenset(numbers - set().union(*(text_columns(table) for table in EXPORTED)))


@functools.cache
def _json_columns() -> frozenset[str]:
    """The names of the columns that hold JSON in every exported table that has them."""
    from stash_core.store.export import EXPORTED, json_columns, text_columns

    json_names = set().union(*(json_columns(table) for table in EXPORTED))
    other_texts = set().union(*(text_columns(table) - json_columns(table) for table in EXPORTED))
    return frozenset(json_names - other_texts)


def _changed_by_writer(cell: object) -> bool:
    """Whether a writer changed the cell: a backslash (an escape, or one written twice) or a quote that may
    stand before a formula's lead."""
    return isinstance(cell, str) and ("\\" in cell or cell.startswith("'"))


def _cell_as_written(cell: object) -> object:
    return csv_unescaped(formula_unquoted(cell)) if isinstance(cell, str) else cell


# A Parquet file is compressed: a few hundred bytes can declare gigabytes of rows. Its footer says how much it
# expands to; more than this is refused before anything is decompressed in the dashboard's process.
MAX_PARQUET_EXPANDED_BYTES = 1 << 30
MAX_PARQUET_ROWS = 20_000_000


def read_parquet_bounded(data: bytes) -> pd.DataFrame:
    import pyarrow.parquet as pq

    meta = pq.ParquetFile(io.BytesIO(data)).metadata
    # the footer's uncompressed size, or 8 bytes a cell where its encoding (runs of one value) is smaller
    stored = sum(meta.row_group(index).total_byte_size for index in range(meta.num_row_groups))
    expanded = max(stored, meta.num_rows * meta.num_columns * 8)
    if expanded > MAX_PARQUET_EXPANDED_BYTES or meta.num_rows > MAX_PARQUET_ROWS:
        raise UsageError(
            f"it expands to about {expanded / 2**20:,.0f} MiB ({meta.num_rows:,} rows x {meta.num_columns} "
            f"columns); at most {MAX_PARQUET_EXPANDED_BYTES >> 20:,} MiB and {MAX_PARQUET_ROWS:,} rows are "
            "read here (`stash ingest` takes result files of any size)"
        )
    return pd.read_parquet(io.BytesIO(data))


def numbers_read(table: str, frame: pd.DataFrame) -> pd.DataFrame:
    """`frame` with the table's number columns as numbers; UsageError naming the first cell that is not one
    (its data row, row 1 the first after a CSV's header, and its run): one edited cell made the whole
    column text, and the refusal then quoted another run's valid value."""
    from stash_core.store.export import numeric_columns

    frame = frame.copy()
    for column in sorted(numeric_columns(table) & set(frame.columns)):
        cells = frame[column]
        if pd.api.types.is_numeric_dtype(cells):
            continue
        numbers = pd.to_numeric(cells, errors="coerce")
        bad = cells.notna() & numbers.isna() & ~cells.astype(str).str.strip().str.lower().isin(_NOT_A_NUMBER)
        if bad.any():
            row = int(bad.to_numpy().nonzero()[0][0])
            run = frame["run_id"].iloc[row] if "run_id" in frame.columns else None
            of_run = f" (run {one_line(run)})" if isinstance(run, str) else ""
            value = clipped(one_line(cells.iloc[row]), quoted=True)
            raise UsageError(f"row {row + 1}{of_run}: {column} {value} is not a number")
        frame[column] = numbers
    return frame


_NOT_A_NUMBER = {"nan", "inf", "-inf", "+inf", "infinity", "-infinity"}  # read as numbers, checked later
