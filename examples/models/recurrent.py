"""Recurrent user models: stacked LSTMs and GRUs, as speech and text models use them.

    stash predict --model examples/models/recurrent.py:lstm --input-shape 64,1024 --batch-size 32
    stash predict --model examples/models/recurrent.py:text_lstm --input-shape 128 --batch-size 64

lstm and gru take a sequence of feature vectors (time steps, features: 64,1024 above); text_lstm takes token
ids (a sequence length) and reads them with a bidirectional LSTM. Each classifies the sequence from the
recurrent layers' outputs averaged over time. On a GPU, PyTorch runs each stack of layers as cuDNN calls,
which is how Stash counts them (docs/predictions.md, "Recurrent layers").
"""

import torch
from torch import nn


class _SequenceClassifier(nn.Module):
    def __init__(self, rnn: nn.Module, width: int, num_classes: int, embedding: nn.Module | None = None):
        super().__init__()
        self.embedding = embedding
        self.rnn = rnn
        self.head = nn.Linear(width, num_classes)

    def forward(self, inputs: torch.Tensor) -> torch.Tensor:
        if self.embedding is not None:
            inputs = self.embedding(inputs)
        outputs, _ = self.rnn(inputs)
        # the mean over time: a bidirectional layer's last step has read only the last input backwards
        return self.head(outputs.mean(dim=1))


def lstm(num_classes: int = 10, features: int = 1024, hidden: int = 1024) -> nn.Module:
    """Two LSTM layers of `hidden` units over feature vectors."""
    return _SequenceClassifier(nn.LSTM(features, hidden, 2, batch_first=True), hidden, num_classes)


def gru(num_classes: int = 10, features: int = 1024, hidden: int = 1024) -> nn.Module:
    """Two GRU layers of `hidden` units over feature vectors."""
    return _SequenceClassifier(nn.GRU(features, hidden, 2, batch_first=True), hidden, num_classes)


def text_lstm(num_classes: int = 2, vocabulary: int = 30522, width: int = 512) -> nn.Module:
    """Token ids embedded, then two bidirectional LSTM layers with dropout between them."""
    rnn = nn.LSTM(width, width, 2, batch_first=True, bidirectional=True, dropout=0.1)
    return _SequenceClassifier(rnn, 2 * width, num_classes, nn.Embedding(vocabulary, width))
