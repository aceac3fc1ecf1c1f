"""Where `stash probe` keeps what it measured when the database cannot take it: a file, and the command that
stores it later (as a profile's run is). Imports are lazy: the command line starts without the store's
pandas."""

from __future__ import annotations

from pathlib import Path


def store_probe(probe: dict, out: Path | None, db_path: Path) -> None:
    """Store the probe; when the database cannot take it (locked past the wait, a full disk), keep it in a
    file (--out, else results/PROBE_ID.json beside the database) and say how to store it later (exit 1)."""
    from stash_core.errors import StashError, first_line
    from stash_core.results.file import default_result_path, results_dir_of, write_result_atomic
    from stash_core.store.ingest import ingest_probe
    from stash_core.terminal import shell_word

    try:
        ingest_probe(db_path, probe)
    except StashError as error:
        kept = out
        if kept is None:
            kept = default_result_path(probe["probe_id"], results_dir_of(db_path))
            try:
                write_result_atomic(kept, probe)
            except StashError as file_error:
                raise StashError(f"probe {probe['probe_id']} could not be saved: {first_line(error)}; "
                                 f"{first_line(file_error)}") from None  # fmt: skip
        ingest = f"stash ingest {shell_word(str(kept.resolve()))} --db {shell_word(str(db_path.resolve()))}"
        raise StashError(f"could not store probe {probe['probe_id']}: {first_line(error)}; it is kept in "
                         f"{kept}: store it later with `{ingest}`") from None  # fmt: skip
