"""The pages on `stash predict` say what the code does: both of its forms, the GPU ratio's fitted share and
one figure for its held-out error."""

from __future__ import annotations

import inspect
import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def _text(page: str) -> str:
    return " ".join((REPO / page).read_text(encoding="utf-8").split())  # lines joined: prose wraps anywhere


def test_the_synopses_of_predict_give_its_script_run_form_and_say_gpu_is_for_a_model() -> None:
    for page in ("docs/commands.md", "docs/predictions.md"):
        lines = (REPO / page).read_text(encoding="utf-8").splitlines()
        assert any(line.startswith("stash predict --script-run RUN_ID ") for line in lines), page
        assert "refused with `--script-run`" in _text(page), page


def test_the_gpu_ratio_is_stated_with_the_share_its_rows_use_and_one_error() -> None:
    from stash_core.decide.predict.stated_error import fitted_script_share

    text = _text("docs/predictions.md")
    share = fitted_script_share()
    assert f"at {share:g} for the peaks and {1 - share:g} for the bandwidth" in text
    [(error, pairs)] = re.findall(
        r"\| a profiled script, GPU ratio \| [^|]+ \| ([\d.]+%) \((\d+) pairs\) \|", text
    )
    assert f"same {pairs} pairs, the blend by {error} " in text
    assert "peaks 0.35" not in text


def test_the_python_predict_says_gpu_is_refused_with_a_script_run() -> None:
    import stash_core

    assert "refused with `script_run`" in inspect.getdoc(stash_core.predict)
