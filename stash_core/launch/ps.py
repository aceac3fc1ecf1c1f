"""Launch asynchronous parameter-server trainings: on this machine over loopback, or on an emulated cluster.

One torchrun launch of N + 1 processes of measure/ps_worker.py (rank 0 the PS, N the largest worker count)
runs one training per worker count in turn; rank 0 prints one RESULT line per rank of a count, returned
here grouped by the count. On an emulated cluster each process has its own node (node 0 the PS, node i worker
i), so every push and pull crosses the shaped links.
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

from stash_core.errors import MeasurementError
from stash_core.launch.hosts import RemoteHosts, hosts_from_cluster
from stash_core.launch.local import run_local, torchrun_argv
from stash_core.launch.multinode import free_port, launch_torchrun_over_ssh
from stash_core.launch.torchrun_failure import root_cause
from stash_core.measure.protocol import parse

START_S = 120.0  # allowance for torchrun and N + 1 torch imports on a busy machine
MODULE = "stash_core.measure.ps_worker"


def ps_module_args(counts: list[int], model: str, batch: int, duration_s: float,
                   num_classes: int | None = None, input_shape: str | None = None,
                   clock: str = "monotonic") -> list[str]:  # fmt: skip
    """ps_worker's arguments; `clock` "wall" where its processes run on several machines (no monotonic clock
    is shared between them)."""
    args = [
        "--model", model, "--batch", str(batch), "--duration-s", f"{duration_s:g}",
        "--counts", ",".join(str(n) for n in counts), "--clock", clock,
    ]  # fmt: skip
    if num_classes is not None:
        args += ["--num-classes", str(num_classes)]
    if input_shape:
        args += ["--input-shape", input_shape]
    return args


def ps_argv(counts: list[int], model: str, batch: int, duration_s: float, num_classes: int | None = None,
            input_shape: str | None = None) -> list[str]:  # fmt: skip
    return torchrun_argv(
        max(counts) + 1, MODULE, ps_module_args(counts, model, batch, duration_s, num_classes, input_shape)
    )


def cluster_machines(name: str, state_dir: Path | None = None) -> RemoteHosts:
    """Every node of emulated cluster `name`, whose state is in `state_dir` (None: the name's own folder);
    UsageError in one line when it is gone or not up, or when its state is in another folder."""
    return hosts_from_cluster(None, state_dir, name=name)


def run_ps_training(counts: list[int], model: str, batch: int, duration_s: float,
                    num_classes: int | None = None, input_shape: str | None = None,
                    remote: RemoteHosts | None = None) -> dict[int, list[dict]]:  # fmt: skip
    """Per worker count: the RESULT payloads of the PS and its workers (one node each with `remote`)."""
    if not counts or min(counts) < 1:
        raise MeasurementError("a parameter-server training needs at least one worker")
    results: dict[int, list[dict]] = defaultdict(list)
    errors: list[str] = []

    def on_line(line: str) -> None:
        message = parse(line)
        if message is None:
            return
        kind, payload = message
        if kind == "RESULT" and isinstance(payload, dict):
            results[int(payload.get("workers", 0))].append(payload)
        elif kind == "ERROR":
            errors.append(str(payload))

    timeout_s = START_S + len(counts) * (2 * duration_s + 10)
    if remote is None:
        argv = ps_argv(counts, model, batch, duration_s, num_classes, input_shape)
        tail = run_local(argv, on_line, timeout_s=timeout_s)
        failure = root_cause(tail, default="a process printed no result") if tail else None
        where = ""
    else:
        module_args = ps_module_args(counts, model, batch, duration_s, num_classes, input_shape, clock="wall")
        failure = _run_on_nodes(remote.for_nodes(max(counts) + 1), module_args, on_line, timeout_s)
        where = f" on {remote.label.split(' (')[0]}"
    short = [n for n in counts if len(results.get(n, [])) != n + 1]
    if failure or errors or short:
        detail = (errors or [failure or "a process printed no result"])[-1]
        raise MeasurementError(f"parameter-server training ({max(counts)} workers){where} failed: {detail}")
    return {n: results[n] for n in counts}


def _run_on_nodes(machines: RemoteHosts, module_args: list[str], on_line, timeout_s: float) -> str | None:
    """One process per node over ssh (rank i on node i); the failure in one line, or None."""
    try:
        launch_torchrun_over_ssh(
            targets=machines.targets, nproc_per_node=1, module=MODULE, module_args=module_args,
            master_addr=machines.rendezvous_addr(),
            master_port=machines.master_port or free_port(),
            env={**machines.env, "OMP_NUM_THREADS": "1"}, python=machines.python, workdir=machines.workdir,
            timeout_s=timeout_s, on_line=lambda _node, line: on_line(line), cpu_sets=machines.cpu_sets,
            rdzv_timeout_s=machines.comm_timeout_s, master_given=machines.master_addr is not None,
        )  # fmt: skip
    except MeasurementError as error:
        return str(error)
    return None
