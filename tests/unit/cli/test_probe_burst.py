"""A probe of the emulated cluster that reads a message faster than the links' rate says why (the shaper's
burst), rather than show 295 Mbit/s on a 200 Mbit/s link without a word; other probes say nothing."""

from __future__ import annotations

from stash_core.cli.probe_text import burst_note, format_probe

PROBE = {
    "machines": "emulated cluster lab (2 of 2 nodes)", "link_gbps": 0.2, "world_size": 2, "nodes": 2,
    "backend": "gloo", "device": "cpu",
    "allreduce": [{"size_bytes": 4 << 20, "repetitions": 1, "time_s": 0.17, "algbw_gbps": 0.192,
                   "busbw_gbps": 0.192}],
    "p2p": [{"scope": "inter_node", "size_bytes": 65536, "time_s": 0.0018, "algbw_gbps": 0.295}],
}  # fmt: skip


def test_a_message_faster_than_the_emulated_link_is_said_with_the_shaper_s_burst() -> None:
    note = burst_note(PROBE)
    assert note is not None and note.startswith("  note: 64 KiB read faster than the links' 200 Mbit/s")
    assert "lets 97.7 KiB through at once" in note  # 4 ms of 200 Mbit/s
    assert format_probe(PROBE).splitlines()[-1] == note


def test_within_the_rate_or_on_real_machines_nothing_is_said() -> None:
    slower = {**PROBE, "p2p": [{**PROBE["p2p"][0], "algbw_gbps": 0.2}]}
    assert burst_note(slower) is None
    assert burst_note({**PROBE, "machines": "hosts a, b"}) is None
    assert burst_note({**PROBE, "link_gbps": None}) is None


def test_a_peer_on_the_same_machine_never_crossed_a_link_so_is_no_burst() -> None:
    """16.8 Gbit/s to a peer of the same node was said to have been let through by the links' shaper."""
    slower = {**PROBE, "p2p": [{**PROBE["p2p"][0], "algbw_gbps": 0.19}]}
    same_node = {**slower, "p2p": [*slower["p2p"], {"scope": "intra_node", "size_bytes": 16 << 20,
                                                     "time_s": 0.008, "algbw_gbps": 16.77}]}  # fmt: skip
    assert burst_note(same_node) is None
    one_node = {**PROBE, "nodes": 1, "p2p": [], "allreduce": [{**PROBE["allreduce"][0], "algbw_gbps": 9.0}]}
    assert burst_note(one_node) is None
