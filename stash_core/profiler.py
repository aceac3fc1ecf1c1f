"""Run a whole profile: prepare the data, launch each differential run, assemble the result."""

from __future__ import annotations

import datetime
import json
import os
import secrets
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from . import __version__, protocol
from .errors import MeasurementError, StashError, UsageError
from .launch.local import run_local, torchrun_argv
from .phases import PhasePlan, plan_phases
from .spec import ProfileSpec
from .stalls import PhaseTime, breakdown
from .stats import summarise

PACKAGE_PARENT = str(Path(__file__).resolve().parent.parent)
# Time allowed on top of the measurement cap for start-up (imports, process group, data loaders).
STARTUP_ALLOWANCE_S = 180.0
# A cached run needs (almost) all of the data set in memory to measure the CPU stall alone.
MIN_CACHED_RESIDENT_FRACTION = 0.95


@dataclass
class DataSetup:
    root: Path | None = None
    files: list[Path] = field(default_factory=list)
    total_bytes: int = 0
    images: int | None = None
    bad_files: list[str] = field(default_factory=list)
    not_separable_reason: str | None = None


class Reporter:
    """Receives progress; the CLI draws bars, the dashboard reads JSON lines. Silent by default."""

    def phase_started(self, plan: PhasePlan, index: int, total: int) -> None: ...
    def progress(self, payload: dict) -> None: ...
    def phase_finished(self, record: dict) -> None: ...
    def message(self, text: str) -> None: ...


def new_run_id(now: datetime.datetime) -> str:
    return f"{now.strftime('%Y%m%dT%H%M%SZ')}-{secrets.token_hex(4)}"


def utc_now() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC)


def prepare_data(spec: ProfileSpec, model_kind: str, reporter: Reporter) -> DataSetup:
    """Find or make the data set, drop corrupt files, and check that it can be cached."""
    if not spec.real_data:
        return DataSetup(images=spec.dataset_images)
    from .data import pagecache

    if spec.dataset:
        root = Path(spec.dataset).resolve()
    elif model_kind == "tokens":
        from .data.text_dataset import generate_synthetic_text

        reporter.message(f"preparing a synthetic text data set of {spec.synthetic_images} documents")
        root = generate_synthetic_text(spec.synthetic_images, seed=spec.seed)
    else:
        from .data.jpeg_dataset import generate_synthetic_jpegs

        reporter.message(f"preparing {spec.synthetic_images} synthetic JPEG images ({spec.image_px} px)")
        root = generate_synthetic_jpegs(spec.synthetic_images, image_px=spec.image_px, seed=spec.seed)
    setup = DataSetup(root=root)
    if model_kind == "tokens":
        from .data.text_dataset import TextFolderDataset

        dataset = TextFolderDataset(root, seq_len=8, vocab_size=100)
    else:
        from .data.jpeg_dataset import ImageFolderDataset, validate_images

        dataset = ImageFolderDataset(root, transform=None)
        before = set(map(str, dataset.files))
        skipped = validate_images(dataset)
        if skipped:
            setup.bad_files = sorted(before - set(map(str, dataset.files)))
            reporter.message(f"skipping {skipped} corrupt image file(s) of {len(before)}")
    setup.files = list(dataset.files)
    setup.images = len(setup.files)
    if setup.images // spec.workers_total < spec.batch_size:
        raise UsageError(
            f"the data set has {setup.images} usable samples: too few for {spec.workers_total} worker(s) "
            f"x batch size {spec.batch_size}"
        )
    setup.total_bytes = sum(path.stat().st_size for path in setup.files)
    if not pagecache.fits_in_memory(setup.total_bytes):
        available = pagecache.available_memory_bytes()
        setup.not_separable_reason = (
            f"the data set ({setup.total_bytes / 1e9:.1f} GB) does not fit in available memory "
            f"({available / 1e9:.1f} GB), so it cannot be measured fully cached"
        )
    return setup


def iterations_per_epoch(spec: ProfileSpec, images: int | None) -> int | None:
    if not images:
        return None
    from .data.loader import iterations_per_epoch as per_epoch

    return per_epoch(images, spec.batch_size, spec.workers_total)


def run_profile(
    spec: ProfileSpec, model_info: dict, data: DataSetup, reporter: Reporter | None = None
) -> dict:
    """Measure every planned run and return the complete result document (never half-filled)."""
    from .fingerprint import machine_fingerprint

    reporter = reporter or Reporter()
    started_at = utc_now()
    doc = {
        "schema_version": 1,
        "kind": "stash-profile",
        "run_id": new_run_id(started_at),
        "status": "running",
        "error": None,
        "started_at": started_at.isoformat(),
        "finished_at": None,
        "stash_version": __version__,
        "spec": spec.to_dict(),
        "model": model_info,
        "fingerprint": machine_fingerprint(spec.instance),
        "phases": [],
        "breakdown": None,
    }
    warnings: list[str] = []
    try:
        doc["spec"]["dataset_images"] = data.images
        doc["spec"]["dataset"] = str(data.root) if data.root else None
        _, plans = plan_phases(spec)
        if data.not_separable_reason:
            plans = [plan for plan in plans if plan.name != "R3"]
            doc["_not_separable"] = {"cpu": data.not_separable_reason, "disk": data.not_separable_reason}
        for index, plan in enumerate(plans):
            reporter.phase_started(plan, index, len(plans))
            record = {**plan.to_dict(), "status": "interrupted", "error": "interrupted by the user"}
            doc["phases"].append(record)
            record.update(run_phase(plan, spec, data, reporter, warnings))
            reporter.phase_finished(record)
            if record["status"] != "completed":
                raise MeasurementError(f"run {plan.name} ({plan.description}) failed: {record['error']}")
        doc["status"] = "completed"
    except KeyboardInterrupt as error:
        doc["status"] = "interrupted"
        doc["error"] = "interrupted by the user"
        error.__stash_doc__ = doc  # the caller still saves what was measured
        raise
    except StashError as error:
        doc["status"] = "failed"
        doc["error"] = str(error)
        error.__stash_doc__ = doc
        raise
    finally:
        doc["finished_at"] = utc_now().isoformat()
        # A failed or interrupted profile keeps the breakdown of the runs that did complete.
        doc["breakdown"] = breakdown_of_completed(doc, chain_for(spec), spec, warnings)
    return doc


def chain_for(spec: ProfileSpec) -> list[str]:
    return plan_phases(spec)[0]


def breakdown_of_completed(
    doc: dict, chain: list[str], spec: ProfileSpec, warnings: list[str]
) -> dict | None:
    not_separable = doc.pop("_not_separable", None) or {}
    completed = [record for record in doc["phases"] if record.get("status") == "completed"]
    if not completed:
        return None
    times = {
        record["name"]: PhaseTime(record["iteration_s"]["mean"], record["iteration_s"]["ci95"])
        for record in completed
    }
    result = breakdown(
        times, chain, iterations_per_epoch(spec, doc["spec"].get("dataset_images")), not_separable
    )
    result["warnings"] = warnings + result["warnings"]
    return result


def run_phase(
    plan: PhasePlan, spec: ProfileSpec, data: DataSetup, reporter: Reporter, warnings: list[str]
) -> dict:
    from .telemetry import TelemetrySampler

    record = {**plan.to_dict(), "status": "running", "error": None, "resident_fraction_start": None}
    record["name"] = plan.name
    if plan.nodes > 1:
        raise UsageError(f"{plan.name} spreads workers over {plan.nodes} machines: use --hosts or --cluster")
    job = job_for(plan, spec, data)
    if plan.data != "synthetic":
        record["resident_fraction_start"] = set_cache_state(plan, data, warnings)
    results: dict = {}
    errors: list[str] = []

    def on_line(line: str) -> None:
        message = protocol.parse(line)
        if message is None:
            return
        kind, payload = message
        if kind == "PROGRESS":
            reporter.progress(payload)
        elif kind == "RESULT":
            results["result"] = payload
        elif kind == "ERROR":
            errors.append(str(payload))

    started = time.monotonic()
    sampler = TelemetrySampler()
    with tempfile.TemporaryDirectory(prefix="stash-job-") as job_dir:
        job_path = Path(job_dir) / "job.json"
        job_path.write_text(json.dumps(job))
        argv = torchrun_argv(plan.workers_per_node, str(job_path))
        env = {
            "OMP_NUM_THREADS": str(spec.threads_per_worker),
            "PYTHONPATH": os.pathsep.join(filter(None, [PACKAGE_PARENT, os.environ.get("PYTHONPATH")])),
            "PYTHONUNBUFFERED": "1",
        }
        timeout_s = spec.max_phase_s + STARTUP_ALLOWANCE_S
        sampler.start()
        try:
            with disk_cap(spec, plan, data) as preexec:
                failure = run_local(argv, on_line, timeout_s, env=env, preexec=preexec)
        finally:
            record["telemetry"] = sampler.stop()
    record["wall_s"] = time.monotonic() - started
    if errors or failure or "result" not in results:
        record["status"] = "failed"
        record["error"] = errors[0] if errors else last_meaningful(failure)
        return record
    fill_record(record, results["result"], spec, warnings)
    return record


def job_for(plan: PhasePlan, spec: ProfileSpec, data: DataSetup) -> dict:
    return {
        "phase": plan.name,
        "model": spec.model,
        "num_classes": spec.num_classes,
        "input_shape": spec.input_shape,
        "batch_size": spec.batch_size,
        "device": spec.device,
        "backend": spec.backend,
        "threads_per_worker": spec.threads_per_worker,
        "data": plan.data,
        "dataset": str(data.root) if data.root else None,
        "exclude_files": data.bad_files,
        "loader_workers": spec.loader_workers,
        "iterations": spec.fixed_iterations,
        "target_relative_ci": spec.target_relative_ci,
        "max_iterations": spec.max_iterations,
        "max_phase_s": spec.max_phase_s,
        "seed": spec.seed,
    }


def set_cache_state(plan: PhasePlan, data: DataSetup, warnings: list[str]) -> float:
    """Make the data set resident (cached run) or evict exactly its files (cold run); measure it."""
    from .data import pagecache

    if plan.data == "cached":
        pagecache.make_resident(data.files)
    else:
        pagecache.evict(data.files)
    fraction = pagecache.resident_fraction(data.files)
    if plan.data == "cached" and fraction < MIN_CACHED_RESIDENT_FRACTION:
        warnings.append(f"{plan.name}: only {fraction:.0%} of the data set stayed in the page cache")
    if plan.data == "cold" and fraction > 1 - MIN_CACHED_RESIDENT_FRACTION:
        warnings.append(f"{plan.name}: {fraction:.0%} of the data set was still cached after eviction")
    return fraction


class disk_cap:
    """Context manager giving a preexec function that puts the run in a read-throttled cgroup."""

    def __init__(self, spec: ProfileSpec, plan: PhasePlan, data: DataSetup) -> None:
        self.active = spec.disk_read_mbps is not None and plan.data != "synthetic"
        self.spec, self.data, self.cap = spec, data, None

    def __enter__(self):
        if not self.active:
            return None
        from .data.diskcap import DiskReadCap

        self.cap = DiskReadCap(self.data.root, self.spec.disk_read_mbps)
        self.cap.__enter__()
        cap = self.cap
        return lambda: cap.add_pid(os.getpid())

    def __exit__(self, *exc_info) -> None:
        if self.cap is not None:
            self.cap.__exit__(*exc_info)


def last_meaningful(lines: list[str]) -> str:
    """The most telling line of a failed run's stderr (an exception message, not a traceback frame)."""
    for line in reversed(lines):
        text = line.strip()
        if text and not text.startswith(("File ", "Traceback", "^", "~")) and "warnings.warn" not in text:
            return text[:300]
    return "the run exited without a result"


def fill_record(record: dict, result: dict, spec: ProfileSpec, warnings: list[str]) -> None:
    samples = result["samples"]
    summary = summarise(samples["iteration_s"])
    record.update(
        {
            "status": "completed",
            "warmup_iterations": result["warmup_iterations"],
            "iterations": summary.n,
            "iteration_s": summary.to_dict(),
            "parts_mean_s": {
                part: sum(values) / len(values) if values else None
                for part, values in samples.items()
                if part.endswith("_s") and part != "iteration_s"
            },
            "samples": samples,
            "rank_skew_s": result["rank_skew_s"],
            "stop_reason": result["stop_reason"],
        }
    )
    if result["stop_reason"] in ("max_iterations", "max_time") and spec.fixed_iterations is None:
        if summary.relative_ci > spec.target_relative_ci:
            cap = "iteration" if result["stop_reason"] == "max_iterations" else "time"
            warnings.append(
                f"{record['name']}: stopped at the {cap} cap after {summary.n} kept iterations with "
                f"± {summary.relative_ci:.1%} (target ± {spec.target_relative_ci:.0%})"
            )
