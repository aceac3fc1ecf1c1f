"""Link shaping of an emulated cluster: rate, latency and loss, parsed from tc-style text and set with tc.

Every node link is shaped in both directions: the egress qdisc of NODE_IFNAME (inside the node)
shapes what the node sends and the egress qdisc of its hub veth (bridge side) shapes what it
receives. The rate limit is a tbf; latency and loss use netem when the kernel has it
(CONFIG_NET_SCH_NETEM, module sch_netem). Without netem only the rate is emulated, and the node
record says so in "warning".

A shaping is a dict: rate_bps (None: unlimited), latency_us (one way), loss_pct.
"""

from __future__ import annotations

from stash_core.errors import UsageError
from stash_core.launch.cluster.cmd import run_cmd
from stash_core.launch.cluster.names import NODE_IFNAME, Layout
from stash_core.units import DURATION_UNITS_S, RATE_UNITS_BPS, number_and_unit

# tc's units: *bit are bits per second, *bps are BYTES per second (SI prefixes).
_MIN_RATE_BPS = 8_000
_MAX_RATE_BPS = 400e9
_MAX_LATENCY_US = 10_000_000
_TBF_QUEUE_LATENCY = "100ms"  # how long a packet may wait in the tbf queue before it is dropped
_NETEM_LIMIT_PACKETS = "100000"


# ---------------------------------------------------------------- parsing


def parse_bandwidth_bps(text: str) -> int | None:
    """tc-style rate ("1gbit", "200mbit", "10mbps" = 10 MB/s) -> bits per second; "unlimited" -> None."""
    if not isinstance(text, str):
        raise UsageError(f"invalid bandwidth {text!r}: expected e.g. '1gbit' or '200mbit'")
    if text.strip().lower() in ("unlimited", "none"):
        return None
    parsed = number_and_unit(text)
    if parsed is None or parsed[1] not in RATE_UNITS_BPS:
        raise UsageError(
            f"invalid bandwidth {text!r}: expected a number and one of {', '.join(RATE_UNITS_BPS)}"
        )
    rate_bps = parsed[0] * RATE_UNITS_BPS[parsed[1]]
    if not _MIN_RATE_BPS <= rate_bps <= _MAX_RATE_BPS:
        raise UsageError(f"bandwidth {text!r} out of range (8kbit .. 400gbit)")
    return int(rate_bps)


def parse_latency_us(text: str) -> int:
    """One-way delay ("1ms", "250us", "0") -> microseconds."""
    if not isinstance(text, str):
        raise UsageError(f"invalid latency {text!r}: expected e.g. '1ms'")
    if text.strip() == "0":
        return 0
    parsed = number_and_unit(text)
    if parsed is None or parsed[1] not in DURATION_UNITS_S:
        raise UsageError(f"invalid latency {text!r}: expected a number and one of us, ms, s")
    latency_us = parsed[0] * DURATION_UNITS_S[parsed[1]] * 1e6
    if latency_us > _MAX_LATENCY_US:
        raise UsageError(f"latency {text!r} out of range (0 .. 10s)")
    return int(round(latency_us))


def check_loss(loss_pct: float) -> float:
    """A loss percentage (0..100) as a float; UsageError otherwise."""
    if isinstance(loss_pct, bool) or not isinstance(loss_pct, (int, float)) or not 0.0 <= loss_pct <= 100.0:
        raise UsageError(f"invalid loss {loss_pct!r}: expected a percentage between 0 and 100")
    return float(loss_pct)


# ---------------------------------------------------------------- qdiscs


def tbf_args(rate_bps: int) -> list[str]:
    """A tbf qdisc limiting to rate_bps, as tc arguments."""
    # The bucket must hold at least one GSO super-packet (64 KiB on veth) and a few ms of traffic,
    # or tbf cannot reach its rate at high speeds.
    burst = str(burst_bytes(rate_bps))
    return ["tbf", "rate", f"{rate_bps}bit", "burst", burst, "latency", _TBF_QUEUE_LATENCY]


def burst_bytes(rate_bps: float) -> int:
    """What the tbf lets through at once before its rate holds: 4 ms of the rate, at least 64 KiB."""
    return max(64 * 1024, int(rate_bps / 8 * 0.004))


def qdisc_args(shaping: dict, netem_ok: bool) -> list[list[str]]:
    """The qdiscs (tc arguments after `dev DEVICE`) that give one direction of a link its shaping.

    With netem: a root netem for delay and loss, the tbf (if any) below it; without: the tbf alone.
    """
    rate_bps, latency_us, loss_pct = shaping["rate_bps"], shaping["latency_us"], shaping["loss_pct"]
    qdiscs: list[list[str]] = []
    if netem_ok and (latency_us > 0 or loss_pct > 0):
        netem = ["netem", "delay", f"{latency_us}us", "limit", _NETEM_LIMIT_PACKETS]
        if loss_pct > 0:
            netem += ["loss", f"{loss_pct:g}%"]
        qdiscs.append(["root", "handle", "1:", *netem])
        if rate_bps is not None:
            qdiscs.append(["parent", "1:1", "handle", "10:", *tbf_args(rate_bps)])
    elif rate_bps is not None:
        qdiscs.append(["root", "handle", "10:", *tbf_args(rate_bps)])
    return qdiscs


def netem_supported(namespace: str, device: str) -> bool:
    """Try a netem qdisc on a device we own; the kernel says 'unknown' when sch_netem is missing."""
    added = run_cmd(
        ["tc", "-n", namespace, "qdisc", "add", "dev", device, "root", "netem", "delay", "0ms"], check=False
    )
    if added.returncode != 0:
        return False
    run_cmd(["tc", "-n", namespace, "qdisc", "del", "dev", device, "root"], check=False)
    return True


def apply_shaping(namespace: str, device: str, shaping: dict, netem_ok: bool) -> list[str]:
    """Replace the root qdisc of device with the shaping; return the qdiscs made (as tc arguments)."""
    run_cmd(["tc", "-n", namespace, "qdisc", "del", "dev", device, "root"], check=False)
    qdiscs = qdisc_args(shaping, netem_ok)
    for qdisc in qdiscs:
        run_cmd(["tc", "-n", namespace, "qdisc", "add", "dev", device, *qdisc])
    return [f"{namespace}/{device}: " + " ".join(qdisc) for qdisc in qdiscs]


def shaping_warning(shaping: dict, netem_ok: bool) -> str | None:
    """What of the shaping is not emulated (latency and loss without netem), or None."""
    if netem_ok or (shaping["latency_us"] == 0 and shaping["loss_pct"] == 0):
        return None
    return (
        f"kernel has no netem qdisc (sch_netem): latency {shaping['latency_us']}us and loss "
        f"{shaping['loss_pct']:g}% are not emulated, only the rate limit"
    )


def shape_node(state: dict, index: int) -> None:
    """Apply node index's recorded shaping to both ends of its link; record the qdiscs and any warning."""
    node = state["nodes"][index]
    qdiscs = apply_shaping(node["namespace"], NODE_IFNAME, node["shaping"], state["netem"])
    hub = Layout.of_state(state).hub_namespace
    qdiscs += apply_shaping(hub, node["hub_veth"], node["shaping"], state["netem"])
    node["qdiscs"] = qdiscs
    node["warning"] = shaping_warning(node["shaping"], state["netem"])


def live_qdiscs(namespace: str, device: str) -> list[str]:
    """`tc qdisc show` of device, one qdisc a line."""
    shown = run_cmd(["tc", "-n", namespace, "qdisc", "show", "dev", device], check=False)
    return [line.strip() for line in shown.stdout.splitlines() if line.strip()]
