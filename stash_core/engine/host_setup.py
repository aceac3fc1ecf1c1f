"""Before a profile on remote hosts: check every host; device, backend and threads from the first one."""

from __future__ import annotations

from stash_core.engine.progress import Reporter
from stash_core.errors import UsageError
from stash_core.launch.hosts import RemoteHosts, check_hosts, same_machine_warning, version_warnings
from stash_core.launch.multinode_preflight import check_master_address
from stash_core.spec import ProfileSpec
from stash_core.zoo_names import model_file


def settle_on_hosts(
    spec: ProfileSpec, remote: RemoteHosts, doc: dict, reporter: Reporter, warnings: list[str]
) -> int:
    """Check every host (reachable, python, torch, Stash), pick device, backend and threads from the
    first one, and return how many workers the single-machine reference R1 gets."""

    reporter.message(f"checking {len(remote.targets)} host(s): {', '.join(remote.host_names)}")
    infos = check_hosts(remote, files=files_of(spec))
    doc["hosts"] = [
        {key: info.get(key) for key in ("host", "hostname", "python_version", "torch_version",
                                        "stash_version", "cpu_count", "gpu_count", "gpu_status")}
        for info in infos
    ]  # fmt: skip
    warnings.extend(version_warnings(infos))
    # hosts over ssh that are one machine; the emulated cluster's nodes are, and say so themselves
    if spec.cluster != "emulated" and (one := same_machine_warning(infos)):
        warnings.append(one)
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
    across = len(remote.targets) > 1 and "network" in spec.stalls  # a run over the machines is planned
    if across and (remote.master_addr is not None or spec.cluster != "emulated"):
        # the default too (node 0's host name): an ssh_config alias resolves for ssh alone, and was found
        # out at the run across the machines, after the runs on one machine
        check_master_address(remote.targets[0], remote.python, remote.workdir, remote.rendezvous_addr(),
                             given=remote.master_addr is not None)  # fmt: skip
    capacity = remote.capacity(first, spec.device)
    reference_workers = spec.workers_total if capacity >= spec.workers_total else spec.workers_per_node
    if spec.threads_per_worker is None:
        cores = len(remote.cpu_sets[0]) if remote.cpu_sets else int(first.get("cpu_count") or 1)
        # the same threads in every run, so R0, R1 and R1n compare like with like
        spec.threads_per_worker = max(1, cores // max(reference_workers, spec.workers_per_node))
    if warning := shared_cores_warning(spec, remote, int(first.get("cpu_count") or 1)):
        warnings.append(warning)
    return reference_workers


def files_of(spec: ProfileSpec) -> tuple[str, ...]:
    """The files the workers on hosts over ssh read as given (from --workdir): a model file (FILE.py of
    FILE.py:FACTORY) and a script; none on the emulated cluster, whose nodes read this machine's files."""
    if spec.cluster == "emulated":
        return ()
    return tuple(name for name in (model_file(spec.model or ""), spec.script) if name)


def shared_cores_warning(spec: ProfileSpec, remote: RemoteHosts, cores: int) -> str | None:
    """The emulated cluster's nodes are namespaces of this machine: without `--split-cpus` they share its
    cores, and the workers of R1n that outnumber them compete for them, a cost that real machines would not
    have and that the network stall then holds."""
    spread = spec.workers_per_node * len(remote.targets)
    threads = spec.threads_per_worker or 1
    if remote.link is None or remote.cpu_sets or spec.device != "cpu" or spread * threads <= cores:
        return None
    return (
        f"the emulated cluster's {len(remote.targets)} nodes share this machine's {cores} cores: the "
        f"{spread} workers x {threads} thread(s) spread over them compete for those cores, and the network "
        "stall also holds that competition (stash cluster up --split-cpus gives each node cores of its own)"
    )
