"""Emulate a slower volume: cap read throughput of the block device under a path with the block-I/O cgroup.

cgroup v1 (blkio.throttle.read_bps_device) or v2 (io.max), whichever this kernel lets us write. The cap
applies to processes placed in the cgroup (and children they fork later), never to the whole machine."""

from __future__ import annotations

import errno
import os
import time
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Self

from stash_core.errors import UsageError
from stash_core.terminal import one_line

_SYS_DEV_BLOCK = Path("/sys/dev/block")
_PROBE_LIMIT_BPS = 100_000_000
_MEMORY_BACKED_FS = {"tmpfs", "ramfs", "devtmpfs", "proc", "sysfs"}
_NETWORK_FS = {"nfs", "nfs4", "cifs", "smb3", "fuse.sshfs", "9p", "virtiofs", "ceph", "glusterfs"}


@dataclass(frozen=True)
class _Controller:
    version: int  # 1 = blkio (v1), 2 = io (v2)
    root: Path  # root of the hierarchy: where processes go back to

    def limit_file(self, cgroup_dir: Path) -> Path:
        return cgroup_dir / ("blkio.throttle.read_bps_device" if self.version == 1 else "io.max")

    def limit_line(self, device: str, read_bps: int) -> str:
        return f"{device} {read_bps}" if self.version == 1 else f"{device} rbps={read_bps}"


def _mounts() -> list[tuple[str, str, str, str]]:
    """(source, mount point, fs type, options) from /proc/self/mounts."""
    rows = []
    for line in Path("/proc/self/mounts").read_text().splitlines():
        fields = line.split()
        if len(fields) >= 4:
            rows.append((fields[0], fields[1].replace("\\040", " "), fields[2], fields[3]))
    return rows


def _mount_of(path: Path) -> tuple[str, str, str]:
    """(source, mount point, fs type) of the deepest mount containing `path`."""
    resolved = str(path.resolve())
    best = ("", "/", "")
    for source, mount_point, fs_type, _ in _mounts():
        inside = resolved == mount_point or resolved.startswith(mount_point.rstrip("/") + "/")
        if inside and len(mount_point) >= len(best[1]):
            best = (source, mount_point, fs_type)
    return best


def _whole_disk(device: str) -> str:
    """MAJ:MIN of the whole disk for a partition's MAJ:MIN (throttling is per whole disk)."""
    node = (_SYS_DEV_BLOCK / device).resolve()
    if (node / "partition").exists():
        return (node.parent / "dev").read_text().strip()
    return device


def _block_device_of(path: Path) -> tuple[str | None, str]:
    """(MAJ:MIN of the whole disk holding `path`, or None, and why not)."""
    st_dev = os.stat(path).st_dev
    major, minor = os.major(st_dev), os.minor(st_dev)
    source, mount_point, fs_type = _mount_of(path)
    if major == 0:
        # Anonymous device: tmpfs, overlay, network fs, or btrfs (subvolumes); try the mount's source.
        if fs_type in _MEMORY_BACKED_FS:
            return None, f"{one_line(path)} is on {fs_type} (memory), not on a block device"
        if fs_type == "overlay":
            where = "an overlay file system (container root); use a bind-mounted volume"
            return None, f"{one_line(path)} is on {where}"
        if fs_type in _NETWORK_FS:
            where = f"a network file system ({fs_type}), not on a local block device"
            return None, f"{one_line(path)} is on {where}"
        if source.startswith("/dev/") and os.path.exists(source):
            rdev = os.stat(source).st_rdev
            major, minor = os.major(rdev), os.minor(rdev)
        else:
            fs_name = fs_type or "an unknown file system"
            return None, f"{one_line(path)} is on {fs_name} at {mount_point}, not on a block device"
    device = f"{major}:{minor}"
    if not (_SYS_DEV_BLOCK / device).exists():
        return None, f"{one_line(path)} is on device {device} which is not a block device ({fs_type})"
    return _whole_disk(device), ""


def _candidate_controllers() -> list[_Controller]:
    controllers = []
    for _, mount_point, fs_type, options in _mounts():
        if fs_type == "cgroup" and "blkio" in options.split(","):
            controllers.append(_Controller(1, Path(mount_point)))
    for _, mount_point, fs_type, _ in _mounts():
        if fs_type == "cgroup2":
            controllers.append(_Controller(2, Path(mount_point)))
    return controllers


def _prepare_controller(controller: _Controller) -> None:
    """v2 needs the io controller enabled for children of the root; v1 needs nothing."""
    if controller.version == 2:
        available = (controller.root / "cgroup.controllers").read_text().split()
        if "io" not in available:
            raise OSError(errno.ENOTSUP, "io controller not available in this cgroup2 hierarchy")
        if "io" not in (controller.root / "cgroup.subtree_control").read_text().split():
            (controller.root / "cgroup.subtree_control").write_text("+io")


def _remove_cgroup(controller: _Controller, cgroup_dir: Path) -> None:
    """Move any processes left back to the root, then remove the (then empty) cgroup."""
    for _ in range(50):
        if not cgroup_dir.exists():
            return
        try:
            pids = (cgroup_dir / "cgroup.procs").read_text().split()
        except OSError:
            pids = []
        for pid in pids:
            try:
                (controller.root / "cgroup.procs").write_text(pid)
            except OSError:
                pass  # exited meanwhile
        try:
            cgroup_dir.rmdir()
            return
        except OSError:
            time.sleep(0.02)  # a process still exiting keeps the cgroup busy for a moment


def _probe(controller: _Controller, device: str) -> str:
    """'' when a read limit for `device` can be set under `controller`, else why not."""
    probe_dir = controller.root / f"stash-diskcap-probe-{os.getpid()}"
    try:
        _prepare_controller(controller)
        probe_dir.mkdir(exist_ok=True)
        controller.limit_file(probe_dir).write_text(controller.limit_line(device, _PROBE_LIMIT_BPS))
        return ""
    except OSError as exc:
        return f"cgroup v{controller.version} at {controller.root}: {exc.strerror or exc}"
    finally:
        _remove_cgroup(controller, probe_dir)


def _find_controller(path: Path) -> tuple[_Controller | None, str, str]:
    """(working controller, device MAJ:MIN, reason when none works)."""
    if not path.exists():
        return None, "", f"{one_line(path)} does not exist"
    if os.geteuid() != 0:
        uid = os.geteuid()
        return None, "", f"capping disk reads needs root to create a block-I/O cgroup (running as uid {uid})"
    device, reason = _block_device_of(path)
    if device is None:
        return None, "", reason
    controllers = _candidate_controllers()
    if not controllers:
        return None, device, "no block-I/O cgroup controller is mounted (neither v1 blkio nor cgroup2)"
    failures = []
    for controller in controllers:
        failure = _probe(controller, device)
        if not failure:
            return controller, device, ""
        failures.append(failure)
    return None, device, f"cannot set a read limit on device {device}: " + "; ".join(failures)


def disk_cap_unsupported_reason(path: Path) -> str | None:
    """None when a read cap can be applied to the block device holding `path`, else a one-line reason."""
    _, _, reason = _find_controller(Path(path))
    return reason or None


class DiskReadCap:
    """Context manager: a cgroup `stash-diskcap-<pid>` whose reads from `path`'s device are capped
    at `read_mbps` (1 MB/s = 1e6 bytes/s). Put processes in with `add_pid`."""

    def __init__(self, path: Path, read_mbps: float) -> None:
        if not read_mbps > 0:
            raise UsageError(f"disk read cap must be > 0 MB/s (got {read_mbps})")
        self.path = Path(path)
        self.read_mbps = read_mbps
        self.read_bps = max(1, int(read_mbps * 1e6))
        self.device = ""
        self.cgroup_dir: Path | None = None
        self._controller: _Controller | None = None

    def __enter__(self) -> Self:
        controller, device, reason = _find_controller(self.path)
        if controller is None:
            raise UsageError(f"cannot cap disk reads: {reason}")
        cgroup_dir = controller.root / f"stash-diskcap-{os.getpid()}"
        try:
            _prepare_controller(controller)
            cgroup_dir.mkdir(exist_ok=True)
            self._controller, self.device, self.cgroup_dir = controller, device, cgroup_dir
            controller.limit_file(cgroup_dir).write_text(controller.limit_line(device, self.read_bps))
        except OSError as exc:
            self._cleanup()
            raise UsageError(f"cannot cap disk reads of device {device}: {exc.strerror or exc}") from exc
        return self

    def add_pid(self, pid: int) -> None:
        """Move process `pid` (all its threads) into the capped cgroup; children it forks later inherit it."""
        if self.cgroup_dir is None:
            raise RuntimeError("DiskReadCap.add_pid called outside its `with` block")
        try:
            (self.cgroup_dir / "cgroup.procs").write_text(str(pid))
        except OSError as exc:
            raise UsageError(f"cannot move process {pid} under the disk cap: {exc.strerror or exc}") from exc

    def pids(self) -> list[int]:
        """Processes currently under the cap."""
        if self.cgroup_dir is None:
            return []
        return [int(p) for p in (self.cgroup_dir / "cgroup.procs").read_text().split()]

    def _cleanup(self) -> None:
        if self._controller is not None and self.cgroup_dir is not None:
            _remove_cgroup(self._controller, self.cgroup_dir)
        self.cgroup_dir = None

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, traceback: TracebackType | None
    ) -> None:
        self._cleanup()
