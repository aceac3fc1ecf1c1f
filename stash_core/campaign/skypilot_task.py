"""The SkyPilot task of one instance type, built as plain data (what `sky launch` reads from a YAML file), its
YAML text, and its check by SkyPilot's own Task and Resources classes where SkyPilot is installed.

SkyPilot checks an instance type against its catalog of prices. So that no catalog is downloaded while a plan
is made, the check reads a catalog written from Stash's own (catalog/instances.csv, and the rows of the
database): SkyPilot's vms.csv format, one row per instance type in the region of its price, in a folder of
its own (SkyPilot reads ~/.sky/catalogs/<version>/ of the home it is given, and uses a file it did not fetch
itself as it is).

SkyPilot's answer depends only on its version, the tasks and those catalog rows (its home is a fresh folder),
so it is kept on disk under a digest of the three (and of sky_check.py): a plan checked before is answered
from there without importing SkyPilot (seconds). The folder is $STASH_CACHE_DIR/sky-checks, else
$XDG_CACHE_HOME/stash/sky-checks, else ~/.cache/stash/sky-checks; one that cannot be written only costs time.
"""

from __future__ import annotations

import datetime
import hashlib
import importlib.metadata
import importlib.util
import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import stash_core
from stash_core.campaign.cloud_plan import CloudPlan, InstancePlan
from stash_core.campaign.plan import CampaignSettings
from stash_core.campaign.remote import SETUP_SCRIPT, run_script
from stash_core.errors import UsageError, first_line
from stash_core.pathargs import user_cache_dir

INSTALL_HINT = (
    "SkyPilot is not installed: pip install -r requirements-cloud.txt (then `sky check` for your cloud)"
)
DISK_GB = 100  # the pinned packages with CUDA torch take some 15 GB; data sets are generated on the disk
_PLAIN = re.compile(r"^[A-Za-z0-9_./@:-]+$")
CHECK_TIMEOUT_S = 120.0
CHECK_FORMAT = 1  # of the answers kept on disk
_YAML_WORDS = {"true", "false", "yes", "no", "on", "off", "null", "none", "~"}


def skypilot_installed() -> bool:
    """Whether SkyPilot can be imported here (without importing it)."""
    return importlib.util.find_spec("sky") is not None


def task_config(plan: InstancePlan, settings: CampaignSettings, idle_minutes: int) -> dict[str, Any]:
    """The task of one instance type as SkyPilot's YAML has it: the instance type in its region (spot or
    not), autostop with teardown after `idle_minutes` idle as a safety net, this checkout as the workdir, the
    set-up of Stash and the profiles not stored yet."""
    offer = plan.offer
    return {
        "name": plan.cluster,
        "workdir": stash_core.PACKAGE_PARENT,
        "resources": {
            "infra": f"{offer.provider}/{offer.region}",
            "instance_type": offer.name,
            "use_spot": offer.spot,
            "disk_size": DISK_GB,
            "autostop": {"idle_minutes": int(idle_minutes), "down": True},
        },
        "setup": SETUP_SCRIPT,
        "run": run_script(plan.items, settings, plan.cluster),
    }


def to_yaml(value: Any) -> str:
    """YAML text of plain data (dicts, lists, text, numbers, booleans); text of several lines as a block. The
    document ends with a line break (the last block's own)."""
    return _yaml(value, 0) + "\n"


def _yaml(value: Any, indent: int) -> str:
    pad = " " * indent
    if isinstance(value, dict):
        lines = []
        for key, item in value.items():
            if isinstance(item, dict | list) and item:
                lines.append(f"{pad}{key}:\n{_yaml(item, indent + 2)}")
            elif isinstance(item, str) and "\n" in item and _block_safe(item):
                body = "\n".join(f"{pad}  {line}" if line else "" for line in item.rstrip("\n").split("\n"))
                lines.append(f"{pad}{key}: |\n{body}")
            else:
                lines.append(f"{pad}{key}: {_scalar(item)}")
        return "\n".join(lines)
    if isinstance(value, list):
        return "\n".join(f"{pad}- {_scalar(item)}" for item in value)
    return f"{pad}{_scalar(value)}"


def _scalar(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, dict | list):
        return json.dumps(value)
    text = str(value)
    if _PLAIN.match(text) and text.lower() not in _YAML_WORDS and not _number_like(text):
        return text
    return _quoted(text)


# What a literal block cannot hold as it is: characters YAML reads as line breaks (a block's line would end
# there and the rest be read as keys of the task), the BOM and the two non-characters YAML refuses, control
# characters (printed raw, they act on the terminal) and the bidirectional controls that reorder the text.
_NOT_AS_IS = re.compile(
    "[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2028\u2029\u2066-\u2069\ufeff\ufffe\uffff"
    "\ud800-\udfff]"
)


def _block_safe(text: str) -> bool:
    """Whether `text` reads back the same from a literal block (`|`): no character of _NOT_AS_IS, and a first
    line with text that does not start with a space (it would set the block's indentation)."""
    first = next((line for line in text.split("\n") if line.strip()), "")
    return not _NOT_AS_IS.search(text) and not first.startswith(" ")


def _quoted(text: str) -> str:
    """`text` as a YAML double-quoted scalar (a JSON string is one) with every character of _NOT_AS_IS
    escaped, so the printed YAML reads back as the task and the terminal shows it as text; other characters
    as they are (PyYAML reads an escaped surrogate pair as two characters, not the one it stands for)."""
    quoted = json.dumps(text, ensure_ascii=False)
    return _NOT_AS_IS.sub(lambda match: f"\\u{ord(match.group()):04x}", quoted)


def _number_like(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def skypilot_version() -> str | None:
    """The installed SkyPilot's version (without importing it); None when its metadata cannot be read."""
    for distribution in ("skypilot", "skypilot-nightly"):
        try:
            return importlib.metadata.version(distribution)
        except importlib.metadata.PackageNotFoundError:
            continue
    return None


def check_cache_dir() -> Path | None:
    """Where SkyPilot's answers are kept (see the module's text); None with no home folder."""
    return user_cache_dir("sky-checks")


def _cache_path(version: str | None, request: str) -> Path | None:
    if version is None:
        return None
    checker = (Path(__file__).resolve().parent / "sky_check.py").read_bytes()
    digest = hashlib.sha256(json.dumps([CHECK_FORMAT, version, hashlib.sha256(checker).hexdigest(),
                                        request]).encode())  # fmt: skip
    folder = check_cache_dir()
    return folder / f"{digest.hexdigest()[:32]}.json" if folder is not None else None


def _read_answer(path: Path | None) -> dict[str, Any] | None:
    if path is None:
        return None
    try:
        answer = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    lines = answer.get("lines") if isinstance(answer, dict) else None
    if not isinstance(lines, list) or not all(isinstance(line, str) for line in lines):
        return None
    return {"lines": lines, "date": str(answer.get("date") or "")}


def _keep_answer(path: Path | None, lines: list[str]) -> None:
    if path is None:
        return
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        handle, temporary = tempfile.mkstemp(dir=path.parent, suffix=".tmp")
    except OSError:
        return  # a read-only or full disk: the next dry run asks SkyPilot again
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as out:
            json.dump({"lines": lines, "date": datetime.date.today().isoformat()}, out)
        os.replace(temporary, path)
    except OSError:
        Path(temporary).unlink(missing_ok=True)


class SkyCheck:
    """SkyPilot's check of the tasks (sky_check.py) in a process of its own, started before the plan is made
    so that its import of SkyPilot (some seconds) runs beside the planning; its home (HOME) is a folder of
    its own, where it writes the SkyPilot catalog it checks against. An answer kept from an earlier check of
    the same tasks by the same SkyPilot is used instead (the process is then stopped unused): `kept_on` is
    its date."""

    def __init__(self) -> None:
        if not skypilot_installed():
            raise UsageError(INSTALL_HINT)

        self.version = skypilot_version()
        self.kept_on: str | None = None
        self.home = tempfile.TemporaryDirectory(prefix="stash-sky-")
        path = os.pathsep.join(filter(None, [stash_core.PACKAGE_PARENT, os.environ.get("PYTHONPATH")]))
        env = {**os.environ, "HOME": self.home.name, "PYTHONPATH": path}
        env["SKYPILOT_DISABLE_USAGE_COLLECTION"] = "1"
        self.process = subprocess.Popen(
            [sys.executable, "-P", "-m", "stash_core.campaign.sky_check"], stdin=subprocess.PIPE,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=self.home.name,
        )  # fmt: skip

    def check(self, plan: CloudPlan, configs: dict[str, dict[str, Any]], db_path: Path | str) -> list[str]:
        """One line per task: 'CLUSTER: ok (...)' or 'CLUSTER: the reason SkyPilot gives'."""
        request = json.dumps({"configs": configs, "catalog": catalog_rows(plan, db_path)})
        kept = _cache_path(self.version, request)
        answer = _read_answer(kept)
        if answer is not None:
            self.kept_on = answer["date"] or "an earlier day"
            return answer["lines"]
        try:
            out, err = self.process.communicate(request, timeout=CHECK_TIMEOUT_S)
        except subprocess.TimeoutExpired:  # a SkyPilot that hangs on import or on its check
            self.close()
            raise UsageError(f"SkyPilot's check of the tasks gave no answer in {CHECK_TIMEOUT_S:.0f} s: "
                             "check the SkyPilot install (`sky check`)") from None  # fmt: skip
        if self.process.returncode != 0 or not out.strip():
            raise UsageError(f"SkyPilot's check of the tasks failed: {first_line(err or out or 'no answer')}")
        lines = json.loads(out.strip().splitlines()[-1])["lines"]
        _keep_answer(kept, lines)
        return lines

    def close(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait()
        for stream in (self.process.stdin, self.process.stdout, self.process.stderr):
            if stream is not None:
                stream.close()
        self.home.cleanup()


def check_tasks(plan: CloudPlan, configs: dict[str, dict[str, Any]], db_path: Path | str) -> list[str]:
    """Each task built by SkyPilot's Task (its YAML schema) and checked by Resources against a SkyPilot
    catalog written from Stash's rows (instance type, region, spot); UsageError without SkyPilot."""
    checker = SkyCheck()
    try:
        return checker.check(plan, configs, db_path)
    finally:
        checker.close()


def catalog_rows(plan: CloudPlan, db_path: Path | str) -> dict[str, list[dict[str, Any]]]:
    """SkyPilot's vms.csv rows (VMS_COLUMNS) per cloud for the plan's instance types, from Stash's catalog
    rows: one row each, in the region of the plan."""
    from stash_core.catalog import get_instance

    rows: dict[str, list[dict[str, Any]]] = {}
    for offer in (item.offer for item in plan.instances):
        row = get_instance(db_path, offer.name) or {}
        rows.setdefault(offer.provider, []).append({
            "InstanceType": offer.name, "AcceleratorName": _short_gpu(offer.accelerator),
            "AcceleratorCount": float(offer.gpus) if offer.gpus else "", "vCPUs": row.get("vcpus") or "",
            "MemoryGiB": row.get("memory_gib") or "", "GpuInfo": "",
            "Price": row.get("on_demand_usd_per_h") or "", "SpotPrice": row.get("spot_usd_per_h") or "",
            "Region": offer.region,
            "AvailabilityZone": f"{offer.region}a" if offer.provider != "azure" else "",
        })  # fmt: skip
    return rows


def _short_gpu(accelerator: str | None) -> str:
    """SkyPilot's short accelerator name ("A10G" of "NVIDIA A10G 24 GB")."""
    words = [word for word in str(accelerator or "").split() if word not in ("NVIDIA", "AMD", "Tesla")]
    return words[0] if words else ""
