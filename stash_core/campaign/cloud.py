"""`stash campaign --cloud`: each instance type of a priced plan (cloud_plan.py) on a cluster of its own,
through SkyPilot's Python API, and always torn down.

Per instance type: SkyPilot launches the cluster with the task of skypilot_task.py (the instance type in its
region, spot or not, autostop with teardown as a safety net, this checkout as the workdir, the set-up of
Stash, the profiles not stored yet); the job's log is followed, and each profile the run script announces as
finished is copied back over SSH at once (`ssh CLUSTER`, as SkyPilot names its clusters for ssh) and stored
with the instance type as its label and the cloud, region, pricing and price date in its spec
(`spec.cloud`). Then the cluster is torn down. Several instance types run at once with `parallel`.

Whatever happens, each cluster is torn down: a launch that fails (no capacity, quota: SkyPilot's exceptions),
a machine lost mid-profile (spot preemption), profiles that fail there, Ctrl-C (or SIGTERM, SIGHUP) and errors
here. A teardown that fails leaves the cluster to its autostop and names it in one line with the command that
removes it. Only a crash of this process (SIGKILL, power) skips the teardown: autostop removes the cluster
once it is idle, and re-running the campaign finds the cluster by its name, cancels what it still runs and
uses it.
Finished results are stored as they arrive, so a re-run runs only what is not stored.

`sky` is SkyPilot's module, or an object with the same functions (tests).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from concurrent.futures import FIRST_EXCEPTION, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from stash_core.campaign.cloud_plan import CloudPlan, InstancePlan
from stash_core.campaign.cloud_results import COPY_TIMEOUT_S, ResultCopier
from stash_core.campaign.cluster_locks import hold_clusters, release_clusters
from stash_core.campaign.plan import CampaignItem, CampaignSettings
from stash_core.campaign.remote import parse_finished, parse_setting_up, parse_started
from stash_core.campaign.skypilot_task import task_config
from stash_core.errors import UsageError, first_line
from stash_core.interrupts import held_interrupts, stop_exception
from stash_core.results.file import results_dir_of

DEFAULT_IDLE_MINUTES = 15
END_WAIT_S = 120.0  # after Ctrl-C and the teardowns, how long the workers get to end


@dataclass
class TypeOutcome:
    """What happened on one instance type."""

    plan: InstancePlan
    state: str = "waiting"  # waiting, provisioning, profiling, down, launch failed, left running, skipped
    completed: list[tuple[CampaignItem, str]] = field(default_factory=list)
    failed: list[tuple[CampaignItem, str]] = field(default_factory=list)
    error: str | None = None
    left_running: str | None = None  # the one line that names a cluster not torn down
    started: float | None = None
    ended: float | None = None
    # while SkyPilot's launch has not returned: the cluster may not exist yet, and a teardown then finds
    # nothing to remove, so the worker tears it down once the launch returns (set under _Clusters.lock)
    launching: bool = False
    # held while a finished profile's result is copied back and stored: a teardown waits for it
    copying: threading.Lock = field(default_factory=threading.Lock)

    @property
    def spent_usd(self) -> float:
        if self.started is None:
            return 0.0
        seconds = (self.ended or time.monotonic()) - self.started
        return seconds / 3600.0 * self.plan.offer.usd_per_h

    @property
    def lost(self) -> list[CampaignItem]:
        """The configurations that ran (or were to run) here and came back neither completed nor failed."""
        done = {item.key for item, _ in self.completed} | {item.key for item, _ in self.failed}
        return [item for item in self.plan.items if item.key not in done]


class _Clusters:
    """The clusters this campaign may have started, each torn down once (by its worker or on Ctrl-C)."""

    def __init__(self, sky: Any, idle_minutes: int) -> None:
        self.sky, self.idle_minutes = sky, idle_minutes
        self.lock = threading.Lock()
        self.live: dict[str, TypeOutcome] = {}
        # once the campaign has said its last lines: a teardown that fails after them says its own
        self.late_report: Callable[[str], None] | None = None

    def add(self, outcome: TypeOutcome) -> None:
        with self.lock:
            self.live[outcome.plan.cluster] = outcome

    def down(self, outcome: TypeOutcome) -> None:
        """Tear the cluster down (once); on failure, name it and the command that removes it."""
        cluster = outcome.plan.cluster
        with self.lock:
            if outcome.launching:  # its worker tears it down once the launch returns (it sees `stop`)
                return
            if self.live.pop(cluster, None) is None:
                return
        # a result being copied back is kept: its copy ends first (ssh gives up within COPY_TIMEOUT_S)
        copied = outcome.copying.acquire(timeout=COPY_TIMEOUT_S + 10)
        with held_interrupts():
            try:
                self.sky.get(self.sky.down(cluster))
                if outcome.state != "launch failed":
                    outcome.state = "down"
                outcome.left_running = None
            except Exception as error:  # noqa: BLE001 - SkyPilot's errors, or none left to remove
                if _no_such_cluster(error):
                    outcome.ended = outcome.ended or time.monotonic()
                    return
                line = (
                    f"{cluster} ({outcome.plan.offer.name}) may still be running (its autostop removes it "
                    f"after {self.idle_minutes} idle minutes): remove it now with `sky down {cluster}` "
                    f"(teardown failed: {first_line(str(error))})"
                )
                with self.lock:
                    outcome.left_running, late = line, self.late_report
                outcome.state = "left running"
                if late is not None:
                    late(line)
            finally:
                outcome.ended = outcome.ended or time.monotonic()
                if copied:
                    outcome.copying.release()

    def down_all(self) -> None:
        for outcome in list(self.live.values()):
            self.down(outcome)

    def report_left(self, outcomes: list[TypeOutcome], report: Callable[[str], None]) -> None:
        """The campaign's last lines: each cluster left running, each once (a later failure says itself)."""
        with self.lock:
            self.late_report = report
            lines = [outcome.left_running for outcome in outcomes if outcome.left_running]
        for line in lines:
            report(line)


def load_sky() -> Any:
    """SkyPilot's `sky` module; UsageError (one line) for an installation that cannot be loaded."""
    try:
        import sky
    except Exception as error:  # noqa: BLE001 - a broken installation, said in one line
        raise UsageError(f"SkyPilot could not be loaded: {first_line(str(error))}") from None
    return sky


def summary(outcomes: list[TypeOutcome]) -> tuple[int, list[str]]:
    """The exit status of a finished campaign (0: every profile completed) and the lines that say how it
    went: what was profiled, failed or not finished, the money spent at catalog prices, each failure."""
    completed = sum(len(outcome.completed) for outcome in outcomes)
    failed = sum(len(outcome.failed) for outcome in outcomes)
    lost = sum(len(outcome.lost) for outcome in outcomes if outcome.state != "skipped")
    spent = sum(outcome.spent_usd for outcome in outcomes)
    lines = [f"cloud campaign: {completed} profiled, {failed} failed, {lost} not finished, "
             f"${spent:.2f} at catalog prices"]  # fmt: skip
    for outcome in outcomes:
        if outcome.error:
            lines.append(f"  {outcome.plan.offer.name}: {outcome.error}")
        for item, reason in outcome.failed:
            lines.append(f"  failed on {outcome.plan.offer.name}: {item.describe()}: {reason}")
    ok = not failed and not lost and not any(outcome.error for outcome in outcomes)
    return (0 if ok else 1), lines


def _no_such_cluster(error: BaseException) -> bool:
    return type(error).__name__ == "ClusterDoesNotExist"


def run_cloud_campaign(
    plan: CloudPlan,
    settings: CampaignSettings,
    sky: Any,
    report: Callable[[str], None] | None = None,
    idle_minutes: int = DEFAULT_IDLE_MINUTES,
    results_dir: Path | None = None,
) -> list[TypeOutcome]:
    """Run every instance type of `plan` that has profiles to run, `plan.parallel` at a time; returns one
    outcome per instance type. Ctrl-C tears every cluster down, then raises KeyboardInterrupt."""
    report = report or (lambda line: None)
    outcomes = [TypeOutcome(item) for item in plan.instances]
    clusters = _Clusters(sky, idle_minutes)
    folder = results_dir or settings.results_dir or results_dir_of(settings.db_path)
    copier = ResultCopier(settings.db_path, Path(folder).resolve())  # the database names files by full path
    lock = threading.Lock()

    def say(outcome: TypeOutcome, text: str) -> None:
        with lock:
            spent = sum(item.spent_usd for item in outcomes)
        report(f"{outcome.plan.offer.name:<14} {text}  (${spent:.2f} spent so far at catalog prices)")

    for outcome in outcomes:
        if not outcome.plan.todo:
            outcome.state = "skipped"
            say(outcome, f"all {len(outcome.plan.stored)} configuration(s) stored: not launched")
    todo = [outcome for outcome in outcomes if outcome.plan.todo]
    held = hold_clusters([outcome.plan.cluster for outcome in todo])
    unfinished: list[TypeOutcome] = []
    try:
        return _run_types(outcomes, todo, settings, sky, clusters, copier, idle_minutes, say, plan.parallel,
                          report, unfinished)  # fmt: skip
    finally:
        if not unfinished:  # else held until this process ends: its workers still launch or tear them down
            release_clusters(held)


def _run_types(outcomes, todo, settings, sky, clusters, copier, idle_minutes, say, parallel, report,
               unfinished: list[TypeOutcome]) -> list[TypeOutcome]:  # fmt: skip
    """Each instance type of `todo` in a worker of its own, `parallel` at once; on Ctrl-C or an error, every
    cluster torn down first. `unfinished` gets the types whose worker had not ended when the command did."""
    stop = threading.Event()
    pool = ThreadPoolExecutor(max_workers=max(1, parallel), thread_name_prefix="stash-cloud")
    futures = []
    try:
        with held_interrupts() as received:  # every worker known before a Ctrl-C is acted on
            futures += [
                pool.submit(_run_type, outcome, settings, sky, clusters, copier, idle_minutes, stop, say)
                for outcome in todo
            ]
        if received:
            raise stop_exception(received[0])
        pending = set(futures)
        while pending:
            done, pending = wait(pending, timeout=0.2, return_when=FIRST_EXCEPTION)
            for future in done:
                future.result()  # an error here: raised, after every cluster is down (below)
    except BaseException as error:
        stop.set()
        if clusters.live:
            why = "interrupted" if isinstance(error, KeyboardInterrupt) else first_line(str(error))
            report(f"stopping ({why}): tearing down {', '.join(sorted(clusters.live))} first")
        clusters.down_all()
        pool.shutdown(wait=False, cancel_futures=True)
        wait(futures, timeout=END_WAIT_S)  # the workers end as their clusters go
        unfinished += [outcome for outcome, future in zip(todo, futures, strict=False) if not future.done()]
        for outcome in unfinished:
            cluster = outcome.plan.cluster
            report(f"{cluster} ({outcome.plan.offer.name}): its launch or teardown had not ended after "
                   f"{END_WAIT_S:.0f} s; Stash tears it down before it exits, unless ended first: then see "
                   f"`sky status` and remove it with `sky down {cluster}`")  # fmt: skip
        raise
    finally:
        clusters.report_left(outcomes, report)
    pool.shutdown(wait=True)
    return outcomes


def _run_type(outcome, settings, sky, clusters, copier, idle_minutes, stop, say) -> None:
    """One instance type: launch, follow the profiles (copying each back as it finishes), tear down."""
    plan = outcome.plan
    if stop.is_set():
        outcome.state = "skipped"
        return
    offer = plan.offer
    outcome.state = "provisioning"
    outcome.started = time.monotonic()
    clusters.add(outcome)
    if stop.is_set():  # stopped while this one was being registered: the main thread may have missed it
        clusters.down(outcome)
        return
    try:
        _reuse_left_cluster(sky, plan.cluster, say, outcome)
        say(outcome, f"provisioning {plan.cluster} ({offer.provider} {offer.region}, {offer.pricing} "
                     f"${offer.usd_per_h:g}/h), then setting up Stash")  # fmt: skip
        task = sky.Task.from_yaml_config(task_config(plan, settings, idle_minutes))
        with clusters.lock:  # a stop from here on finds the launch under way, and leaves its teardown to us
            stopped = stop.is_set()
            outcome.launching = not stopped
        if stopped:
            clusters.down(outcome)
            return
        try:
            request = sky.launch(task, cluster_name=plan.cluster, idle_minutes_to_autostop=idle_minutes,
                                 down=True, retry_until_up=False)  # fmt: skip
            setting_up = LineStream(lambda line: parse_setting_up(line) and say(outcome, "setting up Stash"))
            job_id, _ = sky.stream_and_get(request, output_stream=setting_up)
        finally:
            with clusters.lock:
                outcome.launching = False
    except Exception as error:  # noqa: BLE001 - SkyPilot's launch errors (capacity, quota, credentials)
        outcome.state, outcome.error = "launch failed", f"{type(error).__name__}: {first_line(str(error))}"
        say(outcome, f"launch failed: {outcome.error}")
        clusters.down(outcome)
        return
    if stop.is_set():  # stopped while it launched: the main thread left its teardown to this worker
        clusters.down(outcome)
        return
    outcome.state = "profiling"
    total = len(plan.items)
    say(outcome, f"set up: profiling 0 of {total}")
    by_name = {copier.file_name(item): item for item in plan.items}

    def on_line(line: str) -> None:
        started = parse_started(line)
        if started:
            say(outcome, f"profiling {started[0]} of {started[1]}")
        finished = parse_finished(line)
        if not finished or finished.file_name not in by_name:
            return
        item = by_name[finished.file_name]
        with outcome.copying:
            if stop.is_set() or plan.cluster not in clusters.live:  # being torn down: nothing to copy
                return
            status, text = copier.fetch(plan, item, finished)
            (outcome.completed if status == "completed" else outcome.failed).append((item, text))
            say(outcome, f"copied back {finished.index} of {finished.total}: {item.describe()} {status}"
                         f"{'' if status == 'completed' else ': ' + text}")  # fmt: skip

    try:
        exit_code = sky.tail_logs(plan.cluster, job_id, follow=True, output_stream=LineStream(on_line))
        if exit_code and outcome.lost and not stop.is_set():
            outcome.error = f"the job ended (exit {exit_code}) before {len(outcome.lost)} profile(s) finished"
    except Exception as error:  # noqa: BLE001 - the cluster went away (preemption) or SkyPilot failed
        if not stop.is_set():
            outcome.error = f"{type(error).__name__}: {first_line(str(error))}"
    if outcome.lost and not stop.is_set():
        say(
            outcome, f"{len(outcome.lost)} profile(s) not finished: {outcome.error or 'the machine was lost'}"
        )
    say(outcome, f"tearing down {plan.cluster}")
    clusters.down(outcome)
    if outcome.state == "down":
        say(outcome, f"down: {len(outcome.completed)} completed, {len(outcome.failed)} failed, "
                     f"{len(outcome.lost)} not finished")  # fmt: skip


def _reuse_left_cluster(sky, cluster: str, say, outcome) -> None:
    """A cluster of this name left by an earlier run that did not end (a crash): its jobs cancelled, so
    that the launch reuses it for the profiles not stored."""
    records = sky.get(sky.status(cluster_names=[cluster]))
    if records:
        say(outcome, f"found {cluster}, left by an earlier run: cancelling its jobs and using it")
        try:
            sky.get(sky.cancel(cluster, all=True))
        except Exception as error:  # noqa: BLE001 - a stopped cluster has no jobs to cancel; the launch restarts it
            say(outcome, f"its jobs were not cancelled ({type(error).__name__}: {first_line(str(error))})")


class LineStream:
    """A text stream for SkyPilot's output_stream: each complete line to `on_line`."""

    def __init__(self, on_line: Callable[[str], None]) -> None:
        self.on_line, self.buffer = on_line, ""

    def write(self, text: str) -> int:
        self.buffer += text
        *lines, self.buffer = self.buffer.split("\n")
        for line in lines:
            self.on_line(line.rstrip("\r"))
        return len(text)

    def flush(self) -> None:
        pass

    def writable(self) -> bool:
        return True
