"""`stash spot-profile`'s report: what it measured, and why a T_comp is missing."""

from __future__ import annotations

from stash_core.cli.spot_profile import format_profile

FIELDS = {
    "param_bytes": 46.8e6, "solo_bandwidth_mbps": 900.0, "a1": 0.5, "b1": -0.6, "batch_per_gpu": 32,
    "compute_s": {}, "source": {},
    "contention_fit": {"ps_mbps": 1000.0, "rms_error": 0.01, "max_error": 0.02,
                       "points": [[2, 0.1], [4, 0.4]], "bandwidth": [], "notes": []},
}  # fmt: skip


def test_a_missing_database_is_said_as_such_not_as_missing_profiles(tmp_path):
    missing_db = tmp_path / "missing.duckdb"
    text = format_profile(FIELDS, ["g3.4xlarge"], tmp_path / "w.json", missing_db)
    assert f"no database at {missing_db}" in text and "no stored profile" not in text
    existing_db = tmp_path / "r.duckdb"
    existing_db.write_bytes(b"")
    text = format_profile(FIELDS, ["g3.4xlarge"], tmp_path / "w.json", existing_db)
    assert "no stored profile for g3.4xlarge at batch 32 per GPU" in text and "no database" not in text


def test_a_negative_b1_is_written_as_a_subtraction():
    text = format_profile(FIELDS, [], "w.json")
    assert "P = min(0.5 sqrt(n) - 0.6, 1)" in text and "+ -" not in text


def test_the_notes_follow_where_the_workload_was_written():
    text = format_profile(FIELDS, [], "w.json", None, ["compute_s of a left out: ..."])
    assert text.splitlines()[-2:] == ["measured on this machine over loopback; written to w.json",
                                      "note: compute_s of a left out: ..."]
