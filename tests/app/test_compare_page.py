"""The Compare page in Streamlit's AppTest: catalog instances not measured are shown predicted, beside the
measured ones and marked apart; the verdict stays with the measured runs."""

from __future__ import annotations

from pathlib import Path

from streamlit.testing.v1 import AppTest

from stash_core.views.common import plain

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


def test_instances_without_a_prediction_say_why(populated_db: Path) -> None:
    from stash_core.store import connect

    with connect(populated_db) as con:  # a GPU box whose accelerator Stash's table does not know
        con.execute(
            "INSERT INTO instances (name, provider, accelerator, accelerator_count, vcpus, memory_gib, "
            "on_demand_usd_per_h) VALUES ('tpu-box', 'test', 'Google TPU v9', 4, 8, 32, 1.0)"
        )
    app = AppTest.from_file(str(REPO / "pages" / "compare.py"), default_timeout=120)
    app.run()
    assert not app.exception and not app.error
    warning = " ".join(w.value for w in app.warning)
    # The job runs 2 workers per machine: 1-GPU instances and the unknown accelerator are named, not dropped.
    assert "catalog instance(s) not predicted" in warning
    assert plain("accelerator not in Stash's table: 1") in warning
    assert "fewer GPUs than the job's workers" in warning
    listed = " ".join(m.value for m in app.expander[-1].markdown)
    assert plain("tpu-box: not predictable - Google TPU v9 has no entry in the accelerator table") in listed
    assert plain("g4dn.xlarge: not predicted - it has 1 GPU(s), the job uses 2 per machine") in listed
    assert "small-vm" not in listed  # measured for this job: not missing
