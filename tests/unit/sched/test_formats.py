"""Readers of the public traces, each on a small file in its format written here."""

from __future__ import annotations

import json

import pytest

from stash_core.errors import UsageError
from stash_core.sched import load_trace, load_trace_counted
from stash_core.sched.trace import BLOX_SPEED

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
    assert load_trace_counted(path, None, "philly")[1] == 1  # application_3, left out: counted, to be said


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
    assert load_trace_counted(tmp_path / "pai_job_table.csv", None, "pai2020")[1] == 1  # j3
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
    assert load_trace_counted(tmp_path / "cluster_log.csv", None, "helios")[1] == 1


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
        ("philly", "not json", "philly trace is not valid JSON"),
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


def philly_job(**fields):
    job = {"jobid": "app_1", "user": "u", "submitted_time": "2017-10-03 10:00:00",
           "attempts": [{"start_time": "2017-10-03 10:05:00", "end_time": "2017-10-03 10:15:00",
                         "detail": [{"ip": "m1", "gpus": ["gpu0", "gpu1"]}]}]}  # fmt: skip
    return {**job, **fields}


def timed(detail):
    return [{"start_time": "2017-10-03 10:05:00", "end_time": "2017-10-03 10:15:00", "detail": detail}]


@pytest.mark.parametrize(
    "log, message",
    [
        ([philly_job(attempts="xyz")], "Philly job app_1 attempts must be a list, got \"xyz\""),
        ([philly_job(attempts=[5])], "Philly job app_1 attempts: each attempt must be an object, got 5"),
        ([philly_job(attempts=[None])],
         "Philly job app_1 attempts: each attempt must be an object, got null"),
        ([philly_job(attempts=timed([5]))], "Philly job app_1 detail: each entry must be an object"),
        ([philly_job(attempts=timed({"ip": "m1"}))], "Philly job app_1 detail must be a list"),
        ([philly_job(attempts=timed([{"ip": "m1", "gpus": "abcdefgh"}]))],
         "Philly job app_1 detail gpus must be a list, got \"abcdefgh\""),
        ([philly_job(jobid=None), philly_job(jobid=None)],
         "Philly job 1 (by position): jobid must be text, got null"),
        ([philly_job(), philly_job()], "Philly jobid app_1 is given twice (jobs 1 and 2)"),
        ([philly_job(submitted_time=5)], "Philly job app_1: times must be text YYYY-MM-DD HH:MM:SS, got 5"),
        ([philly_job(submitted_time="2017-13-01")], "Philly job app_1: \"2017-13-01\" is not a time"),
        ([philly_job(jobid="a\nb", attempts="x")], "Philly job \"a\\nb\" attempts must be a list"),
        ([philly_job(attempts=[])], "the Philly trace has no job with GPUs and a run time"),
    ],
)  # fmt: skip
def test_bad_philly_jobs_are_refused_naming_job_and_field(tmp_path, log, message):
    path = tmp_path / "cluster_job_log"
    path.write_text(json.dumps(log))
    with pytest.raises(UsageError) as refused:
        load_trace(path, fmt="philly")
    assert str(refused.value).startswith(f"{path}: {message}")  # the file named first, values as JSON


PAI_JOB = "j1,inst1,u1,Terminated,1000,5000\n"
PAI_TASK = "j1,worker,4,Terminated,1010,2010,600,29.3,100,V100\n"


@pytest.mark.parametrize(
    "jobs, tasks, message",
    [
        (PAI_JOB, PAI_TASK.replace(",100,", ",inf,"),
         "pai_task_table.csv line 1, column plan_gpu: inf is not a finite number"),
        (PAI_JOB, PAI_TASK + "j1,ps,-4,Terminated,1010,2010,600,29.3,100,V100\n",
         "pai_task_table.csv line 2, column inst_num: -4 is below 0"),
        (PAI_JOB, PAI_TASK.replace("V100", "V100,x,y"), "pai_task_table.csv: 12 columns, expected 10"),
        (PAI_JOB.replace("5000", "5000,x"), PAI_TASK, "pai_job_table.csv: 7 columns, expected 6"),
        (PAI_JOB.replace("1000", "-inf"), PAI_TASK,
         "pai_job_table.csv line 1, column start_time: -inf is not a finite number"),
        (PAI_JOB, PAI_TASK.replace("1010", "soon"), "pai_task_table.csv line 1, column start_time: 'soon' is "
         "not a number"),
        (PAI_JOB, PAI_TASK.replace(",100,", ",nan,"),
         "pai_task_table.csv line 1, column plan_gpu: nan is not a finite number"),
        (PAI_JOB, PAI_TASK + "j1,ps,1,Terminated,3000,2500,600,29.3,100,V100\n",
         "pai_task_table.csv line 2, column end_time: 2500 is before the task's start_time 3000"),
        (PAI_JOB + ",inst2,u2,Terminated,1000,5000\n", PAI_TASK,
         "pai_job_table.csv line 2, column job_name: is empty"),
    ],
)  # fmt: skip
def test_bad_pai_values_are_refused_naming_file_line_and_column(tmp_path, jobs, tasks, message):
    (tmp_path / "pai_job_table.csv").write_text(jobs)
    (tmp_path / "pai_task_table.csv").write_text(tasks)
    with pytest.raises(UsageError) as refused:
        load_trace(tmp_path / "pai_job_table.csv", fmt="pai2020")
    assert message in str(refused.value)


def test_pai_job_names_are_read_as_written(tmp_path):
    (tmp_path / "pai_job_table.csv").write_text("NA,i1,u,Terminated,100,200\nnull,i2,u,Terminated,150,400\n")
    (tmp_path / "pai_task_table.csv").write_text(
        "NA,worker,2,Terminated,100,200,600,29,50,V100\nnull,worker,1,Terminated,150,400,600,29,100,V100\n"
    )
    jobs = load_trace(tmp_path / "pai_job_table.csv", fmt="pai2020")
    assert [(j.job_id, j.gpus, j.submit_s, j.duration_s) for j in jobs] == [
        ("NA", 1, 0.0, 100.0),
        ("null", 1, 50.0, 250.0),
    ]  # ids as written: pandas would read NA and null as missing and drop both jobs


HELIOS = "job_id,user,vc,gpu_num,cpu_num,node_num,state,submit_time,start_time,end_time,duration,queue\n"


def helios_row(job_id="a1", gpus="8", submit="2020-04-01 00:00:10", duration="3600"):
    return f"{job_id},u1,vc1,{gpus},16,1,COMPLETED,{submit},,,{duration},0\n"


def test_helios_epoch_seconds_and_offsets_are_read_as_such(tmp_path):
    path = tmp_path / "cluster_log.csv"
    path.write_text(HELIOS + helios_row(submit="1585699200") + helios_row("a2", submit="1585699260.5"))
    jobs = load_trace(path, fmt="helios")
    assert [(j.job_id, j.submit_s) for j in jobs] == [("a1", 0.0), ("a2", 60.5)]  # seconds, not ns
    path.write_text(HELIOS + helios_row(submit="2020-04-01 08:00:00+08:00")
                    + helios_row("a2", submit="2020-04-01 01:00:00Z"))  # fmt: skip
    assert [(j.job_id, j.submit_s) for j in load_trace(path, fmt="helios")] == [("a1", 0.0), ("a2", 3600.0)]


@pytest.mark.parametrize(
    "rows, message",
    [
        (helios_row() + helios_row("a2", submit="garbage"),
         "line 3, column submit_time: 'garbage' is not a datetime"),
        (helios_row() + helios_row("a2", submit=""), "line 3, column submit_time: is empty"),
        (helios_row() + helios_row("a2", submit="2020-04-01 00:00:00+08:00"),
         "line 3, column submit_time: '2020-04-01 00:00:00+08:00' mixes time zones with line 2"),
        (helios_row() + helios_row("a2", submit="1585699200"),
         "line 3, column submit_time: '1585699200' is epoch seconds but line 2 ('2020-04-01 00:00:10') is a "
         "datetime: the file mixes the two forms"),
        (helios_row(submit="1585699200") + helios_row("a2", submit="1585699260")
         + helios_row("a3", submit="2020-04-01 00:00:10+08:00"),
         "line 4, column submit_time: '2020-04-01 00:00:10+08:00' is a datetime but line 2 ('1585699200') is "
         "epoch seconds"),
        (helios_row(submit="1585699200") + helios_row("a2", submit="soon"),
         "line 3, column submit_time: 'soon' is not a datetime"),
        (helios_row(gpus="2.5"), "job a1 num_gpu must be a positive whole number, got 2.5"),
        (helios_row(gpus="1e30"), "job a1 num_gpu must be at most 1000000, got 1e+30"),
        (helios_row(gpus="many"), "line 2, column gpu_num: 'many' is not a number"),
        (helios_row(duration="-5"), "line 2, column duration: -5 is below 0"),
        (helios_row() + helios_row(), "job id a1 is given twice"),
        (helios_row().replace(",0\n", ",0,extra\n"), "the rows have 13 fields, expected 12"),
    ],
)  # fmt: skip
def test_bad_helios_rows_are_refused_not_dropped(tmp_path, rows, message):
    path = tmp_path / "cluster_log.csv"
    path.write_text(HELIOS + rows)
    with pytest.raises(UsageError) as refused:
        load_trace(path, fmt="helios")
    assert message in str(refused.value)
