"""Decoder-only transformers (causal language models) in plain torch: GPT-2 style and Llama style.

GPT-2 style: learned positions, pre-norm LayerNorm, GELU (tanh) MLP of 4 x d_model, biases everywhere, the
output head tied to the token embedding. Llama style: rotary position embeddings, RMSNorm, a SwiGLU MLP, no
biases, grouped-query attention where the model has fewer key/value heads, an untied output head. Attention
is causal, through torch.nn.functional.scaled_dot_product_attention(is_causal=True) as a training job in
PyTorch runs it.

The forward takes token ids (batch, seq) and returns {"logits": (batch, seq, vocab), "loss": the mean
next-token cross-entropy of the ids themselves}: a language model trains on its own input stream, so the
class targets of the timed loop (or a text folder's labels) are not used (zoo/outputs.py takes the loss).

Parameters, exactly (V vocab, P positions, d d_model, L layers, f MLP hidden, k = d x kv_heads / heads):
    GPT-2   V*d + P*d + L*(12*d*d + 13*d) + 2*d                      (gpt2: 124,439,808)
    Llama   2*V*d + L*(2*d*d + 2*d*k + 3*d*f + 2*d) + d              (llama2_7b: 6,738,415,616)
the figures Hugging Face's GPT2LMHeadModel and LlamaForCausalLM give for the published configurations.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from stash_core.zoo.meta import is_meta


@dataclass(frozen=True)
class DecoderConfig:
    style: str  # "gpt2" | "llama"
    layers: int
    d_model: int
    heads: int
    vocab_size: int
    context: int  # the sequence length the model was trained with: the default input shape
    kv_heads: int | None = None  # fewer than heads: grouped-query attention (Llama style only)
    mlp_hidden: int | None = None  # default 4 x d_model (GPT-2); SwiGLU's hidden size for Llama
    norm_eps: float = 1e-5
    rope_theta: float = 10000.0


DECODERS: dict[str, DecoderConfig] = {
    # Two-layer versions with the real vocabularies, for trying the whole path quickly on a CPU.
    "gpt2_tiny": DecoderConfig("gpt2", 2, 128, 2, 50257, 1024),
    "llama_tiny": DecoderConfig("llama", 2, 128, 4, 32000, 2048, kv_heads=2, mlp_hidden=344),
    "gpt2": DecoderConfig("gpt2", 12, 768, 12, 50257, 1024),
    "gpt2_medium": DecoderConfig("gpt2", 24, 1024, 16, 50257, 1024),
    "gpt2_large": DecoderConfig("gpt2", 36, 1280, 20, 50257, 1024),
    "gpt2_xl": DecoderConfig("gpt2", 48, 1600, 25, 50257, 1024),
    "tinyllama_1b": DecoderConfig("llama", 22, 2048, 32, 32000, 2048, kv_heads=4, mlp_hidden=5632),
    "llama2_7b": DecoderConfig("llama", 32, 4096, 32, 32000, 4096, mlp_hidden=11008),
}


def _rotate_half(x: torch.Tensor) -> torch.Tensor:
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


class Attention(nn.Module):
    def __init__(self, config: DecoderConfig) -> None:
        super().__init__()
        self.heads = config.heads
        self.kv_heads = config.kv_heads or config.heads
        self.head_dim = config.d_model // config.heads
        bias = config.style == "gpt2"
        kv_dim = self.kv_heads * self.head_dim
        self.qkv = nn.Linear(config.d_model, config.d_model + 2 * kv_dim, bias=bias)
        self.out = nn.Linear(config.d_model, config.d_model, bias=bias)

    def forward(self, x: torch.Tensor, rotary: tuple[torch.Tensor, torch.Tensor] | None) -> torch.Tensor:
        batch, seq, d_model = x.shape
        kv_dim = self.kv_heads * self.head_dim
        q, k, v = self.qkv(x).split((d_model, kv_dim, kv_dim), dim=-1)
        q = q.view(batch, seq, self.heads, self.head_dim).transpose(1, 2)
        k = k.view(batch, seq, self.kv_heads, self.head_dim).transpose(1, 2)
        v = v.view(batch, seq, self.kv_heads, self.head_dim).transpose(1, 2)
        if rotary is not None:
            cos, sin = rotary
            q = q * cos + _rotate_half(q) * sin
            k = k * cos + _rotate_half(k) * sin
        grouped = self.kv_heads != self.heads
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=grouped)
        return self.out(y.transpose(1, 2).reshape(batch, seq, d_model))


class MLP(nn.Module):
    """GELU MLP (GPT-2) or SwiGLU (Llama: down(silu(gate(x)) * up(x)), gate and up as one packed matrix)."""

    def __init__(self, config: DecoderConfig) -> None:
        super().__init__()
        self.gated = config.style == "llama"
        hidden = config.mlp_hidden or 4 * config.d_model
        bias = not self.gated
        self.up = nn.Linear(config.d_model, 2 * hidden if self.gated else hidden, bias=bias)
        self.down = nn.Linear(hidden, config.d_model, bias=bias)
        self.act = nn.GELU(approximate="tanh")

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.gated:
            gate, up = self.up(x).chunk(2, dim=-1)
            return self.down(F.silu(gate) * up)
        return self.down(self.act(self.up(x)))


class Block(nn.Module):
    def __init__(self, config: DecoderConfig) -> None:
        super().__init__()
        norm = _norm_factory(config)
        self.attn_norm, self.attn = norm(), Attention(config)
        self.mlp_norm, self.mlp = norm(), MLP(config)

    def forward(self, x: torch.Tensor, rotary: tuple[torch.Tensor, torch.Tensor] | None) -> torch.Tensor:
        x = x + self.attn(self.attn_norm(x), rotary)
        return x + self.mlp(self.mlp_norm(x))


def _norm_factory(config: DecoderConfig) -> Callable[[], nn.Module]:
    if config.style == "llama":
        return lambda: nn.RMSNorm(config.d_model, eps=config.norm_eps)
    return lambda: nn.LayerNorm(config.d_model, eps=config.norm_eps)


class DecoderLM(nn.Module):
    """A causal language model; forward(token_ids) -> {"logits", "loss"} (the next-token loss)."""

    def __init__(self, config: DecoderConfig) -> None:
        super().__init__()
        self.config = config
        self.vocab_size = config.vocab_size
        self.embed = nn.Embedding(config.vocab_size, config.d_model)
        self.positions = nn.Embedding(config.context, config.d_model) if config.style == "gpt2" else None
        self.blocks = nn.ModuleList(Block(config) for _ in range(config.layers))
        self.norm = _norm_factory(config)()
        self.head = nn.Linear(config.d_model, config.vocab_size, bias=False)
        if config.style == "gpt2":
            self.head.weight = self.embed.weight  # tied: one tensor, counted once
        head_dim = config.d_model // config.heads
        inv_freq = 1.0 / config.rope_theta ** (torch.arange(0, head_dim, 2).float() / head_dim)
        self.register_buffer("inv_freq", inv_freq, persistent=False)
        if not is_meta(self):  # GPT-2's initialisation: N(0, 0.02), zero biases (meta: nothing to set)
            for module in self.modules():
                if isinstance(module, nn.Linear | nn.Embedding):
                    nn.init.normal_(module.weight, 0.0, 0.02)
                if isinstance(module, nn.Linear) and module.bias is not None:
                    nn.init.zeros_(module.bias)

    def _rotary(self, seq: int, device: torch.device) -> tuple[torch.Tensor, torch.Tensor] | None:
        if self.config.style != "llama":
            return None
        freqs = torch.outer(torch.arange(seq, device=device).float(), self.inv_freq.to(device))
        angles = torch.cat((freqs, freqs), dim=-1)  # (seq, head_dim), broadcast over batch and heads
        return angles.cos(), angles.sin()

    def forward(self, token_ids: torch.Tensor) -> dict[str, torch.Tensor]:
        seq = token_ids.shape[1]
        x = self.embed(token_ids)
        if self.positions is not None:
            x = x + self.positions(torch.arange(seq, device=token_ids.device))
        rotary = self._rotary(seq, token_ids.device)
        for block in self.blocks:
            x = block(x, rotary)
        logits = self.head(self.norm(x))
        # Next-token targets: the ids shifted left; the last position has none (ignored).
        ignored = torch.full_like(token_ids[:, :1], -100)
        targets = torch.cat((token_ids[:, 1:], ignored), dim=1)
        loss = F.cross_entropy(logits.view(-1, logits.shape[-1]), targets.reshape(-1), ignore_index=-100)
        return {"logits": logits, "loss": loss}


def decoder_factory(name: str) -> Callable[..., DecoderLM]:
    config = DECODERS[name]

    def make(num_classes: int | None = None) -> DecoderLM:
        return DecoderLM(config)

    return make
