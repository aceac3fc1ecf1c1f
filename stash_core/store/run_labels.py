"""The reads and the one write the check of instance labels (stash_core/catalog/labels.py) makes on `runs`."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pandas as pd

from stash_core.store.connection import connect
from stash_core.store.relations import query_readonly

# The user's word that a run's instance label is right, merged into its stored spec by `stash instances
# confirm`: the database's, not the result file's, so a file ingested again is still the same run.
CONFIRMED_KEY = "instance_confirmed"


def label_rows(db_path: Path | str, run_ids: list[str]) -> pd.DataFrame:
    """(run_id, instance, spec, fingerprint) of the stored runs among `run_ids`, spec and fingerprint as JSON
    text."""
    return query_readonly(
        db_path,
        "SELECT run_id, instance, CAST(spec AS VARCHAR) AS spec, CAST(fingerprint AS VARCHAR) AS fingerprint "
        "FROM runs WHERE list_contains(CAST(? AS VARCHAR[]), run_id)",
        [list(run_ids)],
    )


def merge_into_spec(db_path: Path | str, run_id: str, fields: dict[str, Any]) -> None:
    """Merge `fields` into a stored run's spec (runs.spec), keeping its other keys."""
    with connect(db_path) as con:
        con.execute(
            "UPDATE runs SET spec = json_merge_patch(coalesce(spec, '{}'), ?) WHERE run_id = ?",
            [json.dumps(fields), run_id],
        )
