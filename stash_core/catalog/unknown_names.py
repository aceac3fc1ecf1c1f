"""One sentence for instance names a command does not know: the close names it does know, and, for a
NAME:QUOTA (the form `stash spot` takes), that this command takes names only."""

from __future__ import annotations

import difflib
from collections.abc import Iterable


def unknown_names_note(unknown: Iterable[str], known: Iterable[str]) -> str:
    """' (g5.xlarge:2: names only here, no :QUOTA; g5.xlarg: did you mean g5.xlarge?)', or '' when none is
    close to a known name."""
    known = list(known)
    folded = {str(name).casefold(): name for name in known}
    notes = []
    for name in unknown:
        if base := _quota_of_known(name, known):
            notes.append(f"{name}: names only here, no :QUOTA (give {base})")
            continue
        if (twin := folded.get(name.casefold())) is not None:  # G5.XLARGE: too far apart for difflib
            notes.append(f"{name}: did you mean {twin}?")
            continue
        close = difflib.get_close_matches(name, known, n=3, cutoff=0.85)  # a letter or two off, not a family
        if close:
            notes.append(f"{name}: did you mean {', '.join(close)}?")
    return f" ({'; '.join(notes)})" if notes else ""


def not_in_catalog_text(db_path, name: str, subject: str, add_advice: str) -> str:
    """'<subject> is not in the catalog<note><add_advice>' (subject: "instance 'NAME'"), the advice left out
    for a NAME:QUOTA of a known name (a name with a colon cannot be added)."""
    from stash_core.catalog.catalog import list_instances  # read only once a name is refused

    known = list(list_instances(db_path)["name"])
    # no advice to add a NAME:QUOTA (a colon is no name) nor a name of another case (add refuses the clash)
    twin = name.casefold() in {str(other).casefold() for other in known}
    advice = "" if _quota_of_known(name, known) or twin else add_advice
    return f"{subject} is not in the catalog{unknown_names_note([name], known)}{advice}"


def _quota_of_known(name: str, known: list[str]) -> str | None:
    """The known name of a NAME:QUOTA ("g5.xlarge" of "g5.xlarge:2"), else None."""
    base, colon, _quota = name.partition(":")
    return base if colon and base in known else None
