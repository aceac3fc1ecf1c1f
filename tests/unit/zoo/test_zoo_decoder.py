"""The decoder-only transformers of the zoo: published parameter counts, FLOPs against 6*N*tokens plus
attention, causal masking, grouped-query attention, and the refusals of sizes that cannot work."""

from __future__ import annotations

import math

import psutil
import pytest
import torch
from torch.utils.flop_counter import FlopCounterMode

from stash_core.decide.predict.step_cost import step_cost
from stash_core.errors import UsageError
from stash_core.zoo import build_model, describe_model, loss_fn, synthetic_batch
from stash_core.zoo.decoder import DECODERS, DecoderConfig, DecoderLM

# Hugging Face's parameter counts of the published checkpoints (GPT2LMHeadModel, LlamaForCausalLM).
PUBLISHED_PARAMS = {
    "gpt2": 124_439_808,
    "gpt2_medium": 354_823_168,
    "gpt2_large": 774_030_080,
    "gpt2_xl": 1_557_611_200,
    "tinyllama_1b": 1_100_048_384,
    "llama2_7b": 6_738_415_616,
}


@pytest.mark.parametrize("name", sorted(PUBLISHED_PARAMS))
def test_parameter_counts_match_the_published_models(name):
    info = describe_model(name)
    assert info.param_count == PUBLISHED_PARAMS[name]
    assert info.kind == "tokens"
    assert info.input_shape == (DECODERS[name].context,)  # the default sequence is the model's context
    assert info.num_classes == info.vocab_size == DECODERS[name].vocab_size


def _matmul_params(name: str) -> int:
    """Parameters that take part in a matrix product: all but the embeddings only looked up (GPT-2's
    learned positions; Llama's input embedding, untied from its output head) and norms and biases."""
    config = DECODERS[name]
    looked_up = config.context if config.style == "gpt2" else config.vocab_size
    lookups = looked_up * config.d_model
    with torch.device("meta"):
        model = DecoderLM(config)
    small = sum(p.numel() for p in model.parameters() if p.dim() == 1)  # norms and biases
    return PUBLISHED_PARAMS[name] - lookups - small


@pytest.mark.parametrize(("name", "seq"), [("gpt2", 256), ("tinyllama_1b", 512), ("llama2_7b", 256)])
def test_flops_of_a_step_are_six_n_tokens_plus_attention(name, seq):
    """fwd+bwd = 6 x (matrix parameters) x tokens + 12 x layers x d_model x seq per token for the attention
    scores and values. torch's FlopCounterMode (SDPA's math path on the meta device) counts exactly that, the
    dense attention. The step-cost counter counts the matrix products the same way and attention as the
    fused kernel runs it: the causal mask skips about half of it, the backward recomputes it, so its share
    lies between half and all of the dense figure."""
    batch = 2
    config = DECODERS[name]
    tokens = batch * seq
    products = 6 * _matmul_params(name) * tokens
    attention = 12 * config.layers * config.d_model * seq * tokens
    with torch.device("meta"):
        model, info = build_model(name, input_shape=(seq,))
    inputs, targets = synthetic_batch(info, batch, "meta")
    with FlopCounterMode(display=False) as counter:
        loss_fn(info)(model(inputs), targets).backward()
    assert counter.get_total_flops() == pytest.approx(products + attention, rel=0.002)
    cost = step_cost(name, batch, (seq,))
    # attention: the fused kernel's own operators, or SDPA's math path (bmm) where it is not counted fused
    fused = sum(op.flops for op in cost.ops if "attention" in op.name or op.name == "aten.bmm")
    assert cost.total_flops - fused == pytest.approx(products, rel=0.002)
    assert 0.5 * attention <= fused <= attention


TINY_LLAMA = DecoderConfig("llama", 2, 64, 4, 101, 32, kv_heads=2, mlp_hidden=96)
TINY_GPT2 = DecoderConfig("gpt2", 2, 64, 4, 101, 32)


@pytest.mark.parametrize("config", [TINY_GPT2, TINY_LLAMA], ids=["gpt2-style", "llama-style"])
def test_attention_is_causal_and_the_loss_is_next_token(config):
    torch.manual_seed(0)
    model = DecoderLM(config).eval()
    ids = torch.randint(0, config.vocab_size, (2, 12))
    changed = ids.clone()
    changed[:, 8:] = (changed[:, 8:] + 1) % config.vocab_size
    with torch.no_grad():
        out, out_changed = model(ids), model(changed)
    assert out["logits"].shape == (2, 12, config.vocab_size)
    # Positions before the change see nothing of it; the changed positions do.
    assert torch.allclose(out["logits"][:, :8], out_changed["logits"][:, :8], atol=1e-6)
    assert not torch.allclose(out["logits"][:, 8:], out_changed["logits"][:, 8:])
    expected = torch.nn.functional.cross_entropy(
        out["logits"][:, :-1].reshape(-1, config.vocab_size), ids[:, 1:].reshape(-1)
    )
    assert out["loss"].item() == pytest.approx(expected.item(), rel=1e-5)
    # At initialisation the model knows nothing: the loss is near log(vocab).
    assert abs(out["loss"].item() - math.log(config.vocab_size)) < 0.5


def test_grouped_query_attention_has_fewer_key_value_weights_and_trains():
    model = DecoderLM(TINY_LLAMA)
    head_dim = 64 // 4
    assert model.blocks[0].attn.qkv.weight.shape == (64 + 2 * 2 * head_dim, 64)
    ids = torch.randint(0, TINY_LLAMA.vocab_size, (3, 10))
    loss = model(ids)["loss"]
    loss.backward()
    assert all(p.grad is not None for p in model.parameters())


def test_rotary_positions_make_order_matter():
    """Without learned positions, a Llama-style model still tells a token's place (its rotary angles)."""
    torch.manual_seed(0)
    model = DecoderLM(TINY_LLAMA).eval()
    ids = torch.tensor([[5, 7, 9, 11]])
    swapped = torch.tensor([[7, 5, 9, 11]])
    with torch.no_grad():
        last, last_swapped = model(ids)["logits"][0, -1], model(swapped)["logits"][0, -1]
    assert not torch.allclose(last, last_swapped, atol=1e-5)


@pytest.mark.slow
def test_a_zoo_decoder_trains_one_step_on_the_cpu_through_the_zoo_loss():
    model, info = build_model("gpt2", input_shape=(8,))
    inputs, targets = synthetic_batch(info, 1, "cpu")
    loss = loss_fn(info)(model(inputs), targets)  # the model's own next-token loss; targets unused
    loss.backward()
    assert math.isfinite(loss.item())
    assert model.embed.weight.grad is not None and model.head.weight is model.embed.weight


def test_sizes_that_cannot_work_are_refused_in_one_line():
    with pytest.raises(UsageError, match="at most 1024 tokens"):
        describe_model("gpt2", input_shape=(2048,))
    with pytest.raises(UsageError, match="one sequence length"):
        describe_model("llama2_7b", input_shape=(3, 224, 224))
    with pytest.raises(UsageError, match="takes no number of classes"):
        describe_model("gpt2", num_classes=10)
    assert describe_model("tinyllama_1b", input_shape=(8192,)).input_shape == (8192,)  # rotary: no limit


def test_a_model_too_big_for_the_machine_is_refused_unless_on_meta(monkeypatch):
    class Little:
        available = 2 * 10**9

    monkeypatch.setattr(psutil, "virtual_memory", lambda: Little())
    with pytest.raises(UsageError) as excinfo:
        build_model("llama2_7b", input_shape=(16,))
    message = str(excinfo.value)
    assert "80.9 GB to train (its 27.0 GB of FP32 weights" in message and "2.0 GB free" in message
    assert "\n" not in message
    assert describe_model("llama2_7b").param_count == PUBLISHED_PARAMS["llama2_7b"]  # meta: no weights
    # an image model's head as large as it is asked for: 10,000,000 classes were an allocator's traceback
    with pytest.raises(UsageError, match=r"resnet10 needs 61\.6 GB to train \(its 20\.5 GB of FP32"):
        build_model("resnet10", num_classes=10_000_000, input_shape=(3, 32, 32))
    assert build_model("resnet10", num_classes=10, input_shape=(3, 32, 32))[1].num_classes == 10
    # with a GPU the training state is the GPU's: the host holds the weights as they are built
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    with pytest.raises(UsageError, match=r"resnet10 needs 20\.5 GB for its FP32 weights alone"):
        build_model("resnet10", num_classes=10_000_000, input_shape=(3, 32, 32))
