"""`stash probe`: launch the bandwidth and latency probe here, on --hosts or on the emulated cluster."""

from __future__ import annotations

import datetime
import secrets
import time
from collections.abc import Callable
from pathlib import Path

from stash_core import __version__
from stash_core.engine.machine import cuda_device_count, usable_cpu_count
from stash_core.errors import MeasurementError, UsageError
from stash_core.launch.hosts import check_hosts, cluster_name_of, link_change_warning, remote_hosts
from stash_core.launch.runner import run_workers, worker_env
from stash_core.launch.torchrun_failure import failure_line
from stash_core.measure import protocol
from stash_core.measure.fingerprint import machine_fingerprint
from stash_core.measure.probe_plan import probe_settings, probe_sizes
from stash_core.measure.worker_job import WorkerJob
from stash_core.results import PROBE_KIND, SCHEMA_VERSION
from stash_core.spec import ProfileSpec
from stash_core.spec_checks import check_cluster_state, validate_machines
from stash_core.spec_parse import parse_hosts


def run_probe_command(
    workers_per_node: int,
    nodes: int,
    device: str,
    min_size_bytes: int,
    max_size_bytes: int,
    p2p_size_bytes: int,
    gradient_bytes: int | None,
    budget_s: float,
    threads_per_worker: int,
    instance: str | None,
    machine_args,
    warn: Callable[[str], None] = lambda text: None,
) -> dict:
    """Launch a probe (here, or on --hosts / --cluster machines) and return it as a "stash-probe" document.
    `warn` gets what the document cannot hold: the emulated links changed while the probe ran."""
    if workers_per_node * nodes < 2:
        raise UsageError("a probe needs at least two workers (--workers 2, or --nodes 2)")
    if budget_s <= 0 or threads_per_worker < 1:
        raise UsageError("--budget must be positive and --threads-per-worker at least 1")
    # The machines, built and checked the way a profile's are (spec_checks.validate_machines, then
    # launch/hosts.py remote_hosts of its spec): an option that needs other machines is refused, not ignored.
    machines = ProfileSpec(
        model="probe", batch_size=None, workers_per_node=workers_per_node, nodes=nodes,
        hosts=parse_hosts(machine_args.hosts), ssh_user=machine_args.ssh_user, ssh_key=machine_args.ssh_key,
        ssh_config=getattr(machine_args, "ssh_config", None),
        remote_python=machine_args.python, remote_workdir=machine_args.workdir, cluster=machine_args.cluster,
        cluster_name=cluster_name_of(machine_args), master_addr=machine_args.master_addr,
        master_port=machine_args.master_port, comm_timeout_s=machine_args.comm_timeout,
    )  # fmt: skip
    validate_machines(machines)
    check_cluster_state(machines, machine_args.cluster_state)
    state = Path(machine_args.cluster_state) if machine_args.cluster_state else None
    remote = remote_hosts(machines, state)
    if remote is not None:
        first = check_hosts(remote)[0]
        gpus = int(first.get("gpu_count") or 0) if first.get("cuda_available") else 0
        cores = len(remote.cpu_sets[0]) if remote.cpu_sets else int(first.get("cpu_count") or 1)
    else:
        gpus, cores = cuda_device_count(), usable_cpu_count()
    if device == "auto":
        device = "cuda" if gpus else "cpu"
    capacity = gpus if device == "cuda" else cores
    if workers_per_node > capacity:
        unit = "GPU(s)" if device == "cuda" else "CPU core(s)"
        raise UsageError(f"--workers {workers_per_node}: a machine here has {capacity} {unit}")
    max_op_s = remote.comm_timeout_s / 3 if remote is not None else None
    job: WorkerJob = {
        "device": device,
        "backend": "nccl" if device == "cuda" else "gloo",
        "threads_per_worker": threads_per_worker,
        "probe": probe_settings(
            gradient_bytes,
            probe_sizes(min_size_bytes, max_size_bytes),
            p2p_size_bytes,
            budget_s,
            max_op_s=max_op_s,
            link_gbps=remote.link_gbps if remote is not None and nodes > 1 else None,
        ),  # fmt: skip
    }
    job[protocol.TOKEN_KEY] = token = protocol.new_token()
    results: dict = {}
    errors: list[str] = []

    def on_line(line: str) -> None:
        message = protocol.parse(line, token)
        if message and message[0] == "RESULT":
            results["probe"] = message[1]
        elif message and message[0] == "ERROR":
            errors.append(str(message[1]))

    started = datetime.datetime.now(datetime.UTC)
    wall_start = time.monotonic()
    failure = run_workers(
        "stash_core.measure.probe_worker", job, workers_per_node, nodes, remote, on_line, 900.0,
        worker_env(threads_per_worker),
    )  # fmt: skip
    if failure or errors or "probe" not in results:
        reason = failure_line(failure, errors, remote=True) if failure or errors else None
        raise MeasurementError(f"probe failed: {reason or 'the probe exited without a result'}")
    changed = link_change_warning(remote, machines, state)
    if changed:
        warn(changed)
    link = (remote.link or {}) if remote is not None else {}
    return {
        "schema_version": SCHEMA_VERSION,
        "kind": PROBE_KIND,
        "probe_id": f"probe-{started.strftime('%Y%m%dT%H%M%SZ')}-{secrets.token_hex(4)}",
        "run_id": None,
        "phase": None,
        "stash_version": __version__,
        "instance": instance,
        "machines": remote.label if remote is not None else "this machine",
        "hosts": remote.host_texts if remote is not None else [],
        "link_gbps": link["rate_bps"] / 1e9 if nodes > 1 and link.get("rate_bps") else None,
        "fingerprint": machine_fingerprint(instance),
        "wall_s": time.monotonic() - wall_start,
        **results["probe"],
        "started_at": started.isoformat(),
    }
