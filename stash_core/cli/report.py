"""Plain-text rendering of a stall breakdown (the CLI's table)."""

from __future__ import annotations

from stash_core.analysis.stalls import STALLS

LABELS = {
    "compute": "compute",
    "interconnect": "interconnect",
    "network": "network",
    "cpu": "CPU prep",
    "disk": "disk fetch",
}


def format_breakdown(breakdown: dict, dataset_images: int | None = None) -> str:
    """The breakdown table: iteration time with its interval, then one line per stall."""
    iteration_s = breakdown["iteration_s"]
    ci = breakdown.get("iteration_ci95_s")
    relative = f" ± {ci / iteration_s:.1%}" if ci is not None and iteration_s else ""
    head = f"iteration {iteration_s:.3f} s{relative}"
    if breakdown.get("epoch_s") is not None:
        images = (
            f"{dataset_images} images"
            if dataset_images
            else f"{breakdown['iterations_per_epoch']} iterations"
        )
        head += f"  (epoch of {images}: {format_seconds(breakdown['epoch_s'])})"
    lines = [head]
    for name in STALLS:
        stall = breakdown["stalls"].get(name) or {}
        status = stall.get("status", "not_measured")
        label = f"  {LABELS[name]:<14}"
        if status == "not_measured":
            continue
        if status == "not_separable":
            lines.append(f"{label}not separable: {stall.get('note', '')}")
            continue
        line = f"{label}{stall['seconds']:.3f} s  {stall['share']:6.1%}  ± {stall['ci95_s']:.3f}"
        if status == "clamped_zero":
            line += "  (within noise)"
        elif status == "negative":
            line += "  (negative beyond noise)"
        lines.append(line)
    unattributed_s = breakdown.get("unattributed_s") or 0.0
    if abs(unattributed_s) > 0:
        lines.append(f"  {'not separated':<14}{unattributed_s:.3f} s  {unattributed_s / iteration_s:6.1%}")
    for warning in breakdown.get("warnings") or []:
        lines.append(f"warning: {warning}")
    return "\n".join(lines)


def format_seconds(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.1f} s"
    if seconds < 7200:
        return f"{seconds / 60:.1f} min"
    return f"{seconds / 3600:.2f} h"
