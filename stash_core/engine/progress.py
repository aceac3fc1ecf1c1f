"""Progress of a profile: a bar per run on a terminal, or protocol lines for the dashboard."""

from __future__ import annotations

import sys
import time

from stash_core.engine.plan import PhasePlan
from stash_core.measure import protocol
from stash_core.terminal import printable

BAR_WIDTH = 24


def fraction_done(payload: dict) -> float:
    """How far a run is towards its stopping rule.

    With --iterations auto the interval shrinks as 1/sqrt(n), so the iterations still needed
    scale with (relative_ci / target)^2 and the fraction done is (target / relative_ci)^2.
    """
    fixed = payload.get("fixed_iterations")
    if fixed:
        return min(payload["kept"] / fixed, 1.0)
    relative_ci = payload.get("relative_ci")
    by_iterations = payload["iterations"] / max(payload["max_iterations"], 1)
    if not relative_ci:
        return by_iterations
    return min(max((payload["target_relative_ci"] / relative_ci) ** 2, by_iterations), 1.0)


def round_text(
    round_index: int, planned: int, max_rounds: int, runs: list[str], short: list[str]
) -> str | None:
    """The line that opens a round of launches: "round 2 of 3: R2 R3 R1 R0", or for a round past the planned
    ones, which runs are still short of their target. None with one launch per run (no rounds to speak of)."""
    if max_rounds <= 1:
        return None
    order = " ".join(runs)
    if round_index < planned:
        return f"round {round_index + 1} of {planned}: {order}"
    return (
        f"round {round_index + 1} (of at most {max_rounds}; {', '.join(short)} short of the target): {order}"
    )


class Reporter:
    """Receives progress; the CLI draws bars, the dashboard reads JSON lines. Silent by default."""

    def round_started(
        self, round_index: int, planned: int, max_rounds: int, runs: list[str], short: list[str]
    ) -> None:
        """A round of launches begins: every run once, in `runs` order. `planned` rounds always run, up to
        `max_rounds` while a run (those in `short`) is short of its target."""
        text = round_text(round_index, planned, max_rounds, runs, short)
        if text:
            self.message(text)

    def phase_started(self, plan: PhasePlan, index: int, total: int) -> None: ...
    def progress(self, payload: dict) -> None: ...
    def phase_finished(self, record: dict) -> None: ...
    def message(self, text: str) -> None: ...


class BarReporter(Reporter):
    """One progress bar per run, redrawn in place on stderr (a line per run where stderr is no terminal)."""

    def __init__(self, stream=None, always: bool = False) -> None:
        self.stream = stream or sys.stderr
        self.label = ""
        self.started = time.monotonic()
        self.reader_gone = self.stream is None  # stderr closed before start (`2>&-`): nobody to show it to
        # the bar on a terminal; `always` (--progress bar) draws it where no terminal is told of too (a
        # terminal that is not one to isatty, a log read with `less -r`), else a line per run
        self.tty = not self.reader_gone and (always or self.stream.isatty())

    def _write(self, text: str) -> None:
        """`text` on the stream, until its reader has gone (`stash profile 2>&1 | head`): the profile goes on
        and is saved, with nobody left to show its progress to."""
        if self.reader_gone:
            return
        try:
            self.stream.write(text)
            self.stream.flush()
        except (OSError, ValueError):  # a reader gone (EPIPE), a full device, a closed stream
            self.reader_gone = True

    def message(self, text: str) -> None:
        self._write(f"{printable(text)}\n")

    def phase_started(self, plan, index: int, total: int) -> None:
        self.label = f"[{index + 1}/{total}] {plan.name:<3} {plan.description}"
        self.started = time.monotonic()
        self._write(f"{self.label}\n")

    def progress(self, payload: dict) -> None:
        if not self.tty:
            return
        done = fraction_done(payload)
        filled = int(done * BAR_WIDTH)
        bar = "#" * filled + "." * (BAR_WIDTH - filled)
        ci = payload.get("relative_ci")
        ci_text = f"± {ci:.1%}" if ci is not None else "warming up"
        self._write(f"\r      [{bar}] {payload['iterations']:>5} it  {ci_text:<11}")

    def phase_finished(self, record: dict) -> None:
        elapsed = time.monotonic() - self.started
        cleared = "\r" + " " * 60 + "\r" if self.tty else ""
        if record.get("status") == "completed":
            summary = record["iteration_s"]
            kept = f"{summary['n']} iterations kept ({record['warmup_iterations']} warm-up)"
            figure = f"{summary['mean']:.4f} s ± {summary['ci95'] / summary['mean']:.1%}"
            self._write(f"{cleared}      {record['name']}: {kept}, {figure}  [{elapsed:.0f} s]\n")
        else:
            # why is said once, by the profile's own error at its end (every front end prints or raises it)
            self._write(f"{cleared}      {record['name']}: failed  [{elapsed:.0f} s]\n")


class JsonReporter(Reporter):
    """Protocol lines on stdout (or `stream`), for programs that drive `stash profile` (the dashboard) and
    for the run registry's log of a profile started from a terminal (engine/jobs.py)."""

    def __init__(self, stream=None) -> None:
        self.stream = stream

    def message(self, text: str) -> None:
        protocol.emit("PHASE", {"event": "message", "text": text}, self.stream)

    def round_started(
        self, round_index: int, planned: int, max_rounds: int, runs: list[str], short: list[str]
    ) -> None:
        """A PHASE line with event "round" (the dashboard's whole-profile progress counts launches by it),
        its text among the messages."""
        payload = {
            "event": "round",
            "round": round_index,
            "planned": planned,
            "max_rounds": max_rounds,
            "runs": list(runs),
            "short": list(short),
            "text": round_text(round_index, planned, max_rounds, runs, short),
        }
        protocol.emit("PHASE", payload, self.stream)

    def phase_started(self, plan, index: int, total: int) -> None:
        payload = {"event": "started", "index": index, "total": total, **plan.to_dict()}
        protocol.emit("PHASE", payload, self.stream)

    def progress(self, payload: dict) -> None:
        protocol.emit("PROGRESS", {**payload, "fraction_done": fraction_done(payload)}, self.stream)

    def phase_finished(self, record: dict) -> None:
        summary = record.get("iteration_s") or {}
        protocol.emit(
            "PHASE",
            {
                "event": "finished",
                "name": record["name"],
                "description": record.get("description"),
                "iterations": summary.get("n"),
                "status": record.get("status"),
                "error": record.get("error"),
                "mean_s": summary.get("mean"),
                "ci95_s": summary.get("ci95"),
            },
            self.stream,
        )


class TeeReporter(Reporter):
    """Hands every event to each of its reporters; one that fails (a full disk under a log) is dropped, so
    that a record of the progress never stops the profile itself."""

    def __init__(self, *reporters: Reporter) -> None:
        self.reporters = list(reporters)

    def _each(self, method: str, *args) -> None:
        for reporter in list(self.reporters):
            try:
                getattr(reporter, method)(*args)
            except OSError:
                if reporter is self.reporters[0]:
                    raise  # the first one is the user's own output
                self.reporters.remove(reporter)

    def round_started(
        self, round_index: int, planned: int, max_rounds: int, runs: list[str], short: list[str]
    ) -> None:
        self._each("round_started", round_index, planned, max_rounds, runs, short)

    def phase_started(self, plan, index: int, total: int) -> None:
        self._each("phase_started", plan, index, total)

    def progress(self, payload: dict) -> None:
        self._each("progress", payload)

    def phase_finished(self, record: dict) -> None:
        self._each("phase_finished", record)

    def message(self, text: str) -> None:
        self._each("message", text)
