"""The Schedule page's simulation has bounds: a synthetic trace too large for the page is refused before it
starts, and any simulation is stopped at the page's time limit, leaving no process behind."""

from __future__ import annotations

import subprocess
import sys
import time

import psutil
import pytest

from stash_core.errors import UsageError
from stash_core.views import schedule


def _no_worker(*args, **kwargs):
    raise AssertionError("a simulation worker was started")


def test_a_synthetic_trace_on_too_many_nodes_is_refused_at_once(tmp_path, monkeypatch):
    monkeypatch.setattr(schedule.subprocess, "run", _no_worker)  # refused before any worker starts
    with pytest.raises(UsageError, match="stash schedule") as refused:
        schedule.simulate_within_limit(tmp_path / "r.duckdb", files=None, synthetic_jobs=50,
                                       cluster=(1000, 1000, 1), out_dir=tmp_path / "out")  # fmt: skip
    assert "1,000,000 nodes" in str(refused.value)
    assert not (tmp_path / "r.duckdb").exists()


def test_a_simulation_past_the_time_limit_is_stopped(tmp_path):
    before = {p.pid for p in psutil.Process().children(recursive=True)}
    started = time.monotonic()
    with pytest.raises(UsageError, match=r"ran past the page's 2 s limit.*stash schedule"):
        schedule.simulate_within_limit(tmp_path / "r.duckdb", files=None, synthetic_jobs=5000,
                                       node_gbps=100.0, time_limit_s=2.0,
                                       out_dir=tmp_path / "out")  # fmt: skip
    assert time.monotonic() - started < 60  # not the whole simulation's 90 s and more
    assert {p.pid for p in psutil.Process().children(recursive=True)} <= before
    assert not list((tmp_path / "out").glob("sim-*.json"))


def test_within_the_limit_the_document_comes_back_and_is_stored(tmp_path):
    doc = schedule.simulate_within_limit(tmp_path / "r.duckdb", files=None, synthetic_jobs=20,
                                         policies=["fifo"], out_dir=tmp_path / "out")  # fmt: skip
    assert doc["jobs"] > 0 and [e["policy"] for e in doc["policies"]] == ["fifo"]
    assert (tmp_path / "out" / f"{doc['simulation_id']}.json").exists()


def test_the_simulation_worker_starts_without_torch():
    # each simulation on the page starts one: torch (some 2 s of CPU) was loaded through the views package
    program = "import sys, stash_core.views.schedule_worker; print('torch' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and done.stdout.split() == ["False"], done.stderr[-2000:]


def test_an_uploaded_trace_over_the_pages_job_limit_says_the_pages_limit(tmp_path, monkeypatch):
    monkeypatch.setattr(schedule, "MAX_PAGE_JOBS", 2)
    trace = b"job_id,num_gpu,submit_time,duration\nj1,4,0,100\nj2,2,10,50\nj3,1,20,30\n"
    with pytest.raises(UsageError) as refused:
        schedule.simulate(tmp_path / "r.duckdb", files=[("t.csv", trace)], out_dir=tmp_path / "out")
    said = f"the trace has 3 jobs; the page simulates at most 2: {schedule.BEYOND_THE_PAGE}"
    assert str(refused.value) == said
    assert not (tmp_path / "out").exists()


def test_bad_input_is_one_line(tmp_path):
    with pytest.raises(UsageError, match="choose at least one policy"):
        schedule.simulate_within_limit(tmp_path / "r.duckdb", files=None, policies=[], out_dir=tmp_path)


def test_without_an_out_dir_the_result_file_goes_next_to_the_database(tmp_path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    db = tmp_path / "sub" / "r.duckdb"
    db.parent.mkdir()
    schedule.simulate_within_limit(db, files=None, synthetic_jobs=5, tuning="online", policies=["fifo"])
    assert len(list((db.parent / "results").glob("sim-*.json"))) == 1 and not (tmp_path / "results").exists()


PARENT_DIES = """
import json, os, subprocess, sys, time
worker = subprocess.Popen([sys.executable, "-m", "stash_core.views.schedule_worker"], stdin=subprocess.PIPE,
                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
request = {"db": sys.argv[1], "files": None, "synthetic_jobs": 50, "cluster": [1000, 1000, 1],
           "tuning": "online", "out_dir": sys.argv[2]}
worker.stdin.write(json.dumps(request).encode())
worker.stdin.close()
print(worker.pid, flush=True)
time.sleep(6)  # the worker has started its simulation (some 90 s on 2 cores)
os._exit(0)  # as a killed dashboard server: no chance to stop it
"""


def test_the_simulation_s_process_ends_with_the_server_that_started_it(tmp_path):
    import subprocess
    import sys

    argv = [sys.executable, "-c", PARENT_DIES, str(tmp_path / "r.duckdb"), str(tmp_path / "out")]
    parent = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    worker_pid = int(parent.stdout.split()[0])
    deadline = time.monotonic() + 10
    while psutil.pid_exists(worker_pid) and psutil.Process(worker_pid).status() != psutil.STATUS_ZOMBIE:
        if time.monotonic() > deadline:
            psutil.Process(worker_pid).kill()
            raise AssertionError("the simulation went on after its server died")
        time.sleep(0.1)


TRACE = b"job_id,num_gpu,submit_time,duration,network_slowdown\nA,3,0,1000,1.5\nB,2,10,1000,1.5\n"


def test_several_uploaded_traces_are_refused_not_all_but_the_first_left_out(tmp_path):
    """Two traces uploaded together: the first was simulated and the second left out without a word."""
    files = [("abc.csv", TRACE), ("one.csv", TRACE)]
    with pytest.raises(UsageError, match=r"2 files uploaded \(abc.csv, one.csv\): a simulation reads one"):
        schedule.simulate(tmp_path / "r.duckdb", files=files, policies=["fifo"], tuning="given",
                          out_dir=tmp_path / "out")  # fmt: skip


def test_an_uploaded_trace_s_error_names_the_file_as_uploaded_not_the_server_s_copy(tmp_path):
    files = [("x.csv", b"job_id,num_gpu,submit_time,duration\n\xff,1,0,5\n")]
    with pytest.raises(UsageError) as refused:
        schedule.simulate(tmp_path / "r.duckdb", files=files, policies=["fifo"], tuning="given",
                          out_dir=tmp_path / "out")  # fmt: skip
    assert str(refused.value).startswith("x.csv: ") and "stash-trace-" not in str(refused.value)


def test_the_summary_names_the_spread_count_as_what_it_counts():
    """Two 6-GPU jobs on nodes of 4 GPUs each run on two nodes, as tight as they can: the count of jobs
    placed looser than their tightest is 0, which the page called "jobs placed across nodes"."""
    from stash_core.sched import Cluster, Policy, TraceJob
    from stash_core.sched.report import run_simulation

    jobs = [TraceJob(name, 6, 0.0, 100.0, None, 2.0, "trace") for name in ("a", "b")]
    doc, _ = run_simulation(jobs, Cluster(1, 3, 4), [Policy("fifo")], tuning="given", trace="t.csv",
                            trace_format="tiresias")  # fmt: skip
    table = schedule.summary_table(doc)
    assert "jobs placed across nodes" not in table.columns
    assert table["jobs placed looser than their tightest"].tolist() == [0]
    assert "label" not in table.columns and table["policy"].tolist() == ["fifo"]  # said once, not twice


def test_past_simulations_say_their_time_zone(tmp_path):
    """The list's "created" read 2026-12-06 10:06 with no zone: the times are stored in UTC."""
    db = tmp_path / "r.duckdb"
    schedule.simulate_within_limit(db, files=None, synthetic_jobs=8, policies=["fifo"], tuning="given",
                                   out_dir=tmp_path / "out")  # fmt: skip
    past = schedule.past_simulations(db)
    table = schedule.past_table(past)
    assert list(table.columns)[:3] == ["simulation", "created (UTC)", "trace"]
    assert len(table.iloc[0]["created (UTC)"]) == len("2026-12-06 10:06:52")
    # the picker named ids alone, which the table did not list: it names when, what and the id
    sim = past.iloc[0]["simulation_id"]
    label = schedule.simulation_labels(past)[sim]
    assert label.startswith(table.iloc[0]["created (UTC)"] + " UTC · ") and label.endswith(f"GPUs · {sim}")
    assert " · 8 jobs reported on " in label and table.iloc[0]["simulation"] == sim


def test_an_upload_too_large_for_the_page_is_refused_before_it_is_read(tmp_path, monkeypatch):
    """A 72 MB trace of 3 million jobs took 55 s to be refused for its jobs: it was read first."""
    huge = b"job_id,num_gpu,submit_time,duration\n" + b"x" * (schedule.MAX_PAGE_TRACE_BYTES + 1)

    def read(*args, **kwargs):
        raise AssertionError("the trace was read before its size was refused")

    monkeypatch.setattr(schedule, "_uploaded_trace", read)
    with pytest.raises(UsageError, match=r"^the uploaded trace is 64 MiB; the page reads at most 64 MiB"):
        schedule.simulate(tmp_path / "r.duckdb", files=[("big.csv", huge)], out_dir=tmp_path / "out")
    assert not (tmp_path / "r.duckdb").exists()
    with pytest.raises(UsageError, match=r"^the uploaded trace is 64 MiB"):  # as the page calls it
        schedule.simulate_within_limit(tmp_path / "r.duckdb", files=[("big.csv", huge)],
                                       out_dir=tmp_path / "out")  # fmt: skip


def test_the_page_says_what_the_simulation_assumed_as_the_command_does(tmp_path):
    """The command said there was no link model and that a third of the jobs took Blox's default penalty;
    the page said neither, and a past simulation lost its cluster's line."""
    db = tmp_path / "r.duckdb"
    doc = schedule.simulate_within_limit(db, files=None, synthetic_jobs=60, policies=["fifo"], tuning="given",
                                         out_dir=tmp_path / "out")  # fmt: skip
    lines = schedule.assumption_lines(doc)
    assert lines[0] == "no link model: crossing more switches than needed multiplies the stall by 2"
    assert lines[1].startswith("network sensitivity (slowdown when spread) of the jobs: ")
    assert "from Blox's default penalty (model not in Blox's list: 0.8 of the speed)" in lines[1]
    past = schedule.stored_document(schedule.past_simulations(db), doc["simulation_id"])
    assert schedule.assumption_lines(past) == lines[:1]  # the database keeps the links, not the sources
    assert past["cluster"] == doc["cluster"]


def test_the_summary_names_each_policy_once_with_its_setting():
    from stash_core.sched import Cluster, Policy, TraceJob
    from stash_core.sched.report import run_simulation

    jobs = [TraceJob(name, 2, 0.0, 100.0, None, 2.0, "trace") for name in ("a", "b")]
    doc, _ = run_simulation(jobs, Cluster(1, 3, 4), [Policy("fifo"), Policy("delay", delay_s=300)],
                            tuning="given", trace="t.csv", trace_format="tiresias")  # fmt: skip
    table = schedule.summary_table(doc)
    assert table["policy"].tolist() == ["fifo", "delay 300 s"] and "label" not in table.columns


def test_the_line_charts_name_each_policy_as_the_summary_does():
    from stash_core.sched import Cluster, Policy, TraceJob
    from stash_core.sched.report import run_simulation

    jobs = [TraceJob(name, 2, 0.0, 100.0, None, 2.0, "trace") for name in ("a", "b")]
    doc, _ = run_simulation(jobs, Cluster(1, 3, 4), [Policy("delay", delay_s=300)], tuning="given",
                            trace="t.csv", trace_format="tiresias")  # fmt: skip
    for frame in (schedule.cdf_frame(doc), schedule.timeline_frame(doc)):
        assert set(frame["policy"]) == {"delay 300 s"}  # "delay" beside bars named "delay 300 s"
