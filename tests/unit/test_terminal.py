"""Text from files and users reaches the terminal as text: escape sequences shown, never run."""

from __future__ import annotations

import pytest

from stash_core.cli.main import main
from stash_core.terminal import one_line, printable


def test_control_characters_are_shown_as_escapes_and_layout_is_kept():
    assert printable("a\x1b[2Jb") == "a\\x1b[2Jb"
    assert printable("bell\x07 c1\x9b rtl\u202e") == "bell\\x07 c1\\x9b rtl\\u202e"
    assert printable("table\n\trow") == "table\n\trow"


def test_a_one_line_error_never_carries_an_escape_sequence(tmp_path, capsys):
    assert main(["show", "run\x1b]0;owned\x07", "--db", str(tmp_path / "x.duckdb")]) == 2
    err = capsys.readouterr().err
    assert "\x1b" not in err and "\x07" not in err and "\\x1b]0;owned\\x07" in err


def test_a_trace_job_id_with_a_control_character_is_refused_by_position(tmp_path, capsys):
    trace = tmp_path / "trace.csv"
    trace.write_text('job_id,num_gpu,submit_time,duration\n"a\x1b[2Jb",1,0,100\n')
    assert main(["schedule", "--trace", str(trace), "--no-store", "--out", str(tmp_path / "sims")]) == 2
    err = capsys.readouterr().err
    assert "job 1 (by position)" in err and "U+001B" in err and "\x1b" not in err
    assert not (tmp_path / "sims").exists()


def test_a_shell_word_names_the_same_text_when_pasted_and_stays_printable():
    import os
    import subprocess

    from stash_core.terminal import shell_word

    for text in ("/tmp/sp ace/my $HOME.duckdb", "it's `here`", "c1\x9b rtl\u202e back\\slash 'q'", "a\nb\tc",
                 "not-utf8-\udcff", "plain.duckdb"):  # fmt: skip
        word = shell_word(text)
        assert printable(word) == word and "\n" not in word, word
        pasted = subprocess.run(["bash", "-c", f"printf %s {word}"], capture_output=True, check=True).stdout
        assert pasted == os.fsencode(text), (text, word)
    assert shell_word("plain.duckdb") == "plain.duckdb"


def test_one_line_keeps_a_value_on_its_line_and_in_its_column() -> None:
    assert one_line("a\nb\tc\r\x1b[2J") == "a\\nb\\tc\\r\\x1b[2J"
    assert one_line(16) == "16" and one_line("plain text") == "plain text"


def test_a_long_value_is_clipped_to_its_ends_and_its_length() -> None:
    from stash_core.terminal import clipped

    assert clipped("short") == "short" and clipped("x" * 80) == "x" * 80
    long = "a" * 40 + "b" * 4000 + "c" * 30
    assert clipped(long) == "a" * 30 + "..." + "c" * 29 + " (4070 characters)"
    assert clipped(long, quoted=True) == repr("a" * 29 + "..." + "c" * 28) + " (4070 characters)"
    # within its limit, its length said (it ran 18 characters past it)
    for limit in (30, 80, 300, 600):
        for size in (limit + 1, 5 * limit, 100_000):
            assert len(clipped("x" * size, limit)) <= limit and len(clipped("x" * size, limit, True)) <= limit
    # a limit too small for its length said: never longer than the value itself
    assert clipped("xx", 1) == "xx" and clipped("x" * 100, 10) == "x...x (100 characters)"
    assert clipped("it's", quoted=True) == repr("it's")


def test_a_host_pasted_whole_on_the_command_line_is_echoed_by_its_ends(tmp_path, capsys):
    host = "h" * 5000
    argv = ["profile", "--model", "resnet10", "--batch-size", "2", "--hosts", host]
    assert main([*argv, "--db", str(tmp_path / "x.duckdb")]) == 2
    err = capsys.readouterr().err
    assert "(5000 characters)" in err and len(err) < 300, err


@pytest.mark.parametrize("text", [
    "plain", "", "\x1b[2J", "\r\n\t", "\\x1b typed", "\\\\x1b", "C:\\runs\\x", "\\", "end\\", "\\q",
    "\\u202e", "\u202e\u2066", "\x85\x00", "a\\\\b", "\\r", "'=1+1", "é\\é",
])  # fmt: skip
def test_a_csv_cell_reads_back_whole_and_holds_no_control_character(text):
    from stash_core.terminal import _CONTROL, csv_escaped, csv_unescaped

    written = csv_escaped(text)
    assert not _CONTROL.search(written)
    assert csv_unescaped(written) == text
