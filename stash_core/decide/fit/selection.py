"""Fit every model of every configuration group, and mark the one with the lowest held-out error best.

For every configuration group (see observations.GROUP_COLUMNS) and stall: the linear models on model counts
(counts_linear.py), the alpha-beta model (alpha_beta.py) and, for network stall, the models over the
bandwidths of one configuration (pooled.py). The model with the lowest leave-one-model-out error in a group
is best; fewer features win a tie. A model fitted from fewer points than its parameters plus two is never best
(StallModel.shortfall says so); a group where no model has enough has no best model.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd

from stash_core.cells import plain
from stash_core.decide.fit.alpha_beta import alpha_beta_stall_model, group_link
from stash_core.decide.fit.counts_linear import GroupPoints, fit_linear_model
from stash_core.decide.fit.observations import (
    GROUP_COLUMNS,
    MODELLED_STALLS,
    load_observations,
    load_probes,
    with_dnn,
)
from stash_core.decide.fit.physics import LinkParameters
from stash_core.decide.fit.pooled import fit_over_bandwidths
from stash_core.decide.fit.report import FitReport
from stash_core.decide.fit.stall_model import LINEAR_FEATURE_SETS, StallModel, group_tuple
from stash_core.errors import UsageError


def fit_stall_models(
    db_path: Path | str | None = None,
    *,
    observations: pd.DataFrame | None = None,
    probes: pd.DataFrame | None = None,
    stalls: tuple[str, ...] = MODELLED_STALLS,
    alpha_s: float | None = None,
    beta_s_per_byte: float | None = None,
    by_batch_size: bool = False,
) -> FitReport:
    """Fit and validate every model for every configuration group found in the store (or in `observations`).

    alpha_s / beta_s_per_byte, when given, replace probes and nominal bandwidths in the alpha-beta model.
    by_batch_size adds the per-worker batch size to the group key (overlap with backward depends on it).
    """
    if observations is None:
        if db_path is None:
            raise ValueError("give db_path or observations")
        observations = load_observations(db_path)
    observations = with_dnn(observations)
    if probes is None:
        probes = load_probes(db_path) if db_path is not None else pd.DataFrame()
    given = _given_link(alpha_s, beta_s_per_byte)
    models: list[StallModel] = []
    for stall in stalls:
        rows = observations[observations["stall"] == stall]
        if rows.empty:
            continue
        models += _fit_stall(stall, rows, group_key(stall, by_batch_size), probes, given)
    warnings = _label_warnings(db_path, observations) if db_path is not None else []
    return FitReport(observations=observations, models=models, probes=probes, label_warnings=warnings,
                     left_out=list(observations.attrs.get("left_out") or []))  # fmt: skip


def _label_warnings(db_path: Path | str, observations: pd.DataFrame) -> list[str]:
    """The label warning of each fitted run whose machine contradicts its instance label (predict and
    recommend set such a run aside; here its stalls are its machine's, grouped under the label it gave)."""
    from stash_core.catalog.labels import stored_label_checks

    run_ids = sorted(set(observations["run_id"])) if len(observations) else []
    checks = stored_label_checks(db_path, run_ids)
    return [
        f"instance label {check.instance} of run {check.run_id} does not fit the machine "
        f"({'; '.join(check.problems)}): its stalls are its machine's, fitted in the group named "
        f"{check.instance}"
        for check in checks.values()
        if check.status == "contradicted"
    ]


def group_key(stall: str, by_batch_size: bool = False) -> tuple[str, ...]:
    key = GROUP_COLUMNS[stall]
    return (*key, "batch_size") if by_batch_size else key


def _given_link(alpha_s: float | None, beta_s_per_byte: float | None) -> LinkParameters | None:
    if alpha_s is None and beta_s_per_byte is None:
        return None
    if beta_s_per_byte is None or beta_s_per_byte <= 0:
        raise UsageError("give a positive beta (seconds per byte) together with alpha")
    return LinkParameters(max(0.0, alpha_s or 0.0), beta_s_per_byte, "given")


def _fit_stall(
    stall: str, rows: pd.DataFrame, key: tuple[str, ...], probes: pd.DataFrame, given: LinkParameters | None
) -> list[StallModel]:
    groups = _groups(rows, key)
    links = {
        id(frame): group_link(stall, group, list(frame["instance_label"].dropna().unique()), probes, given)
        for group, frame in groups
    }
    out: list[StallModel] = []
    for group, frame in groups:
        points = GroupPoints.of(frame)
        for name, features in LINEAR_FEATURE_SETS.items():
            model = fit_linear_model(stall, group, points, name, features)
            if model is not None:
                out.append(model)
        out.append(alpha_beta_stall_model(stall, group, frame, links[id(frame)]))
    if stall == "network":
        family_key = tuple(column for column in key if column != "bandwidth_gbps")
        out += fit_over_bandwidths(stall, groups, links, family_key, out)
    for group, frame in groups:
        _say_machines_mixed(group, frame, out)
    mark_best(out)
    return out


def _say_machines_mixed(group: dict[str, Any], frame: pd.DataFrame, models: list[StallModel]) -> None:
    """Runs without an instance label made on several machines are one group (nothing else tells them
    apart): each of its models says so, naming them."""
    if group.get("instance") is not None or "hostname" not in frame.columns:
        return
    hosts = sorted(str(host) for host in frame["hostname"].dropna().unique())
    if len(hosts) < 2:
        return
    named = ", ".join(hosts[:3]) + (f" and {len(hosts) - 3} more" if len(hosts) > 3 else "")
    said = (
        f"runs of {len(hosts)} machines without an instance label ({named}) fitted together: "
        "profile with --instance to fit them apart"
    )
    for model in models:
        if model.group is group:
            model.note = "; ".join(filter(None, [model.note, said]))


def _groups(rows: pd.DataFrame, key: tuple[str, ...]) -> list[tuple[dict[str, Any], pd.DataFrame]]:
    """(group values as plain Python, its rows) per configuration group, in sorted order."""
    groups = []
    for values, frame in rows.groupby(list(key), dropna=False, sort=True):
        values = values if isinstance(values, tuple) else (values,)
        group = {column: plain(value) for column, value in zip(key, values, strict=True)}
        groups.append((group, frame.reset_index(drop=True)))
    return groups


def mark_best(models: list[StallModel]) -> None:
    """Mark one model per (stall, group) best: lowest held-out error, else the alpha-beta or highest R²; only
    models with enough points take part (the others carry their shortfall as a note)."""
    by_group: dict[tuple, list[StallModel]] = {}
    for model in models:
        by_group.setdefault((model.stall, group_tuple(model.group)), []).append(model)
        if model.shortfall and model.shortfall not in model.note:
            model.note = "; ".join(filter(None, [model.shortfall, model.note]))
    for group_models in by_group.values():
        # A fit whose features are collinear here splits the stall between them arbitrarily: never best.
        candidates = [model for model in group_models if model.enough_points and not _collinear(model)]
        scored = [model for model in candidates if model.lomo_mape is not None]
        if scored:
            # Fewer parameters win a tie: the simpler model generalises at least as well.
            best = min(scored, key=lambda model: (round(model.lomo_mape, 6), len(model.features)))
        else:
            usable = [model for model in candidates if model.kind == "alpha-beta" and model.link is not None]
            usable = usable or [model for model in candidates if model.r2 is not None]
            fitted = [model for model in candidates if not model.residuals.empty]
            # no held-out error exists of a stall no profile measured (no percentage of zero): said so, even
            # where an alpha-beta link would make that model the default
            if fitted and all(_measured_none(model) for model in fitted):
                # Every profile measured none of this stall: no error or R² exists, and the answer is 0.
                best = min(fitted, key=lambda model: len(model.features))
                best.note = "; ".join(
                    filter(None, [best.note, "every profiled model measured none of this stall"])
                )
                best.best = True
                continue
            if not usable:
                continue
            best = max(usable, key=lambda model: -1 if model.r2 is None else model.r2)
            best.note = "; ".join(
                filter(None, [best.note, "best by default: too few models for a held-out error"])
            )
        best.best = True


def _measured_none(model: StallModel) -> bool:
    measured = model.residuals["measured_s"] if "measured_s" in model.residuals.columns else []
    return len(measured) > 0 and all(value == 0 for value in measured)


def _collinear(model: StallModel) -> bool:
    return model.linear is not None and model.linear.rank_deficient
