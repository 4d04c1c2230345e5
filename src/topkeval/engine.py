"""The engine: one plan, one backend call per model, one way from statistics to Results.

Every front door (``evaluate`` on a table or a file, ``evaluate(run, qrels=...)``,
``evaluate_matrix``, a streamed parquet file, the one-ranking functions) turns its input into one
or more grouped logs (:class:`~topkeval.log.GroupedLog`) and then does exactly this::

    plan = make_plan(metrics, conventions)            # which statistics, cutoffs, gain variants
    batch = evaluate_log(log, plan, ...)              # per model: backend -> QueryStats -> values
    res = build_results([batch, ...], plan, ...)      # summary, per_query, info: the same keys on every path

A backend (:class:`Backend`) turns a log and a plan into :class:`~topkeval.kernels.stats.QueryStats`;
:class:`CpuBackend` runs the compiled kernel of :mod:`topkeval.kernels.cpu`. Another backend (a
GPU selection, a Spark partition) implements the same ``compute`` and nothing else changes: the
metric values, the empty-query rule, the short-list check and the aggregation all live here.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np
import pandas as pd

from .conventions import Conventions
from .errors import DataError, EmptyQueryError, ParameterError, ShortListError, TopkevalWarning, show
from .kernels.stats import NO_CUTOFF, QueryStats
from .log import GroupedLog, Judgments
from .metrics import FAMILIES, DcgSpec, metric_values
from .names import Metric, parse_metrics


@dataclass(frozen=True)
class Plan:
    """What an evaluation computes: the metrics, the conventions, and the statistics they need.

    Attributes
    ----------
    metrics : tuple of Metric
    conv : Conventions
    cutoffs : ndarray of int64
        Every distinct cutoff, ascending; :data:`~topkeval.kernels.stats.NO_CUTOFF` when an uncut
        rank metric looks at the whole list.
    want_r : bool
        h(R) is needed (R-precision).
    want_rank : bool
        Reciprocal ranks and AP sums are needed.
    dcg_specs : tuple of DcgSpec
        The discounted-gain statistics needed (one per gain and discount in use).
    positive_hits : bool
        Relevant candidates scoring 0 or less are not counted as found (``nonpositive_scores="miss"``,
        for the families that count what they find).
    """

    metrics: tuple[Metric, ...]
    conv: Conventions
    cutoffs: np.ndarray = field(compare=False)
    want_r: bool = False
    want_rank: bool = False
    dcg_specs: tuple[DcgSpec, ...] = ()
    positive_hits: bool = False

    def parts(self) -> list[Plan]:
        """The plans whose statistics one kernel pass gives: this plan, or, under
        ``nonpositive_scores="miss"``, one for the metrics that count what they find (with
        ``positive_hits``) and one for the others."""
        if self.conv.nonpositive_scores != "miss":
            return [self]
        found = [m for m in self.metrics if FAMILIES[m.family].counts_found]
        rest = [m for m in self.metrics if not FAMILIES[m.family].counts_found]
        out = [_plan(found, self.conv, positive_hits=True)] if found else []
        return out + ([_plan(rest, self.conv)] if rest else [])

    @property
    def names(self) -> list[str]:
        """Canonical metric names, in the order requested."""
        return [str(m) for m in self.metrics]

    def depth(self, R_max: int, n_max: int) -> int:
        """How deep into a list of ``n_max`` candidates the metrics look (the top T that decides
        every value): the largest cutoff, the largest R for R-precision, the whole list for the
        uncut rank metrics; at least 1 and at most ``n_max``."""
        deepest = 1
        for m in self.metrics:
            fam = FAMILIES[m.family]
            if m.k is not None:
                deepest = max(deepest, m.k)
            elif fam.depth == "R":
                deepest = max(deepest, R_max)
            elif fam.depth == "list":
                return n_max
        return min(deepest, n_max)


def make_plan(metrics, conv: Conventions) -> Plan:
    """Parse ``metrics`` and derive the statistics, cutoffs and gain variants they need."""
    return _plan(tuple(parse_metrics(metrics)), conv)


def _plan(mets, conv: Conventions, positive_hits: bool = False) -> Plan:
    mets = tuple(mets)
    needs = set().union(*(FAMILIES[m.family].needs for m in mets))
    ks = {m.k for m in mets if m.k is not None}
    if any(m.k is None and FAMILIES[m.family].depth == "list" and FAMILIES[m.family].needs & {"rank", "dcg"}
           for m in mets):
        ks.add(NO_CUTOFF)
    specs: list[DcgSpec] = []
    for m in mets:
        fam = FAMILIES[m.family]
        if fam.dcg is not None and (spec := fam.dcg(m, conv)) not in specs:
            specs.append(spec)
    return Plan(mets, conv, np.asarray(sorted(ks) or [1], dtype=np.int64), "h_at_r" in needs, "rank" in needs,
                tuple(specs), positive_hits)


class Queries(Protocol):
    """What the engine needs of a batch of queries, whatever holds their candidates: a
    :class:`~topkeval.log.GroupedLog` (rows grouped by query), a
    :class:`~topkeval.matrix.MatrixBatch` (rows of a score matrix), a partition of a distributed
    table. Its backend reads the candidates; the engine reads only this."""

    queries: np.ndarray  # the query ids, one per query of the batch

    @property
    def models(self) -> list[str]: ...

    @property
    def n_rows(self) -> int: ...

    def judgments(self, conv: Conventions) -> Judgments: ...


class Backend(Protocol):
    """Computes the statistics of one model over a batch of queries.

    ``compute`` must return the :class:`~topkeval.kernels.stats.QueryStats` that
    :class:`CpuBackend` returns for the long format of the same queries (the tests hold every
    backend to it). :class:`CpuBackend` takes a :class:`~topkeval.log.GroupedLog`;
    :class:`~topkeval.matrix.MatrixBackend` a :class:`~topkeval.matrix.MatrixBatch` (selection
    on the tensor's device, then the CPU kernel).
    """

    def compute(self, batch, model: str, plan: Plan, judgments: Judgments,
                threads: int | None = None) -> QueryStats: ...


# ---------------------------------------------------------------------------------------------
# gains and discounts of the DCG statistics


def gains_of(grades: np.ndarray, spec: DcgSpec, rel: np.ndarray | None = None) -> np.ndarray:
    """Per-candidate gains of a DCG variant (0 for grades <= 0).

    Raises
    ------
    DataError
        Exponential gains beyond float64 (grades above 1023).
    """
    grades = np.asarray(grades, dtype=np.float64)
    positive = grades > 0
    if spec.gain == "binary":
        return (rel if rel is not None else positive).astype(np.float64)
    if spec.gain == "exp":
        top = float(grades.max()) if len(grades) else 0.0
        if top >= 1024:
            raise DataError(f"gain=exp turns grade {top:g} into 2**{top:g} - 1, beyond the largest float64: "
                            "use linear gains (ndcg@k) or smaller grades.")
        return np.where(positive, np.exp2(np.where(positive, grades, 0.0)) - 1.0, 0.0)
    gains = np.where(positive, grades, 0.0)
    if isinstance(spec.gain, tuple):  # a map of grades to gains; other grades gain their own value
        for grade, gain in spec.gain:
            gains[grades == grade] = gain
    return gains


def discounts(spec: DcgSpec, longest: int) -> tuple[np.ndarray, np.ndarray]:
    """``(disc, cum)``: the discount of ranks 0..longest (``disc[0] = 0``) and its prefix sums."""
    ranks = np.arange(1, longest + 1, dtype=np.float64)
    if spec.discount == "lenskit":
        d = 1.0 / np.log2(np.maximum(ranks, 2.0))
    elif isinstance(spec.discount, tuple) and spec.discount[0] == "rbp":
        d = spec.discount[1] ** (ranks - 1.0)
    else:
        d = 1.0 / np.log2(ranks + 1.0)
    disc = np.concatenate([[0.0], d])
    return disc, np.cumsum(disc)


def _gain_shift(*gain_arrays: np.ndarray, total_discount: float) -> int:
    """The smallest power of 2 to divide gains by so that no DCG sum can overflow (0 almost always).

    Dividing by a power of 2 is exact, so nDCG (a ratio) is unchanged; DCG is scaled back.
    """
    top = max((float(np.abs(g).max()) for g in gain_arrays if len(g)), default=0.0)
    if top == 0.0:
        return 0
    log_bound = math.log2(top) + math.log2(max(total_discount, 1.0))
    return max(0, int(math.ceil(log_bound - 996)))  # keep every sum below 2**996 (about 1e300)


# ---------------------------------------------------------------------------------------------
# the CPU backend


@dataclass(frozen=True)
class CpuBackend:
    """The compiled CPU kernel (:mod:`topkeval.kernels.cpu`). ``path`` forces the counting
    (``PATH_COUNT``) or the sorting (``PATH_SORT``) path, for tests."""

    path: int = 0

    def compute(self, log: GroupedLog, model: str, plan: Plan, judgments: Judgments,
                threads: int | None = None) -> QueryStats:
        from .kernels import cpu

        conv = plan.conv
        scores = comparable_scores(log.scores[model], conv)
        rel = log.relevant(conv)
        if plan.positive_hits:  # torchmetrics: relevant but scored <= 0 is never found
            rel_ret = _relevant_kept(log, rel, scores, conv)
            rel = rel & (scores > 0)
        tie = cpu.TIE_CODES[conv.ties]
        grade = log.grades.astype(np.float64, copy=False) if conv.ties in ("optimistic", "pessimistic") else _EMPTY_F
        items = tie_items(log, conv) if conv.ties in ("item_desc", "item_asc") else _EMPTY_I
        longest = int(np.diff(log.offsets).max()) if log.n_queries else 0
        longest_judged = int(np.diff(judgments.offsets).max()) if len(judgments.offsets) > 1 else 0
        G = len(plan.dcg_specs)
        gains = np.empty((G, len(scores)))
        disc = np.empty((G, longest + 1))
        cum = np.empty((G, longest + 1))
        ideal_gains, ideal_discs, shifts = [], [], np.zeros(G, np.int64)
        judged_rel = (rel if judgments.grades is log.grades else conv.is_relevant(judgments.grades)) if G else None
        for g, spec in enumerate(plan.dcg_specs):
            row_gains = gains_of(log.grades, spec, rel)
            judged_gains = gains_of(judgments.grades, spec, judged_rel)
            d, c = discounts(spec, max(longest, longest_judged))
            shift = _gain_shift(row_gains, judged_gains, total_discount=float(c[-1]))
            if shift:
                row_gains, judged_gains = np.ldexp(row_gains, -shift), np.ldexp(judged_gains, -shift)
            gains[g], disc[g], cum[g], shifts[g] = row_gains, d[:longest + 1], c[:longest + 1], shift
            ideal_gains.append(judged_gains)
            ideal_discs.append(d)
        active = rel | (gains > 0).any(axis=0) if G else rel
        cols = cpu.Columns(log.offsets, scores, rel, active, grade, items, judgments.R.astype(np.int64, copy=False),
                           gains)
        thr = -np.inf if conv.score_threshold is None else float(conv.score_threshold)
        prm = cpu.Params(plan.cutoffs, thr, tie, plan.want_r, plan.want_rank, disc, cum, self.path)
        out = cpu.compute(cols, prm, threads)
        if plan.positive_hits:
            out.rel_ret[:] = rel_ret
        ideal = np.empty((G, log.n_queries, len(plan.cutoffs)))
        for g in range(G):
            ideal[g] = cpu.ideal_dcg(judgments.offsets, ideal_gains[g], plan.cutoffs, ideal_discs[g])
        return QueryStats(plan.cutoffs, out.h, out.hit, out.h_at_r, out.n, out.rel_ret, cols.R, out.tie, out.rr,
                          out.ap, out.dcg, ideal, plan.dcg_specs, shifts)


def _relevant_kept(log: GroupedLog, rel: np.ndarray, scores: np.ndarray, conv: Conventions) -> np.ndarray:
    """Relevant candidates per query that survive ``score_threshold``."""
    kept = rel if conv.score_threshold is None else rel & (scores >= conv.score_threshold)
    return log.per_query_sum(kept)


_EMPTY_F = np.zeros(0, np.float64)
_EMPTY_I = np.zeros(0, np.int64)
CPU = CpuBackend()


def comparable_scores(scores: np.ndarray, conv: Conventions) -> np.ndarray:
    """Scores as the conventions compare them: float64, or rounded to float32 first (trec_eval)."""
    if conv.score_precision == "float32":
        return scores.astype(np.float32).astype(np.float64)
    return scores.astype(np.float64, copy=False)


def tie_items(log: GroupedLog, conv: Conventions) -> np.ndarray:
    """Item codes ordered as the item tie rules compare ids: as typed, or as text (strcmp)."""
    if log.items is None:
        raise ParameterError(
            f"ties={conv.ties!r} orders tied candidates by item id, but no item ids were given: "
            "pass item='<column>' (or items= for one ranking), or choose another tie rule."
        )
    if conv.item_order == "text" and log.item_labels.dtype.kind not in "US":
        if log.item_labels.dtype.kind == "O" and all(isinstance(v, str) for v in log.item_labels[:1000]):
            return log.items  # already text, ordered as text
        text = np.array([str(v) for v in log.item_labels]) if log.item_labels.dtype.kind == "O" else \
            log.item_labels.astype(str)
        # Python and numpy compare strings by code point, which is the byte order of their UTF-8
        # form: C's strcmp on the text trec_eval reads
        rank = np.empty(len(text), np.int64)
        rank[np.argsort(text, kind="stable")] = np.arange(len(text))
        return rank[log.items]
    return log.items


# ---------------------------------------------------------------------------------------------
# from statistics to values, and to Results


@dataclass
class ModelValues:
    """One model's per-query values over the queries of one log (a table, a run, a chunk)."""

    model: str
    queries: np.ndarray | None  # None once reduced to sums
    values: dict
    ties: int
    rows: int
    evaluated: int
    sums: dict | None = None  # {metric: (sum, count of defined values)} once reduced

    def reduce(self) -> ModelValues:
        """Keep only sums and counts (bounded memory for streamed files)."""
        sums = {name: (float(np.nansum(v)), int(np.isfinite(v).sum())) for name, v in self.values.items()}
        return ModelValues(self.model, None, {}, self.ties, self.rows, self.evaluated, sums)


@dataclass
class Evaluated:
    """What :func:`evaluate_log` returns: each model's values, and the counts of the batch."""

    models: list[ModelValues]
    queries: int
    skipped_empty: int
    relevant: int = 0  # relevant items in all, for the warning when there are none

    def reduce(self) -> Evaluated:
        return Evaluated([m.reduce() for m in self.models], self.queries, self.skipped_empty, self.relevant)


def evaluate_log(batch: Queries, plan: Plan, *, judgments: Judgments | None = None, backend: Backend = CPU,
                 threads: int | None = None, rows: int | None = None) -> Evaluated:
    """Evaluate every model of a batch of queries (a grouped log, by default with the CPU kernel).

    ``judgments`` (R and the judged grades per query) come from judgments kept apart from the
    candidates (TREC qrels); by default from the batch itself. ``rows``: the rows of the input
    this batch stands for (by default its own).
    """
    conv = plan.conv
    if judgments is None:
        judgments = batch.judgments(conv)
    R = judgments.R
    empty = R == 0
    if conv.empty_queries == "error" and empty.any():
        ids = ", ".join(show(q) for q in batch.queries[empty][:5])
        raise EmptyQueryError(
            f"{int(empty.sum())} queries have no relevant item (for example {ids}) and "
            "empty_queries='error'. Use empty_queries='skip' to leave them out of the means or "
            "'keep' to score them with the 'undefined' value."
        )
    keep = ~empty if conv.empty_queries == "skip" else np.ones(len(R), bool)
    queries = batch.queries[keep] if not keep.all() else batch.queries
    models = batch.models
    out = []
    for model in models:
        values, ties = {}, np.zeros(int(keep.sum()), bool)
        for part in plan.parts():
            st = backend.compute(batch, model, part, judgments, threads)
            if not keep.all():
                st = st.take(keep)
            if conv.short_lists == "error":
                _check_short(st, part.metrics, queries, model if len(models) > 1 else "")
            values.update({name: metric_values(st, m, conv) for name, m in zip(part.names, part.metrics)})
            ties |= st.tie_at_cutoff
        values = {name: values[name] for name in plan.names}
        out.append(ModelValues(model, queries, values, int(ties.sum()), batch.n_rows if rows is None else rows,
                               int(keep.sum())))
    return Evaluated(out, len(R), int((~keep).sum()), int(R.sum()))


def evaluate_grouped(log: GroupedLog, plan: Plan, *, depth: int | None = None, threads: int | None = None,
                     backend: Backend = CPU) -> tuple[Evaluated, list]:
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


def truncate(log: GroupedLog, model: str, depth: int, conv: Conventions) -> GroupedLog:
    """Keep the first ``depth`` candidates of each query of one model under the tie rule (trec_eval -M).

    The order is the kernel's own (:func:`topkeval.kernels.cpu.ranks`), so truncation and
    evaluation never disagree about which candidate comes first.
    """
    from .kernels import cpu

    if conv.ties == "expected":
        raise ParameterError("depth keeps the first N candidates of each query, which needs a deterministic tie "
                             "rule: pass ties='first', 'item_desc' (trec_eval), 'optimistic' or 'pessimistic'.")
    items = tie_items(log, conv) if conv.ties in ("item_desc", "item_asc") else _EMPTY_I
    rank = cpu.ranks(log.offsets, comparable_scores(log.scores[model], conv), log.relevant(conv),
                     log.grades.astype(np.float64, copy=False), items, cpu.TIE_CODES[conv.ties], depth)
    return GroupedLog(log.offsets, log.queries, log.grades, {model: log.scores[model]}, log.items,
                      log.item_labels).keep_rows(rank > 0)


def _check_short(st: QueryStats, metrics, queries, model: str) -> None:
    for m in metrics:
        depth = FAMILIES[m.family].depth
        need = m.k if m.k is not None else (st.R if depth == "R" else None)
        if need is None:
            continue
        short = st.n < need
        if short.any():
            q = int(np.argmax(short))
            k = int(need if np.isscalar(need) else need[q])
            raise ShortListError(
                f"{m} looks at the top {k}, but query {show(queries[q])} has only {int(st.n[q])} "
                f"candidates{' for model ' + repr(model) if model else ''} ({int(short.sum())} queries "
                "are that short). Use short_lists='pad' to count the missing slots as non-relevant, "
                "short_lists='shrink' to divide by the list length, or a smaller k."
            )


def warn_if_nothing_relevant(conv: Conventions, total_relevant: int) -> None:
    """Warn once when no candidate at all is relevant (a threshold above every grade, say)."""
    if total_relevant == 0:
        rule = "grade > 0" if conv.threshold is None else f"grade >= {conv.threshold:g}"
        warnings.warn(f"No item is relevant ({rule}) in any query: every metric is undefined or 0. "
                      "Check the relevance column and the threshold"
                      + (" (the surprise preset calls ratings >= 3.5 relevant; for 0/1 clicks pass threshold=1)"
                         if conv.threshold == 3.5 else "") + ".", TopkevalWarning, stacklevel=4)


LogSource = Callable[[], Iterable[tuple[GroupedLog, np.ndarray]]]


def _inclusion_rows(log, R, conv, model: str, metric) -> pd.DataFrame:
    """(query, item, p) for each relevant row of ``model`` with its chance p of being in the top k."""
    from .kernels import cpu

    rel = log.relevant(conv)
    if R is None:
        R = log.per_query_sum(rel)
    kq = R.astype(np.int64) if metric.k is None else np.full(log.n_queries, metric.k, np.int64)
    thr = -np.inf if conv.score_threshold is None else conv.score_threshold
    grades = log.grades.astype(np.float64, copy=False)
    items = tie_items(log, conv) if conv.ties in ("item_desc", "item_asc") else np.zeros(0, np.int64)
    p = cpu.inclusion(log.offsets, comparable_scores(log.scores[model], conv), rel, grades, items, thr,
                      cpu.TIE_CODES[conv.ties], kq)
    rows = np.flatnonzero(rel)
    q_of_row = np.repeat(np.arange(log.n_queries), np.diff(log.offsets))
    return pd.DataFrame({"query": log.queries[q_of_row[rows]], "item": log.item_labels[log.items[rows]],
                         "p": p[rows]})


def items_changed(sources, conv, baseline: str, model: str, metric):
    """{query: [items]} of relevant items whose chance of being in the top k rose / fell; None
    without item ids."""
    frames = {baseline: [], model: []}
    for log, R in sources():
        if log.items is None:
            return None
        for name in frames:
            if name in log.scores:
                frames[name].append(_inclusion_rows(log, R, conv, name, metric))
    if not frames[baseline] or not frames[model]:
        return None
    a = pd.concat(frames[baseline], ignore_index=True)
    b = pd.concat(frames[model], ignore_index=True)
    both = a.merge(b, on=["query", "item"], how="outer", suffixes=("_a", "_b"), sort=False).fillna({"p_a": 0.0,
                                                                                                    "p_b": 0.0})
    result = []
    for mask in (both["p_b"] > both["p_a"] + 1e-12, both["p_a"] > both["p_b"] + 1e-12):
        part = both[mask]
        result.append(part.groupby("query", sort=False)["item"].agg(list).to_dict())
    return result[0], result[1]



def mean(values: np.ndarray) -> float:
    """The mean of the defined (not NaN) values; nan when there is none. Values so large that their
    sum would overflow (a DCG of huge grades) are averaged on a scale divided by a power of 2."""
    if not np.isfinite(values).any():
        return math.nan
    top = float(np.nanmax(np.abs(values)))
    if top > 1e300:
        shift = math.ceil(math.log2(top))
        return float(np.ldexp(np.nanmean(np.ldexp(values, -shift)), shift))
    return float(np.nanmean(values))


def build_results(batches: Sequence[Evaluated], plan: Plan, *, query_name: str = "query", info: dict | None = None,
                  sources: LogSource | None = None):
    """One :class:`~topkeval.results.Results` from the batches of an evaluation, whatever the path.

    The summary is each model's mean over its evaluated queries (NaN values left out), the
    per-query table lists each model's queries in batch order, and ``info`` has the same keys on
    every path: ``queries``, ``evaluated``, ``skipped_empty``, ``rows`` (ints: totals),
    ``evaluated_per_model``, ``rows_per_model``, ``ties_at_cutoff`` (per model), ``models``,
    ``metrics``, ``conventions``, and what the front door adds (``info``).
    """
    from .results import Results

    names = plan.names
    by_model: dict[str, list[ModelValues]] = {}
    for batch in batches:
        for mv in batch.models:
            by_model.setdefault(mv.model, []).append(mv)
    summary = {}
    for model, parts in by_model.items():
        summary[model] = {}
        for name in names:
            if parts[0].sums is not None:
                total = sum(p.sums[name][0] for p in parts)
                count = sum(p.sums[name][1] for p in parts)
                summary[model][name] = total / count if count else math.nan
            else:
                v = np.concatenate([p.values[name] for p in parts]) if len(parts) > 1 else parts[0].values[name]
                summary[model][name] = mean(v)
    summary_df = pd.DataFrame.from_dict(summary, orient="index", columns=names)
    summary_df.index.name = "model"
    evaluated = {m: sum(p.evaluated for p in parts) for m, parts in by_model.items()}
    rows = {m: sum(p.rows for p in parts) for m, parts in by_model.items()}
    base = {
        "queries": sum(b.queries for b in batches),
        "evaluated": max(evaluated.values(), default=0),
        "skipped_empty": sum(b.skipped_empty for b in batches),
        "rows": max(rows.values(), default=0),
        "evaluated_per_model": evaluated,
        "rows_per_model": rows,
        "ties_at_cutoff": {m: sum(p.ties for p in parts) for m, parts in by_model.items()},
        "models": list(by_model),
        "metrics": names,
        "conventions": plan.conv.as_dict(),
    }
    base.update(info or {})
    kept = all(p.sums is None for parts in by_model.values() for p in parts)

    def per_query() -> pd.DataFrame:
        columns: dict = {"model": [], query_name: []}
        if not kept:
            return pd.DataFrame({"model": pd.Series([], dtype=object), query_name: pd.Series([], dtype=object),
                                 **{n: pd.Series([], dtype=np.float64) for n in names}})
        frames_q, frames_m = [], []
        for model, parts in by_model.items():
            q = [p.queries for p in parts]
            frames_q.append(np.concatenate(q) if len(q) > 1 else q[0])
            frames_m.append(np.full(len(frames_q[-1]), model, dtype=object))
        columns["model"] = pd.Series(np.concatenate(frames_m) if len(frames_m) > 1 else frames_m[0], dtype=object)
        columns[query_name] = np.concatenate(frames_q) if len(frames_q) > 1 else frames_q[0]
        for name in names:
            vals = [p.values[name] for parts in by_model.values() for p in parts]
            columns[name] = np.concatenate(vals) if len(vals) > 1 else vals[0]
        return pd.DataFrame(columns)

    return Results(summary_df, per_query, base, query_name=query_name, conventions=plan.conv, sources=sources)
