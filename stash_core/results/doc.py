"""The result-file section of docs/schema.md: the format that stash_core/results/file.py writes and reads.

Rendered by `python -m stash_core.store.schema_markdown`; keep it in step with file.py.
"""

from __future__ import annotations

import textwrap

from stash_core.results.file import PROBE_KIND, RESULT_KIND, SCHEMA_VERSION

# Top-level keys: "key(s) | required | meaning"; an indented line continues the meaning above it.
_KEYS = """
        schema_version | yes | integer, `{SCHEMA_VERSION}` (`stash_core.results.SCHEMA_VERSION`)
        kind | yes | always `"{RESULT_KIND}"`; a file without it is not a Stash result
        run_id | yes | unique id of the run
        status | yes | `completed`, `failed` or `interrupted`
        error | | one-line reason when not completed
        started_at, finished_at | `started_at` | ISO 8601 times with offset (a time without offset is taken
            as UTC)
        stash_version | | producing Stash version
        spec | yes | run configuration: `model`, `batch_size`, `workers_per_node`, `nodes`, `stalls`,
            `dataset`, `dataset_images`, `synthetic_images`, `loader_workers`, `iterations`, `device` (cpu
            or cuda; auto in a run that failed before it was chosen), `backend` (gloo or nccl), `instance`,
            `threads_per_worker`, `disk_read_mbps`, `input_shape`, `num_classes`, `hosts`; the first four
            always present (a script's `batch_size` may be null)
        model | | `name`, `kind`, `param_count`, `grad_tensor_count`, `layer_count`, `grad_bytes` (may be
            null for an early failure)
        fingerprint | | hardware/software fingerprint: `hostname`, `instance`, `cpu_model`,
            `cpu_cores_logical`, `cpu_cores_physical`, `memory_bytes`, `gpu_count`, `gpus`, `gpu_status`,
            `gpu_topology`, `torch_version`, `cuda_version`, `nccl_version`, `python_version`, `os`
        phases | yes | list of phases that ran (possibly empty), see below
        breakdown | | stall breakdown, or null for a failed run
        probes | | list of probe sets of the run (one per multi-worker run, `R1` and `R1n`), see below; may
            be absent
        hosts | | multi-machine runs: what each host reported (`host`, `hostname`, `python_version`,
            `torch_version`, `stash_version`, `cpu_count`, `gpu_count`, `gpu_status`)
"""

_INTRO = """\
One UTF-8 JSON document per profile, written atomically (temporary file in the same folder, fsync, rename), by
default to `results/<run_id>.json`. Non-finite numbers are written as `null`. Top-level keys:

"""

_DETAILS = """\
Each phase: `name` (R0, R1, R1n, R3, R2; unique), `description`, `workers`, `nodes`, `data`, `status`,
`error`, `resident_fraction_start`, `warmup_iterations`, `iterations`, `iteration_s` (`mean`, `ci95`, `std`,
`median`, `p5`, `p95`, `n`), `parts_mean_s` (`data_s`, `forward_s`, `backward_s`, `optimizer_s`), `samples`
(lists `iteration_s`, `data_s`, `forward_s`, `backward_s`, `optimizer_s`, `slowest_rank`, one value per kept
iteration: the mean over the ranks, the slowest rank's in files of Stash 0.1, and the slowest rank; non-empty
lists must have equal length, an empty list means "not recorded"),
`rank_skew_s`, `wall_s`, `started_s` (when its first launch started, seconds after the profile's first
launch started), `machine_load` (what this machine's /proc/stat measured over its first launch: `wall_s`,
`other_cpu_s` and `steal_s`, the CPU seconds other processes used and the hypervisor took, and `cores`, its
logical cores; null
where it cannot be read), `telemetry` (`interval_s`, `gpu_status`, `t_s` list: when each sample was taken, in
seconds since the profile's first launch started (files written before this held seconds since the run's own
start), `metrics` mapping each metric name to a list with one value per `t_s`). A run over several machines
also has `ranks`: per rank its `rank`, `hostname`, `node` and its own mean `iteration_s`, `data_s`,
`forward_s`, `backward_s`, `optimizer_s` over the kept iterations; its telemetry is sampled by rank 0 on the
first machine.

A run launched several times (`--launches K`, in rounds) keeps `launches_planned` (K) and `launches`: per
launch its `round` (from 0), `pooled` (whether its round is in the pooled figures: only rounds every run
completed are), `mean_s`, `ci95_s` (its own iterations' interval), `iterations`, `warmup_iterations`,
`stop_reason`, `wall_s`, `started_s` (when it started, on the profile's clock), `resident_fraction_start`,
`other_cores` (other processes' CPU time over the launch's wall time, steal included: the cores they kept
busy on average; measured from /proc/stat on the machine that launched it, null elsewhere). Where R0 and R1
were timed in one launch, in alternating blocks (`--paired`, engine/paired.py), each of their launches also
has `groups_s`, the mean step time of each group of blocks (A B B A or B A A B) after the warm-up groups; the
groups are the rounds their intervals and the interconnect stall's paired interval are taken over (a launch of
a single group gives its iterations' own interval instead: one group has no spread to take), and the run has
`paired_blocks` (`block_steps`, `groups`, `warmup_groups` of its first launch). Its
`iteration_s.mean` is then the plain mean of the pooled launches' means and `iteration_s.ci95` the pooled
interval; `pooled` repeats them with `between_ci95` (Student t over the rounds; null with one), `within_ci95`
(the iterations' own) and `rounds`. `samples` holds the pooled launches' kept samples one after the other
(`telemetry` their samples likewise), `warmup_iterations`, `iterations` and `wall_s` their sums, `stop_reason`
a cap when any launch stopped at one. A real-data run has `epoch_boundary_crossed`: whether one of its
launches ran past the end of an epoch.

The spec of a multi-machine profile adds `hosts` (host names, one per node), `ssh_user`, `ssh_key` (the key's
path only, never its contents), `ssh_config` (the ssh_config file's path, `ssh -F`), `remote_python`, `remote_workdir`, `cluster` (`"emulated"` or null),
`cluster_bandwidth` (the rate the profile set on the emulated links, e.g. `"200mbit"`), `master_addr`,
`master_port`, `comm_timeout_s`, `probes` (whether R1/R1n probed), and on the emulated cluster `network`
(`kind` `"emulated"`, `bandwidth_bps`, `rate_bps`, `latency_us`, `loss_pct`: the bottleneck of the nodes used,
their lowest rate, longest delay and highest loss; `netem`: whether the kernel could emulate latency and loss
at all).

A run that a cloud campaign (`stash campaign --cloud`) brought back has `cloud` in its spec: `provider`,
`region`, `instance_type` (also its `instance` label), `pricing` (`on-demand` or `spot`), `usd_per_h` (the
catalog's hourly price the plan used), `price_date`, `price_region` (the region of that price, when the
catalog says) and `cluster` (the SkyPilot cluster it ran on).

Each probe set: `probe_id`, `run_id`, `phase`, `instance`, `link_gbps`, `started_at`, `hostname`, `backend`
(gloo or nccl), `device` (cpu or cuda), `world_size`, `nodes`, `workers_per_node`, `allreduce` (list of
`size_bytes`, `repetitions`, `time_s`, `time_min_s`, `algbw_gbps`, `busbw_gbps`), `skipped_sizes_bytes`
(sizes left out because one call would have taken longer than a third of the communication timeout),
`gradient_allreduce` (same fields plus
`buckets`, or null), `p2p` (list with `scope`, `peer_rank` and the same fields), `skipped_p2p` (list of
`scope` and `size_bytes`: point-to-point messages left out by the same rule, their time predicted from a
ping-pong of 4 KiB). `stash probe --out FILE`
writes one probe set as its own document with `"kind": "{PROBE_KIND}"`, `schema_version` {SCHEMA_VERSION}
and `probe_id`; `stash ingest` takes such files too.

`breakdown`: `iteration_s`, `iteration_ci95_s`, `iterations_per_epoch`, `epoch_s`, `epoch_ci95_s`,
`reference_phase`, `stalls` (`compute`, `interconnect`, `network`, `cpu`, `disk`, each with `seconds`,
`ci95_s`, `share`, `epoch_s`, `epoch_ci95_s`, `status`, `note`; an `epoch_ci95_s` is the per-iteration
`ci95_s` times `iterations_per_epoch`: an epoch's time is estimated as its iterations times their mean, so
this is the interval of that estimate; a stall entry without `status` is stored as `measured` when it has
seconds, else `not_measured`; a stall within the noise has status `clamped_zero`, seconds 0 and its signed
difference in `raw_s`; a `not_separable` one no seconds, and in `raw_s` the difference its runs differ by,
counted in the remainder, on the last stall of several that one difference spans), `unattributed`, the
signed remainder (label `"not separated"`): what the named stalls
cannot claim, so that compute + interconnect + network + cpu + disk + unattributed = `iteration_s` exactly and
the shares add up to 1, with `label`, `seconds` (`iteration_s` minus the five stalls, null stalls counting as
0; may be negative), `ci95_s` (the interval of the combination of run times it is), `share`, `epoch_s`,
`epoch_ci95_s`, `status` (`none` when the stalls add up, `within_noise` when its size is within `ci95_s`, else
`not_separated`), `note`, `parts` (what it holds, each with `kind`: `within_noise` for a difference reported
as 0, `gap` for the difference across a run missing from the chain, which mixes several stalls,
`not_separable` for a stall that cannot be told apart, `no_compute_run` when R0 did not run
(`no_compute_stored` where a stored run's rows say so); `what` and signed `seconds`) and `estimated` (true
when the interval was estimated because the file had none); `unattributed_s` and `unattributed_ci95_s` repeat
its `seconds` and `ci95_s`; and `warnings` (list of strings; when the first
says the breakdown is physically impossible, for example a run with more workers faster than one with fewer,
`impossible` is true, and false when it says only that the runs did different work per process). A file
written before the remainder existed has none of the three: readers compute it from the stalls
(`stash_core.analysis.stalls.remainder_of`, the interval estimated from the within-noise stalls' intervals in
quadrature, else `iteration_ci95_s`), and the store keeps the recomputed one for every file
(`runs.unattributed_s`, `runs.unattributed_ci95_s`). A multi-machine profile adds `network_reference`, the
pair of runs the network figure compares (e.g. `"R1 (4 workers, 1 machine) vs R1n (2x4 workers)"`; also the
network stall's `note`), and a profile that probed adds `communication`: per stall (`interconnect` from R1's
probe against R0, `network` from R1n's against the run before it) `grad_bytes`, `world_size`, `buckets`
(DDP's), `busbw_gbps` (peak measured), `wire_busbw_gbps` (bus bandwidth with the call latency taken off),
`latency_s` (fastest smallest all-reduce), `lower_bound_s` (ring all-reduce lower bound: buckets × latency +
2(n-1)/n × gradient bytes / wire bus bandwidth), `link_gbps` and `link_lower_bound_s` (2(n-1)/n × gradient
bytes / the slowest emulated link's rate; null elsewhere), `alpha_s`, `beta_s_per_byte` and `alpha_beta_s`
(α-β fit of the probe and its prediction), `allreduce_s` (measured gradient all-reduce on this layout),
`reference_allreduce_s` and `added_allreduce_s` (minus the reference run's), `exposed_s` (how much longer
backward took than in the reference run), `overlap_share` (share of the added all-reduce time hidden behind
backward: 1 − exposed / added, clamped to 0..1) and `stall_over_lower_bound`.

Reading a file (`stash_core.results.load_result`) fails with one line naming the file when it is missing,
empty, not UTF-8, not JSON or truncated, not a Stash result (no `"kind": "{RESULT_KIND}"`), of a newer
`schema_version` ("result file has schema_version 3; this Stash reads up to {SCHEMA_VERSION} - upgrade
Stash"), missing a required key, or internally inconsistent (sample lists of different lengths, a telemetry
metric without one value per time, unknown status values, duplicate phase names).
"""


def _key_rows() -> list[str]:
    rows: list[str] = []
    for line in textwrap.dedent(_KEYS).strip("\n").splitlines():
        if line[:1].isspace():
            rows[-1] += " " + line.strip()
        else:
            rows.append(line)
    table = []
    for row in rows:
        keys, required, meaning = (cell.strip() for cell in row.split("|", 2))
        names = ", ".join(f"`{key.strip()}`" for key in keys.split(","))
        table.append(f"| {names} | {required} | {meaning} |" if required else f"| {names} | | {meaning} |")
    return table


def _paragraphs(text: str) -> str:
    """Each paragraph filled to lines of at most 110 characters."""
    return "\n\n".join(
        textwrap.fill(" ".join(paragraph.split()), width=110, break_long_words=False, break_on_hyphens=False)
        for paragraph in text.strip("\n").split("\n\n")
    )


def result_file_section() -> str:
    """The "Result file" section of docs/schema.md."""
    fill = {"SCHEMA_VERSION": SCHEMA_VERSION, "RESULT_KIND": RESULT_KIND, "PROBE_KIND": PROBE_KIND}
    table = "\n".join(["| key | required | meaning |", "|---|---|---|", *_key_rows()]).format(**fill)
    heading = f"## Result file (JSON, `schema_version` {SCHEMA_VERSION})"
    parts = [heading, _paragraphs(_INTRO.format(**fill)), table, _paragraphs(_DETAILS.format(**fill))]
    return "\n\n".join(parts) + "\n"
