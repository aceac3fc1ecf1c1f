"""Recommend: which instances to rent, and how many, to train a model within a time budget - ranked by cost,
measured where profiles exist and predicted (with the expected error) where they do not."""

import pandas as pd
import streamlit as st

from pages._catalog_refresh import catalog_refresh, refreshed_note
from pages._fields import WHOLE, as_typed
from pages._pareto import pareto_view
from pages._shared import (
    chart_with_download,
    current_db,
    download_buttons,
    fit_to_page,
    load,
    page_guard,
    page_header,
    show_table,
    usd_text,
)
from pages._stalls import stall_bars
from stash_core import views
from stash_core.decide.recommend import Recommendation
from stash_core.decide.recommend.costs import step_error
from stash_core.errors import StashError
from stash_core.spec_parse import parse_input_shape
from stash_core.units import duration_words
from stash_core.views.common import STALL_LABELS, in_page_words, plain, sentence
from stash_core.views.compare_spread import relative_spread
from stash_core.views.recommend import RecommendRequest

PRECISIONS = ["pytorch", "fp32", "tf32", "amp"]
CHART_OPTIONS = 12  # configurations in the chart of where their time goes


def request_key() -> str:
    """The last request is the database's: after a switch, the other database's request is not re-run there
    (its instances, batch and shape came from that one's catalog and profiles)."""
    return f"rec-request:{current_db()}"


def request_form() -> RecommendRequest | bool | None:
    """The form describing the training job; the last request sent (kept across reruns), None before any,
    False for a form refused on Recommend (its error said).

    The model is chosen outside the form, so that its input shape and epoch size follow it; the choice stays
    the user's (a new profile in the database never replaces it)."""
    profiled = load(views.recommend.profiled_models)
    current = st.session_state.get("rec-model") or views.recommend.DEFAULT_MODEL
    models = views.recommend.model_choices(profiled, current)
    model = st.selectbox(
        "Model", models, index=models.index(current), accept_new_options=True, key="rec-model",
        persist_state="session",
        help="a zoo model, a profiled one, or FILE.py:FACTORY",
    )  # fmt: skip
    model = str(model or views.recommend.DEFAULT_MODEL)
    defaults = views.recommend.job_defaults(model)
    # No bounds in the browser: a number typed past one was kept out of the form there, and Recommend did
    # nothing with no word; each is checked on Recommend instead, its message naming the field (WORDS).
    with st.form("recommend-form"):
        # three fields a row: five or four cut values and broke labels mid-word in an 800 px window
        first = st.columns(3)
        # The model's own profiled batch, kept per model (as its input shape): switching models proposes the
        # new one's batch, and a batch typed for this model stays while it is chosen.
        sizes = views.recommend.batch_sizes_of(profiled, model) or [32]
        batch_size = first[0].number_input(
            "Batch size per worker", value=float(sizes[0]), key=f"rec-batch-{model}", **WHOLE,
            persist_state="session"
        )
        proposed = views.recommend.profiled_shape(profiled, model, int(sizes[0])) or defaults.input_shape
        shape_text = first[1].text_input(
            "Input shape", value=proposed, key=f"rec-shape-{model}", persist_state="session",
            help="one sample: C,H,W for images, a sequence length for tokens; empty: the model's default",
        )  # fmt: skip
        precision = first[2].selectbox(
            "Precision", PRECISIONS, key="rec-precision", persist_state="session",
            help="pytorch: as PyTorch trains the model when the job sets none (convolutions and recurrent "
            "layers in TF32 on Ampere and later, other matrix products in FP32); fp32; tf32 (every matrix "
            "product, Ampere and later); amp: mixed precision (FP16/BF16 tensor cores)",
        )  # fmt: skip
        work = st.columns(3)
        epochs = work[0].number_input(
            "Epochs", value=90.0, step=1.0, format="%g", key="rec-epochs",
            persist_state="session"
        )
        images = work[1].number_input(
            defaults.samples_label, value=float(defaults.epoch_samples), **{**WHOLE, "step": 1000.0},
            key=f"rec-samples-{defaults.kind}",
            persist_state="session",
        )  # fmt: skip
        WORDS["dataset_images: "] = f"{defaults.samples_label}: "  # the field as this model labels it
        memory_format = work[2].selectbox(
            "Memory format", ("nchw", "channels_last"), key="rec-memory-format", persist_state="session",
            disabled=(kind := defaults.kind) == "tokens",
            help="image models: channels_last runs tensor-core convolutions without layout conversions",
        )  # fmt: skip
        habits = st.columns(3)
        optimizer = habits[0].selectbox(
            "Optimizer", ("model default", "sgd", "adamw", "rmsprop"), key="rec-optimizer",
            persist_state="session",
            help="default: SGD with momentum for image models, AdamW for token models",
        )  # fmt: skip
        optimizer_impl = habits[1].selectbox(
            "Optimizer implementation", ("foreach", "fused", "loop"), key="rec-optimizer-impl",
            persist_state="session",
            help="PyTorch's: foreach (its default), fused (fused=True), loop (parameter by parameter)",
        )  # fmt: skip
        attention = habits[2].selectbox(
            "Attention", ("fused", "eager"), key="rec-attention", persist_state="session",
            disabled=kind == "image",
            help="transformers: fused (scaled_dot_product_attention) or eager (matrix products, softmax)",
        )  # fmt: skip
        second = st.columns(3)
        budget = second[0].number_input(  # %g: a budget typed as 0.004 h is shown as such, not as 0.00
            "Time budget (hours, 0 = none)", value=24.0, step=1.0, format="%g",
            key="rec-budget",
            persist_state="session",
        )
        max_usd = second[1].number_input(
            "Cost limit (USD, 0 = none)", value=0.0, step=100.0, key="rec-max-usd",
            persist_state="session", format="%g"
        )
        max_instances = second[2].number_input(
            "Most instances of one type", value=4.0, key="rec-max-instances", **WHOLE,
            persist_state="session"
        )
        third = st.columns(3, vertical_alignment="bottom")  # the toggle beside the field, not its label
        gpus_used = third[0].number_input(
            "GPUs used per instance (0 = all)", value=0.0, key="rec-workers", persist_state="session",
            **WHOLE,
            help="one worker per GPU; instances with fewer GPUs are not evaluated",
        )  # fmt: skip
        spot = third[1].toggle("Spot prices", key="rec-spot", persist_state="session")
        chosen = st.multiselect(
            "Instances to consider",
            load(views.recommend.instance_names),
            placeholder="all of the catalog",
            key="rec-inst",
            persist_state="session",
        )
        submitted = st.form_submit_button("Recommend", icon=":material/recommend:", type="primary")
    if submitted:
        try:
            shape = parse_input_shape(shape_text) if shape_text.strip() else None
        except StashError as exc:
            said = in_page_words(str(exc), {"--input-shape ": ""})  # the field is named first
            st.error(f"Input shape: {plain(said)}", icon=":material/error:")
            st.session_state.pop(request_key(), None)  # an earlier job's answer (or error) is not this one's
            return False  # refused, and said so: no other word beside it
        st.session_state[request_key()] = RecommendRequest(
            model=model,
            batch_size=as_typed(batch_size),
            precision=str(precision),
            input_shape=shape,
            epochs=float(epochs),
            dataset_images=as_typed(images),
            budget_hours=float(budget) if budget != 0 else None,  # a negative one is refused, named
            max_usd=float(max_usd) if max_usd != 0 else None,
            spot=bool(spot),
            instances=tuple(chosen) or None,
            max_instances=as_typed(max_instances),
            workers_per_instance=as_typed(gpus_used) if gpus_used != 0 else None,  # a negative one: refused
            memory_format=str(memory_format) if kind != "tokens" else "nchw",
            optimizer=None if optimizer == "model default" else str(optimizer),
            optimizer_impl=str(optimizer_impl),
            attention=str(attention) if kind != "image" else "fused",
        )
    asked = st.session_state.get(request_key())
    if isinstance(asked, RecommendRequest) and asked.model != model:  # the form's other fields wait for it
        st.warning(f"The answer below is for {plain(asked.model)}, the model chosen when Recommend was "
                   f"pressed: press Recommend to answer for {plain(model)}.",
                   icon=":material/history:")  # fmt: skip
    return asked


def recommended_box(result: Recommendation) -> None:
    """The cheapest configuration that meets the constraints, and why; or why none does."""
    if result.best is None:
        reason = in_page_words(result.infeasible_reason, WORDS)
        st.error(f"No recommendation: {plain(reason)}", icon=":material/block:")
        return
    best = result.best
    with st.container(border=True):
        st.markdown(":material/recommend: **Recommended**")
        st.markdown(f"### {plain(best['config'])}")
        error = step_error(best)
        marked = best["source"] + (f", ±{error:.0%} expected error" if error is not None else "")
        if best.get("unvalidated") in (True,):
            marked += " (unvalidated: no held-out figure of this GPU)"
        cols = [*st.columns(2), *st.columns(2)]  # four in a row cut the figures ("$10…") at 800 px
        budget_h = result.request.get("budget_hours")
        within_s = None if budget_h is None else budget_h * 3600  # 15.97 h within 15.98 h: never "16.0 h"
        # a predicted time and cost carry the step's expected error, as the caption's iteration time does; a
        # measured one its run's 95% interval
        measured = best["source"] == "measured" and relative_spread(best)
        said = f"±{error:.0%} expected error" if error is not None else measured and f"±{measured:.1%} (95%)"
        spread = {"delta": said, "delta_color": "off", "delta_arrow": "off"} if said else {}
        steps = best.get("iterations_per_epoch")  # PyTorch's defaults; a profile's epoch: its full batches
        cols[0].metric("Training time", duration_words(best["training_h"] * 3600, within_s), **spread,
                       help=steps and f"{int(steps):,} steps an epoch: every sample, the last batch partial")
        cols[1].metric("Cost", usd_text(best["training_usd"]), **spread)
        cols[2].metric("Price", f"{usd_text(best['usd_per_h'])}/h")
        shown = "—" if pd.isna(iteration_s := best.get("iteration_s")) else f"{iteration_s * 1e3:,.1f} ms"
        cols[3].metric("Iteration time", shown, help=marked)
        unknown = [STALL_LABELS[stall] for stall in views.recommend.stalls_not_predicted(best)]
        left_out = f" Not predicted, so not in the time: {' and '.join(unknown)}." if unknown else ""
        st.caption(f"Iteration time {marked}.{left_out}")
    for line in result.explanations[1:]:
        st.markdown(f"- {plain(in_page_words(line, WORDS))}")


def ranked_view(ranked: pd.DataFrame) -> None:
    st.subheader("Configurations that meet the constraints, cheapest first")
    st.caption(  # the table scrolls inside itself: its rows are counted here, where its ten look like all
        f"{len(ranked):,} configuration(s) in the table (it scrolls). ● measured: profiled on that instance. "
        "◇ predicted: from the model's FLOPs and bytes and the "
        "instance's accelerator and links (or scaled from a profile on another GPU), ± its own expected "
        "error (compute's and communication's, ±comm, added, as the card states it), 'unvalidated' where no "
        "held-out figure of the GPU exists. CPU and disk stalls need a profile with real data (one on "
        "another GPU gives the CPU stall alone, for each instance's vCPUs); those not predicted are missing "
        "from the bars."
    )
    options = ranked  # the chart's spreads read each option's own source ("predicted"), not the table's words
    gpus, source = views.recommend.gpus_used(ranked), views.recommend.marked_source(ranked)
    ranked = ranked.assign(source=source, gpus=gpus)
    columns = ["rank", "config", "accelerator", "gpus", "source", "comm_error", "training_h", "training_usd",
               "usd_per_h", "price_date", "iteration_s", "basis", "note"]  # fmt: skip
    # a basis or note alike in every row said once under the table: repeated, it made each row 9 lines tall
    table, alike = views.recommend.alike_in_every_row(ranked[columns], ["basis", "note"])
    # the notes, each of many rows, said once each below: in a column they made every row nine lines tall
    notes = table.pop("note") if "note" in table else None
    show_table(
        table,
        column_config={
            # wide enough for a name: "1 x / a2-ultragpu / -2g" was broken mid-word over three lines
            "config": st.column_config.TextColumn("config", width="medium"),
            "gpus": st.column_config.TextColumn("GPUs", help="GPUs used of each instance's, times instances"),
            "comm_error": st.column_config.NumberColumn("±comm", format="percent"),  # a share of the step
            # four figures, numbers still (they sort): an hour to one decimal and a cent read 0.0 h and $0.00
            "training_h": st.column_config.NumberColumn("hours", format="%.4g"),
            "training_usd": st.column_config.NumberColumn("USD", format="$%.4g"),
            "usd_per_h": st.column_config.NumberColumn("USD/h", format="%.2f"),
            "price_date": st.column_config.DateColumn("price of", format="YYYY-MM-DD"),  # as the CLI's column
            "iteration_s": st.column_config.NumberColumn("iteration (s)", format="%.4f"),
        },
    )
    for column, value in alike.items():
        st.caption(f"Every configuration's {column}: {plain(value)}")
    if notes is not None:
        said = views.recommend.ranks_by_note(table["rank"], notes)
        with st.expander(f"The configurations' notes ({len(said)})", icon=":material/notes:"):
            st.markdown("\n".join(f"- **{plain(ranks)}:** {plain(note)}" for note, ranks in said.items()))
    st.subheader("Where the time of each choice goes")
    shown = options.head(CHART_OPTIONS)
    if len(ranked) > CHART_OPTIONS:  # said: the chart is of the cheapest, the table above has them all
        st.caption(f"The {CHART_OPTIONS} cheapest of the {len(ranked)} configurations that meet the "
                   "constraints.")  # fmt: skip
    long = views.recommend.stall_seconds_long(shown, current_db())  # laid as the Breakdown chart lays a run's
    # drawn in ms: steps of tens of ms read "0.0000, 0.0020 … 0.0500" on a seconds axis
    in_ms = long.assign(**{column: long[column] * 1e3 for column in MS_COLUMNS if column in long})
    chart = stall_bars(in_ms, "run_label", "Configuration", "Milliseconds per iteration", "ms", ",.1f")
    chart_with_download(chart, long, "recommendation_stalls", "rec-stalls")
    st.caption("The line across each bar's end is its iteration's spread: a measured configuration's 95% "
               "interval, a predicted one's stated error (compute's and communication's, added).")


MS_COLUMNS = ("bar_start", "bar_end", "value", "ci95", "error_low", "error_high", "step_low", "step_high")


def show_result(result: Recommendation) -> None:
    st.markdown(f"**Job:** {plain(views.recommend.headline(result))}")
    refreshed_note("rec")
    for warning in result.label_warnings:  # the user's labels are data, not Markdown
        st.warning(plain(sentence(warning)), icon=":material/report:")
    if result.price_warning:  # Stash's words and dates read as dates: its commands shown as code
        st.warning(result.price_warning, icon=":material/sell:")
    if result.catalog_warning:  # rows an older Stash seeded: a newer one may know their links or network
        catalog_refresh([result.catalog_warning], "rec")
    recommended_box(result)
    options = result.options
    if not options.empty:
        pareto_view(options, result.request["budget_hours"])
    ranked = result.ranked
    if not ranked.empty:
        ranked_view(ranked)
    if not options.empty:
        download_buttons(options, "recommendation_options", "rec-options", label="All configurations")
    profiles_set_aside(list(result.profiles_set_aside))
    not_evaluated(list(result.excluded))


def profiles_set_aside(lines: list[str]) -> None:
    """Stored profiles of the job that the recommendation did not take as measurements, and why: they are
    no instance left out, so they are not counted with those."""
    if not lines:
        return
    title = f"Stored profiles of this job set aside ({len(lines)})"
    with st.expander(title, icon=":material/filter_alt_off:"):
        for line in lines:
            st.markdown(f"- {plain(in_page_words(line, WORDS))}")


def not_evaluated(reasons: list[str]) -> None:
    """Configurations left out say so, counted by reason, with each one's reason below."""
    if not reasons:
        return
    st.warning(
        f"{len(reasons)} instance(s) or configuration(s) not evaluated or not ranked: "
        f"{plain(views.recommend.not_predicted_summary(reasons))}. Each one's reason is listed below.",
        icon=":material/report:",
    )
    with st.expander(f"Not evaluated or not ranked ({len(reasons)})", icon=":material/help:"):
        for line in reasons:
            said = views.recommend.advice_in_page_words(in_page_words(line, WORDS))
            st.markdown(f"- {plain(said)}")


def catalog_editor() -> None:
    """Edit prices and shapes in the dashboard; every change goes through the catalog checks."""
    with st.expander("Instance catalog: shapes and prices (editable)", icon=":material/sell:"):
        st.caption(
            "Prices in USD per hour. A price you change is dated today and marked as your edit unless you "
            "set the date and source yourself. Add a row for an instance type that is missing (its shape, "
            "links and prices: save before switching columns); a stored row keeps its name. A row you edit "
            "or add is yours (origin user): `stash instances import` never overwrites it."
        )
        before = load(views.recommend.instance_catalog)
        # One group of columns at a time, so that every column is in view (save before switching).
        group = st.segmented_control(
            "Columns", list(views.recommend.CATALOG_GROUPS), default="Shapes", key="rec-catalog-columns",
            persist_state="session"
        )
        shown = before[views.recommend.CATALOG_GROUPS[group or "Shapes"]]
        options = {"column_config": views.labels.labelled_config(shown.columns)}
        fit_to_page(shown, options, editor=True)
        edited = st.data_editor(
            shown, num_rows="add", key=f"rec-catalog-editor-{group}", width="stretch", disabled=["origin"],
            **options,
        )  # fmt: skip
        after = views.recommend.with_catalog_edits(before, edited)
        if st.button("Save catalog changes", icon=":material/save:", key="rec-catalog-save"):
            try:
                saved = views.recommend.save_catalog_edits(current_db(), before, after)
            except StashError as exc:  # a bad value: say which, keep the page
                said = views.recommend.in_catalog_words(in_page_words(str(exc), WORDS))
                st.error(plain(said), icon=":material/error:")
                return
            st.success(f"Saved {len(saved.changed)} changed and {len(saved.added)} new instance(s).")
            for warning in saved.warnings:  # stored as given: each may be meant
                said = views.recommend.in_catalog_words(in_page_words(warning, WORDS))
                st.warning(plain(said), icon=":material/warning:")


def main() -> None:
    page_header(
        "Recommend",
        "The cheapest instance type, count and workers that train a model within a time budget. Measured "
        "profiles where they exist; elsewhere predicted from the model's FLOPs and the GPU's specs, each "
        "with its own expected error or marked unvalidated. Communication from published NCCL bandwidths "
        "and DDP's overlap, checked on held-out multi-GPU figures; CPU and disk stalls are not predicted "
        "without a profile.",
    )
    catalog_editor()
    request = request_form()
    if request is None:
        st.info("Describe the training job and press Recommend.", icon=":material/info:")
    if not isinstance(request, RecommendRequest):
        return
    with st.spinner("Evaluating configurations…"):
        result = load(views.recommend.recommendation, request)
    show_result(result)


# The command's options in this page's words.
# fmt: off
WORDS = {
    "raise --budget-hours or allow more instances (--max-instances)":
        "raise the time budget or the most instances of one type",
    ", or use more GPUs of each (--workers-per-instance)": ", or use more GPUs per instance",
    "(set one with `stash instances set`)": "(set one in the instance catalog at the top of the page)",
    "(--accelerator-count N)": "(its accelerator_count)", "(--accelerator NAME)": "(its accelerator)",
    "profile the job there with --instance ": "profile the job there, the Run page's Instance label set to ",
    "change it with `stash instances set`": "change its row instead",
    "(give --interconnect ": "(set its interconnect in the Links columns to ",
    "(listed with --all)": "(in the download of all configurations)",
    "see `stash models`, or give a user model as": "choose one from the Model list, or type a user model as",
    "batch_size: ": "Batch size per worker: ",  # the API's argument names as the form's fields
    "dataset_images: ": "Samples in one epoch: ", "budget_hours: ": "Time budget: ",
    "epochs: ": "Epochs: ", "max_usd: ": "Cost limit: ", "raise --budget-hours": "raise the time budget",
    "max_instances: ": "Most instances of one type: ",
    "workers_per_instance: ": "GPUs used per instance: ",
    "--optimizer-impl": "Optimizer implementation", "--optimizer": "Optimizer",  # the job's habits' fields
    "--memory-format": "Memory format", "--attention": "Attention",
    "give budget_hours (a time budget), max_usd (a cost limit) or both":
        "give a time budget, a cost limit or both (0 means none)",
}
# fmt: on

with page_guard(WORDS):
    main()
