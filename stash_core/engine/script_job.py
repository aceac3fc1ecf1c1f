"""A profile of the user's own training script: its worker job, its model record, and what its result adds.

The runs are those of any profile; each launches stash_core.measure.script_entry, which runs the script
unmodified. Synthetic runs replay the script's first batches; the real-data runs read its own data, with
the page-cache state of --data-dir set as for an image data set. Without --data-dir the CPU and disk stalls
are one input-pipeline stall (R2 minus the run before it, kept in "not separated").
"""

from __future__ import annotations

from collections.abc import Iterable

from stash_core.analysis.coherence import NO_LOADER, UNREAD_DATA_DIR
from stash_core.analysis.pipeline import PIPELINE_WARNING, outside_the_data_wait
from stash_core.analysis.pipeline import input_pipeline as pipeline_difference
from stash_core.analysis.stalls import STALL_OF_PHASE
from stash_core.engine.plan import PhasePlan
from stash_core.measure.worker_job import WorkerJob
from stash_core.spec import ProfileSpec

MODULE = "stash_core.measure.script_entry"
NO_DATA_DIR = (
    "without --data-dir Stash cannot set the page-cache state of the files the script reads, so CPU and "
    "disk are one input-pipeline stall"
)


def script_job(plan: PhasePlan, spec: ProfileSpec) -> WorkerJob:
    return {
        "phase": plan.name,
        "script": spec.script,
        "script_args": list(spec.script_args),
        "data": plan.data,
        "data_dir": spec.data_dir,
        "device": spec.device,
        "backend": spec.backend,
        "threads_per_worker": spec.threads_per_worker,
        "iterations": spec.fixed_iterations,
        "target_relative_ci": spec.target_relative_ci,
        "max_iterations": spec.max_iterations,
        "max_phase_s": spec.max_phase_s,
        "start_timeout_s": spec.script_start_timeout_s,
        "seed": spec.seed,
    }


def script_model_info(spec: ProfileSpec) -> dict:
    """The model section of a script's result: its name and kind; Stash does not build the model."""
    return {
        "name": spec.model,
        "kind": "script",
        "input_shape": [],
        "num_classes": None,
        "vocab_size": None,
        "param_count": None,
        "grad_tensor_count": None,
        "layer_count": None,
        "grad_bytes": None,
        "script": spec.script,
        "script_args": list(spec.script_args),
        "script_sha256": spec.script_sha256,
    }


def finish_script_doc(doc: dict) -> None:
    """What a script's runs found, into the document: the samples per process per iteration they read (over
    a --batch-size that disagrees with it, with a warning; null when runs read different batches), its loader
    workers, what the runs warned of, and why CPU and disk are not separate stalls (no --data-dir, or no
    DataLoader at all)."""
    found = [record["script"] for record in doc["phases"] if isinstance(record.get("script"), dict)]
    sizes = {info["batch_size"] for info in found if info.get("batch_size")}
    given = doc["spec"].get("batch_size")
    breakdown = doc.get("breakdown")
    warnings = breakdown.setdefault("warnings", []) if breakdown is not None else []
    if len(sizes) > 1:
        # As threads_per_worker: no one batch stands for the profile; each run keeps its own, and the
        # breakdown's first warning names the runs that did different work (analysis/coherence.py).
        doc["spec"]["batch_size"] = None
    elif sizes and given is not None and given not in sizes:
        # --batch-size stands for a batch the runs cannot see (no DataLoader); the measured one is the truth
        (size,) = sizes
        doc["spec"]["batch_size"] = size
        warnings.append(
            f"--batch-size {given} was given, but the script's runs read batches of {size} per process per "
            f"iteration: the run is recorded with {size}"
        )
    elif given is None:
        doc["spec"]["batch_size"] = sizes.pop() if sizes else None
    # The script's own DataLoader workers, not Stash's --loader-workers (which a script never sees); None
    # without a DataLoader, or where runs disagree (each run keeps its own in phases[].script).
    workers = {info.get("loader_workers") for info in found if info.get("loader_used")}
    doc["spec"]["loader_workers"] = workers.pop() if len(workers) == 1 else None
    threads = {info["threads"] for info in found if info.get("threads")}
    if threads:
        # As the script ran them (it may set its own); runs that differ have their own in phases[].script.
        doc["spec"]["threads_per_worker"] = threads.pop() if len(threads) == 1 else None
    if not breakdown or not found:
        return
    breakdown["warnings"].extend(run_warnings(doc))
    breakdown["warnings"].extend(group_end_warnings(doc))
    unread = unread_data_dir(doc)  # with or without a DataLoader, --data-dir was not the script's data
    disk = (breakdown.get("stalls") or {}).get("disk") or {}
    if unread and UNREAD_DATA_DIR not in str(disk.get("note")):  # else the disk stall's reason says it
        breakdown["warnings"].append(unread)
    if not any(info.get("loader_used") for info in found):
        # the stalls (and the remainder holding their time) were split so (no_loader_stalls); the rounds'
        # and the split's own lines about them say one thing here
        said = ("cpu stall", "cpu and disk stall", "cpu:", "disk")
        breakdown["warnings"] = [w for w in breakdown["warnings"] if not w.startswith(said)]
        breakdown["warnings"].append(f"cpu and disk stalls not separable: {NO_LOADER}")
        return
    pipeline = input_pipeline(doc)
    if pipeline is not None:
        seconds, ci95_s, reference = pipeline
        breakdown["input_pipeline"] = {"seconds": seconds, "ci95_s": ci95_s, "runs": f"R2 - {reference}"}
        breakdown["warnings"].append(
            f"{PIPELINE_WARNING}{seconds:.6f} s ± {ci95_s:.6f} per iteration "
            f"(R2 - {reference}), shown in 'not separated'"
        )
        loaders = doc["spec"]["loader_workers"]
        elsewhere = outside_the_data_wait(doc["phases"], reference, seconds, ci95_s, loaders)
        breakdown["warnings"] += [elsewhere] if elsewhere else []


def run_warnings(doc: dict) -> list[str]:
    """What the script's runs said of themselves (phases[].script.warnings), each once, after the runs that
    said it: "R0, R1: the script's dataset ... could not be read outside its loader's workers ..."."""
    said: dict[str, list[str]] = {}
    for record in doc["phases"]:
        for warning in (record.get("script") or {}).get("warnings") or []:
            said.setdefault(warning, []).append(record["name"])
    return [f"{', '.join(names)}: {warning}" for warning, names in said.items()]


def group_end_warnings(doc: dict) -> list[str]:
    """Runs of several processes whose script ended its process group (destroy_process_group) and stepped
    on: the steps after it communicate nothing and the ranks can no longer be gathered."""
    ended = {}
    for record in doc["phases"]:
        script = record.get("script") or {}
        after = script.get("group_ended_after")
        processes = (record.get("workers") or 1) * (record.get("nodes") or 1)
        if after is not None and processes > 1 and (script.get("optimizer_steps") or 0) > after:
            ended[record["name"]] = after
    if not ended:
        return []
    runs = ", ".join(f"{name} after {after} steps" for name, after in ended.items())
    return [
        f"the script ended its process group (destroy_process_group) and went on stepping ({runs}): the "
        "steps after it communicate nothing, so the interconnect and network stalls, timed over them too, "
        "are understated, and the steps are rank 0's own times (the other ranks could not be gathered, the "
        "rank skew is not measured); end the group after the training loop"
    ]


def unread_data_dir_stalls(
    completed: list[dict], asked: Iterable[str], data_dir: str | None = None
) -> dict[str, str]:
    """The disk stall, if asked, as not separable (stall name -> why) where the script opened no file under
    --data-dir in its cached run (R3; a count the runs keep only with --data-dir): the page-cache state Stash
    set is not that of what it reads, so its cold and cached runs differ in nothing the disk stall
    measures."""
    unread = any(record["name"] == "R3" and (record.get("script") or {}).get("data_dir_opens") == 0
                 for record in completed)  # fmt: skip
    if not unread or "disk" not in asked:
        return {}
    folder = f"--data-dir {data_dir}" if data_dir else "--data-dir"
    return {"disk": (f"{UNREAD_DATA_DIR} {folder} in R3: it reads its data from elsewhere, so "
                     "its cold and cached runs differ in nothing the disk stall measures (give the folder it "
                     "reads as --data-dir)")}  # fmt: skip


def unread_data_dir(doc: dict) -> str | None:
    """A --data-dir the script opened no file under in its cached run: it reads its data from elsewhere."""
    folder = doc["spec"].get("data_dir")
    unread = [
        record["name"] for record in doc["phases"]
        if record.get("data") == "cached" and (record.get("script") or {}).get("data_dir_opens") == 0
    ]  # fmt: skip
    if not folder or not unread:
        return None
    return (
        f"the script opened no file under --data-dir {folder} in {', '.join(unread)} (every read opens its "
        "file, whatever reads it): it reads its data from elsewhere, so its cold and cached runs differ in "
        "nothing the disk stall measures; give the folder it reads as --data-dir"
    )


def input_pipeline(doc: dict) -> tuple[float, float, str] | None:
    """Without --data-dir: R2 minus the run before it (the last synthetic one), with its 95% interval."""
    if doc["spec"].get("data_dir"):
        return None
    times = {
        record["name"]: (record["iteration_s"]["mean"], record["iteration_s"].get("ci95"))
        for record in doc["phases"]
        if record.get("status") == "completed"
    }
    return pipeline_difference(times)


def no_loader_stalls(completed: list[dict], asked: Iterable[str]) -> dict[str, str]:
    """CPU and disk, of the `asked` stalls, as not separable (stall name -> why) where a script's runs iterate
    no DataLoader: its data loading is part of its compute; {} for a model's profile or a script that uses
    one. A stall not asked for is not said at all, as in a model's profile."""
    found = [record["script"] for record in completed if isinstance(record.get("script"), dict)]
    if not found or any(info.get("loader_used") for info in found):
        return {}
    return {stall: NO_LOADER for stall in ("cpu", "disk") if stall in asked}


def uncommunicating(completed: list[dict]) -> dict[str, str]:
    """The communication stalls of runs whose script set up no process group: its workers train apart, so
    what their run adds over the one before is no communication (stall name -> why)."""
    apart = [
        record["name"] for record in completed
        if (record.get("workers") or 1) > 1 and (record.get("script") or {}).get("process_group") is False
    ]  # fmt: skip
    reason = (
        f"the script sets up no process group (torch.distributed) in {', '.join(apart)}: its workers train "
        "apart and never communicate, so there is no communication to measure"
    )
    stalls = {STALL_OF_PHASE.get(name) for name in apart} & {"interconnect", "network"}
    return {stall: reason for stall in sorted(stalls)}
