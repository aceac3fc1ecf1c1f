"""spotDNN's workload profiling, the measuring half: parameter-server trainings with 1, 2, 4, 7 workers.

Here over loopback, or on an emulated cluster (`cluster`): the PS on node 0, each worker on its own node.
Each worker count is one real asynchronous PS training (launch/ps.py); its records become, per count:
  bandwidth      per worker, 2 S_parm / (push + pull time), queueing at the PS included (B_wk of eq. 8);
                 at one worker it is B_req
  p_bottleneck   the share of exchanges whose push began while the PS was serving another worker (P of
                 eq. 9, observed)
  ps_Bps         bytes the PS moved per second it spent serving (receive, update, reply): B_ps
  compute_s      a worker's forward and backward at its batch here (T_comp on this machine)
The arithmetic of a training's records is spot/ps_exchanges.py's; the fit of a1, b1 and the workload file
are spot/contention.py's.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from stash_core.errors import MeasurementError, UsageError
from stash_core.launch.ps import cluster_machines, run_ps_training
from stash_core.spot.ps_exchanges import BYTES_PER_PARAM, CountMeasure, summarise_ps_training

PROCESS_BYTES = 400e6  # an imported torch with gloo, before the model
LOOPBACK = "this machine over loopback"
DEFAULT_COUNTS = (1, 2, 4, 7)  # spotDNN profiles contention on 2, 4 and 7 workers, and one worker alone


@dataclass
class ContentionProfile:
    model: str
    batch: int
    param_count: int
    counts: list[CountMeasure]
    notes: list[str]
    source: dict = field(default_factory=lambda: {"where": LOOPBACK})

    @property
    def param_bytes(self) -> int:
        return self.param_count * BYTES_PER_PARAM


def holdable_counts(counts: list[int], param_count: int | None = None) -> tuple[list[int], list[str]]:
    """The worker counts this machine's memory holds (each process: torch + the model's copies), and notes
    on what was dropped and on workers sharing cores."""
    available = _available_bytes()
    per_process = PROCESS_BYTES + 6 * BYTES_PER_PARAM * (param_count or 0)
    most = int(0.7 * available / per_process) - 1 if available else max(counts)
    kept = [n for n in counts if n <= most]
    notes = []
    if len(kept) < len(counts):
        dropped = ", ".join(str(n) for n in counts if n > most)
        notes.append(f"left out {dropped} worker(s): this machine's memory holds a PS and at most {most}")
    cores = os.cpu_count() or 1
    if kept and max(kept) + 1 > cores:
        notes.append(
            f"{max(kept) + 1} processes share {cores} cores: with many workers, compute slows and waiting "
            "for a core adds to the PS contention measured"
        )
    return kept, notes


def _available_bytes() -> int:
    try:
        with open("/proc/meminfo") as handle:
            for line in handle:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def measure_contention(model: str, batch: int, counts: list[int], duration_s: float,
                       num_classes: int | None = None, input_shape: str | None = None,
                       on_count=None, cluster: str | None = None,
                       cluster_state: Path | None = None) -> ContentionProfile:  # fmt: skip
    """One PS training per worker count this machine holds (all in one launch), on emulated cluster
    `cluster` when named; `on_count(measure)` for each."""
    counts, notes, remote, source = sorted(set(counts)), [], None, {"where": LOOPBACK}
    if cluster is not None:
        remote = cluster_machines(cluster, cluster_state)
        counts, notes, source = cluster_counts(counts, len(remote.targets), cluster, remote.link)
    kept, memory_notes = holdable_counts(counts)
    notes += memory_notes
    if not kept:
        raise MeasurementError("this machine's memory holds no parameter-server training")
    runs = run_ps_training(kept, model, batch, duration_s, num_classes, input_shape, remote=remote)
    measures, param_count = [], 0
    for n in kept:
        param_count, measure = summarise_ps_training(runs[n])
        measures.append(measure)
        if on_count is not None:
            on_count(measure)
    return ContentionProfile(model, batch, param_count, measures, notes, source)


def cluster_counts(counts: list[int], nodes: int, name: str,
                   link: dict | None) -> tuple[list[int], list[str], dict]:  # fmt: skip
    """The worker counts a cluster of `nodes` nodes holds (a PS node plus one node per worker), the notes
    on those left out and where it ran; UsageError when too few are left for the fit."""
    most = nodes - 1
    kept = [n for n in counts if n <= most]
    if 1 not in kept or len([n for n in kept if n >= 2]) < 2:
        raise UsageError(
            f"the emulated cluster {name} has {nodes} node(s): a PS and at most {most} worker(s); the fit "
            f"needs 1 and two counts of 2 or more (bring it up with more nodes, or give fewer --workers)"
        )
    link = dict(link or {})
    where = f"emulated cluster {name}, PS on node 0 and one worker per node"
    if link.get("rate_bps"):
        where += f", links {link['rate_bps'] / 1e6:g} Mbit/s"
    if link.get("netem"):
        where += f", latency {link.get('latency_us', 0) / 1e3:g} ms"
    elif link:
        where += ", no latency emulated (no netem here)"
    notes = [f"measured on the {where}"]
    if len(kept) < len(counts):
        dropped = ", ".join(str(n) for n in counts if n > most)
        notes.append(f"left out {dropped} worker(s): the emulated cluster {name} has {nodes} node(s), "
                     f"a PS and at most {most} worker(s)")  # fmt: skip
    source = {"where": "emulated cluster", "cluster": name, "nodes": nodes, "link": link,
              "layout": "PS on node 0, worker i on node i"}  # fmt: skip
    return kept, notes, source
