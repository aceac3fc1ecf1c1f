"""`stash show`: a stored run as header lines plus the breakdown table, and a warning when the machine the run
measured does not fit its instance label (catalog/labels.py); `stash runs`: the table of stored runs.

Both read plain rows (store/runs.py run_record, run_rows), not frames, so that they start without pandas;
the catalog code (which needs pandas) is imported inside _label_check, only for a label the catalog knows.
"""

from __future__ import annotations

import math
import shlex
from pathlib import Path

from stash_core.analysis.core_sharing import core_sharing_note
from stash_core.cli.probe_text import format_communication, format_probe, probe_json
from stash_core.cli.report import format_breakdown
from stash_core.errors import UsageError, no_run_error
from stash_core.store.catalog_seed import BUILTIN_CATALOG_CSV, builtin_catalog_rows
from stash_core.store.impossible_runs import breakdown_marks
from stash_core.store.partial_time import partial_note, partial_notes
from stash_core.store.runs import matching_count, other_probe_sets, probe_set_record, run_record, run_rows
from stash_core.store.stored_breakdown import breakdown_from_stored
from stash_core.store.summary import catalog_names, database_summary
from stash_core.terminal import one_line
from stash_core.units import json_safe

RUNS_COLUMNS = (
    "run_id", "started_at", "status", "model", "batch_size", "workers_per_node", "nodes", "instance",
    "device", "iteration_s", "epoch_s",
)  # fmt: skip
PARTIAL_COLUMNS = ("iteration_s", "epoch_s")  # the times of a run that did not complete: one phase's
PARTIAL_MARK = "*"


def show_run(db_path: Path | str, run_id: str) -> str:
    """What `stash show RUN_ID` prints; `run_id` may be any unique part of a run id (the short suffix the
    pages show included). UsageError when no run or several runs match."""
    run, probe = _stored(db_path, run_id)
    if run is None:
        return f"probe set {probe['probe_id']}\n{format_probe(probe)}"
    return format_stored_run(run, db_path)


def show_json(db_path: Path | str, run_id: str) -> str:
    """What `stash show RUN_ID --format json` prints: {"run": the stored run's fields (spec, fingerprint and
    phases included), "breakdown": its breakdown as a result file holds it (per stall: seconds, ci95_s, share,
    epoch_s, epoch_ci95_s, status, note, raw_s; warnings, communication), null for a run without an iteration
    time (one that failed)}; times as ISO 8601 text, unknown figures null."""
    run, probe = _stored(db_path, run_id)
    if run is None:
        return _json_text({"probe": probe_json(probe)})
    breakdown = breakdown_from_stored(run)  # None for a run without an iteration time (one that failed)
    fields = {key: value for key, value in run.items() if key not in (breakdown or {}) and key != "stalls"}
    return _json_text({"run": fields, "breakdown": breakdown})


def _stored(db_path: Path | str, given_id: str) -> tuple[dict | None, dict | None]:
    """(the run, None) or (None, the probe set) that `given_id` is, or is a unique part of (`stash probe`
    prints its id as a run's is printed); UsageError when it names neither, or is a part of both (a run's
    own probe sets, `<run_id>-R1`, are the run's)."""
    run = run_record(db_path, given_id)
    if run is None:
        probe = probe_set_record(db_path, given_id)
        if probe is None:
            raise no_run_error(given_id, db_path)
        return None, probe
    if run["run_id"] != given_id and (others := other_probe_sets(db_path, given_id, run["run_id"])):
        if others == [given_id]:  # a probe set's whole id
            return None, probe_set_record(db_path, given_id)
        sets = f"probe set {others[0]}" if len(others) == 1 else "several probe sets"
        raise UsageError(f"id {given_id!r} is a part of run {run['run_id']} and of {sets}; give more "
                         "characters")  # fmt: skip
    return run, None


def runs_json(db_path: Path | str, limit: int | None = None, matching: dict[str, str] | None = None) -> str:
    """What `stash runs --format json` prints: {"runs": one object per run, newest first, the stall_breakdown
    view's columns (docs/schema.md) and "figures" ("impossible", "not comparable" or null: see runs_table),
    "stored": how many runs the database holds (with `matching`, how many of them match)}."""
    rows = run_rows(db_path, limit, matching)
    marks = breakdown_marks(db_path, [row["run_id"] for row in rows])
    rows = [{**row, "figures": marks.get(row["run_id"])} for row in rows]
    total = _run_count(db_path, matching) if limit is not None and len(rows) >= limit else len(rows)
    return _json_text({"runs": rows, "stored": total})


def _json_text(value: object) -> str:
    import json

    # a time as ISO 8601 text; NaN and infinities as null (json_safe)
    return json.dumps(json_safe(value), default=lambda moment: moment.isoformat())


def runs_table(
    db_path: Path | str, limit: int | None = None, matching: dict[str, str] | None = None
) -> str | None:
    """What `stash runs` prints: one line per stored run (with `matching`, per run holding those values),
    newest first, columns right-aligned, and a last line that says how many runs `limit` left out; None when
    there is no such run."""
    rows = run_rows(db_path, limit, matching)
    if not rows:
        return None
    columns = [column for column in RUNS_COLUMNS if column in rows[0]]
    partial = partial_notes(db_path, [row["run_id"] for row in rows])
    cells = [[_cell(row[column], marked=_mark(row, column, partial)) for column in columns] for row in rows]
    if "iteration_s" in columns:  # each time with its interval, as `stash show` gives it
        at = columns.index("iteration_s") + 1
        columns.insert(at, INTERVAL_COLUMN)
        for row, line in zip(rows, cells, strict=True):
            line.insert(at, _relative_interval(row.get("iteration_s"), row.get("iteration_ci95_s")))
    widths = [max(len(column), *(len(line[i]) for line in cells)) for i, column in enumerate(columns)]
    lines = [[column.rjust(width) for column, width in zip(columns, widths, strict=True)]]
    lines += [[cell.rjust(width) for cell, width in zip(line, widths, strict=True)] for line in cells]
    text = "\n".join(" ".join(line).rstrip() for line in lines)
    if partial:  # a failed run's figure is one phase's (R0: one worker), said under the table
        text += f"\n{PARTIAL_MARK} not the time of the job profiled: one phase's, of a run that did not"
        text += " complete (`stash show RUN_ID` lists its phases)"
        text += "".join(f"\n  {one_line(run_id)}  {one_line(note)}" for run_id, note in partial.items())
    if marks := breakdown_marks(db_path, [row["run_id"] for row in rows]):  # as the dashboard marks them
        text += f"\n{FIGURES_NOTE}"
        text += "".join(f"\n  {one_line(run_id)}  {mark}" for run_id, mark in marks.items())
    total = _run_count(db_path, matching) if limit is not None and len(rows) >= limit else len(rows)  # cut?
    if total > len(rows):
        text += f"\n... {total - len(rows)} more run(s) not shown (--limit {total} lists all {total})"
    return text


FIGURES_NOTE = (
    "breakdowns not to be read as stalls (impossible: a stall beyond the whole iteration or the like; not "
    "comparable: the runs did different work per process; `stash show RUN_ID` says why):"
)


def _run_count(db_path: Path | str, matching: dict[str, str] | None = None) -> int:
    """How many runs the database holds (counts of its tables: no run's rows are read), or of them match."""
    return matching_count(db_path, matching) if matching else int(database_summary(db_path)["runs"])


def _mark(row: dict, column: str, partial: dict[str, str]) -> str | None:
    """The marker of a time cell of a run whose times are one phase's; a space for another time cell of a
    table with marked ones (its digits stay in line), None for every other cell."""
    if column not in PARTIAL_COLUMNS or not partial:
        return None
    return PARTIAL_MARK if row["run_id"] in partial and row[column] is not None else " "


INTERVAL_COLUMN = "±95%"  # the iteration's 95% interval over its time


def _relative_interval(seconds: float | None, ci95_s: float | None) -> str:
    """"±2.1%"; "-" where either figure is unknown (a failed run, a single iteration)."""
    finite = all(isinstance(v, float | int) and math.isfinite(v) for v in (seconds, ci95_s))
    if not finite or not seconds:
        return "-"
    share = ci95_s / seconds
    return f"±{share:.0%}" if share >= 1 else f"±{share:.1%}"


def _cell(value, marked: str | None = None) -> str:
    if value is None:  # as `stash show` and `stash instances list` write a missing value
        return "-" + (" " if marked else "")
    if isinstance(value, float):
        return f"{value:.4f}{marked or ''}"
    return one_line(value)  # a datetime as "2026-11-24 09:50:03+00:00"; a newline as \n, not a row of its own


def format_stored_run(run: dict, db_path: Path | str | None = None) -> str:
    """Header, phases, breakdown; the instance label is checked against the database's catalog (the
    built-in one without `db_path`). Stored text is written on one line (terminal.one_line), so that a
    newline in a value cannot make a line that looks like Stash's; a missing value is "-" (a count "unknown"),
    as `stash runs` writes it."""
    workers = (
        f"{_field(run, 'workers_per_node', 'unknown')} worker(s) x {_field(run, 'nodes', 'unknown')} node(s)"
    )
    lines = [
        f"run {_field(run, 'run_id')}  {_field(run, 'status')}  started {_field(run, 'started_at')}",
        f"model {_field(run, 'model')}, batch {_field(run, 'batch_size', 'unknown')} per worker, {workers}, "
        f"{_field(run, 'device')} ({_field(run, 'backend')}), instance {_field(run, 'instance')}",
    ]
    spec = run.get("spec") if isinstance(run.get("spec"), dict) else {}
    script_args = spec.get("script_args")
    if script_args and isinstance(script_args, list):  # part of the configuration: another is another job
        lines.append(f"script arguments: -- {one_line(shlex.join(str(arg) for arg in script_args))}")
    if machines := machines_line(spec, run.get("hosts")):
        lines.append(machines)
    label_warning = _label_check(run, db_path).warning
    if label_warning:
        lines.append(f"warning: {one_line(label_warning)}")
    if run.get("error"):
        lines.append(f"error: {one_line(run['error'])}")
    for phase in run.get("phases") or []:
        mean_s, ci_s, iterations = phase.get("mean_s"), phase.get("ci95_s"), phase.get("iterations")
        known = ci_s is not None and ci_s == ci_s  # the unit and the level said, as the table below says them
        spread = f"± {ci_s:.4f} s (95%)" if known else "(no interval: too few iterations)"
        over = f" over {iterations} iterations" if iterations is not None else ""
        timing = f"{mean_s:.4f} s {spread}{over}" if mean_s else "-"
        lines.append(f"  {_field(phase, 'phase'):<4}{_field(phase, 'status'):<12}{timing}")
    breakdown = breakdown_from_stored(run)
    partial = partial_note(run, run.get("phases") or [])
    if breakdown is not None and partial:  # said before the figures, as `stash runs` marks them
        lines.append(f"partial: {one_line(partial)}, not the time of the job profiled")
    if breakdown is not None:
        lines.append(format_breakdown(breakdown, run.get("dataset_images"), run.get("model_kind")))
        lines.extend(format_communication(breakdown))
        # the caveat the profile printed: rebuilt from the stored spec and machine
        sharing = core_sharing_note({"spec": run.get("spec"), "fingerprint": run.get("fingerprint"),
                                     "hosts": run.get("hosts"), "phases": run.get("phases"),
                                     "breakdown": breakdown})  # fmt: skip
        lines += [sharing] if sharing else []
    elif run.get("status") == "completed":
        lines.append("no stall breakdown: the run has no valid iteration time stored")
    elif run.get("status") in ("interrupted", "failed"):  # its "-" figures said as what they are
        how = "was interrupted" if run["status"] == "interrupted" else "failed"
        lines.append(f"no stall breakdown: the profile {how} before a breakdown could be made")
    return "\n".join(lines)


def machines_line(spec: dict, reported: object = None) -> str | None:
    """The machines a run spanned, as its spec records them: the emulated cluster's name and links (what it
    emulated of them), or the hosts, each with what it reported (`reported`: the run's hosts, in the same
    order: CPUs, GPUs, torch); None on this machine alone."""
    network = spec.get("network") if isinstance(spec.get("network"), dict) else {}
    if spec.get("cluster") == "emulated":
        rate = network.get("rate_bps")
        links = "links unlimited"
        if isinstance(rate, int | float) and rate:
            links = f"links {rate / 1e6:g} Mbit/s"
        if network.get("netem"):
            links += f", delay {network.get('latency_us') or 0} us, loss {network.get('loss_pct') or 0:g}%"
        elif network.get("latency_us") or network.get("loss_pct"):
            links += " (delay and loss not emulated: no netem)"
        return one_line(f"machines: emulated cluster {spec.get('cluster_name') or 'default'}, {links}")
    hosts = spec.get("hosts")
    if isinstance(hosts, list) and hosts:
        said = reported if isinstance(reported, list) and len(reported) == len(hosts) else [None] * len(hosts)
        named = ", ".join(_host(host, info) for host, info in zip(hosts, said, strict=True))
        return one_line(f"machines: hosts {named}")
    return None


def _host(host: object, info: object) -> str:
    """'a:22 (2 CPUs, 1 GPU(s), torch 2.13.0)': a host as given, with what it reported where it is known."""
    info = info if isinstance(info, dict) else {}
    counts = [(info.get(key), unit) for key, unit in (("cpu_count", "CPUs"), ("gpu_count", "GPU(s)"))]
    parts = [f"{n} {unit}" for n, unit in counts if isinstance(n, int) and not isinstance(n, bool)]
    parts += [f"torch {info['torch_version']}"] if isinstance(info.get("torch_version"), str) else []
    return f"{host} ({', '.join(parts)})" if parts else str(host)


def _field(row: dict, key: str, missing: str = "-") -> str:
    """A stored value on one line; `missing` for NULL or empty text."""
    value = row.get(key)
    return missing if value is None or value == "" else one_line(value)


def _label_check(run: dict, db_path: Path | str | None):
    label = run.get("instance")
    known = catalog_names(db_path) if db_path is not None else set()
    if label and label not in known:
        known |= {row[0] for row in builtin_catalog_rows(BUILTIN_CATALOG_CSV)}
    if not label or label not in known:
        return _Unchecked()  # check_label's verdict without a catalog row: not checked, no warning
    from stash_core.catalog import builtin_instances, check_label, check_stored_run
    from stash_core.cells import plain_row

    if db_path is not None:
        return check_stored_run(db_path, run)
    builtin = builtin_instances()
    match = builtin[builtin["name"] == label] if label else builtin.iloc[:0]
    instance = plain_row(match.iloc[0].to_dict()) if len(match) else None
    return check_label(run["run_id"], label, instance, run.get("spec"), run.get("fingerprint"))


class _Unchecked:
    """The label check of a run without a label, or with one the catalog does not hold."""

    warning = None
