"""A cloud campaign's results brought back: one result file copied from the rented machine over SSH as soon
as its profile finished, stored under this machine's results folder and in the database, labelled with the
instance type and with where it ran (`spec.cloud`: provider, region, pricing, hourly price and its date).

SkyPilot names every cluster for ssh: it writes ~/.sky/generated/ssh/CLUSTER and includes it from
~/.ssh/config, so `ssh CLUSTER` reaches the cluster's head node; that file is used when it is there.
"""

from __future__ import annotations

import re
import threading
import time
from pathlib import Path

from stash_core.campaign.cloud_plan import InstancePlan
from stash_core.campaign.plan import CampaignItem
from stash_core.campaign.remote import Finished, result_file_name, results_dir
from stash_core.errors import UsageError, first_line
from stash_core.launch.ssh import SshTarget, run_remote
from stash_core.results.file import load_result, write_result_atomic
from stash_core.userfiles import parse_json

COPY_TIMEOUT_S = 120.0
CLOUD_KEY = "cloud"  # spec.cloud of a run a cloud campaign stored
_PLAIN_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,79}$")


def _run_mark(doc: object) -> str:
    """What makes a copied-back file's name its run's own: the run id where it is a plain name, else the UTC
    time of the copy. The remote file is named by its configuration alone, and a second run of it (a retry,
    another --input-shape) replaced the first one's file that the database names."""
    run_id = doc.get("run_id") if isinstance(doc, dict) else None
    if isinstance(run_id, str) and _PLAIN_ID.match(run_id):
        return run_id
    return time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())


def cluster_target(cluster: str) -> SshTarget:
    """How ssh reaches a SkyPilot cluster: its own config file where SkyPilot wrote one, else by name."""
    config = Path.home() / ".sky" / "generated" / "ssh" / cluster
    return SshTarget(host=cluster, config_file=config if config.is_file() else None)


def cloud_record(plan: InstancePlan) -> dict:
    """What `spec.cloud` records of where a run ran and what it cost per hour."""
    offer = plan.offer
    return {
        "provider": offer.provider, "region": offer.region, "instance_type": offer.name,
        "pricing": offer.pricing, "usd_per_h": offer.usd_per_h, "price_date": offer.price_date,
        "price_region": offer.price_region, "cluster": plan.cluster,
    }  # fmt: skip


class ResultCopier:
    """Copies result files back and stores them, one at a time (the database takes one writer)."""

    def __init__(self, db_path: Path | str, results_dir: Path) -> None:
        self.db_path, self.results_dir = db_path, Path(results_dir)
        self.lock = threading.Lock()

    @staticmethod
    def file_name(item: CampaignItem) -> str:
        return result_file_name(item)

    def fetch(self, plan: InstancePlan, item: CampaignItem, finished: Finished) -> tuple[str, str]:
        """("completed", run_id), or (the run's status or "failed", the reason)."""
        remote = f"{results_dir(plan.cluster)}/{finished.file_name}"
        try:
            copied = run_remote(cluster_target(plan.cluster), ["cat", remote], timeout_s=COPY_TIMEOUT_S)
        except Exception as error:  # noqa: BLE001 - ssh's failures: the machine is gone
            return "failed", f"not copied back: {first_line(str(error))}"
        if copied.returncode != 0:
            return "failed", f"no result file (the profile exited with status {finished.exit_code})"
        local = self.results_dir / plan.cluster / finished.file_name
        try:
            with self.lock:
                doc = parse_json(copied.stdout, f"{plan.cluster}:{remote}")
                if isinstance(doc, dict) and isinstance(doc.get("spec"), dict):
                    doc["spec"][CLOUD_KEY] = cloud_record(plan)
                local = local.with_name(f"{local.stem}-{_run_mark(doc)}.json")
                write_result_atomic(local, doc)
                doc = load_result(local)
                from stash_core.store import ingest_result

                ingest_result(self.db_path, doc, source_file=str(local))
        except UsageError as error:
            return "failed", f"{local}: {first_line(str(error))}"
        status = str(doc.get("status") or "failed")
        if status == "completed":
            return status, str(doc["run_id"])
        return status, str(doc.get("error") or f"exit status {finished.exit_code}")
