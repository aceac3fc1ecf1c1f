"""`stash campaign` here or over SSH: run every configuration of a plan not stored yet, one after the other,
with progress and the time left.

Each configuration is one profile in a child process (`python -m stash_core.api.child ARGS --db DB --progress
json`, ARGS being `stash profile`'s), so a crash of one profile cannot take the campaign down and every
finished profile is already in the database.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from stash_core.campaign.plan import CampaignItem, CampaignSettings, profile_args, profile_spec, split_done
from stash_core.engine.plan import plan_phases
from stash_core.engine.profile_child import run_profile_child
from stash_core.errors import UsageError, says_disk_full


@dataclass
class CampaignOutcome:
    """What happened to each configuration."""

    planned: list[CampaignItem]
    skipped: list[CampaignItem] = field(default_factory=list)
    completed: list[tuple[CampaignItem, str]] = field(default_factory=list)  # (item, run_id)
    failed: list[tuple[CampaignItem, str]] = field(default_factory=list)  # (item, reason)
    elapsed_s: float = 0.0


Runner = Callable[[CampaignItem, CampaignSettings, Callable[[dict[str, Any]], None]], dict[str, Any]]


def subprocess_runner(
    item: CampaignItem, settings: CampaignSettings, on_event: Callable[[dict[str, Any]], None]
) -> dict[str, Any]:
    """Run one profile in a child process (engine/profile_child.py); returns status, run_id, error,
    exit_code."""
    return run_profile_child(settings.db_path, profile_args(item, settings), on_event, settings.python)


def run_campaign(
    plan: list[CampaignItem],
    settings: CampaignSettings,
    runner: Runner = subprocess_runner,
    report: Callable[[str], None] | None = None,
    on_event: Callable[[dict[str, Any]], None] | None = None,
) -> CampaignOutcome:
    """Run every configuration of `plan` not stored yet, one after the other; returns what happened.

    `report` gets one line per step with progress and the estimated time left; `on_event` gets the protocol
    messages of the running profile (for a live progress display). A profile that fails is recorded and the
    campaign goes on; a profile refused as bad usage (exit status 2) or for a full disk stops it, as every
    other one would be refused the same way.
    """
    report = report or (lambda line: None)
    on_event = on_event or (lambda event: None)
    todo, stored = split_done(plan, settings)
    outcome = CampaignOutcome(planned=list(plan), skipped=stored)
    if stored:
        report(f"{len(stored)} of {len(plan)} configuration(s) already stored in {settings.db_path}: skipped")
    started = time.monotonic()
    durations: list[float] = []
    runs = [runs_of(item, settings) for item in todo]
    for index, item in enumerate(todo):
        eta = eta_text(durations, len(todo) - index, sum(runs[:index]), sum(runs[index:]))
        report(f"[{index + 1}/{len(todo)}] {item.describe()}  {eta}")
        item_started = time.monotonic()
        try:
            result = runner(item, settings, on_event)
        except KeyboardInterrupt:  # Ctrl-C, SIGTERM: what was done, and that the same command goes on
            # a profile that ended as the signal came is stored completed: `stash runs` says which
            report(f"interrupted in [{index + 1}/{len(todo)}] {item.describe()} (what its profile measured "
                   "is kept, marked interrupted unless it had just ended: `stash runs` says): "
                   f"{len(outcome.completed)} profiled before it; the same command again runs what is "
                   "left")  # fmt: skip
            raise
        durations.append(time.monotonic() - item_started)
        if result.get("status") == "completed":
            outcome.completed.append((item, result.get("run_id") or ""))
            report(f"      done in {durations[-1]:.0f} s: run {result.get('run_id')}")
            for warning in result.get("warnings") or []:  # a label its machine contradicts, said once here
                report(f"      warning: {warning}")
        else:
            reason = result.get("error") or result.get("status") or "failed"
            outcome.failed.append((item, reason))
            report(f"      {result.get('status') or 'failed'} after {durations[-1]:.0f} s: {reason}")
            if result.get("exit_code") == 2 or says_disk_full(str(reason)):  # the next would be refused too
                outcome.elapsed_s = time.monotonic() - started
                raise UsageError(f"campaign stopped: stash profile refused {item.describe()}: {reason}")
    outcome.elapsed_s = time.monotonic() - started
    return outcome


def runs_of(item: CampaignItem, settings: CampaignSettings) -> int:
    """How many runs (R0, R1, R1n) a configuration's profile makes, each given its share of the time."""
    try:
        return len(plan_phases(profile_spec(item, settings))[1]) or 1
    except UsageError:  # refused later, with its reason
        return 1


def eta_text(durations: list[float], remaining: int, runs_done: int = 0, runs_left: int = 0) -> str:
    """'about 12 min left' from the time so far: per run of the profiles done, times the runs left, where
    they are given (a profile of 2 workers runs R0 and R1, one of 1 worker R0 alone, and a plan runs the
    1-worker ones first: a mean per profile said too little), else per profile; 'time left unknown' before
    the first finishes."""
    if not durations:
        return "(time left unknown until the first profile finishes)"
    left_s = sum(durations) / len(durations) * remaining
    if runs_done and runs_left:
        left_s = sum(durations) / runs_done * runs_left
    if left_s < 90:
        return f"(about {left_s:.0f} s left)"
    if left_s < 5400:
        return f"(about {left_s / 60:.0f} min left)"
    return f"(about {left_s / 3600:.1f} h left)"


def progress_line(event: dict[str, Any]) -> str | None:
    """A line of progress inside a campaign's profile, from its protocol messages: each round of launches
    as it starts, each launch as it ends with its time per iteration; None for the rest (a profile of
    minutes said nothing between its start and its end)."""
    if event.get("kind") != "PHASE":
        return None
    if event.get("event") == "round" and event.get("text"):
        return f"      {event['text']}"
    if event.get("event") == "finished" and event.get("name"):
        mean_s = event.get("mean_s")
        took = f": {mean_s:.3g} s per iteration" if isinstance(mean_s, int | float) else ""
        return f"      {event['name']} {event.get('status') or 'ended'}{took}"
    return None
