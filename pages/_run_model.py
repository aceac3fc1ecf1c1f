"""The Run page's model fields: a zoo model, a model file (on this machine or uploaded), or the user's own
training script with its arguments and the folder of its data; and its whole-number fields."""

import threading
from pathlib import Path
from typing import Any

import streamlit as st

from pages._fields import WHOLE, as_typed
from pages._shared import current_db, load
from stash_core import views
from stash_core.errors import UsageError
from stash_core.spec import default_of
from stash_core.userfiles import save_model_file
from stash_core.views.common import plain
from stash_core.views.run_form import RunForm, number_range

MODEL_SOURCES = {"zoo": "Model zoo", "file": "Python file on this machine", "upload": "Upload a Python file",
                 "script": "Your training script"}  # fmt: skip


@st.cache_resource(show_spinner=False)
def _zoo_loader() -> dict:
    """Load the zoo's names in the background: listing them imports torch, which takes seconds."""
    box: dict = {}

    def load() -> None:
        try:
            box["names"] = views.run_form.zoo_models()
        except Exception as exc:  # shown as a caption; a model name can still be typed
            box["error"] = f"{type(exc).__name__}: {exc}"

    threading.Thread(target=load, name="stash-zoo-names", daemon=True).start()
    return box


def zoo_models() -> tuple[list[str], bool]:
    """(names to offer, complete?): the zoo once loaded, else the models the database knows."""
    box = _zoo_loader()
    if "names" in box:
        return box["names"], True
    known = list(load(views.breakdown.model_names))
    return [name for name in known if "/" not in name] or ["resnet18"], False


def script_fields() -> dict:
    """A training script on this machine or uploaded, its own arguments, and the folder of its data."""
    where = st.radio(
        "Script",
        ["path", "upload"],
        horizontal=True,
        key="run-script-src",
        persist_state="session",
        format_func={"path": "On this machine", "upload": "Upload"}.get,
    )
    script = ""
    if where == "path":
        script = st.text_input(
            "Training script",
            placeholder="train.py",
            key="run-script",
            persist_state="session",
            help="Run unmodified under torchrun; relative to the dashboard's folder",
        )
    else:
        uploaded = st.file_uploader("Training script (.py)", type=["py"], key="run-script-upload")
        kept = _kept(uploaded, st)
        script = str(kept) if kept is not None else ""
    script_args = st.text_input(
        "Script arguments",
        placeholder="--epochs 1 --lr 3e-4",
        key="run-script-args",
        persist_state="session",
        help="What follows -- on the command line, quoted as in a shell",
    )
    data_dir = st.text_input(
        "Folder of the data it reads (optional)",
        key="run-data-dir",
        persist_state="session",
        help="For separate CPU and disk stalls; without it they are one input pipeline",
    )
    return {"use_script": True, "script": script.strip(), "script_args": script_args, "data_dir": data_dir}


def model_field() -> tuple[str, dict]:
    """The model reference, or the training script's fields ({} for a model)."""
    source = st.radio(
        "Model", list(MODEL_SOURCES), format_func=MODEL_SOURCES.get, horizontal=True, key="run-model-src",
        persist_state="session"
    )
    if source == "script":
        return "", script_fields()
    return _model_reference(source), {}


def _model_reference(source: str) -> str:
    if source == "zoo":
        names, complete = zoo_models()
        default = names.index("resnet18") if "resnet18" in names else 0
        choice = st.selectbox(
            "Zoo model",
            names,
            index=default,
            key="run-zoo-model",
            persist_state="session",
            accept_new_options=True,
            help="Pick one or type a zoo name (e.g. resnet50, vgg16, bert_base).",
        )
        if not complete:
            st.caption("Loading the full list of zoo models… (type a name meanwhile)")
        return choice or ""
    if source == "file":
        return st.text_input(
            "Model file and factory",
            placeholder="examples/models/tiny_cnn.py:make",
            key="run-model-file",
            persist_state="session",
            help="FILE.py:FACTORY - a function returning a torch.nn.Module; "
            "relative paths are relative to the folder the dashboard runs in.",
        )
    left, right = st.columns([3, 1])
    uploaded = left.file_uploader("Model file (.py)", type=["py"], key="run-model-upload")
    factory = right.text_input("Factory function", value="make", key="run-model-factory",
                               persist_state="session")
    path = _kept(uploaded, left)
    return "" if path is None else f"{path}:{factory.strip()}"


def _kept(uploaded, place) -> Path | None:
    """The kept copy of an uploaded Python file (a Path), or None: none uploaded, or one that is not valid
    Python, said under its uploader (the rest of the form stays)."""
    if uploaded is None:
        return None
    try:
        return save_model_file(current_db(), uploaded.name, uploaded.getvalue())
    except UsageError as exc:
        place.error(plain(exc), icon=":material/error:")
        return None


def number_field(
    place: Any, label: str, attr: str, first: int | None = None, key: str = "", help: str | None = None
) -> int | float:
    """A number input for spec field `attr`, with its default unless the spec has none (then `first`).
    It has no bounds of its own: Streamlit would keep the last value in range while showing the one typed,
    and start a profile with a value nobody sees. Nor is it a whole-number input: the browser would read
    2.5 as 2 and 1e12 as 1. What is typed is checked by the spec's rules on Start
    (views.run_form.profile_args), and the range (number_range) is said in the help."""
    low, high = number_range(attr)
    value = float(default_of(attr) if first is None else first)
    said = f"{low:,} to {high:,}"
    typed = place.number_input(label, value=value, key=key, persist_state="session",
                               help=f"{help}; {said}" if help else said, **WHOLE)  # fmt: skip
    return as_typed(typed)


def target_field(place: Any) -> float:
    """The target interval in percent (checked on Start: views.run_form), the spec's default first."""
    return place.number_input(
        "Target interval (± %)", value=RunForm.target_ci_pct, format="%g", key="run-target",
        persist_state="session", help="the 95% interval's half-width that 'auto' and the rounds seek, as a "
        "share of each stall; a busy machine may need ±10% or more within the time limit",
    )  # fmt: skip
