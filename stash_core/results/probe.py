"""Probe sets: the all-reduce and point-to-point figures of `stash probe` (a probe file of its own) or of a
profile (its result's "probes"). check_probe_set holds them to what the store relies on, as the result file's
checks hold a run: the names shown are text without terminal escapes, the time one the store can hold, the
figures numbers that are not negative. Every refusal is one UsageError line naming the field."""

from __future__ import annotations

from typing import Any

from stash_core.errors import UsageError
from stash_core.results.values import check_identifier, check_timestamp
from stash_core.spec import DEVICES

# The names of a probe set that are stored and shown; scope is each p2p entry's.
PROBE_NAMES = ("probe_id", "run_id", "phase", "hostname", "instance", "backend", "device")
PROBE_BACKENDS = ("gloo", "nccl")  # the process group's
PROBE_DEVICES = tuple(device for device in DEVICES if device != "auto")  # torch.device.type
PROBE_COUNTS = ("world_size", "nodes", "workers_per_node")  # a probe ran on at least one of each
MEASURE_COUNTS = ("size_bytes", "repetitions")
MEASURE_FIGURES = ("time_s", "time_min_s", "algbw_gbps", "busbw_gbps")  # seconds and rates: not negative


def check_probe_set(probe: dict[str, Any], document: str, where: str = "") -> None:
    """UsageError "<document>: <where><field> ..." for the first field of `probe` the store cannot take;
    `where` places an embedded set ("probes[0]." in a result file)."""
    for key in PROBE_NAMES:
        if probe.get(key) is not None:
            check_identifier(f"{where}{key}", probe[key], document)
            _check_no_padding(f"{where}{key}", probe[key], document)
    for key, allowed in (("device", PROBE_DEVICES), ("backend", PROBE_BACKENDS)):
        if probe.get(key) is not None and probe[key] not in allowed:
            expected = ", ".join(allowed)
            raise UsageError(f"{document}: {where}{key} is {probe[key]!r:.40}; expected one of {expected}")
    check_timestamp(f"{where}started_at", probe.get("started_at"), False, document)
    for key in PROBE_COUNTS:
        _check_whole(f"{where}{key}", probe.get(key), 1, document)
    _check_figure(f"{where}link_gbps", probe.get("link_gbps"), document)
    for key in ("allreduce", "p2p"):
        entries = probe.get(key)
        if entries is not None and not isinstance(entries, list):
            raise UsageError(f"{document}: {where}{key} must be a list of objects or null")
        for index, entry in enumerate(entries or []):
            _check_measure(f"{where}{key}[{index}]", entry, document)
    gradient = probe.get("gradient_allreduce")
    if gradient is not None:
        _check_measure(f"{where}gradient_allreduce", gradient, document)


def _check_measure(place: str, entry: Any, document: str) -> None:
    if not isinstance(entry, dict):
        raise UsageError(f"{document}: {place} must be an object, got {entry!r:.40}")
    if entry.get("scope") is not None:
        check_identifier(f"{place}.scope", entry["scope"], document)
    for key in MEASURE_COUNTS:
        _check_whole(f"{place}.{key}", entry.get(key), 0, document)
    for key in MEASURE_FIGURES:
        _check_figure(f"{place}.{key}", entry.get(key), document)
    if entry.get("size_bytes") is None or entry.get("time_s") is None:
        raise UsageError(f"{document}: {place} has no size_bytes or no time_s: it measured nothing")


def _check_no_padding(what: str, value: str, document: str) -> None:
    # " p1" and "p1" would be two ids that print the same
    if not value.strip() or value != value.strip():
        raise UsageError(f"{document}: {what} {value!r:.80} is empty or starts or ends with a space")


def _check_whole(what: str, value: Any, least: int, document: str) -> None:
    if value is None or (isinstance(value, float) and value != value):  # NaN: unknown
        return
    if isinstance(value, bool) or not isinstance(value, int | float) or value != int(value) or value < least:
        raise UsageError(f"{document}: {what} is {value!r:.40}; expected a whole number from {least}")


def _check_figure(what: str, value: Any, document: str) -> None:
    if value is None or (isinstance(value, float) and value != value):  # NaN: unknown
        return
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise UsageError(f"{document}: {what} must be a number, got {value!r:.40}")
    if value < 0:
        raise UsageError(f"{document}: {what} is {value!r}; a time or a rate is not negative")
