"""Forwards that check a model before anything is measured: on the meta device where the model allows it (no
computing, no weights touched), else for real on a batch small enough to cost nothing."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass

import torch
from torch import nn

from stash_core.errors import UsageError
from stash_core.zoo.compiler_guards import compiler_unimported
from stash_core.zoo.outputs import has_loss, logits_of
from stash_core.zoo.user import one_line

PROBE_BATCH = 2  # not 1: BatchNorm in training mode refuses a single value per channel


def probe_input(
    kind: str, shape: tuple[int, ...], device: torch.device, batch: int = PROBE_BATCH
) -> torch.Tensor:
    if kind == "tokens":  # id 0 is valid for every vocabulary
        return torch.zeros((batch, *shape), dtype=torch.long, device=device)
    return torch.zeros((batch, *shape), device=device)


def meta_forward(model: nn.Module, kind: str, shape: tuple[int, ...], batch: int = PROBE_BATCH) -> object:
    """The model's output for a batch on the meta device: checks the shapes fit without computing or touching
    weights."""
    state = {
        name: torch.empty_like(tensor, device="meta")
        for name, tensor in [*model.named_parameters(), *model.named_buffers()]
    }
    inputs = probe_input(kind, shape, torch.device("meta"), batch)
    try:
        with compiler_unimported():  # batch norm's meta kernel would import torch._dynamo (seconds): no need
            return torch.func.functional_call(model, state, (inputs,))
    except Exception:  # a model that reaches for the compiler itself: the same forward with it loaded
        return torch.func.functional_call(model, state, (inputs,))


def check_trains_at(model: nn.Module, name: str, kind: str, shape: tuple[int, ...], batch: int) -> None:
    """UsageError when the model cannot take a training forward at a worker's batch (a BatchNorm left one
    value per channel at a batch of 1), said before any run starts rather than by the first run's failure.
    Checked on the meta device; a model that needs real tensors runs for real only at a batch of at most
    PROBE_BATCH, which costs no more than the build's own probe (a larger batch fails no such check)."""
    with _training(model):
        try:
            output = meta_forward(model, kind, shape, batch)
        except Exception:
            output = None  # not on meta, or not at this batch: a real forward tells which, where it is cheap
        if output is not None:
            _check_trained_output(name, output)
            return
        first = next(model.parameters(), None)
        if batch > PROBE_BATCH or (first is not None and first.device.type == "meta"):
            return
        device = first.device if first is not None else torch.device("cpu")
        # copies of the buffers: a training forward updates BatchNorm's statistics, the model keeps its own
        buffers = {key: buffer.clone() for key, buffer in model.named_buffers()}
        inputs = probe_input(kind, shape, device, batch)
        try:
            with torch.no_grad():
                output = torch.func.functional_call(model, buffers, (inputs,))
        except Exception as exc:
            raise UsageError(
                f"model {name} cannot take a training step at a batch of {batch} per worker (--batch-size), "
                f"input {','.join(map(str, shape))}: {one_line(exc)}"
            ) from None
        _check_trained_output(name, output)


def _check_trained_output(name: str, output: object) -> None:
    """UsageError when what the model returns in training mode has nothing to train on: a model may return
    another form in eval mode (an Inception's auxiliary logits beside its own), which the build checked."""
    if logits_of(output) is None and not has_loss(output):
        raise UsageError(
            f"model {name} returns a {type(output).__name__} in training mode, with neither logits nor loss: "
            "Stash trains on a logits tensor, or a dict or dataclass (a namedtuple too) with a `logits` or "
            "`loss` field"
        )


# Modules that compute on floating-point tensors only: one fed integer token ids fails for real, but not on
# the meta device, whose kernels do not check types. An embedding takes integer ids only.
FLOAT_ONLY = (nn.Linear, nn.modules.conv._ConvNd, nn.LayerNorm, nn.modules.batchnorm._NormBase, nn.RNNBase)
IDS_ONLY = (nn.Embedding, nn.EmbeddingBag)


@dataclass(frozen=True)
class Mistyped:
    module: str  # "name (Type)"
    wants: str  # "floats" | "ids"
    recurrent: bool  # an RNN, LSTM or GRU: it takes a sequence of feature vectors


@contextlib.contextmanager
def mistyped_inputs(model: nn.Module) -> Iterator[list[Mistyped]]:
    """Collects the modules a forward feeds an input of the wrong kind: integer ids into a float-only
    module (a model of feature vectors given token ids), floats into an embedding (a token model given
    images). Only torch's own classes: a subclass may take other inputs in a forward of its own (Hugging
    Face's OPT embeds positions from a float attention mask)."""
    found: list[Mistyped] = []

    def check(module: nn.Module, args: tuple, name: str) -> None:
        first = args[0] if args else None  # the input; later arguments may be masks or states
        floats = isinstance(module, FLOAT_ONLY)
        if isinstance(first, torch.Tensor) and first.is_floating_point() != floats:
            what = f"{name or 'the model'} ({type(module).__name__})"
            found.append(Mistyped(what, "floats" if floats else "ids", isinstance(module, nn.RNNBase)))

    hooks = [
        module.register_forward_pre_hook(lambda module, args, name=name: check(module, args, name))
        for name, module in model.named_modules()
        if isinstance(module, FLOAT_ONLY + IDS_ONLY) and type(module).__module__.startswith("torch.nn.")
    ]
    try:
        yield found
    finally:
        for hook in hooks:
            hook.remove()


@contextlib.contextmanager
def _training(model: nn.Module) -> Iterator[None]:
    """The model in training mode, as a worker trains it, then each module back in the mode it was in."""
    modes = [(module, module.training) for module in model.modules()]
    model.train()
    try:
        yield
    finally:
        for module, training in modes:
            module.training = training
