"""One parser each for sizes, rates and durations (stash_core.units)."""

from __future__ import annotations

import math

import pytest

from stash_core.errors import UsageError
from stash_core.units import parse_duration_s, parse_size_bytes, rate_bps


@pytest.mark.parametrize(
    ("text", "size_bytes"),
    [
        ("4KiB", 4096),
        ("256MiB", 256 * 2**20),
        ("1GB", 10**9),
        ("4096", 4096),
        ("1.5 kib", 1536),
        ("2gib", 2 * 2**30),
        ("1TiB", 2**40),  # read, then refused as too large by name, not as "invalid size"
    ],
)
def test_sizes(text, size_bytes):
    assert parse_size_bytes(text) == size_bytes


@pytest.mark.parametrize("text", ["", "0", "-4KiB", "4 parsecs", "KiB", "nan", "inf", "1e999x"])
def test_bad_sizes_name_the_field(text):
    with pytest.raises(UsageError, match="invalid --max-size"):
        parse_size_bytes(text, "--max-size")


@pytest.mark.parametrize("text", ["0.5B", "0.9b", "0.3", "0.0001KiB"])
def test_less_than_one_byte_is_refused_not_rounded_down_to_nothing(text):
    with pytest.raises(UsageError, match="less than one byte"):
        parse_size_bytes(text, "--min-size")


@pytest.mark.parametrize(
    ("text", "bare_unit", "bits_per_s"),
    [
        ("1gbit", None, 1e9),
        ("200mbit", None, 2e8),
        ("10mbps", None, 8e7),
        ("25", "gbit", 25e9),
        (25, "gbit", 25e9),
        (0.5, "gbit", 5e8),
    ],
)
def test_rates(text, bare_unit, bits_per_s):
    assert rate_bps(text, bare_unit) == pytest.approx(bits_per_s)


@pytest.mark.parametrize("text", ["25", "1 gigabit", "", None, True, math.inf, math.nan, "-1gbit", "0mbit"])
def test_what_is_not_a_rate_is_none(text):
    assert rate_bps(text) is None


def test_durations():
    assert parse_duration_s("1ms") == pytest.approx(1e-3)
    assert parse_duration_s("250us") == pytest.approx(250e-6)
    assert parse_duration_s("0") == 0.0
    with pytest.raises(UsageError, match="invalid --latency"):
        parse_duration_s("5", "--latency")


def test_a_size_is_said_in_the_unit_that_reads_best():
    from stash_core.units import size_words

    assert [size_words(v) for v in (512, 983_655, 1.5 * 2**30)] == ["512 B", "961 KiB", "1.5 GiB"]
