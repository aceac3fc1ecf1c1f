"""What the stall charts and tables say is legible: no legend entry cut at the page's width, a table of runs
that tells a stall within the noise from one at zero, and stall colours apart for red-green colour blindness.
"""

from __future__ import annotations

import itertools
from types import SimpleNamespace

import pandas as pd
import pytest

from pages import _stalls, compare
from stash_core import views
from stash_core.views.common import STALL_COLORS, STALL_LABELS


def breakdown_row(run_id: str, stalls: dict[str, tuple[float, float, str]]) -> dict:
    """One stall_breakdown row: each stall's (seconds, ci95_s, status); the iteration is their sum."""
    iteration_s = sum(seconds for seconds, _, _ in stalls.values())
    row = {"run_id": run_id, "run_label": run_id, "iteration_s": iteration_s, "iteration_ci95_s": 0.001}
    for stall, (seconds, ci95_s, status) in stalls.items():
        row.update({f"{stall}_s": seconds, f"{stall}_ci95_s": ci95_s, f"{stall}_status": status,
                    f"{stall}_share": seconds / iteration_s})  # fmt: skip
    return row


RESOLVED = breakdown_row("r-sure", {"compute": (0.20, 0.002, "measured"), "cpu": (0.05, 0.001, "measured")})
NOISY = breakdown_row(
    "r-noisy",
    {
        "compute": (0.20, 0.002, "measured"),
        "cpu": (0.002, 0.01, "measured"),
        "disk": (0.0, 0.03, "clamped_zero"),
    },
)


def legends(spec: dict) -> list[dict]:
    layers = spec.get("layer", [spec])
    return [layer["encoding"]["color"]["legend"] for layer in layers if "color" in layer.get("encoding", {})]


def test_the_stall_legend_is_laid_in_rows_short_enough_for_a_page_column() -> None:
    frame = views.breakdown.stall_long_frame(pd.DataFrame([RESOLVED, NOISY]), "seconds")
    found = legends(_stalls.breakdown_chart(frame, "seconds").to_dict())
    assert found
    # five stalls and the remainder: six entries, in rows of three at most (one row cut the last at 1280 px)
    assert all(legend.get("columns") and legend["columns"] <= 3 for legend in found)


def test_each_bar_is_named_above_it_so_the_bars_and_the_legend_have_the_page_columns_width() -> None:
    frame = views.breakdown.stall_long_frame(pd.DataFrame([RESOLVED, NOISY]), "seconds")
    layers = _stalls.breakdown_chart(frame, "seconds").to_dict()["layer"]
    # names beside the bars took half of an 800 px column, and the legend over the bars was cut ("Inter…")
    y_axes = [layer["encoding"]["y"].get("axis", "shown") for layer in layers if "y" in layer["encoding"]]
    assert y_axes and all(axis is None for axis in y_axes)
    names = [layer for layer in layers if layer["mark"]["type"] == "text"]
    assert len(names) == 1 and names[0]["encoding"]["text"]["field"] == "run_label"
    assert names[0]["mark"]["baseline"] == "bottom" and names[0]["mark"]["dy"] < 0  # above the bar, not on it


def test_the_compare_legend_puts_one_source_a_row_in_its_half_width_chart() -> None:
    frame = pd.DataFrame(
        {
            "configuration": ["a", "b"],
            "hours": [1.0, 2.0],
            "source": ["measured", "predicted"],
            "expected_error": [None, 0.2],
            "runs": [3, 0],
        }  # fmt: skip
    )
    found = legends(compare.bar(frame, "hours", "Hours", ".2f", True).to_dict())
    assert [legend.get("columns") for legend in found] == [1]


def test_the_table_of_runs_names_the_stalls_not_resolved() -> None:
    table = views.breakdown.breakdown_table(pd.DataFrame([RESOLVED, NOISY]))
    assert list(table["not_resolved"]) == ["", "CPU pre-processing, Disk fetch"]
    for measure in ("seconds", "share"):
        shown, config = _stalls.runs_table(table, measure)
        assert list(shown["not_resolved"]) == ["", "CPU pre-processing, Disk fetch"]
        assert "Not resolved" in str(config["not_resolved"])


def test_the_table_of_runs_gives_each_stall_its_spread_as_the_iteration_has_it() -> None:
    """The iteration read "205 ms ± 4 ms" beside stalls of bare seconds to four decimals, as sure as it."""
    table = views.breakdown.breakdown_table(pd.DataFrame([RESOLVED, NOISY]))
    shown, _ = _stalls.runs_table(table, "seconds")
    assert list(shown["cpu_s"]) == ["50 ms ± 1 ms", "2 ms ± 10 ms"], list(shown["cpu_s"])
    shares, _ = _stalls.runs_table(table, "share")
    assert " ± " in shares["compute_share"].iloc[0] and shares["compute_share"].iloc[0].endswith("%")


def test_the_table_of_runs_has_no_such_column_when_every_stall_is_resolved() -> None:
    shown, config = _stalls.runs_table(views.breakdown.breakdown_table(pd.DataFrame([RESOLVED])), "seconds")
    assert "not_resolved" not in shown.columns and "not_resolved" not in config


# Machado, Oliveira and Fernandes (2009), deuteranopia at severity 1, on linear RGB.
DEUTERANOPIA = (
    (0.367322, 0.860646, -0.227968),
    (0.280085, 0.672501, 0.047413),
    (-0.011820, 0.042940, 0.968881),
)


def linear(channel: float) -> float:
    return channel / 12.92 if channel <= 0.04045 else ((channel + 0.055) / 1.055) ** 2.4


def lab(rgb_linear: tuple[float, ...]) -> tuple[float, float, float]:
    """CIE L*a*b* (D65) of a linear sRGB colour."""
    r, g, b = (min(max(c, 0.0), 1.0) for c in rgb_linear)
    xyz = (0.4124 * r + 0.3576 * g + 0.1805 * b, 0.2126 * r + 0.7152 * g + 0.0722 * b,
           0.0193 * r + 0.1192 * g + 0.9505 * b)  # fmt: skip
    f = [
        t ** (1 / 3) if t > 216 / 24389 else (24389 / 27 * t + 16) / 116
        for t in (xyz[0] / 0.95047, xyz[1] / 1.0, xyz[2] / 1.08883)
    ]
    return 116 * f[1] - 16, 500 * (f[0] - f[1]), 200 * (f[1] - f[2])


def seen_with_deuteranopia(hex_colour: str) -> tuple[float, float, float]:
    rgb = [linear(int(hex_colour[i : i + 2], 16) / 255) for i in (1, 3, 5)]
    return lab(tuple(sum(m * c for m, c in zip(row, rgb, strict=True)) for row in DEUTERANOPIA))


# The remainder is told apart by its dashed outline and lighter fill as well as its grey, so only the named
# stalls are held to a distance here.
@pytest.mark.parametrize("first, second", list(itertools.combinations(STALL_COLORS, 2)))
def test_every_two_stall_colours_stay_apart_with_deuteranopia(first: str, second: str) -> None:
    seen = [seen_with_deuteranopia(STALL_COLORS[stall]) for stall in (first, second)]
    distance = sum((a - b) ** 2 for a, b in zip(*seen, strict=True)) ** 0.5
    # CIE76 distance; about 2 is a just-noticeable difference, the network/disk pair was once 1.7
    assert distance > 8, f"{STALL_LABELS[first]} and {STALL_LABELS[second]}: {distance:.1f}"


def test_an_interval_far_past_the_bars_is_cut_at_the_edge_not_drawn_whole() -> None:
    """One run's CPU share at 81% ± 190% ran the Overview's share axis to 280%: its bars in a third."""
    wide = breakdown_row("r-wide", {"compute": (0.02, 0.002, "measured"), "cpu": (0.16, 0.38, "measured")})
    frame = views.breakdown.stall_long_frame(pd.DataFrame([RESOLVED, wide]), "share")
    spec = _stalls.breakdown_chart(frame, "share").to_dict()
    domain = spec["layer"][0]["encoding"]["x"]["scale"]["domain"]
    assert domain[0] == 0.0 and domain[1] == pytest.approx(1.5)  # half the bars' length again
    rules = [layer for layer in spec["layer"] if layer["mark"]["type"] == "rule"]
    assert rules and all(layer["mark"]["clip"] for layer in rules)
    [edge] = [layer for layer in spec["layer"] if layer["mark"]["type"] == "point"]  # the cut one is marked
    assert edge["mark"]["shape"] == "triangle-right"
    narrow = views.breakdown.stall_long_frame(pd.DataFrame([RESOLVED]), "share")
    narrow_spec = _stalls.breakdown_chart(narrow, "share").to_dict()
    assert narrow_spec["layer"][0]["encoding"]["x"]["scale"]["domain"][1] <= 1.5
    assert not [layer for layer in narrow_spec["layer"] if layer["mark"]["type"] == "point"]  # none cut


@pytest.mark.parametrize(("theme", "expected"), [("dark", _stalls.DARK_INK), ("light", _stalls.LIGHT_INK),
                                                 (None, _stalls.LIGHT_INK)])  # fmt: skip
def test_names_and_intervals_are_drawn_in_the_readers_theme_text_colour(monkeypatch, theme, expected) -> None:
    # a fixed dark grey left the bar names and the intervals unreadable on the dark theme
    monkeypatch.setattr(_stalls.st, "context", SimpleNamespace(theme=SimpleNamespace(type=theme)))
    frame = views.breakdown.stall_long_frame(pd.DataFrame([RESOLVED, NOISY]), "seconds")
    frame = frame.assign(error_low=frame["value"] * 0.9, error_high=frame["value"] * 1.1)
    layers = _stalls.breakdown_chart(frame, "seconds").to_dict()["layer"]
    marks = [layer["mark"] for layer in layers]
    inked = {mark["type"]: mark.get("color") for mark in marks if mark["type"] in ("text", "rule")}
    assert inked == {"text": expected, "rule": expected}


def test_a_dark_theme_set_in_the_servers_configuration_inks_the_charts_light(monkeypatch) -> None:
    monkeypatch.setattr(_stalls.st, "context", SimpleNamespace(theme=SimpleNamespace(type="light")))
    monkeypatch.setattr(_stalls.st, "get_option", lambda name: "dark" if name == "theme.base" else None)
    assert _stalls.ink() == _stalls.DARK_INK
