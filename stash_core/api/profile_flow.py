"""One profile from its checked arguments to its stored result: check the spec and where it will be saved,
build the model, prepare the data, run (engine/profiler.py), write the result file, store it.

The one flow behind `stash profile` (cli/profile.py prints around it), the profile child that the dashboard
and campaigns start (api/child.py) and `stash_core.profile()` (api/profiling.py). It prints nothing itself:
what each front end shows goes through `report`, called once the run is saved, and `notify`.
"""

from __future__ import annotations

import argparse
import os
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import duckdb

from stash_core import store
from stash_core.api.database_notes import new_database_note
from stash_core.api.profile_inputs import built_model, data_and_model, data_folder
from stash_core.catalog import check_document
from stash_core.engine.jobs import ProfileRecord, jobs_dir, register_profile
from stash_core.engine.link_watch import LinkWatch
from stash_core.engine.machine import cuda_device_count, refuse_auto_only, resolve_device, validate
from stash_core.engine.profiler import run_profile
from stash_core.engine.progress import BarReporter, JsonReporter, Reporter, TeeReporter
from stash_core.engine.script_job import finish_script_doc
from stash_core.errors import DiskFull, ProfileEnded, StashError, UsageError, first_line
from stash_core.interrupts import held_interrupts, stop_exception
from stash_core.launch import cluster
from stash_core.launch.hosts import cluster_name_of, default_cluster_state_dir, remote_hosts
from stash_core.measure import protocol
from stash_core.pathargs import db_named_by
from stash_core.results.file import (
    PROBE_KIND,
    RESULT_KIND,
    check_replaceable,
    default_result_path,
    results_dir_of,
    write_result_atomic,
)
from stash_core.spec import ProfileSpec
from stash_core.spec_checks import check_cluster_state
from stash_core.store.queries_upload import stored_probe_ids, stored_run_ids
from stash_core.store.storable import check_storable
from stash_core.terminal import shell_word
from stash_core.units import json_safe
from stash_core.userfiles import nearest_existing, writable_target


@dataclass
class ProfileRun:
    """What one profile left: its document, where it was saved, and what went wrong on the way."""

    doc: dict[str, Any]
    out_path: Path | None  # the result file; None when it could not be written
    db_path: Path
    stored: bool  # whether it was meant for the database (no --no-store)
    db_was_new: bool  # the database did not exist before this profile
    error: BaseException | None = None  # what ended the profile early (raised once it is saved)
    problem: str | None = None  # what could not be saved, one line
    warning: str | None = None  # the instance label contradicted by the machine
    in_database: bool = False  # whether the database holds the run (stored and not lost to a failed write)

    @property
    def where(self) -> str:
        """The result file, and the database when the run went there too."""
        return f"{self.out_path}" + ("" if not self.stored else f" and {self.db_path}")

    def early_end_line(self) -> str:
        """What a failed or interrupted run says before its error: where it is saved, or what could not be."""
        if self.problem:
            return self.problem
        return f"saved the {self.doc['status']} run {self.doc['run_id']} to {self.where}"


Report = Callable[[ProfileRun], None]


def run_profile_flow(
    args: argparse.Namespace,
    db_path: Path,
    command: list[str],
    report: Report,
    notify: Callable[[str], None],
    origin: str = "cli",
) -> ProfileRun:
    """Check, measure, save: the profile of parsed `stash profile` arguments, registered next to its database
    under `command` as started from `origin` (so that the dashboard follows it). `notify` gets the
    new-database note before anything is measured; `report` gets the saved run and may raise (the registry
    then records that exit status).

    A bad input raises UsageError before anything runs. A failed or interrupted profile is saved too:
    `report` sees it in `error` (the front end raises it)."""
    spec, cluster_state = checked_spec(args)
    named_by = db_named_by(getattr(args, "db", None))
    if origin == "python":  # profile(db=...) names the argument as the caller wrote it
        named_by = named_by.replace("--db", "db")
    locked = check_writable(db_path, args.out, not args.no_store, named_by)
    db_was_new = not db_path.exists()
    batch = f"batch {spec.batch_size}" if spec.batch_size else "the script's batch"
    label = f"{spec.model} · {batch} · {spec.workers_per_node} worker(s)" + (
        f" · {spec.instance}" if spec.instance else ""
    )
    # A model that cannot be built is refused before the run is registered: it leaves nothing behind.
    info = None if spec.script else built_model(spec, getattr(args, "typed", ()))
    # Registered next to the database, so the dashboard's Run page and Overview follow it too (its data
    # set prepared there). A data set refused takes the registration back, and the folders it made.
    existed, refused = nearest_existing(jobs_dir(db_path)), False
    try:
        # --no-store writes no database, nor a job folder beside the one it names (nor where the command ran)
        unregistered = ProfileRecord(None)
        with unregistered if args.no_store else register_profile(db_path, command, label, origin) as record:
            reporter = record.reporter(make_reporter(args.progress))
            try:
                data, model_info = data_and_model(spec, info, reporter)
            except UsageError:
                refused = True
                raise
            if db_was_new and not args.no_store:  # said before the measuring, not only after
                notify(new_database_note(db_path, at_start=True))
            if locked:
                notify(locked)
            run = _measure_and_save(spec, model_info, data, args, db_path, cluster_state, reporter)
            run.db_was_new = db_was_new
            run_id, status = run.doc["run_id"], run.doc["status"]
            result_file = run.out_path and str(run.out_path)
            # what could not be saved is the line to show where the run did not reach the database
            stored = run.in_database
            error = run.doc["error"] or run.problem
            record.done(run_id, status, result_file, error, stored)
            if args.progress == "json":
                done = {"run_id": run_id, "status": status, "result_file": result_file, "stored": stored}
                protocol.emit("DONE", {**done, "error": error})
            if run.error is None and run.problem is None:
                run.warning = check_document(db_path, run.doc).warning
            report(run)
    finally:
        if refused and record.job_dir is not None:
            _remove_made(record.job_dir, existed)
    return run


def _remove_made(job_dir: Path, existed: Path) -> None:
    """Remove a job folder and the folders made for it, up to the one that existed before."""
    shutil.rmtree(job_dir, ignore_errors=True)
    for folder in job_dir.parents:
        if folder == existed:
            return
        try:
            folder.rmdir()  # only while empty: what else is there stays
        except OSError:
            return


def _measure_and_save(
    spec: ProfileSpec, model_info: dict, data, args, db_path: Path, cluster_state, reporter: Reporter
) -> ProfileRun:
    """Measure and save (file and database): a failed or interrupted profile is saved too."""
    error: BaseException | None = None
    with emulated_bandwidth(spec, cluster_state):
        remote = remote_hosts(spec, cluster_state)  # again: the emulated link may have changed
        watch = LinkWatch(remote, spec, cluster_state)  # at each launch's end, and before links are put back
        try:
            doc = run_profile(spec, model_info, data, TeeReporter(reporter, watch), remote)
        except ProfileEnded as ended:
            doc, error = ended.doc, ended.cause
        changed = watch.final_change()
    if changed and doc.get("breakdown"):
        doc["breakdown"]["warnings"].append(changed)
    elif changed:
        reporter.message(f"warning: {changed}")
    if spec.script:
        finish_script_doc(doc)
    out_path, interrupted, problem, in_database = save_result(doc, args.out, args.no_store, db_path)
    if interrupted and error is None:
        error = stop_exception(interrupted[0])
    return ProfileRun(
        doc, out_path, db_path, not args.no_store, False, error, problem, in_database=in_database
    )


def checked_spec(args: argparse.Namespace) -> tuple[ProfileSpec, Path | None]:
    """The spec of the arguments and the emulated cluster's state folder, checked before anything runs."""
    spec = ProfileSpec.from_args(args)
    refuse_auto_only(spec, getattr(args, "typed", ()))
    cuda_devices = cuda_device_count()
    validate(spec, cuda_devices)
    resolve_device(spec, cuda_devices)
    check_cluster_state(spec, getattr(args, "cluster_state", None))
    cluster_state = Path(args.cluster_state) if getattr(args, "cluster_state", None) else None
    remote_hosts(spec, cluster_state)  # host names, user, key, paths: refused before anything runs
    if spec.disk_read_mbps is not None:
        from stash_core.data.diskcap import disk_cap_unsupported_reason

        reason = disk_cap_unsupported_reason(data_folder(spec))
        if reason:
            raise UsageError(f"--disk-read-mbps: {reason}")
    return spec, cluster_state


def check_writable(
    db_path: Path, out_path: Path | None, store_db: bool, named_by: str = "--db"
) -> str | None:
    """Refuse before measuring anything if the results could not be saved: --out a directory or in a place
    that cannot be written, --db a directory, not a DuckDB file, corrupt, too new or not writable. Returns
    a note where the database is locked by another process now (storing waits for its turn)."""
    note = check_storable(db_path, named_by) if store_db else None
    # The database first: the result files' default folder is beside it, so a bad --db explains both.
    if out_path is not None and out_path.is_dir():
        raise UsageError(f"--out {out_path} is a directory; give the result file's name")
    directory = out_path.parent if out_path else results_dir_of(db_path)
    existing = nearest_existing(directory)
    if not existing.is_dir() or not os.access(existing, os.W_OK | os.X_OK):
        what = "--out " + str(out_path) if out_path else "the result file"
        raise UsageError(f"{what}: cannot write to {directory} (permission denied or not a directory)")
    for folder in {existing, nearest_existing(db_path.parent)} if store_db else {existing}:
        refuse_full_disk(folder)
    if out_path is not None and out_path.exists() and not os.access(out_path, os.W_OK):
        raise UsageError(f"--out {out_path}: the file is not writable")
    if out_path is not None:
        writable_target(out_path, "result file")  # a device or a pipe: found now, not after the runs
        refuse_losing_output(out_path, db_path, "--out")
    return note


MIN_FREE_BYTES = 8 * 1024 * 1024  # a result file with its samples, and its rows in the database


def refuse_full_disk(folder: Path) -> None:
    """A disk too full for the result: said before minutes of measuring that could not be kept anywhere."""
    try:
        usage = shutil.disk_usage(folder)
    except OSError:
        return  # not knowable here: the write says what is wrong
    if usage.total == 0:  # /proc, /sys: no room was ever there, and no file can be made in it
        raise UsageError(f"{folder} is a virtual file system (no disk holds files there): choose another")
    free = usage.free
    if free < MIN_FREE_BYTES:
        raise DiskFull(
            f"the disk holding {folder} has {free / 2**20:.1f} MiB free: a profile's result and its rows "
            f"need at least {MIN_FREE_BYTES // 2**20} MiB; free some space first"
        )


def refuse_losing_output(out_path: Path, db_path: Path, flag: str, writes: str = RESULT_KIND) -> None:
    """Refuse (UsageError) an output path whose file the new one (of kind `writes`) may not replace: a file
    other than a Stash result or probe (check_replaceable), one of the other kind (the stored run's source
    file would then be a probe's), or the result or probe file of a run the database does not hold (a
    --no-store run, one that could not be stored): its file is the only copy."""
    replaced = check_replaceable(out_path, flag)
    if replaced is None:
        return
    kind, doc_id = replaced
    stored_ids = stored_probe_ids if kind == PROBE_KIND else stored_run_ids
    what = "probe" if kind == PROBE_KIND else "run"
    if kind != writes:
        written = "a probe's" if writes == PROBE_KIND else "a profile's"
        raise UsageError(
            f"{flag} {out_path} holds the file of {what} {doc_id}, and {written} would replace it: choose "
            "another path"
        )
    try:
        kept = doc_id in stored_ids(db_path, [doc_id])
    except (StashError, duckdb.Error) as error:  # locked past the wait, or an old one without probes
        raise UsageError(
            f"{flag} {out_path} holds {what} {doc_id}, and whether {db_path} holds it could not be told "
            f"({first_line(error)}): choose another path"
        ) from None
    if not kept:
        ingest = f"stash ingest {shell_word(str(out_path))} --db {shell_word(str(db_path))}"
        raise UsageError(
            f"{flag} {out_path} holds {what} {doc_id}, which {db_path} does not hold: writing there would "
            f"lose it unless another database does; store it first (`{ingest}`) or choose another path"
        )


def make_reporter(mode: str) -> Reporter:
    """The progress of --progress MODE: protocol lines (json), nothing (none), a bar per run (bar), or a bar
    on a terminal and a line per run elsewhere (auto)."""
    if mode == "json":
        return JsonReporter()
    if mode == "none":
        return Reporter()
    return BarReporter(always=mode == "bar")


class emulated_bandwidth:
    """Set every emulated link to --cluster-bandwidth for the profile; put the old rates back after."""

    def __init__(self, spec: ProfileSpec, state_dir: Path | None) -> None:
        self.spec, self.state_dir = spec, state_dir
        self.before: list[tuple[int, str, bool]] = []  # (node, its rate, its link cut) as they were

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
                cut = node.get("link_up") is False  # a link the user cut stays cut: only the rate changes
                self.before.append((node["index"], f"{rate_bps}bit" if rate_bps else "unlimited", cut))
                rate = self.spec.cluster_bandwidth
                cluster.set_link(node["index"], bandwidth=rate, down=cut, state_dir=self.state_dir)
        except BaseException:
            self.__exit__(None, None, None)  # put back the links already changed
            raise

    def __exit__(self, *exc_info) -> None:
        for index, rate, cut in self.before:
            try:
                cluster.set_link(index, bandwidth=rate, down=cut, state_dir=self.state_dir)
            except StashError:
                pass  # the cluster went away meanwhile: nothing to restore


def save_result(
    doc: dict, out: Path | None, no_store: bool, db_path: Path
) -> tuple[Path | None, list[int], str | None, bool]:
    """Write the result file (`out`, else results/RUN_ID.json beside the database) and store it. Returns the
    file's path (None when it could not be written), the stop signals received meanwhile, what could
    not be saved (one line) or None, and whether the database holds the run."""

    out_path = out or default_result_path(doc["run_id"], results_dir_of(db_path))
    file_error = db_error = None
    # A Ctrl-C, SIGTERM or SIGHUP now lets the save finish (DuckDB would also swallow it into a retried
    # statement); the interrupt is raised afterwards. A full disk or a broken database loses one of the two
    # copies, never both while either can be written.
    with held_interrupts() as interrupted:
        try:
            write_result_atomic(out_path, doc)
        except StashError as error:
            file_error = error
        if not no_store:
            try:
                # the document as its file holds it: NaN and infinities (no figure) become null
                stored = json_safe(doc)
                store.ingest_result(db_path, stored, source_file=None if file_error else str(out_path))
            except Exception as error:  # a full disk can surface as any DuckDB or OS error: keep the file
                db_error = error
    return (
        (None if file_error else out_path),
        interrupted,
        _save_problem(doc["run_id"], out_path, db_path, file_error, db_error, no_store),
        not no_store and db_error is None,
    )


def _save_problem(
    run_id: str, out_path: Path, db_path: Path, file_error, db_error, no_store: bool
) -> str | None:
    """One line: what could not be written, where the run is, and how to store it later."""
    if file_error is None and db_error is None:
        return None
    if file_error is None:
        # absolute: the line may be read in another folder (run.sh starts the dashboard in its own)
        file_word, db_word = (shell_word(os.path.abspath(path)) for path in (out_path, db_path))
        ingest = f"stash ingest {file_word} --db {db_word}"
        return (
            f"could not store run {run_id}: {first_line(db_error)}; it is kept in {out_path}: store it later "
            f"with `{ingest}`"
        )
    if no_store:
        return f"{first_line(file_error)}; run {run_id} was not saved"
    if db_error is None:
        return f"{first_line(file_error)}; run {run_id} is stored in {db_path} (`stash export` gets it back)"
    return f"run {run_id} could not be saved: {first_line(file_error)}; {first_line(db_error)}"
