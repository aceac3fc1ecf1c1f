"""TelemetrySampler: aligned columns, rates rather than counters, prompt stop, GPU-less machines."""

from __future__ import annotations

import hashlib
import os
import threading
import time

import psutil
import pytest

from stash_core.errors import UsageError
from stash_core.measure import nvml, telemetry
from stash_core.measure.telemetry import TelemetrySampler


def _assert_aligned(result: dict) -> None:
    count = len(result["t_s"])
    assert count >= 1
    assert all(later > earlier for earlier, later in zip(result["t_s"], result["t_s"][1:], strict=False))
    for name, values in result["metrics"].items():
        assert len(values) == count, name


def _values_between(result: dict, name: str, start_s: float, end_s: float) -> list[float]:
    """Values of samples whose interval (previous t_s, t_s] lies inside [start_s, end_s]."""
    times = [0.0, *result["t_s"]]
    return [
        value
        for before, after, value in zip(times, times[1:], result["metrics"][name], strict=False)
        if value is not None and before >= start_s and after <= end_s
    ]


def _event_time(result: dict, label: str) -> float:
    return next(event["t_s"] for event in result["events"] if event["label"] == label)


def test_result_is_columnar_and_aligned():
    with TelemetrySampler(interval_s=0.05) as sampler:
        time.sleep(0.3)
        sampler.mark("middle")
        time.sleep(0.1)
    result = sampler.result
    assert set(result) == {"interval_s", "gpu_status", "t_s", "metrics", "events"}
    assert result["interval_s"] == 0.05
    _assert_aligned(result)
    assert len(result["t_s"]) >= 3
    cores = psutil.cpu_count()
    expected = {
        "cpu_util_pct",
        "mem_used_bytes",
        "disk_read_mbps",
        "disk_write_mbps",
        "net_rx_mbps",
        "net_tx_mbps",
    }
    expected |= {f"cpu{index}_util_pct" for index in range(cores)}
    assert expected <= set(result["metrics"])
    for value in result["metrics"]["cpu_util_pct"]:
        assert 0.0 <= value <= 100.0
    memory_total = psutil.virtual_memory().total
    assert all(0 < value < memory_total for value in result["metrics"]["mem_used_bytes"])
    [event] = result["events"]
    assert event["label"] == "middle"
    assert result["t_s"][0] < event["t_s"] < result["t_s"][-1]
    assert sampler.stop() is result  # stop() again gives the same result


def test_gpu_less_machine_says_so_and_has_no_gpu_metrics(monkeypatch):
    monkeypatch.setattr(nvml, "gpu_status", lambda: (False, "no GPU: test machine"))

    def must_not_be_called():
        raise AssertionError("sample_gpus called without a GPU")

    monkeypatch.setattr(nvml, "sample_gpus", must_not_be_called)
    with TelemetrySampler(interval_s=0.05) as sampler:
        time.sleep(0.2)
    assert sampler.result["gpu_status"] == "no GPU: test machine"
    assert not [name for name in sampler.result["metrics"] if name.startswith("gpu")]


def test_this_machine_reports_its_gpu_status():
    with TelemetrySampler(interval_s=0.05) as sampler:
        time.sleep(0.1)
    ok, status = nvml.gpu_status()
    assert sampler.result["gpu_status"] == status
    has_gpu_metrics = any(name.startswith("gpu") for name in sampler.result["metrics"])
    assert has_gpu_metrics == ok
    if not ok:
        assert status.startswith("no GPU")


def test_metrics_that_come_and_go_stay_aligned_with_none(monkeypatch):
    calls = []

    def fake_sample_gpus() -> dict[str, float]:
        calls.append(1)
        metrics = {"gpu0_mem_used_bytes": 1e9}
        if len(calls) % 2 == 0:
            metrics["gpu0_util_pct"] = 40.0
        if len(calls) >= 3:
            metrics["gpu0_nvlink_mbps"] = 12.5
        return metrics

    monkeypatch.setattr(nvml, "gpu_status", lambda: (True, "1 GPU via NVML test"))
    monkeypatch.setattr(nvml, "sample_gpus", fake_sample_gpus)
    with TelemetrySampler(interval_s=0.05) as sampler:
        time.sleep(0.35)
    result = sampler.result
    _assert_aligned(result)
    assert result["gpu_status"] == "1 GPU via NVML test"
    # call 1 primes at start(); sample k (0-based) is call k + 2
    assert result["metrics"]["gpu0_mem_used_bytes"] == [1e9] * len(result["t_s"])
    assert result["metrics"]["gpu0_util_pct"][:4] == [40.0, None, 40.0, None]
    assert result["metrics"]["gpu0_nvlink_mbps"][:3] == [None, 12.5, 12.5]


def _disk_written_bytes() -> int:
    counters = psutil.disk_io_counters(perdisk=False)
    return counters.write_bytes if counters is not None else 0


def test_disk_write_is_a_rate_not_a_counter(tmp_path):
    if _is_memory_filesystem(tmp_path):
        pytest.skip("temporary directory is not on a block device")
    chunk = os.urandom(5_000_000)
    chunks = 10
    written_bytes = len(chunk) * chunks
    device_written_before = _disk_written_bytes()
    with TelemetrySampler(interval_s=0.1) as sampler:
        time.sleep(0.3)
        sampler.mark("write start")
        with open(tmp_path / "blob", "wb") as blob:
            for _ in range(chunks):
                blob.write(chunk)
                blob.flush()
                os.fsync(blob.fileno())
                time.sleep(0.02)
        sampler.mark("write end")
        time.sleep(0.3)
    device_written_mb = (_disk_written_bytes() - device_written_before) / 1e6
    result = sampler.result
    _assert_aligned(result)
    rates = result["metrics"]["disk_write_mbps"]
    assert all(rate is not None and rate >= 0 for rate in rates)
    times = [0.0, *result["t_s"]]
    write_start_s = _event_time(result, "write start")
    write_end_s = _event_time(result, "write end")
    during = [
        rate
        for before, after, rate in zip(times, times[1:], rates, strict=False)
        if after > write_start_s and before < write_end_s
    ]
    assert max(during) > 0
    # Rates integrated over time add up to the bytes the devices wrote in the same span (other
    # processes may write too, hence the device counter as reference); a cumulative counter
    # reported as a "rate" would add up to many times more.
    integrated_mb = sum(
        rate * (after - before) for before, after, rate in zip(times, times[1:], rates, strict=False)
    )
    assert integrated_mb >= 0.5 * written_bytes / 1e6
    assert integrated_mb <= 1.05 * device_written_mb + 1.0


def _is_memory_filesystem(path) -> bool:
    best = None
    for partition in psutil.disk_partitions(all=True):
        if str(path).startswith(partition.mountpoint) and (
            best is None or len(partition.mountpoint) > len(best.mountpoint)
        ):
            best = partition
    return best is not None and best.fstype in ("tmpfs", "ramfs")


def test_busy_threads_raise_cpu_utilisation_above_idle():
    # hashlib releases the GIL on large buffers, so these threads keep every core busy.
    stop_busy = threading.Event()
    buffer = os.urandom(1_000_000)

    def spin() -> None:
        while not stop_busy.is_set():
            hashlib.sha256(buffer).digest()

    with TelemetrySampler(interval_s=0.1) as sampler:
        time.sleep(0.5)
        sampler.mark("busy start")
        spinners = [threading.Thread(target=spin) for _ in range(psutil.cpu_count())]
        for spinner in spinners:
            spinner.start()
        time.sleep(0.6)
        stop_busy.set()
        for spinner in spinners:
            spinner.join()
        sampler.mark("busy end")
    result = sampler.result
    busy_start_s = _event_time(result, "busy start")
    idle = _values_between(result, "cpu_util_pct", 0.0, busy_start_s)
    busy = _values_between(result, "cpu_util_pct", busy_start_s, _event_time(result, "busy end"))
    assert idle and busy
    idle_mean = sum(idle) / len(idle)
    if idle_mean > 70:
        pytest.skip(f"machine already {idle_mean:.0f}% busy without our load: cannot see it rise")
    assert sum(busy) / len(busy) > idle_mean


def test_stop_returns_promptly_even_with_a_long_interval():
    sampler = TelemetrySampler(interval_s=5.0)
    sampler.start()
    time.sleep(0.1)
    called_s = time.monotonic()
    result = sampler.stop()
    stop_took_s = time.monotonic() - called_s
    assert stop_took_s < sampler.interval_s / 5  # an Event wait, not a sleep of the interval
    assert not sampler._thread.is_alive()
    # A phase shorter than the interval still gets one sample from stop().
    assert len(result["t_s"]) == 1
    _assert_aligned(result)


def test_sampling_thread_is_a_daemon_and_named():
    sampler = TelemetrySampler(interval_s=0.05).start()
    try:
        assert sampler._thread.daemon
        assert sampler._thread.name == "stash-telemetry"
    finally:
        sampler.stop()


def test_misuse_is_refused():
    with pytest.raises(UsageError):
        TelemetrySampler(interval_s=0)
    with pytest.raises(RuntimeError):
        TelemetrySampler().stop()
    sampler = TelemetrySampler(interval_s=0.05).start()
    try:
        with pytest.raises(RuntimeError):
            sampler.start()
    finally:
        sampler.stop()


def test_rates_use_actual_elapsed_time():
    before = telemetry._Counters(10.0, [(1.0, 4.0), (2.0, 4.0)], (1_000_000, 0), (0, 0))
    after = telemetry._Counters(
        12.0, [(2.0, 6.0), (2.5, 6.0)], (5_000_000, 3_000_000), (2_000_000, 8_000_000)
    )
    sampler = TelemetrySampler(interval_s=0.5)
    sampler._start_s = 10.0
    sampler._previous = before
    sampler._read_counters = lambda: after
    sampler._sample()
    metrics = sampler._metrics
    assert sampler._t_s == [2.0]
    assert metrics["disk_read_mbps"] == [2.0]  # 4 MB in 2 s, not 4 MB per 0.5 s interval
    assert metrics["disk_write_mbps"] == [1.5]
    assert metrics["net_rx_mbps"] == [1.0]
    assert metrics["net_tx_mbps"] == [4.0]
    assert metrics["cpu0_util_pct"] == [50.0]  # 1 s busy of 2 s
    assert metrics["cpu1_util_pct"] == [25.0]
    assert metrics["cpu_util_pct"] == [37.5]


def test_counter_that_goes_backwards_gives_none_not_negative():
    before = telemetry._Counters(10.0, None, (5_000_000, 5_000_000), None)
    after = telemetry._Counters(11.0, None, (1_000_000, 6_000_000), None)
    sampler = TelemetrySampler(interval_s=0.5)
    sampler._start_s = 10.0
    sampler._previous = before
    sampler._read_counters = lambda: after
    sampler._sample()
    assert sampler._metrics["disk_read_mbps"] == [None]
    assert sampler._metrics["disk_write_mbps"] == [1.0]
    assert "cpu_util_pct" not in sampler._metrics
    assert "net_rx_mbps" not in sampler._metrics
