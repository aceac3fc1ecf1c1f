"""A trace whose header names a column twice is refused, not read with one of the two silently."""

from __future__ import annotations

import pytest

from stash_core.errors import UsageError
from stash_core.sched.formats import read_trace_frame


@pytest.mark.parametrize("fmt", ["tiresias", "helios"])
def test_a_column_named_twice_is_refused(fmt, tmp_path):
    trace = tmp_path / "t.csv"
    trace.write_text("job_id,num_gpu,gpu_num,submit_time,duration,duration\na,1,1,0,100,5\n")
    with pytest.raises(UsageError, match="names the column 'duration' twice"):
        read_trace_frame(trace, fmt)


def test_a_name_of_a_hundred_thousand_characters_is_refused(capsys):
    from stash_core.cli.main import main

    assert main(["instances", "add", "x" * 100_000, "--accelerator", "V100"]) == 2
    err = capsys.readouterr().err
    assert "at most 200" in err and len(err) < 400
