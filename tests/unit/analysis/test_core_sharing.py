"""On the CPU, a profile whose workers take every core says that its interconnect stall holds their
competition for the cores, beside the probe's all-reduce time."""

from __future__ import annotations

from stash_core.analysis.core_sharing import core_sharing_note


def _doc(workers: int, threads: int, cores: int, device: str = "cpu", nodes: int = 1) -> dict:
    return {
        "spec": {"device": device, "workers_per_node": workers, "threads_per_worker": threads,
                 "nodes": nodes},
        "fingerprint": {"cpu_cores_logical": cores},
        "breakdown": {"stalls": {"interconnect": {"seconds": 0.181}},
                      "communication": {"interconnect": {"allreduce_s": 0.0031}}},
    }  # fmt: skip


def test_workers_that_take_every_core_are_said_to_share_them_with_the_probes_time():
    note = core_sharing_note(_doc(2, 1, 2))
    assert note is not None and "share this machine's 2 cores" in note and "181" in note and "3.1" in note


def test_no_note_where_the_cores_are_not_all_taken_or_on_a_gpu():
    assert core_sharing_note(_doc(2, 1, 8)) is None
    assert core_sharing_note(_doc(2, 4, 8, device="cuda")) is None
    assert core_sharing_note(_doc(1, 2, 2)) is None


def test_stash_show_gives_the_note_the_profile_printed(tmp_path, capsys):
    """The note was printed only by the profile: `stash show` of the stored run left it out."""
    from result_docs import result_doc

    from stash_core import store
    from stash_core.cli import main

    doc = result_doc(workers=2, stalls={"compute": 0.2, "interconnect": 0.181},
                     spec_extra={"threads_per_worker": 1})  # fmt: skip
    doc["fingerprint"]["cpu_cores_logical"] = 2
    store.ingest_result(tmp_path / "r.duckdb", doc)
    assert main(["show", doc["run_id"], "--db", str(tmp_path / "r.duckdb")]) == 0
    assert "note: the 2 workers x 1 thread(s) share this machine's 2 cores" in capsys.readouterr().out


def test_a_job_of_one_worker_per_machine_hears_its_interconnect_stall_is_r1_s():
    """--workers 1 --nodes 2: R1 puts both workers on one machine as the network's reference, and their cost
    to each other there was printed as the job's interconnect stall, without a word (on a GPU too)."""
    note = core_sharing_note(_doc(1, 1, 2, nodes=2))
    first, second = note.splitlines()
    assert first.startswith("note: the job runs one worker per machine, so it has no interconnect of its own")
    assert "its 2 workers cost each other on one machine in R1" in first
    assert "share this machine's 2 cores" in second  # R1's 2 workers x 1 thread take both cores
    gpu = core_sharing_note(_doc(1, 1, 64, device="cuda", nodes=2))
    assert gpu.startswith("note: the job runs one worker per machine") and "\n" not in gpu


def test_on_remote_hosts_the_note_counts_r1s_workers_on_the_first_hosts_cores():
    """2 workers x 2 hosts: R1 ran 2 workers on the first host, which the note called 4 on this machine."""
    doc = _doc(2, 1, 64, nodes=2)
    doc["spec"]["hosts"] = ["a", "b"]
    doc["phases"] = [{"name": "R0", "workers": 1, "nodes": 1}, {"name": "R1", "workers": 2, "nodes": 1}]
    doc["hosts"] = [{"host": "a", "cpu_count": 2}, {"host": "b", "cpu_count": 2}]
    note = core_sharing_note(doc)
    assert note is not None and "the 2 workers x 1 thread(s) share the first host's 2 cores" in note
    del doc["hosts"]  # a run stored before the database kept its hosts: nothing is said of their cores
    assert core_sharing_note(doc) is None
    stored = _doc(2, 1, 2, nodes=2)
    stored["phases"] = [{"phase": "R1", "workers": 2, "nodes": 1}]  # the store's phase rows
    assert "the 2 workers x 1 thread(s) share this machine's 2 cores" in core_sharing_note(stored)


def test_a_stored_run_of_the_emulated_cluster_keeps_the_note_its_profile_printed():
    """`stash show` (and the breakdown page) left it out for every run on the emulated cluster: the store
    keeps no host's cpu_count, but the cluster's nodes are namespaces of the machine the fingerprint is of."""
    doc = _doc(2, 1, 2, nodes=2)
    doc["spec"].update(hosts=["root@10.213.1.10", "root@10.213.1.11"], cluster="emulated")
    doc["phases"] = [{"phase": "R1", "workers": 2, "nodes": 1}]
    assert "the 2 workers x 1 thread(s) share the first host's 2 cores" in core_sharing_note(doc)
    doc["spec"]["cluster"] = None  # remote hosts: their cores are not this machine's
    assert core_sharing_note(doc) is None


def test_a_stored_run_on_remote_hosts_keeps_the_note_in_show_and_on_the_page(tmp_path, capsys):
    """The store kept no host's cpu_count, so `stash show` and the Stall breakdown page dropped the note the
    profile printed for a run on remote hosts: the runs table now keeps what each host reported."""
    from result_docs import result_doc

    from stash_core import store
    from stash_core.cli import main
    from stash_core.views.breakdown import run_detail

    doc = result_doc(workers=2, nodes=2, stalls={"compute": 0.2, "interconnect": 0.181, "network": 0.05},
                     spec_extra={"threads_per_worker": 1, "hosts": ["a", "b"]})  # fmt: skip
    doc["fingerprint"]["cpu_cores_logical"] = 64  # the launching machine's: not where R1 ran
    doc["hosts"] = [{"host": name, "hostname": name, "cpu_count": 2} for name in ("a", "b")]
    db = tmp_path / "r.duckdb"
    store.ingest_result(db, doc)
    assert store.get_run(db, doc["run_id"])["hosts"] == doc["hosts"]
    said = "the 2 workers x 1 thread(s) share the first host's 2 cores"
    assert main(["show", doc["run_id"], "--db", str(db)]) == 0
    assert said in capsys.readouterr().out
    assert said in run_detail(db, doc["run_id"])["core_sharing"]


def test_hosts_edited_by_hand_into_anything_give_no_note_and_no_crash():
    doc = _doc(2, 1, 64, nodes=2)
    doc["spec"]["hosts"] = ["a", "b"]
    doc["phases"] = [{"name": "R1", "workers": 2, "nodes": 1}]
    for hosts in ({"a": 1}, ["a"], [{"cpu_count": "two"}], [{"cpu_count": True}], [{"cpu_count": -2}], 7):
        doc["hosts"] = hosts
        assert core_sharing_note(doc) is None, hosts
