"""A local campaign's instance label checked against this machine before anything runs: a label this
machine contradicts (a GPU instance type on a machine without one) sets every run aside as not measured on
that instance, so none ever counts as stored and each rerun of the campaign profiled it again."""

from __future__ import annotations

from pathlib import Path

from stash_core.catalog import get_instance
from stash_core.catalog.labels import label_problems
from stash_core.errors import UsageError
from stash_core.measure import nvml


def refuse_contradicted_label(db_path: Path | str, instance: str | None) -> None:
    """UsageError (one line) when this machine's GPUs contradict the catalog row of `instance`; nothing for a
    label the catalog lacks (a name of the user's own) or none given (the host's name)."""
    row = get_instance(db_path, instance) if instance else None
    if row is None:
        return
    usable, status = nvml.gpu_status()
    gpus = nvml.list_gpus() if usable else []
    machine = {"gpu_count": len(gpus), "gpus": gpus, "gpu_status": status}
    if problems := label_problems(row, machine):
        raise UsageError(f"--instance {instance}: {'; '.join(problems)}: its runs would be set aside as not "
                         "measured on it; label this machine with a name of its own, or leave --instance "
                         "out")  # fmt: skip
