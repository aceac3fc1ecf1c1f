"""The tables of the store, documented: every column's name, unit and meaning (schema_docs.py turns them, with
the views, into the database's COMMENT ON metadata and docs/schema.md's column tables)."""

from __future__ import annotations

import textwrap
from dataclasses import dataclass


@dataclass(frozen=True)
class ColumnDoc:
    """One column: its name (`<stall>` in a view column stands for each stall), unit and meaning."""

    name: str
    meaning: str = ""
    unit: str = ""
    borrowed_from: str = ""  # a view column that means what the same column of this table means


@dataclass(frozen=True)
class RelationDoc:
    """One table or view: the heading's summary ("one row per profile"), the paragraph under the heading
    (both make the relation's comment) and its columns in table order."""

    name: str
    summary: str
    about: str
    columns: tuple[ColumnDoc, ...]
    kind: str = "table"


def table(text: str) -> tuple[ColumnDoc, ...]:
    """Columns from lines "name | unit | meaning"; an indented line continues the meaning above it."""
    lines: list[str] = []
    for line in textwrap.dedent(text).strip("\n").splitlines():
        if line[:1].isspace() and lines:
            lines[-1] += " " + line.strip()
        elif line.strip():
            lines.append(line.strip())
    columns = []
    for line in lines:
        name, unit, meaning = (cell.strip() for cell in line.split("|", 2))
        columns.append(ColumnDoc(name=name, unit=unit, meaning=meaning))
    return tuple(columns)


SCHEMA_META = RelationDoc(
    "schema_meta",
    "settings of the store, one row per key",
    "",
    table(
        """
        key | | setting name: `schema_version` (version of the database layout) or `comments_digest`
            (digest of the table, view and column comments and the view's definition last applied; a writer
            re-applies them when its own differ)
        value | | its value
        """
    ),
)

RUNS = RelationDoc(
    "runs",
    "one row per profile",
    "",
    table(
        """
        run_id | | unique id of the profile, e.g. `20261122T104100Z-3f2a9c1b` (UTC start time + random
            suffix)
        started_at | UTC | when the profile started
        finished_at | UTC | when it ended (NULL if it never finished cleanly)
        status | | `completed`, `failed` or `interrupted`
        error | | one-line reason when not completed, else NULL
        model | | model name (`resnet18`, or `FILE.py:FACTORY` for a user model)
        model_kind | | kind of model/input, e.g. `image`
        batch_size | samples | per-worker batch size
        workers_per_node | | training processes per machine (GPUs per node, or CPU workers)
        nodes | | number of machines
        instance | | instance type or machine label (joins `instances.name` when known)
        device | | `cuda` or `cpu`
        backend | | torch.distributed backend, `nccl` or `gloo`
        dataset | | absolute path of the real data set; NULL when only synthetic data was used
        dataset_images | samples | number of samples in the data set
        iterations_per_epoch | | iterations of one epoch over the data set with this batch size and worker
            count
        loader_workers | | data-loader processes per training worker (a script's own DataLoader's; NULL when
            not known)
        param_count | | trainable parameters of the model
        grad_tensor_count | | gradient tensors synchronised per iteration
        layer_count | | layers with parameters
        grad_bytes | bytes | gradient bytes synchronised per iteration
        iteration_s | s | realistic iteration time (mean of the reference phase, normally R2; a run that did
            not complete has its last completed phase's, e.g. `R0`'s, one worker's); NULL without breakdown
        iteration_ci95_s | s | 95 % CI half-width of `iteration_s`
        epoch_s | s | `iteration_s × iterations_per_epoch`
        reference_phase | | phase whose time is `iteration_s`: the last phase of the chain that ran (`R2`
            where the real data ran, else `R1n`, `R1` or `R0`)
        hostname | | host name of the machine that ran rank 0
        stash_version | | Stash version that produced the result
        schema_version | | result-file schema version after migration (the file format's, not the database
            layout's: that is `schema_meta`'s `schema_version`)
        spec | | the full, validated run configuration (see result file `spec`)
        fingerprint | | hardware and software fingerprint (CPU, memory, GPUs, topology, torch/CUDA/NCCL
            versions, OS)
        warnings | | list of warning strings of the breakdown (e.g. data set partly cached); `[]` when none
        unattributed_s | s | signed remainder ("not separated"): `iteration_s` minus the five stalls
            (differences within the noise reported as 0, gaps in the chain, not separable stalls, e.g. CPU
            and disk of a data set that does not fit in memory); compute + interconnect + network + cpu +
            disk + `unattributed_s` = `iteration_s` (NULL stalls count as 0). 0 when the stalls add up; may
            be negative; NULL without `iteration_s`
        unattributed_ci95_s | s | 95 % CI half-width of `unattributed_s` (that of the combination of run
            times it is; estimated for result files written before it was stored: the within-noise stalls'
            intervals in quadrature, else `iteration_ci95_s`); 0 when there is no remainder; NULL for runs
            stored before schema version 3
        network_reference | | which pair of runs the network stall compares, e.g. `R1 (2 workers, 1 machine)
            vs R1n (2x1 workers)`; NULL on one machine
        communication | | per communication stall (`interconnect`, `network`): the probes' all-reduce time,
            lower bound, link limit, wire bus bandwidth, exposed time and overlap share (result file
            `breakdown.communication`); NULL without probes
        hosts | | what each host of a run on remote hosts or the emulated cluster reported (result file
            `hosts`: host, hostname, Python, torch and Stash versions, CPU and GPU count); NULL on this
            machine alone and for runs stored before schema version 8
        source_file | | absolute path of the result file it was ingested from; `upload:NAME` for a file
            uploaded on the dashboard (NAME as uploaded); NULL when ingested from memory
        ingested_at | UTC | when the row was written
        """
    ),
)

PHASES = RelationDoc(
    "phases",
    "one row per differential run (phase) of a profile",
    "Primary key (`run_id`, `phase`). Only phases that ran are present.",
    table(
        """
        run_id | | the profile (`runs.run_id`)
        phase | | `R0` 1 worker synthetic data; `R1` W workers on one machine, synthetic; `R1n` W workers
            over N machines, synthetic; `R3` real data fully in the page cache; `R2` real data evicted from
            the page cache
        phase_index | | position of the phase in the result file (0-based), i.e. the order it ran in
        description | | human-readable description
        workers | | training processes in this phase (all machines)
        nodes | | machines in this phase
        data | | `synthetic` (made on the device), `cached` (real, in page cache) or `cold` (real, evicted)
        status | | `completed`, `failed`, `skipped` or `interrupted`
        error | | one-line reason when not completed
        warmup_iterations | | iterations run and discarded before the kept samples
        iterations | | kept samples (rows in `iterations` for this phase)
        mean_s | s | mean iteration time (each iteration the mean over the ranks); over several launches the
            mean of the launches' means (docs/profiling.md), so not always the mean of the `iterations` rows
        ci95_s | s | 95 % CI half-width of `mean_s`
        std_s | s | sample standard deviation of the iteration time
        median_s | s | median iteration time
        p5_s | s | 5th percentile of the iteration time
        p95_s | s | 95th percentile of the iteration time
        data_s | s | mean time waiting for the next batch (each iteration the mean over the ranks)
        forward_s | s | mean forward pass
        backward_s | s | mean backward pass, including gradient synchronisation
        optimizer_s | s | mean optimizer step
        rank_skew_s | s | mean over iterations of (slowest - fastest rank iteration time); 0 with one worker;
            null where not measured (a script's ranks not gathered at its end)
        resident_fraction_start | fraction | share of the data set in the page cache when the phase started
            (real-data phases only)
        wall_s | s | wall-clock time of the whole phase incl. start-up and warm-up; R0 and R1 timed in one
            launch split its time: R0 the time of its own timed blocks, R1 the rest (start-up included)
        telemetry_interval_s | s | sampling interval of the phase's telemetry
        """
    ),
)

ITERATIONS = RelationDoc(
    "iterations",
    "one row per kept training iteration",
    "No key and no index (it can hold tens of millions of rows); filter by `run_id` and `phase`. Every time "
    "is the **mean over the ranks** of that iteration (the slowest rank's in runs of Stash 0.1).",
    table(
        """
        run_id | | the profile
        phase | | the phase
        iteration | | 0-based index of the kept iteration (warm-up iterations are not stored)
        iteration_s | s | iteration time
        data_s | s | time waiting for the batch
        forward_s | s | forward pass
        backward_s | s | backward pass including gradient synchronisation
        optimizer_s | s | optimizer step
        slowest_rank | | global rank that was the slowest in this iteration
        """
    ),
)

TELEMETRY = RelationDoc(
    "telemetry",
    "utilisation samples, long format",
    "No key and no index. One row per (phase, sample time, metric); a metric the machine cannot report is "
    "simply absent. R0 and R1 timed in one launch (a paired profile, the default) share that launch's "
    "samples: each is stored under both phases, so count a launch's samples once (one of the two phases, or "
    "DISTINCT t_s, metric).",
    table(
        """
        run_id | | the profile
        phase | | the phase being run when sampled (R0 and R1 timed in one launch: both, the same samples)
        t_s | s | when sampled: seconds since the profile's first launch started, over all of the run's
            launches (runs stored before every launch's telemetry was kept: since the run started)
        metric | | metric name: `cpu_util_pct` (all cores, %), `cpu<i>_util_pct` (core i, %),
            `mem_used_bytes`, `disk_read_mbps`, `disk_write_mbps`, `net_rx_mbps`, `net_tx_mbps` (MB/s), and
            on GPUs `gpu<i>_util_pct`, `gpu<i>_mem_used_bytes`, `gpu<i>_power_w` (watts),
            `gpu<i>_pcie_rx_mbps`, `gpu<i>_pcie_tx_mbps`, `gpu<i>_nvlink_mbps`
        value | per metric | sampled value; NULL when the sample failed
        """
    ),
)

STALLS = RelationDoc(
    "stalls",
    "one row per stall of a profile",
    "Primary key (`run_id`, `stall`). A failed run without a breakdown has no rows. Together with the "
    "signed remainder `runs.unattributed_s`, which has no row here, the stalls of a run add up to its "
    "iteration time: the five stalls plus `unattributed_s` make `iteration_s` (NULL terms count as 0).",
    table(
        """
        run_id | | the profile
        stall | | `compute` (= t(R0)), `interconnect` (= t(R1) - t(R0)), `network` (= t(R1n) - t(R1)), `cpu`
            (= t(R3) - t(R1 or R1n)), `disk` (= t(R2) - t(R3))
        seconds | s | stall per iteration; NULL when `not_measured` or `not_separable`
        ci95_s | s | 95 % CI half-width of `seconds`
        share | fraction | `seconds / runs.iteration_s`
        epoch_s | s | stall per epoch, `seconds × iterations_per_epoch`
        status | | `measured`; `clamped_zero` (difference negative but within noise, reported as 0);
            `negative` (the later run faster beyond the noise: kept as measured, with a warning);
            `not_measured` (not asked for or not applicable, e.g. network on one machine); `not_separable`
            (e.g. data set larger than memory, so CPU and disk cannot be told apart)
        note | | short explanation, may be empty; a `not_measured` stall's says why (not asked for; one
            worker, one machine, no data loaded; its runs did not all finish); empty in runs stored before
        raw_s | s | the signed difference of run times the stall is, as measured: for a `clamped_zero` stall
            the small difference its `seconds` reports as 0, for a `not_separable` one the difference its
            runs differ by, counted in the remainder (on the last stall of several one difference spans),
            else `seconds` itself; NULL where there is none
            and for stalls stored before the database layout's version 6 (`schema_meta`'s `schema_version`)
        """
    ),
)

MODELS = RelationDoc(
    "models",
    "one row per model name",
    "Upserted from every ingested run: the counts of the run ingested last that knew them; a run that does "
    "not know a value (e.g. failed before building the model) never blanks a value another run stored. A "
    "model trained with other classes or another input has other counts: each run's own are in `runs` "
    "(`param_count`, `grad_tensor_count`, `layer_count`, `grad_bytes`), which the fits read; `stash "
    "recommend` counts the job's model itself where Stash can build it.",
    table(
        """
        name | | model name as in `runs.model`
        kind | | kind of model/input, e.g. `image`
        param_count | | trainable parameters
        grad_tensor_count | | gradient tensors per iteration
        layer_count | | layers with parameters
        grad_bytes | bytes | gradient bytes synchronised per iteration
        """
    ),
)

INSTANCES = RelationDoc(
    "instances",
    "machine and cloud instance catalogue",
    "Every new database holds the catalogue shipped with Stash; `stash instances import --skypilot` adds or "
    "updates rows from SkyPilot's price catalogue, and `stash instances add/set` (or the dashboard) rows of "
    "the user, which no import overwrites.",
    table(
        """
        name | | instance type (e.g. `p4d.24xlarge`) or machine label, as in `runs.instance`
        provider | | cloud provider or `local`
        accelerator | | accelerator model, NULL for CPU-only
        accelerator_count | | accelerators per instance
        vcpus | | virtual CPUs
        memory_gib | GiB | main memory
        network_gbps | Gbit/s | network bandwidth between instances
        interconnect | | accelerator interconnect, e.g. `NVLink`, `PCIe`
        on_demand_usd_per_h | USD/h | on-demand price
        spot_usd_per_h | USD/h | typical spot price
        price_date | | date the prices were taken
        source | | where the prices come from
        region | | cloud region the prices are for; NULL when not known
        origin | | where the row comes from: `builtin` (the catalogue shipped with Stash), `import` (a price
            catalogue import) or `user` (added or edited by the user; imports leave it as it is)
        """
    ),
)

SIMULATIONS = RelationDoc(
    "simulations",
    "cluster-scheduling simulations, one row per policy of a simulation",
    "Filled by `stash schedule` (and the Schedule page) from its result file: a simulated shared GPU cluster "
    "placing the jobs of one trace under each policy. Key (`simulation_id`, `policy`); a simulation is "
    "ingested once. Times are simulated seconds from the trace's first arrival.",
    table(
        """
        simulation_id | | the simulation: `sim-<UTC time>-<hex>`, shared by its policies' rows
        policy | | scheduling policy, one of `fifo`, `sjf`, `las`, `fifo-consolidate`, `consolidate`,
            `spread`, `delay`, `network-delay`, `network-preempt`
        created_at | UTC | when the simulation was run
        trace | | the trace: its file and format, or `synthetic(N jobs, seed S, A arrivals)`
            (`Philly-like(...)` from the Philly-like generator)
        trace_format | | format the trace was read in, one of `tiresias`, `philly`, `pai2020`, `helios`,
            `synthetic` (a generated trace)
        jobs | | jobs simulated
        switches | | switches of the simulated cluster
        nodes_per_switch | | nodes under each switch
        gpus_per_node | | GPUs per node
        cluster_gpus | | GPUs in all
        fabric | | the network fabric as simulated (uplink bandwidths, oversubscription, slowdown factors)
        settings | | the policy's settings (timers, scales, checkpoint cost, ...)
        tuning | | how the policy's timers were set (given, tuned online, tuned on part of the trace)
        makespan_s | s | last finish minus first arrival
        avg_jct_s | s | average job completion time (finish minus arrival)
        p95_jct_s | s | 95th percentile of the job completion time
        avg_queue_s | s | average queueing delay: the job's waits for GPUs, before its first start and after
            each preemption
        comm_overhead_s | s | run time lost to spread placements and congestion, summed over jobs
        preemptions | | jobs preempted (each preemption counted)
        spread_jobs | | jobs that ran in a placement looser than their tightest
        gpu_busy_share | | GPU-seconds held by jobs over cluster GPUs times makespan
        jct_cdf | | the JCT distribution: list of [seconds, fraction], at fractions in even steps up to 1,
            each the shortest JCT within which at least that fraction of jobs finished (the empirical CDF's
            quantile: on few jobs, neighbouring fractions share a JCT)
        timeline | | queue length and GPU utilisation over time: list of [t_s, queued jobs, busy share]
        stash_version | | Stash version that ran it
        source_file | | result file it was ingested from
        ingested_at | UTC | when it was stored
        """
    ),
)

PROBES = RelationDoc(
    "probes",
    "bandwidth and latency probes, one row per measured figure",
    "Filled from the `probes` section of a profile's result file (every profile with more than one worker "
    "probes after R1 and after R1n, through the run's own process group) and by `stash probe` (then `run_id` "
    "and `phase` are NULL). No key; a probe set is identified by `probe_id` and ingested once: a copy of a "
    "run's file under another `run_id` is refused, its probe sets being the first run's. Rates are in "
    "**Gbit/s** (gigabits per second, like `instances.network_gbps` and tc's rates), not bytes. Every time "
    "is the slowest rank's.",
    table(
        """
        probe_id | | the probe set: `<run_id>-<phase>` for a profile's, `probe-<UTC time>-<hex>` for `stash
            probe`
        run_id | | the profile it belongs to (`runs.run_id`); NULL for `stash probe`
        phase | | `R1` (W workers on one machine: interconnect) or `R1n` (W workers over N machines:
            network); NULL for `stash probe`
        started_at | UTC | when the probe set started
        hostname | | host name of rank 0
        instance | | instance label of the run (as `runs.instance`) or of `stash probe --instance`
        backend | | torch.distributed backend, `gloo` or `nccl`
        device | | `cpu` or `cuda`
        world_size | | ranks taking part
        nodes | | machines taking part
        workers_per_node | | ranks per machine
        kind | | `allreduce` (one message of `size_bytes` over all ranks); `gradient_allreduce` (the model's
            gradient bytes in DDP's bucket sizes, 1 MiB then 25 MiB, one after the other: the measured
            all-reduce time of the gradients); `p2p` (ping-pong between rank 0 and one peer, one-way time)
        scope | | `all` for the all-reduces; for `p2p` `inter_node` (peer on another machine) or
            `intra_node` (peer on the same machine)
        size_bytes | bytes | message size (for `gradient_allreduce` the gradient bytes; 8 bytes for the p2p
            latency row)
        repetitions | | timed repetitions after one warm-up call (which also sizes the count): as many as
            fit the per-size time budget (0.3 s by default), at least 1, at most 20
        time_s | s | mean time of one call (p2p: one way = round trip / 2)
        time_min_s | s | fastest repetition
        algbw_gbps | Gbit/s | algorithm bandwidth, `size_bytes × 8 / time_s`
        busbw_gbps | Gbit/s | bus bandwidth: all-reduce `2(n-1)/n × algbw` with n = `world_size` (what each
            link of a ring carries; compare it with a link's rate); p2p: equal to `algbw_gbps`
        link_gbps | Gbit/s | the emulated links' configured rate for probes across emulated-cluster nodes (the
            slowest link among the nodes used), else NULL
        """
    ),
)
