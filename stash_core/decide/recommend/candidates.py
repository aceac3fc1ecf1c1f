"""The configurations to consider and the iteration time of each: measured where profiled, else predicted.

Per catalog instance: every stored profile of the model at the batch size on it (any worker and node count) is
a measured option; every other count of 1..max_instances of it (all its accelerators as workers; on a CPU
machine the worker counts that were profiled) is a predicted option. A prediction takes compute, CPU and disk
stall from a profile of the model on the same instance (or another one with the same accelerator; its CPU
stall for this option's vCPUs per worker and step where the profile can tell, whatif.cpu_stall_elsewhere) and
interconnect and network stall from the fitted stall models of stash_core.decide.fit. Without such a profile,
stash_core.decide.predict predicts the whole step from the model's FLOPs and bytes and the instance's
accelerator and links (scaled from a profile on another GPU where there is one)."""

from __future__ import annotations

import functools
import re
from pathlib import Path
from typing import Any

import pandas as pd

from stash_core.catalog.accelerators import find_accelerator
from stash_core.catalog.prices import hourly_price
from stash_core.decide.fit import FitReport, fit_stall_models, model_counts, predict_stall
from stash_core.decide.predict.configuration import DOES_NOT_FIT, Predictor, measured_interval_s
from stash_core.decide.predict.cpu_rows import no_gpu_reason
from stash_core.decide.predict.instances import all_catalog_rows, predictor_for
from stash_core.decide.predict.profile_arithmetic import machine_name, profile_accelerator
from stash_core.decide.recommend.advice import unpredicted_advice
from stash_core.decide.recommend.costs import (
    Estimate,
    RentalJob,
    communication_unmeasured,
    data_not_profiled,
    measured_estimate,
    no_full_step,
    option_row,
    step_remainder_s,
)
from stash_core.decide.recommend.cpu_carry import carried_cpu_stall, carried_or_why, data_profiles
from stash_core.errors import UsageError, UserModelError
from stash_core.store import get_run
from stash_core.store.reads import stored_model_counts
from stash_core.units import finite_float


class OptionPlanner:
    """Builds one option row per configuration; remembers why configurations could not be evaluated."""

    def __init__(self, db_path: Path | str, job: RentalJob, catalog: dict[str, dict[str, Any]],
                 measured: pd.DataFrame, set_aside: int = 0) -> None:  # fmt: skip
        self.db_path = db_path
        self.job = job
        self.catalog = catalog
        self.measured = measured
        # each instance's measured rows, split once: a filtered frame's to_dict per instance cost ~5 ms each
        self._measured_rows: dict[str, list[dict[str, Any]]] = {}
        for row in measured.to_dict(orient="records"):
            self._measured_rows.setdefault(row["instance"], []).append(row)
        self.set_aside = set_aside  # how many stored profiles of the job stand for none of its rows
        self.options: list[dict[str, Any]] = []
        self.excluded: list[str] = []
        self._report: FitReport | None = None
        self._counts: dict[str, Any] | None = None
        self._predictor: Predictor | str | None = None
        self._bases: dict[tuple[str, int], dict[str, Any] | None] = {}  # (instance, workers)'s, found once
        self._runs: dict[str, dict[str, Any]] = {}  # base profiles' stored runs ({} if gone), read once

    def add_instance_options(
        self, name: str, instance: dict[str, Any], max_instances: int, workers_asked: int | None = None
    ) -> None:
        """Its measured and predicted configurations: with `workers_asked` workers per instance (None: one
        per GPU)."""
        price, price_status = hourly_price(instance, name, self.job.pricing)
        profiled = self._measured_rows.get(name, [])
        runs = profiled if workers_asked is None else [
            row for row in profiled if int(row["workers_per_node"]) == workers_asked
        ]
        seen = set()
        for row in runs:
            key = (int(row["workers_per_node"]), int(row["nodes"]))
            if communication_unmeasured(row):
                continue  # its step lacks the collectives this configuration runs: predicted below from it
            seen.add(key)
            estimate = measured_estimate(row)
            self._add(name, instance, key[1], key[0], estimate, price, price_status)
        accelerators = instance.get("accelerator_count") or 0
        if accelerators > 0 and workers_asked is not None and workers_asked > accelerators and not seen:
            asked = f"the {workers_asked} workers per instance asked (one per GPU)"
            self._exclude(f"{name}: {accelerators} GPU(s), fewer than {asked}")
            return
        if accelerators > 0:
            worker_counts = [workers_asked or accelerators]
        else:  # a CPU machine: workers are processes, so only counts that were profiled make sense
            worker_counts = sorted({int(row["workers_per_node"]) for row in runs})
            if not worker_counts and profiled:  # profiles of other workers than asked: said as predict does
                ran = ", ".join(sorted({str(int(row["workers_per_node"])) for row in profiled}))
                self._exclude(f"{name}: no GPU, and no profile of this job on it has the {workers_asked} "
                              f"worker(s) per machine asked (it ran {ran})")  # fmt: skip
            elif not worker_counts:
                self._exclude(no_gpu_reason(name))
        for workers in worker_counts:
            for count in range(1, max_instances + 1):
                if (workers, count) not in seen:
                    estimate = self._predicted_estimate(name, instance, workers, count)
                    if estimate is None:
                        self._join_counts(name, count)
                        continue
                    self._add(name, instance, count, workers, estimate, price, price_status)

    def _add(self, name, instance, count, workers, estimate, price, price_status) -> None:
        if (short := no_full_step(self.job, workers * count)) is not None:
            return self._exclude(f"{count} x {name}: {short}")
        self.options.append(
            option_row(self.job, name, instance, count, workers, estimate, price, price_status)
        )

    def _exclude(self, reason: str) -> None:
        if reason not in self.excluded:
            self.excluded.append(reason)

    def _join_counts(self, name: str, count: int) -> None:
        """Say the refusal of `count` instances with the count before's where the reason is the same ('2-4 x
        NAME: ...', as predict says it): a line per count buried the other reasons."""
        if len(self.excluded) < 2 or not self.excluded[-1].startswith(head := f"{count} x {name}: "):
            return
        reason = self.excluded[-1].removeprefix(head)
        before = re.fullmatch(rf"(\d+)(?:-(\d+))? x {re.escape(name)}: (.*)", self.excluded[-2], re.DOTALL)
        if before and int(before[2] or before[1]) == count - 1 and before[3] == reason:
            self.excluded[-2:] = [f"{before[1]}-{count} x {name}: {reason}"]

    def _predicted_estimate(
        self, name: str, instance: dict[str, Any], workers: int, count: int
    ) -> Estimate | None:
        """Compute, CPU and disk from a base profile, communication from the stall models; None (and the
        reason in `excluded`) when either is missing."""
        base = self._base_run(name, instance, workers)
        if base is None:
            return self._spec_estimate(name, instance, workers, count)
        stalls = {"compute": finite_float(base.get("compute_s"))}
        if stalls["compute"] is None:
            self._exclude(f"{name}: profile {base['run_id']} has no compute time")
            return None
        notes = []
        for stall in ("cpu", "disk"):  # not profiled: not known, not zero
            found = finite_float(base.get(f"{stall}_s"))
            stalls[stall] = None if found is None and data_not_profiled(base) else (found or 0.0)
        if data_not_profiled(base):
            notes.append("CPU and disk stalls not profiled (synthetic data only), left out of the time")
        basis = [f"compute from {base['run_id']} on {machine_name(base['instance'])}"]
        weighted_error, error_known, modelled = 0.0, True, False
        published_error: float | None = None  # the step's error where communication is `predict`'s
        same_machine = base["instance"] == name and int(base["workers_per_node"]) == workers
        # the profile's own interconnect where it measured one (a compute-only profile did not: predicted)
        measured_interconnect = same_machine and finite_float(base.get("interconnect_s")) is not None
        for stall in ("interconnect", "network"):
            if stall == "interconnect" and (workers == 1 or measured_interconnect):
                stalls[stall] = 0.0 if workers == 1 else (finite_float(base.get("interconnect_s")) or 0.0)
                continue
            if stall == "network" and count == 1:
                stalls[stall] = 0.0
                continue
            prediction = self._predict(stall, name, instance, workers, count, base.get("device"))
            if prediction["expected_mape"] is None:
                # No profile of this stall stands behind the fitted model (none, or an uncalibrated
                # alpha-beta at the line rate): the communication `stash predict` gives, from the
                # bandwidths collectives reach, with its held-out error. A profile adds what it measured and
                # takes nothing away.
                published = self._published_comm(name, workers, count)
                if published is not None:
                    stalls[stall] = getattr(published, f"{stall}_s")
                    modelled = True
                    basis.append(f"{stall} from published collective bandwidths")
                    published_error = published.comm_error
                    if published_error is None:
                        error_known = False
                    continue
            if prediction["stall_s"] is None:
                self._exclude(f"{count} x {name}: {stall} stall cannot be predicted - {prediction['status']}")
                return None
            stalls[stall] = prediction["stall_s"]
            modelled = True
            basis.append(f"{stall} by {prediction['method']}")
            if prediction["expected_mape"] is None:
                error_known = False
                notes.append(f"{stall} stall {prediction['status']}")
            else:
                weighted_error += prediction["expected_mape"] * prediction["stall_s"]
        # Another machine or step: the profile's CPU stall for this one's vCPUs per worker (whatif's model)
        elsewhere = self._cpu_elsewhere(base, instance, workers, stalls) if stalls["cpu"] else None
        if elsewhere is not None:
            stalls["cpu"], note = elsewhere
            notes.append(note)
        elif stalls["cpu"] and not same_machine and self._loader_workers_unknown(base):
            notes.append(
                f"CPU stall as profiled on {machine_name(base['instance'])}: {base['run_id']}'s loader "
                "workers are unknown, so it is not recomputed for this machine's vCPUs"
            )
        iteration_s = sum(value for value in stalls.values() if value is not None)
        kept = step_remainder_s(base) if same_machine else 0.0
        if kept and iteration_s + kept > 0:  # what its step held beyond its stalls holds at other counts too
            iteration_s += kept
            notes.append(f"{kept:+.4g} s of {base['run_id']}'s measured step, not in a stall, kept")
        # Compute and disk come from a measured profile, and so does CPU unless recomputed for this
        # machine: no model error of compute (expected_error None, as `predict`'s measured rows). The
        # modelled stalls are communication: their error, a fraction of the step, is comm_error.
        comm_error = weighted_error / iteration_s if modelled and error_known and iteration_s > 0 else None
        if comm_error is not None and published_error is not None:
            comm_error += published_error  # a fraction of the step already
        # recomputed for this machine (zero too), or a modelled stall of unknown error: no figure validates it
        unvalidated = elsewhere is not None or (modelled and not error_known)
        basis_text = "; ".join(basis)
        return Estimate(
            "predicted", base["run_id"], basis_text, iteration_s, stalls, None, notes, unvalidated,
            path="profile", comm_error=comm_error,
        )  # fmt: skip

    def _published_comm(self, name: str, workers: int, count: int) -> Any | None:
        """`stash predict`'s prediction of this configuration (its communication is what is wanted), or None
        where it has none."""
        predictor = self._spec_predictor()
        if isinstance(predictor, str):
            return None
        result = predictor.predict(name, workers, count)
        return None if isinstance(result, str) else result

    def _run(self, base: dict[str, Any]) -> dict[str, Any]:
        """The base profile's stored run (read once), or {} if it is gone."""
        if base["run_id"] not in self._runs:
            self._runs[base["run_id"]] = get_run(self.db_path, base["run_id"]) or {}
        return self._runs[base["run_id"]]

    def _loader_workers_unknown(self, base: dict[str, Any]) -> bool:
        """The base profile is stored but its loader workers are not (a script's runs that disagreed)."""
        run = self._run(base)
        return bool(run) and run.get("loader_workers") is None

    def _cpu_elsewhere(
        self, base: dict[str, Any], instance: dict[str, Any], workers: int, stalls: dict[str, float | None]
    ) -> tuple[float, str] | None:
        """The base profile's CPU stall on this instance (its vCPUs per worker, its step), and a note; None
        where the profile cannot tell (cpu_carry.carried_cpu_stall)."""
        sync_s = sum(stalls.get(name) or 0.0 for name in ("compute", "interconnect", "network"))
        return carried_cpu_stall(self._run(base), base, instance, workers, sync_s, self.catalog)

    def _spec_estimate(
        self, name: str, instance: dict[str, Any], workers: int, count: int
    ) -> Estimate | None:
        """No profile on this accelerator: the prediction from the model's counts and the instance's specs
        (stash_core.decide.predict), scaled from a profile on another GPU where there is one."""
        predictor = self._spec_predictor()
        if isinstance(predictor, str):
            self._exclude(f"{name}: {predictor}")
            return None
        result = predictor.predict(name, workers, count)
        if isinstance(result, str):
            if f": {DOES_NOT_FIT} - " in result:  # a profile of this batch there would not fit either
                self._exclude(result)
                return None
            job = self.job
            advice = unpredicted_advice(
                result, name, workers, count, job.model, job.batch_size, job.input_shape
            )
            self._exclude(result + advice)
            return None
        # CPU and disk stalls depend on the data pipeline and the machine: without a profile they are not
        # predicted (None, shown as such), not zero; the iteration time leaves them out and says so. A
        # profile with real data on another GPU gives the CPU stall (the pipeline is the job's).
        stalls = {"compute": result.compute_s, "interconnect": result.interconnect_s,
                  "network": result.network_s, "cpu": None, "disk": None}  # fmt: skip
        stalls["cpu"], said = self._carried_cpu(instance, workers, result.iteration_s)
        notes = [said, *result.notes]
        carried = stalls["cpu"] is not None
        if carried:
            notes.insert(1, "disk stall not predicted (it needs a profile with real data on this GPU)")
        iteration_s = result.iteration_s + (stalls["cpu"] or 0.0)
        measured = getattr(result, "measured", False)  # its step is its profile's, with that run's interval
        whole = {"iteration_s": result.iteration_s, "iteration_ci95_s": result.iteration_ci95_s}
        unvalidated = not getattr(result, "validated", True) or carried
        return Estimate(
            "measured" if measured else "predicted", result.run_id, f"{result.path}: {result.basis}",
            iteration_s, stalls, result.expected_error, notes, unvalidated, result.path,
            result.memory_needed_gb, result.memory_gb, getattr(result, "comm_error", None),
            measured_interval_s(whole, iteration_s) if measured else None,
        )  # fmt: skip

    def _carried_cpu(self, instance: dict[str, Any], workers: int, sync_s: float) -> tuple[float | None, str]:
        return carried_or_why(self._data_profiles, self._run, instance, workers, sync_s, self.catalog)

    @functools.cached_property
    def _data_profiles(self) -> list[dict[str, Any]]:
        """The profiles a row predicted from specs takes its CPU stall from: found once, not per row."""
        return data_profiles(self._ordered_rows)

    def _spec_predictor(self) -> Predictor | str:
        if self._predictor is None:
            try:
                job = self.job
                self._predictor = predictor_for(self.db_path, job.model, job.batch_size, self.catalog,
                                                job.precision, job.input_shape, job=job.habits)  # fmt: skip
            except UsageError as exc:
                # a model that cannot be built, or run on this shape with no profile to go by: one line for
                # the command (as predict says it), not one per instance. Imported here: it imports torch,
                # which a recommendation from counted steps never needs (and has, where this was raised).
                from stash_core.zoo.build import ModelForwardError

                unusable = UserModelError | ModelForwardError if self.measured.empty else UserModelError
                if isinstance(exc, unusable):
                    raise
                # a model known only by its profiles, all of them set aside, is not one with no profile
                held = f"no profile that stands for this job ({self.set_aside} set aside, each said with why)"
                held = held if self.set_aside else "no profile"
                self._predictor = f"{held} and no prediction from specs ({exc})"
        return self._predictor

    def _predict(
        self, stall: str, name: str, instance: dict[str, Any], workers: int, count: int, device: Any
    ) -> dict[str, Any]:
        return predict_stall(
            counts=self._model_counts(),
            stall=stall,
            workers_per_node=workers,
            nodes=count,
            device=device,
            instance=name,
            bandwidth_gbps=instance.get("network_gbps"),
            report=self._fit_report(),
        )

    def _base_run(self, name: str, instance: dict[str, Any], workers: int) -> dict[str, Any] | None:
        """The profile for compute/CPU/disk (and interconnect when its workers match).

        This instance with the same workers per node (one node preferred, but the R0/R1 of a multi-node
        profile measure the same thing), then this instance with any workers, then an instance with the
        same accelerator.
        """
        if (name, workers) not in self._bases:
            self._bases[name, workers] = self._find_base_run(name, instance, workers)
        return self._bases[name, workers]

    @functools.cached_property
    def _ordered(self) -> pd.DataFrame:
        """The profiles, single-node ones first."""
        return self.measured.assign(_multi=self.measured["nodes"] > 1).sort_values("_multi", kind="stable")

    @functools.cached_property
    def _ordered_rows(self) -> list[dict[str, Any]]:
        return self._ordered.to_dict(orient="records")

    def _find_base_run(self, name: str, instance: dict[str, Any], workers: int) -> dict[str, Any] | None:
        ordered = self._ordered
        if ordered.empty:  # nothing profiled (pandas' filters cost milliseconds even on no rows)
            return None
        here = ordered[ordered["instance"] == name]
        same = here[here["workers_per_node"] == workers]
        if len(same):
            return same.iloc[0].to_dict()
        if len(here):
            return here.iloc[0].to_dict()
        # else a profile on the same GPU: its instance label's in the whole catalog, or the one its machine
        # reported where the label is none (a lab machine)
        accelerator = instance.get("accelerator")
        if not accelerator:
            return None
        target = find_accelerator(accelerator)
        for row in self._ordered_rows:
            label = self._whole_catalog.get(str(row.get("instance"))) or {}
            if label.get("accelerator") == accelerator:
                return row
            base = profile_accelerator(row, self._whole_catalog)
            if target is not None and base is not None and base.name == target.name:
                return row
        return None

    @functools.cached_property
    def _whole_catalog(self) -> dict[str, dict[str, Any]]:
        return {**all_catalog_rows(self.db_path), **self.catalog}

    def _fit_report(self) -> FitReport:
        if self._report is None:
            self._report = fit_stall_models(self.db_path)
        return self._report

    def _model_counts(self) -> dict[str, Any]:
        """The job's own gradient counts: its model built with the job's input shape (and the model's default
        classes, as its step is predicted). The models table holds the counts of the run stored last under
        the name, which may have had other classes or another input: they stand in only for a model Stash
        cannot build here (a script's, a factory no longer there)."""
        if self._counts is None:
            try:
                self._counts = model_counts(self.job.model, input_shape=self.job.input_shape)
            except UsageError:
                stored = stored_model_counts(self.db_path, self.job.model)
                if stored is None:
                    raise
                self._counts = stored
        return self._counts
