"""Where a campaign's profile writes its result file under --results-dir: named by the configuration (the
model as typed, never its contents' hash; the sizes; a script's contents) and the UTC time it started, as a
run id is, so that a folder of them reads in order and no name is hidden or taken for an option."""

from __future__ import annotations

import time
from pathlib import Path

from stash_core.zoo_names import canonical_model


def result_file(folder: Path, model: str, batch_size: int | None, workers_per_node: int, nodes: int,
                instance: str, script_sha256: str | None = None) -> Path:  # fmt: skip
    """e.g. resnet10_8_2_1_box-20261206T081522Z.json; a script's (its batch its own) without a batch."""
    script = (f"s{script_sha256[:12]}",) if script_sha256 else ()
    parts = (canonical_model(model), batch_size, workers_per_node, nodes, instance, *script)
    name = "_".join(str(part) for part in parts if part is not None)
    # ./m.py:make, /abs/m.py, box@1gbit: no folder, no hidden file, no option-like name
    name = name.replace("/", "-").replace("@", "_at_").replace(":", "-").lstrip(".-") or "model"
    return folder / f"{name}-{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}.json"
