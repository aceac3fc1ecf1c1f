"""`stash profile`: check the command line, run the profile, save it and print its breakdown.

The options themselves, and what a valid profile is, are defined once in stash_core.spec.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from stash_core import store
from stash_core.catalog import check_document
from stash_core.cli.probe_text import core_sharing_note, format_communication
from stash_core.cli.report import format_breakdown
from stash_core.engine.data_setup import prepare_data
from stash_core.engine.jobs import register_profile
from stash_core.engine.machine import cuda_device_count, resolve_device, validate
from stash_core.engine.profiler import run_profile
from stash_core.engine.progress import BarReporter, JsonReporter, Reporter
from stash_core.engine.script_job import finish_script_doc, script_model_info
from stash_core.errors import ProfileEnded, SaveError, StashError, UsageError, first_line
from stash_core.interrupts import held_interrupts, stop_exception
from stash_core.launch import cluster
from stash_core.launch.hosts import cluster_name_of, default_cluster_state_dir, remote_hosts
from stash_core.measure import protocol
from stash_core.results.file import default_result_path, write_result_atomic
from stash_core.spec import ProfileSpec
from stash_core.store.connection import DatabaseLocked, check_database_path
from stash_core.units import json_safe
from stash_core.zoo import build_model


class emulated_bandwidth:
    """Set every emulated link to --cluster-bandwidth for the profile; put the old rates back after."""

    def __init__(self, spec: ProfileSpec, state_dir: Path | None) -> None:
        self.spec, self.state_dir = spec, state_dir
        self.before: list[tuple[int, str]] = []

    def __enter__(self) -> None:
        if self.spec.cluster != "emulated" or not self.spec.cluster_bandwidth:
            return

        self.state_dir = self.state_dir or default_cluster_state_dir(cluster_name_of(self.spec))
        status = cluster.cluster_status(self.state_dir)
        if not status["nodes"]:
            raise UsageError("no emulated cluster is up (sudo stash cluster up --nodes N)")
        cluster.parse_bandwidth_bps(self.spec.cluster_bandwidth)  # a bad rate fails before any change
        try:
            for node in status["nodes"]:
                rate_bps = node["shaping"]["rate_bps"]
                self.before.append((node["index"], f"{rate_bps}bit" if rate_bps else "unlimited"))
                rate = self.spec.cluster_bandwidth
                cluster.set_link(node["index"], bandwidth=rate, state_dir=self.state_dir)
        except BaseException:
            self.__exit__(None, None, None)  # put back the links already changed
            raise

    def __exit__(self, *exc_info) -> None:
        for index, rate in self.before:
            try:
                cluster.set_link(index, bandwidth=rate, state_dir=self.state_dir)
            except StashError:
                pass  # the cluster went away meanwhile: nothing to restore


def results_dir_of(db_path: Path) -> Path:
    """Where result files go by default: `results/` next to the database they are stored in, so that a
    profile started from any folder keeps its files with its database (the dashboard's, or --db's)."""
    return Path(db_path).parent / "results"


def check_writable(db_path: Path, out_path: Path | None, store_db: bool) -> None:
    """Refuse before measuring anything if the results could not be saved: --out a directory or in a place
    that cannot be written, --db a directory, not a DuckDB file, corrupt, too new or not writable."""
    if store_db:
        try:
            check_database_path(db_path)
            if db_path.exists():  # intact and of a schema this Stash can take (a busy one is fine)
                with store.connect(db_path, read_only=True, lock_timeout_s=0.5):
                    pass
        except DatabaseLocked:
            pass
        except UsageError as error:
            raise UsageError(f"--db {db_path}: {error}") from None
    # The database first: the result files' default folder is beside it, so a bad --db explains both.
    if out_path is not None and out_path.is_dir():
        raise UsageError(f"--out {out_path} is a directory; give the result file's name")
    directory = out_path.parent if out_path else results_dir_of(db_path)
    existing = directory
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    if not existing.is_dir() or not os.access(existing, os.W_OK | os.X_OK):
        what = "--out " + str(out_path) if out_path else "the result file"
        raise UsageError(f"{what}: cannot write to {directory} (permission denied or not a directory)")
    if out_path is not None and out_path.exists() and not os.access(out_path, os.W_OK):
        raise UsageError(f"--out {out_path}: the file is not writable")


def make_reporter(mode: str):
    if mode == "json":
        return JsonReporter()
    if mode == "none":
        return Reporter()
    return BarReporter()


def profile_from_args(args, db_path: Path) -> int:
    spec, cluster_state = checked_spec(args)
    check_writable(db_path, args.out, not args.no_store)
    args.db_was_new = not db_path.exists()
    batch = f"batch {spec.batch_size}" if spec.batch_size else "the script's batch"
    label = f"{spec.model} · {batch} · {spec.workers_per_node} worker(s)" + (
        f" · {spec.instance}" if spec.instance else ""
    )
    # Registered next to the database, so the dashboard's Run page and Overview follow it too.
    with register_profile(db_path, sys.argv, label) as record:
        reporter = record.reporter(make_reporter(args.progress))
        if spec.script:
            return profile_script(spec, args, db_path, cluster_state, record, reporter)
        _, info = build_model(spec.model, num_classes=spec.num_classes, input_shape=_shape(spec))
        data = prepare_data(spec, info.kind, reporter)
        if data.classes > info.num_classes:
            # Labels must index the model's outputs: size the classifier to the data set's classes.
            if spec.num_classes is not None:
                raise UsageError(
                    f"--num-classes {spec.num_classes}: the data set has {data.classes} class folders"
                )
            spec.num_classes = data.classes
            _, info = build_model(spec.model, num_classes=spec.num_classes, input_shape=_shape(spec))
        return run_and_save(spec, info.to_dict(), data, args, db_path, cluster_state, record, reporter)


def run_and_save(spec, model_info: dict, data, args, db_path: Path, cluster_state, record, reporter) -> int:
    """Measure, save (file and database), print: a failed or interrupted profile is saved too."""
    error: BaseException | None = None
    if getattr(args, "db_was_new", False) and not args.no_store:  # said before the measuring, not only after
        print(
            f"note: {db_path} does not exist yet: this profile starts a new database there (the dashboard opens "
            f"it with STASH_DB={db_path.resolve()} ./run.sh, or its sidebar)",
            flush=True,
        )
    try:
        with emulated_bandwidth(spec, cluster_state):
            remote = remote_hosts(spec, cluster_state)  # again: the emulated link may have changed
            doc = run_profile(spec, model_info, data, reporter, remote)
    except ProfileEnded as ended:
        doc, error = ended.doc, ended.cause
    if spec.script:
        finish_script_doc(doc)
    out_path, interrupted, problem = save_result(doc, args, db_path)
    record.done(doc["run_id"], doc["status"], out_path and str(out_path), doc["error"])
    if interrupted and error is None:
        error = stop_exception(interrupted[0])
    return report_result(doc, out_path, error, args, db_path, problem)


def profile_script(spec: ProfileSpec, args, db_path: Path, cluster_state, record, reporter) -> int:
    """The user's own training script, run unmodified in each differential run."""
    data = prepare_data(spec, "script", reporter)
    if data.not_separable_reason and spec.data_dir is None:
        reporter.message(f"note: {data.not_separable_reason}")
    return run_and_save(spec, script_model_info(spec), data, args, db_path, cluster_state, record, reporter)


def checked_spec(args) -> tuple[ProfileSpec, Path | None]:
    """The spec of the command line and the emulated cluster's state folder, checked before anything runs."""
    spec = ProfileSpec.from_args(args)
    cuda_devices = cuda_device_count()
    validate(spec, cuda_devices)
    resolve_device(spec, cuda_devices)
    cluster_state = Path(args.cluster_state) if getattr(args, "cluster_state", None) else None
    remote_hosts(spec, cluster_state)  # host names, user, key, paths: refused before anything runs
    if spec.disk_read_mbps is not None:
        from stash_core.data.diskcap import disk_cap_unsupported_reason

        probe_path = Path(spec.dataset) if spec.dataset else Path.home()
        reason = disk_cap_unsupported_reason(probe_path)
        if reason:
            raise UsageError(f"--disk-read-mbps: {reason}")
    return spec, cluster_state


def save_result(doc: dict, args, db_path: Path) -> tuple[Path | None, list[int], str | None]:
    """Write the result file and store it. Returns the file's path (None when it could not be written), the
    stop signals received meanwhile, and what could not be saved (one line) or None."""

    out_path = args.out or default_result_path(doc["run_id"], results_dir_of(db_path))
    file_error = db_error = None
    # A Ctrl-C, SIGTERM or SIGHUP now lets the save finish (DuckDB would also swallow it into a retried
    # statement); the interrupt is raised afterwards. A full disk or a broken database loses one of the two
    # copies, never both while either can be written.
    with held_interrupts() as interrupted:
        try:
            write_result_atomic(out_path, doc)
        except StashError as error:
            file_error = error
        if not args.no_store:
            try:
                # the document as its file holds it: NaN and infinities (no figure) become null
                stored = json_safe(doc)
                store.ingest_result(db_path, stored, source_file=None if file_error else str(out_path))
            except Exception as error:  # a full disk can surface as any DuckDB or OS error: keep the file
                db_error = error
    return (
        (None if file_error else out_path),
        interrupted,
        _save_problem(doc["run_id"], out_path, db_path, file_error, db_error, args.no_store),
    )


def _save_problem(
    run_id: str, out_path: Path, db_path: Path, file_error, db_error, no_store: bool
) -> str | None:
    """One line: what could not be written, where the run is, and how to store it later."""
    if file_error is None and db_error is None:
        return None
    if file_error is None:
        return (
            f"could not store run {run_id}: {first_line(db_error)}; it is kept in {out_path}: store it later "
            f"with `stash ingest {out_path} --db {db_path}`"
        )
    if no_store:
        return f"{first_line(file_error)}; run {run_id} was not saved"
    if db_error is None:
        return f"{first_line(file_error)}; run {run_id} is stored in {db_path} (`stash export` gets it back)"
    return f"run {run_id} could not be saved: {first_line(file_error)}; {first_line(db_error)}"


def report_result(
    doc: dict, out_path: Path | None, error: BaseException | None, args, db_path: Path, problem: str | None
) -> int:
    """The DONE line (--progress json), then the breakdown; a failed or interrupted run raises its error, a
    run that could not be saved whole raises SaveError after its breakdown."""

    if args.progress == "json":
        done = {"run_id": doc["run_id"], "status": doc["status"], "result_file": out_path and str(out_path)}
        protocol.emit("DONE", {**done, "error": doc["error"]})
    if error is not None:
        if problem:
            print(f"stash: {problem}", file=sys.stderr)
        else:
            where = f"{out_path}" + ("" if args.no_store else f" and {db_path}")
            print(f"stash: saved the {doc['status']} run {doc['run_id']} to {where}", file=sys.stderr)
        raise error
    print(format_breakdown(doc["breakdown"], doc["spec"].get("dataset_images")))
    for line in format_communication(doc["breakdown"]):
        print(line)
    sharing = core_sharing_note(doc)
    if sharing:
        print(sharing)
    if problem:
        raise SaveError(problem)
    warning = check_document(db_path, doc).warning
    if warning:
        print(f"warning: {warning}")
    where = f"{out_path}" + ("" if args.no_store else f" and {db_path}")
    print(f"run {doc['run_id']} saved to {where}")
    if not args.no_store and getattr(args, "db_was_new", False):
        print(
            f"note: {db_path} is a new database: the dashboard shows it when opened on it "
            f"(STASH_DB={db_path.resolve()} ./run.sh, or its sidebar); --db or $STASH_DB chooses the database"
        )
    return 0


def _shape(spec: ProfileSpec):
    return tuple(spec.input_shape) if spec.input_shape else None
