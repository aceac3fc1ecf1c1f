"""What a profile runs on: its data set and its model's description (the classifier sized to the data set's
classes), and the folder its cold run reads, where --disk-read-mbps is checked before anything runs."""

from __future__ import annotations

from collections.abc import Collection
from pathlib import Path

import torch

from stash_core.engine.data_setup import DataSetup, prepare_data
from stash_core.engine.progress import Reporter
from stash_core.engine.script_job import script_model_info
from stash_core.errors import UsageError
from stash_core.spec import ProfileSpec, default_of
from stash_core.userfiles import nearest_existing
from stash_core.zoo import build_model
from stash_core.zoo.info import ModelInfo


def built_model(spec: ProfileSpec, typed: Collection[str] = ()) -> ModelInfo:
    """The description of the model of a spec, built (so a model that cannot be built is refused first).
    --image-px (typed on the command line, or away from its default) is refused for a token model: its
    generated data are text documents, with no side to choose. A model that cannot train at the per-worker
    batch (a BatchNorm at a batch of 1) is refused here, not by the first run's failure."""
    info = _built(spec.model, spec.num_classes, model_shape(spec), spec.batch_size)
    if info.kind == "tokens" and (spec.image_px != default_of("image_px") or "image_px" in typed):
        raise UsageError(
            f"--image-px sets the side of generated images; {spec.model} takes token ids, and its "
            "--synthetic-images are text documents"
        )
    return info


def _built(
    model: str, num_classes: int | None, input_shape: tuple[int, ...] | None, train_batch: int | None = None
) -> ModelInfo:
    """A model built in the caller's process, its weights' initialisation drawn from a generator of its own:
    a notebook seeded for reproducibility keeps its random stream (the workers seed their own)."""
    with torch.random.fork_rng(devices=[]):
        return build_model(model, num_classes, input_shape=input_shape, train_batch=train_batch)[1]


def data_and_model(spec: ProfileSpec, info, reporter: Reporter) -> tuple[DataSetup, dict]:
    """The data set and the model's description (its classifier sized to the data set's classes)."""
    if info is None:
        data = prepare_data(spec, "script", reporter)
        if data.not_separable_reason and spec.data_dir is None:
            reporter.message(f"note: {data.not_separable_reason}")
        return data, script_model_info(spec)
    data = prepare_data(spec, info.kind, reporter)
    return data, _sized_to_classes(spec, info, data.classes).to_dict()


def _sized_to_classes(spec: ProfileSpec, info, data_classes: int):
    """The model's description with its classifier sized to the data set's classes: labels must index its
    outputs, and a user's --dataset sets how many there are (its gradients, and so the communication, follow
    them) unless --num-classes says otherwise. A generated set's classes only stand in for the user's: its
    model keeps its own count when that is enough. A model that takes no class count (a language model, a
    factory without num_classes) keeps its outputs when the labels fit them."""
    if not data_classes or data_classes == info.num_classes:
        return info
    if spec.num_classes is not None:
        if data_classes > spec.num_classes:
            raise UsageError(
                f"--num-classes {spec.num_classes}: the data set has {data_classes} class folders"
            )
        return info
    if data_classes < info.num_classes and not spec.dataset:
        return info
    try:
        sized = _built(spec.model, data_classes, model_shape(spec))
    except UsageError:  # it takes no class count
        if data_classes > info.num_classes:
            raise UsageError(
                f"the data set has {data_classes} class folders and model {spec.model} returns "
                f"{info.num_classes} classes (it takes no num_classes)"
            ) from None
        return info
    spec.num_classes = data_classes
    return sized


def data_folder(spec: ProfileSpec) -> Path:
    """Where the cold run reads from, so the read cap is checked there before anything runs: --dataset, a
    script's --data-dir, else the folder of generated data sets (what of it exists yet)."""
    from stash_core.pathargs import dataset_cache_root

    if spec.dataset or spec.data_dir:
        return Path(spec.dataset or spec.data_dir)
    return nearest_existing(dataset_cache_root())


def model_shape(spec: ProfileSpec):
    return tuple(spec.input_shape) if spec.input_shape else None
