"""From statistics to per-query values: the empty-query rule, the short-list check, the metric
functions of the registry, one batch of queries at a time; depth truncation (trec_eval -M) and the
items a model gained or lost (for ``Results.diff``)."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

import numpy as np

from ..conventions import Conventions
from ..errors import EmptyQueryError, ParameterError, ShortListError, plural, show, warn
from ..inputs.grouped import GroupedLog, Judgments
from ..kernels.stats import QueryStats
from ..metrics import FAMILIES, metric_values
from ..metrics.registry import DEFINED
from .plan import Plan, judged_only_metrics
from .rules import Backend, Queries, comparable_scores, tie_rule


@dataclass
class ModelValues:
    """One model's per-query values over the queries of one log (a table, a run, a chunk)."""

    model: str
    queries: np.ndarray
    values: dict[str, np.ndarray]
    ties: int
    rows: int
    evaluated: int
    sums: dict[str, tuple[float, int]] | None = None  # {metric: (sum, count of defined values)} once reduced
    longest: int | None = None  # candidates in the longest list of an evaluated query (None: not counted)
    short: dict[str, int] | None = None  # {metric that pads: evaluated queries with fewer candidates than its k}

    def reduce(self) -> ModelValues:
        """Keep only sums and counts (bounded memory for streamed files): no per-query values."""
        sums = {name: (float(np.nansum(v)), int(np.isfinite(v).sum())) for name, v in self.values.items()}
        return ModelValues(self.model, self.queries[:0], {}, self.ties, self.rows, self.evaluated, sums, self.longest,
                           self.short)


@dataclass
class Evaluated:
    """What :func:`evaluate_log` returns: each model's values, and the counts of the batch."""

    models: list[ModelValues]
    queries: int
    skipped_empty: int
    relevant: int = 0  # relevant items in all, for the warning when there are none

    def reduce(self) -> Evaluated:
        return Evaluated([m.reduce() for m in self.models], self.queries, self.skipped_empty, self.relevant)


def evaluate_log(batch: Queries, plan: Plan, *, backend: Backend, judgments: Judgments | None = None,
                 threads: int | None = None, rows: int | None = None, judged_only: bool = False) -> Evaluated:
    """Evaluate every model of a batch of queries with ``backend`` (the CPU kernel for a grouped log:
    :data:`topkeval.backends.cpu.CPU`; the backend that :func:`topkeval.backends.select` chose).

    ``judgments`` (R and the judged grades per query) come from judgments kept apart from the
    candidates (TREC qrels); by default from the batch itself. ``rows``: the rows of the input
    this batch stands for (by default its own). ``judged_only``: the batch is a run without its
    unjudged items (the metrics with ``judged_only=true`` may be computed on it).

    A metric with its own relevance threshold (``rel=``) is computed with R and the relevant
    candidates under it; which queries are empty (``empty_queries``) is decided under the
    evaluation's threshold, so every metric has the same queries.
    """
    conv = plan.conv
    if not judged_only and judged_only_metrics(plan):
        raise ParameterError(f"{judged_only_metrics(plan)[0]} is computed on the run without its unjudged items "
                             "(trec_eval -J), which needs judgments apart from the run: pass qrels= (a table or a TREC "
                             "qrels file), or drop judged_only.")
    own = judgments is None
    if judgments is None:
        judgments = batch.judgments(conv)
    parts = list(plan.parts())
    # R under each part's threshold (a metric's own rel=): recounted from the judgments, or by the batch
    part_judgments = [judgments if part.conv.threshold == conv.threshold
                      else batch.judgments(part.conv) if own else judgments.under(part.conv) for part in parts]
    R = judgments.R
    empty = R == 0
    if conv.empty_queries == "error" and empty.any():
        ids = ", ".join(show(q) for q in batch.queries[empty][:5])
        raise EmptyQueryError(
            f"{plural(int(empty.sum()), 'query has', 'queries have')} no relevant item (for example {ids}) and "
            "empty_queries='error'. Use empty_queries='skip' to leave them out of the means or "
            "'keep' to score them with the 'undefined' value."
        )
    keep = ~empty if conv.empty_queries == "skip" else np.ones(len(R), bool)
    queries = batch.queries[keep] if not keep.all() else batch.queries
    models = batch.models
    out = []
    shared: list[dict] = [{} for _ in parts]  # per part, what the backend computes once for every model
    for model in models:
        values, ties, longest, short = {}, np.zeros(int(keep.sum()), bool), 0, {}
        for part, part_judged, common in zip(parts, part_judgments, shared):
            st = backend.compute(batch, model, part, part_judged, threads, shared=common)
            # the skipped queries' values computed and dropped, cheaper than a copy of every statistic; but
            # a function of define_metric sees the evaluated queries only, and so do the short-list checks and
            # the ratios pooled over the evaluated queries
            later = not keep.all() and conv.short_lists != "error" and not any(
                m.family in DEFINED or FAMILIES[m.family].ips == "pooled" for m in part.metrics)
            if not keep.all() and not later:
                st = st.take(keep)
            kept = keep if later else slice(None)
            n = st.n[kept]
            longest = max(longest, int(n.max()) if len(n) else 0)
            short.update({name: int((n < m.k).sum()) for name, m in zip(part.names, part.metrics)
                          if m.k is not None and FAMILIES[m.family].pads})
            if conv.short_lists == "error":
                _check_short(st, part.metrics, queries, model if len(models) > 1 else "")
            values.update({name: metric_values(st, m, conv)[kept] for name, m in zip(part.names, part.metrics)})
            ties |= st.tie_at_cutoff[kept]
        values = {name: values[name] for name in plan.names}
        out.append(ModelValues(model, queries, values, int(ties.sum()), batch.n_rows if rows is None else rows,
                               int(keep.sum()), longest=longest, short=short))
    return Evaluated(out, len(R), int((~keep).sum()), int(R.sum()))


def longest_of(parts: list[ModelValues]) -> int | None:
    """The longest list among parts of one model (None when a part did not count its lists)."""
    lengths = [p.longest for p in parts if p.longest is not None]
    return max(lengths) if lengths and len(lengths) == len(parts) else None


def short_of(parts: list[ModelValues], union: bool = False) -> dict[str, int] | None:
    """The short lists of one model's parts: summed over batches of other queries, or joined over
    parts of the same queries with other metrics (``union``); None when a part did not count them."""
    counts = [p.short for p in parts if p.short is not None]
    if not counts or len(counts) < len(parts):
        return None
    out: dict[str, int] = {}
    for c in counts:
        for name, count in c.items():
            out[name] = count if union else out.get(name, 0) + count
    return out


def merge_evaluated(parts: list[Evaluated], names: list[str]) -> Evaluated:
    """Batches of the same queries and models, each with some of the metrics, as one with every
    metric in the order of ``names`` (the metrics with ``judged_only=true`` are computed on the run
    without its unjudged items, the others on the run)."""
    first = parts[0]
    models = []
    for i, mv in enumerate(first.models):
        values: dict[str, np.ndarray] = {}
        for part in parts:
            values.update(part.models[i].values)
        models.append(ModelValues(mv.model, mv.queries, {n: values[n] for n in names},
                                  max(p.models[i].ties for p in parts), mv.rows, mv.evaluated,
                                  longest=longest_of([p.models[i] for p in parts]),
                                  short=short_of([p.models[i] for p in parts], union=True)))
    return Evaluated(models, first.queries, first.skipped_empty, first.relevant)


def evaluate_grouped(log: GroupedLog, plan: Plan, *, backend: Backend, depth: int | None = None,
                     threads: int | None = None) -> tuple[Evaluated, list]:
    """Evaluate every model of a log held whole (in memory, or a chunk of a file that holds every row of
    its queries): one :class:`Evaluated`, and the ``(log, R)`` pairs that ``Results.diff`` re-reads.

    With ``depth``, each model keeps only its first ``depth`` candidates (:func:`truncate`); R and
    the ideal DCG still count the relevant items cut off, as trec_eval ``-M`` does.
    """
    if depth is None:
        return evaluate_log(log, plan, threads=threads, backend=backend), [(log, None)]
    judgments = log.judgments(plan.conv)
    cut = [truncate(log, m, depth, plan.conv) for m in log.scores]
    parts = [evaluate_log(c, plan, judgments=judgments, threads=threads, rows=log.n_rows, backend=backend)
             for c in cut]
    batch = Evaluated([mv for p in parts for mv in p.models], parts[0].queries, parts[0].skipped_empty, parts[0].relevant)
    return batch, [(c, judgments.R) for c in cut]


def check_depth_rule(conv: Conventions) -> None:
    """Refuse a tie rule under which ``depth`` (trec_eval ``-M``) has no meaning."""
    if conv.ties == "expected":
        raise ParameterError("depth keeps the first N candidates of each query, which needs a deterministic tie "
                             "rule: pass ties='first', ties='item_desc' (trec_eval), ties='optimistic' or ties='pessimistic'.")
    if conv.ties == "ranx":
        raise ParameterError("depth is not available with ties='ranx': ranx has no depth cut, and its order of a "
                             "cut list (numba's quicksort) is not the cut of its order of the whole list. Cut the "
                             "run before evaluating it, or pass ties='first'.")


def truncate(log: GroupedLog, model: str, depth: int, conv: Conventions) -> GroupedLog:
    """Keep the first ``depth`` candidates of each query of one model under the tie rule (trec_eval -M).

    The order is the kernel's own (:func:`topkeval.kernels.cpu.ranks`), so truncation and
    evaluation never disagree about which candidate comes first.
    """
    from ..kernels import cpu

    check_depth_rule(conv)
    scores = comparable_scores(log.scores[model], conv)
    tie, items = tie_rule(log, conv, scores)
    rank = cpu.ranks(log.offsets, scores, log.relevant(conv), log.grades.astype(np.float64, copy=False), items, tie,
                     depth)
    return log.with_scores({model: log.scores[model]}).keep_rows(rank > 0)


def _check_short(st: QueryStats, metrics, queries, model: str) -> None:
    for m in metrics:
        depth = FAMILIES[m.family].depth
        if m.k is None and depth != "R":
            continue
        need = np.full(len(st.n), m.k) if m.k is not None else st.R
        short = st.n < need
        if short.any():
            q = int(np.argmax(short))
            k = int(need[q])
            raise ShortListError(
                f"{m} looks at the top {k}, but query {show(queries[q])} has only {int(st.n[q])} "
                f"candidates{' for model ' + repr(model) if model else ''} ({plural(int(short.sum()), 'query is', 'queries are')} "
                "that short). Use short_lists='pad' to count the missing slots as non-relevant, "
                "short_lists='shrink' to divide by the list length, or a smaller k."
            )


def warn_if_truncated(plan: Plan, queries: int, fewest: int, most: int) -> None:
    """Warn when every query has the same number of candidates N (``fewest == most``) and a metric
    counts relevant items outside the list (the registry's ``needs_all_relevant``: it divides by R,
    or ranks the relevant items ideally): a log of each query's top N recommendations alone cannot
    know the relevant items outside it."""
    uses_r = [label for m, label in zip(plan.metrics, plan.labels) if FAMILIES[m.family].needs_all_relevant]
    if queries >= 2 and uses_r and fewest == most:
        warn(f"Every query has exactly {plural(fewest, 'candidate')}. If these are each query's top {fewest} "
             f"recommendations, {uses_r[0]} counts only the relevant items among them, not all relevant items (R is "
             "too small, and recall inflated): pass the true interactions as qrels= (a table with query, item and "
             "relevance columns). If every query really has these candidates only, ignore this warning.")


def warn_if_nothing_relevant(conv: Conventions, total_relevant: int) -> None:
    """Warn once when no candidate at all is relevant (a threshold above every grade, say)."""
    if total_relevant == 0:
        rule = "grade > 0" if conv.threshold is None else f"grade >= {conv.threshold:g}"
        warn(f"No item is relevant ({rule}) in any query: every metric is undefined or 0. "
                      "Check the relevance column and the threshold"
                      + (" (the surprise preset calls ratings >= 3.5 relevant; for 0/1 clicks pass threshold=1)"
                         if conv.threshold == 3.5 else "") + ".")


def warn_leaked(leaked: int) -> None:
    """Warn once, with the count, when held-out relevant pairs are also excluded (``exclude=`` of a
    score matrix: they leave the candidates and R)."""
    if leaked:
        warn(f"{leaked} held-out relevant (user, item) pairs are also in exclude: they leave the "
             "candidates and R (a training item cannot be recommended). If exclude holds the training "
             "interactions, the held-out set overlaps it.")


#: () -> iterable of (grouped log, R or None): the logs that ``Results.diff`` reads again
LogSource = Callable[[], Iterable[tuple[GroupedLog, "np.ndarray | None"]]]
