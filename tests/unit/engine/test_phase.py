"""One launch of a run (engine/phase.py): what the worker's result says goes into the record and the warnings;
a data set that lost a file since it was scanned fails the run, a measurement failure, not a refusal of the
user's input."""

from __future__ import annotations

from pathlib import Path

from stash_core.engine import phase
from stash_core.engine.data_setup import DataSetup
from stash_core.engine.phase import fill_record
from stash_core.engine.plan import PhasePlan
from stash_core.engine.progress import Reporter
from stash_core.spec import ProfileSpec


def _result(bad_files: int | None) -> dict:
    samples = {"iteration_s": [0.1, 0.11, 0.1, 0.12], "data_s": [0.01] * 4}
    return {"samples": samples, "warmup_iterations": 2, "rank_skew_s": 0.0, "stop_reason": "fixed",
            "bad_files": bad_files}  # fmt: skip


def test_reads_of_images_that_could_not_be_decoded_in_the_run_are_said() -> None:
    spec = ProfileSpec(model="resnet10", batch_size=4, iterations="4")
    warnings: list[str] = []
    fill_record({"name": "R2", "nodes": 1}, _result(3), spec, warnings)
    # the check reads a JPEG's header and end only: damage inside one is found here, not blamed on a change
    assert len(warnings) == 1 and warnings[0].startswith(
        "R2: 3 read(s) of images that could not be decoded were replaced by other samples"
    )
    assert "damage inside one, or a file changed since" in warnings[0]
    for clean in (0, None):
        warnings = []
        fill_record({"name": "R3", "nodes": 1}, _result(clean), spec, warnings)
        assert warnings == []


def _cold_run_with_a_file_gone(tmp_path: Path, monkeypatch, gone_name: str) -> tuple[dict, Path]:
    """R2 of a data set whose file `gone_name` is gone before it: (its record, the gone file's path)."""
    kept, gone = tmp_path / "a.jpg", tmp_path / gone_name
    kept.write_bytes(b"x" * 100)
    monkeypatch.setattr(phase, "run_workers", lambda *args, **kwargs: pytest_fail())
    data = DataSetup(root=tmp_path, files=[kept, gone], total_bytes=200, images=2, classes=1)
    spec = ProfileSpec(model="resnet18", batch_size=1, dataset=str(tmp_path))
    return phase.run_phase(PhasePlan("R2", 1, 1, "cold"), spec, data, Reporter(), []), gone


def test_a_data_file_gone_before_the_cold_run_fails_that_run(tmp_path: Path, monkeypatch) -> None:
    record, gone = _cold_run_with_a_file_gone(tmp_path, monkeypatch, "b.jpg")
    assert record["status"] == "failed" and not record.get("usage_error")
    assert record["error"].startswith("the data set changed during the profile: cannot open data file")
    assert str(gone) in record["error"]


def pytest_fail():
    raise AssertionError("no worker starts for a run whose data set is gone")


def test_a_gone_data_file_whose_name_holds_a_newline_is_named_on_one_line(tmp_path: Path, monkeypatch):
    record, _ = _cold_run_with_a_file_gone(tmp_path, monkeypatch, "b\nR3: 0.0010 s forged.jpg")
    assert "\n" not in record["error"] and "b\\nR3: 0.0010 s forged.jpg" in record["error"]


def test_a_fixed_count_cut_short_by_a_cap_is_said_with_what_to_raise() -> None:
    """--iterations 5000 stopped at the --max-iterations cap (2000 by default) with fewer kept iterations than
    asked, and nothing said so."""
    spec = ProfileSpec(model="resnet10", batch_size=4, iterations="10")
    warnings: list[str] = []
    capped = {**_result(None), "stop_reason": "max_iterations"}
    fill_record({"name": "R0", "nodes": 1}, capped, spec, warnings)
    assert warnings == ["R0: stopped at the --max-iterations cap after 4 kept iterations of the 10 asked "
                        "(--iterations): raise --max-iterations"]  # fmt: skip
    warnings = []
    fill_record({"name": "R0", "nodes": 1}, {**_result(None), "stop_reason": "max_time"}, spec, warnings)
    assert warnings[0].startswith("R0: stopped at the --max-phase-seconds cap after 4")


def test_a_fixed_count_cut_short_is_said_once_a_run_and_other_cap_warnings_are_the_pooled_runs() -> None:
    """The profile dropped every launch's cap warning for the pooled run's, which says nothing of a fixed
    --iterations cut short: R0 kept 10 of the 50 asked without a word."""
    from stash_core.engine.phase import launch_warnings_kept

    short = ("R0: stopped at the --max-iterations cap after 10 kept iterations of the 50 asked "
             "(--iterations): raise --max-iterations")  # fmt: skip
    adaptive = "R0: stopped at the time cap after 70 kept iterations with ± 9.0% (target ± 5%)"
    other = "R0: another warning"
    assert launch_warnings_kept("R0", [short, other, adaptive], []) == [short, other]
    again = short.replace("after 10", "after 11")  # the next launch's: said once a run
    assert launch_warnings_kept("R0", [again, other], [short, other]) == []
    assert launch_warnings_kept("R1", [short.replace("R0", "R1")], [short]) == [short.replace("R0", "R1")]


def test_a_watched_launch_asks_for_the_ranks_stacks_and_its_collectives_outwait_the_watch(monkeypatch):
    """A rank hung in the loop was reported on rank 0, whose collective timed out (after 120 s) before the
    hang watch fired, and no rank's stack was kept: the workers now dump their stacks when the watch stops
    the launch (launch/hang_watch.hung_error), which the record keeps, and wait in a collective as long as
    the launch may run."""
    from stash_core.errors import MeasurementError

    seen: dict = {}

    def hung(module, job, per_node, nodes, remote, on_line, timeout_s, *rest):
        seen.update(job=job, timeout_s=timeout_s)
        error = MeasurementError("a rank is hung: ...; rank 1 was in forward (m.py, line 3)")
        error.stderr_tail = ["rank 1:", '  File "m.py", line 3 in forward']
        raise error

    monkeypatch.setattr(phase, "run_workers", hung)
    spec = ProfileSpec(model="resnet10", batch_size=4, iterations="4", device="cpu")
    record = phase.run_phase(PhasePlan("R1", 2, 1, "synthetic"), spec, DataSetup(), Reporter(), [])
    assert seen["job"]["dump_stacks"] is True and seen["job"]["pg_timeout_s"] >= seen["timeout_s"]
    assert record["status"] == "failed" and "rank 1 was in forward" in record["error"]
    assert record["stderr_tail"] == ["rank 1:", '  File "m.py", line 3 in forward']
