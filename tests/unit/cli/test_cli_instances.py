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


def test_a_price_kept_but_dated_anew_with_the_other_is_said(tmp_path, capsys):
    """A row has one date for its prices: setting its spot price dated its on-demand price today, unsaid."""
    db = ["--db", str(tmp_path / "r.duckdb")]
    prices = ["--on-demand-usd-per-h", "2.5", "--spot-usd-per-h", "1", "--price-date", "2023-01-01"]
    cpu = ["--accelerator", "none", "--accelerator-count", "0"]
    assert main(["instances", "add", "box", *cpu, *prices, *db]) == 0
    capsys.readouterr()
    assert main(["instances", "set", "box", "--spot-usd-per-h", "0.9", *db]) == 0
    out = capsys.readouterr().out
    assert "note: box's on-demand price $2.5/h, of 2023-01-01, is now dated " in out
    assert "a row has one date for its prices (--price-date gives theirs)" in out
    for again in (["--spot-usd-per-h", "0.8"], ["--spot-usd-per-h", "0.7", "--price-date", "2024-01-01"],
                  ["--vcpus", "4"]):  # fmt: skip
        assert main(["instances", "set", "box", *again, *db]) == 0
        assert "now dated" not in capsys.readouterr().out
