"""Errors raised by topkeval, and the helpers that word them.

Every mistake a user can make raises a subclass of :class:`TopkevalError`, which is itself a
:class:`ValueError`, with a message that says what is wrong and how to fix it.
"""

from __future__ import annotations

import difflib
import math
import numbers
import os
import sys
import types
import warnings
from collections.abc import Iterable
from typing import Literal, overload


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


class OutputFileError(InputFileError):
    """A file that cannot be written: a missing folder, a full disk, no permission, something other
    than a regular file at the path, or an existing file without ``overwrite=True``."""


class TopkevalWarning(UserWarning):
    """Something that is not an error but may not be what was meant (a log that looks truncated to
    each query's top N, a threshold no grade reaches)."""


_PACKAGE = os.path.dirname(os.path.abspath(__file__)) + os.sep


def warn(message: str, category: type[Warning] = TopkevalWarning) -> None:
    """Warn, pointing at the user's line: the first caller outside topkeval (however deep inside the
    package the warning arises, and whatever the parameter layer's wrappers add to the stack)."""
    frame: types.FrameType | None = sys._getframe(1)
    level = 2
    while frame is not None and frame.f_code.co_filename.startswith(_PACKAGE):
        frame = frame.f_back
        level += 1
    warnings.warn(message, category, stacklevel=level)


def optional_module(name: str, extra: str, feature: str) -> types.ModuleType:
    """Import an optional dependency when a feature needs it (never at ``import topkeval``): the
    module, or a one-line ParameterError naming the extra that installs it.

    >>> optional_module("math", "none", "this").__name__
    'math'
    >>> optional_module("no_such_module_here", "polars", "to_polars")
    Traceback (most recent call last):
    ...
    topkeval.errors.ParameterError: to_polars needs no_such_module_here, an optional dependency of topkeval: pip install "topkeval[polars]"
    """
    import importlib

    try:
        return importlib.import_module(name)
    except ImportError:
        raise ParameterError(f'{feature} needs {name.split(".")[0]}, an optional dependency of topkeval: '
                             f'pip install "topkeval[{extra}]"') from None


def plural(n: int, word: str, many: str | None = None) -> str:
    """``n`` and the word in its number: ``plural(1, "query", "queries")`` is "1 query".

    >>> plural(1, "query", "queries"), plural(2_000, "query", "queries"), plural(0, "model")
    ('1 query', '2,000 queries', '0 models')
    """
    return f"{n:,} {word if n == 1 else (many or word + 's')}"


def closest(name: str, choices: Iterable[str], n: int = 3, cutoff: float = 0.5) -> list[str]:
    """Return up to ``n`` entries of ``choices`` closest to ``name`` (case-insensitive; ``cutoff``:
    the least similarity, difflib's ratio)."""
    choices = list(choices)
    lowered = {c.lower(): c for c in choices}
    hits = difflib.get_close_matches(name.lower(), list(lowered), n=n, cutoff=cutoff)
    return [lowered[h] for h in hits]


def did_you_mean(name: str, choices: Iterable[str]) -> str:
    """Return " Did you mean 'x'?" or an empty string."""
    hits = closest(name, choices)
    if not hits:
        return ""
    return " Did you mean " + " or ".join(repr(h) for h in hits) + "?"


def bad_parameter(param: str, owner: str, expected: str, got: object, hint: str = "") -> ParameterError:
    """The one message template for bad arguments (as scikit-learn words it).

    >>> str(bad_parameter("k", "recall_at_k", "a positive int", 0))
    "The 'k' parameter of recall_at_k must be a positive int. Got 0 instead."
    """
    return ParameterError(f"The {param!r} parameter of {owner} must be {expected}. Got {got!r} instead.{hint}")


@overload
def check_int(value, param: str, owner: str, *, low: int = ..., high: int | None = ...,
              optional: Literal[False] = ...) -> int: ...


@overload
def check_int(value, param: str, owner: str, *, low: int = ..., high: int | None = ...,
              optional: bool) -> int | None: ...


def check_int(value, param: str, owner: str, *, low: int = 1, high: int | None = None,
              optional: bool = False) -> int | None:
    """An integer in ``[low, high]`` (numpy integers accepted; bools, floats and text refused).

    >>> check_int(3, "k", "f")
    3
    >>> check_int(0, "k", "recall_at_k")
    Traceback (most recent call last):
    ...
    topkeval.errors.ParameterError: The 'k' parameter of recall_at_k must be a positive int. Got 0 instead.
    """
    if value is None and optional:
        return None
    ok = isinstance(value, numbers.Integral) and not isinstance(value, bool)
    if ok:
        value = int(value)
        ok = value >= low and (high is None or value <= high)
    if not ok:
        if low == 1 and (high is None or not (isinstance(value, int) and value > high)):
            expected = "a positive int"
        elif low == 1:
            expected = f"a positive int of at most {high}"
        elif high is None:
            expected = f"an int >= {low}"
        else:
            expected = f"an int in [{low}, {high}]"
        raise bad_parameter(param, owner, ("None or " if optional else "") + expected, value)
    return value


@overload
def check_number(value, param: str, owner: str, *, low: float | None = ..., high: float | None = ...,
                 low_open: bool = ..., high_open: bool = ..., optional: Literal[False] = ...) -> float: ...


@overload
def check_number(value, param: str, owner: str, *, low: float | None = ..., high: float | None = ...,
                 low_open: bool = ..., high_open: bool = ..., optional: bool) -> float | None: ...


def check_number(value, param: str, owner: str, *, low: float | None = None, high: float | None = None,
                 low_open: bool = False, high_open: bool = False, optional: bool = False) -> float | None:
    """A finite real number within the given bounds (numpy scalars accepted; bools refused)."""
    if value is None and optional:
        return None
    ok = isinstance(value, numbers.Real) and not isinstance(value, bool) and math.isfinite(value)
    if ok:
        value = float(value)
        ok = (low is None or (value > low if low_open else value >= low)) and \
             (high is None or (value < high if high_open else value <= high))
    if not ok:
        if low is not None and high is not None:
            expected = f"a number in {'(' if low_open else '['}{low:g}, {high:g}{')' if high_open else ']'}"
        elif low is not None:
            expected = f"a number {'>' if low_open else '>='} {low:g}"
        else:
            expected = "a finite number"
        raise bad_parameter(param, owner, ("None or " if optional else "") + expected, value)
    return value


def check_choice(value, allowed, param: str, owner: str):
    """One of ``allowed`` (strings compared exactly; the message suggests the closest)."""
    if isinstance(value, str) and value in allowed or value is None and None in allowed:
        return value
    names = [a for a in allowed if a is not None]
    hint = did_you_mean(value, names) if isinstance(value, str) else ""
    expected = "one of " + ", ".join(repr(a) for a in allowed)
    raise bad_parameter(param, owner, expected, value, hint)


def check_seed(value, owner: str):
    """A seed: None or a non-negative int (numpy integers accepted)."""
    return check_int(value, "seed", owner, low=0, optional=True)


def check_column_name(value, param: str, owner: str, *, optional: bool = False):
    """A column name: a non-empty string."""
    if value is None and optional:
        return None
    if not isinstance(value, str) or not value:
        raise bad_parameter(param, owner, ("None or " if optional else "") + "a column name (a string)", value)
    return value


def show(value) -> str:
    """repr() of an id as the user wrote it (numpy scalars shown as Python values)."""
    item = getattr(value, "item", None)
    if item is not None and type(value).__module__ == "numpy":
        value = item()
    return repr(value)
