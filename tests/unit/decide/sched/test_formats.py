"""Readers of the public traces, each on a small file in its format written here."""

from __future__ import annotations

import json

import pytest

from stash_core.decide.sched import load_trace
from stash_core.decide.sched.trace import BLOX_SPEED
from stash_core.errors import UsageError

DRAWN = {1 / speed for speed in BLOX_SPEED.values()}


def test_philly_cluster_job_log(tmp_path):
    log = [
        {"status": "Pass", "vc": "vc1", "jobid": "application_1", "user": "u1",
         "submitted_time": "2017-10-03 10:00:00",
         "attempts": [
             {"start_time": "2017-10-03 10:05:00", "end_time": "2017-10-03 10:15:00",
              "detail": [{"ip": "m1", "gpus": ["gpu0", "gpu1"]}]},
             {"start_time": "2017-10-03 11:00:00", "end_time": "2017-10-03 11:30:00",
              "detail": [{"ip": "m1", "gpus": ["gpu0", "gpu1"]}, {"ip": "m2", "gpus": ["gpu0", "gpu1"]}]},
         ]},
        {"status": "Killed", "vc": "vc1", "jobid": "application_2", "user": "u2",
         "submitted_time": "2017-10-03 09:59:00",
         "attempts": [{"start_time": "2017-10-03 10:00:00", "end_time": "2017-10-03 10:01:40",
                       "detail": [{"ip": "m3", "gpus": ["gpu3"]}]}]},
        {"status": "Failed", "vc": "vc2", "jobid": "application_3", "user": "u3",
         "submitted_time": "2017-10-03 10:00:00", "attempts": [{"start_time": None, "end_time": None,
                                                               "detail": []}]},
    ]  # fmt: skip
    path = tmp_path / "cluster_job_log"
    path.write_text(json.dumps(log))
    jobs = load_trace(path, fmt="philly")
    assert [(j.job_id, j.gpus, j.submit_s, j.duration_s) for j in jobs] == [
        ("application_2", 1, 0.0, 100.0),
        ("application_1", 4, 60.0, 600.0 + 1800.0),
    ]  # 4 GPUs: the most an attempt held; 40 min: both attempts; application_3 never ran
    assert all(j.slowdown in DRAWN and j.slowdown_source == "drawn (blox)" for j in jobs)


def test_pai_2020_job_and_task_tables(tmp_path):
    (tmp_path / "pai_job_table.csv").write_text(
        "j1,inst1,u1,Terminated,1000,5000\nj2,inst2,u2,Terminated,1100,1500\nj3,inst3,u3,Failed,1200,1300\n"
    )
    (tmp_path / "pai_task_table.csv").write_text(
        "j1,worker,4,Terminated,1010,2010,600,29.3,100,V100\n"
        "j1,ps,1,Terminated,1005,2020,600,29.3,,\n"
        "j2,tensorflow,1,Terminated,1100,1400,400,10,50,T4\n"
        "j3,worker,2,Failed,1200,1300,400,10,0,P100\n"
    )
    jobs = load_trace(tmp_path / "pai_job_table.csv", fmt="pai2020")
    # j1: 4 x 100% = 4 GPUs, tasks 1005-2020; j2: half a GPU rounds up to 1; j3 asks no GPU
    assert [(j.job_id, j.gpus, j.submit_s, j.duration_s) for j in jobs] == [
        ("j1", 4, 0.0, 1015.0),
        ("j2", 1, 100.0, 300.0),
    ]
    with pytest.raises(UsageError, match="pai_task_table.csv beside it"):
        (tmp_path / "other").mkdir()
        (tmp_path / "other" / "pai_job_table.csv").write_text("j1,i,u,Terminated,1,2\n")
        load_trace(tmp_path / "other" / "pai_job_table.csv", fmt="pai2020")


def test_helios_cluster_log(tmp_path):
    (tmp_path / "cluster_log.csv").write_text(
        "job_id,user,vc,gpu_num,cpu_num,node_num,state,submit_time,start_time,end_time,duration,queue\n"
        "a1,u1,vc1,8,16,1,COMPLETED,2020-04-01 00:00:10,2020-04-01 00:01:00,2020-04-01 01:01:00,3600,50\n"
        "a2,u2,vc1,0,4,1,COMPLETED,2020-04-01 00:00:00,2020-04-01 00:00:00,2020-04-01 00:10:00,600,0\n"
        "a3,u3,vc2,16,32,2,FAILED,2020-04-01 00:02:00,2020-04-01 00:03:00,2020-04-01 00:04:00,60,60\n"
    )
    jobs = load_trace(tmp_path / "cluster_log.csv", fmt="helios")
    assert [(j.job_id, j.gpus, j.submit_s, j.duration_s) for j in jobs] == [
        ("a1", 8, 0.0, 3600.0),
        ("a3", 16, 110.0, 60.0),
    ]  # the CPU job a2 is left out; arrivals from the first GPU job


def test_tiresias_csv_with_user_estimates(tmp_path):
    (tmp_path / "t.csv").write_text(
        "job_id,num_gpu,submit_time,iterations,model_name,duration,interval,estimate_s\n"
        "1,2,0,100,resnet50,500,10,400\n2,4,30,100,vgg16,60,10,\n"
    )
    jobs = load_trace(tmp_path / "t.csv", fmt="tiresias")
    assert [(j.job_id, j.gpus, j.duration_s, j.estimate_s) for j in jobs] == [
        ("1", 2, 500.0, 400.0),
        ("2", 4, 60.0, None),
    ]


@pytest.mark.parametrize(
    "fmt, content, message",
    [
        ("philly", "{}", "JSON list"),
        ("philly", "not json", "not a philly trace"),
        ("helios", "job_id,user\n1,u\n", "needs column(s) gpu_num, submit_time, duration"),
        ("helios", "job_id,gpu_num,submit_time,duration\n1,0,2020-01-01,5\n", "has no job with GPUs"),
        ("tiresias", "", "not a CSV"),
    ],
)
def test_bad_trace_files_are_refused_with_the_reason(tmp_path, fmt, content, message):
    path = tmp_path / "trace"
    path.write_text(content)
    with pytest.raises(UsageError, match=message.replace("(", r"\(").replace(")", r"\)")):
        load_trace(path, fmt=fmt)
