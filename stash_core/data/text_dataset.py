"""Real text data for the BERT-style token model: a synthetic generator and a hashing-tokeniser Dataset."""

from __future__ import annotations

import re
import zlib
from pathlib import Path
from typing import Any

import numpy as np
import torch

from stash_core.data.dataset_dir import (
    build_dataset_dir,
    read_file_bytes,
    scan_class_folders,
    total_size_bytes,
)
from stash_core.errors import UsageError
from stash_core.interrupts import check_stop_request
from stash_core.pathargs import dataset_cache_root

TEXT_SUFFIXES = (".txt",)
_GENERATOR_VERSION = 1
_NUM_CLASSES = 4
_VOCAB_WORDS = 3000
_SYLLABLES = ("ka", "to", "ri", "me", "su", "na", "lo", "pe", "di", "ga", "mu", "ze", "bo", "xi", "ha", "ju")
_WORD_RE = re.compile(r"[a-z0-9']+")


def _vocabulary(rng: np.random.Generator) -> list[str]:
    words: set[str] = set()
    while len(words) < _VOCAB_WORDS:
        length = int(rng.integers(1, 5))
        words.add("".join(_SYLLABLES[i] for i in rng.integers(0, len(_SYLLABLES), size=length)))
    return sorted(words)


# A document of 200-500 words (about 3 KB) takes one 4 KiB block on disk.
_DOC_DISK_BYTES = 4096


def generate_synthetic_text(count_docs: int, root: Path | None = None, seed: int = 0) -> Path:
    """Make (or reuse) a folder-per-label tree of `count_docs` text files, a few hundred words each."""
    if count_docs < 1:
        raise UsageError(f"synthetic text needs count_docs >= 1 (got {count_docs})")
    base = Path(root) if root is not None else dataset_cache_root()
    final_dir = base / f"synthetic-text-{count_docs}-s{seed}"
    num_classes = min(_NUM_CLASSES, count_docs)
    manifest = {
        "kind": "synthetic-text",
        "generator_version": _GENERATOR_VERSION,
        "count_docs": count_docs,
        "num_classes": num_classes,
        "seed": seed,
    }

    def write_files(tmp_dir: Path) -> dict[str, Any]:
        rng = np.random.default_rng(seed)
        vocabulary = _vocabulary(rng)
        # Zipf-like word frequencies, shuffled differently per class so labels are learnable; drawn
        # by inverse CDF (searchsorted), much cheaper than rng.choice(p=...) per document.
        base_weights = 1.0 / np.arange(1, len(vocabulary) + 1)
        class_cdfs = []
        for _ in range(num_classes):
            cdf = np.cumsum(rng.permutation(base_weights))
            class_cdfs.append(cdf / cdf[-1])
        total_bytes = 0
        for label in range(num_classes):
            (tmp_dir / f"label_{label:02d}").mkdir()
        for index in range(count_docs):
            if index % 200 == 0:
                check_stop_request()  # a Cancel of a profile run from Python
            label = index % num_classes
            draws = rng.random(int(rng.integers(200, 500)))
            word_ids = np.minimum(np.searchsorted(class_cdfs[label], draws), len(vocabulary) - 1).tolist()
            words = [vocabulary[i] for i in word_ids]
            lines = [" ".join(words[i : i + 12]) for i in range(0, len(words), 12)]
            data = (".\n".join(line.capitalize() for line in lines) + ".\n").encode()
            (tmp_dir / f"label_{label:02d}" / f"doc_{index:07d}.txt").write_bytes(data)
            total_bytes += len(data)
        return {"total_bytes": total_bytes}

    return build_dataset_dir(final_dir, manifest, write_files, lambda: count_docs * _DOC_DISK_BYTES)


def hash_tokenise(text: str, seq_len: int, vocab_size: int) -> torch.Tensor:
    """Lower-cased words hashed (crc32, stable across processes) into ids [1, vocab_size); 0 pads."""
    words = _WORD_RE.findall(text.lower())[:seq_len]
    ids = [1 + zlib.crc32(word.encode()) % (vocab_size - 1) for word in words]
    tokens = torch.zeros(seq_len, dtype=torch.long)
    if ids:
        tokens[: len(ids)] = torch.tensor(ids, dtype=torch.long)
    return tokens


class TextFolderDataset(torch.utils.data.Dataset):
    """One folder per label of .txt files; yields (LongTensor(seq_len) of token ids, label)."""

    def __init__(
        self, root: Path | str, seq_len: int, vocab_size: int, evict_after_read: bool = False
    ) -> None:
        if seq_len < 1 or vocab_size < 2:
            raise UsageError(f"text data needs seq_len >= 1, vocab_size >= 2 (got {seq_len}, {vocab_size})")
        self.root = Path(root)
        self.seq_len = seq_len
        self.vocab_size = vocab_size
        self.evict_after_read = evict_after_read
        self.classes, self.files, self.labels = scan_class_folders(self.root, TEXT_SUFFIXES, "text")
        self.total_bytes = total_size_bytes(self.files)

    def __len__(self) -> int:
        return len(self.files)

    def __getitem__(self, index: int) -> tuple[torch.Tensor, int]:
        text = read_file_bytes(self.files[index], self.evict_after_read).decode("utf-8", errors="replace")
        return hash_tokenise(text, self.seq_len, self.vocab_size), self.labels[index]
