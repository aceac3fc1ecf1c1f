"""A worker's or a script's error in one line that keeps its cause: torch and users put it on the second
line, and a DataLoader process's error is torch's "Caught X in DataLoader worker process N." around it."""

from __future__ import annotations

import pytest
import torch
from torch.utils.data import DataLoader, Dataset

from stash_core.measure.error_line import error_line
from stash_core.terminal import MESSAGE_CHARS


def raised(call) -> BaseException:
    with pytest.raises(Exception) as caught:
        call()
    return caught.value


def test_a_message_of_several_lines_keeps_its_cause() -> None:
    mismatch = raised(lambda: torch.nn.Linear(64, 10).load_state_dict({"weight": torch.zeros(5, 64),
                                                                        "bias": torch.zeros(5)}))  # fmt: skip
    said = error_line(mismatch)
    assert said.startswith(
        "RuntimeError: Error(s) in loading state_dict for Linear: size mismatch for weight"
    )
    assert "\n" not in said


def test_an_empty_message_is_the_name_alone_and_a_long_one_is_cut() -> None:
    assert error_line(RuntimeError()) == "RuntimeError"
    said = error_line(ValueError("x" * 5000 + " in tensor layer4.weight"))
    # its start and end, the cut said: the cause's last words were cut off
    assert said.startswith("ValueError: xxx") and said.endswith("in tensor layer4.weight (5024 characters)")
    assert len(said) <= len("ValueError: ") + MESSAGE_CHARS + len(" (5024 characters)")


class Corrupt(Dataset):
    def __len__(self) -> int:
        return 8

    def __getitem__(self, index: int):
        if index == 5:
            raise OSError(f"corrupt sample {index}\nin shard 3")
        return torch.zeros(2)


def test_a_data_loader_process_error_is_said_by_its_own_message() -> None:
    loader = DataLoader(Corrupt(), batch_size=2, num_workers=1)
    said = error_line(raised(lambda: list(loader)))
    assert said == "OSError: corrupt sample 5 in shard 3 (in a data loader process)"
