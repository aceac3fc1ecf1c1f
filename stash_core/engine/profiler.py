"""Run a whole profile: prepare the data, launch each differential run, assemble the result."""

from __future__ import annotations

import datetime
import os
import secrets
import time
from dataclasses import dataclass, field
from pathlib import Path

from stash_core import __version__
from stash_core.analysis.comm import communication_bounds
from stash_core.analysis.epochs import iterations_per_epoch as per_epoch
from stash_core.analysis.stalls import PhaseTime, breakdown
from stash_core.analysis.stats import summarise
from stash_core.data import pagecache
from stash_core.data.diskcap import DiskReadCap
from stash_core.engine.plan import PhasePlan, plan_phases
from stash_core.errors import MeasurementError, StashError, UsageError
from stash_core.launch.hosts import RemoteHosts, check_hosts, version_warnings
from stash_core.launch.runner import run_workers, worker_env
from stash_core.measure import protocol
from stash_core.measure.fingerprint import machine_fingerprint
from stash_core.measure.probe_plan import probe_settings
from stash_core.measure.telemetry import TelemetrySampler
from stash_core.spec import ProfileSpec

# Time allowed on top of the measurement cap for start-up (imports, process group, data loaders).
STARTUP_ALLOWANCE_S = 180.0
# ... and for the probe after the timed loop of a multi-worker run.
PROBE_ALLOWANCE_S = 120.0
PROBE_PHASES = ("R1", "R1n")
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
    classes: int = 0  # class folders of the data set (labels run 0..classes-1)


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

    if spec.dataset:
        root = Path(spec.dataset).resolve()
    elif model_kind == "tokens":
        from stash_core.data.text_dataset import generate_synthetic_text

        reporter.message(f"preparing a synthetic text data set of {spec.synthetic_images} documents")
        root = generate_synthetic_text(spec.synthetic_images, seed=spec.seed)
    else:
        from stash_core.data.jpeg_dataset import generate_synthetic_jpegs

        reporter.message(f"preparing {spec.synthetic_images} synthetic JPEG images ({spec.image_px} px)")
        root = generate_synthetic_jpegs(spec.synthetic_images, image_px=spec.image_px, seed=spec.seed)
    setup = DataSetup(root=root)
    if model_kind == "tokens":
        from stash_core.data.text_dataset import TextFolderDataset

        dataset = TextFolderDataset(root, seq_len=8, vocab_size=100)
    else:
        from stash_core.data.jpeg_dataset import ImageFolderDataset, validate_images

        dataset = ImageFolderDataset(root, transform=None)
        before = set(map(str, dataset.files))
        skipped = validate_images(dataset)
        if skipped:
            setup.bad_files = sorted(before - set(map(str, dataset.files)))
            reporter.message(f"skipping {skipped} corrupt image file(s) of {len(before)}")
    setup.files = list(dataset.files)
    setup.classes = len(dataset.classes)
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

    return per_epoch(images, spec.batch_size, spec.workers_total)


def run_profile(
    spec: ProfileSpec,
    model_info: dict,
    data: DataSetup,
    reporter: Reporter | None = None,
    remote: RemoteHosts | None = None,
) -> dict:
    """Measure every planned run and return the complete result document (never half-filled).

    With `remote`, every run goes to the remote machines over ssh: R0 and R1 on the first one, the
    runs over N machines on the first N.
    """

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
        "spec": spec_record(spec, data, remote),
        "model": model_info,
        "fingerprint": machine_fingerprint(spec.instance),
        "phases": [],
        "breakdown": None,
    }
    if remote is not None:
        doc["hosts"] = []
    if spec.nodes > 1 or spec.workers_total > 1:
        doc["probes"] = []
    warnings: list[str] = []
    chain = chain_for(spec)
    try:
        reference_workers = None
        if remote is not None:
            reference_workers = settle_on_hosts(spec, remote, doc, reporter, warnings)
            doc["spec"] = spec_record(spec, data, remote)
        chain, plans = plan_phases(spec, reference_workers)
        if "interconnect" in spec.stalls and "R1" not in chain and spec.nodes > 1:
            warnings.append(
                "interconnect not measured: the first machine holds one worker, so R0 is the network "
                "reference"
            )
        if data.not_separable_reason:
            plans = [plan for plan in plans if plan.name != "R3"]
            doc["_not_separable"] = {"cpu": data.not_separable_reason, "disk": data.not_separable_reason}
        for index, plan in enumerate(plans):
            reporter.phase_started(plan, index, len(plans))
            record = {**plan.to_dict(), "status": "interrupted", "error": "interrupted by the user"}
            doc["phases"].append(record)
            outcome = run_phase(plan, spec, data, reporter, warnings, remote, model_info.get("grad_bytes"))
            usage_error = outcome.pop("usage_error", False)
            probe = outcome.pop("probe", None)
            record.update(outcome)
            if probe is not None:
                doc["probes"].append(probe_record(probe, doc, plan, remote))
            reporter.phase_finished(record)
            if record["status"] != "completed":
                failure = UsageError if usage_error else MeasurementError
                raise failure(f"run {plan.name} ({plan.description}) failed: {record['error']}")
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
        doc["breakdown"] = breakdown_of_completed(doc, chain, spec, warnings)
    return doc


def spec_record(spec: ProfileSpec, data: DataSetup, remote: RemoteHosts | None) -> dict:
    """The spec as the result file keeps it: the data set as used and, on an emulated cluster, its link."""
    record = spec.to_dict()
    record["dataset_images"] = data.images
    record["dataset"] = str(data.root) if data.root else None
    if remote is not None:
        record["hosts"] = remote.host_names
        if remote.link is not None:
            # spec.network is where the stall fits read a link's rate from
            link = remote.link
            record["network"] = {"kind": "emulated", "bandwidth_bps": link.get("rate_bps"), **link}
    return record


def settle_on_hosts(
    spec: ProfileSpec, remote: RemoteHosts, doc: dict, reporter: Reporter, warnings: list[str]
) -> int:
    """Check every host (reachable, python, torch, Stash), pick device, backend and threads from the
    first one, and return how many workers the single-machine reference R1 gets."""

    reporter.message(f"checking {len(remote.targets)} host(s): {', '.join(remote.host_names)}")
    infos = check_hosts(remote)
    doc["hosts"] = [
        {key: info.get(key) for key in ("host", "hostname", "python_version", "torch_version",
                                        "stash_version", "cpu_count", "gpu_count", "gpu_status")}
        for info in infos
    ]  # fmt: skip
    warnings.extend(version_warnings(infos))
    first = infos[0]
    if spec.device == "auto":
        spec.device = "cuda" if first.get("cuda_available") and first.get("gpu_count") else "cpu"
    if spec.device == "cuda" and not first.get("gpu_count"):
        raise UsageError(f"--device cuda: host {first['host']} has no usable GPU ({first.get('gpu_status')})")
    if spec.backend is None:
        spec.backend = "nccl" if spec.device == "cuda" else "gloo"
    for index, info in enumerate(infos):
        capacity = remote.capacity(info, spec.device, index)
        if spec.workers_per_node > capacity:
            unit = "GPU(s)" if spec.device == "cuda" else "CPU core(s)"
            raise UsageError(
                f"--workers {spec.workers_per_node}: host {info['host']} has {capacity} {unit}; "
                "one worker per GPU or core"
            )
    capacity = remote.capacity(first, spec.device)
    reference_workers = spec.workers_total if capacity >= spec.workers_total else spec.workers_per_node
    if spec.threads_per_worker is None:
        cores = len(remote.cpu_sets[0]) if remote.cpu_sets else int(first.get("cpu_count") or 1)
        # the same threads in every run, so R0, R1 and R1n compare like with like
        spec.threads_per_worker = max(1, cores // max(reference_workers, spec.workers_per_node))
    return reference_workers


def probe_record(probe: dict, doc: dict, plan: PhasePlan, remote: RemoteHosts | None) -> dict:
    """A probe set as the result file keeps it (section "probes")."""
    link = (remote.link or {}) if remote is not None else {}
    return {
        "probe_id": f"{doc['run_id']}-{plan.name}",
        "run_id": doc["run_id"],
        "phase": plan.name,
        "instance": doc["spec"].get("instance") or doc["fingerprint"].get("instance"),
        "link_gbps": link["rate_bps"] / 1e9 if plan.nodes > 1 and link.get("rate_bps") else None,
        **probe,
    }


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
    add_communication(result, doc, chain)
    return result


def add_communication(result: dict, doc: dict, chain: list[str]) -> None:
    """Which runs the network figure compares, and each communication stall beside its lower bound."""

    phases = {record["name"]: record for record in doc["phases"] if record.get("status") == "completed"}
    if "R1n" in chain and chain.index("R1n") > 0:
        reference = chain[chain.index("R1n") - 1]
        if reference in phases and "R1n" in phases:
            near, far = phases[reference], phases["R1n"]
            text = (
                f"{reference} ({near['workers']} worker{'s' if near['workers'] != 1 else ''}, 1 machine) "
                f"vs R1n ({far['nodes']}x{far['workers'] // far['nodes']} workers)"
            )
            result["network_reference"] = text
            network = result["stalls"].get("network") or {}
            if network and not network.get("note"):
                network["note"] = text
            if near["workers"] != far["workers"]:
                result["warnings"].append(
                    f"the network figure compares {text}: one machine cannot hold all {far['workers']} "
                    "workers, so it also holds the cost of the larger ring"
                )
    probes = {probe.get("phase"): probe for probe in doc.get("probes") or []}
    if not probes:
        return
    grad_bytes = (doc.get("model") or {}).get("grad_bytes")
    backward_s = {
        name: record["parts_mean_s"]["backward_s"]
        for name, record in phases.items()
        if (record.get("parts_mean_s") or {}).get("backward_s") is not None
    }
    link_bps = (doc["spec"].get("network") or {}).get("bandwidth_bps") or None
    communication = {}
    if "R1" in probes and "R1" in chain:
        communication["interconnect"] = communication_bounds(
            "interconnect", result["stalls"].get("interconnect") or {}, probes["R1"], None, grad_bytes,
            backward_s, "R0", "R1",
        )  # fmt: skip
    if "R1n" in probes and "R1n" in chain and chain.index("R1n") > 0:
        reference = chain[chain.index("R1n") - 1]
        communication["network"] = communication_bounds(
            "network", result["stalls"].get("network") or {}, probes["R1n"], probes.get(reference),
            grad_bytes, backward_s, reference, "R1n", link_bps,
        )  # fmt: skip
    result["communication"] = communication


def run_phase(
    plan: PhasePlan,
    spec: ProfileSpec,
    data: DataSetup,
    reporter: Reporter,
    warnings: list[str],
    remote: RemoteHosts | None = None,
    grad_bytes: int | None = None,
) -> dict:
    record = {**plan.to_dict(), "status": "running", "error": None, "resident_fraction_start": None}
    record["name"] = plan.name
    if plan.nodes > 1 and remote is None:
        raise UsageError(f"{plan.name} spreads workers over {plan.nodes} machines: use --hosts or --cluster")
    job = job_for(plan, spec, data)
    if plan.data != "synthetic":
        if remote is None:
            record["resident_fraction_start"] = set_cache_state(plan, data, warnings)
        else:  # each machine's own page cache, by the first worker on it
            job["cache_action"] = "resident" if plan.data == "cached" else "evict"
    timeout_s = spec.max_phase_s + STARTUP_ALLOWANCE_S
    if spec.probes and plan.name in PROBE_PHASES and plan.workers > 1:
        max_op_s = remote.comm_timeout_s / 3 if remote is not None else None
        job["probe"] = probe_settings(grad_bytes, max_op_s=max_op_s)
        timeout_s += PROBE_ALLOWANCE_S
    if remote is not None:
        job["telemetry"] = True  # sampled by rank 0 on the first machine, where R0 and R1 run too
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
    sampler = TelemetrySampler() if remote is None else None
    failure: str | None = None
    if sampler is not None:
        sampler.start()
    try:
        with disk_cap(spec, plan, data) as preexec:
            failure = run_workers(
                "stash_core.measure.worker", job, plan.workers_per_node, plan.nodes, remote, on_line,
                timeout_s, worker_env(spec.threads_per_worker), preexec,
            )  # fmt: skip
    except MeasurementError as error:  # a local run past its time limit
        failure = str(error)
    except UsageError as error:  # e.g. the master port is taken: the user has to change something
        failure = str(error)
        record["usage_error"] = True
    finally:
        if sampler is not None:
            record["telemetry"] = sampler.stop()
    record["wall_s"] = time.monotonic() - started
    if errors or failure or "result" not in results:
        record["status"] = "failed"
        record["error"] = failure_message(failure, errors, remote is not None)
        record.setdefault("telemetry", empty_telemetry())
        return record
    result = results["result"]
    if remote is not None:
        record["telemetry"] = result.get("telemetry") or empty_telemetry()
        record["resident_fraction_start"] = result.get("resident_fraction_start")
        check_remote_cache_state(plan, record["resident_fraction_start"], warnings)
    fill_record(record, result, spec, warnings)
    if result.get("probe"):
        record["probe"] = result["probe"]
    return record


def failure_message(failure: str | None, errors: list[str], remote: bool) -> str:
    """One line: on one machine the workers' own error; across machines the launcher's (which names the
    node) first, since a dead peer makes the others report only its symptom."""
    if not remote:
        return errors[0] if errors else (failure or "the run exited without a result")
    if failure and errors:
        return f"{failure}; first worker error: {errors[0]}"[:600]
    return (failure or (errors[0] if errors else "the run exited without a result"))[:600]


def empty_telemetry() -> dict:
    return {"interval_s": None, "gpu_status": None, "t_s": [], "metrics": {}}


def check_remote_cache_state(plan: PhasePlan, fraction: float | None, warnings: list[str]) -> None:
    if fraction is None:
        return
    if plan.data == "cached" and fraction < MIN_CACHED_RESIDENT_FRACTION:
        warnings.append(f"{plan.name}: only {fraction:.0%} of the data set stayed in the page cache")
    if plan.data == "cold" and fraction > 1 - MIN_CACHED_RESIDENT_FRACTION:
        warnings.append(f"{plan.name}: {fraction:.0%} of the data set was still cached after eviction")


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

        self.cap = DiskReadCap(self.data.root, self.spec.disk_read_mbps)
        self.cap.__enter__()
        cap = self.cap
        return lambda: cap.add_pid(os.getpid())

    def __exit__(self, *exc_info) -> None:
        if self.cap is not None:
            self.cap.__exit__(*exc_info)


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
    if record["nodes"] > 1 and result.get("ranks"):
        record["ranks"] = result["ranks"]  # every rank's own means, with the machine it ran on
    if result["stop_reason"] in ("max_iterations", "max_time") and spec.fixed_iterations is None:
        if summary.relative_ci > spec.target_relative_ci:
            cap = "iteration" if result["stop_reason"] == "max_iterations" else "time"
            warnings.append(
                f"{record['name']}: stopped at the {cap} cap after {summary.n} kept iterations with "
                f"± {summary.relative_ci:.1%} (target ± {spec.target_relative_ci:.0%})"
            )
