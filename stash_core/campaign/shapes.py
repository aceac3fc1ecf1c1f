"""The input shape each model of a campaign is profiled with: `--input-shape` once (every model takes it), or
twice, an image shape (C,H,W) and a sequence length, each model taking the one of its kind, so that one
campaign sweeps image and token models together.

Settings carry the shapes as text, "3,64,64" or "3,64,64;128" (what the child process and a plan file hold).
"""

from __future__ import annotations

import functools

from stash_core.errors import UsageError
from stash_core.spec_parse import parse_input_shape
from stash_core.zoo_names import SCRIPT_PREFIX, TOKEN_MODELS, ZOO_NAMES

SHAPES_SEPARATOR = ";"
TWO_KINDS = "--input-shape given twice is one C,H,W for image models and one sequence length for token models"


def shapes_text(given: list[str] | None) -> str | None:
    """The settings' text of the --input-shape texts given (None for none), refusing more than one of a
    kind."""
    if not given:
        return None
    shapes = [parse_input_shape(text) for text in given]
    kinds = [len(shape) == 1 for shape in shapes]
    if len(shapes) > 2 or len(set(kinds)) != len(kinds):
        given = " and ".join(",".join(map(str, shape)) for shape in shapes)
        raise UsageError(f"{TWO_KINDS} (got {given})")
    return SHAPES_SEPARATOR.join(",".join(map(str, shape)) for shape in shapes)


def given_shapes(text: str | None) -> list[tuple[int, ...]]:
    """The shapes of the settings' text: [] for none."""
    return [tuple(parse_input_shape(part)) for part in (text or "").split(SHAPES_SEPARATOR) if part.strip()]


def shape_for(model: str, text: str | None) -> tuple[int, ...] | None:
    """The shape `model` is profiled with: the one given, or of two the one of its kind; None: its own."""
    shapes = given_shapes(text)
    if len(shapes) < 2:
        return shapes[0] if shapes else None
    tokens = takes_tokens(model)
    if tokens is None:
        raise UsageError(f"{model}: cannot tell whether it takes images or token ids (its factory fails, or "
                         "it is a script); give one --input-shape")  # fmt: skip
    return next(shape for shape in shapes if (len(shape) == 1) == tokens)


def takes_tokens(model: str) -> bool | None:
    """Whether a model takes token ids (one sequence length) rather than images; None where unknown."""
    name = model.strip().lower()
    if name in ZOO_NAMES:
        return name in TOKEN_MODELS
    shape = model_defaults(model)[0]  # a user's factory: built once for the plan's every question
    return None if shape is None else len(shape) == 1


@functools.cache
def model_defaults(model: str) -> tuple[tuple[int, ...] | None, int | None]:
    """(input shape, classes) a model is built with when none are given; (None, None) for one that cannot be
    described here (a script, a model file that fails): a stored run of its defaults then covers nothing."""
    if model.startswith(SCRIPT_PREFIX):
        return None, None
    from stash_core.zoo import describe_model

    try:
        info = describe_model(model)
    except Exception:  # noqa: BLE001 - any failure of a user's factory: no defaults known
        return None, None
    return tuple(info.input_shape), info.num_classes
