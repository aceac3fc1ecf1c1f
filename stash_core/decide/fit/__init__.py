"""Models of communication stall: least-squares fits and the alpha-beta model, validated on held-out models.

Modules, in the order a fit runs: observations (the measured stalls and probes as DataFrames), physics (the
alpha-beta wire time, from analysis.comm), linear (least squares), stall_model (one model: names, predict),
counts_linear / alpha_beta / pooled (the three kinds of model), validation (held-out errors, residuals),
selection (fit every group, mark the best), report (the tables); then counts, predict and unprofiled (the
stall of a new model, in a profiled configuration or one never profiled).

report = fit_stall_models("results.duckdb")          # every configuration group, every model
report.summary()                                      # R², leave-one-model/bandwidth-out MAPE, best
predict_stall("results.duckdb", "resnet101", stall="interconnect", workers_per_node=2, instance="box")
"""

from stash_core.decide.fit.alpha_beta import group_link
from stash_core.decide.fit.counts import model_counts
from stash_core.decide.fit.linear import LinearFit, fit_linear, mape
from stash_core.decide.fit.observations import (
    FEATURES,
    GROUP_COLUMNS,
    MODELLED_STALLS,
    format_gbps,
    load_observations,
    load_probes,
    parse_rate_gbps,
    split_instance_label,
)
from stash_core.decide.fit.physics import (
    DDP_BUCKET_BYTES,
    DDP_FIRST_BUCKET_BYTES,
    LinkParameters,
    allreduce_time_s,
    beta_from_gbps,
    bucket_count,
    calibrate_scale,
    link_from_probes,
    ring_factor,
)
from stash_core.decide.fit.report import FitReport
from stash_core.decide.fit.selection import fit_stall_models
from stash_core.decide.fit.stall_model import ALPHA_BETA, LINEAR_FEATURE_SETS, POOLED, StallModel, group_label
from stash_core.decide.fit.stall_prediction import predict_stall, predictions_frame

__all__ = [
    "ALPHA_BETA",
    "DDP_BUCKET_BYTES",
    "DDP_FIRST_BUCKET_BYTES",
    "FEATURES",
    "GROUP_COLUMNS",
    "LINEAR_FEATURE_SETS",
    "MODELLED_STALLS",
    "POOLED",
    "FitReport",
    "LinearFit",
    "LinkParameters",
    "StallModel",
    "allreduce_time_s",
    "beta_from_gbps",
    "bucket_count",
    "calibrate_scale",
    "fit_linear",
    "fit_stall_models",
    "format_gbps",
    "group_label",
    "group_link",
    "link_from_probes",
    "load_observations",
    "load_probes",
    "mape",
    "model_counts",
    "parse_rate_gbps",
    "predict_stall",
    "predictions_frame",
    "ring_factor",
    "split_instance_label",
]
