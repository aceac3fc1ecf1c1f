"""What a result file keeps of a profile's inputs: the spec as run (the data set as used, a user's model file
by its contents' hash, an emulated cluster's link) and each probe set."""

from __future__ import annotations

from stash_core.engine.data_setup import DataSetup
from stash_core.engine.plan import PhasePlan
from stash_core.launch.hosts import RemoteHosts
from stash_core.spec import ProfileSpec
from stash_core.zoo_names import canonical_model, model_file_sha256


def spec_record(spec: ProfileSpec, data: DataSetup, remote: RemoteHosts | None) -> dict:
    """The spec as the result file keeps it: the data set as used and, on an emulated cluster, its link."""
    record = spec.to_dict()
    record["model"] = canonical_model(spec.model)
    record["model_sha256"] = model_file_sha256(spec.model)  # a user's model file: which contents ran
    record["dataset_images"] = data.images
    record["dataset"] = str(data.root) if data.root else None
    if remote is not None:
        record["hosts"] = remote.host_texts
        if remote.link is not None:
            # spec.network is where the stall fits read a link's rate from
            link = remote.link
            record["network"] = {"kind": "emulated", "bandwidth_bps": link.get("rate_bps"), **link}
    return record


def probe_record(probe: dict, doc: dict, plan: PhasePlan, remote: RemoteHosts | None) -> dict:
    """A probe set as the result file keeps it (section "probes")."""
    link = (remote.link or {}) if remote is not None else {}
    return {
        "probe_id": f"{doc['run_id']}-{plan.name}",
        "run_id": doc["run_id"],
        "phase": plan.name,
        "instance": doc["spec"].get("instance") or doc["fingerprint"].get("instance"),
        "link_gbps": link["rate_bps"] / 1e9 if plan.nodes > 1 and link.get("rate_bps") else None,
        **probe,
    }
