"""What a recommendation's model is: one it can be made for, the input shapes of its job, its kind."""

from __future__ import annotations

from pathlib import Path

from stash_core.decide.predict.script import refuse_profiled_script
from stash_core.decide.predict.step_cost import StepCost, model_input, step_cost
from stash_core.errors import UsageError
from stash_core.habits import TrainingJob
from stash_core.store.reads import stored_model_counts
from stash_core.zoo_names import ZOO_NAMES, close_zoo_names


def check_model(db_path: Path | str, model: str) -> None:
    """UsageError unless `model` is one a recommendation can be made for: a zoo model, a user model
    (FILE.py:FACTORY, package.module:FACTORY) or a model with stored profiles."""
    name = str(model or "").strip()
    refuse_profiled_script(name)
    if ":" in name or (name and stored_model_counts(db_path, name) is not None):
        return
    if name.lower() not in ZOO_NAMES:
        raise UsageError(
            f"model {name!r} is not in the zoo and has no stored profile{close_zoo_names(name)}: see `stash "
            "models`, or give a user model as FILE.py:FACTORY"
        )


def job_shapes(
    model: str, input_shape: tuple[int, ...] | None
) -> tuple[tuple[int, ...] | None, tuple[int, ...] | None]:
    """(the input shape the job trains with: the one given, else the model's default; the model's default),
    None for a model known only by its stored profiles. UsageError for a shape the model cannot take."""
    given = tuple(input_shape) if input_shape else None
    if ":" not in model and model.strip().lower() not in ZOO_NAMES:
        return given, None
    shape = model_input(model, given).input_shape if given else None
    try:
        default = model_input(model).input_shape
    except UsageError:
        if shape is None:
            raise
        default = None  # a model that cannot take the default (a token model built in 16 bits): none ran it
    return shape or default, default


def model_kind(model: str, habits: TrainingJob, input_shape: tuple[int, ...] | None = None) -> str:
    """The model's kind, "image" or "tokens": what it takes (a zoo model's from the registry, a file's from
    building it with the input shape given: a one-number shape makes it a token model). A model known only by
    its stored profiles has the zoo's habits, whichever kind it is."""
    buildable = ":" in model or model.strip().lower() in ZOO_NAMES
    if not buildable and habits.optimizer is None and habits.is_default(""):
        return "image"  # nothing to build (the zoo would only say it does not know the name)
    try:
        return model_input(model, input_shape).kind
    except UsageError as error:
        if habits.optimizer is None and habits.is_default(""):
            return "image"
        raise UsageError(
            f"--memory-format, --optimizer and --attention need a model Stash can build: {error}"
        ) from None


def built_in_16_bits(model: str, batch_size: int, shape: tuple[int, ...] | None) -> bool:
    """Whether a model file's model was built in bfloat16 or float16 (it trains so, whatever precision is
    asked: features.run_precision); the zoo's are FP32, and one known only by its profiles is taken so."""
    if ":" not in model:
        return False
    cost = counted_step(model, batch_size, shape)
    return bool(cost and cost.half_weights)


def counted_step(model: str, batch_size: int, shape: tuple[int, ...] | None) -> StepCost | None:
    """The job's step, counted once a process (step_cost's cache); None for a model known only by its
    profiles."""
    try:
        return step_cost(model, batch_size, shape)
    except UsageError:
        return None
