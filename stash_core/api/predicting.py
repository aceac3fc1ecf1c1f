"""`stash_core.predict()`: the predicted training-step time of a model on every catalog instance, without a
profile (`stash predict`; cli/predict.py formats what this returns).

The step model is loaded inside the function: importing the API loads no pandas; a prediction from a step
counted before loads no torch either (decide/predict/step_cache.py).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

from stash_core.api.options import (
    api_options,
    checked,
    database,
    how_it_trains,
    instance_selection,
    names,
    required,
    text_value,
)
from stash_core.api.results import Predictions
from stash_core.errors import UsageError
from stash_core.habits import TrainingJob
from stash_core.spec_parse import BATCH_SIZE, count, identifier, parse_input_shape

MAX_INSTANCE_NAMES = 1000  # as `stash predict --instances` takes them
MAX_GPU_NAMES = 100


@api_options("predict")
def predict(
    model: str | None = None,
    batch_size: int | None = None,
    *,
    script_run: str | None = None,
    input_shape: tuple[int, ...] | list[int] | str | None = None,
    instances: list[str] | str | None = None,
    workers_per_instance: int | None = None,
    max_instances: int = 1,
    gpu: list[str] | str | None = None,
    precision: str = "pytorch",
    memory_format: str = "nchw",
    optimizer: str | None = None,
    optimizer_impl: str = "foreach",
    attention: str = "fused",
    db: Path | str | None = None,
) -> Predictions:
    """Predict the training-step time of `model` at `batch_size` per GPU on catalog instances, split into
    compute, interconnect and network, each with its expected error (`stash predict`).

    Args:
        model: a zoo name ("resnet50") or FILE.py:FACTORY; or give `script_run` instead.
        batch_size: samples per worker (GPU); required with `model`.
        script_run: a run of `stash profile --script` on a GPU to scale from, instead of `model` (its batch
            and input come from the run).
        input_shape: one sample: (C, H, W) for images or (sequence length,) for tokens; default the model's.
        instances: "all" (the default) or a list of catalog instance names.
        workers_per_instance: GPUs used per instance (default all of them).
        max_instances: also 2..N instances of each type (1: one of each).
        gpu: only instances with these GPUs (names as NVML, SkyPilot or datasheets give them); with `model`
            only: refused with `script_run`, whose instances `instances` names.
        precision: "pytorch" (PyTorch's own: convolutions and recurrent layers in TF32 where the GPU
            has it, other matrix products in FP32; restated as tf32 where those layers do most of the
            matrix work, else fp32), "fp32", "tf32" (every matrix product) or "amp".
        memory_format, optimizer, optimizer_impl, attention: how the job trains, as the step model tells
            it apart ("nchw"/"channels_last"; "sgd"/"adamw"/"rmsprop"; "foreach"/"fused"/"loop";
            "fused"/"eager").
        db: the database whose catalog and profiles are used (default $STASH_DB, else ./results.duckdb).

    Returns:
        Predictions: `.to_frame()` has one row per predicted configuration (one per instance unless
        max_instances > 1); `.not_predictable` says why the others were left out.

    Raises:
        UsageError: a bad value, both or neither of model and script_run, batch_size, input_shape or gpu
            with script_run, or a model, run or instance that does not exist.
    """
    if (model is None) == (script_run is None):
        raise UsageError("predict: give one of model and script_run")
    precision, job = how_it_trains(precision, memory_format, optimizer, optimizer_impl, attention)
    common = {
        "instances": instance_selection(instances, MAX_INSTANCE_NAMES),
        "workers_per_instance": checked("workers_per_instance", workers_per_instance, count(1024)),
        "max_instances": required("max_instances", max_instances, count(64)),
        "precision": precision,
    }
    db_path = database(db)
    if script_run is not None:
        script_run = text_value("script_run", script_run, identifier)
        if batch_size is not None or input_shape is not None:
            raise UsageError(
                "--batch-size and --input-shape come from the run with --script-run; leave them out"
            )
        from stash_core.decide.predict.instances import predict_script_run

        if gpu:
            raise UsageError("--gpu selects catalog instances for --model; with --script-run use --instances")
        default = TrainingJob()
        given = [f"--{field.name.replace('_', '-')}" for field in dataclasses.fields(TrainingJob)
                 if getattr(job, field.name) != getattr(default, field.name)]  # fmt: skip
        if given:
            raise UsageError(
                f"{', '.join(given)}: for a --model job; a --script-run is scaled from what its script ran "
                "(its layout, optimizer and attention as they were): leave them out"
            )
        answer = predict_script_run(db_path, script_run, **common)
    else:
        model = text_value("model", model, identifier)
        batch_size = checked("batch_size", batch_size, BATCH_SIZE)
        if batch_size is None:
            raise UsageError("batch_size is required with model")
        shape = checked("input_shape", input_shape, parse_input_shape, many=True)
        from stash_core.decide.predict import predict_instances

        answer = predict_instances(
            db_path, model, batch_size, input_shape=tuple(shape) if shape else None,
            gpus=names("gpu", gpu, MAX_GPU_NAMES), job=job, **common,
        )  # fmt: skip
    return Predictions(
        request=answer.request, frame=answer.frame, not_predictable=answer.not_predictable,
        expected_errors=answer.expected_errors, answer=answer, profiles_set_aside=answer.profiles_set_aside,
        warnings=answer.warnings,
    )  # fmt: skip
