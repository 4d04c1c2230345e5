"""The backend contract, and the conventions turned into the kernels' inputs (read once, here).

A backend turns a batch of queries and a plan into :class:`~topkeval.kernels.stats.QueryStats`
for one model. :class:`~topkeval.backends.cpu.CpuBackend` runs the compiled kernel of :mod:`topkeval.kernels.cpu` on a
:class:`~topkeval.inputs.grouped.GroupedLog`; :class:`~topkeval.backends.matrix.MatrixBackend` counts on the GPU
what the kernel needs for each relevant cell of a score matrix, or selects the top of each row and
hands those cells to the CPU backend. A new backend (a
GPU kernel, a Spark partition) implements :class:`Backend` and nothing else changes: values, the
empty-query rule, the short-list check and the aggregation live in :mod:`~topkeval.engine.evaluate`.

How to add a backend: a class with ``compute(batch, model, plan, judgments, threads) ->
QueryStats``, the batch type it reads implementing :class:`Queries`, and a test that its
statistics equal :class:`~topkeval.backends.cpu.CpuBackend`'s on the long format of random inputs
(``tests/test_matrix.py`` does it for the matrix backend).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Protocol, cast, runtime_checkable

import numpy as np

from ..conventions import Conventions
from ..errors import DataError, ParameterError
from ..inputs.grouped import GroupedLog, Judgments
from ..kernels.stats import QueryStats
from ..metrics import DcgSpec
from ..metrics.names import Metric
from ..metrics.registry import CWL_DEPTH, ScaledGain
from .plan import Plan


class Queries(Protocol):
    """What the engine needs of a batch of queries, whatever holds their candidates: a
    :class:`~topkeval.inputs.grouped.GroupedLog` (rows grouped by query), a
    :class:`~topkeval.backends.matrix.MatrixBatch` (rows of a score matrix), a partition of a distributed
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
    backend to it). :class:`CpuBackend` takes a :class:`~topkeval.inputs.grouped.GroupedLog`;
    :class:`~topkeval.backends.matrix.MatrixBackend` a :class:`~topkeval.backends.matrix.MatrixBatch` (counts on
    the GPU or a selection, then the CPU kernel). ``shared`` (a dict, one per plan part, the same for
    every model of the batch) keeps what does not depend on the model (gains, ideal DCG) between
    the models' calls.
    """

    def compute(self, batch, model: str, plan: Plan, judgments: Judgments,
                threads: int | None = None, shared: dict | None = None) -> QueryStats: ...


@runtime_checkable
class RanksAgain(Protocol):
    """A backend that orders a query's rows again as its kernel did (``Evaluation.backend``):
    :meth:`~topkeval.Results.side_by_side` and the beyond-accuracy metrics read each top k through
    it (:class:`~topkeval.backends.cpu.CpuBackend`)."""

    def query_ranking(self, log: GroupedLog, R, q: int, conv: Conventions, model: str, k: int): ...


@runtime_checkable
class ReadsItemsChanged(Protocol):
    """A backend that reads the rows again for :meth:`~topkeval.Results.diff`'s gained and lost items
    (:class:`~topkeval.backends.cpu.CpuBackend`, the Spark backend's rows); ``metric``: the column's
    Metric (``Evaluation.metric``), never its label to parse again."""

    def items_changed(self, evaluation, baseline: str, model: str, metric: Metric): ...


@runtime_checkable
class KeepsRowsLazily(Protocol):
    """A backend whose per-query table stays where it was computed (a Spark DataFrame on the
    cluster), given as it is by :attr:`~topkeval.Results.per_query`."""

    lazy_per_query: object


#: The gains that mark unjudged candidates rather than grade them (:class:`~topkeval.metrics.DcgSpec`).
UNJUDGED_GAINS = ("unjudged", "unknown")


def gains_of(grades: np.ndarray, spec: DcgSpec, rel: np.ndarray | None = None) -> np.ndarray:
    """Per-candidate gains of a DCG variant (0 for grades <= 0 unless listed in a gain map; a
    negative grade's own value under ``spec.signed``).

    Raises
    ------
    DataError
        Exponential gains beyond float64 (grades above 1023).
    """
    if spec.gain == "binary":
        return (rel if rel is not None else np.asarray(grades) > 0).astype(np.float64)
    grades = np.asarray(grades)
    if isinstance(spec.gain, ScaledGain):  # cwl_eval: clipped to [low, high], scaled to [0, 1]
        low, high = spec.gain.low, spec.gain.high
        return (np.clip(np.maximum(grades, 0.0, dtype=np.float64), low, high) - low) / (high - low)
    # one pass: the grade as float64, 0 for grades <= 0 (NaN cannot occur); signed: the grade itself
    gains = grades.astype(np.float64) if spec.signed else np.maximum(grades, 0.0, dtype=np.float64)
    if spec.gain == "exp":
        top = float(gains.max()) if len(gains) else 0.0
        if top >= 1024:
            raise DataError(f"gain=exp turns grade {top:g} into 2**{top:g} - 1, beyond the largest float64: "
                            "use linear gains (ndcg@k) or smaller grades.")
        np.exp2(gains, out=gains)
        gains -= 1.0  # 2**0 - 1 = 0 for the grades <= 0 (in (-1, 0) for a negative grade, signed)
        return gains
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
    elif isinstance(spec.discount, tuple) and spec.discount[0] == "weights":  # a weight per rank, 0 past them
        d = np.zeros(longest)
        given = np.asarray(spec.discount[1], dtype=np.float64)[:longest]
        d[:len(given)] = given
    elif isinstance(spec.discount, tuple) and spec.discount[0] == "cwlw":  # a static C/W/L measure's W or T
        from ..kernels.sequence import cwl_static

        _, kind, k, param, column = spec.discount
        w, tail, *_ = cwl_static(kind, k, param, CWL_DEPTH)
        given = (w if column == "eu" else tail)[:longest]
        d = np.zeros(longest)
        d[:len(given)] = given
    elif isinstance(spec.discount, tuple) and spec.discount[0] == "cwl":  # cwl_eval's weights, 0 past its depth
        d = 1.0 / (ranks + 2.0 * spec.discount[2] - 1.0) ** 2 if spec.discount[1] == "insq" else 1.0 / np.log2(ranks + 1.0)
        d[CWL_DEPTH:] = 0.0
    else:
        d = 1.0 / np.log2(ranks + 1.0)
    disc = np.concatenate([[0.0], d])
    return disc, np.cumsum(disc)


def _gain_shift(*gain_arrays: np.ndarray, total_discount: float, negative: bool = True) -> int:
    """The smallest power of 2 to divide gains by so that no DCG sum can overflow (0 almost always).
    ``negative=False``: no gain is negative (the largest one is the largest in size).

    Dividing by a power of 2 is exact, so nDCG (a ratio) is unchanged; DCG is scaled back.
    """
    top = max((max(float(g.max()), -float(g.min()) if negative else 0.0) for g in gain_arrays if len(g)), default=0.0)
    if top == 0.0:
        return 0
    log_bound = math.log2(top) + math.log2(max(total_discount, 1.0))
    return max(0, int(math.ceil(log_bound - 996)))  # keep every sum below 2**996 (about 1e300)


def dcg_columns(plan: Plan, grades: np.ndarray, rel: np.ndarray, judgments: Judgments, judged_rel, longest: int,
                judged_rows=None, weights=None):
    """What the kernel needs for the discounted-gain statistics of ``plan``: the gain of each
    candidate (``G x candidates``, from its grade), the discount of ranks 0..longest and its prefix
    sums (``G x (longest + 1)``), the ideal DCG of each query at each cutoff (``G x Q x C``, from
    the judged grades) and the power of 2 each gain variant was divided by (:func:`_gain_shift`).
    ``judged_rows()``: per candidate, whether it is judged (for the "unjudged" gain of RBP's
    residual, the "unknown" gain of trec_eval's rbp_resid and unj, and to give the candidates
    without a judgment no gain). ``weights`` (per row, the judgments being the rows themselves):
    inverse propensity weights that multiply each candidate's gain (the ideal DCG is then NaN: no
    estimate from clicks reads it)."""
    from ..kernels import cpu

    longest_judged = int(np.diff(judgments.offsets).max()) if len(judgments.offsets) > 1 else 0
    if judgments.zeros is not None and len(judgments.zeros):
        longest_judged += int(judgments.zeros.max())
    G = len(plan.dcg_specs)
    unjudged = None
    if judged_rows is not None and plan.dcg_specs:
        judged = judged_rows()
        unjudged = None if judged.all() else ~judged
    rows: list[np.ndarray] = []
    disc = np.empty((G, longest + 1))
    cum = np.empty((G, longest + 1))
    ideal = np.empty((G, len(judgments.offsets) - 1, len(plan.cutoffs)))
    shifts = np.zeros(G, np.int64)
    for g, spec in enumerate(plan.dcg_specs):
        if spec.gain in UNJUDGED_GAINS:  # 1 for each candidate without a judgment; the ideal list has none
            row_gains = ~judged_rows()
            if spec.gain == "unknown":  # trec_eval: a negative grade is in the pool, not judged
                row_gains |= np.asarray(grades) < 0
            row_gains = row_gains.astype(np.float64)
            judged_gains = np.zeros(len(judgments.grades))
        else:
            row_gains = gains_of(grades, spec, rel)
            if judgments.grades is grades and judged_rel is rel:  # the judgments are the rows themselves
                judged_gains = row_gains if unjudged is None else row_gains.copy()
            else:
                judged_gains = gains_of(judgments.grades, spec, judged_rel)
            if unjudged is not None:  # a candidate without a judgment gains nothing, whatever its filler grade
                row_gains[unjudged] = 0.0
        if weights is not None:
            row_gains, judged_gains = row_gains * weights, judged_gains * weights
        # judged items of grade 0 not listed in judgments.grades (the cells of a score matrix)
        zero_gain = float(gains_of(np.zeros(1), spec)[0]) if spec.gain not in UNJUDGED_GAINS + ("binary",) else 0.0
        # they take ranks in the ideal when they gain something, or when every judged item does (signed)
        zeros = judgments.zeros if judgments.zeros is not None and (zero_gain > 0 or spec.signed) else _EMPTY_I
        d, c = discounts(spec, max(longest, longest_judged))
        shift = _gain_shift(*((row_gains,) if judged_gains is row_gains else (row_gains, judged_gains)),
                            np.array([zero_gain]), total_discount=float(c[-1]),
                            negative=bool(spec.signed or isinstance(spec.gain, tuple) or weights is not None))
        if shift:
            row_gains, judged_gains = np.ldexp(row_gains, -shift), np.ldexp(judged_gains, -shift)
            zero_gain = math.ldexp(zero_gain, -shift)
        rows.append(row_gains)
        disc[g], cum[g], shifts[g] = d[:longest + 1], c[:longest + 1], shift
        if weights is not None:  # no family reads an ideal DCG under inverse propensity weights (nDCG is refused)
            ideal[g] = np.nan
        else:
            ideal[g] = cpu.ideal_dcg(judgments.offsets, judged_gains, plan.cutoffs, d, zeros, zero_gain, c, spec.signed)
    # one variant (the usual case): its row of gains as it is, without a copy into a G x rows array
    gains = rows[0][None, :] if G == 1 else np.stack(rows) if G else np.empty((0, len(grades)))
    return gains, disc, cum, ideal, shifts


def walk_columns(plan: Plan, grades: np.ndarray, rel: np.ndarray, judgments: Judgments, judged_rows, longest: int):
    """What the second pass needs for trec_eval's G, Rndcg and ndcg_rel under each gain variant of
    ``plan.walk_specs``: the gain of each candidate (``W x candidates``; none for a candidate without
    a judgment), each query's ideal gains as runs of equal positive gains in decreasing order
    (``ioff``, ``ival``, ``icnt``: see :class:`~topkeval.kernels.ranked.RankedColumns`; the judged
    items of grade 0 that ``judgments.zeros`` counts take part when grade 0 gains something) and the
    discount of ranks 0..D (``W x (D + 1)``, D the longest list or the most ideal gains of a query).

    Raises
    ------
    DataError
        Gains so large that the sums of the walk would exceed the largest float64.
    """
    W, Q = len(plan.walk_specs), len(judgments.offsets) - 1
    wgain = np.zeros((W, len(grades)))
    ioff = np.zeros((W, Q + 1), np.int64)
    vals: list[np.ndarray] = []
    cnts: list[np.ndarray] = []
    deepest, base = longest, 0
    judged = judged_rows() if W else None
    judged_rel = None if not W else (rel if judgments.grades is grades else plan.conv.is_relevant(judgments.grades))
    of_item = np.repeat(np.arange(Q), np.diff(judgments.offsets))
    for v, spec in enumerate(plan.walk_specs):
        row = gains_of(grades, spec, rel)
        if judged is not None and not judged.all():
            row[~judged] = 0.0  # a candidate without a judgment gains nothing
        wgain[v] = row
        q, gain, count = of_item, gains_of(judgments.grades, spec, judged_rel), np.ones(len(of_item), np.int64)
        zero_gain = float(gains_of(np.zeros(1), spec)[0])
        if judgments.zeros is not None and zero_gain > 0:  # the cells of grade 0 a score matrix does not list
            q = np.concatenate([q, np.arange(Q)])
            gain = np.concatenate([gain, np.full(Q, zero_gain)])
            count = np.concatenate([count, np.asarray(judgments.zeros, np.int64)])
        keep = (gain > 0) & (count > 0)
        q, gain, count = q[keep], gain[keep], count[keep]
        order = np.lexsort((-gain, q))
        q, gain, count = q[order], gain[order], count[order]
        first = np.ones(len(q), bool)
        first[1:] = (q[1:] != q[:-1]) | (gain[1:] != gain[:-1])
        starts = np.flatnonzero(first)
        run_q = q[starts]
        vals.append(gain[starts])
        cnts.append(np.add.reduceat(count, starts) if len(starts) else np.zeros(0, np.int64))
        ioff[v] = base + np.concatenate([[0], np.cumsum(np.bincount(run_q, minlength=Q))])
        base += len(starts)
        ideal = np.bincount(run_q, weights=cnts[-1], minlength=Q)
        deepest = max(deepest, int(ideal.max()) if Q else 0)
        top = max(float(np.abs(row).max()) if len(row) else 0.0, float(gain.max()) if len(gain) else 0.0)
        if top * max(deepest, 1) > 1e300:
            raise DataError(f"The gains of {spec.gain} reach {top:g}: sums over a list exceed the largest float64 "
                            "(trec_eval's G, Rndcg, ndcg_rel): use linear gains or smaller grades.")
    disc = np.stack([discounts(spec, deepest)[0] for spec in plan.walk_specs]) if W else np.zeros((0, 1))
    return (wgain, ioff, np.concatenate(vals) if vals else _EMPTY_F,
            np.concatenate(cnts).astype(np.int64) if cnts else _EMPTY_I, disc)


def err_gains(grades: np.ndarray, max_grade: float) -> np.ndarray:
    """Per-candidate stopping probabilities of ERR: ``(2**grade - 1) / 2**max_grade``, 0 for grades <= 0.

    Raises
    ------
    DataError
        A grade above ``max_grade`` (its probability would exceed 1).
    """
    grades = np.maximum(np.asarray(grades, dtype=np.float64), 0.0)
    if len(grades) and float(grades.max()) > max_grade:
        raise DataError(f"err(max_grade={max_grade:g}) needs every grade to be at most {max_grade:g}, but a grade is "
                        f"{float(grades.max()):g}: pass err(max_grade=<the largest grade>).")
    return (np.exp2(grades) - 1.0) / 2.0**max_grade


_EMPTY_F = np.zeros(0, np.float64)
_EMPTY_I = np.zeros(0, np.int64)


def threshold(conv: Conventions) -> float:
    """``score_threshold`` as the kernels read it: candidates scoring below it are not retrieved
    (``-inf`` without one: every candidate is)."""
    return -np.inf if conv.score_threshold is None else float(conv.score_threshold)


def comparable_scores(scores: np.ndarray, conv: Conventions) -> np.ndarray:
    """Scores as the conventions compare them: float64, or rounded to float32 first (trec_eval 9 and
    pytrec_eval store them as C floats). A score beyond float32's range (about 3.4e38) becomes
    infinite in float32, as C's conversion makes it: two such scores tie (without a warning)."""
    if conv.score_precision == "float32":
        with np.errstate(over="ignore"):  # +-inf beyond float32's range: the rule, not an accident
            return scores.astype(np.float32).astype(np.float64)
    return scores.astype(np.float64, copy=False)


def tie_rule(log: GroupedLog, conv: Conventions, scores: np.ndarray,
             items: Callable[[], np.ndarray] | None = None) -> tuple[int, np.ndarray]:
    """The kernels' tie code for ``conv.ties`` and its per-row key (empty when the rule needs none).

    ``scores`` are the model's scores as compared (:func:`comparable_scores`), aligned with the
    log's rows. ``item_desc`` / ``item_asc`` order a tie group by item id (:func:`tie_items`);
    ``ranx`` by each row's position in ranx's order of its query (numba's quicksort argsort of the
    negated scores of the rows at or above ``score_threshold``, in row order:
    :func:`topkeval.kernels.sort.quicksort_positions`), which the kernels read as ``item_asc``.
    When no query of this model has two equal scores, no item key is needed (zeros); ``items``
    gives the item key otherwise (:func:`tie_items` by default; a caller evaluating several models
    of one log passes one that ranks the items once).
    """
    from ..kernels import cpu

    if conv.ties in ("item_desc", "item_asc"):
        tied = _tied_in_order(log.offsets, scores) if log.has_items else None
        if tied is not None:  # the kernels compare the keys of equal scores alone: rank only those rows' items
            key = np.zeros(len(scores), np.int64)
            if tied.any():
                key[tied] = tie_items(log, conv, np.flatnonzero(tied))
            return cpu.TIE_CODES[conv.ties], key
        return cpu.TIE_CODES[conv.ties], items() if items is not None else tie_items(log, conv)
    if conv.ties == "ranx":
        from ..kernels.sort import quicksort_positions

        return cpu.TIE_ITEM_ASC, quicksort_positions(log.offsets, np.asarray(scores, np.float64), threshold(conv))
    return cpu.TIE_CODES[conv.ties], _EMPTY_I


def _tied_in_order(offsets: np.ndarray, scores: np.ndarray) -> np.ndarray | None:
    """The rows that share their score with another row of their query, when every query's scores
    fall (or rise) row by row, as in a TREC run written rank by rank (equal scores are then
    neighbours); None otherwise (scores in another order, or not finite)."""
    n = len(scores)
    if n < 2:
        return np.zeros(n, bool)
    from ..kernels.jit import runs_compiled

    if runs_compiled(n) and offsets[0] == 0 and offsets[-1] == n:  # one pass, compiled
        from ..kernels.sort import tied_neighbours

        tied = np.empty(n, bool)
        return tied if tied_neighbours(offsets, np.asarray(scores, np.float64), tied) else None
    if not np.isfinite(scores).all():
        return None
    apart = np.zeros(n - 1, bool)  # a query's last row and the next one's first: not compared
    cuts = offsets[1:-1]
    apart[cuts[(cuts > 0) & (cuts < n)] - 1] = True
    # neighbours compared, not subtracted (1e308 - -1e308 overflows)
    if not ((apart | (scores[1:] <= scores[:-1])).all() or (apart | (scores[1:] >= scores[:-1])).all()):
        return None
    same = ~apart & (scores[1:] == scores[:-1])
    tied = np.zeros(n, bool)
    tied[1:] |= same
    tied[:-1] |= same
    return tied


def tie_items(log: GroupedLog, conv: Conventions, rows: np.ndarray | None = None) -> np.ndarray:
    """Per row (of ``rows`` only, when given), a key that orders item ids as the item tie rules
    compare them: as typed, or as text (C's strcmp on UTF-8, which is the order of Python's and
    Arrow's string comparisons)."""
    from ..inputs.ids import labels_of, text_rank, typed_rank

    if not log.has_items:
        raise ParameterError(
            f"ties={conv.ties!r} orders tied candidates by item id, but no item ids were given: "
            "pass item='<column>' (or items= for one ranking), or choose another tie rule."
        )
    rank = text_rank if conv.item_order == "text" else typed_rank
    labels: np.ndarray | None
    if log._items is None:  # Arrow text not yet encoded: the ids of these rows alone
        if rows is not None:
            labels, codes = np.unique(labels_of(log.item_text, rows), return_inverse=True)
            return rank(codes.astype(np.int64, copy=False), labels)
    items = cast(np.ndarray, log.items)  # has_items: the codes exist
    if rows is None:
        return rank(items, log.item_labels)
    if log.item_labels is None:  # the codes are the ids
        labels, codes = None, items[rows]
    else:
        used, codes = np.unique(items[rows], return_inverse=True)
        labels = log.item_labels[used]
    return rank(codes.astype(np.int64, copy=False), labels)
