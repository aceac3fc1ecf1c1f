"""What else ran on this machine during a launch: other processes' CPU time, the hypervisor's steal, the load.

A launch's workers, torchrun and the supervisor are all descendants of this process and have been waited for
when the launch ends, so their CPU time is in this process's RUSAGE_CHILDREN (or, for launches forked by the
warm starter, in what it reports: launch/warm_start.py). Whatever busy time the machine
counted beyond that (and beyond this process's own threads) belongs to other processes: that is the measured
"other load" a profile may blame a disagreement between its launches on. Linux only; elsewhere None.
"""

from __future__ import annotations

import os
import resource
import time
from dataclasses import asdict, dataclass

from stash_core.launch import warm_start

PROC_STAT = "/proc/stat"
# /proc/stat's cpu line: user nice system idle iowait irq softirq steal (guest time is inside user).
_BUSY_FIELDS = (0, 1, 2, 5, 6)
_STEAL_FIELD = 7


@dataclass(frozen=True)
class MachineLoad:
    """CPU time on this machine over one launch, in CPU-seconds, and the load average around it."""

    wall_s: float
    cores: int
    busy_cpu_s: float  # every process, this launch's included
    own_cpu_s: float  # this process and the launch's processes
    other_cpu_s: float  # busy minus own: other processes and the kernel's work for them
    steal_s: float  # time the hypervisor gave this machine's CPUs to someone else
    load_avg_start: float
    load_avg_end: float

    @property
    def other_cores(self) -> float:
        """Other processes' CPU time per second of the launch: how many cores they kept busy on average."""
        return (self.other_cpu_s + self.steal_s) / self.wall_s if self.wall_s > 0 else 0.0

    def to_dict(self) -> dict:
        return {**{key: round(value, 3) for key, value in asdict(self).items()}, "cores": self.cores}


def _cpu_jiffies() -> tuple[int, int] | None:
    try:
        with open(PROC_STAT, encoding="ascii") as stat:
            fields = [int(x) for x in stat.readline().split()[1:]]
    except (OSError, ValueError):
        return None
    busy = sum(fields[i] for i in _BUSY_FIELDS if i < len(fields))
    steal = fields[_STEAL_FIELD] if len(fields) > _STEAL_FIELD else 0
    return busy, steal


def _own_cpu_s() -> float:
    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime + warm_start.server_cpu_s()


def _load_avg() -> float:
    try:
        return os.getloadavg()[0]
    except OSError:
        return float("nan")


class LoadMeter:
    """start() before a launch and stop() after it (its processes waited for): the MachineLoad, or None
    where /proc/stat cannot be read."""

    def __init__(self) -> None:
        self._start: tuple[float, tuple[int, int] | None, float, float] | None = None

    def start(self) -> LoadMeter:
        self._start = (time.monotonic(), _cpu_jiffies(), _own_cpu_s(), _load_avg())
        return self

    def stop(self) -> MachineLoad | None:
        if self._start is None:
            return None
        started_s, jiffies, own_s, load_start = self._start
        end = _cpu_jiffies()
        if jiffies is None or end is None:
            return None
        tick_s = 1.0 / os.sysconf("SC_CLK_TCK")
        busy_s = (end[0] - jiffies[0]) * tick_s
        own_cpu_s = _own_cpu_s() - own_s
        return MachineLoad(
            wall_s=time.monotonic() - started_s,
            cores=os.cpu_count() or 1,
            busy_cpu_s=busy_s,
            own_cpu_s=own_cpu_s,
            other_cpu_s=max(0.0, busy_s - own_cpu_s),
            steal_s=(end[1] - jiffies[1]) * tick_s,
            load_avg_start=load_start,
            load_avg_end=_load_avg(),
        )
