"""How much of a communication stall backward computation hid, read so that it is physically possible.

analysis.comm.communication_bounds gives `exposed_s`, how much longer backward (which holds DDP's
all-reduce) took than in the reference run, and `overlap_share` = 1 - exposed / added all-reduce time,
clamped to 0..1. A difference of two noisy means can come out negative; "exposed -539 ms, hidden 100%" is
not a measurement. overlap_reading puts the exposed time against its 95% interval: within the noise it says
so (with the interval, and the least share hidden that the interval allows); negative beyond the noise it
says the runs were not comparable instead of printing an impossible figure.
"""

from __future__ import annotations

from stash_core.analysis.stats import sign_verdict
from stash_core.units import finite_float

EXPOSED_STATES = ("unknown", "exposed", "within_noise", "negative")


def overlap_reading(bounds: dict, fallback_ci95_s: float | None = None) -> dict:
    """{"state", "exposed_s", "ci95_s", "hidden_share", "hidden_at_least", "interval_source", "text"}.

    state: "unknown" (no exposed time), "exposed" (positive beyond the noise: the figures stand),
    "within_noise" (the interval reaches past zero: exposed time not resolved; hidden_at_least is the least
    share of the added all-reduce time hidden at the upper end of the interval, None when nothing can be
    said) or "negative" (backward was faster with more workers, beyond the noise: not physically possible,
    the runs were not comparable). The interval is the bounds' `exposed_ci95_s` when there is one, else
    `fallback_ci95_s` (the stall's own interval: the two runs' iteration times), else none.
    """
    exposed_s = finite_float(bounds.get("exposed_s"))
    reading = {"state": "unknown", "exposed_s": exposed_s, "ci95_s": None, "hidden_share": None,
               "hidden_at_least": None, "interval_source": None, "text": ""}  # fmt: skip
    if exposed_s is None:
        return reading
    ci95_s = finite_float(bounds.get("exposed_ci95_s"))
    reading["interval_source"] = "exposed" if ci95_s is not None else None
    if ci95_s is None and finite_float(fallback_ci95_s) is not None:
        ci95_s, reading["interval_source"] = float(fallback_ci95_s), "stall"  # type: ignore[arg-type]
    reading["ci95_s"] = ci95_s
    added_s = finite_float(bounds.get("added_allreduce_s"))
    verdict = sign_verdict(exposed_s, ci95_s)
    if verdict == "positive":
        reading.update(state="exposed", hidden_share=finite_float(bounds.get("overlap_share")))
        return reading
    if verdict == "negative":
        reading["state"] = "negative"
        reading["text"] = (
            f"backward was {_time(-exposed_s)} faster than in the reference run, beyond the noise"
            + (f" (± {_time(ci95_s)})" if ci95_s is not None else "")
            + ": not physically possible, so the runs were not comparable (other load, or too few "
            "iterations); the exposed time and the share hidden are not resolved - rerun on a quieter machine"
        )
        return reading
    reading["state"] = "within_noise"
    upper_s = max(exposed_s, 0.0) + (ci95_s or 0.0)
    if added_s and added_s > 0 and upper_s < added_s:
        reading["hidden_at_least"] = 1.0 - upper_s / added_s
    hidden = (
        f"; at least {reading['hidden_at_least']:.0%} of the added all-reduce time was hidden"
        if reading["hidden_at_least"] is not None
        else ""
    )
    reading["text"] = (
        f"exposed time {_time(exposed_s)} ± {_time(ci95_s or 0.0)} is within the noise: backward did not "
        f"measurably slow down{hidden}"
    )
    return reading


def _time(seconds: float) -> str:
    if abs(seconds) < 1e-3:
        return f"{seconds * 1e6:.3g} us"
    if abs(seconds) < 1:
        return f"{seconds * 1e3:.3g} ms"
    return f"{seconds:.3g} s"
