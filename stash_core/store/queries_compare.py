"""The reads of the Compare page (stash_core/views/compare.py): completed runs with their job as columns.

A job is everything that makes two runs the same work (views.compare.JOB_COLUMNS); its input shape and its
data are derived here from the run's spec and data columns, so that two runs of one job compare equal.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from stash_core.store.connection import connect
from stash_core.store.relations import relation_frame

# The job of every completed run, as columns next to its stall_breakdown row.
_INPUT_SHAPE = (
    "coalesce(nullif(replace(replace(replace(CAST(json_extract(r.spec, '$.input_shape') AS VARCHAR), "
    "'[', ''), ']', ''), ',', 'x'), 'null'), 'model default')"
)
# A token model (model kind 'tokens') reads text documents, which have no pixel size.
_SAMPLES = "CASE WHEN r.model_kind = 'tokens' THEN 'documents' ELSE 'images' END"
_SOURCE = (
    "CASE WHEN json_extract_string(r.spec, '$.synthetic_images') IS NOT NULL THEN 'generated ' || "
    f"{_SAMPLES} || ': ' || json_extract_string(r.spec, '$.synthetic_images') || "
    "CASE WHEN r.model_kind = 'tokens' THEN '' "
    "ELSE coalesce(', ' || json_extract_string(r.spec, '$.image_px') || ' px', '') END "
    "ELSE 'data set ' || coalesce(regexp_extract(r.dataset, '([^/]+/[^/]+|[^/]+)/*$', 1), '?') || "
    f"coalesce(' (' || r.dataset_images || ' ' || {_SAMPLES} || ')', '') END"
)
_DATA = (
    "CASE WHEN r.reference_phase IN ('R2', 'R3') OR (r.reference_phase IS NULL AND r.dataset IS NOT NULL) "
    "THEN CASE r.reference_phase WHEN 'R2' THEN 'real data, cold' WHEN 'R3' THEN 'real data, cached' "
    f"ELSE 'real data' END || ' · ' || {_SOURCE} ELSE 'synthetic (made on the device)' END"
)
# A script's runs, or a model file's, are one job only while the file is the same: the start of its hash.
_CODE = (
    "left(coalesce(json_extract_string(r.spec, '$.script_sha256'), "
    "json_extract_string(r.spec, '$.model_sha256')), 12)"
)
# One model file given by two paths (./m.py:make at the command line, /home/u/m.py:make from the Run page) is
# one job: its runs of one file name and contents go by the name of the newest (the path most likely still
# there).
_MODEL = (
    f"CASE WHEN {_CODE} IS NULL THEN b.model ELSE first_value(b.model) OVER (PARTITION BY "
    f"regexp_extract(b.model, '[^/]*$'), {_CODE} ORDER BY b.started_at DESC) END AS model"
)
# The workers and machines of the run the iteration time is of: R0 is one worker, R1 one machine (a
# profile asked for compute alone times R0 only, whatever --workers said).
_SHAPE_OF_TIMED_RUN = (
    "CASE WHEN b.reference_phase = 'R0' THEN 1 ELSE b.workers_per_node END AS workers_per_node, "
    "CASE WHEN b.reference_phase IN ('R0', 'R1') THEN 1 ELSE b.nodes END AS nodes"
)
# The stalls a run was split into (those with a figure, whatever --stalls asked: a profile without data asks
# for all five and measures two): runs split into other stalls are not averaged into one breakdown.
_SPLIT = "('measured', 'clamped_zero', 'negative')"
_STALLS = "concat_ws(',', " + ", ".join(
    f"CASE WHEN b.{stall}_status IN {_SPLIT} THEN '{stall}' END"
    for stall in ("compute", "cpu", "disk", "interconnect", "network")
) + ")"
_JOB_RUNS = f"""
WITH job_runs AS (
    SELECT b.* REPLACE ({_SHAPE_OF_TIMED_RUN}, {_MODEL}), {_INPUT_SHAPE} AS input_shape, {_DATA} AS data,
           {_CODE} AS code, {_STALLS} AS stalls,
           CAST(r.spec AS VARCHAR) AS spec_json, CAST(r.fingerprint AS VARCHAR) AS fingerprint_json
    FROM stall_breakdown AS b JOIN runs AS r ON r.run_id = b.run_id
    WHERE b.status = 'completed' AND b.model IS NOT NULL AND b.batch_size IS NOT NULL
      AND b.iteration_s IS NOT NULL
)
"""


JOBS_LISTED = 5000  # a selectbox filters as one types: thousands of jobs stay usable


def job_choices(db_path: Path | str, job_columns: Sequence[str], no_instance: str) -> pd.DataFrame:
    """One row per job of the completed runs (`job_columns`, runs, configurations = instances, `no_instance`
    counting as one), the most-compared first, then the most run, then the most recently run, at most
    JOBS_LISTED; `attrs["jobs_stored"]` counts them all."""
    columns = ", ".join(job_columns)
    sql = (
        f"{_JOB_RUNS} SELECT {columns}, count(*) AS runs, "
        "count(DISTINCT coalesce(nullif(trim(instance), ''), ?)) AS configurations, "
        "max(started_at) AS last_run, "
        "count(*) OVER () AS jobs_stored FROM job_runs "
        f"GROUP BY ALL ORDER BY configurations DESC, runs DESC, last_run DESC NULLS LAST, {columns} LIMIT ?"
    )
    with connect(db_path, read_only=True) as con:
        frame = relation_frame(con.sql(sql, params=[no_instance, JOBS_LISTED]))
    frame.attrs["jobs_stored"] = int(frame["jobs_stored"].iloc[0]) if len(frame) else 0
    return frame.drop(columns=["jobs_stored", "last_run"])


def job_runs(db_path: Path | str, job: dict[str, Any]) -> pd.DataFrame:
    """The completed runs of one job ({job column: value}, None matching a missing value): their
    stall_breakdown row, input_shape, data, spec_json and fingerprint_json."""
    where = " AND ".join(f"{column} IS NOT DISTINCT FROM ?" for column in job)
    with connect(db_path, read_only=True) as con:
        return relation_frame(
            con.sql(f"{_JOB_RUNS} SELECT * FROM job_runs WHERE {where}", params=list(job.values()))
        )
