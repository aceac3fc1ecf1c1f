"""Does a run's instance label fit the machine it ran on? The label against the run's fingerprint.

A run labelled with a catalog instance counts as that instance's measurement: Compare prices it, Recommend and
the cost of a run take its times for that instance. A label that the machine's fingerprint contradicts would
put a laptop's times on a GPU instance's bill, so such a run is shown with a warning and is not used as the
instance's measurement until the user confirms the label.

What contradicts a label (catalog row against the fingerprint that the profile recorded):
  - GPUs: the machine has none and the instance has some (a CPU-only machine labelled g4dn.xlarge), or the
    other way round, or the counts differ;
  - a CPU instance's vCPUs: the run could use another number of cores (its affinity, else the machine's
    logical cores);
  - the GPU model: a GPU of the machine (its NVML name) is not the instance's accelerator variant, both
    matched with the accelerator table (catalog/accelerators.py: "Tesla T4" fits "NVIDIA T4 16 GB", "NVIDIA
    A10G" does not, nor does "NVIDIA A100-SXM4-80GB" fit "NVIDIA A100 SXM4 40 GB"); an ambiguous catalog name
    ("NVIDIA A100 80 GB") fits every variant it could mean. A GPU name the table lacks is compared by its
    model token ("T4" of "NVIDIA T4") instead.
Runs on remote hosts or the emulated cluster are not checked: their fingerprint describes the machine that
launched them, not the nodes. Labels that are not catalog names are not checked (there is nothing to fit).

Confirming: `stash instances confirm RUN_ID` stores
`"instance_confirmed": true` in the run's spec (runs.spec); a confirmed run is used like any other, and still
shows what its fingerprint says.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from stash_core.catalog.accelerators import find_accelerator, match_accelerator
from stash_core.catalog.catalog import get_instance, list_instances
from stash_core.errors import UsageError, no_run_error
from stash_core.store import get_run
from stash_core.store.run_labels import CONFIRMED_KEY, label_rows, merge_into_spec
from stash_core.units import finite_float

# status of a label: fits | contradicted | confirmed (contradicted, but the user confirmed it) | not_checked
USABLE = ("fits", "confirmed", "not_checked")
_MODEL_TOKEN = re.compile(r"[A-Z]+[0-9]+[A-Z]*")


@dataclass(frozen=True)
class LabelCheck:
    """The verdict on one run's instance label: status, what contradicts it, and why it was not checked."""

    run_id: str
    instance: str | None
    status: str
    problems: tuple[str, ...] = field(default_factory=tuple)
    reason: str = ""
    # a run on the CPU (--device cpu) labelled as an instance with GPUs: no confirmation makes it measure them
    cpu_run_of_gpus: bool = False

    @property
    def remedy(self) -> str:
        """What makes a contradicted run anchor predictions: a confirmation, or a GPU run for a CPU one."""
        if self.cpu_run_of_gpus:
            return (f"a run on the CPU measures no GPU of {self.instance}, whatever its label: profile there "
                    "with --device cuda")  # fmt: skip
        return f"`stash instances confirm {self.run_id}` if the label is right"

    @property
    def usable(self) -> bool:
        """Whether the run may stand for its instance (in costs, Compare's prices and Recommend)."""
        return self.status in USABLE

    @property
    def warning(self) -> str | None:
        """One line for the CLI and the pages; None when the label fits or was not checked."""
        if self.status not in ("contradicted", "confirmed"):
            return None
        what = "; ".join(self.problems)
        if self.status == "confirmed":
            return f"instance label {self.instance} of run {self.run_id} confirmed by the user ({what})"
        if self.cpu_run_of_gpus:  # confirming makes Compare price it; predictions still cannot use it
            remedy = f"{self.remedy} (`stash instances confirm {self.run_id}` prices it in Compare only)"
        else:
            remedy = f"if the label is right, `stash instances confirm {self.run_id}`"
        return (
            f"instance label {self.instance} of run {self.run_id} does not fit the machine: {what}. "
            f"Not used as a measurement of {self.instance}; {remedy}"
        )


def label_problems(instance: dict[str, Any] | None, fingerprint: dict[str, Any] | None) -> list[str]:
    """What in the fingerprint contradicts the catalog row (empty: nothing does, or nothing to compare)."""
    if not instance or not fingerprint:
        return []
    name = instance.get("name") or "the instance"
    expected = _count(instance.get("accelerator_count"))
    found = _count(fingerprint.get("gpu_count"))
    accelerator = instance.get("accelerator") or "GPU"
    problems = []
    if expected is not None and found is not None and expected != found:
        if found == 0:
            status = fingerprint.get("gpu_status")
            why = f" ({status})" if status else ""
            problems.append(f"the machine has no GPU{why}, {name} has {expected} {accelerator}")
        elif expected == 0:
            problems.append(f"the machine has {found} GPU(s), {name} has none")
        else:
            problems.append(f"the machine has {found} GPU(s), {name} has {expected} {accelerator}")
    if expected == 0 and found == 0:  # a CPU instance: its vCPUs are what it runs on
        problems += _vcpu_problems(instance, fingerprint, name)
    names = [str(gpu.get("name") or "") for gpu in fingerprint.get("gpus") or [] if isinstance(gpu, dict)]
    if instance.get("accelerator") and expected and names:
        others = sorted({gpu for gpu in names if not same_gpu(instance["accelerator"], gpu)})
        if others:
            problems.append(f"the machine's GPU is {', '.join(others)}, {name} has {accelerator}")
    return problems


def _vcpu_problems(instance: dict[str, Any], fingerprint: dict[str, Any], name: str) -> list[str]:
    """A CPU instance's vCPUs against the cores the run could use (its affinity, else the logical cores): a
    1-vCPU label on a 2-core machine carried that machine's CPU stall to 1-vCPU rows as a 1-vCPU one."""
    vcpus = finite_float(instance.get("vcpus"))
    affinity = fingerprint.get("cpu_affinity")
    if isinstance(affinity, list) and affinity:
        cores = len(affinity)
    else:
        cores = _count(fingerprint.get("cpu_cores_logical"))
    if not vcpus or not cores or cores == vcpus:
        return []
    return [f"the machine has {cores} logical core(s), {name} has {vcpus:g} vCPU(s)"]


def check_label(
    run_id: str,
    label: str | None,
    instance: dict[str, Any] | None,
    spec: dict[str, Any] | None,
    fingerprint: dict[str, Any] | None,
) -> LabelCheck:
    """The verdict on one run (its label, the catalog row of that label or None, its spec and fingerprint)."""
    spec = spec or {}
    if not label:
        return LabelCheck(run_id, label, "not_checked", reason="no instance label")
    if instance is None:
        return LabelCheck(run_id, label, "not_checked", reason=f"{label} is not in the instance catalog")
    if spec.get("hosts"):
        return LabelCheck(run_id, label, "not_checked", reason="ran on remote hosts: no fingerprint of them")
    if not fingerprint:
        return LabelCheck(run_id, label, "not_checked", reason="the run has no machine fingerprint")
    problems = tuple(label_problems(instance, fingerprint))
    if not problems:
        return LabelCheck(run_id, label, "fits")
    status = "confirmed" if spec.get(CONFIRMED_KEY) is True else "contradicted"
    gpus = bool(_count(instance.get("accelerator_count")))
    cpu_run = gpus and str(spec.get("device") or "").startswith("cpu")
    return LabelCheck(run_id, label, status, problems, cpu_run_of_gpus=cpu_run)


def check_runs(runs: list[dict[str, Any]], catalog: dict[str, dict[str, Any]]) -> dict[str, LabelCheck]:
    """check_label of runs given as records with run_id, instance, spec and fingerprint (dicts or JSON text),
    against a catalog {name: row}; by run id."""
    checks = {}
    for run in runs:
        label = run.get("instance")
        checks[run["run_id"]] = check_label(
            run["run_id"], label, catalog.get(label) if label else None, _json(run.get("spec")),
            _json(run.get("fingerprint")),
        )  # fmt: skip
    return checks


def stored_label_checks(
    db_path: Path | str, run_ids: list[str], catalog: dict[str, dict[str, Any]] | None = None
) -> dict[str, LabelCheck]:
    """check_runs of stored runs (one read of their spec and fingerprint), by run id, against `catalog`
    ({name: row}; None: the database's, stored rows and built-in ones)."""
    if not run_ids:
        return {}
    if catalog is None:
        catalog = {row["name"]: row for row in list_instances(db_path).to_dict(orient="records")}
    frame = label_rows(db_path, run_ids)
    return check_runs(frame.to_dict(orient="records"), catalog)


def check_document(db_path: Path | str, doc: dict[str, Any]) -> LabelCheck:
    """The verdict on a result document (e.g. the one `stash profile` just made), against the database's
    catalog (stored rows, else the built-in ones)."""
    spec = doc.get("spec") or {}
    fingerprint = doc.get("fingerprint") or {}
    label = spec.get("instance") or fingerprint.get("instance")
    instance = get_instance(db_path, label) if label else None
    return check_label(str(doc.get("run_id")), label, instance, spec, fingerprint)


def check_stored_run(db_path: Path | str, run: dict[str, Any]) -> LabelCheck:
    """The verdict on a run as store.get_run returns it."""
    label = run.get("instance")
    instance = get_instance(db_path, label) if label else None
    return check_label(run["run_id"], label, instance, _json(run.get("spec")), _json(run.get("fingerprint")))


def confirm_label(db_path: Path | str, run_id: str) -> LabelCheck:
    """Store the user's word that a run's instance label is right (`instance_confirmed` in runs.spec).

    `run_id` may be any unique part of a run id. UsageError when no run matches or the run has no label.
    Returns the check as it reads afterwards.
    """
    run = get_run(db_path, run_id)
    if run is None:
        raise no_run_error(run_id, db_path)
    if not run.get("instance"):
        raise UsageError(f"run {run['run_id']} has no instance label to confirm")
    merge_into_spec(db_path, run["run_id"], {CONFIRMED_KEY: True})
    return check_stored_run(db_path, {**run, "spec": {**(run.get("spec") or {}), CONFIRMED_KEY: True}})


def same_gpu(accelerator: str, machine_gpu: str) -> bool:
    """Whether a machine's GPU (its NVML name) is the catalog's accelerator: by the accelerator table, else
    (a name the table lacks) by the model token."""
    expected, found = match_accelerator(accelerator), find_accelerator(machine_gpu)
    if expected and found:
        return found.name in expected.candidates
    token = accelerator_model(accelerator)
    return token is None or token in _words(machine_gpu)


def accelerator_model(accelerator: Any) -> str | None:
    """The model token of an accelerator name: "V100" of "NVIDIA V100 16 GB", "A10G" of "NVIDIA A10G"."""
    if not accelerator:
        return None
    found = _MODEL_TOKEN.findall(str(accelerator).upper())
    return found[0] if found else None


def _words(name: str) -> set[str]:
    return set(re.split(r"[^A-Z0-9]+", name.upper()))


def _count(value: Any) -> int | None:
    try:
        number = int(value)
    except (TypeError, ValueError):
        return None
    return number if number >= 0 else None


def _json(value: Any) -> dict[str, Any]:
    if isinstance(value, dict):
        return value
    if isinstance(value, str) and value:
        try:
            parsed = json.loads(value)
        except ValueError:
            return {}
        return parsed if isinstance(parsed, dict) else {}
    return {}
