"""Communication-stall observations of six models with known counts, for the tests of decide/fit/."""

from __future__ import annotations

import pandas as pd

# (grad_bytes, grad_tensor_count, layer_count): spread so that bytes and tensors are not collinear.
MODELS = {
    "m1": (10e6, 20, 15),
    "m2": (40e6, 60, 41),
    "m3": (80e6, 100, 70),
    "m4": (120e6, 160, 110),
    "m5": (200e6, 40, 30),
    "m6": (30e6, 300, 200),
}


def stall_observations(stall_of, stall: str = "interconnect", **config) -> pd.DataFrame:
    rows = []
    for name, (grad_bytes, tensors, layers) in MODELS.items():
        rows.append(
            {
                "run_id": f"run-{name}-{config.get('bandwidth_gbps')}",
                "started_at": None,
                "stall": stall,
                "stall_s": stall_of(grad_bytes, tensors, layers),
                "ci95_s": 0.0,
                "stall_status": "measured",
                "model": name,
                "batch_size": 32,
                "device": "cpu",
                "backend": "gloo",
                "workers_per_node": config.get("workers_per_node", 2),
                "nodes": config.get("nodes", 1),
                "world_size": config.get("workers_per_node", 2)
                * (config.get("nodes", 1) if stall == "network" else 1),
                "instance": config.get("instance", "box"),
                "instance_label": config.get("instance", "box"),
                "bandwidth_gbps": config.get("bandwidth_gbps"),
                "grad_bytes": grad_bytes,
                "grad_tensor_count": float(tensors),
                "layer_count": float(layers),
            }
        )
    return pd.DataFrame(rows)
