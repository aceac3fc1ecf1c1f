"""The Compare page in Streamlit's AppTest: catalog instances not measured are shown predicted, beside the
measured ones and marked apart; the verdict stays with the measured runs."""

from __future__ import annotations

from pathlib import Path

from streamlit.testing.v1 import AppTest

REPO = Path(__file__).resolve().parents[2]


def test_predicted_instances_sit_beside_the_measured_ones(populated_db: Path) -> None:
    app = AppTest.from_file(str(REPO / "pages" / "compare.py"), default_timeout=120)
    app.run()
    assert not app.exception and not app.error
    table = app.dataframe[0].value
    sources = table["Source"].tolist()
    measured = [s for s in sources if s.startswith("● measured")]
    predicted = [s for s in sources if s.startswith("◇ predicted ±")]
    assert len(measured) == 2 and len(predicted) >= 5 and len(measured) + len(predicted) == len(sources)
    names = table["Configuration"].tolist()
    assert all(name.endswith("· predicted") for name, s in zip(names, sources, strict=True) if s in predicted)
    assert any("p4d.24xlarge" in name for name in names)  # the job has 2 workers: no 1-GPU instance
    assert not any("g4dn.xlarge" in name for name in names)
    captions = " ".join(c.value for c in app.caption)
    assert "◇ predicted" in captions and "Fastest predicted" in captions
    fastest = " ".join(m.value for m in app.markdown).split("Fastest")[1].split("Cheapest")[0]
    assert "predicted" not in fastest  # the verdict compares measurements only

    app.toggle(key="cmp-predicted").set_value(False).run()
    assert not app.exception
    assert app.dataframe[0].value["Source"].tolist() == measured
