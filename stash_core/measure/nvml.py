"""NVIDIA GPU queries through NVML (nvidia-ml-py, imported as ``pynvml``), wrapped once.

Every function here is safe on a machine without GPUs, without the driver or without the
``pynvml`` package: nothing raises, a missing metric is simply absent (or None), and
``gpu_status()`` says in words why there is no GPU. NVML is initialised lazily, once per
process, on the first call.

GPU indices are NVML's (PCI bus order, all GPUs of the machine); they match CUDA's only
when CUDA_DEVICE_ORDER=PCI_BUS_ID and CUDA_VISIBLE_DEVICES is unset.
"""

from __future__ import annotations

import importlib
import threading
import time
from dataclasses import dataclass, field
from typing import Any

# NVML reports PCIe throughput in "KB/s" and NVLink counters in KiB; both are 1024-byte units
# (as nvidia-smi and nvitop read them). Our rates are MB/s with MB = 1e6 bytes.
_KIB_BYTES = 1024
_MB_BYTES = 1e6
_MW_PER_W = 1000.0

# nvmlGpuTopologyLevel_t -> words; NVML itself never says "NVLink" here (see _pair_link).
_TOPOLOGY_LEVEL_NAMES = {
    0: "same board",  # NVML_TOPOLOGY_INTERNAL: two GPUs on one card
    10: "PCIe switch",  # NVML_TOPOLOGY_SINGLE (nvidia-smi PIX)
    20: "PCIe switches",  # NVML_TOPOLOGY_MULTIPLE (PXB)
    30: "PCIe host bridge",  # NVML_TOPOLOGY_HOSTBRIDGE (PHB)
    40: "NUMA node",  # NVML_TOPOLOGY_NODE (NODE): host bridges within one NUMA node
    50: "system",  # NVML_TOPOLOGY_SYSTEM (SYS): across the inter-socket interconnect
}


@dataclass
class _NvmlState:
    ok: bool
    status: str
    nvml: Any = None  # the pynvml module when it imported
    handles: list[tuple[int, Any]] = field(default_factory=list)  # (NVML index, handle)
    active_nvlinks: dict[int, list[int]] = field(default_factory=dict)  # index -> active link ids
    # index -> (monotonic s, total KiB, links that answered): last NVLink counter reading
    nvlink_last: dict[int, tuple[float, int, frozenset[int]]] = field(default_factory=dict)


_lock = threading.RLock()
_state: _NvmlState | None = None


def _decode(value: Any) -> Any:
    return value.decode(errors="replace") if isinstance(value, bytes) else value


def _query(nvml: Any, function_name: str, *args: Any) -> Any:
    """Call pynvml.<function_name>(*args); None when it fails or the binding lacks it (old pynvml)."""
    try:
        return getattr(nvml, function_name)(*args)
    except Exception:  # noqa: BLE001 - NVMLError, AttributeError on old bindings, ctypes errors: all mean "unknown"
        return None


def _init_error_reason(nvml: Any, err: Exception) -> str:
    code = getattr(err, "value", None)
    if code == getattr(nvml, "NVML_ERROR_LIBRARY_NOT_FOUND", 12):
        return "NVML library not found (no NVIDIA driver installed)"
    if code == getattr(nvml, "NVML_ERROR_DRIVER_NOT_LOADED", 9):
        return "NVIDIA driver not loaded"
    if code == getattr(nvml, "NVML_ERROR_NO_PERMISSION", 4):
        return "no permission to use NVML"
    return f"NVML failed to initialise: {err}"


def _load() -> _NvmlState:
    try:
        nvml = importlib.import_module("pynvml")
    except Exception:  # noqa: BLE001 - ImportError, or a broken install
        return _NvmlState(False, "no GPU: pynvml (nvidia-ml-py) not installed")
    try:
        nvml.nvmlInit()
    except Exception as err:  # noqa: BLE001 - reported in the status text
        return _NvmlState(False, f"no GPU: {_init_error_reason(nvml, err)}")
    state = _NvmlState(False, "", nvml=nvml)
    try:
        count = int(nvml.nvmlDeviceGetCount())
    except Exception as err:  # noqa: BLE001 - reported in the status text
        state.status = f"no GPU: NVML could not count devices: {err}"
        return state
    if count == 0:
        state.status = "no GPU: NVML found no devices"
        return state
    for index in range(count):
        handle = _query(nvml, "nvmlDeviceGetHandleByIndex", index)
        if handle is not None:
            state.handles.append((index, handle))
    if not state.handles:
        state.status = f"no GPU: NVML could not open any of its {count} devices"
        return state
    driver = _decode(_query(nvml, "nvmlSystemGetDriverVersion")) or "driver unknown"
    n = len(state.handles)
    state.ok = True
    state.status = f"{n} GPU{'s' if n != 1 else ''} via NVML {driver}"
    return state


def _get_state() -> _NvmlState:
    global _state
    with _lock:
        if _state is None:
            try:
                _state = _load()
            except Exception as err:  # noqa: BLE001 - never let a surprise in the bindings escape
                _state = _NvmlState(False, f"no GPU: NVML query failed: {err}")
        return _state


def reset() -> None:
    """Forget the cached NVML state (shuts NVML down); the next query initialises again."""
    global _state
    with _lock:
        if _state is not None and _state.nvml is not None:
            _query(_state.nvml, "nvmlShutdown")
        _state = None


def gpu_status() -> tuple[bool, str]:
    """(True, "N GPUs via NVML <driver>") or (False, "no GPU: <reason>"); never raises."""
    state = _get_state()
    return state.ok, state.status


def list_gpus() -> list[dict]:
    """One dict per GPU: index, name, uuid, memory_bytes, pci_bus_id, power_limit_w (None when unknown)."""
    state = _get_state()
    if not state.ok:
        return []
    nvml = state.nvml
    gpus = []
    for index, handle in state.handles:
        memory = _query(nvml, "nvmlDeviceGetMemoryInfo", handle)
        pci = _query(nvml, "nvmlDeviceGetPciInfo", handle)
        # The enforced limit is what the GPU runs under; the management limit is the fallback.
        power_limit_mw = _query(nvml, "nvmlDeviceGetEnforcedPowerLimit", handle)
        if power_limit_mw is None:
            power_limit_mw = _query(nvml, "nvmlDeviceGetPowerManagementLimit", handle)
        gpus.append(
            {
                "index": index,
                "name": _decode(_query(nvml, "nvmlDeviceGetName", handle)),
                "uuid": _decode(_query(nvml, "nvmlDeviceGetUUID", handle)),
                "memory_bytes": int(memory.total) if memory is not None else None,
                "pci_bus_id": _decode(getattr(pci, "busId", None)),
                "power_limit_w": power_limit_mw / _MW_PER_W if power_limit_mw is not None else None,
            }
        )
    return gpus


def _active_nvlinks(state: _NvmlState, index: int, handle: Any) -> list[int]:
    """Ids of the NVLink links that are up; probed once per GPU (links do not come and go in a run)."""
    links = state.active_nvlinks.get(index)
    if links is None:
        nvml = state.nvml
        max_links = int(getattr(nvml, "NVML_NVLINK_MAX_LINKS", 18))
        enabled = getattr(nvml, "NVML_FEATURE_ENABLED", 1)
        links = [
            link
            for link in range(max_links)
            if _query(nvml, "nvmlDeviceGetNvLinkState", handle, link) == enabled
        ]
        state.active_nvlinks[index] = links
    return links


def _pair_link(state: _NvmlState, handle_a: Any, handle_b: Any) -> tuple[str, str | None]:
    """(link, pcie_path) between two GPUs: link is "NVLink" when peer-to-peer over NVLink works."""
    nvml = state.nvml
    level = _query(nvml, "nvmlDeviceGetTopologyCommonAncestor", handle_a, handle_b)
    pcie_path = _TOPOLOGY_LEVEL_NAMES.get(level, f"level {level}") if level is not None else None
    nvlink_index = getattr(nvml, "NVML_P2P_CAPS_INDEX_NVLINK", 2)
    p2p_ok = getattr(nvml, "NVML_P2P_STATUS_OK", 0)
    if _query(nvml, "nvmlDeviceGetP2PStatus", handle_a, handle_b, nvlink_index) == p2p_ok:
        return "NVLink", pcie_path
    return pcie_path or "unknown", pcie_path


def gpu_topology() -> dict | None:
    """How the GPUs connect: {"gpus": [per-GPU NVLink/PCIe link facts], "pairs": [pairwise link]}.

    Per GPU: index, nvlink_active_links, pcie_gen_current, pcie_gen_max, pcie_width_current,
    pcie_width_max (None when unknown). Per pair (gpu_a < gpu_b): link ("NVLink", or the PCIe
    path such as "PCIe switch", "PCIe host bridge", "NUMA node", "system") and pcie_path.
    None without GPUs.
    """
    state = _get_state()
    if not state.ok:
        return None
    nvml = state.nvml
    gpus = []
    for index, handle in state.handles:
        gpus.append(
            {
                "index": index,
                "nvlink_active_links": len(_active_nvlinks(state, index, handle)),
                "pcie_gen_current": _query(nvml, "nvmlDeviceGetCurrPcieLinkGeneration", handle),
                "pcie_gen_max": _query(nvml, "nvmlDeviceGetMaxPcieLinkGeneration", handle),
                "pcie_width_current": _query(nvml, "nvmlDeviceGetCurrPcieLinkWidth", handle),
                "pcie_width_max": _query(nvml, "nvmlDeviceGetMaxPcieLinkWidth", handle),
            }
        )
    pairs = []
    for position, (index_a, handle_a) in enumerate(state.handles):
        for index_b, handle_b in state.handles[position + 1 :]:
            link, pcie_path = _pair_link(state, handle_a, handle_b)
            pairs.append({"gpu_a": index_a, "gpu_b": index_b, "link": link, "pcie_path": pcie_path})
    return {"gpus": gpus, "pairs": pairs}


def _nvlink_mbps(state: _NvmlState, index: int, handle: Any) -> float | None:
    """TX+RX data rate over all active NVLinks, from the cumulative KiB counters of two calls.

    The first call for a GPU only records the baseline (None); later calls divide the counter
    delta by the elapsed time since the previous call.
    """
    links = _active_nvlinks(state, index, handle)
    if not links:
        return None
    nvml = state.nvml
    field_tx = getattr(nvml, "NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX", 138)
    field_rx = getattr(nvml, "NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_RX", 139)
    requests = [(field_id, link) for link in links for field_id in (field_tx, field_rx)]
    values = _query(nvml, "nvmlDeviceGetFieldValues", handle, requests)
    now_s = time.monotonic()
    if values is None:
        return None
    success = getattr(nvml, "NVML_SUCCESS", 0)
    total_kib = 0
    answered = set()
    for value in values:
        if value.nvmlReturn == success:
            total_kib += int(value.value.ullVal)
            answered.add(int(value.scopeId))
    if not answered:
        return None
    previous = state.nvlink_last.get(index)
    state.nvlink_last[index] = (now_s, total_kib, frozenset(answered))
    if previous is None:
        return None
    previous_s, previous_kib, previous_answered = previous
    elapsed_s = now_s - previous_s
    # A different set of answering links, or a counter reset, makes the delta meaningless.
    if previous_answered != answered or elapsed_s <= 0 or total_kib < previous_kib:
        return None
    return (total_kib - previous_kib) * _KIB_BYTES / _MB_BYTES / elapsed_s


def sample_gpus() -> dict[str, float]:
    """Current GPU metrics by name (gpu<i>_util_pct, gpu<i>_mem_used_bytes, gpu<i>_power_w,
    gpu<i>_pcie_rx_mbps, gpu<i>_pcie_tx_mbps, gpu<i>_nvlink_mbps); any that NVML cannot give are absent.

    PCIe throughput is NVML's own ~20 ms average per call; gpu<i>_nvlink_mbps (TX+RX) is the rate
    since the previous sample_gpus() call, so it first appears on the second call.
    """
    state = _get_state()
    if not state.ok:
        return {}
    nvml = state.nvml
    metrics: dict[str, float] = {}
    with _lock:  # serialises the NVLink baseline bookkeeping between concurrent samplers
        for index, handle in state.handles:
            prefix = f"gpu{index}_"
            utilization = _query(nvml, "nvmlDeviceGetUtilizationRates", handle)
            if utilization is not None:
                metrics[prefix + "util_pct"] = float(utilization.gpu)
            memory = _query(nvml, "nvmlDeviceGetMemoryInfo", handle)
            if memory is not None:
                metrics[prefix + "mem_used_bytes"] = float(memory.used)
            power_mw = _query(nvml, "nvmlDeviceGetPowerUsage", handle)
            if power_mw is not None:
                metrics[prefix + "power_w"] = power_mw / _MW_PER_W
            for direction, counter_name, default in (
                ("rx", "NVML_PCIE_UTIL_RX_BYTES", 1),
                ("tx", "NVML_PCIE_UTIL_TX_BYTES", 0),
            ):
                kb_per_s = _query(
                    nvml, "nvmlDeviceGetPcieThroughput", handle, getattr(nvml, counter_name, default)
                )
                if kb_per_s is not None:
                    metrics[f"{prefix}pcie_{direction}_mbps"] = kb_per_s * _KIB_BYTES / _MB_BYTES
            nvlink_mbps = _nvlink_mbps(state, index, handle)
            if nvlink_mbps is not None:
                metrics[prefix + "nvlink_mbps"] = nvlink_mbps
    return metrics
