"""stash_core.measure.nvml against a missing pynvml, a failing NVML and a fake two-GPU NVML."""

from __future__ import annotations

import sys
import types
from types import SimpleNamespace

import pytest

from stash_core.measure import nvml


@pytest.fixture(autouse=True)
def fresh_nvml_state():
    nvml.reset()
    yield
    nvml.reset()


class FakeNvmlError(Exception):
    def __init__(self, value: int) -> None:
        super().__init__(value)
        self.value = value

    def __str__(self) -> str:
        return f"fake NVML error {self.value}"


NOT_SUPPORTED = 3


def _unsupported(*args):
    raise FakeNvmlError(NOT_SUPPORTED)


def fake_pynvml(device_count: int = 2, init_error: int | None = None) -> types.ModuleType:
    """A pynvml stand-in: GPU 0 has 2 active NVLinks and full metrics; GPU 1 has no NVLink,
    no power readings and no PCIe throughput. GPU 0 and 1 reach each other over NVLink."""
    module = types.ModuleType("pynvml")
    module.NVMLError = FakeNvmlError
    module.NVML_SUCCESS = 0
    module.NVML_ERROR_LIBRARY_NOT_FOUND = 12
    module.NVML_ERROR_DRIVER_NOT_LOADED = 9
    module.NVML_ERROR_NO_PERMISSION = 4
    module.NVML_FEATURE_ENABLED = 1
    module.NVML_NVLINK_MAX_LINKS = 4
    module.NVML_P2P_CAPS_INDEX_NVLINK = 2
    module.NVML_P2P_STATUS_OK = 0
    module.NVML_PCIE_UTIL_TX_BYTES = 0
    module.NVML_PCIE_UTIL_RX_BYTES = 1
    module.NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX = 138
    module.NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_RX = 139
    module.shutdowns = 0
    # cumulative NVLink KiB per (field, link) on GPU 0; tests advance it
    module.nvlink_kib = {(138, 0): 1000, (139, 0): 2000, (138, 1): 0, (139, 1): 0}

    def nvml_init():
        if init_error is not None:
            raise FakeNvmlError(init_error)

    def shutdown():
        module.shutdowns += 1

    module.nvmlInit = nvml_init
    module.nvmlShutdown = shutdown
    module.nvmlDeviceGetCount = lambda: device_count
    module.nvmlDeviceGetHandleByIndex = lambda index: f"handle{index}"
    module.nvmlSystemGetDriverVersion = lambda: b"550.54.15"
    module.nvmlDeviceGetName = lambda handle: b"Fake H100" if handle == "handle0" else "Fake L4"
    module.nvmlDeviceGetUUID = lambda handle: f"GPU-{handle}"
    module.nvmlDeviceGetMemoryInfo = lambda handle: SimpleNamespace(total=80_000_000_000, used=1_500_000_000)
    module.nvmlDeviceGetPciInfo = lambda handle: SimpleNamespace(
        busId=f"00000000:1{handle[-1]}:00.0".encode()
    )

    def enforced_power_limit(handle):
        if handle == "handle0":
            return 700_000  # mW
        raise FakeNvmlError(NOT_SUPPORTED)

    module.nvmlDeviceGetEnforcedPowerLimit = enforced_power_limit
    module.nvmlDeviceGetPowerManagementLimit = _unsupported
    module.nvmlDeviceGetUtilizationRates = lambda handle: SimpleNamespace(
        gpu=87 if handle == "handle0" else 3
    )

    def power_usage(handle):
        if handle == "handle0":
            return 350_500  # mW
        raise FakeNvmlError(NOT_SUPPORTED)

    module.nvmlDeviceGetPowerUsage = power_usage

    def pcie_throughput(handle, counter):
        if handle != "handle0":
            raise FakeNvmlError(NOT_SUPPORTED)
        return 2_000_000 if counter == 1 else 500_000  # KB/s: rx, tx

    module.nvmlDeviceGetPcieThroughput = pcie_throughput

    def nvlink_state(handle, link):
        if handle != "handle0":
            raise FakeNvmlError(NOT_SUPPORTED)
        if link >= 2:
            raise FakeNvmlError(2)  # invalid argument beyond this GPU's links
        return 1

    module.nvmlDeviceGetNvLinkState = nvlink_state

    def field_values(handle, requests):
        answers = []
        for field_id, link in requests:
            answers.append(
                SimpleNamespace(
                    fieldId=field_id,
                    scopeId=link,
                    nvmlReturn=0,
                    value=SimpleNamespace(ullVal=module.nvlink_kib[(field_id, link)]),
                )
            )
        return answers

    module.nvmlDeviceGetFieldValues = field_values
    module.nvmlDeviceGetTopologyCommonAncestor = lambda a, b: 30
    module.nvmlDeviceGetP2PStatus = lambda a, b, index: 0 if index == 2 else 1
    module.nvmlDeviceGetCurrPcieLinkGeneration = lambda handle: 5
    module.nvmlDeviceGetMaxPcieLinkGeneration = lambda handle: 5
    module.nvmlDeviceGetCurrPcieLinkWidth = lambda handle: 8 if handle == "handle1" else 16
    module.nvmlDeviceGetMaxPcieLinkWidth = _unsupported
    return module


class FakeClock:
    def __init__(self) -> None:
        self.now_s = 100.0

    def monotonic(self) -> float:
        return self.now_s


def test_missing_pynvml_reports_no_gpu_and_never_raises(monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", None)  # makes "import pynvml" fail
    ok, status = nvml.gpu_status()
    assert ok is False
    assert status.startswith("no GPU: ")
    assert "pynvml" in status
    assert nvml.list_gpus() == []
    assert nvml.gpu_topology() is None
    assert nvml.sample_gpus() == {}


def test_library_not_found_is_explained(monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", fake_pynvml(init_error=12))
    ok, status = nvml.gpu_status()
    assert not ok
    assert status == "no GPU: NVML library not found (no NVIDIA driver installed)"
    assert nvml.sample_gpus() == {}


def test_other_init_errors_carry_nvml_text(monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", fake_pynvml(init_error=999))
    ok, status = nvml.gpu_status()
    assert not ok
    assert status.startswith("no GPU: ")
    assert "fake NVML error 999" in status


def test_zero_devices_is_no_gpu(monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", fake_pynvml(device_count=0))
    ok, status = nvml.gpu_status()
    assert (ok, status) == (False, "no GPU: NVML found no devices")
    assert nvml.list_gpus() == []
    assert nvml.gpu_topology() is None


def test_this_machine_says_why_there_is_no_gpu():
    ok, status = nvml.gpu_status()
    if ok:
        pytest.skip(f"this machine has GPUs: {status}")
    assert status.startswith("no GPU: ")
    assert len(status) > len("no GPU: ")
    assert nvml.sample_gpus() == {}
    assert nvml.gpu_topology() is None


def test_status_counts_gpus_and_names_the_driver(monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", fake_pynvml())
    assert nvml.gpu_status() == (True, "2 GPUs via NVML 550.54.15")


def test_nvml_is_initialised_once_and_reset_shuts_it_down(monkeypatch):
    fake = fake_pynvml()
    inits = []
    original_init = fake.nvmlInit
    fake.nvmlInit = lambda: inits.append(1) or original_init()
    monkeypatch.setitem(sys.modules, "pynvml", fake)
    nvml.gpu_status()
    nvml.list_gpus()
    nvml.sample_gpus()
    assert len(inits) == 1
    nvml.reset()
    assert fake.shutdowns == 1
    nvml.gpu_status()
    assert len(inits) == 2


def test_list_gpus_fills_what_it_can(monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", fake_pynvml())
    gpus = nvml.list_gpus()
    assert gpus == [
        {
            "index": 0,
            "name": "Fake H100",
            "uuid": "GPU-handle0",
            "memory_bytes": 80_000_000_000,
            "pci_bus_id": "00000000:10:00.0",
            "power_limit_w": 700.0,
        },
        {
            "index": 1,
            "name": "Fake L4",
            "uuid": "GPU-handle1",
            "memory_bytes": 80_000_000_000,
            "pci_bus_id": "00000000:11:00.0",
            "power_limit_w": None,  # neither power limit query is supported
        },
    ]


def test_sample_gpus_converts_units_and_leaves_out_missing_metrics(monkeypatch):
    fake = fake_pynvml()
    monkeypatch.setitem(sys.modules, "pynvml", fake)
    clock = FakeClock()
    monkeypatch.setattr(nvml, "time", clock)

    first = nvml.sample_gpus()
    assert first["gpu0_util_pct"] == 87.0
    assert first["gpu0_mem_used_bytes"] == 1_500_000_000
    assert first["gpu0_power_w"] == pytest.approx(350.5)
    # KB/s (1024 bytes) -> MB/s (1e6 bytes)
    assert first["gpu0_pcie_rx_mbps"] == pytest.approx(2_000_000 * 1024 / 1e6)
    assert first["gpu0_pcie_tx_mbps"] == pytest.approx(500_000 * 1024 / 1e6)
    assert "gpu0_nvlink_mbps" not in first  # first reading is only the counter baseline
    assert first["gpu1_util_pct"] == 3.0
    for absent in ("gpu1_power_w", "gpu1_pcie_rx_mbps", "gpu1_pcie_tx_mbps", "gpu1_nvlink_mbps"):
        assert absent not in first

    # 2 s later, 500_000 KiB more went over link 0 TX and 1_000_000 KiB over link 1 RX.
    clock.now_s += 2.0
    fake.nvlink_kib[(138, 0)] += 500_000
    fake.nvlink_kib[(139, 1)] += 1_000_000
    second = nvml.sample_gpus()
    assert second["gpu0_nvlink_mbps"] == pytest.approx(1_500_000 * 1024 / 1e6 / 2.0)

    # A counter that went backwards (reset) gives no rate rather than a negative one.
    clock.now_s += 1.0
    fake.nvlink_kib[(138, 0)] = 0
    assert "gpu0_nvlink_mbps" not in nvml.sample_gpus()


def test_sample_gpus_survives_unexpected_exceptions(monkeypatch):
    fake = fake_pynvml()

    def broken(*args):
        raise RuntimeError("driver hiccup")

    fake.nvmlDeviceGetUtilizationRates = broken
    fake.nvmlDeviceGetFieldValues = broken
    del fake.nvmlDeviceGetPcieThroughput  # an old binding without the function
    monkeypatch.setitem(sys.modules, "pynvml", fake)
    metrics = nvml.sample_gpus()
    assert "gpu0_util_pct" not in metrics
    assert "gpu0_pcie_rx_mbps" not in metrics
    assert metrics["gpu0_mem_used_bytes"] == 1_500_000_000


def test_topology_names_links_and_counts_nvlinks(monkeypatch):
    fake = fake_pynvml(device_count=3)
    # GPU 2 reaches the others only over PCIe, through a host bridge
    fake.nvmlDeviceGetP2PStatus = lambda a, b, index: 0 if {a, b} == {"handle0", "handle1"} else 1
    monkeypatch.setitem(sys.modules, "pynvml", fake)
    topology = nvml.gpu_topology()
    assert topology["gpus"][0] == {
        "index": 0,
        "nvlink_active_links": 2,
        "pcie_gen_current": 5,
        "pcie_gen_max": 5,
        "pcie_width_current": 16,
        "pcie_width_max": None,
    }
    assert topology["gpus"][1]["nvlink_active_links"] == 0
    assert topology["gpus"][1]["pcie_width_current"] == 8
    links = {(pair["gpu_a"], pair["gpu_b"]): pair["link"] for pair in topology["pairs"]}
    assert links == {(0, 1): "NVLink", (0, 2): "PCIe host bridge", (1, 2): "PCIe host bridge"}
    assert all(pair["pcie_path"] == "PCIe host bridge" for pair in topology["pairs"])


def test_single_gpu_topology_has_no_pairs(monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", fake_pynvml(device_count=1))
    topology = nvml.gpu_topology()
    assert topology["pairs"] == []
    assert [gpu["index"] for gpu in topology["gpus"]] == [0]
    assert nvml.gpu_status() == (True, "1 GPU via NVML 550.54.15")
