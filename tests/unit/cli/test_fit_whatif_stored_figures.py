"""`stash fit`, `whatif` and `show` on stored figures that are odd: text with terminal escapes, stalls that
every profile measured as none, a prediction that cannot be made, invalid (inf, NaN, negative) figures."""

from __future__ import annotations

import duckdb
import pytest
from test_cli_decisions import result_doc, stash

from stash_core.cli.show import show_run
from stash_core.errors import UsageError
from stash_core.store import ingest_result


def _fit_db(tmp_path, interconnect_s=lambda index: 0.01 + 0.01 * index):
    db = str(tmp_path / "c.duckdb")
    for index in range(5):
        stalls = {"compute": 0.2, "interconnect": interconnect_s(index)}
        counts = {"grad_bytes": (index + 1) * 10**7, "grad_tensor_count": 10 + 7 * index}
        ingest_result(db, result_doc(f"m{index}", stalls=stalls, instance="lab", **counts))
    return db


def test_fit_prints_stored_text_as_data_never_as_a_terminal_escape(tmp_path, capsys):
    db = _fit_db(tmp_path)  # a file holding control characters is refused: the rows are edited
    with duckdb.connect(db) as con:
        con.execute("UPDATE runs SET instance = chr(27) || '[31mlab' || chr(10) || 'forged line' || chr(27) "
                    "|| '[0m', model = model || chr(27) || '[2J'")  # fmt: skip
    assert stash("fit", "--residuals", "--db", db) == 0
    out = capsys.readouterr().out
    assert "\x1b" not in out and "\\x1b[31mlab" in out and "\\x1b[2J" in out
    assert not any(line.startswith("forged line") for line in out.splitlines())  # a label is one line


def test_stalls_every_profile_measured_as_none_predict_none(tmp_path, capsys):
    """They read "no model could be fitted" and "too few profiled models" over five profiles."""
    db = _fit_db(tmp_path, interconnect_s=lambda index: 0.0)
    with duckdb.connect(db) as con:
        con.execute("UPDATE stalls SET status = 'clamped_zero' WHERE stall = 'interconnect'")
    assert stash("fit", "--db", db) == 0
    out = capsys.readouterr().out
    assert "every profiled model measured none of this stall" in out and "no best model" not in out
    assert stash("fit", "--predict", "resnet18", "--workers", "2", "--instance", "lab", "--db", db) == 0
    assert "interconnect stall of resnet18: 0 ms" in capsys.readouterr().out


def test_fit_predict_exits_2_when_nothing_could_be_predicted(tmp_path, capsys):
    missing = str(tmp_path / "none.duckdb")
    # a database that is not there is one line, as plain fit says it (it went on to "no model" for each)
    with pytest.raises(UsageError) as refused:
        stash("fit", "--predict", "resnet18", "--workers", "4", "--db", missing)
    assert str(refused.value) == (
        f"no database at {missing} (--db or $STASH_DB chooses one): nothing to fit (--link-gbps gives a wire "
        "time without profiles)"
    )
    empty = str(tmp_path / "empty.duckdb")
    duckdb.connect(empty).close()  # a database with nothing in it
    assert stash("fit", "--predict", "resnet18", "--workers", "4", "--db", empty) == 2
    said = capsys.readouterr()
    assert "no model" in said.out
    # exit status 2 is one line on stderr (it was stdout only); a link's rate is what answers a stall
    # never profiled, and the line names the options that give it (--bandwidth is the network's: one
    # machine has none)
    assert said.err.strip() == (
        "stash: no stall of resnet18 could be predicted (see above); a stall never profiled is bounded by "
        "its link's rate: give --link-gbps"
    )
    assert stash("fit", "--predict", "resnet18", "--workers", "4", "--nodes", "2", "--db", empty) == 2
    assert capsys.readouterr().err.strip().endswith("give --bandwidth (network) or --link-gbps")
    assert stash("fit", "--predict", "resnet18", "--workers", "4", "--link-gbps", "10", "--db", missing) == 0
    assert f"no database at {missing}" in capsys.readouterr().out  # said, and the wire time given
    # a network's bandwidth on one machine was ignored without a word
    with pytest.raises(UsageError, match="^--bandwidth is the network's between machines: give --nodes 2"):
        stash("fit", "--predict", "resnet18", "--workers", "4", "--bandwidth", "1gbit", "--db", empty)
    # one link for every configuration (--link-gbps) dropped the network's --bandwidth without a word
    with pytest.raises(UsageError, match="^--bandwidth and --link-gbps both give the link's rate"):
        stash("fit", "--predict", "resnet18", "--workers", "4", "--nodes", "2", "--bandwidth", "1gbit",
              "--link-gbps", "10", "--db", empty)  # fmt: skip


def test_whatif_on_invalid_stored_figures_answers_none_and_keeps_its_json_valid(tmp_path, capsys):
    db = str(tmp_path / "w.duckdb")
    doc = result_doc("x", nodes=2, stalls={"compute": 0.2, "interconnect": 0.05, "network": 0.1})
    ingest_result(db, doc)
    with duckdb.connect(db) as con:
        con.execute("UPDATE stalls SET seconds = 'nan'::DOUBLE WHERE stall = 'network'")
    assert stash("whatif", doc["run_id"], "--db", db) == 0
    assert "network stall is stored without a figure" in capsys.readouterr().out
    with duckdb.connect(db) as con:
        con.execute("UPDATE runs SET iteration_s = 'inf'::DOUBLE")
    assert "no valid iteration time" in show_run(db, doc["run_id"])
    with pytest.raises(UsageError, match="has no iteration time"):  # never an Infinity in the JSON
        stash("whatif", doc["run_id"], "--json", "--db", db)


def test_whatif_says_a_network_stall_already_within_its_target(tmp_path, capsys):
    """It said the current bandwidth "brings network stall to 20%" of a stall already at a few percent."""
    db = str(tmp_path / "w.duckdb")
    doc = result_doc("x", nodes=2, stalls={"compute": 0.5, "interconnect": 0.05, "network": 0.03})
    ingest_result(db, doc)
    assert stash("whatif", doc["run_id"], "--target-share", "0.2", "--db", db) == 0
    out = capsys.readouterr().out
    assert "within the 20% target" in out and "brings network stall" not in out


def test_fit_without_network_stalls_names_a_campaign_that_measures_them(tmp_path, capsys):
    """"Run `stash campaign`" was said for the network stall: a campaign's default plan is one machine, and
    the command as written was refused (it needs --family, --models or --script)."""
    db = str(tmp_path / "one.duckdb")
    ingest_result(db, result_doc("m0", stalls={"compute": 0.2, "interconnect": 0.01}, instance="lab"))
    assert stash("fit", "--stall", "network", "--db", db) == 0
    said = capsys.readouterr().out
    quoted = said.split("`")[1::2]
    commands = [part for part in quoted if part.startswith("stash campaign")]
    assert commands[:2] == [
        "stash campaign --family resnet", "stash campaign --family resnet --nodes 2 --bandwidths 1gbit"
    ], said
    assert stash(*commands[1].split()[1:], "--dry-run", "--db", db) == 0
    assert "2 worker(s) x 2 nodes at 1gbit" in capsys.readouterr().out  # it would measure the network


def test_a_fit_of_one_profile_says_one_run_and_no_legend_for_a_mark_not_shown(tmp_path, capsys):
    """"1 runs of 1 models", and "* = best" under a table where no model was best."""
    db = str(tmp_path / "one.duckdb")
    stalls = {"compute": 0.2, "interconnect": 0.01}
    ingest_result(db, result_doc("m0", stalls=stalls, instance="lab", grad_bytes=10**7, grad_tensor_count=10))
    assert stash("fit", "--db", db) == 0
    out = capsys.readouterr().out
    assert "|  1 run of 1 model" in out and "no best model" in out and "* = best" not in out


def test_a_prediction_of_a_model_profiled_in_the_configuration_shows_what_was_measured(tmp_path):
    """fit --predict of a profiled model gave the fit's 10.27 ms alone, where its run measured 8.01."""
    from stash_core.cli.fit import format_prediction
    from stash_core.decide.fit import fit_stall_models, predict_stall

    db = _fit_db(tmp_path)
    report = fit_stall_models(db, stalls=("interconnect",))
    row = report.observations.iloc[1]
    counts = {feature: float(row[feature]) for feature in ("grad_bytes", "grad_tensor_count", "layer_count")}
    where = {"stall": "interconnect", "workers_per_node": int(row["workers_per_node"]), "instance": "lab"}
    answer = predict_stall(db, counts={"name": "m1", **counts}, report=report, **where)
    assert answer["measured_s"] == pytest.approx(float(row["stall_s"])) and answer["measured_runs"] == 1
    measured_ms, spread_ms = float(row["stall_s"]) * 1e3, float(row["ci95_s"]) * 1e3
    assert answer["measured_ci95_s"] == pytest.approx(float(row["ci95_s"]))  # one run: its own interval
    said = f"profiled in this configuration: {measured_ms:.2f} ms ± {spread_ms:.2f} per iteration (mean of 1"
    assert said in format_prediction(answer)
    other = predict_stall(db, counts={"name": "new", **counts, "grad_bytes": 1.5e7}, report=report, **where)
    assert other["measured_s"] is None and "profiled" not in format_prediction(other)


def test_a_best_fit_worse_than_the_mean_says_it_is_no_useful_one_and_predictions_keep_three_figures():
    """A best model of R² -0.109 and 379% held-out error was starred with no word, and its prediction read
    311.97 ms on a ±379% estimate."""
    from stash_core.cli.fit import milliseconds
    from stash_core.decide.fit.report import weak_fit

    said = weak_fit(-0.109, 3.792)
    assert said is not None and "R² below 0" in said and "held-out error over 100%" in said
    assert weak_fit(0.9, 0.12) is None and weak_fit(None, None) is None
    assert milliseconds(0.31197) == "312" and milliseconds(0.0005123) == "0.512" and milliseconds(0.0) == "0"


def test_fit_says_a_run_whose_machine_contradicts_its_label_is_grouped_under_that_label(tmp_path, capsys):
    """A CPU run labelled g4dn.xlarge made the group "cpu / 2 workers / g4dn.xlarge" with no word, where
    predict and recommend set it aside."""
    db = tmp_path / "r.duckdb"
    stalls = {"compute": 0.1, "interconnect": 0.02}
    doc = result_doc("resnet18", instance="g4dn.xlarge", workers=2, stalls=stalls)
    ingest_result(db, doc)
    assert stash("fit", "--db", str(db)) == 0
    out = capsys.readouterr().out
    assert f"warning: instance label g4dn.xlarge of run {doc['run_id']} does not fit the machine" in out
    assert "fitted in the group named g4dn.xlarge" in out
