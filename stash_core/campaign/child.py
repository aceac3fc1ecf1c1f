"""`python -m stash_core.campaign.child REQUEST.json`: a cloud campaign run in the background for the
dashboard's Campaign page (a job of engine/jobs.py, kind "campaign").

The request holds `stash campaign --cloud`'s options as the page asks for them: db, instances, models,
batch_sizes, spot, region, budget_usd, iterations, parallel, idle_minutes. The campaign is planned and
refused above its budget as the command does, then run through SkyPilot; each progress line and the summary
go to stdout. Ctrl-C (the page's Stop sends SIGINT) tears every cluster down first. Exit status as the
command's (exits.run_command): 0 every profile completed, 1 some did not, 2 a bad request.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from stash_core.errors import UsageError, first_line
from stash_core.exits import run_command

KEYS = ("db", "instances", "models", "batch_sizes", "spot", "region", "budget_usd", "iterations", "parallel",
        "idle_minutes")  # fmt: skip


def read_request(path: Path) -> dict[str, Any]:
    """The request file's options; UsageError (one line) for a file that is not one."""
    try:
        request = json.loads(Path(path).read_text())
    except (OSError, ValueError) as error:
        raise UsageError(f"campaign request {path}: {first_line(str(error))}") from None
    missing = [key for key in KEYS if not isinstance(request, dict) or key not in request]
    if missing:
        raise UsageError(f"campaign request {path}: missing {', '.join(missing)}")
    return request


def run_request(request: dict[str, Any]) -> int:
    """Plan, refuse above the budget, run; the exit status."""
    from stash_core.campaign.cloud import load_sky, run_cloud_campaign, summary
    from stash_core.campaign.cloud_plan import check_budget, plan_cloud
    from stash_core.campaign.plan import CampaignSettings
    from stash_core.campaign.skypilot_task import INSTALL_HINT, skypilot_installed

    settings = CampaignSettings(db_path=Path(request["db"]), iterations=str(request["iterations"]))
    plan = plan_cloud(
        list(request["instances"]), list(request["models"]), [int(size) for size in request["batch_sizes"]],
        None, settings, spot=bool(request["spot"]), region=request["region"], parallel=int(request["parallel"]),
    )  # fmt: skip
    check_budget(plan, request["budget_usd"])
    if not skypilot_installed():
        raise UsageError(INSTALL_HINT)
    todo = sum(len(item.todo) for item in plan.instances)
    say(f"cloud campaign: {len(plan.instances)} instance type(s), {todo} profile(s) to run, "
        f"${plan.cost_said_usd:.2f} at catalog prices planned")  # fmt: skip
    if not todo:
        say("nothing to run: every configuration is stored")
        return 0
    idle_minutes = int(request["idle_minutes"])
    outcomes = run_cloud_campaign(plan, settings, load_sky(), report=say, idle_minutes=idle_minutes)
    code, lines = summary(outcomes)
    for line in lines:
        say(line)
    return code


def say(line: str) -> None:
    print(line, flush=True)


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python -m stash_core.campaign.child REQUEST.json", file=sys.stderr)
        return 2
    return run_command(lambda: run_request(read_request(Path(args[0]))))


if __name__ == "__main__":
    sys.exit(main())
