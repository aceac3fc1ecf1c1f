"""Probe sets and communication bounds as the text `stash probe`, `stash profile` and `stash show` print."""

from __future__ import annotations

from stash_core.analysis.comm import GRADIENT_BYTES_UNKNOWN, probe_alpha_beta
from stash_core.analysis.overlap import overlap_reading
from stash_core.measure.probe_plan import P2P_LATENCY_BYTES
from stash_core.units import KIB, MIB, format_time


def format_size(size_bytes: float) -> str:
    for unit, scale in (("GiB", 1024**3), ("MiB", MIB), ("KiB", KIB)):
        if size_bytes >= scale:
            value = size_bytes / scale
            return f"{value:g} {unit}" if value == int(value) else f"{value:.1f} {unit}"
    return f"{int(size_bytes)} B"


def format_rate(gbps: float | None) -> str:
    if gbps is None:
        return "-"
    return f"{gbps:.2f} Gbit/s" if gbps >= 1 else f"{gbps * 1000:.0f} Mbit/s"


def format_probe(probe: dict) -> str:
    """The table `stash probe` prints: one line per all-reduce size, then gradients and point-to-point."""
    head = (
        f"probe over {probe.get('world_size')} worker(s) on {probe.get('nodes')} machine(s), "
        f"{probe.get('backend')} on {probe.get('device')}"
    )
    if probe.get("link_gbps"):  # an emulated cluster's shaped links: the rate the figures are held to
        head += f"; emulated links {format_rate(probe['link_gbps'])}"
    # each size's mean beside its fastest repetition: how far apart they are is the spread of its times
    lines = [head, f"  {'all-reduce':<12}{'size':>10}{'reps':>6}{'time':>11}{'fastest':>11}{'algbw':>15}"
                   f"{'busbw':>15}"]  # fmt: skip
    for row in probe.get("allreduce") or []:
        fastest = row.get("time_min_s")
        lines.append(
            f"  {'':<12}{format_size(row['size_bytes']):>10}{row['repetitions']:>6}"
            f"{format_time(row['time_s']):>11}{format_time(fastest) if fastest is not None else '-':>11}"
            f"{format_rate(row.get('algbw_gbps')):>15}{format_rate(row.get('busbw_gbps')):>15}"
        )
    for skipped in probe.get("skipped_sizes_bytes") or []:
        lines.append(
            f"  {'':<12}{format_size(skipped):>10}  skipped: would exceed the time limit of one call"
        )
    gradient = probe.get("gradient_allreduce")
    if gradient:
        lines.append(
            f"  gradients {format_size(gradient['size_bytes'])}{_buckets(gradient.get('buckets'))}: "
            f"{format_time(gradient['time_s'])} (busbw {format_rate(gradient.get('busbw_gbps'))})"
        )
    for row in probe.get("p2p") or []:
        if row["size_bytes"] <= P2P_LATENCY_BYTES:
            # the mean holds every stall of a repetition (1.7 ms among 24 us ones): the fastest beside it
            fastest = row.get("time_min_s")
            mean = format_time(row["time_s"])
            slower = fastest is not None and fastest < row["time_s"]
            beside = f" (fastest {format_time(fastest)})" if slower else ""
            lines.append(f"  p2p {row.get('scope', ''):<11} latency  one-way {mean}{beside}")
        else:
            lines.append(
                f"  p2p {row.get('scope', ''):<11} bandwidth {format_rate(row.get('algbw_gbps'))} "
                f"({format_size(row['size_bytes'])} one-way in {format_time(row['time_s'])})"
            )
    for skipped in probe.get("skipped_p2p") or []:
        lines.append(
            f"  p2p {skipped.get('scope', ''):<11} {format_size(skipped['size_bytes'])} skipped: would "
            "exceed the time limit of one call"
        )
    fit = probe_alpha_beta(probe)
    if fit:
        alpha_s, beta = fit
        lines.append(
            f"  alpha-beta fit: alpha {format_time(alpha_s)} per call, beta -> {format_rate(8 / beta / 1e9)}"
        )
    if note := burst_note(probe):
        lines.append(note)
    return "\n".join(lines)


BURST_MARGIN = 1.02  # a figure this much over the emulated link's rate is no measurement error


def burst_note(probe: dict) -> str | None:
    """Said under a probe of the emulated cluster that read a message faster than its links' rate: tc's
    token bucket lets a burst through at once, so messages of about that size are not limited by the rate."""
    link_gbps = probe.get("link_gbps")
    if not str(probe.get("machines") or "").startswith("emulated") or not isinstance(link_gbps, int | float):
        return None
    # only what crossed a link: a peer on the same machine (16.8 Gbit/s) never did
    crossing = [row for row in probe.get("p2p") or [] if row.get("scope") == "inter_node"]
    if int(probe.get("nodes") or 1) > 1:
        crossing += probe.get("allreduce") or []
    faster = [row for row in crossing if (row.get("algbw_gbps") or 0) > BURST_MARGIN * link_gbps]
    if not faster or link_gbps <= 0:
        return None
    from stash_core.launch.cluster.shaping import burst_bytes

    sizes = ", ".join(dict.fromkeys(format_size(row["size_bytes"]) for row in faster))
    burst = format_size(burst_bytes(link_gbps * 1e9))
    return (f"  note: {sizes} read faster than the links' {format_rate(link_gbps)}: the emulated links' "
            f"shaper (tc's token bucket) lets {burst} through at once before its rate holds, so a message "
            "not many times that size is not held to the rate")  # fmt: skip


def _buckets(count: int | None) -> str:
    """The gradients' "in N DDP bucket(s)"; nothing where the count is not known (a probe set read back from
    the database)."""
    return f" in {count} DDP bucket(s)" if count else ""


def probe_json(probe: dict) -> dict:
    """The probe as `--json` prints it: the probe file's fields and the alpha-beta fit the text ends with
    (`alpha_beta`: alpha_s per call, beta_s_per_byte and the link rate it implies; null with too few
    sizes)."""
    fit = probe_alpha_beta(probe)
    alpha_beta = None
    if fit:
        alpha_beta = {"alpha_s": fit[0], "beta_s_per_byte": fit[1], "link_gbps": 8 / fit[1] / 1e9}
    return {**probe, "alpha_beta": alpha_beta}


def format_communication(breakdown: dict | None) -> list[str]:
    """Lines for the CLI table: which runs the network figure compares, lower bounds and overlap.

    An exposed time is printed only when it is positive beyond its 95% interval; within the noise the
    column says so and a line below gives the interval and the least share hidden; a negative one beyond
    the noise is not resolved (backward cannot get faster by adding workers) and is explained below.
    """
    if not breakdown:
        return []
    lines = []
    if breakdown.get("network_reference"):
        lines.append(f"network figure compares {breakdown['network_reference']}")
    communication = breakdown.get("communication") or {}
    rows = [(stall, bounds) for stall, bounds in communication.items()
            if bounds and bounds.get("allreduce_s") is not None]  # fmt: skip
    if not rows:
        return lines + _links_alone(communication)
    first = rows[0][1]
    lines.append(
        f"gradient all-reduce of {format_size(first['grad_bytes'])} in {first['buckets']} DDP bucket(s), "
        "from the probes:"
    )
    lines.append(
        f"  {'':<14}{'workers':>8}{'measured':>11}{'lower bound':>13}{'link limit':>12}{'wire bw':>14}"
        f"{'exposed':>15}{'hidden':>8}"
    )
    notes = []
    stalls = breakdown.get("stalls") or {}
    for stall, bounds in rows:
        reading = overlap_reading(bounds, (stalls.get(stall) or {}).get("ci95_s"))
        exposed, hidden = _overlap_cells(reading)
        lines.append(
            f"  {stall:<14}{bounds['world_size']:>8}{format_time(bounds['allreduce_s']):>11}"
            f"{format_time(bounds.get('lower_bound_s')):>13}{format_time(bounds.get('link_lower_bound_s')):>12}"
            f"{format_rate(bounds.get('wire_busbw_gbps')):>14}{exposed:>15}{hidden:>8}"
        )
        if reading["text"]:
            source = " (interval of the stall)" if reading["interval_source"] == "stall" else ""
            notes.append(f"  {stall}: {reading['text']}{source}")
    return lines + notes + list(COLUMNS_SAID)


def _links_alone(communication: dict) -> list[str]:
    """What the probes' all-reduce reached where the gradients' size is not known (a script's own model):
    no lower bound or overlap can be told, but the links' rate and call latency are measured."""
    rows = [(stall, bounds) for stall, bounds in communication.items() if bounds
            and bounds.get("note") == GRADIENT_BYTES_UNKNOWN and bounds.get("wire_busbw_gbps") is not None]
    if not rows:
        return []
    lines = ["all-reduce from the probes (the gradients' size is not known, so no lower bound or "
             "overlap):"]  # fmt: skip
    for stall, bounds in rows:
        lines.append(
            f"  {stall:<14}{bounds.get('world_size')} workers: wire bw "
            f"{format_rate(bounds['wire_busbw_gbps'])} (largest messages), call latency "
            f"{format_time(bounds.get('latency_s'))}"
        )
    return lines


# What each column is (the achieved bus bandwidth is not the wire's: it is the probe's bytes over its time).
COLUMNS_SAID = (
    "  measured: the probe's all-reduce of the gradients; lower bound: each bucket's call latency plus the "
    "ring's bytes at the wire bw;",
    "  link limit: the ring's bytes at the slowest emulated link's rate; wire bw: the bus bandwidth with the "
    "call latency taken off (largest messages);",
    "  exposed: how much longer backward took than in the reference run; hidden: the share of the added "
    "all-reduce time that backward overlapped",
)


def _overlap_cells(reading: dict) -> tuple[str, str]:
    """The exposed and hidden cells of one row of the communication table."""
    if reading["state"] == "exposed":
        hidden = reading["hidden_share"]
        return format_time(reading["exposed_s"]), f"{hidden:.0%}" if hidden is not None else "-"
    if reading["state"] == "within_noise":
        least = reading["hidden_at_least"]
        return "within noise", f">={least:.0%}" if least is not None else "-"
    if reading["state"] == "negative":
        return "not resolved", "-"
    return "-", "-"
