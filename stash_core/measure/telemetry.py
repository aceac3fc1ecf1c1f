"""Machine utilisation sampled in a background thread while a phase runs.

``TelemetrySampler`` reads CPU, memory, disk and network counters (psutil) and, when NVML sees
GPUs, the GPU metrics of ``stash_core.measure.nvml.sample_gpus`` every ``interval_s``. Rates (MB/s, with
MB = 1e6 bytes; percentages) are counter deltas divided by the actual time between two samples,
so every value describes the interval that ends at its ``t_s``. ``stop()`` returns the columnar
"telemetry" object of the result file:

    {"interval_s": 0.5, "gpu_status": "no GPU: ...", "t_s": [0.5, 1.0, ...],
     "metrics": {"cpu_util_pct": [..], "disk_read_mbps": [..], ...},
     "events": [{"t_s": 0.7, "label": "warmup done"}]}

Every metric array is aligned with ``t_s``; a metric missing at some sample holds None there.
"""

from __future__ import annotations

import glob
import logging
import os
import threading
import time
from dataclasses import dataclass
from types import TracebackType
from typing import Self

import psutil

from stash_core.errors import UsageError
from stash_core.measure import nvml

_log = logging.getLogger(__name__)
_MB_BYTES = 1e6
# A final sample at stop() needs a window at least this long to give a meaningful rate.
_MIN_FINAL_WINDOW_S = 0.05


@dataclass
class _Counters:
    """Raw cumulative counters at one instant; None where the OS did not give them."""

    time_s: float
    cpu_busy_total_s: list[tuple[float, float]] | None  # per logical CPU: (busy, total) seconds
    disk_read_write_bytes: tuple[int, int] | None
    net_rx_tx_bytes: tuple[int, int] | None


def _cpu_busy_total(times: object) -> tuple[float, float]:
    # As psutil.cpu_percent does: guest time is already inside user/nice on Linux, and
    # idle + iowait count as not busy.
    total_s = sum(times)  # type: ignore[arg-type]
    total_s -= getattr(times, "guest", 0.0) + getattr(times, "guest_nice", 0.0)
    busy_s = total_s - times.idle - getattr(times, "iowait", 0.0)  # type: ignore[attr-defined]
    return busy_s, total_s


def _read_cpu() -> list[tuple[float, float]] | None:
    try:
        return [_cpu_busy_total(times) for times in psutil.cpu_times(percpu=True)]
    except Exception:  # noqa: BLE001 - a metric the OS cannot give is just missing
        return None


def _whole_disks_to_count() -> set[str] | None:
    """Block devices whose I/O we add up, or None to use psutil's own total (non-Linux).

    Partitions, memory-backed devices (zram, ram) and devices that sit under another device
    (LVM, RAID, dm-crypt members, which have "holders") are left out so that one read counts
    once. Loop devices are kept: a data set on a loop-mounted image shows up only there when the
    backing file is cached.
    """
    if not os.path.isdir("/sys/block"):
        return None
    disks = set()
    for path in glob.glob("/sys/block/*"):
        name = os.path.basename(path)
        if name.startswith(("zram", "ram")):
            continue
        if glob.glob(os.path.join(path, "holders", "*")) or glob.glob(
            os.path.join(path, "*", "holders", "*")
        ):
            continue
        disks.add(name.replace("!", "/"))  # /sys/block writes "/" in device names as "!"
    return disks


def _read_disk(disks: set[str] | None) -> tuple[int, int] | None:
    try:
        if disks is None:
            total = psutil.disk_io_counters(perdisk=False)
            return (total.read_bytes, total.write_bytes) if total is not None else None
        per_disk = psutil.disk_io_counters(perdisk=True)
        if not per_disk:
            return None
        counted = [counters for name, counters in per_disk.items() if name in disks]
        return sum(c.read_bytes for c in counted), sum(c.write_bytes for c in counted)
    except Exception:  # noqa: BLE001 - a metric the OS cannot give is just missing
        return None


def _read_net() -> tuple[int, int] | None:
    # Loopback is left out: traffic between workers of one machine is interconnect, not network.
    try:
        per_nic = psutil.net_io_counters(pernic=True)
        if not per_nic:
            return None
        counted = [counters for name, counters in per_nic.items() if name != "lo"]
        return sum(c.bytes_recv for c in counted), sum(c.bytes_sent for c in counted)
    except Exception:  # noqa: BLE001 - a metric the OS cannot give is just missing
        return None


def _mem_used_bytes() -> float | None:
    # total - available: memory the processes hold, not counting the reclaimable page cache.
    try:
        memory = psutil.virtual_memory()
        return float(memory.total - memory.available)
    except Exception:  # noqa: BLE001 - a metric the OS cannot give is just missing
        return None


def _rate_mbps(now: int, before: int, elapsed_s: float) -> float | None:
    if now < before:  # counter reset or a device went away
        return None
    return (now - before) / _MB_BYTES / elapsed_s


def _pct(busy_delta_s: float, total_delta_s: float) -> float | None:
    if total_delta_s <= 0:
        return None
    return min(100.0, max(0.0, 100.0 * busy_delta_s / total_delta_s))


def _round(value: float | None) -> float | None:
    return round(value, 3) if value is not None else None


class TelemetrySampler:
    """Samples machine utilisation every ``interval_s`` in a daemon thread between start() and stop().

    Also a context manager: ``with TelemetrySampler() as sampler: ...`` then ``sampler.result``.
    """

    def __init__(self, interval_s: float = 0.5) -> None:
        if not interval_s > 0:
            raise UsageError(f"telemetry interval must be a positive number of seconds, got {interval_s}")
        self.interval_s = float(interval_s)
        self.result: dict | None = None
        self._stop_event = threading.Event()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self._start_s: float | None = None
        self._disks: set[str] | None = None
        self._gpu_ok = False
        self._gpu_status = ""
        self._previous: _Counters | None = None
        self._t_s: list[float] = []
        self._metrics: dict[str, list[float | None]] = {}
        self._events: list[dict] = []

    def start(self) -> Self:
        """Take the baseline counters and launch the sampling thread."""
        if self._thread is not None:
            raise RuntimeError("TelemetrySampler.start() called twice")
        self._gpu_ok, self._gpu_status = nvml.gpu_status()
        self._disks = _whole_disks_to_count()
        if self._gpu_ok:
            nvml.sample_gpus()  # primes the NVLink counter baseline
        self._previous = self._read_counters()
        self._start_s = self._previous.time_s
        self._thread = threading.Thread(target=self._run, name="stash-telemetry", daemon=True)
        self._thread.start()
        return self

    def mark(self, label: str) -> None:
        """Record an event at the current time; returned under "events" by stop()."""
        now_s = time.monotonic()
        t_s = now_s - self._start_s if self._start_s is not None else 0.0
        with self._lock:
            self._events.append({"t_s": round(t_s, 3), "label": str(label)})

    def stop(self) -> dict:
        """Stop sampling (promptly) and return the columnar telemetry; later calls return the same."""
        if self.result is not None:
            return self.result
        if self._thread is None:
            raise RuntimeError("TelemetrySampler.stop() called before start()")
        self._stop_event.set()
        self._thread.join(timeout=5.0)
        # A last sample covers the tail since the previous one, so a phase shorter than the
        # interval still gets one row.
        previous = self._previous
        tail_s = time.monotonic() - previous.time_s if previous is not None else 0.0
        if (
            not self._thread.is_alive()
            and previous is not None
            and (tail_s >= _MIN_FINAL_WINDOW_S or not self._t_s)
        ):
            self._sample()
        with self._lock:
            self.result = {
                "interval_s": self.interval_s,
                "gpu_status": self._gpu_status,
                "t_s": list(self._t_s),
                "metrics": {name: list(values) for name, values in self._metrics.items()},
                "events": list(self._events),
            }
        return self.result

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.stop()

    def _run(self) -> None:
        next_s = self._start_s + self.interval_s
        while not self._stop_event.wait(max(0.0, next_s - time.monotonic())):
            try:
                self._sample()
            except Exception:  # noqa: BLE001 - telemetry must never take a measurement down
                _log.debug("telemetry sample skipped", exc_info=True)
            next_s += self.interval_s
            now_s = time.monotonic()
            if next_s <= now_s:  # fell behind (e.g. a slow NVML call): skip, do not burst
                next_s = now_s + self.interval_s

    def _read_counters(self) -> _Counters:
        cpu = _read_cpu()
        now_s = time.monotonic()
        return _Counters(now_s, cpu, _read_disk(self._disks), _read_net())

    def _sample(self) -> None:
        counters = self._read_counters()
        previous = self._previous
        elapsed_s = counters.time_s - previous.time_s
        if elapsed_s <= 0:
            return
        values: dict[str, float | None] = {}
        if counters.cpu_busy_total_s is not None and previous.cpu_busy_total_s is not None:
            if len(counters.cpu_busy_total_s) == len(previous.cpu_busy_total_s):  # no CPU hot-plug
                pairs = list(zip(counters.cpu_busy_total_s, previous.cpu_busy_total_s, strict=True))
                busy_s = sum(now[0] - before[0] for now, before in pairs)
                total_s = sum(now[1] - before[1] for now, before in pairs)
                values["cpu_util_pct"] = _pct(busy_s, total_s)
                for cpu_index, (now, before) in enumerate(pairs):
                    values[f"cpu{cpu_index}_util_pct"] = _pct(now[0] - before[0], now[1] - before[1])
        values["mem_used_bytes"] = _mem_used_bytes()
        if counters.disk_read_write_bytes is not None and previous.disk_read_write_bytes is not None:
            (read_now, write_now), (read_before, write_before) = (
                counters.disk_read_write_bytes,
                previous.disk_read_write_bytes,
            )
            values["disk_read_mbps"] = _rate_mbps(read_now, read_before, elapsed_s)
            values["disk_write_mbps"] = _rate_mbps(write_now, write_before, elapsed_s)
        if counters.net_rx_tx_bytes is not None and previous.net_rx_tx_bytes is not None:
            (rx_now, tx_now), (rx_before, tx_before) = counters.net_rx_tx_bytes, previous.net_rx_tx_bytes
            values["net_rx_mbps"] = _rate_mbps(rx_now, rx_before, elapsed_s)
            values["net_tx_mbps"] = _rate_mbps(tx_now, tx_before, elapsed_s)
        if self._gpu_ok:
            values.update(nvml.sample_gpus())
        self._previous = counters
        self._append(counters.time_s - self._start_s, values)

    def _append(self, t_s: float, values: dict[str, float | None]) -> None:
        with self._lock:
            count = len(self._t_s)
            for name, value in values.items():
                column = self._metrics.get(name)
                if column is None:  # a metric first seen now: earlier samples did not have it
                    column = self._metrics[name] = [None] * count
                column.append(_round(value))
            for column in self._metrics.values():
                if len(column) == count:  # missing at this sample
                    column.append(None)
            self._t_s.append(round(t_s, 3))
