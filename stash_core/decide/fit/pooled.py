"""Network stall across the bandwidths of one configuration: leave-one-bandwidth-out validation.

A configuration's groups that differ only in link bandwidth form one set. Over such a set:
  - the alpha-beta model of each group gets a leave-one-bandwidth-out error (its scale calibrated on the
    other bandwidths only);
  - one linear model on the wire time (ring factor x bytes / bandwidth) and DDP bucket count is fitted over
    every bandwidth, so that it can predict a bandwidth never profiled; each group gets it with its own
    leave-one-model-out and leave-one-bandwidth-out errors.
"""

from __future__ import annotations

from functools import partial
from typing import Any

import numpy as np
import pandas as pd

from stash_core.decide.fit.alpha_beta import comm_s
from stash_core.decide.fit.linear import LinearFit, fit_linear, mape
from stash_core.decide.fit.physics import LinkParameters, bucket_count, calibrate_scale
from stash_core.decide.fit.stall_model import POOLED, POOLED_FEATURES, StallModel, pooled_features, same_group
from stash_core.decide.fit.validation import heldout_mape, r2, residual_frame

Member = tuple[dict[str, Any], pd.DataFrame, LinkParameters]


def fit_over_bandwidths(
    stall: str,
    groups: list[tuple[dict[str, Any], pd.DataFrame]],
    links: dict[int, LinkParameters | None],
    family_key: tuple[str, ...],
    fitted_models: list[StallModel],
) -> list[StallModel]:
    """Set each alpha-beta model's leave-one-bandwidth-out error; the pooled model of every group with a link.

    `links` maps id(frame) of each group to its link; `family_key` is the group key without the bandwidth.
    """
    families: dict[tuple, list[tuple[dict[str, Any], pd.DataFrame]]] = {}
    for group, frame in groups:
        families.setdefault(tuple(group[column] for column in family_key), []).append((group, frame))
    out = []
    for members in families.values():
        usable = [
            (group, frame, links[id(frame)]) for group, frame in members if links[id(frame)] is not None
        ]
        if not usable:
            continue
        pooled = _pooled_frame(usable)
        for index, (group, _, _) in enumerate(usable):
            lobo = _alpha_beta_lobo(pooled, (pooled["_member"] == index).to_numpy())
            for model in fitted_models:
                if model.kind == "alpha-beta" and model.stall == stall and same_group(model.group, group):
                    model.lobo_mape = lobo
        out += _pooled_models(stall, usable, pooled)
    return out


def _pooled_frame(usable: list[Member]) -> pd.DataFrame:
    """The points of every bandwidth, with _member (which group), _wire_s, _buckets and _comm_s."""
    return pd.concat(
        [
            frame.assign(
                _member=index,
                _wire_s=[
                    pooled_features(b, w, link)[0]
                    for b, w in zip(frame["grad_bytes"], frame["world_size"], strict=True)
                ],
                _buckets=[float(bucket_count(b)) for b in frame["grad_bytes"]],
                _comm_s=comm_s(frame, link),
            )
            for index, (_, frame, link) in enumerate(usable)
        ],
        ignore_index=True,
    )


def _xy(pooled: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    return pooled[["_wire_s", "_buckets"]].to_numpy(dtype=float), pooled["stall_s"].to_numpy(dtype=float)


def _alpha_beta_lobo(pooled: pd.DataFrame, member: np.ndarray) -> float | None:
    """Alpha-beta held out by bandwidth: the scale calibrated on the other bandwidths only."""
    if pooled["_member"].nunique() < 2:
        return None
    y = pooled["stall_s"].to_numpy(dtype=float)
    comm = pooled["_comm_s"].to_numpy()
    scale = calibrate_scale(y[~member], comm[~member])
    return None if scale is None else mape(scale * comm[member], y[member])


def _pooled_models(stall: str, usable: list[Member], pooled: pd.DataFrame) -> list[StallModel]:
    x, y = _xy(pooled)
    dnn_codes, dnns = pd.factorize(pooled["dnn"])
    full_fit = fit_linear(x, y, POOLED_FEATURES) if len(dnns) >= 3 else None
    if full_fit is None:
        return []
    members = pooled["_member"].to_numpy()
    bandwidths = len(np.unique(members))
    # each DNN's fit without it is every group's: fitted once, not once per group
    without_dnn = _fits_without_each_dnn(x, y, dnn_codes, len(dnns))
    out = []
    for index, (group, frame, link) in enumerate(usable):
        member = members == index
        lomo = _pooled_lomo(x[member], dnn_codes[member], without_dnn)
        fitted = full_fit.predict(x[member])
        out.append(
            StallModel(
                stall=stall,
                group=group,
                name=POOLED,
                kind="pooled-linear",
                features=POOLED_FEATURES,
                points=int(member.sum()),
                models=frame["dnn"].nunique(),
                r2=r2(y[member], fitted),
                lomo_mape=heldout_mape(lomo, y[member]),
                lobo_mape=_pooled_lobo(x, y, dnn_codes, member, bandwidths),
                note="; ".join(filter(None, [
                    f"fitted on {bandwidths} bandwidth(s) of this configuration",
                    "features are collinear here" if full_fit.rank_deficient else "",
                ])),  # fmt: skip
                linear=full_fit,
                link=link,
                residuals_of=partial(residual_frame, stall, group, POOLED, frame, fitted, lomo),
                support=len(pooled),
            )
        )
    return out


def _fits_without_each_dnn(
    x: np.ndarray, y: np.ndarray, dnn_codes: np.ndarray, dnn_count: int
) -> list[LinearFit | None]:
    """Per DNN (by its code), the pooled fit without any of its runs at any bandwidth; None where fewer than
    three DNNs are left."""
    if dnn_count - 1 < 3:
        return [None] * dnn_count
    return [_fit(x[dnn_codes != code], y[dnn_codes != code]) for code in range(dnn_count)]


def _pooled_lomo(x: np.ndarray, dnn_codes: np.ndarray, without_dnn: list[LinearFit | None]) -> np.ndarray:
    """One group's points, each predicted by the pooled fit without any run of its DNN at any bandwidth."""
    lomo = np.full(len(dnn_codes), np.nan)
    for code in np.unique(dnn_codes):
        fit = without_dnn[code]
        if fit is not None:
            here = dnn_codes == code
            lomo[here] = np.maximum(0.0, fit.predict(x[here]))
    return lomo


def _pooled_lobo(
    x: np.ndarray, y: np.ndarray, dnn_codes: np.ndarray, member: np.ndarray, bandwidths: int
) -> float | None:
    """MAPE on one group's points of the pooled fit on the other bandwidths only."""
    if bandwidths < 2 or len(np.unique(dnn_codes[~member])) < 3:
        return None
    fit = _fit(x[~member], y[~member])
    return None if fit is None else mape(np.maximum(0.0, fit.predict(x[member])), y[member])


def _fit(x: np.ndarray, y: np.ndarray) -> LinearFit | None:
    return fit_linear(x, y, POOLED_FEATURES)
