"""`stash instances add|set`: what predictions will take an instance's GPU for is said when it is given."""

from __future__ import annotations

from stash_core.cli.main import main


def test_a_short_gpu_name_says_which_variant_it_is_taken_for(tmp_path, capsys):
    db = ["--db", str(tmp_path / "r.duckdb")]
    assert main(["instances", "add", "box", "--accelerator", "H100", "--accelerator-count", "8", *db]) == 0
    out = capsys.readouterr().out
    assert "note: box's GPU name is ambiguous: taken as NVIDIA H100 SXM 80 GB (could also be" in out
    assert "NVIDIA H100 PCIe 80 GB" in out and "give the full name to choose" in out
    assert main(["instances", "set", "box", "--accelerator", "NVIDIA H100 PCIe 80 GB", *db]) == 0
    assert "ambiguous" not in capsys.readouterr().out


def test_a_gpu_the_table_lacks_is_warned_of_with_the_names_it_is_close_to(tmp_path, capsys):
    db = ["--db", str(tmp_path / "r.duckdb")]
    assert (
        main(["instances", "add", "box", "--accelerator", "H1OO SXM", "--accelerator-count", "1", *db]) == 0
    )
    err = capsys.readouterr().err
    assert (
        "warning: 'H1OO SXM' is not in Stash's accelerator table (did you mean H100-SXM" in err
    )
    assert "`stash predict` and `stash recommend` leave box out" in err
    # a change to another field says nothing of the GPU again; a CPU machine's has none to say
    assert main(["instances", "set", "box", "--vcpus", "8", *db]) == 0
    assert "warning" not in capsys.readouterr().err
    cpu = ["--accelerator", "none", "--accelerator-count", "0"]
    assert main(["instances", "add", "cpu-box", *cpu, *db]) == 0
    assert "warning" not in capsys.readouterr().err
