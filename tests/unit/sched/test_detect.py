"""A trace's format told from its columns, and refused with the list of formats when its columns say
none or several."""

from __future__ import annotations

import pytest

from stash_core.errors import UsageError
from stash_core.sched.detect import detect_format


@pytest.mark.parametrize(
    "content, expected",
    [
        ("job_id,num_gpu,submit_time,duration\n1,2,0,100\n", "tiresias"),
        ("job_id,user,vc,gpu_num,cpu_num,node_num,state,submit_time,start_time,end_time,duration,queue\n"
         "a,u,v,1,4,1,COMPLETED,2020-04-01 00:00:10,2020-04-01 00:00:11,2020-04-01 00:10:11,600,0\n",
         "helios"),
        ('[{"jobid": "a", "attempts": []}]', "philly"),
        ("j1,i1,u1,Terminated,100,200\n", "pai2020"),
        ("\ufeffjob_id,num_gpu,submit_time,iterations,iteration_s\n", "tiresias"),
    ],
)  # fmt: skip
def test_the_format_is_told_from_the_columns(tmp_path, content, expected):
    path = tmp_path / "trace.csv"
    path.write_text(content)
    assert detect_format(path) == expected


@pytest.mark.parametrize(
    "content, says",
    [
        ("job_id,num_gpu,gpu_num,submit_time,duration\n1,2,2,0,100\n", "fits tiresias and helios"),
        ("a,b,c\n1,2,3\n", "fits none of them"),
    ],
)
def test_an_ambiguous_or_unknown_file_is_refused_with_the_formats(tmp_path, content, says):
    path = tmp_path / "trace.csv"
    path.write_text(content)
    with pytest.raises(UsageError, match=f"{says}.*--trace-format, one of tiresias, philly, pai2020, helios"):
        detect_format(path)


def test_an_empty_file_is_said_to_be_empty(tmp_path):
    path = tmp_path / "trace.csv"
    path.write_text("\ufeff\n")
    with pytest.raises(UsageError, match="is empty"):
        detect_format(path)


@pytest.mark.parametrize("first_byte", [b"[", b"{", b"j", b"\x8f"])
def test_a_binary_file_is_refused_whatever_its_first_byte(tmp_path, first_byte):
    """A database file starts with a checksum: its first byte may be '[' or '{', as a JSON trace's is."""
    path = tmp_path / "results.duckdb"
    path.write_bytes(first_byte + b"\x17\x03\x00\x00\x00\x00\x00DUCK" + bytes(64))
    with pytest.raises(UsageError, match="cannot tell the format of trace .*: it is binary"):
        detect_format(path)
