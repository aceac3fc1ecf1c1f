"""Launch one run of a worker module, here with torchrun or on remote machines over ssh.

Either way the job travels on the command line (see measure/worker_job.py), every stdout line of every
machine goes to on_line, and every process the run started is ended before this returns.
"""

from __future__ import annotations

import os
from collections.abc import Callable

from stash_core import PACKAGE_PARENT, SAFE_PATH_VALUE
from stash_core.errors import MeasurementError
from stash_core.launch.hang_watch import HangWatch
from stash_core.launch.hosts import RemoteHosts
from stash_core.launch.local import run_local, torchrun_argv
from stash_core.launch.multinode import free_port, launch_torchrun_over_ssh
from stash_core.launch.torchrun import LOOPBACK
from stash_core.launch.torchrun_failure import root_cause
from stash_core.measure.worker_job import WorkerJob, encode_worker_job


def run_workers(
    module: str,
    job: WorkerJob,
    nproc_per_node: int,
    nodes: int,
    remote: RemoteHosts | None,
    on_line: Callable[[str], None],
    timeout_s: float,
    env: dict[str, str],
    preexec: Callable[[], None] | None = None,
    watch: HangWatch | None = None,
) -> str | None:
    """Run module with `job` on `nodes` machines x nproc_per_node workers; the failure reason or None.

    Without `remote` the run is local (nodes must be 1). With it, node i is remote.targets[i]; one
    machine alone uses a loopback rendezvous. Raises UsageError for what the user must fix (a busy
    master port, no python/torch/directory on a host) and KeyboardInterrupt after cleaning up.
    """

    module_args = encode_worker_job(job)
    on_cpu = job.get("device") == "cpu"
    if remote is None:
        if nodes != 1:
            raise MeasurementError(f"a local run has one machine, not {nodes}")
        failure = run_local(
            torchrun_argv(nproc_per_node, module, module_args, on_cpu=on_cpu),
            on_line, timeout_s, env=env, preexec=preexec, watch=watch,
        )  # fmt: skip
        return None if not failure else root_cause(failure)

    machines = remote.for_nodes(nodes)
    if len(machines.targets) < nodes:
        raise MeasurementError(
            f"a run over {nodes} machines needs {nodes} hosts, got {len(machines.targets)}"
        )
    master_addr = LOOPBACK if nodes == 1 else machines.rendezvous_addr()
    try:
        launch_torchrun_over_ssh(
            targets=machines.targets,
            nproc_per_node=nproc_per_node,
            module=module,
            module_args=module_args,
            master_addr=master_addr,
            master_port=machines.master_port or free_port(),
            # A host imports Stash from its --workdir (a checkout there): its current folder stays on path.
            env={**machines.env, **{key: value for key, value in env.items() if key not in REMOTE_OWN}},
            python=machines.python,
            workdir=machines.workdir,
            timeout_s=timeout_s,
            on_line=lambda node, line: on_line(line),
            cpu_sets=machines.cpu_sets,
            rdzv_timeout_s=machines.comm_timeout_s,
            on_cpu=on_cpu,
            master_given=machines.master_addr is not None,  # else node 0's host name: said how to give one
        )
    except MeasurementError as error:
        return str(error)
    return None


REMOTE_OWN = ("PYTHONPATH", "PYTHONSAFEPATH")  # what each remote host sets for itself


def worker_env(threads_per_worker: int) -> dict[str, str]:
    """Environment of a worker: fixed threads, unbuffered output, this checkout importable, and no current
    folder on sys.path of torchrun and its workers (SAFE_PATH_VALUE); a user's own PYTHONSAFEPATH is kept."""
    return {
        "OMP_NUM_THREADS": str(threads_per_worker),
        "PYTHONPATH": os.pathsep.join(filter(None, [PACKAGE_PARENT, os.environ.get("PYTHONPATH")])),
        "PYTHONUNBUFFERED": "1",
        "PYTHONSAFEPATH": os.environ.get("PYTHONSAFEPATH") or SAFE_PATH_VALUE,
    }
