"""Inputs of a spot plan: the workload file, the offered instances, and compute times from stored profiles.

Workload file (JSON), spotDNN's profiling inputs:
    {
      "model": "resnet50",              # optional: find compute times in stored profiles of this model
      "param_mb": 11.54,                # S_parm, MB moved per push and per pull (or "param_bytes")
      "solo_bandwidth_mbps": 142,       # B_req, MB/s one worker uses alone with the PS
      "a1": 0.12, "b1": 0.3,            # P = min(a1 sqrt(n) + b1, 1)
      "g": [g1, g2, g3, g4, g5],        # loss model coefficients
      "contention_margin": 0.03,        # optional, over-predict P by 3%
      "batch_per_gpu": 128 or {"g3.4xlarge": 128, ...},  # else eq. 10's, from a2, b2 (spot-memory)
      "compute_s": {"g3.4xlarge": 0.41, ...},  # T_comp per instance type at its batch (optional per type)
      "loss_fit": {"mean_rel_error": 0.04, ...}  # written by `stash spot-fit-loss`: a fit beyond the bound
    }                                            # (lossfit.MAX_FIT_ERROR) is refused
An instance type without a compute time takes the compute stall (seconds per iteration) of the latest
completed profile of `model` at that batch on that instance label; without one the plan is refused, naming
the instance. GPU counts and prices come from the instance catalog.
"""

from __future__ import annotations

import difflib
import json
import math
import os
import shlex
from pathlib import Path
from typing import Any

from stash_core.catalog import get_instance
from stash_core.catalog.prices import hourly_price
from stash_core.catalog.unknown_names import not_in_catalog_text
from stash_core.errors import UsageError
from stash_core.spot.batch_memory import eq10_batch, gpu_memory_gib
from stash_core.spot.lossfit import MAX_FIT_ERROR
from stash_core.spot.model import Worker, Workload
from stash_core.spot.planner import InstanceOffer
from stash_core.store.dbfile import is_duckdb_file
from stash_core.store.reads import latest_compute_s
from stash_core.terminal import clipped
from stash_core.userfiles import json_text, read_user_json, writable_target, write_atomic
from stash_core.zoo_names import SCRIPT_PREFIX, close_zoo_names, is_zoo_name

MB = 1e6  # spotDNN's tables give sizes in MB and bandwidths in MB/s
GBPS = 1e9 / 8  # bytes per second in one Gbit/s
DEFAULT_PS_GBPS = 9.6
MAX_WORKLOAD_BYTES = 16 * 1024 * 1024  # a workload file is a few hundred bytes
# What a workload file holds (above), and what spot-fit-loss, spot-memory and spot-profile write into it.
WORKLOAD_FIELDS = frozenset({
    "model", "param_mb", "param_bytes", "solo_bandwidth_mbps", "a1", "b1", "g", "contention_margin",
    "batch_per_gpu", "compute_s", "loss_fit", "ps_bandwidth_mbps", "a2", "b2", "memory_fit",
})  # fmt: skip


def load_workload(path: Path) -> tuple[Workload, dict[str, Any]]:
    """The Workload of a workload file, plus the raw document (for batch and compute times)."""
    doc = read_user_json(path, "workload file", MAX_WORKLOAD_BYTES)
    if not isinstance(doc, dict):
        raise UsageError(f"workload file {path} must hold a JSON object")
    _refuse_misspelt(doc)
    if "param_bytes" in doc:
        param_bytes = _number(doc, "param_bytes")
        _check_one_size(doc, param_bytes)
    else:
        param_bytes = _megabytes(doc, "param_mb")
    g = doc.get("g")
    if not isinstance(g, list) or len(g) != 5 or not all(_is_number(v) for v in g):
        raise UsageError("workload file: g must be a list of five numbers g1..g5")
    _check_loss_fit(doc)
    _check_per_instance(doc)
    _check_ps_bandwidth(doc)
    for key in ("param_bytes" if "param_bytes" in doc else "param_mb", "solo_bandwidth_mbps", "a1"):
        if not _number(doc, key) > 0:  # named as the file has it, not as the model (solo_bandwidth_Bps)
            raise UsageError(f"workload file: {key} must be a positive number, got {_short(doc[key])}")
    workload = Workload(
        param_bytes=param_bytes,
        solo_bandwidth_Bps=_megabytes(doc, "solo_bandwidth_mbps"),
        contention_a1=_number(doc, "a1"),
        contention_b1=_number(doc, "b1"),
        loss_g=tuple(float(v) for v in g),  # type: ignore[arg-type]
        contention_margin=_number(doc, "contention_margin") if "contention_margin" in doc else 0.0,
    )
    return workload, doc


def _refuse_misspelt(doc: dict[str, Any]) -> None:
    """A key that is nearly a workload field's name is a typo whose field would be left at its default (a
    `contention_margn` planned without its margin); other keys are the file's own notes (`source`)."""
    for key in doc.keys() - WORKLOAD_FIELDS:
        close = difflib.get_close_matches(str(key), WORKLOAD_FIELDS, n=1, cutoff=0.8)
        if close:
            raise UsageError(f"workload file: unknown field {_short(key)}: did you mean {close[0]}?")


def _check_one_size(doc: dict[str, Any], param_bytes: float) -> None:
    """A file that gives S_parm twice gives it once: param_mb (rounded, as a person writes it) beside the
    param_bytes the plan uses, refused where they disagree (an edit of one would be ignored unsaid)."""
    if "param_mb" not in doc:
        return
    param_mb = _number(doc, "param_mb")
    if abs(param_mb * MB - param_bytes) > max(0.01 * param_bytes, 0.005 * MB):
        raise UsageError(
            f"workload file: param_bytes {param_bytes:.0f} and param_mb {_short(doc['param_mb'])} give two "
            f"model sizes ({param_bytes / MB:.4g} MB and {param_mb:.4g} MB): keep one of them"
        )


def _check_loss_fit(doc: dict[str, Any]) -> None:
    fit = doc.get("loss_fit")
    if fit is None:
        return
    error = fit.get("mean_rel_error") if isinstance(fit, dict) else None
    if not _is_number(error) or error < 0:
        raise UsageError(
            "workload file: loss_fit.mean_rel_error must be a number from 0 (refit with stash spot-fit-loss)"
        )
    if error > MAX_FIT_ERROR:
        raise UsageError(
            f"workload file: the loss fit's error {error:.1%} is beyond {MAX_FIT_ERROR:.0%}; "
            "g1..g5 do not describe the loss curves well enough to plan on (record longer or smoother curves)"
        )


def _check_per_instance(doc: dict[str, Any]) -> None:
    """compute_s is an object of instance name -> seconds; batch_per_gpu a number or such an object."""
    given = doc.get("compute_s")
    if given is not None and not isinstance(given, dict):
        raise UsageError(
            f"workload file: compute_s must be an object of instance name -> seconds per iteration "
            f'(like {{"g3.4xlarge": 0.41}}), got {type(given).__name__} {_short(given)}'
        )


def _check_ps_bandwidth(doc: dict[str, Any]) -> None:
    if "ps_bandwidth_mbps" in doc:
        value = doc["ps_bandwidth_mbps"]
        if not _is_number(value) or value <= 0:
            raise UsageError(
                f"workload file: ps_bandwidth_mbps must be a positive number of MB/s, got {_short(value)}"
            )


def _short(value: Any) -> str:
    text = json.dumps(value) if not isinstance(value, float) else repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def check_writable(path: Path) -> dict[str, Any]:
    """Refuse a workload file that cannot be written, before anything is measured or fitted for it; its
    fields as they are ({} when there is no file yet)."""
    path = Path(path)
    folder = path.parent
    if path.is_dir():
        raise UsageError(f"workload file {path} is a folder")
    writable_target(path, "workload file")  # a device or FIFO is refused, a link is written through
    database = path.with_name(path.name.removesuffix(".wal"))
    if path.name.endswith(".wal") and database.is_file() and is_duckdb_file(database):
        raise UsageError(f"workload file {path} is the write-ahead log of the database {database}: choose "
                         "another path")  # fmt: skip
    if not folder.is_dir():
        raise UsageError(f"workload file {path}: its folder {folder} does not exist")
    if not os.access(folder, os.W_OK | os.X_OK) or (path.exists() and not os.access(path, os.W_OK)):
        raise UsageError(f"workload file {path} cannot be written (permission denied)")
    return read_workload_doc(path)  # an existing file must hold a JSON object, to keep its other fields


def read_workload_doc(path: Path) -> dict[str, Any]:
    """The workload file's fields as they are ({} when there is no file yet); no check of their values."""
    path = Path(path)
    if not path.exists():
        return {}
    if is_duckdb_file(path):  # else "not UTF-8 text (byte 2)", which does not say what the file is
        raise UsageError(f"workload file {path} is a DuckDB database, not a workload file: choose another "
                         "path")  # fmt: skip
    doc = read_user_json(path, "workload file", MAX_WORKLOAD_BYTES)
    if not isinstance(doc, dict):
        raise UsageError(f"workload file {path} must hold a JSON object")
    if str(doc.get("kind", "")).startswith("stash-"):  # a result, probe or simulation file: not merged into
        raise UsageError(f"workload file {path} is a {doc['kind']} file, not a workload file: choose another "
                         "path")  # fmt: skip
    if doc and not WORKLOAD_FIELDS & doc.keys():  # another tool's JSON (a package.json): not written into
        raise UsageError(f"workload file {path} holds none of a workload's fields (param_mb, g, a1, "
                         "compute_s, ...): choose another path")  # fmt: skip
    return doc


def update_workload(path: Path, changes: dict[str, Any]) -> dict[str, Any]:
    """Set `changes` in the workload file (created when missing), keeping its other fields."""
    path = Path(path)
    doc = read_workload_doc(path)
    if "param_bytes" in changes:  # the model's size, measured: the file's rounded one goes with the old model
        doc.pop("param_mb", None)
    doc.update(changes)
    write_atomic(path, json_text(doc, indent=2) + "\n", "workload file")
    return doc


def ps_bandwidth_Bps(given_gbps: float | None, doc: dict[str, Any]) -> float:
    """B_ps: the one given (Gbit/s), else the one `stash spot-profile` measured with B_req, else 9.6."""
    if given_gbps is not None:
        return given_gbps * GBPS
    _check_ps_bandwidth(doc)
    measured = doc.get("ps_bandwidth_mbps")
    return DEFAULT_PS_GBPS * GBPS if measured is None else float(measured) * MB


def parse_offers(text: str) -> list[tuple[str, int]]:
    """ "g3.8xlarge:5,g3.16xlarge:3" -> [(name, quota), ...]; a missing quota means 1, and a name given
    twice has the sum of its quotas."""
    offers: dict[str, int] = {}
    for part in (p.strip() for p in text.split(",")):
        if not part:
            continue
        name, _, quota = part.partition(":")
        try:
            count = int(quota) if quota else 1
        except ValueError:
            raise UsageError(f"--instances {part!r}: the quota after ':' must be a whole number") from None
        if count < 0:
            raise UsageError(f"--instances {part!r}: the quota must not be negative")
        if name.strip().lower() == "all":  # predict's word for every instance; no type can be named so
            raise UsageError("--instances: 'all' is not taken here: a spot plan needs each instance type "
                             "named, with its quota (NAME:QUOTA,...)")  # fmt: skip
        offers[name.strip()] = offers.get(name.strip(), 0) + count
    if not offers:
        raise UsageError("--instances: give at least one NAME[:QUOTA]")
    return list(offers.items())


def build_offers(db_path: Path, offers: list[tuple[str, int]], doc: dict[str, Any],
                 pricing: str) -> list[InstanceOffer]:  # fmt: skip
    """Workers for the offered instance types: GPUs and price from the catalog, compute time from the
    workload file or a stored profile."""

    built = []
    for name, quota in offers:
        instance = get_instance(db_path, name)
        if instance is None:
            advice = f" (stash instances add {name} ...)"
            raise UsageError(not_in_catalog_text(db_path, name, f"instance {name!r}", advice))
        price, status = hourly_price(instance, name, pricing)
        if price is None:
            raise UsageError(status)  # "no spot price for instance NAME (...)": the name once
        gpus = int(instance.get("accelerator_count") or 0)
        if gpus < 1:
            raise UsageError(f"instance {name} has no accelerators in the catalog; spotDNN plans GPU workers")
        batch_per_gpu = _batch_per_gpu(doc, name, instance.get("accelerator"))
        batch = gpus * batch_per_gpu
        compute_s = _compute_s(db_path, doc, name, batch_per_gpu, gpus)
        built.append(InstanceOffer(Worker(name, gpus, compute_s, batch, price), quota))
    return built


def on_demand_offers(db_path: Path, offers: list[tuple[str, int]],
                     doc: dict[str, Any]) -> tuple[list[InstanceOffer], list[str], str | None]:  # fmt: skip
    """priced_offers at on-demand prices."""
    return priced_offers(db_path, offers, doc, "on_demand")


def priced_offers(db_path: Path, offers: list[tuple[str, int]], doc: dict[str, Any],
                  pricing: str) -> tuple[list[InstanceOffer], list[str], str | None]:  # fmt: skip
    """The offers of the instances offered that have a price of `pricing` (one without, a type with a spot
    price alone in an on-demand plan, is left out of the plan): the offers, the names left out, and a note
    that says so (None where none is)."""
    unpriced = [name for name, _ in offers if _has_no_price(db_path, name, pricing)]
    priced = [(name, quota) for name, quota in offers if name not in unpriced]
    kind, article = ("on-demand", "an") if pricing == "on_demand" else ("spot", "a")
    where = "in the catalog (`stash instances set`)"
    note = None
    if unpriced and priced:
        note = f"{kind}: planned without {', '.join(unpriced)}: no {kind} price {where}"
    elif unpriced:
        note = f"{kind}: not simulated: no instance offered has {article} {kind} price {where}"
    return (build_offers(db_path, priced, doc, pricing) if priced else []), unpriced, note


def _has_no_price(db_path: Path, name: str, pricing: str) -> bool:
    instance = get_instance(db_path, name)  # one not in the catalog: build_offers says so
    return instance is not None and hourly_price(instance, name, pricing)[0] is None


def _batch_per_gpu(doc: dict[str, Any], name: str, accelerator: str | None) -> int:
    """The batch per GPU the file gives for `name`; where it gives none, eq. 10's from the file's a2, b2
    (`stash spot-memory`) and the GPU's memory. A batch that a fit measured on a GPU says does not fit the
    instance's GPU is refused: that worker could not train it."""
    value = _given_batch(doc, name)
    gib = gpu_memory_gib(accelerator)
    by_memory = _has_memory_fit(doc) and bool(gib)  # eq. 10 applies to this instance's GPU
    fitted = eq10_batch(doc["a2"], doc["b2"], gib) if by_memory else None
    if value is None and by_memory:
        if fitted is None:
            raise UsageError(f"instance {name}: eq. 10 (the workload's a2, b2) fits no sample in {gib:g} GiB")
        return fitted
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        also = "" if _has_memory_fit(doc) else " (or a2, b2 from stash spot-memory, for eq. 10's)"
        raise UsageError(f"workload file: batch_per_gpu for {name} must be a positive whole number{also}")
    measured_on_gpu = (doc.get("memory_fit") or {}).get("device") == "cuda"
    if measured_on_gpu and fitted is not None and value > fitted:
        raise UsageError(
            f"instance {name}: batch_per_gpu {value} does not fit its GPU's {gib:g} GiB (eq. 10 from the "
            f"workload's a2, b2, measured on a GPU: at most {fitted}); give it a smaller batch_per_gpu"
        )
    return value


def eq10_pairing_notes(doc: dict[str, Any], offers: list[InstanceOffer]) -> list[str]:
    """A note naming the offered types whose compute_s the file gives beside no batch_per_gpu of their own:
    the plan pairs that time with eq. 10's batch, which the file does not say it was timed at."""
    paired = []
    for offer in offers:
        worker = offer.worker
        given = (doc.get("compute_s") or {}).get(worker.instance)
        if given is not None and _given_batch(doc, worker.instance) is None:
            paired.append(f"{worker.instance} {worker.batch // worker.gpus} per GPU")
    if not paired:
        return []
    return [
        f"compute_s is taken as each type's time at eq. 10's batch (the workload gives no batch_per_gpu for "
        f"it): {', '.join(paired)}; if one was timed at another batch, give that batch_per_gpu"
    ]


def _given_batch(doc: dict[str, Any], name: str) -> Any:
    """The batch per GPU the file itself gives for `name`, or None."""
    value = doc.get("batch_per_gpu")
    return value.get(name) if isinstance(value, dict) else value


def _has_memory_fit(doc: dict[str, Any]) -> bool:
    return _is_number(doc.get("a2")) and _is_number(doc.get("b2")) and doc["a2"] > 0


def _compute_s(db_path: Path, doc: dict[str, Any], name: str, batch_per_gpu: int, gpus: int) -> float:
    given = (doc.get("compute_s") or {}).get(name)  # its shape is checked by load_workload
    if given is not None:
        if not _is_number(given) or given <= 0:
            raise UsageError(f"workload file: compute_s of {name} must be a positive number of seconds")
        return float(given)
    model = doc.get("model")
    if not model:
        raise UsageError(
            f'no compute time for {name}: give "compute_s" in the workload file, or its "model" (then taken '
            "from that model's profile on the instance in the database)"
        )
    measured = stored_compute_s(db_path, str(model), name, batch_per_gpu, gpus)
    if measured is None and not Path(db_path).exists():  # a mistyped --db, not a missing profile
        raise UsageError(
            f"no compute time for {name}: no database at {db_path} (--db or $STASH_DB chooses one) to take "
            f"the profile of {model} from; give compute_s in the workload file, or the database"
        )
    # no profile of `stash profile --model` could ever be of it (a script is profiled with --script)
    unprofilable = ":" not in str(model) or str(model).startswith(SCRIPT_PREFIX)
    if measured is None and not is_zoo_name(model) and unprofilable:
        raise UsageError(
            f'workload file: "model" {clipped(str(model), quoted=True)} is neither a zoo model nor '
            f"path/to/file.py:FACTORY{close_zoo_names(str(model))}; give one, or compute_s (a training "
            "script's workload takes compute_s)"
        )
    if measured is None:
        command = shlex.join(["stash", "profile", "--model", str(model), "--instance", name])
        raise UsageError(
            f"no compute time for {name}: no completed profile of {model} at batch {batch_per_gpu} per "
            f"worker with {gpus} worker(s) on {name} (`{command} --workers {gpus} --batch-size "
            f"{batch_per_gpu}` measures it, or give compute_s in the workload file)"
        )
    return measured


def stored_compute_s(db_path: Path, model: str, instance: str, batch_per_gpu: int, gpus: int) -> float | None:
    """T_comp of a worker: the compute stall of the latest completed profile of the model on that instance
    with one worker process per GPU at the batch per GPU (a worker's GPUs compute their shares at once)."""
    return latest_compute_s(db_path, model, instance, batch_per_gpu, gpus)


def _megabytes(doc: dict[str, Any], key: str) -> float:
    """A figure the file gives in MB (or MB/s), in bytes; refused, named as the file has it, where the bytes
    are past a double (1e308 MB)."""
    value = _number(doc, key) * MB
    if not math.isfinite(value):
        raise UsageError(f"workload file: {key} must be a finite number of MB, got {_short(doc[key])}")
    return value


def _number(doc: dict[str, Any], key: str) -> float:
    if key not in doc:  # said as missing, not as "got null"
        raise UsageError(f"workload file: {key} is missing (a number; docs/spot.md lists the fields)")
    value = doc.get(key)
    if not _is_number(value):
        raise UsageError(f"workload file: {key} must be a number, got {_short(value)}")
    return float(value)


def _is_number(value: Any) -> bool:
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        return False
    try:
        return math.isfinite(float(value))
    except OverflowError:  # an integer beyond a double
        return False
