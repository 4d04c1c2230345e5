"""What a backend declares: the data it takes, what it supports, and the advice where it does not.

Each backend module defines one :class:`BackendPlugin` (``PLUGIN``), registered in one place
(:mod:`topkeval.backends`). The front door (:mod:`topkeval.request`) asks the first registered
backend that accepts the data, then checks that it declares every capability the request needs;
a missing one is refused with a message made here from the declarations (:func:`refusal`): the
option, the kind of data, the backend's advice, and the kinds of data that support it.

==============  ==========================================================================
capability      asked for by
==============  ==========================================================================
``rows``        ``evaluate()``: a table of (query, relevance, score) rows
``matrices``    ``evaluate_matrix()``: score matrices (users x items)
``updates``     ``MatrixEvaluator`` and ``TopkMetrics``: score matrices batch by batch
``clicks``      ``position=`` / ``propensity=``: a click log's positions and propensities
``stacked``     ``model=`` without ``qrels=``: one table of every model's rows, relevance in them
``judgments``   ``qrels=`` (and ``depth=``, ``judged_only=``, ``missing_queries=``): judgments apart
``segments``    ``by=`` / ``weight=``: query-level segments and weights
``streaming``   ``chunk_rows=``: a file read in batches
``lists``       the list-only metrics (novelty@10, coverage@10...: :attr:`Plan.lists
                <topkeval.engine.Plan.lists>`): each model's top k read again, its per-list
                arrays (:func:`topkeval.kernels.beyond.ranked_rows`) through the backend's
                ``query_ranking`` (:class:`topkeval.engine.rules.RanksAgain`)
==============  ==========================================================================
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

#: Every capability a backend may declare, with the options that ask for it (as a message names them).
CAPABILITIES: dict[str, str] = {
    "rows": "evaluate()",
    "matrices": "evaluate_matrix()",
    "updates": "MatrixEvaluator and TopkMetrics (score matrices batch by batch)",
    "clicks": "position= and propensity=",
    "stacked": "model= without qrels=",
    "judgments": "qrels=",
    "segments": "by= and weight=",
    "streaming": "chunk_rows=",
    "lists": "the beyond-accuracy metrics (novelty@10, diversity@10, ...)",
}


def _no_evaluate():
    raise NotImplementedError("this backend declares no evaluate(request)")


def _no_prepare():
    raise NotImplementedError("this backend declares no prepare(request): it does not take updates")


@dataclass(frozen=True)
class BackendPlugin:
    """One backend as the dispatcher sees it.

    ``accepts(data, plan)`` says whether it takes the data (``plan`` may be None);
    ``capabilities`` what it supports (:data:`CAPABILITIES`); ``hints`` per capability it lacks,
    the advice its refusal gives; ``evaluate(request)`` evaluates a checked request
    (:class:`topkeval.request.Request`, or :class:`topkeval.request.MatrixRequest` with
    ``matrices``); ``prepare(request)``, with ``updates``, checks one batch of an accumulating front
    door (a :class:`topkeval.request.MatrixRequest`) and returns it ready to evaluate: its
    ``shape``, ``models`` and ``leaked`` pairs, ``ids(values)``, ``signatures()`` and
    ``evaluate(users)`` (:class:`topkeval.backends.matrix.Update`).
    """

    name: str
    description: str
    accepts: Callable[[object, object], bool]
    capabilities: frozenset[str] = frozenset()
    hints: Mapping[str, str] = field(default_factory=dict)
    evaluate: Callable[[Any], Any] = field(default=lambda request: _no_evaluate())
    prepare: Callable[[Any], Any] = field(default=lambda request: _no_prepare())

    def __post_init__(self):
        unknown = sorted((set(self.capabilities) | set(self.hints)) - set(CAPABILITIES))
        if unknown:
            raise ValueError(f"backend {self.name!r} declares unknown capabilities {unknown}: "
                             f"choose among {sorted(CAPABILITIES)}")

    def supports(self, capability: str) -> bool:
        return capability in self.capabilities


def refusal(plugin: BackendPlugin, capability: str, registered: Iterable[BackendPlugin], option: str | None = None) -> str:
    """The message refusing ``capability`` (asked by ``option``, by default every option that asks
    for it) on the data ``plugin`` takes: its advice, then the kinds of data that support it.

    >>> spark = BackendPlugin("spark", "a Spark DataFrame", lambda d, p: False, frozenset({"rows"}),
    ...                       {"streaming": "it is evaluated partition by partition already: drop chunk_rows="})
    >>> cpu = BackendPlugin("cpu", "a table in memory or a table file", lambda d, p: True,
    ...                     frozenset({"rows", "streaming"}))
    >>> print(refusal(spark, "streaming", [spark, cpu]))
    chunk_rows= is not supported for a Spark DataFrame: it is evaluated partition by partition already: drop chunk_rows=. It is supported for: a table in memory or a table file.
    """
    option = option or CAPABILITIES[capability]
    hint = plugin.hints.get(capability)
    where = [p.description for p in registered if p.supports(capability)]
    return (f"{option} is not supported for {plugin.description}" + (f": {hint}" if hint else "") + "."
            + (f" It is supported for: {', '.join(where)}." if where else ""))


__all__ = ["CAPABILITIES", "BackendPlugin", "refusal"]
