"""Metrics of your own, from the statistics the kernel already counts: :func:`define_metric`.

A defined metric is a registry entry like the built-in ones: the name parser, the plan, every
front door (tables, files, runs with judgments apart, score matrices, Spark), ``compare``, the
report and ``topkeval metrics`` see it. Its function receives one :class:`Counts` per evaluation
batch (one array per statistic, one value per query) and returns one value per query.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from ..errors import ParameterError, TopkevalError
from ..params import Bool, Function, Options, Text, validate_params
from . import names
from .registry import DEFINED, FAMILIES, register
from .trec import TREC_SETS, TREC_SETS_REFUSED

_NAME = re.compile(r"^[a-z][a-z0-9_]*$")
_DEFINED = DEFINED  # the built-in families can never be replaced; these can (:func:`shipped` sends them)


@dataclass(frozen=True)
class Counts:
    """The statistics of a batch of queries a defined metric reads (arrays of one value per query).

    Attributes
    ----------
    k : int or None
        The cutoff (None for a metric without one: then the top k is the whole list).
    n : ndarray
        Candidates of the query (after ``score_threshold``).
    R : ndarray
        Relevant items of the query.
    N : ndarray
        Non-relevant candidates of the query.
    rel_ret : ndarray
        Relevant candidates among the n.
    listed : ndarray
        Candidates in the top k: min(k, n) (with ``short_lists="pad"`` a metric may prefer k).
    h : ndarray
        h(k): relevant candidates in the top k (the exact expected value under ``ties="expected"``).
    hit : ndarray
        1 if a relevant candidate is in the top k (a probability under ``ties="expected"``).
    rr, ap_sum : ndarray or None
        With ``ranks=True``: the reciprocal rank of the first relevant candidate within the top
        k, and the sum of the precisions at the relevant ranks within it (AP times R).
    """

    k: int | None
    n: np.ndarray
    R: np.ndarray
    N: np.ndarray
    rel_ret: np.ndarray
    listed: np.ndarray
    h: np.ndarray
    hit: np.ndarray
    rr: np.ndarray | None = None
    ap_sum: np.ndarray | None = None


def _counts(st, metric, with_ranks: bool) -> Counts:
    n = np.asarray(st.n, np.float64)
    R = np.asarray(st.R, np.float64)
    rel_ret = np.asarray(st.rel_ret, np.float64)
    if metric.k is None:  # the top k is the whole list
        h, hit, listed = rel_ret, (rel_ret > 0).astype(np.float64), n
    else:
        col = st.column(metric.k)
        h, hit, listed = st.h[:, col], st.hit[:, col], np.minimum(float(metric.k), n)
    ranks = st.column(metric.k) if with_ranks else None
    return Counts(metric.k, n, R, np.asarray(st.N, np.float64), rel_ret, listed, h, hit,
                  st.rr[:, ranks] if with_ranks else None, st.ap_sum[:, ranks] if with_ranks else None)


@validate_params(name=Text(empty=False, max_length=64), function=Function(), cutoff=Options("required", "optional", "none"),
                 ranks=Bool(), summary=Text(empty=False, max_length=500),
                 formula=Text(empty=False, max_length=500), higher_is_better=Bool(), bounded=Bool(),
                 needs_all_relevant=Bool(), undefined=Text(empty=False, max_length=200), replace=Bool())
def define_metric(name: str, function: Callable, *, cutoff: str = "required", ranks: bool = False, summary: str,
                  formula: str, higher_is_better: bool = True, bounded: bool = True, needs_all_relevant: bool = False,
                  undefined: str = "never", replace: bool = False) -> None:
    r"""Register a metric of your own, computed from the statistics the kernel counts.

    ``function(counts)`` receives a :class:`Counts` (arrays of one value per query: h(k), hit(k),
    n, R, N, the relevant candidates retrieved, min(k, n), and with ``ranks=True`` the
    reciprocal rank and the sum of precisions at the relevant ranks) and returns one value per
    query; NaN marks an undefined value, which the conventions' ``undefined`` replaces. The metric
    is then evaluated by its name everywhere, ``name@k`` for ``cutoff="required"``.

    Parameters
    ----------
    name : str
        Lowercase letters, digits and ``_``, starting with a letter; not a metric name or alias
        already known.
    function : callable
        ``Counts -> array`` of one number per query (one that cannot take one argument is refused
        here, before it is registered). On Spark it is sent to the executors (by
        cloudpickle): define it in the script or notebook, or in a module the executors can import.
    cutoff : {"required", "optional", "none"}
        Whether the name takes ``@k``; without one the top k is the whole list.
    ranks : bool
        Also count ``rr`` and ``ap_sum`` (one more statistic of the kernel).
    summary, formula : str
        What it is and how it is computed, as ``topkeval metrics`` and the report show them.
    higher_is_better, bounded : bool
        Which value is best (the report's bold, compare's verdict), and whether values lie in [0, 1].
    needs_all_relevant : bool
        Its value counts relevant items outside the list (it divides by R): topkeval then warns on a
        log of top-N lists alone.
    undefined : str
        When a query's value is undefined, in words.
    replace : bool
        Define again a metric defined before with this function (a notebook cell run twice); the
        built-in metrics can never be replaced.

    Examples
    --------
    The share of the relevant items found in the top k, counted against at most k of them
    (:math:`h(k) / \min(R, k)`, LensKit's recall), defined by hand:

    >>> import numpy as np, topkeval as tk
    >>> def capped(c):
    ...     with np.errstate(divide="ignore", invalid="ignore"):
    ...         return np.where(c.R > 0, c.h / np.minimum(c.R, c.k), np.nan)
    >>> tk.define_metric("my_recall", capped, summary="recall against at most k relevant items",
    ...                  formula="h(k) / min(R, k)", undefined="R = 0", needs_all_relevant=True, replace=True)
    >>> log = {"query": [1, 1, 1, 2, 2], "relevance": [1, 0, 1, 0, 1], "score": [0.9, 0.8, 0.1, 0.5, 0.4]}
    >>> tk.evaluate(log, ["my_recall@2", "recall_capped@2", "recall@2"]).summary
           my_recall@2  recall_capped@2  recall@2
    model
    score         0.75             0.75      0.75

    Query 1 finds 1 of its 2 relevant items in its top 2, query 2 its only one: (1/2 + 1) / 2.

    >>> from topkeval.metrics.define import forget_metric
    >>> forget_metric("my_recall")
    """
    name = name.strip()
    if not _NAME.match(name):
        raise ParameterError(f"define_metric: the name {name!r} must be lowercase letters, digits and '_', starting "
                             "with a letter (it is written name@k in a metric list).")
    if name in TREC_SETS or name in TREC_SETS_REFUSED:  # metrics="official" is the set
        raise ParameterError(f"define_metric: {name!r} names trec_eval's set of measures; choose another name.")
    if name in FAMILIES and name not in _DEFINED:
        raise ParameterError(f"define_metric: {name!r} is a built-in metric; choose another name.")
    if name in FAMILIES and not replace:
        raise ParameterError(f"define_metric: {name!r} is defined already; pass replace=True to define it again.")
    if name not in FAMILIES:
        try:
            taken = str(names.parse_metric(name if cutoff == "none" else f"{name}@1"))
        except TopkevalError:
            taken = None
        if taken is not None:
            raise ParameterError(f"define_metric: {name!r} already names {taken} (an alias); choose another name.")
    _check_signature(name, function)
    _register(name, function, cutoff=cutoff, needs=("rank",) if ranks else (), summary=summary, formula=formula,
              higher_is_better=higher_is_better, bounded=bounded, needs_all_relevant=needs_all_relevant,
              undefined=undefined)


#: how a metric's function is called, for the messages
_TAKES = ("must take one argument, a Counts (its arrays c.h, c.hit, c.n, c.R, c.N, c.rel_ret, c.listed, and c.k: "
          "for example lambda c: c.h / c.R)")


def _check_signature(name: str, function: Callable) -> None:
    """Refuse, before it is registered, a function that cannot be called with one Counts (where its
    signature can be read; a function without one is called as it is, and its error named)."""
    try:
        signature = inspect.signature(function)
    except (TypeError, ValueError):
        return
    try:
        signature.bind(None)
    except TypeError:
        raise ParameterError(f"define_metric: the function of {name!r} {_TAKES}; this one takes "
                             f"{signature}.") from None


def _register(name: str, function: Callable, **spec) -> None:
    """Register a checked definition (here, or again in another interpreter: :func:`ensure`)."""
    cutoff, needs = spec["cutoff"], spec["needs"]
    with_ranks = "rank" in needs

    def values(st, metric, conv) -> np.ndarray:
        try:
            out = function(_counts(st, metric, with_ranks))
        except Exception as exc:  # the user's function: its error, named
            # a TypeError of the call itself (no frame of the function's own): it was called with the wrong arguments
            called = isinstance(exc, TypeError) and exc.__traceback__ is not None and exc.__traceback__.tb_next is None
            how = f" (a metric's function {_TAKES})" if called else ""
            raise ParameterError(f"The function of metric {name!r} raised {type(exc).__name__}: {exc}{how}") from exc
        out = np.asarray(out, dtype=object if not isinstance(out, np.ndarray) else None)
        if out.shape != (len(st.R),) or not (np.issubdtype(out.dtype, np.number) and not np.iscomplexobj(out)):
            raise ParameterError(f"The function of metric {name!r} must return one real number per query "
                                 f"({len(st.R)} here); it returned {out.dtype} values of shape {out.shape}.")
        out = out.astype(np.float64)
        if np.isinf(out).any():
            raise ParameterError(f"The function of metric {name!r} returned an infinite value; return NaN where the "
                                 "value is undefined.")
        return np.where(np.isnan(out), conv.undefined, out)

    register(name, cutoff=cutoff, needs=(("h",) if cutoff != "none" else ()) + tuple(needs),
             depth="list" if with_ranks and cutoff != "required" else "none", summary=spec["summary"],
             formula=spec["formula"], bounded=spec["bounded"], counts_found=True,
             higher_is_better=spec["higher_is_better"], needs_all_relevant=spec["needs_all_relevant"],
             undefined=spec["undefined"])(values)
    _DEFINED[name] = {"function": function, **spec}
    names.refresh()


def shipped(metric_families) -> dict[str, dict]:
    """The definitions of those of ``metric_families`` that were defined with :func:`define_metric`,
    to send to another interpreter (a Spark executor), which defines them with :func:`ensure`."""
    return {name: _DEFINED[name] for name in metric_families if name in _DEFINED}


def ensure(definitions: dict[str, dict]) -> None:
    """Define the metrics of :func:`shipped` that this interpreter does not know yet."""
    for name, spec in definitions.items():
        if name not in FAMILIES:
            spec = dict(spec)
            _register(name, spec.pop("function"), **spec)


def forget_metric(name: str) -> None:
    """Remove a metric defined with :func:`define_metric` (the built-in ones stay)."""
    if name not in _DEFINED:
        raise ParameterError(f"forget_metric: {name!r} was not defined with define_metric.")
    del FAMILIES[name]
    del _DEFINED[name]
    names.refresh()
