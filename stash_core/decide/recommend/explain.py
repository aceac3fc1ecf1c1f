"""Sentences about a recommendation: why cheaper-looking options lose, why no option meets the constraints."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import date
from typing import Any

import pandas as pd

from stash_core.decide.predict.profile_arithmetic import precision_words
from stash_core.decide.predict.refusals import nothing_predicted
from stash_core.decide.recommend.costs import STALL_NAMES, step_error
from stash_core.units import duration_words, finite_float, usd_limit_words, usd_words, usd_words_apart


def job_headline(request: dict[str, Any]) -> str:
    """The job a recommendation answers, in words: model, batch, input, precision, workers, work, prices and
    the limits (time budget, cost), as the command line and the page state it."""
    pricing = "spot" if request["pricing"] == "spot" else "on-demand"
    shape = request.get("input_shape")
    shape_text = f", input {'x'.join(str(size) for size in shape)}" if shape else ""
    head = (
        f"{request['model']}, batch {request['batch_size']} per worker{shape_text}, "
        f"{precision_words(request)}, {request['habits'] + ', ' if request.get('habits') else ''}"
        f"{workers_words(request.get('workers_per_instance'))}, {epochs_words(request['epochs'])} of "
        f"{request['dataset_images']:,} samples, {pricing} prices"
    )
    if request.get("budget_hours") is not None:
        head += f", within {request['budget_hours']:g} h"
    if request.get("max_usd") is not None:
        head += f", at most {usd_limit_words(request['max_usd'])}"
    return head


def workers_words(workers_per_instance: Any) -> str:
    """How many GPUs of each instance the job uses: all of them (one worker each) or the number asked."""
    if isinstance(workers_per_instance, int):
        return f"{workers_per_instance} worker(s) per instance, one per GPU"
    return "one worker per GPU"


def epochs_words(epochs: float) -> str:
    """'1 epoch', '90 epochs', '0.5 epochs'."""
    return f"{epochs:g} epoch" if epochs == 1 else f"{epochs:g} epochs"


# The stall that grew most is named as the whole slowdown's cause when it makes this much of it, else its own
# share is given beside the whole.
SOLE_CAUSE = 0.9


def slowdown_cause(slower: dict[str, Any], faster: dict[str, Any]) -> str:
    """Which stall makes `slower` slower than `faster`, per epoch (so worker counts may differ)."""
    slowdown = slower["epoch_s"] / faster["epoch_s"] - 1.0
    if slowdown <= 0:
        return f"{_short(slower)} is not slower than {_short(faster)}"
    share = {}  # each stall's extra time per epoch, as a share of the faster one's epoch
    for stall in STALL_NAMES:
        mine = finite_float(slower.get(f"{stall}_s")) or 0.0
        theirs = finite_float(faster.get(f"{stall}_s")) or 0.0
        extra_s = mine * slower["iterations_per_epoch"] - theirs * faster["iterations_per_epoch"]
        share[stall] = extra_s / faster["epoch_s"]
    cause = max(share, key=share.get)
    what = "compute (fewer or slower accelerators)" if cause == "compute" else f"{cause} stall"
    said = f"{what} makes {_short(slower)} {min(share[cause], slowdown):.0%} slower than {_short(faster)}"
    if share[cause] < SOLE_CAUSE * slowdown:  # the rest of the gap is other stalls': not laid on this one
        # every other part, a smaller stall's negative one and the time no stall holds ("not separated")
        # included, so that the parts add up to the whole
        share["not separated"] = slowdown - sum(share.values())
        others = [f"{stall} {share[stall]:+.0%}" for stall in sorted(share, key=share.get, reverse=True)
                  if stall != cause and abs(share[stall]) >= 0.005]  # fmt: skip
        said += f", of {slowdown:.0%} in all" + (f" ({', '.join(others)})" if others else "")
    # Stalls one side has a figure for and the other has not (a profile's CPU and disk beside a prediction):
    # the gap is not like for like, and part of it may be theirs.
    unequal = [stall for stall in STALL_NAMES if (finite_float(slower.get(f"{stall}_s")) or 0.0) > 0
               and finite_float(faster.get(f"{stall}_s")) is None]  # fmt: skip
    if unequal:
        said += (
            f" (its {' and '.join(unequal)} stall{'s' if len(unequal) > 1 else ''}, measured, "
            f"{'are' if len(unequal) > 1 else 'is'} not predicted for {_short(faster)}: part of the gap)"
        )
    return said


def _budget_s(request: dict[str, Any]) -> float | None:
    budget_h = request.get("budget_hours")
    return None if budget_h is None else budget_h * 3600


def explanations(options: pd.DataFrame, best: dict[str, Any], request: dict[str, Any]) -> list[str]:
    """Why `best` wins (and what its cost leaves out, when short; whether its margin is thin), then a line for
    each of the (at most five) cheaper-looking options on why it loses."""
    lines = [
        f"{best['config']} ({best['source']}) is the cheapest configuration that meets the constraints: "
        f"{duration_words(best['training_h'] * 3600, _budget_s(request))} and "
        f"{usd_words(best['training_usd'])} for "
        f"{epochs_words(request['epochs'])}"
    ]
    lines += [line for line in (_short_training(best), _thin_margin(best, request)) if line]
    tie = _tie(options, best)
    if tie:
        lines.append(tie)
    for option in _explained(options, best, request).to_dict(orient="records"):
        lines.append(_why_not(option, best, request))
    return lines


PRICE_AGE_DAYS = 90
# Under ten minutes of training, an instance's start-up and a provider's minimum charge, which no cost here
# counts, are a large part of what is paid: said, not guessed (neither is a catalog fact).
SHORT_TRAINING_S = 600


def _short_training(best: dict[str, Any]) -> str:
    """A line when the best's training is short enough that what its cost leaves out may decide the bill."""
    hours = finite_float(best.get("training_h"))
    if hours is None or hours * 3600 >= SHORT_TRAINING_S:
        return ""
    return (
        f"a training of {duration_words(hours * 3600)} is billed for more than its time: each cost here "
        "counts the training alone, not an instance's start-up (boot, software, data) nor the provider's "
        "minimum charge, which may outweigh it"
    )


def _thin_margin(best: dict[str, Any], request: dict[str, Any]) -> str:
    """A line when the best's time is under the budget by less than its stated error: it may not be."""
    budget_s, error = _budget_s(request), step_error(best) or 0.0
    slow_s = best["training_h"] * 3600 * (1 + error)
    if budget_s is None or not error or slow_s <= budget_s:
        return ""
    return (
        f"its time is under the budget by less than its stated error (±{error:.0%}): at +{error:.0%} it "
        f"takes {slow_s / 3600:,.1f} h, over the {request['budget_hours']:g} h; a profile of the job on "
        f"{best['config'].split(' x ', 1)[-1]} measures it"
    )


def _tie(options: pd.DataFrame, best: dict[str, Any]) -> str:
    """A line when the runners-up cost within the predictions' stated error of the best: no winner among
    them."""
    others = options["config"] != best["config"]
    feasible = options[options["feasible"] & others] if "feasible" in options else options
    error = step_error(best) or 0.0
    if feasible.empty or not error:
        return ""
    gap = feasible["training_usd"] / best["training_usd"] - 1.0
    close = feasible[gap <= error].sort_values("training_usd")
    if close.empty:
        return ""
    names = ", ".join(close["config"].head(3))
    more = f" and {len(close) - 3} more" if len(close) > 3 else ""
    return (
        f"a tie: {names}{more} cost{'s' if len(close) == 1 else ''} within {gap[close.index].max():.1%} of "
        f"it, inside the predictions' stated error (±{error:.0%}); the ranking among them is not a "
        "measurement"
    )


def stale_prices(options: pd.DataFrame, request: dict[str, Any] | None = None) -> str:
    """A line when a price the answer rests on is older than PRICE_AGE_DAYS, or has no date (those of the
    options that meet the constraints and of the cheaper-looking ones the explanations quote, given the
    request, where one meets them: else of every option)."""
    if "feasible" in options and options["feasible"].any():
        feasible = options[options["feasible"]]
        best = feasible.sort_values("rank").iloc[0].to_dict() if "rank" in feasible else None
        quoted = _explained(options, best, request) if best is not None and request is not None else None
        options = feasible if quoted is None else pd.concat([feasible, quoted]).drop_duplicates("config")
    if options.empty or "price_date" not in options:
        return ""
    undated = int(options["usd_per_h"].notna().sum() - options["price_date"].notna().sum())
    return old_prices_line(options["price_date"].dropna(), undated)


def old_prices_line(price_dates: Iterable[Any], undated: int = 0) -> str:
    """'prices dated 2022-01-01 are older than 90 days: ...' for the dates (ISO text) older than
    PRICE_AGE_DAYS and the count of prices without a date; '' when there are none (a cloud campaign's plan
    says it too: it is the page that spends money)."""
    today = date.today()
    old = set()
    for value in price_dates:
        try:
            day = date.fromisoformat(str(value)[:10])
        except ValueError:
            continue
        if (today - day).days > PRICE_AGE_DAYS:
            old.add(day.isoformat())
    parts = []
    if old:
        dates = f"{', '.join(sorted(old)[:4])}{' ...' if len(old) > 4 else ''}"
        parts.append(f"prices dated {dates} are older than {PRICE_AGE_DAYS} days")
    if undated > 0:
        parts.append(f"{undated} price(s) have no date")
    if not parts:
        return ""
    refresh = (
        "`stash instances import --skypilot` refreshes them (`stash instances show NAME` gives each source)"
    )
    return "; ".join(parts) + ": " + refresh


def _alternatives(options: pd.DataFrame, best: dict[str, Any]) -> pd.DataFrame:
    """Options that cost less per hour, or have as many accelerators for no more per hour."""
    alternatives = options[
        options["usd_per_h"].notna()
        & (options["config"] != best["config"])
        & (
            (options["usd_per_h"] < best["usd_per_h"])
            | (
                (options["workers_total"] == best["workers_total"])
                & (options["usd_per_h"] <= best["usd_per_h"])
            )
        )
    ]
    return alternatives.sort_values(["usd_per_h", "training_h"], kind="stable")


EXPLAINED_OPTIONS = 5


def _explained(options: pd.DataFrame, best: dict[str, Any], request: dict[str, Any]) -> pd.DataFrame:
    """The cheaper-looking options given a line, at most EXPLAINED_OPTIONS: those with the same accelerators
    for no more per hour, the cheapest per hour (the most tempting), then the nearest misses (the least over
    the budget, the cost limit or the recommendation's cost: what a user weighing a little more time or money
    asks about), where the cheapest per hour alone would name only options that miss by days."""
    alternatives = _alternatives(options, best)
    same = alternatives["usd_per_h"] >= best["usd_per_h"]  # as many accelerators for the same money
    same, others = alternatives[same], alternatives[~same]
    misses = [_miss_ratio(option, best, request) for option in others.to_dict(orient="records")]
    nearest = others.assign(_miss=misses).sort_values(["_miss", "usd_per_h", "training_h"], kind="stable")
    chosen = pd.concat([same, others.head(1), nearest.drop(columns="_miss")])
    return chosen[~chosen["config"].duplicated()].head(EXPLAINED_OPTIONS)


def _miss_ratio(option: dict[str, Any], best: dict[str, Any], request: dict[str, Any]) -> float:
    """How far an option is from beating `best`: its training time over the budget, its cost over the limit or
    over the recommendation's, whichever is furthest (1 for an option that costs as much)."""
    ratios = [1.0]
    if request.get("budget_hours") and not option["meets_time"]:
        ratios.append(option["training_h"] / request["budget_hours"])
    if option["training_usd"] is not None and best["training_usd"]:
        ratios.append(option["training_usd"] / best["training_usd"])
    if request.get("max_usd") and option["training_usd"] is not None:
        ratios.append(option["training_usd"] / request["max_usd"])
    return max(ratios)


def _why_not(option: dict[str, Any], best: dict[str, Any], request: dict[str, Any]) -> str:
    hourly = usd_words_apart(option["usd_per_h"], best["usd_per_h"])
    cheaper = (
        f"costs {hourly[0]}/h against {hourly[1]}/h"
        if option["usd_per_h"] < best["usd_per_h"]
        else f"has the same {_accelerators(option['workers_total'])} for {usd_words(option['usd_per_h'])}/h"
    )
    cause = slowdown_cause(option, best) if option["epoch_s"] > best["epoch_s"] else ""
    if not option["meets_time"]:
        line = (
            f"{option['config']} {cheaper} but needs {duration_words(option['training_h'] * 3600)}, over the "
            f"{request['budget_hours']:g} h budget"
        )
        if option["training_usd"] is not None and option["training_usd"] < best["training_usd"]:
            costs = usd_words_apart(option["training_usd"], best["training_usd"])
            line += f", for {costs[0]} against {costs[1]} in all"
    elif option["training_usd"] is not None and option["training_usd"] > best["training_usd"]:
        costs = usd_words_apart(option["training_usd"], best["training_usd"])
        line = f"{option['config']} {cheaper} but the training costs {costs[0]} against {costs[1]}"
    elif request.get("max_usd") is not None and not option["meets_cost"]:
        line = f"{option['config']} {cheaper} but is over the {usd_limit_words(request['max_usd'])} limit"
    else:  # the same cost to the cent: ranked after the recommendation by time, then by name
        times = [duration_words(row["training_h"] * 3600) for row in (option, best)]
        took = f"against {times[1]}" if times[0] != times[1] else "too (ranked after it by name)"
        costs = usd_words(option["training_usd"])
        line = f"{option['config']} {cheaper} and the training costs as much ({costs}), in {times[0]} {took}"
    if cause:
        line += f": {cause}"
    if option["source"] == "predicted":
        error = step_error(option)
        line += " (predicted" + (f", expected error {error:.0%})" if error is not None else ")")
    return line


def _accelerators(count: Any) -> str:
    return f"{count} accelerator{'' if count == 1 else 's'}"


def infeasible_reason(options: pd.DataFrame, request: dict[str, Any], excluded: list[str]) -> str:
    """Which constraint cannot be met (or why nothing could be evaluated), and what would help."""
    work = f"{epochs_words(request['epochs'])} of {request['dataset_images']:,} samples"
    if options.empty:
        # one refusal says itself; several are summed up as predict does, each listed with those not evaluated
        detail = excluded[0] if len(excluded) == 1 else (
            f"{nothing_predicted(excluded)} (each refused configuration is listed with its reason)"
            if excluded else "the catalog has no instances to consider"
        )  # fmt: skip
        what = f"{request['model']} at batch {request['batch_size']}"
        return f"no configuration could be evaluated for {what}: {detail}"
    priced = options[options["training_usd"].notna()]
    if priced.empty:
        pricing = "a spot" if request["pricing"] == "spot" else "an on-demand"
        return (
            f"none of the evaluated instances has {pricing} price in the catalog (set one with `stash "
            "instances set`)"
        )
    budget = request["budget_hours"]
    if budget is not None and not priced["meets_time"].any():
        fastest = priced.sort_values("training_h").iloc[0]
        asked = request.get("workers_per_instance")
        # more instances help only where several of one type could be evaluated (their network stall is
        # predicted for a zoo model or a profile across machines, not for one known by a one-machine profile)
        several = (options["instance_count"] > 1).any() or request.get("max_instances", 2) == 1
        more = (" or allow more instances (--max-instances)" if several else
                " (several instances of a type could not be evaluated: see those not evaluated)")  # fmt: skip
        return (
            f"no configuration finishes {work} within {budget:g} h: the fastest, {fastest['config']} "
            f"({fastest['source']}), needs {duration_words(fastest['training_h'] * 3600)}; raise "
            f"--budget-hours{more}"
            + (", or use more GPUs of each (--workers-per-instance)" if isinstance(asked, int) else "")
        )
    in_time = priced[priced["meets_time"]]
    cheapest = in_time.sort_values("training_usd").iloc[0]
    scope = f"{len(in_time)} configuration(s) finish within {budget:g} h, but" if budget is not None else ""
    return (
        f"{scope} the cheapest{' of them' if scope else ''}, {cheapest['config']}, costs "
        f"{usd_words(cheapest['training_usd'])}, over the {usd_limit_words(request['max_usd'])} limit"
    ).strip()


def _short(option: dict[str, Any]) -> str:
    return f"{option['instance_count']} x {option['instance']}"
