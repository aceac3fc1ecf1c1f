"""`python -m stash_core.campaign.sky_check`: the tasks of a cloud campaign checked by SkyPilot itself, in a
process of their own whose home (HOME, set by skypilot_task.check_tasks) holds a SkyPilot catalog written from
Stash's rows, so that SkyPilot downloads none.

It imports SkyPilot first (some seconds), while the campaign is planned, then reads {"configs": {cluster:
task}, "catalog": {cloud: [vms.csv rows]}} on stdin; prints {"lines": [...]}, one line per task: 'CLUSTER: ok
(RESOURCES, PRICE)' or 'CLUSTER: REASON'.
"""

from __future__ import annotations

import copy
import csv
import json
import os
import sys
from pathlib import Path
from typing import Any

# SkyPilot's vms.csv columns (catalog/skypilot.py reads the same format). This module imports nothing of
# Stash's: the process starts at once and spends its time importing SkyPilot.
VMS_COLUMNS = ("InstanceType", "AcceleratorName", "AcceleratorCount", "vCPUs", "MemoryGiB", "GpuInfo",
               "Price", "SpotPrice", "Region", "AvailabilityZone")  # fmt: skip


def write_catalog(home: Path, rows: dict[str, list[dict[str, Any]]], version: str) -> None:
    """home/.sky/catalogs/<version>/<cloud>/vms.csv, one file per cloud."""
    for cloud, cloud_rows in rows.items():
        path = home / ".sky" / "catalogs" / version / cloud / "vms.csv"
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("w", newline="") as handle:
            writer = csv.DictWriter(handle, fieldnames=VMS_COLUMNS)
            writer.writeheader()
            writer.writerows(cloud_rows)


def check(config: dict[str, Any]) -> str:
    """'ok (resources)' when SkyPilot builds the task and its resources, else the first line of its error."""
    import sky

    try:
        task = sky.Task.from_yaml_config(copy.deepcopy(config))  # it takes the dict apart
        wanted = config["resources"]
        # the task's resources, and the same built on their own (Resources checks the instance type, the
        # region and spot against the catalog)
        described = [f"{resources}" for resources in task.resources]
        checked = sky.Resources(
            infra=wanted["infra"], instance_type=wanted["instance_type"], use_spot=wanted["use_spot"]
        )
        return f"ok ({', '.join(described)}, ${checked.get_cost(3600):.3f}/h)"
    except Exception as error:  # noqa: BLE001 - SkyPilot's own errors, reported as the task's line
        text = str(error).strip().splitlines()
        return f"{type(error).__name__}: {text[0] if text else ''}".rstrip(": ")


def consult_no_account() -> None:
    """Before it answers about an instance type, SkyPilot's AWS catalog asks the user's account which zones
    it has (`aws configure list`, then AWS's STS and EC2 APIs: seconds, and the network). A plan's check is
    of the tasks against the catalog written here, never of an account: the identity is refused at once, as
    without credentials, and SkyPilot takes the catalog's zones as they are."""
    from sky import clouds, exceptions

    def no_identity(cls: Any) -> None:
        raise exceptions.CloudUserIdentityError("a plan's check consults no cloud account")

    aws = getattr(clouds, "AWS", None)
    if aws is not None and hasattr(aws, "get_user_identities"):
        aws.get_user_identities = classmethod(no_identity)


def main() -> int:
    try:  # first, while the campaign plans: the request comes once the plan is made
        import sky  # noqa: F401
        from sky.skylet import constants
    except Exception as error:  # noqa: BLE001 - a broken install (a dependency replaced): one line, not its traceback
        text = str(error).strip().splitlines()
        print(f"SkyPilot could not be loaded: {text[0] if text else type(error).__name__}", file=sys.stderr)
        # the request is read all the same: a caller writing it to a process that had exited would get
        # SIGPIPE, which ends a program that has it at its default (not Python's) without a word
        sys.stdin.read()
        return 1

    consult_no_account()

    text = sys.stdin.read()
    if not text.strip():  # the plan was refused: nothing to check
        return 0
    request = json.loads(text)

    write_catalog(Path.home(), request.get("catalog") or {}, str(constants.CATALOG_SCHEMA_VERSION))
    lines = [f"{cluster}: {check(config)}" for cluster, config in request["configs"].items()]
    print(json.dumps({"lines": lines}))
    return 0


if __name__ == "__main__":
    code = main()
    sys.stdout.flush()
    sys.stderr.flush()
    # The answer is out: end without tearing SkyPilot's modules and threads down (half a second the plan
    # waits for, as it reads the answer to the end of the output).
    os._exit(code)
