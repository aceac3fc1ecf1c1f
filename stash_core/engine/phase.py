"""One differential run (R0, R1, R1n, R3 or R2): its worker job, its launch, what it measured."""

from __future__ import annotations

import os
import time

from stash_core.analysis.stats import summarise
from stash_core.engine.data_setup import DataSetup, check_remote_cache_state, disk_cap, set_cache_state
from stash_core.engine.machine_load import LoadMeter
from stash_core.engine.plan import PhasePlan
from stash_core.engine.progress import Reporter
from stash_core.engine.script_job import MODULE as SCRIPT_MODULE
from stash_core.engine.script_job import script_job
from stash_core.errors import MeasurementError, UsageError
from stash_core.launch.hang_watch import HangWatch
from stash_core.launch.hosts import RemoteHosts
from stash_core.launch.runner import run_workers, worker_env
from stash_core.launch.torchrun_failure import failure_line
from stash_core.measure import protocol
from stash_core.measure.probe_plan import probe_settings
from stash_core.measure.telemetry import TelemetrySampler
from stash_core.measure.worker_job import WorkerJob
from stash_core.spec import ProfileSpec
from stash_core.zoo_names import absolute_model_ref

# Time allowed on top of the measurement cap for start-up (imports, process group, data loaders).
STARTUP_ALLOWANCE_S = 180.0
# ... and for the probe after the timed loop of a multi-worker run.
PROBE_ALLOWANCE_S = 120.0
PROBE_PHASES = ("R1", "R1n")
ASKED_ITERATIONS = "asked (--iterations)"  # a fixed count cut short by a cap says so


def run_phase(
    plan: PhasePlan,
    spec: ProfileSpec,
    data: DataSetup,
    reporter: Reporter,
    warnings: list[str],
    remote: RemoteHosts | None = None,
    grad_bytes: int | None = None,
    paired: dict | None = None,
) -> dict:
    """One launch of a run, as its record; `paired`: R1's launch also times R0 (engine/paired.py)."""
    record = {**plan.to_dict(), "status": "running", "error": None, "resident_fraction_start": None}
    record["name"] = plan.name
    if plan.nodes > 1 and remote is None:
        raise UsageError(f"{plan.name} spreads workers over {plan.nodes} machines: use --hosts or --cluster")
    job = script_job(plan, spec) if spec.script else job_for(plan, spec, data, remote)
    job[protocol.TOKEN_KEY] = token = protocol.new_token()  # what the code run prints is never a message
    if paired:
        job["paired"] = paired
    if remote is not None:
        job["cpu_cores"] = None  # this machine's cores say nothing of the hosts' (they have --cpu-sets)
    if plan.data != "synthetic" and (data.files or not spec.script):
        if remote is None:
            try:
                record["resident_fraction_start"] = set_cache_state(plan, data, warnings)
            except UsageError as error:  # a file of the data set gone since it was scanned: a failed run
                failed = {"status": "failed", "wall_s": 0.0, "telemetry": empty_telemetry()}
                return {**record, **failed, "error": f"the data set changed during the profile: {error}"}
        else:  # each machine's own page cache, by the first worker on it
            job["cache_action"] = "resident" if plan.data == "cached" else "evict"
    timeout_s = spec.max_phase_s + STARTUP_ALLOWANCE_S
    module = SCRIPT_MODULE if spec.script else "stash_core.measure.worker"
    if spec.script:  # the script's own start-up may take up to --script-start-timeout
        timeout_s += max(0.0, spec.script_start_timeout_s - STARTUP_ALLOWANCE_S / 2)
    if spec.probes and plan.name in PROBE_PHASES and plan.workers > 1:
        max_op_s = remote.comm_timeout_s / 3 if remote is not None else None
        link_gbps = remote.link_gbps if remote is not None and plan.nodes > 1 else None
        job["probe"] = probe_settings(grad_bytes, max_op_s=max_op_s, link_gbps=link_gbps)
        timeout_s += PROBE_ALLOWANCE_S
    if remote is not None:
        job["telemetry"] = True  # sampled by rank 0 on the first machine, where R0 and R1 run too
    results: dict = {}
    errors: list[str] = []
    # Stash's own loop on this machine: a rank that hangs ends the launch soon after the loop's limit (a
    # script's steps are its own, and remote ranks' schedulers cannot be read from here).
    watch = HangWatch(spec.max_phase_s) if remote is None and not spec.script else None
    if watch is not None:  # the ranks' stacks when it stops them; collectives wait for it, not time out first
        job["dump_stacks"], job["pg_timeout_s"] = True, timeout_s

    def on_line(line: str) -> None:
        message = protocol.parse(line, token)
        if message is None:
            return
        kind, payload = message
        if kind == "PROGRESS":
            if watch is not None:
                watch.loop_started()
            reporter.progress(payload)
        elif kind == "LOOP_END" and watch is not None:
            watch.loop_ended()
        elif kind == "RESULT":
            results["result"] = payload
        elif kind == "ERROR" and isinstance(payload, dict):  # a script's error, with its last stderr lines
            errors.append(str(payload.get("message")))
            record.setdefault("stderr_tail", payload.get("stderr_tail") or [])
            record.setdefault("stdout_tail", payload.get("stdout_tail") or [])
        elif kind == "ERROR":
            errors.append(str(payload))

    started = time.monotonic()
    sampler = TelemetrySampler() if remote is None else None
    meter = LoadMeter() if remote is None else None
    failure: str | None = None
    if sampler is not None:
        sampler.start()
        meter.start()
    try:
        with disk_cap(spec, plan, data) as preexec:
            failure = run_workers(
                module, job, plan.workers_per_node, plan.nodes, remote, on_line,
                timeout_s, worker_env(spec.threads_per_worker), preexec, watch,
            )  # fmt: skip
    except MeasurementError as error:  # a local run past its time limit, or hung (with the ranks' stacks)
        failure = str(error)
        if getattr(error, "stderr_tail", None):
            record["stderr_tail"] = error.stderr_tail
    except UsageError as error:  # e.g. the master port is taken: the user has to change something
        failure = str(error)
        record["usage_error"] = True
    finally:
        if sampler is not None:
            record["telemetry"] = sampler.stop()
            load = meter.stop()
            record["machine_load"] = load.to_dict() if load is not None else None
    record["wall_s"] = time.monotonic() - started
    if errors or failure or "result" not in results:
        record["status"] = "failed"
        record["error"] = failure_line(failure, errors, remote is not None)
        record.setdefault("telemetry", empty_telemetry())
        return record
    result = results["result"]
    if remote is not None:
        record["telemetry"] = result.get("telemetry") or empty_telemetry()
        record["resident_fraction_start"] = result.get("resident_fraction_start")
        check_remote_cache_state(plan, record["resident_fraction_start"], warnings)
    fill_record(record, result, spec, warnings)
    for key in ("probe", "paired"):
        if result.get(key):
            record[key] = result[key]
    if result.get("script"):
        record["script"] = result["script"]
    return record


def empty_telemetry() -> dict:
    return {"interval_s": None, "gpu_status": None, "t_s": [], "metrics": {}}


def job_for(
    plan: PhasePlan, spec: ProfileSpec, data: DataSetup, remote: RemoteHosts | None = None
) -> WorkerJob:
    # A model file: the one this process checked, by its absolute path where the workers share this
    # machine's files (an emulated node's start in another folder); hosts over ssh find it from --workdir.
    on_this_machine = remote is None or spec.cluster == "emulated"
    return {
        "phase": plan.name,
        "model": absolute_model_ref(spec.model) if on_this_machine else spec.model,
        "num_classes": spec.num_classes,
        "input_shape": spec.input_shape,
        "find_unused_parameters": spec.find_unused_parameters,
        "batch_size": spec.batch_size,
        "device": spec.device,
        "backend": spec.backend,
        "threads_per_worker": spec.threads_per_worker,
        "cpu_cores": worker_cores(plan, spec),
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


def worker_cores(plan: PhasePlan, spec: ProfileSpec) -> list[list[int]] | None:
    """The cores each local worker of a CPU run is pinned to, the same in every run and launch: worker i
    gets the i-th block of threads_per_worker cores this process may use. None on a GPU, across machines
    (each has its own --cpu-sets; run_phase also drops it for any run on remote hosts) or when the workers'
    threads outnumber the cores."""
    if spec.device != "cpu" or plan.nodes > 1 or not spec.pin_workers:
        return None
    threads = spec.threads_per_worker or 1
    cores = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []
    if plan.workers_per_node * threads > len(cores):
        return None
    return [cores[i * threads : (i + 1) * threads] for i in range(plan.workers_per_node)]


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
    if result.get("bad_files"):  # images that failed to decode in the run, though they passed the check
        warnings.append(
            f"{record['name']}: {result['bad_files']} read(s) of images that could not be decoded were "
            "replaced by other samples (the check before the runs decodes a JPEG only where its end is "
            "missing, so damage inside one, or a file changed since, is found here)"
        )
    if result.get("loss_finite") is False:
        warnings.append(
            f"{record['name']}: the loss was not finite (NaN or inf) at the run's last step: the model "
            "diverged or its output is broken, so these are the step times of a job that does not train"
        )
    if record["nodes"] > 1 and result.get("ranks"):
        record["ranks"] = result["ranks"]  # every rank's own means, with the machine it ran on
    fixed = spec.fixed_iterations
    if result["stop_reason"] in ("max_iterations", "max_time") and fixed is not None and summary.n < fixed:
        cap = "--max-iterations" if result["stop_reason"] == "max_iterations" else "--max-phase-seconds"
        warnings.append(f"{record['name']}: stopped at the {cap} cap after {summary.n} kept iterations of "
                        f"the {fixed} {ASKED_ITERATIONS}: raise {cap}")  # fmt: skip
    if result["stop_reason"] in ("max_iterations", "max_time") and fixed is None:
        if summary.relative_ci > spec.target_relative_ci:
            cap = "iteration" if result["stop_reason"] == "max_iterations" else "time"
            warnings.append(
                f"{record['name']}: stopped at the {cap} cap after {summary.n} kept iterations with "
                f"± {summary.relative_ci:.1%} (target ± {spec.target_relative_ci:.0%})"
            )


def launch_warnings_kept(name: str, launch_warnings: list[str], warnings: list[str]) -> list[str]:
    """Of one launch's warnings, those the run keeps: not those already said, nor its cap warnings, which
    the pooled run's replace (launch_warnings), but for a fixed --iterations cut short by a cap,
    which the pooled run does not say: that one once a run."""
    stopped = f"{name}: stopped at the "
    said = any(warning.startswith(stopped) for warning in warnings)
    kept: list[str] = []
    for warning in launch_warnings:
        cap = warning.startswith(stopped)
        if warning in warnings or warning in kept or (cap and (said or ASKED_ITERATIONS not in warning)):
            continue
        said = said or cap
        kept.append(warning)
    return kept
