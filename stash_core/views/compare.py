"""Compare: the same job on different instances, side by side, with costs.

Two runs are the same job only when everything that decides the work of an iteration is the same
(JOB_COLUMNS): the model, the batch size per worker, the input shape, the data (synthetic batches made on the
device, or real data - cached or cold - from generated images or a data set), the workers per machine and the
machines of the run its iteration time is of, the device, for a script or a model file its code (a hash), and
the stalls it was split into (a breakdown is averaged only over runs split alike). The page picks one job
(compare_choices) and compares its instances; runs of different jobs are never averaged or ranked together.

An instance label that the run's machine contradicts (catalog/labels.py) keeps its run out of that
instance's row: such runs form a row of their own, marked, without the instance's price, until confirmed.

compare_with_predictions adds a predicted row for every catalog instance not measured for the job
(decide/predict), marked `source` = 'predicted' with its expected error; a measurement always wins. They are
predicted in PyTorch's default arithmetic, as every measured run trained (Stash's workers set none): a CNN's
convolutions in TF32 on a GPU with TF32 units, its other matrix products in FP32 (predict's `--precision
pytorch`), so every GPU profile of the job anchors them.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from stash_core.api.predicting import predict
from stash_core.catalog import check_runs, list_instances
from stash_core.cells import plain, plain_row
from stash_core.decide.predict.cpu_rows import CPU_MEASURED
from stash_core.decide.predict.instances import MEANING_NOTES, meaning_notes
from stash_core.decide.predict.profile_arithmetic import DEFAULT_PRECISION
from stash_core.decide.predict.refusals import refusal_json
from stash_core.errors import UsageError
from stash_core.results.file import STALL_NAMES
from stash_core.store import queries_compare
from stash_core.views.common import NO_INSTANCE, STALL_LABELS, instance_labels
from stash_core.views.compare_spread import relative_spread, told_apart
from stash_core.views.run_means import mean_ci95_of, mean_of
from stash_core.views.stall_frames import stall_long_frame
from stash_core.zoo_names import SCRIPT_PREFIX, is_zoo_name

JOB_COLUMNS = ("model", "batch_size", "input_shape", "data", "workers_per_node", "nodes", "device", "code",
               "stalls")  # fmt: skip
UNVERIFIED = "label contradicted"
_PRICE_COLUMNS = ("provider", "accelerator", "accelerator_count", "on_demand_usd_per_h", "spot_usd_per_h")
NOT_IMPORTED = ("{model} is no zoo model, and a page runs no code a stored run names (its result file may be "
                "anyone's): `stash predict --model FILE.py:FACTORY` predicts a model file")

# ---------------------------------------------------------------------------------------------------------
# Compare instances


PREDICTED_STALLS = ("compute", "interconnect", "network")  # what a predicted row's step is made of
PREDICTED_BARS = 12  # predicted configurations drawn in "where the time goes": the cheapest

def compare_choices(db_path: Path | str) -> pd.DataFrame:
    """One row per job of the completed runs (JOB_COLUMNS, runs, configurations = instances, job_label), the
    most-compared first."""
    frame = queries_compare.job_choices(db_path, JOB_COLUMNS, NO_INSTANCE)
    frame["job_label"] = [job_label(row) for row in frame.to_dict(orient="records")]
    return frame


def job_label(job: dict[str, Any]) -> str:
    """'resnet18 · batch 32 per worker · 2 workers · cpu · input 3x64x64 · synthetic (made on the device)'."""
    workers, nodes = job.get("workers_per_node"), job.get("nodes")
    where = f"{workers} worker(s)" + (f" x {nodes} machines" if nodes and nodes > 1 else "")
    code = "script" if str(job.get("model")).startswith(SCRIPT_PREFIX) else "model file"
    parts = [str(job.get("model")), f"batch {job.get('batch_size')} per worker", where,
             str(job.get("device") or "?"), f"input {job.get('input_shape')}", str(job.get("data"))]
    stalls = ", ".join(STALL_LABELS.get(key, key) for key in str(job.get("stalls") or "").split(",") if key)
    parts += [f"{name} {it}" for name, it in {code: job.get("code"), "split into": stalls}.items() if it]
    return " · ".join(parts)


def compare_configurations(db_path: Path | str, model: str, batch_size: int, **job: Any) -> pd.DataFrame:
    """One row per instance that ran one job, with costs; the job is `model` at per-worker `batch_size` and
    the JOB_COLUMNS values in `job` (input_shape, data, workers_per_node, nodes, device), each one not given
    taken from the most-run job that matches the others (frame.attrs["job"] says which).

    Times are means over the completed runs of a row; prices come from the instance catalog (stored rows,
    else the built-in ones; NaN when the instance is not in it). Runs whose machine contradicts their
    instance label form a row of their own ("<instance> · label contradicted"), without a price;
    frame.attrs["label_warnings"] holds a line for each such run (and each one the user confirmed).
    Derived: samples_per_s, time per million samples, cost per epoch, per million samples, throughput per
    GPU and samples per dollar.
    """
    if unknown := sorted(set(job) - set(JOB_COLUMNS)):
        raise TypeError(f"unknown job field(s) {', '.join(unknown)}")
    chosen = _chosen_job(db_path, {"model": model, "batch_size": int(batch_size), **job})
    if chosen is None:
        return _empty_frame()
    runs = queries_compare.job_runs(db_path, {column: chosen[column] for column in JOB_COLUMNS})
    catalog = {row["name"]: plain_row(row) for row in list_instances(db_path).to_dict(orient="records")}
    records = runs.rename(columns={"spec_json": "spec", "fingerprint_json": "fingerprint"})
    checks = check_runs(records[["run_id", "instance", "spec", "fingerprint"]].to_dict("records"), catalog)
    runs["label_ok"] = [checks[run_id].usable for run_id in runs["run_id"]]
    frame = _rows(runs, catalog)
    frame.attrs["job"] = chosen
    frame.attrs["label_warnings"] = [check.warning for check in checks.values() if check.warning]
    return add_costs(frame, int(batch_size))


def compare_with_predictions(db_path: Path | str, model: str, batch_size: int, **job: Any) -> pd.DataFrame:
    """compare_configurations (`source` 'measured') and, after it, one predicted row per catalog instance that
    has the job's GPUs per machine and was not measured (`source` 'predicted', `expected_error`, `runs` 0,
    cost columns from the catalog). The same workers and machines as the job, on GPUs; compute, interconnect
    and network only (no CPU or disk stalls). frame.attrs["prediction_note"] says what was predicted or why
    nothing was, ["not_predictable"] the instances that could not be, ["precision"] and ["precision_note"] the
    precision predicted and why (PyTorch's default), ["profiles_set_aside"] profiles that anchor nothing."""
    measured = compare_configurations(db_path, model, batch_size, **job)
    measured["source"], measured["expected_error"], measured["comm_error"] = "measured", np.nan, np.nan
    chosen = measured.attrs.get("job")
    if not chosen:
        return measured
    attrs = dict(measured.attrs)
    workers, nodes = int(chosen["workers_per_node"] or 1), int(chosen["nodes"] or 1)
    shape = _shape_of(chosen.get("input_shape"))
    try:
        if not is_zoo_name(model):  # a stored run's name is data: its code is never run here
            raise UsageError(NOT_IMPORTED.format(model=model))
        predicted = predict(
            model, int(batch_size), workers_per_instance=workers, max_instances=nodes, input_shape=shape,
            precision=DEFAULT_PRECISION, db=db_path,
        )  # fmt: skip
    except UsageError as exc:
        attrs.update(prediction_note=f"no predictions: {exc}", not_predictable=[], profiles_set_aside=[])
        measured.attrs.update(attrs)
        return measured
    # as the measured runs trained: PyTorch's default, or a model built in 16 bits in its own
    own, why = predicted.request.get("precision"), predicted.request.get("precision_why")
    trained = "as the measured runs trained" if str(chosen.get("device") or "").startswith("cuda") else (
        "as PyTorch trains it on these GPUs (the measured runs trained on CPUs)"
    )
    note = f"predicted for {own}: {why}, {trained}" if why else ""
    note = note or f"predicted in {own}: the model was built so"
    attrs.update(precision=own, precision_note=note)
    frame = predicted.frame
    have = set(measured.loc[measured["label_ok"].astype(bool), "instance"])
    too_small = frame[frame["workers_per_instance"] < workers].drop_duplicates("instance")
    frame = frame[(frame["instance_count"] == nodes) & (frame["workers_per_instance"] == workers)]
    on_cpus = frame[(frame["gpus_per_instance"] <= 0) & ~frame["instance"].isin(have)]
    frame = frame[frame["gpus_per_instance"] > 0]  # a CPU machine's rows are profiles, measured or not shown
    frame = frame[~frame["instance"].isin(have)]
    # Instances measured for the job are not missing; every other one that has no row says why.
    refused = (
        [line for line in predicted.not_predictable if refusal_json(line)["instance"] not in have]
        + [
            f"{name}: not predicted - it has {gpus} GPU(s), the job uses {workers} per machine"
            for name, gpus in zip(too_small["instance"], too_small["workers_per_instance"], strict=True)
            if name not in have
        ]
        + [
            f"{name}: not shown - {CPU_MEASURED} ({basis}: compare that run)"
            for name, basis in zip(on_cpus["instance"], on_cpus["basis"], strict=True)
        ]
    )
    rows = _predicted_rows(frame, measured, db_path)
    combined = pd.concat([measured, rows], ignore_index=True) if len(rows) else measured
    note = (
        f"{len(rows)} instance(s) predicted for {workers} GPU(s) x {nodes} machine(s): compute, interconnect "
        "and network only"
        + ("" if str(chosen.get("data", "")).startswith("synthetic") else " (data loading is not predicted)")
    )
    attrs.update(prediction_note=note, not_predictable=refused)
    attrs["profiles_set_aside"] = list(predicted.profiles_set_aside)
    combined.attrs.update(attrs)
    return combined


def _shape_of(text: Any) -> tuple[int, ...] | None:
    """A job's input shape as the compare columns write it ('3x32x32', '384'), None for the model default."""
    parts = str(text or "").split("x")
    return tuple(int(part) for part in parts) if all(part.isdigit() for part in parts) else None


def _predicted_rows(predicted: pd.DataFrame, measured: pd.DataFrame, db_path: Path | str) -> pd.DataFrame:
    """Predicted configurations in compare_configurations' columns (epochs as long as the measured job's)."""
    if predicted.empty:
        return pd.DataFrame(columns=measured.columns)
    catalog = {row["name"]: plain_row(row) for row in list_instances(db_path).to_dict(orient="records")}
    per_epoch = pd.to_numeric(measured.get("iterations_per_epoch"), errors="coerce").mean()
    rows = []
    for row in predicted.to_dict(orient="records"):
        record = {
            "instance": row["instance"], "label_ok": True, "workers_per_node": row["workers_per_instance"],
            "nodes": row["instance_count"], "device": "cuda", "runs": 0, "comm_error": row["comm_error"],
            "iteration_s": row["iteration_s"], "iteration_ci95_s": np.nan, "iterations_per_epoch": per_epoch,
            "epoch_s": row["iteration_s"] * per_epoch, "latest_run_id": None,
            "compute_s": row["compute_s"], "interconnect_s": row["interconnect_s"],
            "network_s": row["network_s"], "source": "predicted", "expected_error": row["expected_error"],
            "meaning": "; ".join(meaning_notes(row.get("note"))),  # overhead-bound, as predict's table says
        }  # fmt: skip
        record.update({column: catalog.get(row["instance"], {}).get(column) for column in _PRICE_COLUMNS})
        for stall in PREDICTED_STALLS:  # their shares, drawn beside the measured ones' (no CPU or disk stall)
            step_s = row["iteration_s"]
            record[f"{stall}_share"] = row[f"{stall}_s"] / step_s if step_s else np.nan
            record[f"{stall}_status"] = "predicted"
        rows.append(record)
    frame = add_costs(pd.DataFrame(rows), int(measured.attrs["job"]["batch_size"]))
    frame["configuration"] = [f"{name} · predicted" for name in frame["configuration"]]
    return frame.reindex(columns=list(dict.fromkeys([*measured.columns, *frame.columns])))


def _chosen_job(db_path: Path | str, given: dict[str, Any]) -> dict[str, Any] | None:
    choices = compare_choices(db_path)
    for column, value in given.items():
        choices = choices[choices[column].map(lambda cell, value=value: _same(cell, value))]
    if choices.empty:
        return None
    return job_of(choices.iloc[0])


def job_of(row: Any) -> dict[str, Any]:
    """A compare_choices row's job (JOB_COLUMNS) as plain Python values."""
    return {column: plain(row[column]) for column in JOB_COLUMNS}


def _same(cell: Any, value: Any) -> bool:
    return plain(cell) == plain(value)


def _rows(runs: pd.DataFrame, catalog: dict[str, dict[str, Any]]) -> pd.DataFrame:
    """The runs of one job averaged per (instance, label fits), with the catalog's shape and prices for the
    rows whose label fits."""
    runs = runs.assign(instance=instance_labels(runs["instance"]))
    rows = []
    for (instance, label_ok), group in runs.groupby(["instance", "label_ok"], sort=False):
        group = group.sort_values("started_at")
        row: dict[str, Any] = {
            column: group[column].iloc[0] for column in ("workers_per_node", "nodes", "device")
        }
        row.update(
            instance=instance,
            label_ok=bool(label_ok),
            runs=len(group),
            latest_run_id=group["run_id"].iloc[-1],
        )
        for column in ("iteration_s", "epoch_s", "iterations_per_epoch", "unattributed_ci95_s"):
            row[column] = mean_of(group, column)
        row["iteration_ci95_s"] = mean_ci95_of(group, "iteration_s")
        for stall in STALL_NAMES:
            for suffix in ("share", "s"):
                row[f"{stall}_{suffix}"] = mean_of(group, f"{stall}_{suffix}")
            row[f"{stall}_ci95_s"] = mean_ci95_of(group, f"{stall}_s")
            statuses = group.get(f"{stall}_status", pd.Series(dtype=object)).dropna()
            row[f"{stall}_status"] = statuses.mode().iloc[0] if len(statuses) else None
        priced = catalog.get(instance) if label_ok else None
        row.update({column: (priced or {}).get(column) for column in _PRICE_COLUMNS})
        rows.append(row)
    frame = pd.DataFrame(rows)
    return frame.sort_values("iteration_s", kind="stable").reset_index(drop=True)


def _empty_frame() -> pd.DataFrame:
    columns = ["instance", "label_ok", "workers_per_node", "nodes", "device", "runs", "latest_run_id",
               "iteration_s", "iteration_ci95_s", "epoch_s", "iterations_per_epoch",
               *_PRICE_COLUMNS]  # fmt: skip
    frame = pd.DataFrame(columns=columns)
    frame.attrs.update(job=None, label_warnings=[], machines=[])
    return add_costs(frame, 1)


def add_costs(frame: pd.DataFrame, batch_size: int) -> pd.DataFrame:
    """Throughput, cost and normalised columns of compare_configurations (NaN where unknown)."""
    attrs = dict(frame.attrs)
    frame = frame.copy()
    nodes = frame["nodes"].fillna(1).astype(float)
    workers = frame["workers_per_node"].fillna(1).astype(float)
    label_ok = frame["label_ok"] if "label_ok" in frame.columns else pd.Series(True, index=frame.index)
    frame["configuration"] = [
        f"{instance} · {int(w)}w" + (f"x{int(n)}n" if n > 1 else "") + ("" if ok else f" · {UNVERIFIED}")
        for instance, w, n, ok in zip(frame["instance"], workers, nodes, label_ok, strict=True)
    ]
    frame["samples_per_iteration"] = batch_size * workers * nodes
    iteration_s = frame["iteration_s"].astype(float)
    frame["samples_per_s"] = frame["samples_per_iteration"] / iteration_s
    frame["s_per_million_samples"] = 1e6 / frame["samples_per_s"]
    usd_per_h = frame["on_demand_usd_per_h"].astype(float) * nodes
    frame["usd_per_h"] = usd_per_h
    frame["usd_per_epoch"] = frame["epoch_s"].astype(float) / 3600.0 * usd_per_h
    frame["usd_per_million_samples"] = frame["s_per_million_samples"] / 3600.0 * usd_per_h
    frame["samples_per_usd"] = frame["samples_per_s"] * 3600.0 / usd_per_h
    # The GPUs the job used: one per worker on CUDA (a one-worker job on an 8-GPU machine uses one), never
    # more than the instance has; none for a run on the CPU.
    on_gpu = frame["device"].fillna("").eq("cuda")
    has = frame["accelerator_count"].astype(float) * nodes
    used = (workers * nodes).astype(float)
    gpus = used.where(~(has > 0), np.minimum(used, has)).where(on_gpu)
    frame["gpus"] = gpus
    frame["samples_per_s_per_gpu"] = frame["samples_per_s"] / gpus
    frame = frame.replace([np.inf, -np.inf], np.nan)
    frame.attrs.update(attrs)
    return frame


def compare_verdict(frame: pd.DataFrame) -> dict[str, Any]:
    """Which configuration is fastest (highest throughput) and which cheapest (lowest cost per sample).

    Returns {"fastest", "slowest", "speedup", "cheapest", "next_cheapest", "saving", "priced"}: names and
    ratios (speedup = fastest / slowest throughput; saving = 1 - cheapest / next cheapest cost), the
    fastest's and the cheapest's relative 95% half-width ("fastest_spread", "cheapest_spread"), with
    "runner_up_apart" and "slowest_apart": whether the fastest's throughput differs from theirs beyond the
    two 95% intervals (None where an interval is unknown).
    """
    contradicted = frame["label_ok"].eq(False) if "label_ok" in frame else pd.Series(False, index=frame.index)
    verdict: dict[str, Any] = {"fastest": None, "cheapest": None, "priced": 0}
    verdict["contradicted"] = int(contradicted.sum())
    usable = frame[~contradicted].dropna(subset=["samples_per_s"])  # a run set aside is no machine to choose
    if usable.empty:
        return verdict
    ordered = usable.sort_values("samples_per_s", ascending=False)
    verdict["fastest"] = ordered.iloc[0]["configuration"]
    verdict["fastest_samples_per_s"] = float(ordered.iloc[0]["samples_per_s"])
    verdict["fastest_spread"] = relative_spread(ordered.iloc[0])
    if len(ordered) > 1:
        verdict["slowest"] = ordered.iloc[-1]["configuration"]
        verdict["speedup"] = float(ordered.iloc[0]["samples_per_s"] / ordered.iloc[-1]["samples_per_s"])
        verdict["runner_up"] = ordered.iloc[1]["configuration"]
        verdict["lead_over_runner_up"] = float(
            ordered.iloc[0]["samples_per_s"] / ordered.iloc[1]["samples_per_s"]
        )
        verdict["runner_up_apart"] = told_apart(ordered.iloc[0], ordered.iloc[1])
        verdict["slowest_apart"] = told_apart(ordered.iloc[0], ordered.iloc[-1])
    priced = usable.dropna(subset=["usd_per_million_samples"]).sort_values("usd_per_million_samples")
    verdict["priced"] = len(priced)
    if not priced.empty:
        verdict["cheapest"] = priced.iloc[0]["configuration"]
        verdict["cheapest_usd_per_million_samples"] = float(priced.iloc[0]["usd_per_million_samples"])
        verdict["cheapest_spread"] = relative_spread(priced.iloc[0])
        if len(priced) > 1:
            verdict["next_cheapest"] = priced.iloc[1]["configuration"]
            verdict["saving"] = float(
                1.0 - priced.iloc[0]["usd_per_million_samples"] / priced.iloc[1]["usd_per_million_samples"]
            )
    return verdict


# The Compare page's side-by-side table: headings whole at 1280 px, in full in their tooltips ("USD/1M sa…"
# was cut), and widths that keep names' and notes' words whole ("measure|d", "overhead-bo|und" at one width)
SIDE_BY_SIDE = {
    "Configuration": {"width": 110}, "Source": {"width": 90}, "Runs": {"width": 46},
    "Iteration": {"width": 68, "help": "Time per iteration; a measured row's ± is its 95% interval"},
    "Epoch": {"width": 68, "help": "Time per epoch: the profiled loop's full batches (the last partial one "
              "dropped); Recommend counts every sample"},
    "Samples/s": {"width": 74}, "Per GPU": {"width": 66},
    "USD/h": {"width": 58, "help": "On-demand price per hour"},
    "USD/epoch": {"width": 78, "help": "On-demand cost of an epoch"},
    "USD/1M samples": {"width": 64, "label": "USD/1M", "help": "On-demand cost of a million samples"},
    "Note": {"width": 114},
}  # fmt: skip


def meaning_cells(meanings: pd.Series) -> tuple[pd.Series, dict[str, str]]:
    """The Note column's cells by their notes' short names ("overhead-bound"), and {name: its words} of the
    names said: one long note in many rows made every row of the table eight lines tall."""
    short = {words: name for name, words in MEANING_NOTES.items()}
    cells = meanings.fillna("").map(
        lambda text: "; ".join(short.get(words, words) for words in str(text).split("; ") if words)
    )
    said = {name: words for name, words in MEANING_NOTES.items()
            if cells.str.contains(name, regex=False).any()}  # fmt: skip
    return cells, said


def stall_rows(frame: pd.DataFrame, predicted_limit: int = PREDICTED_BARS) -> pd.DataFrame:
    """The configurations whose stalls are drawn: every measured one, then at most `predicted_limit`
    predicted ones, the cheapest per million samples first (the fastest where none is priced)."""
    measured = frame[frame["source"] != "predicted"]
    predicted = frame[frame["source"] == "predicted"]
    order = "usd_per_million_samples" if predicted["usd_per_million_samples"].notna().any() else "iteration_s"
    return pd.concat([measured, predicted.sort_values(order, na_position="last").head(predicted_limit)])


def compare_stall_frame(frame: pd.DataFrame) -> pd.DataFrame:
    """Stall shares per configuration, long format, for a stacked bar that ends at 100%; a predicted
    configuration's are its predicted compute, interconnect and network (status "predicted").

    The parts are the named stalls and the signed remainder ("Not separated", stall "unattributed": what the
    mean stalls leave of the mean iteration time), laid end to end (`bar_start`, `bar_end`, in shares);
    `resolved` is False for a stall whose mean interval is wider than its mean value.
    """
    columns = ["configuration", "stall", "stall_label", "stall_order", "status", "share", "seconds", "ci95",
               "bar_start", "bar_end", "error_low", "error_high", "resolved", "note"]  # fmt: skip
    if frame.empty:
        return pd.DataFrame(columns=columns)
    labelled = frame.assign(run_id=frame["configuration"], run_label=frame["configuration"])
    long_frame = stall_long_frame(labelled, "share")
    iteration_s = dict(zip(frame["configuration"], frame["iteration_s"], strict=True))
    long_frame["configuration"] = long_frame["run_label"]
    long_frame["share"] = long_frame["value"]
    long_frame["seconds"] = [share * float(iteration_s[name]) for share, name in
                             zip(long_frame["value"], long_frame["configuration"], strict=True)]  # fmt: skip
    # a predicted bar is no measurement left unresolved: not drawn faded (its ± is its row's stated error)
    predicted = set(frame.loc[frame["source"] == "predicted", "configuration"]) if "source" in frame else ()
    pairs = zip(long_frame["configuration"], long_frame["resolved"], strict=True)
    long_frame["resolved"] = [None if name in predicted else resolved for name, resolved in pairs]
    return long_frame[columns].reset_index(drop=True)
