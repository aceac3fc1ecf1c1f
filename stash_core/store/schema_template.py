"""A new database's schema copied from a template made once per process.

Creating the schema statement by statement costs DuckDB some 0.15 s of CPU (most of it the thousand-odd
COMMENT ON statements, each a change of the catalog); copying the same catalog and rows from a database that
holds them (COPY FROM DATABASE) some 0.02 s. The template is a file in a temporary folder of this process,
made by create_schema itself, so a copy is the same database: tables, constraints, views, every comment and
the shipped instance catalog's rows (tests/unit/store/test_schema_template.py compares them). The folder is
removed when the process exits, or, where it was killed, by the next process that makes a template.
"""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
import threading
from pathlib import Path

import duckdb

from stash_core.proc import remove_folders_of_ended
from stash_core.store.instances import transaction
from stash_core.store.schema import create_schema
from stash_core.store.sql_names import quoted_name

_ALIAS = "stash_schema_template"
_PREFIX = "stash-schema-"  # then this process's id: a folder of a process that is gone is removed
_lock = threading.Lock()
_template: Path | None = None
# Held while a thread of this process creates or migrates a schema: threads on one database share its DuckDB
# instance, where two would attach the template under the same name, or make one schema twice.
SCHEMA_CHANGE = threading.RLock()


def template_path() -> Path:
    """This process's template (made on first use, again if it was removed); raises OSError or duckdb.Error
    when it cannot be made (a full or read-only temporary folder)."""
    global _template
    with _lock:
        if _template is None or not _template.exists():
            remove_folders_of_ended(Path(tempfile.gettempdir()), _PREFIX)  # of processes killed
            folder = Path(tempfile.mkdtemp(prefix=f"{_PREFIX}{os.getpid()}-"))
            atexit.register(shutil.rmtree, folder, True)
            path = folder / "schema.duckdb"
            con = duckdb.connect(str(path), config={"autoinstall_known_extensions": False})
            try:
                with transaction(con):
                    create_schema(con)
            finally:
                con.close()
            _template = path
        return _template


def copy_schema(con: duckdb.DuckDBPyConnection) -> None:
    """The schema of a new Stash database, in the open (empty) database of con, in one transaction: copied
    from the template, or created statement by statement where no template can be made."""
    try:
        template = template_path()
    except (OSError, duckdb.Error):
        with transaction(con):
            create_schema(con)
        return
    target = con.execute("SELECT current_database()").fetchall()[0][0]
    literal = "'" + str(template).replace("'", "''") + "'"
    identifier = quoted_name(target)
    with SCHEMA_CHANGE:  # the alias is the instance's: one attachment at a time
        con.execute(f"ATTACH {literal} AS {_ALIAS} (READ_ONLY)")  # outside the transaction: DuckDB detaches
        try:  # a database only where no transaction has worked on it
            with transaction(con):
                con.execute(f"COPY FROM DATABASE {_ALIAS} TO {identifier}")
        finally:
            con.execute(f"DETACH {_ALIAS}")
