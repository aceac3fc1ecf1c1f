"""Which of a job's stored GPU profiles may anchor its predictions: those whose machine fits their instance
label (or whose label the user confirmed), as recommend keeps them."""

from __future__ import annotations

from pathlib import Path

from stash_core.catalog import stored_label_checks
from stash_core.catalog.labels import LabelCheck
from stash_core.decide.predict.profile_arithmetic import machine_name


def labels_that_hold(
    db_path: Path | str, model: str, batch_size: int, profiles: list[dict], catalog: dict[str, dict]
) -> tuple[list[dict], list[str]]:
    """The job's profiles whose machine fits their instance label (or whose label the user confirmed), as
    recommend keeps them, and a line for each set aside; other jobs' profiles are left as they are."""
    job = [row["run_id"] for row in profiles
           if row.get("model") == model and int(row.get("batch_size") or 0) == batch_size]  # fmt: skip
    checks = stored_label_checks(db_path, job, catalog)
    unusable = {run_id for run_id, check in checks.items() if not check.usable}
    lines = [mislabelled_line(run_id, checks[run_id]) for run_id in job if run_id in unusable]
    return [row for row in profiles if row["run_id"] not in unusable], lines


def mislabelled_line(run_id: str, check: LabelCheck) -> str:
    """Why a profile whose machine contradicts its label stands for nothing, and what to do if it is right."""
    return (
        f"profile {run_id} on {machine_name(check.instance)}: set aside, its machine does not fit the label "
        f"({'; '.join(check.problems)}); `stash instances confirm {run_id}` if the label is right"
    )
