"""A hostile or broken result file given to `stash ingest`: fields out of range, of the wrong type, paths as
run ids, escape sequences in free text. A figure no run can have is refused in one line (exit 2) naming the
field, and the database is as it was; free text that is merely odd is stored and shown escaped, never raw.
Cases beyond tests/unit/results/test_result_file.py and tests/unit/cli/test_bad_inputs.py."""

from __future__ import annotations

import copy
import hashlib
import json
from pathlib import Path

import pytest
from support import REPO, stash_main

EXAMPLE = json.loads((REPO / "examples" / "results" / "resnet10-b8-2workers-vm-2vcpu.json").read_text())
ONE_MACHINE = "shufflenet_v2_x0_5-b16-{}-vm-{}.json"  # real data on one machine: R0, (R1,) R3, R2


def _set(path: str, value):
    def change(doc: dict) -> None:
        *parents, last = path.split(".")
        place = doc
        for key in parents:
            place = place[int(key)] if isinstance(place, list) else place[key]
        place[int(last) if isinstance(place, list) else last] = value

    return change


def _drop(key: str):
    return lambda doc: doc.pop(key)


# An epoch of one iteration whose compute stall's epoch interval is not its interval.
ONE_ITERATION_EPOCH = {
    **EXAMPLE["breakdown"],
    "iterations_per_epoch": 1,
    "epoch_s": EXAMPLE["breakdown"]["iteration_s"],
    "stalls": {"compute": {"seconds": 0.1, "ci95_s": 0.01, "epoch_ci95_s": 1e6}},
}

# (id, change of the example, what the one line says)
REFUSED = [
    ("phase-wall-negative", _set("phases.0.wall_s", -5.0), "wall_s"),
    ("phase-workers-zero", _set("phases.0.workers", 0), "workers"),
    ("phase-workers-per-node-zero", _set("phases.0.workers_per_node", 0), "workers_per_node"),
    ("phase-resident-fraction-five", _set("phases.0.resident_fraction_start", 5.0), "resident_fraction"),
    ("phase-iteration-not-object", _set("phases.0.iteration_s", -0.5), "iteration_s"),
    ("phase-iterations-negative", _set("phases.0.iterations", -3), "iterations"),
    ("phase-warmup-negative", _set("phases.0.warmup_iterations", -1), "warmup_iterations"),
    ("phase-name-empty", _set("phases.0.name", ""), "no name"),
    ("phase-name-5000", _set("phases.0.name", "R" * 5000), "phase"),
    ("breakdown-iteration-negative", _set("breakdown.iteration_s", -1.0), "breakdown.iteration_s"),
    ("breakdown-epoch-negative", _set("breakdown.epoch_s", -100.0), "breakdown.epoch_s"),
    # a completed run of 0 s was stored and averaged into its instance as the fastest
    ("breakdown-iteration-zero-completed", _set("breakdown.iteration_s", 0.0), "is 0 in a completed run"),
    ("breakdown-stall-measured-negative", _set("breakdown.stalls.compute.seconds", -1.0),
     "stall compute is measured at -1.0 s"),
    ("breakdown-ci-negative", _set("breakdown.iteration_ci95_s", -0.1), "iteration_ci95_s"),
    # figures at odds with the phase's own samples were stored beside them, and each reader saw other times
    ("phase-iterations-not-its-samples", _set("phases.0.iterations", 999),
     "phase R0 iterations is 999, but it has 30 iteration samples"),
    ("phase-n-not-its-samples", _set("phases.0.iteration_s.n", 31),
     "phase R0 iteration_s.n is 31, but it has 30"),
    ("phase-median-beyond-its-samples", _set("phases.0.iteration_s.median", 10.0),
     "phase R0 iteration_s.median is 10.0 s, outside its samples'"),
    # a stall without a figure that holds one: stored as its time, shown as not measured
    ("stall-not-measured-with-seconds", _set("breakdown.stalls.network.seconds", 0.05),
     "stall network is not_measured, but its seconds is 0.05; a stall without a figure has none"),
    # said as a missing phase ("is not a timed phase of this run")
    ("phase-mean-nan", _set("phases.0.iteration_s.mean", float("nan")),
     "stall compute is measured, but its run R0 has no mean time (iteration_s.mean nan)"),
    ("breakdown-epoch-text-inf", _set("breakdown.epoch_s", "inf"), "epoch_s"),
    ("breakdown-per-epoch-negative", _set("breakdown.iterations_per_epoch", -2), "iterations_per_epoch"),
    ("breakdown-warnings-text", _set("breakdown.warnings", "one warning"), "warnings"),
    ("spec-batch-true", _set("spec.batch_size", True), "spec.batch_size"),
    # stored before, with figures no run measured, or as a second run that prints as the first
    ("phase-mean-negative", _set("phases.0.iteration_s.mean", -5), "phase R0 iteration_s.mean is -5"),
    ("phase-part-negative", _set("phases.1.parts_mean_s.forward_s", -0.1), "parts_mean_s.forward_s"),
    ("spec-batch-zero", _set("spec.batch_size", 0), "spec.batch_size is 0; expected at least 1"),
    ("breakdown-epoch-contradicts", _set("breakdown", {**EXAMPLE["breakdown"], "iterations_per_epoch": 10,
                                                       "epoch_s": 123.0}), "breakdown.epoch_s is 123.0"),
    # an epoch time without the iterations of an epoch, or a stall's epoch other than its seconds times them
    ("breakdown-epoch-without-iterations", _set("breakdown.epoch_s", 55.0),
     "breakdown.epoch_s is 55.0, but breakdown.iterations_per_epoch is None"),
    ("stall-epoch-without-iterations", _set("breakdown.stalls.compute.epoch_s", 9.0),
     "stall compute's epoch_s is 9.0, but breakdown.iterations_per_epoch is None"),
    ("stall-epoch-without-seconds", _set("breakdown.stalls.network.epoch_s", 4.0),
     "stall network is not_measured, but its epoch_s is 4.0; a stall without a figure has none"),
    # an epoch's interval other than the iteration's (or a stall's) times the iterations of an epoch
    ("breakdown-epoch-interval-without-iterations", _set("breakdown.epoch_ci95_s", 5.0),
     "breakdown.epoch_ci95_s is 5.0, but breakdown.iterations_per_epoch is None"),
    ("stall-epoch-interval-contradicts", _set("breakdown", ONE_ITERATION_EPOCH), "compute's epoch_ci95_s"),
    ("stall-epoch-contradicts", _set("breakdown", {**EXAMPLE["breakdown"], "iterations_per_epoch": 10,
                                                   "epoch_s": EXAMPLE["breakdown"]["iteration_s"] * 10,
                                                   "stalls": {**EXAMPLE["breakdown"]["stalls"], "compute": {
                                                       **EXAMPLE["breakdown"]["stalls"]["compute"],
                                                       "epoch_s": 1e6}}}),
     "stall compute's epoch_s is 1000000.0, but 10 iterations of"),
    # a measured stall other than its runs' difference: shown beside the runs it contradicts until then
    ("stall-compute-off-r0", _set("breakdown.stalls.compute.seconds", 0.6684),
     "stall compute is measured at 0.6684 s, but it is phase R0's mean, 0.3234"),
    ("stall-interconnect-off-r1-minus-r0", _set("breakdown.stalls.interconnect.seconds", 0.1),
     "stall interconnect is measured at 0.1 s, but it is phase R1's mean minus R0's, 0.3479"),
    # without an iteration time the stalls are still their runs' differences (they were stored as given)
    ("stall-off-r0-without-iteration", lambda doc: (_set("breakdown.iteration_s", None)(doc),
                                                    _set("breakdown.stalls.compute.seconds", 0.9)(doc)),
     "stall compute is measured at 0.9 s"),
    # a measured stall of no value beside runs that have one: stored as null, left out of every fit unsaid
    ("stall-measured-nan", lambda doc: (_set("breakdown.stalls.interconnect.seconds", float("nan"))(doc),
                                        _set("breakdown.stalls.interconnect.raw_s", float("nan"))(doc)),
     "stall interconnect is measured but its seconds are nan; it is phase R1's mean minus R0's"),
    ("stall-measured-null", _set("breakdown.stalls.compute.seconds", None),
     "stall compute is measured but its seconds are None; it is phase R0's mean"),
    ("stall-raw-off-its-runs", _set("breakdown.stalls.interconnect.raw_s", 5.0),
     "stall interconnect has a raw difference of 5.0 s"),
    ("stall-clamped-with-seconds", _set("breakdown.stalls.compute.status", "clamped_zero"),
     "reported as 0, but its seconds"),
    ("stall-interval-negative", _set("breakdown.stalls.compute.ci95_s", -1), "stall compute ci95_s is -1"),
    ("remainder-interval-negative", _set("breakdown.unattributed_ci95_s", -0.5),
     "unattributed_ci95_s is -0.5"),
    # no iteration time beside a timed reference run: drawn as a breakdown of no iteration until then
    ("breakdown-iteration-nan-beside-reference", _set("breakdown.iteration_s", float("nan")),
     "breakdown.iteration_s is nan, but its reference phase R1 has a mean of"),
    ("breakdown-iteration-null-beside-interval", lambda doc: (_set("breakdown.iteration_s", None)(doc),
                                                              _set("breakdown.reference_phase", None)(doc)),
     "breakdown.iteration_s is None, but its iteration_ci95_s is"),
    ("breakdown-iteration-off-reference", _set("breakdown.iteration_s", 1e14),
     "breakdown.iteration_s is 100000000000000.0, but its reference phase R1"),
    ("finished-before-started-in-utc", lambda doc: doc.update(started_at="2026-11-22T11:06:00-05:00",
                                                              finished_at="2026-11-22T12:00:00"),
     "finished_at '2026-11-22T12:00:00' is before started_at"),
    # a run of 2030 was "the newest, 0 s ago" on the Overview until then
    ("started-in-the-future", lambda doc: doc.update(started_at="2030-01-01T00:00:00+00:00",
                                                     finished_at="2030-01-01T00:02:00+00:00"),
     "started_at '2030-01-01T00:00:00+00:00' is in the future"),
    ("run-id-padded", lambda doc: doc.update(run_id=f" {doc['run_id']}"), "starts or ends with a space"),
    ("run-id-trailing-tab", lambda doc: doc.update(run_id=f"{doc['run_id']}\t"), "run_id"),
    ("breakdown-stall-unknown", _set("breakdown.stalls.gpu_magic", {"seconds": 0.1, "status": "measured"}),
     "breakdown stall 'gpu_magic' is none of compute, interconnect, network, cpu, disk"),
    # a sample no run measured: the stored iterations averaged 3.3e306 s beside the phase's 0.32 s
    ("phase-sample-1e308", _set("phases.0.samples.iteration_s.0", 1e308),
     "samples.iteration_s average 3.33333e+306 s, far from the phase's mean, 0.32342 s"),
    ("spec-workers-zero", _set("spec.workers_per_node", 0), "spec.workers_per_node"),
    ("spec-shape-negative", _set("spec.input_shape", [-3, 32, 32]), "spec.input_shape"),
    ("spec-image-px-zero", _set("spec.image_px", 0), "spec.image_px"),
    ("spec-threads-negative", _set("spec.threads_per_worker", -1), "spec.threads_per_worker"),
    ("spec-max-phase-negative", _set("spec.max_phase_s", -4), "spec.max_phase_s"),
    ("spec-seed-beyond-64-bits", _set("spec.seed", 2**70), "spec.seed"),
    ("spec-instance-5000", _set("spec.instance", "i" * 5000), "spec.instance"),
    # a device or backend no profile resolves to was stored and shown as the run's
    ("spec-device-unknown", _set("spec.device", "quantum"), "spec.device is 'quantum'; expected one of auto"),
    ("spec-backend-unknown", _set("spec.backend", "mpi"), "spec.backend is 'mpi'; expected one of gloo"),
    ("spec-loader-negative", _set("spec.loader_workers", -1), "spec.loader_workers"),
    ("model-params-fraction", _set("model.param_count", 1.5), "model.param_count"),
    ("model-layers-text", _set("model.layer_count", "many"), "model.layer_count"),
    ("model-grad-bytes-negative", _set("model.grad_bytes", -1), "model.grad_bytes"),
    ("run-id-path-up", _set("run_id", "../../etc/passwd"), "run_id"),
    ("run-id-dotdot", _set("run_id", ".."), "run_id"),
    ("run-id-backslash", _set("run_id", "a\\b"), "run_id"),
    ("run-id-number", _set("run_id", 12345), "run_id"),
    ("fingerprint-list", _set("fingerprint", [1, 2]), "fingerprint"),
    ("schema-version-true", _set("schema_version", True), "schema_version"),
    ("schema-version-float", _set("schema_version", 1.0), "schema_version"),
    ("kind-probe-with-run-fields", _set("kind", "stash-probe"), "probe_id"),
    ("started-february-30", _set("started_at", "2026-02-30T10:00:00+00:00"), "started_at"),
    ("started-epoch-number", _set("started_at", 1764400000), "started_at"),
    ("telemetry-times-dropped", _set("phases.0.telemetry.t_s", None), "telemetry"),
    # stored before: an iteration time of no run, a network stall of a one-machine run (and `stash fit` used
    # it), a mean over no iterations, an epoch of none, warnings that are not text
    ("breakdown-reference-unknown", _set("breakdown.reference_phase", "R99"),
     "breakdown.reference_phase is 'R99', not a timed run of this run's phases (R0, R1)"),
    ("breakdown-without-phases", _set("phases", []),
     "stall compute is measured, but its run R0 is not a timed"),
    ("stall-network-without-its-run", _set("breakdown.stalls.network", {
        "seconds": 0.1, "ci95_s": 0.01, "share": 0.1, "status": "measured", "raw_s": 0.1}),
     "stall network is measured, but its run R1n is not a timed phase of this run"),
    ("phase-mean-over-no-iterations", _set("phases.0.iterations", 0), "phase R0 iterations is 0"),
    ("breakdown-epoch-of-no-iterations", _set("breakdown.iterations_per_epoch", 0),
     "breakdown.iterations_per_epoch is 0; expected at least 1"),
    ("breakdown-warnings-numbers", _set("breakdown.warnings", [1, 2]),
     "breakdown.warnings must be a list of text"),
    # stored whole since the store keeps the hosts (runs.hosts): only what a profile writes
    ("hosts-an-object", _set("hosts", {"a": {"cpu_count": 2}}), "hosts must be a list of objects or null"),
    ("hosts-of-text", _set("hosts", ["a", "b"]), "hosts must be a list of objects or null"),
]  # fmt: skip

# (id, change): odd but possible, stored, and `stash show` prints it without an escape sequence.
STORED = [
    ("phase-sample-one-slow", _set("phases.0.samples.iteration_s.0", 0.5)),  # slow, but its mean holds
    ("phase-ci-null-one-sample", _set("phases.0.iteration_s.ci95", None)),  # a one-sample phase's inf CI
    # a stall of one round with no spread of its own: `stash show` was a traceback (formatting None)
    ("stall-interval-null", _set("breakdown.stalls.compute.ci95_s", None)),
    ("stall-interval-nan", _set("breakdown.stalls.interconnect.ci95_s", float("nan"))),
    ("phase-stop-reason-escape", _set("phases.0.stop_reason", "done\x1b[2J")),
    ("phase-description-osc", _set("phases.0.description", "x\x1b]0;title\x07")),
    ("phase-error-escape", _set("phases.0.error", "boom\x1b[31m")),
    ("breakdown-warning-escape", _set("breakdown.warnings", ["a\x1b[2Jb"])),
    ("breakdown-unattributed-1e300", _set("breakdown.unattributed_s", 1e300)),
    # a profile whose hosts were refused fails before it chooses its device: its result is stored
    ("spec-device-auto", _set("spec.device", "auto")),
    ("spec-hosts-shell", _set("spec.hosts", ["a;rm -rf /"])),
    ("hosts-hostname-escape", _set("hosts", [{"host": "a", "hostname": "a\x1b[2J", "cpu_count": 2}])),
    ("spec-dataset-escape", _set("spec.dataset", "/data/\x1b[2J")),
    ("spec-instance-formula", _set("spec.instance", "=cmd|'/C calc'!A0")),
    ("run-id-spaces", _set("run_id", "a b c")),
    ("run-id-formula", _set("run_id", "=1+1")),
    ("run-id-sql", _set("run_id", "x'; DROP TABLE runs; --")),
    ("fingerprint-missing", _drop("fingerprint")),
    ("error-escape-on-completed", _set("error", "x\x1b[2J")),
    ("started-offset-plus-14", _set("started_at", "2026-11-22T11:06:00+14:00")),
    # in UTC, as stored, 05:06 then 10:00 (without the offsets, 11:06 then 10:00 was refused)
    ("finished-naive-after-offset-start", lambda doc: doc.update(started_at="2026-11-22T11:06:00+06:00",
                                                                 finished_at="2026-11-22T10:00:00")),
    ("breakdown-epoch-rounded", _set("breakdown", {**EXAMPLE["breakdown"], "iterations_per_epoch": 7,
                                                   "epoch_s": 0.6714073389333179 * 7 * (1 + 1e-9)})),
    ("stash-version-escape", _set("stash_version", "0.1\x1b[2J")),
]  # fmt: skip


def test_the_cases_are_named_once():
    ids = [case[0] for case in REFUSED + STORED]
    assert len(ids) == len(set(ids)) >= 50


@pytest.fixture(scope="module")
def seeded(tmp_path_factory) -> Path:
    db = tmp_path_factory.mktemp("hostile-results") / "seeded.duckdb"
    path = db.with_name("example.json")
    path.write_text(json.dumps(EXAMPLE))
    assert stash_main("ingest", str(path), "--db", str(db)).returncode == 0
    return db


def _file(tmp_path: Path, case_id: str, change) -> tuple[Path, dict]:
    doc = copy.deepcopy(EXAMPLE)
    doc["run_id"] = f"20261122T110600Z-{hashlib.sha256(case_id.encode()).hexdigest()[:8]}"
    change(doc)
    path = tmp_path / f"{case_id}.json"
    path.write_text(json.dumps(doc))
    return path, doc


@pytest.mark.parametrize(("case_id", "change", "says"), REFUSED, ids=[case[0] for case in REFUSED])
def test_a_figure_no_run_can_have_is_refused(case_id, change, says, seeded, tmp_path, capsys):
    from stash_core.cli.main import main

    path, _ = _file(tmp_path, case_id, change)
    before = hashlib.sha256(seeded.read_bytes()).hexdigest()
    capsys.readouterr()
    status = main(["ingest", str(path), "--db", str(seeded)])
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.strip()]
    assert status == 2 and len(lines) == 1 and "Traceback" not in err, err
    assert says in lines[0]
    assert hashlib.sha256(seeded.read_bytes()).hexdigest() == before


@pytest.mark.parametrize(("case_id", "change"), STORED, ids=[case[0] for case in STORED])
def test_odd_text_is_stored_and_shown_escaped(case_id, change, seeded, tmp_path, capsys):
    from stash_core.cli.main import main

    db = tmp_path / "own.duckdb"
    db.write_bytes(seeded.read_bytes())
    path, doc = _file(tmp_path, case_id, change)
    assert main(["ingest", str(path), "--db", str(db)]) == 0, capsys.readouterr().err
    capsys.readouterr()
    assert main(["show", doc["run_id"], "--db", str(db)]) == 0
    captured = capsys.readouterr()
    assert "\x1b" not in captured.out + captured.err and "\x07" not in captured.out
    assert main(["runs", "--db", str(db)]) == 0
    assert "\x1b" not in capsys.readouterr().out


def test_a_measured_stall_without_an_interval_is_shown_as_not_resolved(seeded, tmp_path, capsys):
    from stash_core.cli.main import main

    db = tmp_path / "own.duckdb"
    db.write_bytes(seeded.read_bytes())
    path, doc = _file(tmp_path, "no-interval", _set("breakdown.stalls.compute.ci95_s", None))
    assert main(["ingest", str(path), "--db", str(db)]) == 0
    capsys.readouterr()
    assert main(["show", doc["run_id"], "--db", str(db)]) == 0
    lines = capsys.readouterr().out.splitlines()
    compute = next(line for line in lines if line.strip().startswith("compute"))
    assert compute.endswith("not resolved: no interval")


@pytest.mark.parametrize(("workers", "before"), [("1worker", "R0"), ("2workers", "R1")])
def test_a_cpu_stall_off_its_runs_is_refused_on_one_machine(tmp_path, workers, before):
    """Without R1n the run before R3 is R1 (R0 for one worker): the check took R3 for the end of a gap."""
    doc = json.loads((REPO / "examples" / "results" / ONE_MACHINE.format(workers, workers[0] + "vcpu"))
                     .read_text())  # fmt: skip
    cpu = doc["breakdown"]["stalls"]["cpu"]
    assert cpu["status"] == "measured"
    cpu["seconds"] += 0.05
    path = tmp_path / "cpu.json"
    path.write_text(json.dumps(doc))
    result = stash_main("ingest", str(path), "--db", str(tmp_path / "x.duckdb"))
    assert result.returncode == 2 and f"phase R3's mean minus {before}'s" in result.stderr, result.stderr
