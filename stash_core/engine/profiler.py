"""Run a whole profile: prepare the data, launch each differential run, assemble the result."""

from __future__ import annotations

import contextlib
import datetime
import secrets
import time
from dataclasses import replace

from stash_core import __version__
from stash_core.analysis.coherence import (
    impossible_findings,
    impossible_warning,
    per_process_differences,
    same_processes_cause,
    same_work,
    same_world,
)
from stash_core.analysis.comm import communication_bounds
from stash_core.analysis.stalls import PhaseTime, breakdown
from stash_core.analysis.unmeasured import add_not_measured_notes, not_measured_reasons
from stash_core.engine import plan as run_plans
from stash_core.engine.data_setup import (
    DataSetup,
    cold_run_not_separable,
    iterations_per_epoch,
    started_cached,
)
from stash_core.engine.host_setup import settle_on_hosts
from stash_core.engine.launch_warnings import epoch_boundary_warning, pooled_warnings
from stash_core.engine.launches import MIN_LAUNCH_CAP_S, LaunchedRuns, on_profile_clock, rounds_of
from stash_core.engine.machine import threads_note
from stash_core.engine.paired import (
    BLOCK_STEPS,
    PAIRED_OFF_HINT,
    launches_of_round,
    loop_cap_s,
    paired_job,
    pairs_runs,
    record_names,
    split_outcome,
)
from stash_core.engine.phase import launch_warnings_kept, run_phase
from stash_core.engine.plan import PhasePlan, launch_spec, launches_of, max_rounds_of, plan_phases, round_runs
from stash_core.engine.progress import Reporter
from stash_core.engine.records import probe_record, spec_record
from stash_core.engine.retry import aborted, transient
from stash_core.engine.rounds import current_shortfalls, decide_next_round, given_up_notes
from stash_core.engine.script_job import no_loader_stalls, uncommunicating, unread_data_dir_stalls
from stash_core.engine.spread_cause import quiet_load
from stash_core.errors import MeasurementError, ProfileEnded, StashError, UsageError
from stash_core.interrupts import reason as interrupt_reason
from stash_core.launch.hosts import RemoteHosts
from stash_core.launch.runner import worker_env
from stash_core.launch.torchrun_failure import timeout_hint
from stash_core.launch.warm_start import warm_launches
from stash_core.measure.fingerprint import machine_fingerprint
from stash_core.results import RESULT_KIND, SCHEMA_VERSION
from stash_core.spec import ProfileSpec
from stash_core.zoo_names import canonical_model


def new_run_id(now: datetime.datetime) -> str:
    return f"{now.strftime('%Y%m%dT%H%M%SZ')}-{secrets.token_hex(4)}"


def utc_now() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC)


def run_profile(
    spec: ProfileSpec,
    model_info: dict,
    data: DataSetup,
    reporter: Reporter | None = None,
    remote: RemoteHosts | None = None,
) -> dict:
    """Measure every planned run and return the complete result document (never half-filled). A failure
    or an interrupt after the document exists raises ProfileEnded with the document of what was measured.

    With `remote`, every run goes to the remote machines over ssh: R0 and R1 on the first one, the
    runs over N machines on the first N.
    """

    reporter = reporter or Reporter()
    started_at, started_s = utc_now(), time.monotonic()
    doc = {
        "schema_version": SCHEMA_VERSION,
        "kind": RESULT_KIND,
        "run_id": new_run_id(started_at),
        "status": "running",
        "error": None,
        "started_at": started_at.isoformat(),
        "finished_at": None,
        "stash_version": __version__,
        "spec": spec_record(spec, data, remote),
        "model": {**model_info, "name": canonical_model(model_info.get("name") or spec.model)},
        "fingerprint": machine_fingerprint(spec.instance),
        "phases": [],
        "breakdown": None,
    }
    if remote is not None:
        doc["hosts"] = []
    if spec.nodes > 1 or spec.workers_total > 1:
        doc["probes"] = []
    warnings: list[str] = list(data.warnings)  # what the data set's check found
    chain = chain_for(spec)
    launched = LaunchedRuns([], launches_of(spec))
    try:
        reference_workers = None
        if remote is not None:
            reference_workers = settle_on_hosts(spec, remote, doc, reporter, warnings)
            doc["spec"] = spec_record(spec, data, remote)
        chain, plans = plan_phases(spec, reference_workers)
        run_plans.refuse_nothing_to_run(spec, plans)
        if "interconnect" in spec.stalls and "R1" not in chain and spec.nodes > 1:
            warnings.append(
                "interconnect not measured: the first machine holds one worker, so R0 is the network "
                "reference"
            )
        if data.not_separable_reason:
            plans = [plan for plan in plans if plan.name != "R3"]
            asked = [name for name in ("cpu", "disk") if name in spec.stalls]  # a stall not asked: not said
            doc["_not_separable"] = dict.fromkeys(asked, data.not_separable_reason)
        launched = LaunchedRuns([plan.name for plan in plans], launches_of(spec))
        with warm_starter(spec, remote):
            run_launches(plans, spec, data, reporter, warnings, remote, doc, model_info, launched, chain)
        doc["status"] = "completed"
    except KeyboardInterrupt as error:  # Ctrl-C, or SIGTERM / SIGHUP (interrupts.Stopped)
        doc["status"], doc["error"] = "interrupted", interrupt_reason(error)
        for record in doc["phases"]:
            if record.get("status") == "interrupted":
                record["error"] = doc["error"]
        raise ProfileEnded(doc, error) from error  # the caller still saves what was measured
    except StashError as error:
        doc["status"], doc["error"] = "failed", str(error)
        for record in doc["phases"]:  # a run whose launch never got under way: nobody interrupted it
            if record.get("status") == "interrupted":
                record.update(status="skipped", error=f"not run: {doc['error']}")
        raise ProfileEnded(doc, error) from error
    finally:
        # the start plus its monotonic time: a clock stepped back meanwhile ended it before it began
        took = datetime.timedelta(seconds=time.monotonic() - started_s)
        doc["finished_at"] = (started_at + took).isoformat()
        # a failed or interrupted profile keeps its launches (pooled) and the breakdown of its completed runs
        warnings += launched.pool_into(doc["phases"])
        warnings += launch_warnings(doc, spec, launched, chain)
        doc["breakdown"] = breakdown_of_completed(doc, chain, spec, warnings)
    return doc


def warm_starter(spec: ProfileSpec, remote: RemoteHosts | None) -> contextlib.AbstractContextManager:
    """Where every launch forks Stash's own workers on this machine's CPU, one server imports torch for all
    of them (launch/warm_start.py); elsewhere nothing."""
    if remote is None and not spec.script and spec.device == "cpu":
        return warm_launches(worker_env(spec.threads_per_worker))
    return contextlib.nullcontext()


def run_launches(
    plans: list[PhasePlan],
    spec: ProfileSpec,
    data: DataSetup,
    reporter: Reporter,
    warnings: list[str],
    remote: RemoteHosts | None,
    doc: dict,
    model_info: dict,
    launched: LaunchedRuns,
    chain: list[str] | None = None,
) -> None:
    """Every launch of every run, round by round (plan.round_runs), each run's record made at its first
    launch: the planned rounds, then, with --iterations auto, more for the runs of the stalls still short of
    their target (engine/rounds.py). A launch that fails ends the profile, as a failed run always did."""
    launches = launched.launches
    max_rounds = max_rounds_of(spec, launches)
    budget_s = spec.max_phase_s * len(plans)
    per_launch = launch_spec(spec, launches)
    records: dict[str, dict] = {}
    clock_start_s = time.monotonic()  # the profile's clock: every launch's telemetry is timed from here

    paired = pairs_runs(spec, [plan.name for plan in plans], remote)
    plan_of = {plan.name: plan for plan in plans}
    if note := threads_note(spec):
        reporter.message(note)
    if spec.max_phase_s / launches < MIN_LAUNCH_CAP_S:  # said, not done silently: the runs take longer
        floor = f"{MIN_LAUNCH_CAP_S:g} s"
        reporter.message(f"note: --max-phase-seconds {spec.max_phase_s:g} leaves under {floor} to each of a "
                         f"run's {launches} launches; each still gets its start-up and a timed loop of at "
                         f"least {floor}, so the runs take longer")  # fmt: skip
    if paired:
        reporter.message(f"R0 and R1 timed together: alternating blocks of {BLOCK_STEPS} steps, one launch a "
                         f"round{PAIRED_OFF_HINT}")  # fmt: skip

    def timed_launch(plan: PhasePlan, this_spec: ProfileSpec, warnings_: list[str], round_index: int) -> dict:
        started_s = time.monotonic() - clock_start_s
        # Where rounds may follow, each paired launch keeps as many groups as launches' disagreement allows
        # (the last round's runs to its target).
        target = spec.target_relative_ci if round_index + 1 < max_rounds else None
        extra = {"paired": paired_job(launched, target)} if paired and plan.name == "R1" else {}
        outcome = run_phase(
            plan, this_spec, data, reporter, warnings_, remote, model_info.get("grad_bytes"), **extra
        )
        return on_profile_clock(outcome, started_s)

    def launch(plan: PhasePlan, index: int, round_index: int, total: int) -> None:
        reporter.phase_started(plan, index, total)
        names = record_names([plan.name], paired)
        for name in names:
            if name not in records:
                records[name] = {**plan_of[name].to_dict(), "status": "interrupted", "error": "interrupted"}
                doc["phases"].append(records[name])
        # The bandwidth probe once per run, in its first launch. The planned launches of a run share what
        # its budget has left, start-up included (launches.launch_cap_s: the first launch's expected from
        # the profile's earlier runs); R0 and R1 timed together share both runs' time (paired.loop_cap_s).
        this_spec = per_launch
        if len(names) > 1:
            walls_s = sum(launched.run_wall_s(name) for name in names)
            cap_s = loop_cap_s(spec, walls_s, max(launches - round_index, 1), launched)
            # each run of the pair its launch's share of --max-iterations, as a launch of its own gets
            this_spec = replace(spec, max_phase_s=cap_s, probes=spec.probes and round_index == 0,
                                max_iterations=len(names) * per_launch.max_iterations)  # fmt: skip
        else:
            cap_s = launched.launch_cap_s(plan.name, spec.max_phase_s, max(launches - round_index, 1),
                                          per_launch.max_phase_s)  # fmt: skip
            this_spec = replace(per_launch, probes=per_launch.probes and round_index == 0, max_phase_s=cap_s)
        launch_warnings_: list[str] = []
        outcome = timed_launch(plan, this_spec, launch_warnings_, round_index)
        error = outcome.get("error")
        retry = not outcome.get("usage_error") and (
            (remote is None and transient(error)) or (plan.nodes == 1 and aborted(error))
        )
        if outcome["status"] != "completed" and retry:
            # A peer connection lost, or a rank aborted, on one busy machine: one more try, said out loud.
            # (Across machines a lost connection is a node or link failure, reported as it is.)
            warnings.append(f"{plan.name}: a launch failed ({outcome['error']}) and was run again")
            outcome = timed_launch(plan, this_spec, launch_warnings_, round_index)
        warnings.extend(launch_warnings_kept(plan.name, launch_warnings_, warnings))
        usage_error = outcome.pop("usage_error", False)
        probe = outcome.pop("probe", None)
        if probe is not None:
            doc["probes"].append(probe_record(probe, doc, plan, remote))
        if outcome["status"] != "completed":
            reporter.phase_finished(outcome)
            for name in names:  # the launch's time is its own run's: a paired R0 counts none of it twice
                records[name].update(
                    status="failed", error=outcome["error"], telemetry=outcome.get("telemetry"),
                    stderr_tail=outcome.get("stderr_tail"), stdout_tail=outcome.get("stdout_tail"),
                    wall_s=outcome.get("wall_s") if name == plan.name else 0.0,
                )  # fmt: skip
            failure = UsageError if usage_error else MeasurementError
            hint = timeout_hint(outcome["error"], spec.comm_timeout_s) if remote is not None else ""
            raise failure(f"run {plan.name} ({plan.description}) failed: {outcome['error']}{hint}")
        outcomes = split_outcome(outcome) if len(names) > 1 else (outcome,)
        for name, this_outcome in zip(names, outcomes, strict=True):
            reporter.phase_finished(this_outcome)
            launched.add(name, round_index, this_outcome)

    chain = chain or [plan.name for plan in plans]
    round_index, needed, short_names = 0, None, []
    said: set[str] = set()
    while True:
        order = launches_of_round(round_runs(plans, round_index), paired, needed)
        launched.plan_round(round_index, record_names([plan.name for plan in order], paired))
        if order:
            names = record_names([plan.name for plan in order], paired)
            reporter.round_started(round_index, launches, max_rounds, names, short_names)
        for index, plan in enumerate(order):
            launch(plan, index, round_index, len(order))
        round_index += 1
        if round_index < launches:
            continue
        if max_rounds <= launches:  # a fixed count, or one launch per run: no sequential rule
            break
        needed, short, hopeless = decide_next_round(
            launched, chain, spec.target_relative_ci, round_index, max_rounds, budget_s, spec.stalls
        )
        left_s = budget_s - launched.wall_s()
        for note in given_up_notes(hopeless, needed, said, spec.target_relative_ci, left_s):
            reporter.message(note)
        if not needed:
            break
        short_names = [s.stall for s in short if s not in hopeless]


def launch_warnings(doc: dict, spec: ProfileSpec, launched: LaunchedRuns, chain: list[str]) -> list[str]:
    records = doc["phases"]
    fixed = spec.fixed_iterations is not None
    target = spec.target_relative_ci
    short = current_shortfalls(launched, chain, target, spec.stalls) if launched.names else []
    warnings = pooled_warnings(
        records, spec.target_relative_ci, fixed, spec.max_phase_s, launched.launches, launched.stopped_by,
        short, spec.threads_per_worker if spec.device == "cpu" else None,
    )  # fmt: skip
    boundary = epoch_boundary_warning(records, iterations_per_epoch(spec, doc))
    return warnings + ([boundary] if boundary else [])


def chain_for(spec: ProfileSpec) -> list[str]:
    return plan_phases(spec)[0]


def breakdown_of_completed(
    doc: dict, chain: list[str], spec: ProfileSpec, warnings: list[str]
) -> dict | None:
    not_separable = {**cold_run_not_separable(doc), **(doc.pop("_not_separable", None) or {})}
    completed = [record for record in doc["phases"] if record.get("status") == "completed"]
    if not completed:
        return None
    apart = uncommunicating(completed)
    not_separable.update(apart)
    not_separable.update(no_loader_stalls(completed, spec.stalls))
    for stall, why in unread_data_dir_stalls(completed, spec.stalls, spec.data_dir).items():
        not_separable.setdefault(stall, why)  # no DataLoader at all says more
    times = {
        record["name"]: PhaseTime(record["iteration_s"]["mean"], record["iteration_s"]["ci95"])
        for record in completed
    }
    rounds = {record["name"]: rounds_of(record) for record in completed}
    result = breakdown(
        times,
        chain,
        iterations_per_epoch(spec, doc),
        not_separable,
        {name: value for name, value in rounds.items() if value} or None,
    )
    result["warnings"] = warnings + result["warnings"]
    # each stall not measured says why (the chain as planned: a host's one worker drops R1)
    add_not_measured_notes(result["stalls"], not_measured_reasons(spec.stalls, chain, spec.nodes))
    if not apart:  # workers that train apart do no more in R1 than R0's one: no order between them
        add_impossible_warning(result, completed, times, chain)
    add_communication(result, doc, chain)
    return result


def add_impossible_warning(result: dict, completed: list[dict], times: dict, chain: list[str]) -> None:
    """A breakdown that is physically impossible says so first, naming the runs and what differed in them."""
    pairs = {name: (t.mean_s, t.ci95_s) for name, t in times.items()}
    findings = impossible_findings(result, pairs, chain)
    runs = {
        record["name"]: {
            "workers": record.get("workers"),
            "threads": (record.get("script") or {}).get("threads") or record.get("threads_per_worker"),
            "batch_size": (record.get("script") or {}).get("batch_size") or record.get("batch_size"),
            "started_cached": started_cached(record) if record.get("data") == "cold" else None,
        }
        for record in completed
    }
    quiet = quiet_load(completed)  # other load measured too small to be the cause: not blamed
    same = same_processes_cause(pairs, chain, runs, result.get("stalls"), quiet) or same_world(runs, quiet)
    warning = impossible_warning(findings, per_process_differences(runs), same_work(runs), same, quiet)
    if warning:
        result["impossible"] = bool(findings)
        result["warnings"].insert(0, warning)


def add_communication(result: dict, doc: dict, chain: list[str]) -> None:
    """Which runs the network figure compares, and each communication stall beside its lower bound."""
    phases = {record["name"]: record for record in doc["phases"] if record.get("status") == "completed"}
    if "R1n" in chain and chain.index("R1n") > 0:
        reference = chain[chain.index("R1n") - 1]
        if reference in phases and "R1n" in phases:
            near, far = phases[reference], phases["R1n"]
            text = (
                f"{reference} ({near['workers']} worker{'s' if near['workers'] != 1 else ''}, 1 machine) "
                f"vs R1n ({far['nodes']}x{far['workers'] // far['nodes']} workers)"
            )
            result["network_reference"] = text
            network = result["stalls"].get("network") or {}
            if network and not network.get("note"):
                network["note"] = text
            if near["workers"] != far["workers"]:
                result["warnings"].append(
                    f"the network figure compares {text}: one machine cannot hold all {far['workers']} "
                    "workers, so it also holds the cost of the larger ring"
                )
    probes = {probe.get("phase"): probe for probe in doc.get("probes") or []}
    if not probes:
        return
    grad_bytes = (doc.get("model") or {}).get("grad_bytes")
    backward_s = {
        name: record["parts_mean_s"]["backward_s"]
        for name, record in phases.items()
        if (record.get("parts_mean_s") or {}).get("backward_s") is not None
    }
    link_bps = (doc["spec"].get("network") or {}).get("bandwidth_bps") or None
    communication = {}
    if "R1" in probes and "R1" in chain:
        communication["interconnect"] = communication_bounds(
            "interconnect", result["stalls"].get("interconnect") or {}, probes["R1"], None, grad_bytes,
            backward_s, "R0", "R1",
        )  # fmt: skip
    if "R1n" in probes and "R1n" in chain and chain.index("R1n") > 0:
        reference = chain[chain.index("R1n") - 1]
        communication["network"] = communication_bounds(
            "network", result["stalls"].get("network") or {}, probes["R1n"], probes.get(reference),
            grad_bytes, backward_s, reference, "R1n", link_bps,
        )  # fmt: skip
    result["communication"] = communication
