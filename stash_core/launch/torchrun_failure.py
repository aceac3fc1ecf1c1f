"""The one line a failed torchrun launch is reported by, read from its stderr.

torchrun ends a failed launch with its own ChildFailedError and a summary of the first rank that failed;
that banner is never the reason. A worker's exception is, unless a rank was ended by a signal: then the
peers' lost connections are symptoms and the summary's rank, exit code and signal are the cause.
"""

from __future__ import annotations

import re

# "RuntimeError: ...", "torch.distributed.DistBackendError: ...": the exception a worker died of.
_EXCEPTION_LINE = re.compile(r"^[A-Za-z_][\w.]*(Error|Exception|Interrupt|Exit)\b:? ")
# torchrun prefixes a worker's stderr lines with its rank when asked to: "[rank1]: RuntimeError: ..."
_RANK_PREFIX = re.compile(r"^\[rank\d+\]:\s*")
# torchrun's failure summary: "  rank      : 1 (local_rank: 1)", "  exitcode  : -6 (pid: 4242)", ...
_SUMMARY_FIELD = re.compile(r"^\s*(rank|exitcode|traceback)\s*:\s*(.+?)\s*$", re.MULTILINE)


def root_cause(lines: list[str], default: str = "the run exited without a result") -> str:
    """The most telling line of a failed run's stderr: the root cause of torchrun's failure summary when a
    rank was ended by a signal, else a worker's exception message, else that root cause (rank, exit code),
    else the last line that is not a traceback frame or a banner of '=' or '-'."""
    texts = [_RANK_PREFIX.sub("", line.strip()) for line in lines]
    summary = dict(_SUMMARY_FIELD.findall("\n".join(texts)))
    # A rank ended by a signal is the cause; its peers' lost connections are only the symptom.
    killed = summary.get("exitcode", "").startswith("-")
    for text in reversed(texts):
        if not killed and _EXCEPTION_LINE.match(text) and "ChildFailedError" not in text:
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
