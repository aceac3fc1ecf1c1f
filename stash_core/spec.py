"""What to run: the validated configuration of one profile."""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass, field
from pathlib import Path

from stash_core.errors import UsageError
from stash_core.units import STALLS

DEFAULT_TARGET_RELATIVE_CI = 0.02
DEFAULT_MAX_ITERATIONS = 2000
DEFAULT_MAX_PHASE_S = 120.0


@dataclass
class ProfileSpec:
    model: str
    batch_size: int
    workers_per_node: int = 1
    nodes: int = 1
    stalls: list[str] = field(default_factory=lambda: list(STALLS))
    dataset: str | None = None
    synthetic_images: int | None = None
    dataset_images: int | None = None
    loader_workers: int = 2
    iterations: str = "auto"
    device: str = "auto"
    backend: str | None = None
    instance: str | None = None
    threads_per_worker: int | None = None
    disk_read_mbps: float | None = None
    input_shape: list[int] | None = None
    num_classes: int | None = None
    image_px: int = 256
    target_relative_ci: float = DEFAULT_TARGET_RELATIVE_CI
    max_iterations: int = DEFAULT_MAX_ITERATIONS
    max_phase_s: float = DEFAULT_MAX_PHASE_S
    hosts: list[str] = field(default_factory=list)
    seed: int = 0
    # Several machines: named hosts over ssh, or the emulated cluster ("emulated"). Only the key's path
    # is kept, never its contents.
    ssh_user: str | None = None
    ssh_key: str | None = None
    remote_python: str | None = None
    remote_workdir: str | None = None
    cluster: str | None = None
    cluster_bandwidth: str | None = None  # rate set on the emulated links for this profile, e.g. "200mbit"
    master_addr: str | None = None
    master_port: int | None = None
    comm_timeout_s: int = 60  # rendezvous and process-group timeout across machines (seconds)
    probes: bool = True  # bandwidth/latency probe after R1 and R1n

    def to_dict(self) -> dict:
        return asdict(self)

    @property
    def workers_total(self) -> int:
        return self.workers_per_node * self.nodes

    @property
    def fixed_iterations(self) -> int | None:
        return None if self.iterations == "auto" else int(self.iterations)

    @property
    def remote(self) -> bool:
        """Runs go to other machines over ssh (named hosts or the emulated cluster)."""
        return bool(self.hosts) or self.cluster is not None

    @property
    def real_data(self) -> bool:
        return self.dataset is not None or self.synthetic_images is not None


def parse_stalls(text: str) -> list[str]:
    names = [part.strip().lower() for part in text.split(",") if part.strip()]
    aliases = {"cpu-prep": "cpu", "prep": "cpu", "fetch": "disk", "net": "network"}
    names = [aliases.get(name, name) for name in names]
    unknown = [name for name in names if name not in STALLS]
    if unknown or not names:
        raise UsageError(
            f"--stalls: unknown stall {', '.join(unknown) or '(empty)'}; choose from {', '.join(STALLS)}"
        )
    return [s for s in STALLS if s in names]


def parse_iterations(text: str) -> str:
    if text == "auto":
        return text
    if not text.isdigit() or int(text) < 2:
        raise UsageError(f"--iterations must be 'auto' or an integer >= 2, got {text!r}")
    return str(int(text))


def usable_cpu_count() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def validate(spec: ProfileSpec, cuda_devices: int) -> None:
    """Check what can be checked before launching anything; raise UsageError with one line."""
    if spec.batch_size <= 0:
        raise UsageError(f"--batch-size must be a positive integer, got {spec.batch_size}")
    if spec.workers_per_node <= 0:
        raise UsageError(f"--workers must be a positive integer, got {spec.workers_per_node}")
    if spec.nodes <= 0:
        raise UsageError(f"--nodes must be a positive integer, got {spec.nodes}")
    if spec.loader_workers < 0:
        raise UsageError(f"--loader-workers must be >= 0, got {spec.loader_workers}")
    if spec.dataset and spec.synthetic_images:
        raise UsageError("give either --dataset or --synthetic-images, not both")
    if spec.synthetic_images is not None and spec.synthetic_images <= 0:
        raise UsageError(f"--synthetic-images must be positive, got {spec.synthetic_images}")
    if spec.dataset is not None and not Path(spec.dataset).is_dir():
        raise UsageError(f"--dataset {spec.dataset}: no such directory")
    if spec.disk_read_mbps is not None and spec.disk_read_mbps <= 0:
        raise UsageError(f"--disk-read-mbps must be positive, got {spec.disk_read_mbps}")
    if spec.device not in ("auto", "cpu", "cuda"):
        raise UsageError(f"--device must be auto, cpu or cuda, got {spec.device!r}")
    validate_machines(spec)
    if spec.target_relative_ci <= 0 or spec.target_relative_ci >= 1:
        raise UsageError("--target-ci must be a fraction between 0 and 1 (e.g. 0.02 for 2%)")
    if spec.max_phase_s <= 0 or spec.max_iterations < 2:
        raise UsageError("--max-phase-seconds must be positive and --max-iterations at least 2")
    if spec.remote:
        return  # devices and cores are those of the hosts, checked once they answer
    if spec.device == "cuda" and cuda_devices == 0:
        raise UsageError("--device cuda: no CUDA device is visible on this machine")
    if spec.device == "cuda" and spec.workers_per_node > cuda_devices:
        raise UsageError(
            f"--workers {spec.workers_per_node}: this machine has {cuda_devices} GPU(s); one worker per GPU"
        )
    if spec.device == "cpu":
        cores = usable_cpu_count()
        if spec.workers_per_node > cores:
            raise UsageError(
                f"--workers {spec.workers_per_node}: this machine has {cores} usable CPU core(s); "
                "a CPU worker needs at least one"
            )


def validate_machines(spec: ProfileSpec) -> None:
    """The multi-machine options: consistent with --nodes, and no option that needs one machine."""
    if spec.hosts and spec.cluster is not None:
        raise UsageError("give either --hosts or --cluster, not both")
    if spec.cluster is not None and spec.cluster != "emulated":
        raise UsageError(f"--cluster {spec.cluster!r}: the only cluster kind is 'emulated'")
    if spec.cluster_bandwidth is not None and spec.cluster is None:
        raise UsageError("--cluster-bandwidth applies to --cluster emulated only")
    if spec.hosts and len(spec.hosts) != spec.nodes:
        raise UsageError(
            f"--hosts names {len(spec.hosts)} host(s) for --nodes {spec.nodes}; give one per node"
        )
    if spec.nodes > 1 and not spec.remote:
        raise UsageError(f"--nodes {spec.nodes}: say which machines with --hosts or --cluster emulated")
    if spec.remote and spec.disk_read_mbps is not None:
        raise UsageError(
            "--disk-read-mbps caps this machine's disk; it cannot be used with --hosts or --cluster"
        )
    if not spec.remote and (spec.ssh_user or spec.ssh_key or spec.remote_python or spec.remote_workdir):
        raise UsageError("--ssh-user, --ssh-key, --python and --workdir need --hosts (or --cluster)")


def resolve_device(spec: ProfileSpec, cuda_devices: int) -> None:
    """Fill in device, backend and threads so that every run of the profile uses the same.

    On remote machines this waits for the hosts to answer (profiler.settle_on_hosts)."""
    if spec.remote:
        return
    if spec.device == "auto":
        spec.device = "cuda" if cuda_devices > 0 else "cpu"
    if spec.backend is None:
        spec.backend = "nccl" if spec.device == "cuda" else "gloo"
    if spec.threads_per_worker is None:
        # Same thread count in R0 and R1 so that they compare like with like.
        spec.threads_per_worker = max(1, usable_cpu_count() // spec.workers_per_node)


def parse_hosts(text: str | None) -> list[str]:
    """--hosts a,b,c -> ["a", "b", "c"] (each one is validated when its ssh target is made)."""
    if not text:
        return []
    hosts = [part.strip() for part in text.split(",")]
    if any(not host for host in hosts):
        raise UsageError(f"--hosts {text!r}: an empty host name")
    return hosts


def cuda_device_count() -> int:
    import torch

    return torch.cuda.device_count() if torch.cuda.is_available() else 0
