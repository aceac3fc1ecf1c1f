"""Which configurations of a campaign a database holds already: every completed run keyed as a plan's items
are (campaign/plan.py CampaignItem.keys), with what it measured on, so that a rerun skips them."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from stash_core.zoo_names import SCRIPT_PREFIX, canonical_model, model_identity


def completed_keys(db_path: Path | str) -> dict[tuple, list[dict[str, Any]]]:
    """CampaignItem.key of every completed run in the database (a script's with its contents' sha256 and its
    arguments in place of the batch size it measured), each with what its runs measured on (device, input
    shape, classes, stalls: see covers)."""
    if not Path(db_path).exists():
        return {}  # no database yet: nothing stored (and no empty one made to say so)
    from stash_core.cells import is_missing
    from stash_core.store.reads import completed_configurations

    keys: dict[tuple, list[dict[str, Any]]] = {}
    rows = completed_configurations(db_path)
    set_aside = mislabelled_runs(db_path, rows)
    for row in rows.itertuples(index=False):
        if is_missing(row.workers_per_node) or is_missing(row.nodes) or row.run_id in set_aside:
            continue
        sizes = (int(row.workers_per_node), int(row.nodes), str(row.instance))
        sha256 = None if is_missing(row.model_sha256) else str(row.model_sha256)
        model = canonical_model(str(row.model))  # a run stored before names were written one way
        if model.startswith(SCRIPT_PREFIX):  # its batch is what it measured (or none): not the key
            if is_missing(row.script_sha256):
                continue
            found = [(model, None, *sizes, str(row.script_sha256), json_list(row.script_args))]
        elif not is_missing(row.batch_size):
            # by its stored name, and a model file by its contents too (CampaignItem.keys)
            names = dict.fromkeys((model, model_identity(model, sha256)))
            found = [(name, int(row.batch_size), *sizes, None, ()) for name in names]
        else:
            continue
        shape = json_list(row.input_shape)
        measured = {
            "device": None if is_missing(row.device) else str(row.device),
            "input_shape": tuple(int(float(size)) for size in shape) if shape else None,
            "num_classes": None if is_missing(row.num_classes) else int(float(row.num_classes)),
            "stalls": set(json_list(row.stalls)),
            "model_sha256": sha256,
        }  # fmt: skip
        for key in found:
            keys.setdefault(key, []).append(measured)
    return keys


def mislabelled_runs(db_path: Path | str, rows: Any) -> set[str]:
    """The run ids of `rows` (run_id, instance) whose machine contradicts their instance label, unconfirmed:
    they stand for no measurement of that instance (catalog/labels.py), so a campaign measures it again.
    A cloud campaign's run is not among them: Stash labelled it as the instance type it rented, and renting
    that type again would give the same machine."""
    from stash_core.catalog import get_instance, stored_label_checks

    labelled = rows.dropna(subset=["instance"])
    if "cloud_instance" in labelled.columns:  # a cloud campaign's run: labelled by Stash as what it rented
        labelled = labelled[labelled["cloud_instance"].astype(str) != labelled["instance"].astype(str)]
    if labelled.empty:
        return set()
    catalog = {label: get_instance(db_path, label) for label in set(labelled["instance"].astype(str))}
    catalog = {label: row for label, row in catalog.items() if row is not None}
    checks = stored_label_checks(db_path, list(labelled["run_id"]), catalog)
    return {run_id for run_id, check in checks.items() if not check.usable}


def json_list(text: object) -> tuple[str, ...]:
    try:
        value = json.loads(str(text)) if text is not None else []
    except json.JSONDecodeError:
        return ()
    return tuple(str(arg) for arg in value) if isinstance(value, list) else ()
