"""build_model: a zoo name or a user factory -> (model, ModelInfo), with every user mistake a UsageError."""

from __future__ import annotations

import contextlib
import operator
from collections.abc import Callable, Iterable

import psutil
import torch
from torch import nn

from stash_core.errors import UsageError, UserCodeLimitError
from stash_core.spec_parse import parse_input_shape
from stash_core.zoo.compiler_guards import compiler_unimported
from stash_core.zoo.contained import contained
from stash_core.zoo.info import ModelInfo, describe
from stash_core.zoo.outputs import config_vocab_size, has_loss, logits_of, loss_of
from stash_core.zoo.probe import (
    IDS_ONLY,
    PROBE_BATCH,
    Mistyped,
    check_trains_at,
    meta_forward,
    mistyped_inputs,
    probe_input,
)
from stash_core.zoo.registry import ZOO
from stash_core.zoo.user import call_user_factory, one_line
from stash_core.zoo_names import close_zoo_names, refuse_other_input, refuse_script_name

DEFAULT_IMAGE_SHAPE = (3, 224, 224)
DEFAULT_SEQ_LEN = 128
DEFAULT_IMAGE_CLASSES = 1000
DEFAULT_TOKEN_CLASSES = 2
DEFAULT_VOCAB_SIZE = 30522


class ModelForwardError(UsageError):
    """A user model's own forward raised on the test batch: `cause` is its error, one line. Here the input
    shape may be why; in a worker, whose model this check passed before the launch, it is not (that rank's
    own code raised)."""

    ref = ""
    cause = ""  # attributes, not arguments: the error is pickled back from a contained child (contained.py)


def list_models() -> list[str]:
    """Names of the zoo's models, sorted."""
    return sorted(ZOO)


def format_shape(shape: Iterable[int]) -> str:
    return ",".join(str(size) for size in shape)


def check_input_shape(shape: Iterable[int] | str) -> tuple[int, ...]:
    if isinstance(shape, str):  # "3,224,224" straight from a flag or a form: the spec's parser and bounds
        return tuple(parse_input_shape(shape))
    try:
        sizes = tuple(operator.index(size) for size in shape)
    except TypeError:
        raise UsageError(f"input shape must be whole numbers; got {shape!r}") from None
    if not sizes or any(size <= 0 for size in sizes):
        raise UsageError(
            f"input shape must be one or more positive numbers; got {format_shape(sizes) or '()'}"
        )
    return sizes


def check_num_classes(num_classes: int | None) -> int | None:
    if num_classes is None:
        return None
    if isinstance(num_classes, bool):
        raise UsageError(f"num_classes must be a positive whole number; got {num_classes!r}")
    try:
        classes = operator.index(num_classes)
    except TypeError:
        raise UsageError(f"num_classes must be a positive whole number; got {num_classes!r}") from None
    if classes <= 0:
        raise UsageError(f"num_classes must be at least 1; got {classes}")
    return classes


def build_model(
    ref: str,
    num_classes: int | None = None,
    input_shape: tuple[int, ...] | None = None,
    train_batch: int | None = None,
) -> tuple[nn.Module, ModelInfo]:
    """Build a zoo model or a user factory's model (on the default device, normally the CPU) and count it.
    With `train_batch` (a worker's batch), a model that cannot take a training step at it is refused too."""
    num_classes = check_num_classes(num_classes)
    shape = None if input_shape is None else check_input_shape(input_shape)
    name = str(ref).strip()
    refuse_script_name(name)
    if name.lower() in ZOO:
        return _checked(*_build_zoo(name.lower(), num_classes, shape), train_batch)
    if ":" in name:
        return _checked(*_build_user(name, num_classes, shape), train_batch)
    if name.endswith(".py"):
        raise UsageError(f"name the factory in the model file: {name}:FACTORY")
    raise UsageError(
        f"unknown model {name!r}{close_zoo_names(name)}; give a zoo model name or path/to/file.py:FACTORY"
    )


def _checked(model: nn.Module, info: ModelInfo, train_batch: int | None) -> tuple[nn.Module, ModelInfo]:
    """The model, checked for training as a profile trains it (`train_batch`: a worker's batch)."""
    if train_batch is not None:
        if info.kind == "tokens":
            _refuse_sparse_gradients(info.name, model)
        check_trains_at(model, info.name, info.kind, info.input_shape, train_batch)
    return model, info


def describe_model(
    ref: str, num_classes: int | None = None, input_shape: tuple[int, ...] | None = None
) -> ModelInfo:
    """ModelInfo without allocating weights: built on the meta device (a user model may fall back to CPU)."""
    # A zoo model's constructors initialise embeddings through guarded kernels that would import torch's
    # compiler (~1.3 CPU-s, paid by `stash models`, recommend, fit, spot-memory); zoo models compile
    # nothing. A user factory is built with the compiler importable (it may call torch.compile itself).
    refuse_script_name(str(ref).strip())
    in_zoo = str(ref).strip().lower() in ZOO
    if not in_zoo and ":" in str(ref):  # a user's factory: its code runs in a child process (contained.py)
        return contained(f"model factory {str(ref).strip()}", _described, ref, num_classes, input_shape)
    return _described(ref, num_classes, input_shape)


def _described(ref: str, num_classes: int | None, input_shape: tuple[int, ...] | None) -> ModelInfo:
    in_zoo = str(ref).strip().lower() in ZOO
    try:
        with torch.device("meta"), compiler_unimported() if in_zoo else contextlib.nullcontext():
            return build_model(ref, num_classes, input_shape)[1]
    except UserCodeLimitError:
        raise  # past its time limit, or exiting: a real build would do the same
    except UsageError:
        if in_zoo:  # zoo models are meta-safe: the error is the user's
            raise
        # A user factory may need real tensors (e.g. loads weights); a real build gives the true answer.
        return build_model(ref, num_classes, input_shape)[1]


def _build_zoo(
    name: str, num_classes: int | None, shape: tuple[int, ...] | None
) -> tuple[nn.Module, ModelInfo]:
    entry = ZOO[name]
    if entry.kind == "image":
        shape = shape or DEFAULT_IMAGE_SHAPE
        refuse_other_input(name, shape)
        if min(shape[1:]) < entry.min_image_side:
            side = entry.min_image_side
            raise UsageError(
                f"{name} needs images of at least {side}x{side} pixels; got input shape {format_shape(shape)}"
            )
        classes = num_classes or DEFAULT_IMAGE_CLASSES
        # a 10,000,000-class head is 20 GB of weights: refused, not an allocator's traceback
        check_fits_machine(name, lambda: entry.factory(num_classes=classes, in_channels=shape[0]))
        model = entry.factory(num_classes=classes, in_channels=shape[0])
    else:
        shape = shape or (entry.default_seq_len or DEFAULT_SEQ_LEN,)
        refuse_other_input(name, shape)
        if entry.max_seq_len is not None and shape[0] > entry.max_seq_len:
            raise UsageError(f"{name} takes sequences of at most {entry.max_seq_len} tokens; got {shape[0]}")
        if entry.causal_lm:
            if num_classes is not None and num_classes != entry.vocab_size:
                raise UsageError(
                    f"{name} predicts the next token over its {entry.vocab_size:,}-token vocabulary; "
                    "it takes no number of classes"
                )
            classes = entry.vocab_size
        else:
            classes = num_classes or DEFAULT_TOKEN_CLASSES
        check_fits_machine(name, lambda: entry.factory(num_classes=classes))
        model = entry.factory(num_classes=classes)
    return model, describe(model, name, entry.kind, shape, classes, entry.vocab_size)


def check_fits_machine(name: str, make: Callable[[], nn.Module]) -> None:
    """UsageError when the model `make` builds would not fit this machine's free memory (unless it is built
    on the meta device, which allocates nothing): a 7B model is refused, not swapped to death. Where there is
    no GPU it trains in that memory, which holds at the least its FP32 weights, their gradients and SGD's
    momentum (zoo/batches.py); with a GPU the host holds the weights as they are built."""
    if torch.empty(0).is_meta:
        return
    with torch.device("meta"), compiler_unimported():  # (meta embeddings initialise through a guard)
        weights_bytes = 4 * sum(param.numel() for param in make().parameters())
    available_bytes = psutil.virtual_memory().available
    trains_here = not torch.cuda.is_available()
    if (needed_bytes := (TRAINING_COPIES if trains_here else 1) * weights_bytes) > available_bytes:
        what = (f"to train (its {weights_bytes / 1e9:.1f} GB of FP32 weights, their gradients and the "
                "optimizer's momentum)" if trains_here else "for its FP32 weights alone")  # fmt: skip
        raise UsageError(
            f"{name} needs {needed_bytes / 1e9:.1f} GB {what} and this machine has "
            f"{available_bytes / 1e9:.1f} GB free; `stash predict` and `stash recommend` need no weights"
        )


TRAINING_COPIES = 3  # weights, gradients, momentum: what every training step keeps, before activations


def _build_user(
    ref: str, num_classes: int | None, shape: tuple[int, ...] | None
) -> tuple[nn.Module, ModelInfo]:
    shape = shape or DEFAULT_IMAGE_SHAPE
    kind = "tokens" if len(shape) == 1 else "image"
    default_classes = DEFAULT_TOKEN_CLASSES if kind == "tokens" else DEFAULT_IMAGE_CLASSES
    model, passed_classes = call_user_factory(ref, num_classes, default_classes)  # else the factory's own
    if not any(parameter.requires_grad for parameter in model.parameters()):
        raise UsageError(f"model {ref} has no trainable parameters: an optimizer would have nothing to train")
    if kind == "image":
        _refuse_low_precision(ref, model)
    vocab_size = _token_vocab_size(ref, model) if kind == "tokens" else None
    classes = _output_classes(ref, _probe_user(ref, model, kind, shape))
    if classes is None:  # could not check; trust what we were told
        classes = num_classes or getattr(model, "num_classes", None) or default_classes
    elif num_classes is not None and classes != num_classes:
        how = "was given" if passed_classes else "does not take num_classes but was asked for"
        raise UsageError(f"model {ref} {how} num_classes={num_classes} and returns {classes} classes")
    return model, describe(model, ref, kind, shape, classes, vocab_size)


def _refuse_low_precision(ref: str, model: nn.Module) -> None:
    """Stash's image batches are float32: an image model with bfloat16 or float16 weights would fail its first
    run on a dtype mismatch. (A token model takes integer ids and trains as built; it is measured so.)"""
    dtypes = sorted(
        {
            str(parameter.dtype).removeprefix("torch.")
            for parameter in model.parameters()
            if parameter.requires_grad and parameter.is_floating_point() and parameter.dtype != torch.float32
        }
    )
    if dtypes:
        raise UsageError(
            f"model {ref} has {', '.join(dtypes)} parameters and Stash's image batches are float32: build it "
            "in float32 (mixed precision is `stash predict --precision amp`)"
        )


def _refuse_sparse_gradients(ref: str, model: nn.Module) -> None:
    """A profile trains a token model with AdamW (habits.optimizer_name), which refuses the sparse gradients
    of an embedding built with sparse=True: the first run would fail at its first optimizer step. (A
    prediction may be of a job that trains it with SGD.)"""
    sparse = [
        name or "the model"
        for name, module in model.named_modules()
        if isinstance(module, IDS_ONLY) and module.sparse and module.weight.requires_grad
    ]
    if sparse:
        raise UsageError(
            f"model {ref} has an embedding with sparse=True ({', '.join(sparse[:3])}): Stash trains token "
            "models with AdamW, which takes no sparse gradients; build it with sparse=False"
        )


def _token_vocab_size(ref: str, model: nn.Module) -> int:
    """The ids' range: the vocab_size the model declares, else the rows of its first embedding (the token
    table comes first in most models; ids below its size index it whatever it is), else the default."""
    vocab_size = config_vocab_size(model, None)
    if vocab_size is None:
        vocab_size = _first_embedding_rows(model) or DEFAULT_VOCAB_SIZE
    if isinstance(vocab_size, bool) or not isinstance(vocab_size, int) or vocab_size <= 0:
        raise UsageError(f"model {ref} has vocab_size={vocab_size!r}; it must be a positive whole number")
    return vocab_size


def _first_embedding_rows(model: nn.Module) -> int | None:
    for module in model.modules():  # in the order they were registered
        if isinstance(module, IDS_ONLY):
            return module.num_embeddings
    return None


def _output_classes(ref: str, output: object) -> int | None:
    """The classes of the model's output for a probe batch; None where it was not checked or holds only a
    loss."""
    if output is None:
        return None
    loss = loss_of(output)
    if loss is not None and loss.numel() != 1:
        raise UsageError(
            f"model {ref} returns a loss of shape {tuple(loss.shape)}; the loss it returns is "
            "back-propagated, so it must be one number"
        )
    logits = logits_of(output)
    if logits is None:
        return None
    if loss is not None:  # its own loss is what trains: logits of any rank (a language model's per token)
        return int(logits.shape[-1]) if logits.dim() else None
    if logits.dim() != 2 or logits.shape[0] != PROBE_BATCH:
        raise UsageError(
            f"model {ref} must return logits of shape (batch, classes); for a batch of {PROBE_BATCH} "
            f"it returned shape {tuple(logits.shape)}"
        )
    return int(logits.shape[1])


def _refuse_mistyped_input(ref: str, kind: str, shape: tuple[int, ...], found: Mistyped) -> None:
    """A one-number shape is a sequence of token ids, any other float tensors: a model that computes on ids
    as floats (an MLP of feature vectors) would fail its first run on the types (meta kernels do not check
    them), and one that embeds floats fails with torch's words about indices."""
    given = f"input shape {format_shape(shape)}"
    if found.wants == "ids":
        raise UsageError(
            f"model {ref} embeds token ids in its module {found.module}, but {given} feeds it floats: a "
            "token model takes its sequence length, e.g. --input-shape 128"
        )
    if kind != "tokens":  # the model made integers of its float input itself
        raise UsageError(f"model {ref} feeds integers to its module {found.module}, which computes on floats")
    length = shape[0]
    works = (
        "--input-shape L,F (a sequence of L vectors of F features)"
        if found.recurrent
        else f"--input-shape 1,1,{length} (one channel, one row) and flatten the input in the model"
    )
    raise UsageError(
        f"model {ref} takes --input-shape {length} as {length} token ids (integers), but its module "
        f"{found.module} computes on floats: for a model of float feature vectors give {works}"
    )


def _probe_user(ref: str, model: nn.Module, kind: str, shape: tuple[int, ...]) -> object:
    """The output for a small batch: a meta forward if the model allows one, else a real one in eval mode;
    None where neither can run (a model on the meta device that fails there)."""
    mistyped: list[Mistyped] = []
    try:
        with mistyped_inputs(model) as mistyped:
            output = meta_forward(model, kind, shape)
    except Exception:
        output = None  # many user models work on meta; for the others, one real forward tells the truth
    if mistyped:  # seen before the forward failed, or where meta's kernels let it pass (they check no types)
        _refuse_mistyped_input(ref, kind, shape, mistyped[0])
    if output is not None and (logits_of(output) is not None or has_loss(output)):
        return output
    first = next(model.parameters(), None)
    device = first.device if first is not None else torch.device("cpu")
    if device.type == "meta":
        return None
    was_training = model.training
    try:
        model.eval()
        with torch.no_grad():
            output = model(probe_input(kind, shape, device))
    except Exception as exc:
        error = ModelForwardError(f"model {ref} fails on input shape {format_shape(shape)}: {one_line(exc)}")
        error.ref, error.cause = ref, one_line(exc)
        raise error from None
    finally:
        model.train(was_training)
    if logits_of(output) is None and not has_loss(output):
        raise UsageError(
            f"model {ref} must return logits (a tensor, or an output with .logits or .loss); "
            f"it returned a {type(output).__name__}"
        )
    return output
