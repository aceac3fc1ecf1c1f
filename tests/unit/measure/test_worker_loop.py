"""The worker's timed loop stops where it should: a fixed count of kept iterations after the warm-up, with no
more steps than that count needs."""

from __future__ import annotations

import pytest

from stash_core.measure import worker
from stash_core.measure.rank_sync import MIN_WARMUP_ITERATIONS, warmup_count
from stash_core.measure.timed_loop import StepTimes


def run_loop(monkeypatch, **job) -> tuple[str, list[int], StepTimes]:
    """run_until_done with steps that take 10 ms each (no model, one rank); the step counts of each chunk."""
    chunks: list[int] = []

    def steps(model, optimizer, loss, batches, device, count, times, clock) -> None:
        chunks.append(count)
        times.iteration_s.extend([0.01] * count)

    monkeypatch.setattr(worker, "run_steps", steps)
    monkeypatch.setattr(worker, "report_progress", lambda *args: None)
    job = {"iterations": None, "target_relative_ci": 0.02, "max_phase_s": 60.0, "max_iterations": 1000, **job}
    times = StepTimes()
    reason = worker.run_until_done(job, None, None, None, None, "cpu", times, [], None, 0)
    return reason, chunks, times


@pytest.mark.parametrize("fixed", [1, 3, 8])
def test_a_small_fixed_count_runs_the_warm_up_and_that_count_only(monkeypatch, fixed):
    reason, chunks, times = run_loop(monkeypatch, iterations=fixed)
    assert reason == "fixed"
    assert chunks == [MIN_WARMUP_ITERATIONS + fixed] and len(times) == MIN_WARMUP_ITERATIONS + fixed


def test_a_larger_fixed_count_checks_first_after_ten_then_runs_what_is_missing(monkeypatch):
    reason, chunks, _ = run_loop(monkeypatch, iterations=12)
    assert reason == "fixed" and chunks == [worker.FIRST_CHECK_AFTER, 4]  # 8 kept after 10, 4 more


def test_a_fixed_count_steps_past_a_slow_start_and_keeps_none_of_it(monkeypatch):
    """Ten steps asked for, the four after the dropped two still slow (a CPU run beside another job): the
    run goes on until ten steady ones are kept, and the warm-up count drops the slow ones."""
    chunks: list[int] = []
    pattern = [1.0, 1.0, 0.80, 0.51, 1.47, 1.04]

    def steps(model, optimizer, loss, batches, device, count, times, clock) -> None:
        chunks.append(count)
        for _ in range(count):
            done = len(times.iteration_s)
            times.iteration_s.append(pattern[done] if done < len(pattern) else 0.08 + 0.001 * (done % 3))

    monkeypatch.setattr(worker, "run_steps", steps)
    monkeypatch.setattr(worker, "report_progress", lambda *args: None)
    job = {"iterations": 10, "target_relative_ci": 0.02, "max_phase_s": 60.0, "max_iterations": 1000}
    times, step_s = StepTimes(), []
    reason = worker.run_until_done(job, None, None, None, None, "cpu", times, step_s, None, 0)
    assert reason == "fixed" and len(step_s) == 16  # 2 dropped, 4 slow, 10 kept
    warmup = warmup_count(step_s, fixed=10)
    assert warmup == 6 and max(step_s[warmup:]) < 0.1


def test_without_a_fixed_count_the_first_check_comes_after_ten_steps(monkeypatch):
    reason, chunks, _ = run_loop(monkeypatch, target_relative_ci=0.5)  # equal steps: converged at once
    assert reason == "converged" and chunks == [worker.FIRST_CHECK_AFTER]


@pytest.mark.parametrize(("cap", "steps"), [(2, 4), (7, 7), (12, 12)])
def test_a_launch_s_iteration_cap_below_ten_is_its_first_chunk_too(monkeypatch, cap, steps):
    """--max-iterations 6 over 3 launches caps each at 2: the first chunk ran 10 steps whatever the cap;
    now the cap, never below the warm-up and two steps a figure needs."""
    varying = iter([0.01, 0.02] * 100)

    def steps_of(model, optimizer, loss, batches, device, count, times, clock) -> None:
        times.iteration_s.extend(next(varying) for _ in range(count))

    monkeypatch.setattr(worker, "run_steps", steps_of)
    monkeypatch.setattr(worker, "report_progress", lambda *args: None)
    job = {"iterations": None, "target_relative_ci": 0.0001, "max_phase_s": 60.0, "max_iterations": cap}
    times = StepTimes()
    reason = worker.run_until_done(job, None, None, None, None, "cpu", times, [], None, 0)
    assert len(times) == steps and reason == "max_iterations"


def test_ddps_advice_the_user_cannot_follow_becomes_what_they_can_do():
    torch_says = RuntimeError(
        "Expected to have finished reduction in the prior iteration before starting a new one. This error "
        "indicates that your module has parameters that were not used in producing loss. You can enable "
        "unused parameter detection by passing the keyword argument `find_unused_parameters=True` to "
        "`torch.nn.parallel.DistributedDataParallel`"
    )
    said = worker.error_text(torch_says)
    assert "find_unused_parameters" not in said and "requires_grad_(False)" in said
    # a parameter used on some steps only (a branch taken by chance) cannot be frozen or left out
    assert "only on some steps" in said and "give --find-unused-parameters" in said
    assert worker.error_text(ValueError("bad\nsecond line")) == "ValueError: bad second line"
    # given --find-unused-parameters, DDP's mention of it is about something else: its own words are said
    twice = RuntimeError("Expected to mark a variable ready only once ... `find_unused_parameters=False`")
    assert worker.error_text(twice, finding_unused=True).startswith("RuntimeError: Expected to mark")


def _rank_loop(rank: int, store_path: str, limits_s: list[float], results) -> None:
    import time

    import torch.distributed as dist

    dist.init_process_group("gloo", init_method=f"file://{store_path}", rank=rank, world_size=2)
    try:

        def steps(model, optimizer, loss, batches, device, count, times, clock) -> None:
            time.sleep(0.002 * count)
            times.iteration_s.extend([0.001, 0.003][i % 2] for i in range(count))  # never converges

        worker.run_steps = steps
        worker.report_progress = lambda *args: None
        job = {"iterations": None, "target_relative_ci": 1e-9, "max_phase_s": limits_s[rank],
               "max_iterations": 100_000}  # fmt: skip
        times = StepTimes()
        reason = worker.run_until_done(job, None, None, None, None, "cpu", times, [], None, rank)
        results[rank] = (reason, len(times))
    finally:
        dist.destroy_process_group()


def test_ranks_whose_clocks_started_apart_stop_together_at_the_time_limit(tmp_path):
    """Rank 0's limit is long past when rank 1's starts (as when rank 1 scanned its data set slower): both
    leave the loop after the same step, on the time limit; alone, rank 0 would have left rank 1 waiting in a
    collective (a profile failed as 'a rank is hung')."""
    import torch.multiprocessing as mp

    context = mp.get_context("spawn")
    results = context.Manager().dict()
    ranks = [context.Process(target=_rank_loop, args=(rank, str(tmp_path / "store"), [0.0, 60.0], results))
             for rank in range(2)]  # fmt: skip
    for process in ranks:
        process.start()
    for process in ranks:
        process.join(timeout=60)
    for process in ranks:
        if process.is_alive():  # waiting in a collective its peer never joins
            process.kill()
            process.join()
    assert dict(results) == {0: ("max_time", 10), 1: ("max_time", 10)}


def test_an_error_in_a_data_loader_process_says_its_own_message(tmp_path):
    from stash_core.data.jpeg_dataset import ImageFolderDataset, generate_synthetic_jpegs
    from stash_core.data.loader import make_loader

    root = generate_synthetic_jpegs(8, image_px=16, num_classes=2, root=tmp_path)
    dataset = ImageFolderDataset(root, transform=None)
    for path in dataset.files:
        path.write_bytes(b"no longer an image")
    loader = make_loader(dataset, batch_size=2, loader_workers=1, rank=0, world_size=1, pin_memory=False)
    with pytest.raises(Exception) as caught:
        next(iter(loader))
    said = worker.error_text(caught.value)
    assert said.startswith(f"none of the 8 images under {root} could be decoded, e.g. class_00")  # no class
    assert said.endswith("(in a data loader process)") and "\n" not in said


def test_an_undecodable_image_whose_name_holds_a_newline_is_named_on_one_line(tmp_path):
    from stash_core.data.jpeg_dataset import ImageFolderDataset

    folder = tmp_path / "cls"
    folder.mkdir()
    (folder / "x\nR0: forged.jpg").write_bytes(b"no image")
    dataset = ImageFolderDataset(tmp_path, transform=None)
    with pytest.raises(Exception) as caught:
        dataset[0]
    said = worker.error_text(caught.value)
    assert "\n" not in said and "cls/x\\nR0: forged.jpg" in said, said


def test_reads_replaced_by_another_sample_are_counted_in_the_result(tmp_path):
    import itertools
    from types import SimpleNamespace

    import torch

    from stash_core.data.jpeg_dataset import generate_synthetic_jpegs

    root = generate_synthetic_jpegs(8, image_px=16, num_classes=2, root=tmp_path)
    victim = sorted(root.rglob("*.jpg"))[0]
    victim.write_bytes(b"garbage")  # after the check: the run reads it and takes another sample
    job = {"data": "cached", "dataset": str(root), "batch_size": 2, "loader_workers": 0, "seed": 0}
    info = SimpleNamespace(kind="image", input_shape=(3, 16, 16))
    batches, dataset = worker.make_batches(job, info, torch.device("cpu"), 0, 1)
    list(itertools.islice(batches, 4))  # one epoch: every file read once
    assert worker.corrupt_reads(dataset, torch.device("cpu")) == 1
    assert worker.corrupt_reads(None, torch.device("cpu")) is None  # synthetic batches count nothing


def test_a_data_loader_error_of_several_lines_or_none_is_said_by_its_name_and_its_lines():
    def caught(traceback_end: str) -> RuntimeError:
        head = (
            "Caught ValueError in DataLoader worker process 0.\nOriginal Traceback (most recent call last):"
        )
        return RuntimeError(f'{head}\n  File "x.py", line 1, in f\n{traceback_end}')

    said = worker.error_text(caught("ValueError: bad\nsee a: b"))
    assert said == "ValueError: bad see a: b (in a data loader process)"
    assert worker.error_text(caught("KeyError")) == "KeyError (in a data loader process)"


def test_stash_s_own_error_is_its_sentence_and_a_model_that_raises_is_named_with_its_own_error(tmp_path):
    """A model that raised in a worker's first forward was said as 'UsageError: model m.py:make fails on input
    shape 3,2,2: ValueError: ...': Stash's class name, and the shape as the cause (it passed the check
    before the launch; that rank's own code raised)."""
    from stash_core.errors import UsageError
    from stash_core.zoo import build_model

    path = tmp_path / "m.py"
    path.write_text(
        "import torch\n\n"
        "class M(torch.nn.Module):\n"
        "    def __init__(self):\n"
        "        super().__init__()\n"
        "        self.fc = torch.nn.Linear(12, 4)\n\n"
        "    def forward(self, x):\n"
        "        raise ValueError('boom\\non rank one')\n\n"
        "def make(num_classes=4):\n"
        "    return M()\n"
    )
    with pytest.raises(UsageError) as caught:
        build_model(f"{path}:make", input_shape=(3, 2, 2))
    assert worker.error_text(caught.value) == f"model {path}:make raised ValueError: boom on rank one"
    assert worker.error_text(UsageError("the data set has no files")) == "the data set has no files"
