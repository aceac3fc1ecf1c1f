"""User models that used to pass the build's checks and fail in the first measured run (or say too little):
a language model's own loss beside 3-D logits, a vocabulary smaller than the default, bfloat16 weights, a
BatchNorm at a worker's batch of 1, a factory with required arguments."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
import torch

from stash_core.errors import UsageError
from stash_core.zoo import build_model, describe_model, loss_fn, synthetic_batch
from stash_core.zoo.build import DEFAULT_VOCAB_SIZE

LANGUAGE_MODEL = """
    import torch.nn.functional as F
    from torch import nn

    class LM(nn.Module):
        def __init__(self, vocab=50, loss_shape=()):
            super().__init__()
            self.embed, self.head, self.loss_shape = nn.Embedding(vocab, 8), nn.Linear(8, vocab), loss_shape
        def forward(self, ids):
            logits = self.head(self.embed(ids))
            loss = F.cross_entropy(logits[:, :-1].flatten(0, 1), ids[:, 1:].flatten())
            return {"loss": loss.expand(self.loss_shape), "logits": logits}

    def make():
        return LM()

    def per_token_loss():
        return LM(loss_shape=(4,))

    def logits_only():
        return nn.Sequential(nn.Embedding(50, 8), nn.Linear(8, 50))
"""


def write(path: Path, source: str) -> Path:
    path.write_text(textwrap.dedent(source))
    return path


def one_line(excinfo: pytest.ExceptionInfo[UsageError]) -> str:
    message = str(excinfo.value)
    assert "\n" not in message and "Traceback" not in message
    return message


def train_step(model: torch.nn.Module, info, batch: int) -> torch.Tensor:
    inputs, targets = synthetic_batch(info, batch, "cpu")
    loss = loss_fn(info)(model(inputs), targets)
    loss.backward()
    return loss


# --- a language model's own loss ----------------------------------------------------------------------------


@pytest.mark.parametrize("build", [build_model, describe_model])
def test_a_model_with_its_own_loss_may_return_logits_of_any_rank(tmp_path: Path, build) -> None:
    path = write(tmp_path / "lm.py", LANGUAGE_MODEL)
    result = build(f"{path}:make", input_shape=(16,))
    info = result[1] if isinstance(result, tuple) else result
    # its loss is what trains; the classes are the logits' last dimension (the vocabulary)
    assert (info.kind, info.num_classes, info.vocab_size) == ("tokens", 50, 50)


def test_a_model_with_its_own_loss_takes_a_training_step(tmp_path: Path) -> None:
    path = write(tmp_path / "lm.py", LANGUAGE_MODEL)
    model, info = build_model(f"{path}:make", input_shape=(16,))
    assert train_step(model, info, 3).dim() == 0


def test_logits_of_another_rank_without_a_loss_are_still_refused(tmp_path: Path) -> None:
    path = write(tmp_path / "lm.py", LANGUAGE_MODEL)
    with pytest.raises(UsageError) as excinfo:
        build_model(f"{path}:logits_only", input_shape=(16,))
    assert "must return logits of shape (batch, classes)" in one_line(excinfo)


def test_a_loss_that_is_not_one_number_is_refused(tmp_path: Path) -> None:
    path = write(tmp_path / "lm.py", LANGUAGE_MODEL)
    with pytest.raises(UsageError) as excinfo:
        build_model(f"{path}:per_token_loss", input_shape=(16,))
    assert one_line(excinfo) == (
        f"model {path}:per_token_loss returns a loss of shape (4,); the loss it returns is "
        "back-propagated, so it must be one number"
    )


# --- the vocabulary of a token model ------------------------------------------------------------------------

SMALL_VOCABULARY = """
    from torch import nn

    class Net(nn.Module):
        def __init__(self, num_classes=2):
            super().__init__()
            self.tokens, self.positions = nn.Embedding(100, 8), nn.Embedding(16, 8)
            self.head = nn.Linear(8, num_classes)
        def forward(self, ids):
            return self.head(self.tokens(ids).mean(1))

    class Declared(Net):
        vocab_size = 60

    class NoEmbedding(nn.Module):
        def __init__(self):
            super().__init__()
            self.head = nn.Linear(16, 2)
        def forward(self, ids):
            return self.head(ids.float())
"""


def test_a_token_model_that_declares_no_vocabulary_draws_ids_below_its_first_embedding(
    tmp_path: Path,
) -> None:
    path = write(tmp_path / "small.py", SMALL_VOCABULARY)
    model, info = build_model(f"{path}:Net", input_shape=(16,))
    assert info.vocab_size == 100
    inputs, _ = synthetic_batch(info, 256, "cpu")
    assert int(inputs.max()) < 100
    train_step(model, info, 4)  # was: IndexError: index out of range in self


def test_a_declared_vocabulary_wins_and_a_model_without_embeddings_keeps_the_default(tmp_path: Path) -> None:
    path = write(tmp_path / "small.py", SMALL_VOCABULARY)
    assert build_model(f"{path}:Declared", input_shape=(16,))[1].vocab_size == 60
    assert build_model(f"{path}:NoEmbedding", input_shape=(16,))[1].vocab_size == DEFAULT_VOCAB_SIZE


# --- weights that are not float32 ---------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
@pytest.mark.parametrize("build", [build_model, describe_model])
def test_a_model_with_half_precision_weights_is_refused_in_one_line(
    tmp_path: Path, dtype: str, build
) -> None:
    path = write(
        tmp_path / "half.py",
        f"""
        import torch
        from torch import nn
        def make(num_classes=10):
            return nn.Sequential(nn.Flatten(), nn.Linear(3 * 8 * 8, num_classes)).to(torch.{dtype})
        """,
    )
    with pytest.raises(UsageError) as excinfo:
        build(f"{path}:make", input_shape=(3, 8, 8))
    assert one_line(excinfo) == (
        f"model {path}:make has {dtype} parameters and Stash's image batches are float32: build it in "
        "float32 (mixed precision is `stash predict --precision amp`)"
    )


def test_a_token_model_in_bfloat16_is_built_as_it_is(tmp_path: Path) -> None:
    """Its batches are integer ids, so it trains in the precision it was built in (and profiled so before)."""
    path = write(
        tmp_path / "half_tokens.py",
        """
        import torch
        from torch import nn
        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.embed, self.head = nn.Embedding(50, 8), nn.Linear(8, 2)
            def forward(self, ids):
                return self.head(self.embed(ids).mean(1)).float()
        def make():
            return Net().to(torch.bfloat16)
        """,
    )
    model, info = build_model(f"{path}:make", input_shape=(16,))
    assert info.kind == "tokens" and next(model.parameters()).dtype == torch.bfloat16


# --- the batch a worker trains at ---------------------------------------------------------------------------

BATCH_NORM = """
    import torch
    from torch import nn

    def make(num_classes=10):
        body = nn.Sequential(nn.Flatten(), nn.Linear(3 * 8 * 8, 16), nn.BatchNorm1d(16))
        return body.append(nn.Linear(16, num_classes))

    class NeedsRealTensors(nn.Module):
        def __init__(self):
            super().__init__()
            self.net = make()
        def forward(self, x):
            assert float(x.sum()) == float(x.sum())  # reads a value: no meta forward
            return self.net(x)
"""


@pytest.mark.parametrize("factory", ["make", "NeedsRealTensors"])
def test_a_model_that_cannot_train_at_the_workers_batch_is_refused(tmp_path: Path, factory: str) -> None:
    path = write(tmp_path / "bn.py", BATCH_NORM)
    ref = f"{path}:{factory}"
    with pytest.raises(UsageError) as excinfo:
        build_model(ref, input_shape=(3, 8, 8), train_batch=1)
    assert one_line(excinfo) == (
        f"model {ref} cannot take a training step at a batch of 1 per worker (--batch-size), input 3,8,8: "
        "ValueError: Expected more than 1 value per channel when training, got input size torch.Size([1, 16])"
    )
    model, info = build_model(ref, input_shape=(3, 8, 8), train_batch=2)
    assert info.num_classes == 10
    norm = model.get_submodule("2" if factory == "make" else "net.2")
    assert int(norm.num_batches_tracked) == 0  # its statistics untouched by the check
    build_model(ref, input_shape=(3, 8, 8))  # no batch asked for: the build alone (predict, a worker)


def test_the_training_check_leaves_the_model_as_it_was(tmp_path: Path) -> None:
    path = write(tmp_path / "bn.py", BATCH_NORM)
    model, _ = build_model(f"{path}:NeedsRealTensors", input_shape=(3, 8, 8), train_batch=2)
    norm = model.net[2]
    assert int(norm.num_batches_tracked) == 0 and bool((norm.running_mean == 0).all())


# --- a factory's arguments ----------------------------------------------------------------------------------


def test_a_factory_with_required_arguments_says_how_factories_are_called(tmp_path: Path) -> None:
    path = write(
        tmp_path / "args.py",
        """
        from torch import nn
        def make(width, depth, num_classes=10):
            return nn.Sequential(nn.Flatten(), nn.Linear(3 * 8 * 8, width), nn.Linear(width, num_classes))
        def needs_classes(num_classes, *, width):
            return make(width, 1, num_classes)
        """,
    )
    with pytest.raises(UsageError) as excinfo:
        build_model(f"{path}:make", input_shape=(3, 8, 8))
    assert one_line(excinfo) == (
        f"model factory {path}:make needs arguments width, depth: Stash calls a factory with no arguments, "
        "or with num_classes alone where it takes one; give the others defaults"
    )
    with pytest.raises(UsageError, match=r":needs_classes needs an argument width: Stash calls a factory"):
        build_model(f"{path}:needs_classes", num_classes=3, input_shape=(3, 8, 8))


# --- sparse gradients --------------------------------------------------------------------------------------


def test_a_token_model_with_a_sparse_embedding_is_refused_before_any_run(tmp_path: Path) -> None:
    # AdamW refuses sparse gradients: the first run failed at its first optimizer step
    path = write(
        tmp_path / "sparse.py",
        """
        import torch
        from torch import nn

        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.embed, self.head = nn.Embedding(50, 8, sparse=True), nn.Linear(8, 2)
            def forward(self, ids):
                return self.head(self.embed(ids).mean(1))
        def make():
            return Net()
        """,
    )
    with pytest.raises(UsageError, match=r"embedding with sparse=True \(embed\).*AdamW.*sparse=False$"):
        build_model(f"{path}:make", input_shape=(16,), train_batch=4)
    build_model(f"{path}:make", input_shape=(16,))  # a prediction may be of a job trained with SGD


def test_a_frozen_sparse_embedding_has_no_gradient_to_refuse(tmp_path: Path) -> None:
    path = write(
        tmp_path / "frozen_bag.py",
        """
        import torch
        from torch import nn

        def make():
            bag = nn.EmbeddingBag(50, 8, sparse=True)
            bag.requires_grad_(False)
            return nn.Sequential(bag, nn.Linear(8, 2))
        """,
    )
    model, info = build_model(f"{path}:make", input_shape=(16,))
    assert info.kind == "tokens"


# --- float feature vectors given a one-number shape --------------------------------------------------------

VECTORS = """
    from torch import nn

    def mlp(num_classes=10):
        return nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, num_classes))

    def flattened(num_classes=10):
        return nn.Sequential(nn.Flatten(), nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, num_classes))
"""


def test_float_vectors_given_token_ids_are_refused_with_the_shape_that_works(tmp_path: Path) -> None:
    # The meta forward does not check types: the first run failed on Long against Float, predict answered.
    path = write(tmp_path / "vectors.py", VECTORS)
    with pytest.raises(UsageError, match=r"16 token ids.*module 0 \(Linear\) computes on floats.*1,1,16"):
        build_model(f"{path}:mlp", input_shape=(16,))
    model, info = build_model(f"{path}:flattened", input_shape=(1, 1, 16))
    assert info.kind == "image" and info.num_classes == 10


def test_a_token_model_given_an_image_shape_is_told_to_give_its_sequence_length(tmp_path: Path) -> None:
    # It was torch's "Expected tensor for argument #1 'indices' to have one of the following scalar types"
    path = write(tmp_path / "lm.py", LANGUAGE_MODEL)
    said = r"embeds token ids in its module 0 \(Embedding\).*--input-shape 128$"
    for shape in (None, (3, 32, 32)):
        with pytest.raises(UsageError, match=said):
            build_model(f"{path}:logits_only", input_shape=shape)


# --- what a model returns in training mode -----------------------------------------------------------------

AUXILIARY = """
    from collections import namedtuple

    from torch import nn

    Outputs = namedtuple("Outputs", "logits aux_logits")

    class Net(nn.Module):
        def __init__(self, num_classes=10, named=False):
            super().__init__()
            self.body = nn.Sequential(nn.Flatten(), nn.Linear(3 * 8 * 8, 16))
            self.head, self.aux, self.named = nn.Linear(16, num_classes), nn.Linear(16, num_classes), named
        def forward(self, x):
            h = self.body(x)
            if not self.training:
                return self.head(h)
            return (Outputs if self.named else tuple)((self.head(h), self.aux(h)))

    def plain(num_classes=10):
        return Net(num_classes)

    def named(num_classes=10):
        return Net(num_classes, named=True)
"""


def test_a_model_with_nothing_to_train_on_in_training_mode_is_refused_before_any_run(tmp_path: Path) -> None:
    # The build's check saw its eval-mode logits; the first run failed on the training-mode tuple.
    path = write(tmp_path / "aux.py", AUXILIARY)
    with pytest.raises(UsageError, match=r"returns a tuple in training mode, with neither logits nor loss"):
        build_model(f"{path}:plain", input_shape=(3, 8, 8), train_batch=8)
    model, info = build_model(f"{path}:named", input_shape=(3, 8, 8), train_batch=8)  # trains on .logits
    assert info.num_classes == 10


SUBCLASSES_AND_RNNS = """
    import torch
    from torch import nn

    class LearnedPositions(nn.Embedding):
        # Hugging Face's OPTLearnedPositionalEmbedding: its own forward takes a float attention mask
        def forward(self, attention_mask):
            return super().forward(attention_mask.long().cumsum(1) - 1)

    class OptLike(nn.Module):
        def __init__(self, num_classes=10):
            super().__init__()
            self.tokens, self.positions = nn.Embedding(100, 16), LearnedPositions(64, 16)
            self.head = nn.Linear(16, num_classes)
        def forward(self, ids):
            mask = torch.ones(ids.shape[0], ids.shape[1], device=ids.device)  # float32, as OPT makes it
            return self.head((self.tokens(ids) + self.positions(mask)).mean(1))

    class Recurrent(nn.Module):
        def __init__(self, num_classes=10):
            super().__init__()
            self.rnn, self.head = nn.GRU(8, 16, batch_first=True), nn.Linear(16, num_classes)
        def forward(self, x):
            return self.head(self.rnn(x)[0][:, -1])

    def opt_like():
        return OptLike()

    def recurrent():
        return Recurrent()
"""


def test_a_subclass_with_a_forward_of_its_own_is_not_judged_by_torchs(tmp_path: Path) -> None:
    path = write(tmp_path / "models.py", SUBCLASSES_AND_RNNS)
    model, info = build_model(f"{path}:opt_like", input_shape=(16,), train_batch=4)
    assert info.kind == "tokens"


def test_a_recurrent_model_of_feature_vectors_is_given_the_shape_that_works(tmp_path: Path) -> None:
    path = write(tmp_path / "models.py", SUBCLASSES_AND_RNNS)
    with pytest.raises(UsageError, match=r"module rnn \(GRU\) computes on floats.*--input-shape L,F"):
        build_model(f"{path}:recurrent", input_shape=(16,))
    model, info = build_model(f"{path}:recurrent", input_shape=(20, 8), train_batch=4)
    assert info.num_classes == 10
