"""Upload: check result files (JSON) or exports (Parquet, CSV), preview and compare them, store them.

Every file is judged on its own: a refused file is listed with its reason, and the Store button stays for
the good ones (not even a preview that fails to draw can hide it)."""

import logging

import streamlit as st

from pages._shared import (
    chart_with_download,
    current_db,
    forget_cached_queries,
    load,
    page_guard,
    show_table,
)
from pages._stalls import breakdown_chart
from stash_core import views
from stash_core.views.common import in_page_words, plain

LOG = logging.getLogger(__name__)


def verdicts_view(report: views.upload.UploadReport) -> None:
    st.subheader("Checked files")
    for check in report.checks:
        if check.ok:
            stored = [r for r in check.run_ids if r in report.already_stored]
            note = f" · {len(stored)} already stored" if stored else ""
            st.success(
                f"**{plain(check.name)}** — {plain(check.reason)}{note}", icon=":material/check_circle:"
            )
        else:
            st.error(f"**{plain(check.name)}** — refused: {plain(check.reason)}", icon=":material/block:")


def preview_view(report: views.upload.UploadReport) -> None:
    preview = report.preview
    if preview.empty:
        return
    st.subheader("Preview")
    # The run's label says its model, batch, workers x nodes, instance and id: one column for them all.
    columns = ("source", "run_label", "status", "started_at", "iteration_s", "epoch_s")
    table = preview[[c for c in columns if c in preview.columns]].copy()
    table.insert(
        0, "in database", preview["run_id"].isin(report.already_stored).map({True: "yes", False: "no"})
    )
    show_table(
        table,
        column_config={
            "in database": st.column_config.TextColumn("In database"),
            "source": st.column_config.TextColumn("File"),
            "run_label": st.column_config.TextColumn("Run"),
            "status": st.column_config.TextColumn("Status"),
            "started_at": st.column_config.DatetimeColumn("Started (UTC)", format="YYYY-MM-DD HH:mm"),
            "iteration_s": st.column_config.NumberColumn("Iteration (s)", format="%.4f"),
            "epoch_s": st.column_config.NumberColumn("Epoch (s)", format="%.1f"),
        },
    )
    long_frame = views.breakdown.stall_long_frame(preview, "seconds")
    if not long_frame.empty:
        st.markdown("**Compare in this session** (nothing is stored for this)")
        chart_with_download(
            breakdown_chart(long_frame, "seconds"), long_frame, "uploaded_breakdown", "up-chart"
        )


# The files last dropped (name, bytes): the uploader forgets them when the user visits another page.
KEPT_FILES = "upload-kept-files"


def keep_files(key: str) -> None:
    """The uploader's files as they now are, none once the user removes them (its change callback)."""
    files = st.session_state.get(key) or []
    st.session_state[KEPT_FILES] = tuple((file.name, file.getvalue()) for file in files)


def main() -> None:
    st.title("Upload")
    st.caption(
        "Result files from `stash profile` (JSON), or tables from `stash export` (Parquet, CSV or JSON "
        "lines: "
        "runs together with phases, stalls, iterations and telemetry). Every file is checked first; a file "
        "that is refused changes nothing."
    )
    views.common.check_database(current_db())  # one that cannot be opened is said now, as every page says it
    done = st.session_state.pop("upload-stored", None)
    if done:
        st.success(done, icon=":material/database:")
    for refused in st.session_state.pop("upload-refused", None) or []:
        st.error(refused, icon=":material/block:")
    key = f"upload-files-{st.session_state.get('upload-generation', 0)}"
    uploaded = st.file_uploader(
        "Result files (.json, .parquet, .csv)",
        # no type= filter: the browser's refusal was a red mark alone; the check names the file and why
        accept_multiple_files=True,
        key=key,
        help="Drop one or many files. Nothing is stored until you press Store.",
        on_change=keep_files,
        args=(key,),
    )
    files = tuple((file.name, file.getvalue()) for file in uploaded or [])
    if not files:
        files = st.session_state.get(KEPT_FILES, ())
        if files:  # the uploader comes back empty after a visit to another page
            names = ", ".join(plain(name) for name, _ in files)
            st.caption(
                f"Still checked from before you left this page: {names}. Drop files above to check others."
            )
    if not files:
        st.info("Drop files above to check them.", icon=":material/upload_file:")
        return
    with st.spinner("Checking the files…"):
        report = load(views.upload.check_uploads, files)
    verdicts_view(report)
    try:
        preview_view(report)
    except Exception as exc:  # the preview is a convenience: it never takes the Store button away
        LOG.exception("upload preview failed")
        st.warning(f"The preview could not be drawn ({type(exc).__name__}); the files can still be stored.")
    store_view(report)


def store_view(report: views.upload.UploadReport) -> None:
    storable = report.storable_docs
    new = list(dict.fromkeys(doc["run_id"] for _, doc in storable))
    new = [run_id for run_id in new if run_id not in report.already_stored]
    st.divider()
    if not storable:
        st.caption("Nothing here can be stored.")
        return
    database = current_db()
    created = not database.exists()
    where = "a new database" if created else "the database"
    label = f"Store {len(new)} new run(s) in {where}" if new else "All these runs are already stored"
    left_out = f" · {len(report.bad)} refused file(s) are left out" if report.bad else ""
    shown = views.common.new_database_words(database, "Store") if created else f"`{database}`"
    st.caption(f"Database: {plain(shown) if created else shown}{left_out}")
    if st.button(label, type="primary", disabled=not new, key="upload-store", icon=":material/save:"):
        outcomes = views.upload.store_uploads(database, report)
        inserted = sum(1 for _, _, added in outcomes if added)
        files = len(report.good)  # an export's companion tables too: their rows are in the runs stored
        forget_cached_queries()
        stored = f"Stored {inserted} run(s) from {files} file(s)" + (
            f" in a new database, {plain(database)}" if created and database.exists() else "") + (
            f"; {len(report.bad)} refused file(s) were left out." if report.bad else ".")
        st.session_state["upload-stored"] = stored if outcomes else None  # no "Stored 0" beside the reason
        st.session_state["upload-refused"] = [
            f"**{plain(name)}** — run {plain(run_id)} was not stored: {plain(in_page_words(reason, None))}"
            for name, run_id, reason in outcomes.refused
        ]
        st.session_state["upload-generation"] = st.session_state.get("upload-generation", 0) + 1
        st.session_state.pop(KEPT_FILES, None)
        st.rerun()


with page_guard():
    main()
