"""Text data set for the token model: generator, hashing tokeniser, TextFolderDataset."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from stash_core.data.loader import make_loader
from stash_core.data.text_dataset import TextFolderDataset, generate_synthetic_text, hash_tokenise
from stash_core.errors import UsageError
from stash_core.interrupts import Cancelled, stop_requests


@pytest.fixture(scope="module")
def text_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return generate_synthetic_text(40, root=tmp_path_factory.mktemp("text"))


def test_generator_writes_label_folders_of_documents(text_root: Path) -> None:
    manifest = json.loads((text_root / "MANIFEST.json").read_text())
    docs = sorted(text_root.rglob("*.txt"))
    assert len(docs) == manifest["count_docs"] == 40
    assert sorted(p.name for p in text_root.iterdir() if p.is_dir()) == [f"label_{i:02d}" for i in range(4)]
    assert manifest["total_bytes"] == sum(p.stat().st_size for p in docs)
    word_counts = [len(p.read_text().split()) for p in docs]
    assert min(word_counts) >= 200 and max(word_counts) < 500
    assert len({p.read_text() for p in docs}) == 40  # all documents differ


def test_generator_reuses_a_complete_set(text_root: Path) -> None:
    manifest_mtime = (text_root / "MANIFEST.json").stat().st_mtime_ns
    again = generate_synthetic_text(40, root=text_root.parent)
    assert again == text_root
    assert (text_root / "MANIFEST.json").stat().st_mtime_ns == manifest_mtime


def test_hash_tokenise_pads_truncates_and_ignores_case() -> None:
    tokens = hash_tokenise("Hello hello HELLO, world", seq_len=6, vocab_size=50)
    assert tokens.dtype == torch.int64 and tokens.shape == (6,)
    assert tokens[0] == tokens[1] == tokens[2] != 0
    assert tokens[3] != 0
    assert tokens[4:].tolist() == [0, 0]
    assert torch.all((tokens[:4] >= 1) & (tokens[:4] < 50))
    assert (
        hash_tokenise("a b c d e f g", seq_len=3, vocab_size=50).tolist()
        == hash_tokenise("a b c", seq_len=3, vocab_size=50).tolist()
    )


def test_hash_tokenise_ids_are_fixed_values() -> None:
    # Python's hash() is salted per process; loader workers, ranks and runs must agree on token ids,
    # so the ids are pinned to the stable crc32 values.
    assert hash_tokenise("The quick brown fox", 4, 30000).tolist() == [6786, 16306, 3932, 10315]


def test_dataset_yields_token_tensors_and_labels(text_root: Path) -> None:
    dataset = TextFolderDataset(text_root, seq_len=64, vocab_size=1000)
    assert len(dataset) == len(dataset.files) == len(dataset.labels) == 40
    assert dataset.total_bytes == sum(p.stat().st_size for p in dataset.files)
    tokens, label = dataset[5]
    assert tokens.shape == (64,) and tokens.dtype == torch.int64
    assert torch.all((tokens >= 1) & (tokens < 1000))  # documents are longer than 64 words: no padding
    assert dataset.files[5].parent.name == dataset.classes[label]
    long_tokens, _ = TextFolderDataset(text_root, seq_len=2000, vocab_size=1000)[5]
    assert long_tokens[-1] == 0  # padded
    assert torch.equal(long_tokens[:64], tokens)


def test_dataset_in_loader_batches(text_root: Path) -> None:
    dataset = TextFolderDataset(text_root, seq_len=32, vocab_size=500)
    loader = make_loader(dataset, batch_size=8, loader_workers=2, rank=0, world_size=1, pin_memory=False)
    batches = list(loader)
    assert len(batches) == 5
    assert all(tokens.shape == (8, 32) and labels.shape == (8,) for tokens, labels in batches)


@pytest.mark.parametrize("layout", ["missing", "empty", "no_text"])
def test_dataset_usage_errors(tmp_path: Path, layout: str) -> None:
    root = tmp_path / "text"
    if layout == "empty":
        root.mkdir()
    elif layout == "no_text":
        (root / "label_a").mkdir(parents=True)
        (root / "label_a" / "image.jpg").write_bytes(b"x")
    with pytest.raises(UsageError):
        TextFolderDataset(root, seq_len=16, vocab_size=100)


def test_dataset_rejects_bad_sizes(text_root: Path) -> None:
    with pytest.raises(UsageError):
        TextFolderDataset(text_root, seq_len=0, vocab_size=100)
    with pytest.raises(UsageError):
        TextFolderDataset(text_root, seq_len=16, vocab_size=1)


def test_a_cancel_asked_while_the_documents_are_written_stops_the_build_and_leaves_nothing(
    tmp_path: Path,
) -> None:
    with stop_requests(lambda: True), pytest.raises(Cancelled):
        generate_synthetic_text(40, root=tmp_path)
    assert list(tmp_path.iterdir()) == []
