"""The one line a failed torchrun launch is reported by, read from its stderr (root_cause), and with what
its workers said (failure_line).

torchrun ends a failed launch with its own ChildFailedError and a summary of the first rank that failed;
that banner is never the reason. A worker's exception is, unless a rank was ended by a signal: then the
peers' lost connections are symptoms and the summary's rank and signal are the cause.
"""

from __future__ import annotations

import re
import signal

from stash_core.terminal import clipped, one_line

FAILURE_CHARS = 600  # of the line: a dead rank's part, then a worker's error (each clipped to 300 already)

# "RuntimeError: ...", "torch.distributed.DistBackendError: ...": the exception a worker died of.
_EXCEPTION_LINE = re.compile(r"^[A-Za-z_][\w.]*(Error|Exception|Interrupt|Exit)\b:? ")
# torchrun prefixes a worker's stderr lines with its rank when asked to: "[rank1]: RuntimeError: ..."
_RANK_PREFIX = re.compile(r"^\[rank\d+\]:\s*")
# torchrun's failure summary: "  rank      : 1 (local_rank: 1)", "  exitcode  : -6 (pid: 4242)", ...
_SUMMARY_FIELD = re.compile(r"^\s*(rank|exitcode|traceback)\s*:\s*(.+?)\s*$", re.MULTILINE)
_EXIT_CODE = re.compile(r"^(-?\d+)(?:\s*\(pid:\s*(\d+)\))?")
# How a line of root_cause (or an older stored one) says a rank was ended by a signal, and which.
ENDED_BY_SIGNAL = re.compile(r"(?:was killed|was ended) by (SIG[A-Z0-9]+)|exited with code -(\d+)\b")
# SIGKILL from nobody the user knows of is, on Linux, most often the kernel's out-of-memory killer.
OOM_HINT = "the out-of-memory killer does this: check `dmesg` and the machine's free memory"


def root_cause(lines: list[str], default: str = "the run exited without a result") -> str:
    """The most telling line of a failed run's stderr: the root cause of torchrun's failure summary when a
    rank was ended by a signal, else a worker's exception message, else that root cause (rank, exit code),
    else the last line that is not a traceback frame or a banner of '=' or '-'."""
    texts = [_RANK_PREFIX.sub("", line.strip()) for line in lines]
    summary = _root_cause_fields(texts)
    code = _EXIT_CODE.match(summary.get("exitcode", ""))
    # A rank ended by a signal is the cause; its peers' lost connections are only the symptom.
    if code and int(code.group(1)) < 0:
        return signal_line(summary.get("rank"), -int(code.group(1)), code.group(2))
    for text in reversed(texts):
        if _EXCEPTION_LINE.match(text) and "ChildFailedError" not in text:
            return text[:300]
    if "exitcode" in summary:
        rank = f"rank {summary['rank']}" if "rank" in summary else "a worker"
        cause = summary.get("traceback", "")
        detail = f" ({cause})" if cause and not cause.startswith(("<N/A>", "To enable traceback")) else ""
        return f"{rank} exited with code {summary['exitcode']}{detail}"[:300]
    for text in reversed(texts):
        if (
            text
            and not text.startswith(("File ", "Traceback", "^", "~"))
            and "warnings.warn" not in text
            and text.strip("=-") != ""
        ):
            return text[:300]
    return default


def _root_cause_fields(texts: list[str]) -> dict[str, str]:
    """The fields of the summary's root cause (its other failures, listed before it, are the ranks torchrun
    ended after it)."""
    starts = [index for index, text in enumerate(texts) if text.startswith("Root Cause")]
    block = texts[starts[-1] :] if starts else texts
    return dict(_SUMMARY_FIELD.findall("\n".join(block)))


def signal_line(rank: str | None, number: int, pid: str | None = None) -> str:
    """'rank 1 (pid 42) was killed by SIGKILL (...)': a rank that a signal ended, with what likely sent it."""
    rank_text = f"rank {rank.split()[0]}" if rank else "a worker"
    who = f"{rank_text} (pid {pid})" if pid else rank_text
    try:
        name = signal.Signals(number).name
    except ValueError:  # a number no signal of this machine has: said as torchrun says it
        return f"{who} exited with code -{number}"
    if number == signal.SIGKILL:
        return f"{who} was killed by SIGKILL ({OOM_HINT})"
    return f"{who} was ended by {name}"


def signal_of(text: str | None) -> str | None:
    """The signal (SIGKILL, SIGABRT, ...) that ended a rank, as a failure line names it; None if none did."""
    match = ENDED_BY_SIGNAL.search(text or "")
    if match is None:
        return None
    if match.group(1):
        return match.group(1)
    try:
        return signal.Signals(int(match.group(2))).name
    except ValueError:
        return f"signal {match.group(2)}"


# A peer's error after a rank died: the collective lost its connection to it, or waited for it in vain.
_LOST_PEER = re.compile(r"connection (closed|reset|refused)|pair closure|broken pipe|timed? ?out", re.I)
# The rank a failure line says a signal ended (signal_line, or torchrun's own words).
_DEAD_RANK = re.compile(r"\brank (\d+)\b[^;]*?(?:killed by|ended by|exited with code -)")


def failure_line(failure: str | None, errors: list[str], remote: bool) -> str:
    """One line, its control characters written out: on one machine the workers' own error; across
    machines the launcher's (which names the node) first, since a dead peer makes the others report only
    its symptom. A rank ended by a signal is the cause wherever it ran, and its peers' lost connections to
    it are left out (their error is not the first cause)."""
    if signal_of(failure):
        dead = _DEAD_RANK.search(failure)
        # "rank 1 (host): ..." from a worker, "rank 1: ..." from a probe worker; never rank 10's
        own = [error for error in errors if dead and re.match(rf"rank {dead[1]}[ :]", error)]
        other = [error for error in errors if not _LOST_PEER.search(error)]
        line = failure
        if own or other:
            line += f"; {'it' if own else 'another rank'} reported: {(own or other)[0]}"
    elif not remote:
        line = errors[0] if errors else (failure or "the run exited without a result")
    elif failure and errors:
        line = f"{failure}; first worker error: {errors[0]}"
    else:
        line = failure or (errors[0] if errors else "the run exited without a result")
    return clipped(one_line(line), FAILURE_CHARS)  # start and end kept, the cut said


# gloo's words for a collective that waited past its timeout ("Timed out waiting 5000ms for recv operation")
_COLLECTIVE_TIMEOUT = re.compile(r"timed out waiting \d+ ?ms", re.IGNORECASE)


def timeout_hint(error: str | None, comm_timeout_s: int) -> str:
    """What to do where a collective across machines waited past --comm-timeout: a slow link's all-reduce of
    the whole gradient can take longer than it; "" for any other failure."""
    if not error or not _COLLECTIVE_TIMEOUT.search(error):
        return ""
    return (f"; a collective waited past --comm-timeout ({comm_timeout_s} s): on a slow link one all-reduce "
            "of the gradients may take longer (`stash probe` times it): raise --comm-timeout")  # fmt: skip
