"""One declarative layer for the parameters of every public function and method.

Each public callable states, once, what each of its parameters accepts (as scikit-learn's
``validate_params`` does), and :func:`validate_params` checks the values given before the body
runs, turning numpy scalars into Python ones on the way::

    @validate_params(k=Int(1, MAX_CUTOFF), digits=Int(0, 15), title=Text(),
                     queries=[Ids(), None], path=FilePath(), data=Given("read by io.read_columns"))
    def f(data, k=10, digits=4, title="", queries=None, path=None): ...

Every parameter of the signature must be declared, ``**settings`` included, or the decorator
refuses the function when the module is imported: a new parameter cannot skip validation. A value
that is refused raises :class:`~topkeval.errors.ParameterError` with the one message template
(``The 'k' parameter of side_by_side must be an int in [1, 100000000]. Got 0 instead.``), and a
misspelt keyword raises :class:`ArgumentError` (a ParameterError and a TypeError) with the closest
name. :data:`REGISTRY` lists every validated callable: the API-wide hostile-value test walks it.

``Given`` declares a parameter whose value is checked deeper, where it is read (a table, a score
matrix, a mapping of item popularities): the declaration says where, so that a reader of the
signature knows nothing goes unchecked.
"""

from __future__ import annotations

import functools
import inspect
import math
import numbers
import os
import re
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

import numpy as np

from . import stattests
from .conventions import PRESETS, Conventions
from .conventions import SETTINGS as CONVENTION_SETTINGS
from .errors import ParameterError, bad_parameter, did_you_mean

F = TypeVar("F", bound=Callable[..., Any])

#: qualified name -> the validated callable (the API-wide hostile-value test walks it)
REGISTRY: dict[str, Callable] = {}


class ArgumentError(ParameterError, TypeError):
    """A keyword the callable does not take, or a missing argument (also a TypeError, as Python raises)."""


class Constraint:
    """What a parameter accepts: :meth:`check` returns the (normalised) value or raises."""

    expected = "a valid value"

    def accepts(self, value) -> bool:  # pragma: no cover - each constraint defines it
        raise NotImplementedError

    def normalise(self, value):
        return value

    def check(self, value, param: str, owner: str):
        if not self.accepts(value):
            raise bad_parameter(param, owner, self.expected, _shown(value), self.hint(value))
        return self.normalise(value)

    def hint(self, value) -> str:
        return ""


def _is_int(value) -> bool:
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def _is_metric(value) -> bool:
    """A parsed metric (:class:`topkeval.metrics.names.Metric`, which lives above this module), or an
    ir_measures measure object (``ir_measures.nDCG@10``, read by its ``str()``)."""
    if type(value).__module__.split(".")[0] == "ir_measures" and hasattr(value, "NAME"):
        return True
    return type(value).__name__ == "Metric" and hasattr(value, "family") and hasattr(value, "k")


def _shown(value):
    """The value as the message shows it: long texts and containers cut."""
    text = repr(value)
    if len(text) > 80:
        return _Cut(text[:60] + "..." + text[-10:])
    return value


class _Cut(str):
    def __repr__(self) -> str:
        return str(self)


class Int(Constraint):
    """An integer in ``[low, high]``: numpy integers accepted; bools, floats and text refused."""

    def __init__(self, low: int = 1, high: int | None = None):
        self.low, self.high = low, high
        # a bound far beyond any sensible value (a cutoff of 2**40) is named only to a value beyond it
        shown = high if high is not None and high < 2**31 else None
        lower = "a positive int" if low == 1 else f"an int >= {low}"
        self.expected = lower if shown is None else f"an int in [{low}, {high}]"
        self.beyond = lower + (f" of at most {high}" if high is not None else "")

    def accepts(self, value) -> bool:
        return _is_int(value) and self.low <= int(value) and (self.high is None or int(value) <= self.high)

    def check(self, value, param: str, owner: str):
        if _is_int(value) and self.high is not None and int(value) > self.high:
            raise bad_parameter(param, owner, self.beyond, _shown(value))
        return super().check(value, param, owner)

    def normalise(self, value):
        return int(value)

    def hint(self, value) -> str:
        if isinstance(value, float) and value.is_integer():
            return f" Write {int(value)}, an int."
        return ""


class Real(Constraint):
    """A finite real number within the bounds (numpy scalars accepted; bools refused)."""

    def __init__(self, low: float | None = None, high: float | None = None, *, low_open: bool = False,
                 high_open: bool = False):
        self.low, self.high, self.low_open, self.high_open = low, high, low_open, high_open
        if low is not None and high is not None:
            self.expected = f"a number in {'(' if low_open else '['}{low:g}, {high:g}{')' if high_open else ']'}"
        elif low is not None:
            self.expected = f"a number {'>' if low_open else '>='} {low:g}"
        elif high is not None:
            self.expected = f"a number {'<' if high_open else '<='} {high:g}"
        else:
            self.expected = "a finite number"

    def accepts(self, value) -> bool:
        if not isinstance(value, numbers.Real) or isinstance(value, bool) or not math.isfinite(value):
            return False
        v = float(value)
        return (self.low is None or (v > self.low if self.low_open else v >= self.low)) and \
               (self.high is None or (v < self.high if self.high_open else v <= self.high))

    def normalise(self, value):
        return float(value)


class Bool(Constraint):
    """True or False (numpy bools accepted; 0 and 1 refused: they are often a mistake for another parameter)."""

    expected = "True or False"

    def accepts(self, value) -> bool:
        return isinstance(value, (bool, np.bool_))

    def normalise(self, value):
        return bool(value)


class Options(Constraint):
    """One of the given strings, compared exactly (the message suggests the closest)."""

    def __init__(self, *values: str):
        self.values = values
        self.expected = "one of " + ", ".join(repr(v) for v in values)

    def accepts(self, value) -> bool:
        return isinstance(value, str) and value in self.values

    def hint(self, value) -> str:
        return did_you_mean(value, self.values) if isinstance(value, str) else ""


class OptionList(Options):
    """One of the given strings, or a non-empty list or tuple of distinct ones."""

    def __init__(self, *values: str):
        super().__init__(*values)
        self.expected = "one of " + ", ".join(repr(v) for v in values) + ", or a list of them"

    def accepts(self, value) -> bool:
        if isinstance(value, (list, tuple)):
            return bool(value) and all(super(OptionList, self).accepts(v) for v in value) and \
                len(set(value)) == len(value)
        return super().accepts(value)

    def normalise(self, value):
        return list(value) if isinstance(value, (list, tuple)) else [value]

    def hint(self, value) -> str:
        if isinstance(value, (list, tuple)):
            if len(set(map(repr, value))) < len(value):
                return " One is listed twice."
            return next((super(OptionList, self).hint(v) for v in value if not super(OptionList, self).accepts(v)), "")
        return super().hint(value)


class Text(Constraint):
    """A string (``empty=False``: at least one character that is not a space); no NUL character."""

    def __init__(self, *, empty: bool = True, max_length: int | None = None):
        self.empty, self.max_length = empty, max_length
        self.expected = "a string" if empty else "a non-empty string"
        if max_length is not None:
            self.expected += f" of at most {max_length:,} characters"

    def accepts(self, value) -> bool:
        return isinstance(value, str) and "\x00" not in value and (self.empty or bool(value.strip())) and \
            (self.max_length is None or len(value) <= self.max_length)


class Name(Constraint):
    """A name to register under (an output format): lowercase letters, digits, ``_`` and ``-``,
    starting with a letter, as it is typed after a flag (``--format tsv``)."""

    def __init__(self, *, max_length: int = 32):
        self.pattern = re.compile(rf"[a-z][a-z0-9_-]{{0,{max_length - 1}}}")
        self.expected = (f"a name of lowercase letters, digits, '_' and '-', starting with a letter (at most "
                         f"{max_length} characters)")

    def accepts(self, value) -> bool:
        return isinstance(value, str) and self.pattern.fullmatch(value) is not None

    def hint(self, value) -> str:
        if isinstance(value, str) and value.strip() and self.accepts(value.strip().lower().replace(" ", "_")):
            return f" Write {value.strip().lower().replace(' ', '_')!r}."
        return ""


class KeyPath(Constraint):
    """A ``/``-separated path of the names a tracking store takes in metric names and artifact paths
    (MLflow: :meth:`Results.log_mlflow`'s ``prefix`` and ``artifact_path``): ASCII letters, digits, ``_``,
    ``-``, ``.`` and spaces between the slashes, no part empty (but the last: ``"eval/"`` ends with one),
    ``.`` or ``..``; the empty text is the top level."""

    _PART = re.compile(r"[A-Za-z0-9_.\- ]+")

    def __init__(self, *, max_length: int = 200):
        self.max_length = max_length
        self.expected = (f"a path of names separated by '/' (ASCII letters, digits, '_', '-', '.' and spaces; no "
                         f"empty, '.' or '..' part; at most {max_length} characters)")

    def accepts(self, value) -> bool:
        if not isinstance(value, str) or len(value) > self.max_length:
            return False
        parts = value.split("/")
        if parts[-1] == "":
            parts = parts[:-1]
        return all(self._PART.fullmatch(p) is not None and p.strip(".") != "" for p in parts)

    def hint(self, value) -> str:
        if isinstance(value, str) and value.startswith("/"):
            return " Drop the leading '/'."
        return ""


class Column(Constraint):
    """A column name: a non-empty string."""

    expected = "a column name (a non-empty string)"

    def accepts(self, value) -> bool:
        return isinstance(value, str) and bool(value) and "\x00" not in value

    def hint(self, value) -> str:
        if _is_int(value):
            return (f" Column names are text: write {str(value)!r}; a table whose columns are numbers can be renamed "
                    "first (pandas: df.rename(columns=str)).")
        return ""


class Columns(Column):
    """One column name, or a non-empty list or tuple of distinct column names."""

    expected = "a column name or a list of distinct column names"

    def accepts(self, value) -> bool:
        if isinstance(value, (list, tuple)):
            return bool(value) and all(Column.accepts(self, v) for v in value) and len(set(value)) == len(value)
        return Column.accepts(self, value)

    def hint(self, value) -> str:
        if isinstance(value, (list, tuple)):
            if len(set(map(repr, value))) < len(value):
                return " A column is listed twice."
            return next((h for h in map(super().hint, value) if h), "")
        return super().hint(value)


class Template(Constraint):
    """A text pattern with one ``{field}`` placeholder (``"https://cdn/{item}.jpg"``), and no other."""

    def __init__(self, field: str):
        self.field = field
        self.expected = f"a pattern with {{{field}}} (such as 'https://cdn.example.com/{{{field}}}.jpg')"

    def accepts(self, value) -> bool:
        if not isinstance(value, str) or "{" + self.field + "}" not in value:
            return False
        try:
            value.format(**{self.field: "x"})
        except (KeyError, IndexError, ValueError):
            return False
        return True

    def hint(self, value) -> str:
        if isinstance(value, str) and "{" + self.field + "}" not in value:
            return f" Without {{{self.field}}} every thumbnail would show the same address."
        if isinstance(value, str):
            return (f" {{{self.field}}} is the only placeholder; write a literal brace twice ({{{{ or }}}}).")
        return ""


class FilePath(Constraint):
    """A file path: a non-empty str, bytes or os.PathLike, without NUL characters (what is at the
    path is checked where it is read, :mod:`topkeval.inputs.paths`, or written, :mod:`topkeval.files`)."""

    expected = "a file path (a str or a pathlib.Path)"

    @staticmethod
    def text(value) -> str | None:
        """The path as text, or None when ``value`` is no path at all."""
        if not isinstance(value, (str, bytes, os.PathLike)):
            return None
        try:
            return os.fsdecode(os.fspath(value))
        except (TypeError, ValueError, UnicodeError):
            return None

    def accepts(self, value) -> bool:
        text = self.text(value)
        return text is not None and bool(text.strip()) and "\x00" not in text

    def check(self, value, param: str, owner: str):
        text = self.text(value)
        if text is not None and "\x00" in text:
            raise bad_parameter(param, owner, "a file path without NUL characters", _shown(value))
        return super().check(value, param, owner)

    def hint(self, value) -> str:
        text = self.text(value)
        if text is not None and not text.strip():
            return " An empty path names no file: give the path of the file."
        return ""


class Paths(Constraint):
    """A non-empty list or tuple of file paths."""

    expected = "a non-empty list of file paths"

    def accepts(self, value) -> bool:
        return isinstance(value, (list, tuple)) and bool(value) and all(FilePath().accepts(v) for v in value)

    def hint(self, value) -> str:
        if FilePath().accepts(value):
            return f" For one file, pass a list: [{value!r}]."
        return ""


class Ids(Constraint):
    """A list of ids (query ids, item ids): a list, tuple, array or Series, never a lone string, whose
    characters would be read as ids one by one."""

    expected = "a list of ids"

    def accepts(self, value) -> bool:
        if isinstance(value, (str, bytes, Mapping)) or not hasattr(value, "__iter__") or hasattr(value, "__next__"):
            return False
        if getattr(value, "ndim", 1) != 1:
            return False
        if getattr(getattr(value, "dtype", None), "kind", "O") != "O":
            return True  # numbers, text, dates: each one id
        return all(_ID.accepts(v) for v in value)

    def normalise(self, value):
        return list(value.tolist() if hasattr(value, "tolist") else value)

    def hint(self, value) -> str:
        if isinstance(value, (str, bytes)) or _is_int(value):
            return f" For one id, pass a list: [{value!r}]."
        return ""


class IntList(Constraint):
    """A non-empty list of integers in ``[low, high]`` (a range or array too), never a lone number."""

    def __init__(self, low: int = 1, high: int | None = None, *, max_length: int | None = None):
        self.item = Int(low, high)
        self.max_length = max_length
        kind = self.item.expected.split(" ", 1)[1]  # "positive int", "int >= 0"
        self.expected = f"a non-empty list of {kind}s" if kind.endswith("int") else f"a non-empty list of ints ({kind})"
        if max_length is not None:
            self.expected += f", at most {max_length:,} of them"

    def accepts(self, value) -> bool:
        if isinstance(value, (str, bytes, Mapping)) or not hasattr(value, "__iter__") or hasattr(value, "__next__"):
            return False
        if getattr(value, "ndim", 1) != 1:
            return False
        if self.max_length is not None and len(value) > self.max_length:
            return False
        values = list(value.tolist() if hasattr(value, "tolist") else value)
        return bool(values) and all(self.item.accepts(v) for v in values)

    def normalise(self, value):
        return [int(v) for v in (value.tolist() if hasattr(value, "tolist") else value)]

    def hint(self, value) -> str:
        if _is_int(value):
            return f" For one cutoff, pass a list: [{value!r}]."
        return ""


class Metrics(Constraint):
    """A metric name, a :class:`~topkeval.metrics.names.Metric` (or an ir_measures measure), or a list of
    them: the type only; the names
    themselves (an empty one, an unknown one) are refused by the metric parser, which suggests the
    closest known names."""

    def __init__(self, *, empty: bool = True):
        self.empty = empty  # an empty list: left to the parser (True), or refused here
        self.expected = "a metric name or a list of metric names" + ("" if empty else " (at least one)")

    def accepts(self, value) -> bool:
        def one(v) -> bool:
            return _is_metric(v) or isinstance(v, str)

        if isinstance(value, (list, tuple)):
            return (self.empty or bool(value)) and all(one(v) for v in value)
        return one(value)


class Map(Constraint):
    """A mapping (a dict, a pandas Series)."""

    expected = "a mapping (a dict or a pandas Series)"

    def accepts(self, value) -> bool:
        return isinstance(value, Mapping) or type(value).__name__ == "Series"


class Axes(Constraint):
    """A matplotlib Axes to draw into."""

    expected = "a matplotlib Axes"

    def accepts(self, value) -> bool:
        return type(value).__module__.startswith("matplotlib") and hasattr(value, "figure") and hasattr(value, "plot")


class Function(Constraint):
    """A callable."""

    expected = "a function"

    def accepts(self, value) -> bool:
        return callable(value)


class Settings(Constraint):
    """The convention keywords (``**settings``): the names of :data:`~topkeval.conventions.SETTINGS`,
    each value checked by :func:`topkeval.conventions.resolve` with the caller's name."""

    def __init__(self):
        self.allowed = tuple(s.name for s in CONVENTION_SETTINGS)

    def accepts(self, value) -> bool:
        return True


class Given(Constraint):
    """A value checked where it is read (a table, a matrix, a mapping): ``where`` says by what."""

    def __init__(self, where: str):
        self.where = where

    def accepts(self, value) -> bool:
        return True


class _AnyOf(Constraint):
    def __init__(self, options: list):
        self.options = [o for o in options if o is not None]
        self.none = None in options
        parts = (["None"] if self.none else []) + [o.expected for o in self.options]
        self.expected = " or ".join(parts)

    def accepts(self, value) -> bool:
        return (value is None and self.none) or any(o.accepts(value) for o in self.options)

    def normalise(self, value):
        if value is None:
            return None
        return next(o for o in self.options if o.accepts(value)).normalise(value)

    def hint(self, value) -> str:
        return next((h for h in (o.hint(value) for o in self.options) if h), "")


def _constraint(spec) -> Constraint:
    if isinstance(spec, Constraint):
        return spec
    if isinstance(spec, list):
        if not spec or not all(s is None or isinstance(s, Constraint) for s in spec):
            raise TypeError(f"a parameter's alternatives are constraints or None, got {spec!r}")
        return _AnyOf(spec)
    raise TypeError(f"not a constraint: {spec!r}")


def validate_params(**spec) -> Callable[[F], F]:
    """Check the parameters of a public callable against ``spec`` before its body runs.

    Parameters
    ----------
    **spec
        One entry per parameter of the signature (``self`` aside; ``*args``/``**kwargs`` by their
        names): a :class:`Constraint`, or a list of constraints and None (any of them).

    Raises
    ------
    TypeError
        When the module is imported: a parameter without a constraint, or a constraint for a
        parameter the callable does not have.

    Examples
    --------
    >>> @validate_params(k=Int(1), digits=[Int(0, 15), None])
    ... def show(k, digits=None):
    ...     return k, digits
    >>> show(3, digits=2)
    (3, 2)
    >>> show(0)
    Traceback (most recent call last):
    ...
    topkeval.errors.ParameterError: The 'k' parameter of show must be a positive int. Got 0 instead.
    """
    checks = {name: _constraint(s) for name, s in spec.items()}

    def wrap(func: F) -> F:
        sig = inspect.signature(func)
        params = [p for p in sig.parameters.values() if p.name not in ("self", "cls")]
        names = {p.name for p in params}
        missing, extra = names - set(checks), set(checks) - names
        if missing or extra:
            raise TypeError(f"validate_params of {func.__qualname__}: parameters without a constraint "
                            f"{sorted(missing)}, constraints without a parameter {sorted(extra)}")
        owner = func.__name__ if func.__name__ != "__init__" else func.__qualname__.split(".")[0]
        var_kw = next((p.name for p in params if p.kind is p.VAR_KEYWORD), None)
        keywords = [p.name for p in params if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]
        allowed = getattr(checks.get(var_kw or ""), "allowed", None)  # the keywords **settings takes, if it says
        if allowed is not None:
            keywords += list(allowed)

        @functools.wraps(func)
        def validated(*args, **kwargs):
            try:
                bound = sig.bind(*args, **kwargs)
            except TypeError as exc:
                raise _argument_error(exc, owner, keywords, kwargs) from None
            for name, value in bound.arguments.items():
                check = checks.get(name)
                if check is None:
                    continue
                if name == var_kw:
                    if allowed is not None and set(value) - set(allowed):
                        raise _argument_error(None, owner, keywords, value)
                    continue  # each value is checked by what it is passed to
                bound.arguments[name] = check.check(value, name, owner)
            return func(*bound.args, **bound.kwargs)

        validated.__validated__ = checks  # type: ignore[attr-defined]
        REGISTRY[f"{func.__module__}.{func.__qualname__}"] = validated
        return validated  # type: ignore[return-value]

    return wrap


def check_arguments(func, **values) -> dict:
    """Check ``values`` against the constraints ``func`` declares, without calling it: a command line
    checks its options before a long evaluation rather than after. Returns the normalised values.

    >>> @validate_params(k=Int(1))
    ... def f(k):
    ...     return k
    >>> check_arguments(f, k=3)
    {'k': 3}
    """
    checks = func.__validated__
    owner = func.__name__ if func.__name__ != "__init__" else func.__qualname__.split(".")[0]
    return {name: checks[name].check(value, name, owner) for name, value in values.items()}


def _argument_error(exc: TypeError | None, owner: str, keywords: list[str], given: dict) -> ArgumentError:
    unknown = [k for k in given if k not in keywords]
    if unknown:
        name = unknown[0]
        return ArgumentError(f"{owner}() got an unexpected keyword {name!r}.{did_you_mean(name, keywords)} "
                             f"It takes: {', '.join(keywords)}.")
    return ArgumentError(f"{owner}: {exc}".replace(f"{owner}: {owner}()", f"{owner}"))


def is_validated(func) -> bool:
    """Whether ``func`` (a function, or a method looked up on its class) goes through :func:`validate_params`."""
    return hasattr(func, "__validated__") or hasattr(getattr(func, "fget", None), "__validated__")


class Preset(Constraint):
    """A preset name of :data:`~topkeval.conventions.PRESETS`, or a
    :class:`~topkeval.conventions.Conventions` object."""

    def __init__(self):
        self.names = tuple(PRESETS)
        self.expected = f"one of {', '.join(map(repr, self.names))} or a Conventions object"

    def accepts(self, value) -> bool:
        return isinstance(value, Conventions) or isinstance(value, str) and value in self.names

    def hint(self, value) -> str:
        return did_you_mean(value, self.names) if isinstance(value, str) else ""


#: the ``conventions=`` parameter of every front door
CONVENTIONS = [Preset(), None]
#: the convention keywords (``**settings``): each checked by :func:`topkeval.conventions.resolve`
SETTINGS = Settings()
#: threads of the kernel
THREADS = [Int(1, 4096), None]
#: a number of bootstrap resamples or Monte Carlo permutations
RESAMPLES = Int(100, 10_000_000)
#: a seed of the resampling
SEED = [Int(0), None]
#: a confidence level
CONFIDENCE = Real(0, 1, low_open=True, high_open=True)
#: digits after the decimal point in a table
DIGITS = Int(0, 15)


class _Correction(Options):
    """A multiple-testing correction: "holm", "bonferroni", "bh", or "none" / None (no correction)."""

    def __init__(self):
        super().__init__("holm", "bonferroni", "bh", "none")

    def normalise(self, value):
        return None if value == "none" else value


#: the multiple-testing correction of a comparison ("none" is None, as on the command line)
CORRECTION = [_Correction(), None]
#: the paired tests of a comparison
TEST = Options(*stattests.PAIRED)
#: the confidence intervals (compare's interval=, summary_ci's method=)
INTERVAL = Options(*stattests.INTERVALS)


class Model(Constraint):
    """A model name: a string (models are named by their score columns or run names, always text); a
    whole number is read as its text."""

    expected = "a model name (a non-empty string)"

    def accepts(self, value) -> bool:
        return isinstance(value, str) and bool(value) and "\x00" not in value or _is_int(value)

    def normalise(self, value):
        return str(int(value)) if _is_int(value) else value


class MetricName(Constraint):
    """A metric name (parsed by the metric registry) or a :class:`~topkeval.metrics.names.Metric`."""

    expected = "a metric name (a string such as 'recall@10')"

    def accepts(self, value) -> bool:
        return _is_metric(value) or isinstance(value, str) and bool(value.strip())

    def hint(self, value) -> str:
        if isinstance(value, (list, tuple)):
            return " Give one metric, not a list."
        return ""


class QueryId(Constraint):
    """One query id as the results hold it (text, bytes, a number, a date): never None, NaN, a bool
    or a container."""

    expected = "one query id (a string or a number)"

    def accepts(self, value) -> bool:
        if value is None or isinstance(value, (bool, np.bool_, list, tuple, set, dict)):
            return False
        if getattr(value, "ndim", 0) != 0 or hasattr(value, "__len__") and not isinstance(value, (str, bytes)):
            return False
        if isinstance(value, numbers.Real) and not _is_int(value) and not math.isfinite(value):
            return False
        try:
            hash(value)
        except TypeError:
            return False
        return not (isinstance(value, str) and "\x00" in value)

    def normalise(self, value):
        item = getattr(value, "item", None)
        return item() if item is not None and type(value).__module__ == "numpy" else value

    def hint(self, value) -> str:
        if isinstance(value, (list, tuple)):
            return " Give one id; to show several queries in a report, pass queries=[...]."
        return ""


_ID = QueryId()  # each element of Ids
