"""The lines of instances or configurations that could not be predicted ('NAME: reason', '2-4 x NAME:
reason'): as JSON objects, and summed up in a few words when nothing could be (predict's failure, recommend's
when no configuration could be evaluated)."""

from __future__ import annotations

import re


def nothing_predicted(reasons: list[str]) -> str:
    """What kept every configuration out, in a few words (`predict`'s failure, `recommend`'s when nothing
    could be evaluated): the one reason all the lines share, else how many instances were refused and the
    first line."""
    if reasons and all("whatever the batch" in line for line in reasons):
        return "the model does not fit the memory of any GPU considered, whatever the batch"
    if reasons and all("does not fit" in line for line in reasons):
        return "the batch does not fit the memory of any GPU considered"
    if reasons and all("no entry in the accelerator table" in line for line in reasons):
        return "no GPU considered is in Stash's accelerator table"
    if reasons and all(line.endswith(": no full step") for line in reasons):
        return "an epoch gives each worker fewer samples than one batch in every configuration: no full step"
    # one line per configuration ("2 x NAME: ..."): counted by instance, with the first line's reason
    instances = len({refusal_json(line)["instance"] for line in reasons})
    many = f" in {len(reasons)} configurations" if len(reasons) > instances else ""
    return f"{instances} instance(s) refused{many}" + (f"; the first: {reasons[0]}" if reasons else "")


def refusal_json(line: str) -> dict[str, str]:
    """A line of not_predictable as JSON: 'NAME: reason' (or '2 x NAME: reason') ->
    {"instance": "NAME", "configuration": "2 x NAME", "reason": "reason"}."""
    head, _, reason = line.partition(": ")
    return {"instance": refused_instance(head), "configuration": head, "reason": reason or line}


def refused_instance(head: str) -> str:
    """The instance of a refusal's head, 'NAME' or 'COUNT x NAME' (COUNT: 2 or 2-4): a label that holds
    ' x ' after its start ('box x 2') is not cut there."""
    counted = re.fullmatch(r"\d+(?:-\d+)? x (.+)", head)
    return counted.group(1) if counted else head
