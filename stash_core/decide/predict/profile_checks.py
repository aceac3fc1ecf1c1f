"""Which of a job's stored GPU profiles may anchor its predictions: those whose machine fits their instance
label (or whose label the user confirmed), as recommend keeps them, and, for a user's model file, those that
ran the file's contents as they are now."""

from __future__ import annotations

from pathlib import Path

from stash_core.catalog import stored_label_checks
from stash_core.catalog.labels import LabelCheck
from stash_core.decide.predict.profile_arithmetic import machine_name
from stash_core.zoo_names import factory_of, model_file_sha256


def profiles_that_hold(
    db_path: Path | str, model: str, batch_size: int, profiles: list[dict], catalog: dict[str, dict]
) -> tuple[list[dict], list[str]]:
    """The job's profiles whose machine fits their instance label (or whose label the user confirmed), as
    recommend keeps them, less those of the job's model file that ran other contents (other_code), and a
    line for each set aside; other jobs' profiles are left as they are."""
    profiles = _by_its_name(model, profiles)
    changed = other_code(model, profiles)
    job = [row["run_id"] for row in profiles if row.get("model") == model and row["run_id"] not in changed
           and int(row.get("batch_size") or 0) == batch_size]  # fmt: skip
    checks = stored_label_checks(db_path, job, catalog)
    unusable = {run_id for run_id, check in checks.items() if not check.usable}
    lines = [mislabelled_line(run_id, checks[run_id]) for run_id in job if run_id in unusable]
    kept = [row for row in profiles if row["run_id"] not in unusable and row["run_id"] not in changed]
    return kept, list(changed.values()) + lines


def mislabelled_line(run_id: str, check: LabelCheck) -> str:
    """Why a profile whose machine contradicts its label stands for nothing, and what to do if it is right."""
    return (
        f"profile {run_id} on {machine_name(check.instance)}: set aside, its machine does not fit the label "
        f"({'; '.join(check.problems)}); {check.remedy}"
    )


def other_code(model: str, profiles: list[dict]) -> dict[str, str]:
    """{run_id: why it is set aside} for each profile of `model` (a user's FILE.py:FACTORY) that ran other
    contents under its name (the file edited since, or another folder's file of that name): it measured
    another model. Profiles stored before the hash was kept, and every other model's, are left as they are."""
    now = model_file_sha256(model)
    if now is None:
        return {}
    return {
        str(row["run_id"]): (
            f"profile {row['run_id']} on {machine_name(row.get('instance'))}: set aside, it ran other code "
            f"under the name {model} (the file's sha256 then began {row['model_sha256'][:12]}, now "
            f"{now[:12]}: edited since, or another folder's file)"
        )
        for row in profiles
        if row.get("model", model) == model  # measured_profiles' rows are all of the model
        and isinstance(row.get("model_sha256"), str) and row["model_sha256"] != now
    }


def _by_its_name(model: str, profiles: list[dict]) -> list[dict]:
    """The profiles with those of `model`'s file given by another path (absolute, relative, another machine's
    checkout) named as `model`: they ran its factory and contents now."""
    now, factory = model_file_sha256(model), f":{factory_of(model)}"
    if now is None:
        return profiles
    return [
        {**row, "model": model}
        if row.get("model_sha256") == now and str(row.get("model")).endswith(factory) else row
        for row in profiles
    ]
