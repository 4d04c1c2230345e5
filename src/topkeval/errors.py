"""Errors raised by topkeval, and the helpers that word them.

Every mistake a user can make raises a subclass of :class:`TopkevalError`, which is itself a
:class:`ValueError`, with a message that says what is wrong and how to fix it.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable


class TopkevalError(ValueError):
    """Base class of every error that topkeval raises for bad input."""


class ParameterError(TopkevalError):
    """An argument has a value outside what it accepts (k < 1, an unknown convention...)."""


class UnknownMetricError(TopkevalError):
    """A metric name that the registry does not know."""


class ColumnError(TopkevalError):
    """A column is missing, or holds values of the wrong kind."""


class DataError(TopkevalError):
    """The data itself is unusable: NaN scores, duplicate rows, an empty table, lengths differ."""


class EmptyQueryError(DataError):
    """A query has no relevant item while ``empty_queries="error"``."""


class ShortListError(DataError):
    """A cutoff exceeds a query's list while ``short_lists="error"``."""


class InputFileError(TopkevalError):
    """A file that is missing, unreadable, or of an unknown format."""


def closest(name: str, choices: Iterable[str], n: int = 3) -> list[str]:
    """Return up to ``n`` entries of ``choices`` closest to ``name`` (case-insensitive)."""
    choices = list(choices)
    lowered = {c.lower(): c for c in choices}
    hits = difflib.get_close_matches(name.lower(), list(lowered), n=n, cutoff=0.5)
    return [lowered[h] for h in hits]


def did_you_mean(name: str, choices: Iterable[str]) -> str:
    """Return " Did you mean 'x'?" or an empty string."""
    hits = closest(name, choices)
    if not hits:
        return ""
    return " Did you mean " + " or ".join(repr(h) for h in hits) + "?"


def bad_parameter(param: str, owner: str, expected: str, got: object) -> ParameterError:
    """The one message template for bad arguments (as scikit-learn words it)."""
    return ParameterError(f"The {param!r} parameter of {owner} must be {expected}. Got {got!r} instead.")


def show(value) -> str:
    """repr() of an id as the user wrote it (numpy scalars shown as Python values)."""
    item = getattr(value, "item", None)
    if item is not None and type(value).__module__ == "numpy":
        value = item()
    return repr(value)
