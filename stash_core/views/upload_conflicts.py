"""Upload: a run that Store would refuse for its content, found at the check: one stored with other content,
or one that two uploaded files hold with other content (store/ingest_conflicts.py compares them)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from stash_core import store
from stash_core.results.file import upgrade_result
from stash_core.store.ingest_conflicts import (
    difference_text,
    differences,
    missing_sample_parts,
    probes_of_another_run,
    run_figures,
    sample_differences,
    sample_figures,
    stored_run_figures,
    stored_sample_figures,
)
from stash_core.store.ingest_rows import prepare_run


def figures(doc: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """A result document's figures and samples' figures as the store compares them."""
    prepared = prepare_run(upgrade_result(doc), None)
    return run_figures(prepared), sample_figures(prepared)


def stored_verdict(db_path: Path | str, doc: dict[str, Any]) -> tuple[str | None, bool]:
    """What Store would do with `doc` beside the run stored under its run_id: why it would refuse it (other
    content, or a probe set stored with another run; None when not stored or the same), and whether it would
    add samples the stored run lacks (iterations, telemetry or probes of a phase it has none of: uploaded
    from an export without them)."""
    prepared = prepare_run(upgrade_result(doc), None)
    run, samples = run_figures(prepared), sample_figures(prepared)
    with store.connect(db_path, read_only=True) as con:
        stored = stored_run_figures(con, doc["run_id"])
        stored_samples = stored_sample_figures(con, doc["run_id"]) if stored is not None else {}
        # a new run whose probe set is another's: refused by Store, so said at the check
        taken = probes_of_another_run(con, prepared) if stored is None else None
    if stored is None:
        return (f"run {doc['run_id']}: {taken}" if taken else None), False
    if differ := differences(stored, run) + sample_differences(stored_samples, samples):
        return (f"run {doc['run_id']} is stored with other content ({difference_text(differ)}): Store would "
                "refuse it (to keep both, change the run_id in the file)"), False  # fmt: skip
    return None, bool(missing_sample_parts(stored_samples, samples))


def upload_conflict(first_file: str, first: dict[str, Any], doc: dict[str, Any]) -> str | None:
    """Why `doc` cannot go in beside the same run_id of another uploaded file (`first_file`'s `first`): other
    content; None when both hold the same."""
    (first_run, first_samples), (run, samples) = figures(first), figures(doc)
    differ = differences(first_run, run) + sample_differences(first_samples, samples)
    if not differ:
        return None
    return (f"run {doc['run_id']} is also in {first_file} with other content ({difference_text(differ)}): "
            "upload one of them, or give one another run_id")  # fmt: skip
