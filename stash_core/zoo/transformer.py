"""A BERT-style encoder with a sequence-classification head, for token-id inputs.

Built from nn.TransformerEncoderLayer (post-norm, GELU, feed-forward 4 x hidden, dropout 0.1,
LayerNorm eps 1e-12, as BERT). Parameters per model, exactly
(H = hidden, L = layers, V = 30522, P = 512, C = num_classes):

    embeddings  V*H + P*H + 2*H (token types) + 2*H (LayerNorm)
    per layer   12*H*H + 13*H   (packed q/k/v 3H*H+3H, output H*H+H, feed-forward 8H*H+5H, two LayerNorms 4H)
    pooler      H*H + H;  classifier  H*C + C

which is the same count as Hugging Face's BertForSequenceClassification: with 2 classes bert_base has
109,483,778 parameters, bert_tiny 4,386,178, bert_large 335,143,938. Tensor counts differ from Hugging Face
because q/k/v are one packed tensor here: 5 + 12*L + 2 + 2 gradient tensors (bert_base: 153).
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn

from stash_core.zoo.meta import is_meta

VOCAB_SIZE = 30522
MAX_POSITIONS = 512
TOKEN_TYPES = 2

# name -> (layers, hidden size, attention heads)
BERT_SIZES: dict[str, tuple[int, int, int]] = {
    "bert_tiny": (2, 128, 2),
    "bert_base": (12, 768, 12),
    "bert_large": (24, 1024, 16),
}


class BertClassifier(nn.Module):
    def __init__(
        self,
        layers: int,
        hidden: int,
        heads: int,
        num_classes: int = 2,
        vocab_size: int = VOCAB_SIZE,
        max_positions: int = MAX_POSITIONS,
        dropout: float = 0.1,
    ):
        super().__init__()
        self.vocab_size = vocab_size
        self.max_positions = max_positions
        self.word_embeddings = nn.Embedding(vocab_size, hidden)
        self.position_embeddings = nn.Embedding(max_positions, hidden)
        self.token_type_embeddings = nn.Embedding(TOKEN_TYPES, hidden)
        self.embedding_norm = nn.LayerNorm(hidden, eps=1e-12)
        self.dropout = nn.Dropout(dropout)
        # A ModuleList of separately built layers (nn.TransformerEncoder would deep-copy one layer's weights).
        self.layers = nn.ModuleList(
            nn.TransformerEncoderLayer(
                hidden,
                heads,
                dim_feedforward=4 * hidden,
                dropout=dropout,
                activation="gelu",
                layer_norm_eps=1e-12,
                batch_first=True,
                norm_first=False,
            )
            for _ in range(layers)
        )
        self.pooler = nn.Linear(hidden, hidden)
        self.classifier = nn.Linear(hidden, num_classes)
        for module in (
            () if is_meta(self) else self.modules()
        ):  # BERT's initialisation: N(0, 0.02), zero biases
            if isinstance(module, nn.Linear | nn.Embedding):
                nn.init.normal_(module.weight, 0.0, 0.02)
            if isinstance(module, nn.Linear) and module.bias is not None:
                nn.init.zeros_(module.bias)

    def forward(self, token_ids: torch.Tensor) -> torch.Tensor:
        positions = torch.arange(token_ids.shape[1], device=token_ids.device)
        x = self.word_embeddings(token_ids) + self.position_embeddings(positions)
        x = x + self.token_type_embeddings.weight[0]  # one segment: every token has type 0
        x = self.dropout(self.embedding_norm(x))
        for layer in self.layers:
            x = layer(x)
        pooled = torch.tanh(self.pooler(x[:, 0]))  # the first ([CLS]) position
        return self.classifier(self.dropout(pooled))


def bert_factory(name: str) -> Callable[..., BertClassifier]:
    layers, hidden, heads = BERT_SIZES[name]

    def make(num_classes: int = 2) -> BertClassifier:
        return BertClassifier(layers, hidden, heads, num_classes=num_classes)

    return make
