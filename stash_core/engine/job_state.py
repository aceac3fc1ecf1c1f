"""What a background profile's folder says: its state, the progress of each phase, why it failed; and which
profiles run on this machine at all (registered next to this database or not)."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import psutil

from stash_core.engine.profile_child import PROFILE_CHILD_MODULE
from stash_core.measure import protocol

# Commands that measure: `stash profile|campaign|probe` (or `python -m stash_core ...`), the profile child
# (`python -m stash_core.api.child`) and the worker processes of a measurement, whatever started them.
_MEASURING_COMMANDS = ("profile", "campaign", "probe")
_WORKER_MODULES = ("stash_core.measure.worker", "stash_core.measure.probe_worker", PROFILE_CHILD_MODULE)

_TEXT_TAIL_LINES = 40


@dataclass
class PhaseProgress:
    """What is known about one phase (R0, R1, ...) of a running or finished profile."""

    name: str
    index: int
    total: int
    description: str = ""
    status: str = "running"  # running | completed | failed | skipped | interrupted
    fraction_done: float = 0.0
    iterations: int = 0
    kept: int = 0
    launches: int = 0  # how many launches of this run have started (one per round)
    # iterations (all, and kept) of this run's earlier launches: the run counts them all, as the database does
    earlier_iterations: int = 0
    earlier_kept: int = 0
    relative_ci: float | None = None
    mean_s: float | None = None
    ci95_s: float | None = None
    error: str | None = None


@dataclass
class JobState:
    """One background profile as read back from its folder."""

    job_id: str
    job_dir: Path
    argv: list[str]
    started_at: datetime | None
    pid: int | None
    status: str  # starting | running | completed | failed | interrupted | cancelled | lost
    exit_code: int | None = None
    error: str | None = None
    run_id: str | None = None
    run_status: str | None = None
    result_file: str | None = None
    stored: bool = True  # whether the run reached the database (its DONE line says where it is otherwise)
    db_path: str | None = None  # the database it ran on (a job folder of an older Stash does not say)
    phases: list[PhaseProgress] = field(default_factory=list)
    messages: list[str] = field(default_factory=list)
    output_tail: list[str] = field(default_factory=list)
    stderr_tail: list[str] = field(default_factory=list)
    label: str = ""
    # dashboard (started by the Run page) | cli (`stash profile` in a terminal) | python (stash.profile())
    origin: str = "dashboard"
    kind: str = "profile"  # profile | campaign (a cloud campaign started by the Campaign page)
    rounds: RoundsProgress | None = None  # the rounds of launches, when the profile announced them

    @property
    def finished(self) -> bool:
        return self.status not in ("starting", "running")

    @property
    def started_from(self) -> str:
        """Where the profile was started, in words: "the dashboard", "a terminal" or "Python"."""
        return {"cli": "a terminal", "python": "Python"}.get(self.origin, "the dashboard")

    @property
    def started_elsewhere(self) -> str:
        """Where a job the pages did not start was started, as the words beside its name: " (started from a
        terminal)" or " (started from Python)"; "" for the dashboard's own."""
        return "" if self.origin == "dashboard" else f" (started from {self.started_from})"

    @property
    def fraction_done(self) -> float:
        """Whole-profile progress: finished phases count fully, the running one by its own fraction."""
        if self.status == "completed":
            return 1.0
        if self.rounds is not None:
            return self.rounds.highest
        if not self.phases:
            return 0.0
        total = max(phase.total for phase in self.phases) or 1
        done = sum(1.0 if phase.status != "running" else phase.fraction_done for phase in self.phases)
        return max(0.0, min(done / total, 1.0))


# With rounds past the planned ones possible, the planned rounds fill this share of the bar, and each round
# past them half of what is left: the bar never goes back and never reads 100% before the profile ends.
PLANNED_SHARE = 0.9


@dataclass
class RoundsProgress:
    """Whole-profile progress over runs x rounds, from the "round", "started" and "finished" events."""

    round_index: int = 0
    planned: int = 1
    max_rounds: int = 1
    runs: int = 1
    finished_in_round: int = 0
    running_fraction: float = 0.0
    highest: float = 0.0  # the largest fraction shown so far: the bar only moves forward

    def fraction(self) -> float:
        in_round = (self.finished_in_round + self.running_fraction) / max(self.runs, 1)
        in_round = min(max(in_round, 0.0), 1.0)
        share = PLANNED_SHARE if self.max_rounds > self.planned else 1.0
        if self.round_index < self.planned:
            return share * (self.round_index + in_round) / self.planned
        extra = self.round_index - self.planned  # rounds past the planned ones so far
        left = (1.0 - share) * 0.5**extra
        return 1.0 - left + left * 0.5 * in_round

    def update(self) -> None:
        self.highest = max(self.highest, min(self.fraction(), 0.99))


def parse_output(state: JobState, text: str) -> None:
    phases: dict[str, PhaseProgress] = {}
    tail: list[str] = []
    for line in text.splitlines():
        parsed = protocol.parse(line)
        if parsed is None:
            if line.strip():
                tail.append(line.rstrip())
            continue
        kind, payload = parsed
        if not isinstance(payload, dict):
            continue
        if kind == "PHASE":
            apply_phase_event(phases, state, payload)
        elif kind == "PROGRESS":
            phase = phases.get(str(payload.get("phase")))
            if phase is not None:
                phase.fraction_done = float(payload.get("fraction_done") or 0.0)
                phase.iterations = int(payload.get("iterations") or 0)
                phase.kept = int(payload.get("kept") or 0)
                phase.relative_ci = payload.get("relative_ci")
                phase.mean_s = payload.get("mean_s")
                if state.rounds is not None:
                    state.rounds.running_fraction = phase.fraction_done
                    state.rounds.update()
        elif kind == "DONE":
            state.run_id = payload.get("run_id")
            state.run_status = payload.get("status")
            state.result_file = payload.get("result_file")
            state.stored = payload.get("stored") is not False
            if payload.get("error"):
                state.error = str(payload["error"])
    # R0, timed in R1's launch and put in its place, before it
    state.phases = sorted(phases.values(), key=lambda phase: (phase.index, phase.name != "R0"))
    state.output_tail = tail[-_TEXT_TAIL_LINES:]


def apply_phase_event(phases: dict[str, PhaseProgress], state: JobState, payload: dict[str, Any]) -> None:
    event = payload.get("event")
    rounds = state.rounds
    if event == "message":
        state.messages.append(str(payload.get("text", "")))
    elif event == "round":
        if payload.get("text"):
            state.messages.append(str(payload["text"]))
        highest = rounds.highest if rounds is not None else 0.0
        state.rounds = RoundsProgress(
            round_index=int(payload.get("round") or 0),
            planned=max(int(payload.get("planned") or 1), 1),
            max_rounds=max(int(payload.get("max_rounds") or 1), 1),
            runs=max(len(payload.get("runs") or []), 1),
            highest=highest,
        )
        state.rounds.update()
    elif event == "started":
        name = str(payload.get("name"))
        before = phases.get(name)  # an earlier launch of the same run: keep its place (chain order)
        phases[name] = PhaseProgress(
            name=name,
            index=before.index if before else int(payload.get("index") or 0),
            total=int(payload.get("total") or 1),
            description=str(payload.get("description") or ""),
            launches=(before.launches if before else 0) + 1,
            **_earlier(before),
        )
        if rounds is not None:
            rounds.running_fraction = 0.0
    elif event == "finished":
        name = str(payload.get("name"))
        phase = phases.get(name)
        if phase is None or phase.status != "running":
            # a run timed in another's launch (R0 beside R1) is started by none: it takes that launch's place
            shared = next((other for other in reversed(phases.values()) if other.status == "running"), None)
            launches = phase.launches + 1 if phase is not None else 1
            place = phase or shared or PhaseProgress(name=name, index=len(phases), total=len(phases) + 1)
            phase = phases[name] = PhaseProgress(
                name=name, index=place.index, total=place.total, launches=launches,
                description=str(payload.get("description") or (phase.description if phase else "")),
                **_earlier(phase),
            )  # fmt: skip
        measured = payload.get("iterations")
        if isinstance(measured, int) and measured > phase.kept:  # no progress line said them (R0 beside R1)
            phase.kept, phase.iterations = measured, max(phase.iterations, measured)
        phase.status = str(payload.get("status") or "completed")
        phase.error = payload.get("error")
        phase.mean_s = payload.get("mean_s", phase.mean_s)
        phase.ci95_s = payload.get("ci95_s")
        if phase.status == "completed":
            phase.fraction_done = 1.0
        if rounds is not None:
            rounds.finished_in_round += 1
            rounds.running_fraction = 0.0
            rounds.update()


def _earlier(before: PhaseProgress | None) -> dict[str, int]:
    """The iteration counts a new launch of a run carries from its launches before."""
    if before is None:
        return {}
    return {"earlier_iterations": before.earlier_iterations + before.iterations,
            "earlier_kept": before.earlier_kept + before.kept}  # fmt: skip


def failure_reason(state: JobState, exit_code: int) -> str:
    """One readable line: the run's own "stash: ..." message, else the last error line, else the status."""
    if state.error:
        return state.error
    for line in reversed(state.stderr_tail):
        if line.startswith("stash: "):
            return line[len("stash: ") :]
    if state.stderr_tail:
        return state.stderr_tail[-1].strip()
    if exit_code < 0 or exit_code > 128:
        return f"the run was ended by a signal (exit status {exit_code})"
    return f"the run failed (exit status {exit_code})"


def measuring_processes(known_pids: set[int] | frozenset[int] = frozenset()) -> list[dict[str, Any]]:
    """Profiles (and other measurements) running on this machine that `known_pids` does not cover: one
    {"pid", "command"} per measurement, outermost process only. A process counts as covered when it or one
    of its ancestors is in `known_pids` (the running jobs of a database's registry)."""
    found: dict[int, tuple[int, str]] = {}
    for process in psutil.process_iter(["pid", "ppid", "cmdline"]):
        info = process.info
        argv = info.get("cmdline") or []
        if info["pid"] != os.getpid() and _measures(argv):
            found[info["pid"]] = (info.get("ppid") or 0, " ".join(argv))
    outer = []
    for pid, (_, command) in sorted(found.items()):
        lineage = _lineage(pid, found)
        if any(ancestor in found for ancestor in lineage[1:]) or known_pids.intersection(lineage):
            continue
        outer.append({"pid": pid, "command": command})
    return outer


def _measures(argv: list[str]) -> bool:
    for index, arg in enumerate(argv[:-1]):
        name = os.path.basename(arg)
        runs_stash = name == "stash" or (name == "stash_core" and index > 0 and argv[index - 1] == "-m")
        if runs_stash and argv[index + 1] in _MEASURING_COMMANDS:
            return True
    return any(module in argv for module in _WORKER_MODULES)


def _lineage(pid: int, found: dict[int, tuple[int, str]]) -> list[int]:
    """pid and its ancestors (as far as psutil can see)."""
    chain = [pid]
    try:
        chain += [parent.pid for parent in psutil.Process(pid).parents()]
    except psutil.Error:
        parent = found.get(pid, (0, ""))[0]
        if parent:
            chain.append(parent)
    return chain


# The exit statuses of Ctrl-C (130), SIGTERM (143) and SIGHUP (129), after which a profile saves what it
# measured; a SIGKILL (137) or a crash saves nothing.
SAVED_STOPS = (129, 130, 143)


def settle_status(state: JobState, running: bool, cancelled: bool) -> None:
    """The job's status (and error) from whether its processes run, its exit status and its own output."""
    exit_code = state.exit_code
    if running and exit_code is None:
        started = state.phases or state.messages or state.kind != "profile"  # a command job says no phases
        state.status = "running" if started else "starting"
    elif cancelled and exit_code != 0 and state.run_status != "completed":  # not after the run stored itself
        state.status = "cancelled"
        state.error = "cancelled by the user"
    elif exit_code is None and state.run_status in ("completed", "failed", "interrupted"):
        state.status = state.run_status  # its own last word: the wrapper that records the status was killed
    elif exit_code is None:
        state.status = "lost"
        state.error = "the run ended without an exit status (killed, or the machine restarted)"
    elif exit_code == 0 and state.kind == "profile" and not state.run_id:
        # A profile says what it saved (its DONE line) before it exits: without it nothing is known saved.
        state.status = "failed"
        state.error = "the profile ended (exit status 0) with no run saved: its output says why"
    elif exit_code == 0 or cancelled or (exit_code in SAVED_STOPS and state.run_status == "completed"):
        state.status = "completed"  # a Cancel or a signal after the run stored itself changed nothing
    elif exit_code in SAVED_STOPS:  # what was measured is saved
        state.status = "interrupted"
        state.error = failure_reason(state, exit_code)
    else:
        state.status = "failed"
        state.error = failure_reason(state, exit_code)
    for phase in state.phases:
        if state.finished and phase.status == "running":
            phase.status = "interrupted" if state.status != "completed" else "completed"
