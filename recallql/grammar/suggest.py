"""The one "did you mean" helper: the hint for an unknown name, keyword or option.

Every layer that reports an unknown name uses it (the grammar for keywords, options and shapes;
the engine for collections, fields and signal names; the CLI for end reasons), so the hint reads
the same everywhere:

- ``did you mean 'X'?`` — the closest option (case-insensitive; an option equal but for case
  wins, then `difflib.get_close_matches` with ratio ≥ `CUTOFF`), quoted as written in `options`;
- ``known: a, b, c`` — when nothing is close (at most `MAX_LISTED` names, in the given order);
- ``None`` — when nothing is close and there is nothing (or nothing useful) to list.

It lives in `recallql.grammar`, the lowest layer every user may import (`recallql.index` reports
no names: the engine checks them before a filter reaches the index).
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable

__all__ = ["CUTOFF", "MAX_LISTED", "closest", "did_you_mean"]

#: Smallest `difflib.SequenceMatcher` ratio (2·matches / total length) of a suggestion.
CUTOFF = 0.6
#: The listing shows at most this many names.
MAX_LISTED = 20


def closest(name: str, options: Iterable[str]) -> str | None:
    """The option closest to `name` (case-insensitive), or None when none is close enough."""
    choices = list(dict.fromkeys(options))
    folded = name.casefold()
    for option in choices:
        if option.casefold() == folded:
            return option
    by_key = {option.casefold(): option for option in reversed(choices)}
    match = difflib.get_close_matches(folded, list(by_key), n=1, cutoff=CUTOFF)
    return by_key[match[0]] if match else None


def did_you_mean(name: str, options: Iterable[str], *, listing: bool = True) -> str | None:
    """The hint for an unknown `name` among `options`.

    Args:
        name: what was written.
        options: the names that exist, in the order a listing shows them.
        listing: list the options when none is close (off where the message already names
            what was expected).

    Returns:
        ``"did you mean 'X'?"``, ``"known: a, b, c"`` or None.
    """
    choices = list(dict.fromkeys(options))
    match = closest(name, choices)
    if match is not None:
        return f"did you mean '{match}'?"
    if not listing or not choices:
        return None
    shown = ", ".join(choices[:MAX_LISTED])
    more = f", … ({len(choices)} in all)" if len(choices) > MAX_LISTED else ""
    return f"known: {shown}{more}"
