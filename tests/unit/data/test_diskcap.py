"""Disk read cap with the block-I/O cgroup: detection of unsupported cases and a real capped read."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from stash_core.data import diskcap
from stash_core.data.diskcap import DiskReadCap, disk_cap_unsupported_reason
from stash_core.data.pagecache import evict, resident_fraction
from stash_core.errors import UsageError

FILE_BYTES = 64 * 1_000_000

# Waits for "go" on stdin (so the parent can move it into the cgroup first), then reads the file with
# buffered 1 MiB reads and prints the seconds the read took.
_READER = """
import sys, time
sys.stdin.readline()
started_s = time.monotonic()
with open(sys.argv[1], "rb") as handle:
    while handle.read(1 << 20):
        pass
print(time.monotonic() - started_s, flush=True)
"""


def _tmpfs_dir() -> Path | None:
    for _, mount_point, fs_type, _ in diskcap._mounts():
        if fs_type == "tmpfs" and mount_point.startswith(("/dev/shm", "/run")):
            return Path(mount_point)
    return None


def test_memory_file_system_is_reported_unsupported() -> None:
    tmpfs = _tmpfs_dir()
    if tmpfs is None:
        pytest.skip("no writable tmpfs mount on this machine")
    reason = disk_cap_unsupported_reason(tmpfs)
    assert reason is not None and "tmpfs" in reason
    with pytest.raises(UsageError, match="tmpfs"), DiskReadCap(tmpfs, read_mbps=10):
        pass


def test_not_root_is_reported_unsupported(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    reason = disk_cap_unsupported_reason(tmp_path)
    assert reason is not None and "root" in reason


def test_missing_path_is_reported_unsupported(tmp_path: Path) -> None:
    reason = disk_cap_unsupported_reason(tmp_path / "absent")
    assert reason is not None and "does not exist" in reason


def test_cap_must_be_positive(tmp_path: Path) -> None:
    with pytest.raises(UsageError):
        DiskReadCap(tmp_path, read_mbps=0)


def test_partition_maps_to_its_whole_disk(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # A sysfs look-alike: /sys/dev/block/MAJ:MIN links into the device tree, partitions sit inside disks.
    disk = tmp_path / "devices" / "block" / "sda"
    (disk / "sda1").mkdir(parents=True)
    (disk / "dev").write_text("8:0\n")
    (disk / "sda1" / "dev").write_text("8:1\n")
    (disk / "sda1" / "partition").write_text("1\n")
    links = tmp_path / "dev" / "block"
    links.mkdir(parents=True)
    (links / "8:0").symlink_to(disk)
    (links / "8:1").symlink_to(disk / "sda1")
    monkeypatch.setattr(diskcap, "_SYS_DEV_BLOCK", links)
    assert diskcap._whole_disk("8:1") == "8:0"
    assert diskcap._whole_disk("8:0") == "8:0"


def _write_cold_file(path: Path) -> Path:
    with open(path, "wb") as handle:
        for _ in range(FILE_BYTES // 1_000_000):
            handle.write(os.urandom(1_000_000))
        handle.flush()
        os.fsync(handle.fileno())  # clean pages, so eviction works
    return path


def _capped_read_s(path: Path, read_mbps: float) -> float:
    evict([path])
    assert resident_fraction([path]) < 0.2, "the file must be cold before a capped read is measured"
    with DiskReadCap(path, read_mbps=read_mbps) as cap:
        reader = subprocess.Popen(
            [sys.executable, "-c", _READER, str(path)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        try:
            cap.add_pid(reader.pid)
            assert reader.pid in cap.pids()
            stdout, _ = reader.communicate("go\n", timeout=120)
        finally:
            if reader.poll() is None:
                reader.kill()
                reader.wait()
        cgroup_dir = cap.cgroup_dir
        assert cgroup_dir is not None and cgroup_dir.name == f"stash-diskcap-{os.getpid()}"
    assert reader.returncode == 0
    assert not cgroup_dir.exists()  # removed on exit
    return float(stdout)


def test_lower_cap_reads_slower(tmp_path: Path) -> None:
    reason = disk_cap_unsupported_reason(tmp_path)
    if reason is not None:
        pytest.skip(f"disk read cap unsupported here: {reason}")
    path = _write_cold_file(tmp_path / "data.bin")
    slow_s = _capped_read_s(path, read_mbps=20)
    fast_s = _capped_read_s(path, read_mbps=80)
    assert slow_s > fast_s


def test_leftover_processes_go_back_to_the_root_cgroup(tmp_path: Path) -> None:
    reason = disk_cap_unsupported_reason(tmp_path)
    if reason is not None:
        pytest.skip(f"disk read cap unsupported here: {reason}")
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        with DiskReadCap(tmp_path, read_mbps=50) as cap:
            cap.add_pid(sleeper.pid)
            cgroup_dir = cap.cgroup_dir
            assert cgroup_dir is not None
            assert cap.pids() == [sleeper.pid]
        # The still-running process left the capped cgroup, which is gone.
        assert not cgroup_dir.exists()
        assert sleeper.poll() is None
        cgroup_lines = Path(f"/proc/{sleeper.pid}/cgroup").read_text()
        assert "stash-diskcap" not in cgroup_lines
    finally:
        sleeper.kill()
        sleeper.wait()
