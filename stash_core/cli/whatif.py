"""`stash whatif RUN_ID`: what would hide a stored run's CPU, disk and network stalls."""

from __future__ import annotations

import argparse
import json
from typing import Any

from stash_core.cli.args import Number, add_db_argument, db_path
from stash_core.decide.whatif_stalls import DEFAULT_TARGET_SHARE, MIN_TARGET_SHARE
from stash_core.terminal import one_line, printable

# The what-if answers are imported inside cmd_whatif: building `stash --help` must not load pandas.


def add_commands(subparsers: Any, parser_class: type[argparse.ArgumentParser] | None = None) -> None:
    """Add `whatif` to `stash`'s subparsers."""
    what = subparsers.add_parser("whatif", help="what would hide a stored run's CPU, disk and network stalls")
    what.add_argument("run_id", help="the run id, or any unique part of it")
    what.add_argument(
        "--target-share", default=DEFAULT_TARGET_SHARE,
        type=Number(MIN_TARGET_SHARE, 1, whole=False, high_open=True,
                    what=f"a fraction from {MIN_TARGET_SHARE:g} to below 1"),
        help="network stall to aim for, as a share of the rest of the iteration (0.05: 5%% of the time the "
        "iteration takes without it)",
    )
    what.add_argument("--json", action="store_true", help="print the answer as JSON")
    add_db_argument(what)


def cmd_whatif(args: argparse.Namespace) -> int:
    from stash_core.decide.whatif import whatif

    answer = whatif(db_path(args), args.run_id, target_share=args.target_share)
    if args.json:
        print(json.dumps(answer, indent=2, default=str))
    else:
        # the run's stored model name kept on its line, and labels never run
        model = answer.get("model")
        print(printable(format_whatif({**answer, "model": one_line(model) if model else model})))
    return 0


def format_whatif(answer: dict) -> str:
    """Plain-text report for `stash whatif`."""
    lines = [f"run {answer['run_id']} ({answer['model'] or '-'}): iteration {answer['iteration_s']:.4f} s"]
    if answer.get("partial"):
        lines.append(f"  partial: {answer['partial']}, not the time of the job profiled")
    for key, title in (("cpu", "CPU cores"), ("disk", "cache"), ("network", "network bandwidth")):
        item = answer[key]
        if item["status"] in ("answered", "hidden already", "within target"):
            predicted = item.get("predicted_iteration_s")
            tail = f" -> iteration {predicted:.4f} s" if predicted is not None else ""
            lines.append(f"  {title:<18} {item['summary']}{tail}")
        else:  # its summary where it has one: "within the noise" alone lost what would resolve it
            lines.append(f"  {title:<18} {item.get('summary') or item['status']}")
        if key == "cpu":  # under the CPU's answer: after the network's it read as the network's
            for row in item.get("predictions") or []:
                lines.append(f"      {row['cores_per_worker']:>3} cores/worker -> {row['iteration_s']:.4f} s")
    lines.append("  assumptions: " + "; ".join(answer["assumptions"]))
    return "\n".join(lines)


COMMANDS = {"whatif": cmd_whatif}
