"""The CPU backend: the compiled kernels of :mod:`topkeval.kernels.cpu` and
:mod:`topkeval.kernels.ranked` on a :class:`~topkeval.inputs.grouped.GroupedLog`.

:meth:`CpuBackend.compute` turns a log and a plan into :class:`~topkeval.kernels.stats.QueryStats`
for one model (the engine turns those into values); :meth:`CpuBackend.items_changed` reads the rows
of an evaluation again for :meth:`~topkeval.Results.diff`: which relevant items entered or left a
model's top k. Every convention reaches the kernels through :mod:`topkeval.engine.rules`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import cast

import numpy as np
import pandas as pd

from ..conventions import Conventions
from ..engine.plan import Plan
from ..engine.rules import (
    _EMPTY_F,
    comparable_scores,
    dcg_columns,
    err_gains,
    gains_of,
    threshold,
    tie_items,
    tie_rule,
    walk_columns,
)
from ..errors import ParameterError
from ..inputs.grouped import GroupedLog, Judgments
from ..kernels.stats import QueryStats
from ..metrics.names import Metric
from ..metrics.registry import CWL_DEPTH


@dataclass(frozen=True)
class CpuBackend:
    """The compiled CPU kernel (:mod:`topkeval.kernels.cpu`). ``path`` forces the counting
    (``PATH_COUNT``) or the sorting (``PATH_SORT``) path, for tests."""

    path: int = 0

    def compute(self, log: GroupedLog, model: str, plan: Plan, judgments: Judgments,
                threads: int | None = None, shared: dict | None = None) -> QueryStats:
        from ..kernels import cpu

        conv = plan.conv
        scores = comparable_scores(log.scores[model], conv)
        rel = log.relevant(conv)
        if plan.positive_hits:  # torchmetrics: relevant but scored <= 0 is never found
            rel_ret = _relevant_kept(log, rel, scores, conv)
            rel = rel & (scores > 0)
            shared = None  # the relevant rows, and so the gains, depend on the model's scores
        # what depends on the log and the plan, not on the model: computed for its first model only
        common = shared.get("columns") if shared is not None else None
        longest = int(np.diff(log.offsets).max()) if log.n_queries else 0
        if common is None or common[0] is not log or common[1] is not judgments:
            if conv.ties in ("ranx", "item_desc", "item_asc"):  # the key depends on the scores (item keys: on
                tie_key = None                                  # whether they tie at all)
            else:
                tie_key = tie_rule(log, conv, scores)
            grade = log.grades.astype(np.float64, copy=False) if conv.ties in ("optimistic", "pessimistic") \
                else _EMPTY_F
            judged_rel = (rel if judgments.grades is log.grades else conv.is_relevant(judgments.grades)) \
                if plan.dcg_specs else None
            rw = log.rows.get("ips_weight")  # inverse propensity weights (evaluate(position=, propensity=))
            if rw is not None and judgments.grades is not log.grades:
                raise ParameterError("Inverse propensity weights need the judgments to be the log's own rows (one "
                                     "table of clicks): drop qrels= and depth=.")
            dcg = dcg_columns(plan, log.grades, rel, judgments, judged_rel, longest, log.judged_rows, rw)
            G = len(plan.dcg_specs)
            active = rel | (dcg[0] != 0).any(axis=0) if G else rel  # negative gains count too (trec_eval)
            common = (log, judgments, tie_key, grade, rw, dcg, active)
            if shared is not None:
                shared["columns"] = common
        _, _, tie_key, grade, rw, (gains, disc, cum, ideal, shifts), active = common
        tie, items = tie_key if tie_key is not None else tie_rule(log, conv, scores, _items_once(log, conv, shared))
        cols = cpu.Columns(log.offsets, scores, rel, active, grade, items, judgments.R.astype(np.int64, copy=False),
                           gains, _EMPTY_F if rw is None else rw)
        thr = threshold(conv)
        prm = cpu.Params(plan.cutoffs, thr, tie, plan.want_r, plan.want_rank, disc, cum, self.path)
        out = cpu.compute(cols, prm, threads)
        if plan.positive_hits:
            out.rel_ret[:] = rel_ret
        st = QueryStats(plan.cutoffs, out.h, out.hit, out.h_at_r, out.n, out.rel_ret, cols.R, out.tie, out.rr,
                        out.ap, out.dcg, ideal, plan.dcg_specs, shifts)
        st.err = np.zeros((0, log.n_queries, len(plan.cutoffs)))
        if rw is not None:
            rows = np.flatnonzero(rel)
            st.relevant_weight = np.bincount(np.searchsorted(log.offsets, rows, side="right") - 1, weights=rw[rows],
                                             minlength=log.n_queries)
        if plan.ranked:
            _ranked_stats(st, log, plan, judgments, scores, rel, grade, tie, items, thr, threads)
        st.seq = np.zeros((0, log.n_queries))
        if plan.seq_specs:
            _sequence_stats(st, log, plan, judgments, scores, rel, grade, tie, items, thr, longest)
        return st

    def expected_in_top(self, log: GroupedLog, conv: Conventions, model: str, k: int, rows: np.ndarray,
                        threads: int | None = None) -> np.ndarray:
        """Per query, the expected number of ``rows`` (a boolean mask) among the model's top k (a
        click log's shown or never-shown candidates): the kernel's h(k) with ``rows`` as the relevant
        ones, under every tie rule (those that order ties by relevance read the real one)."""
        from ..kernels import cpu

        scores = comparable_scores(log.scores[model], conv)
        tie, items = tie_rule(log, conv, scores)
        thr = threshold(conv)
        kq = int(min(k, 1 << 40))
        if tie in (cpu.TIE_OPTIMISTIC, cpu.TIE_PESSIMISTIC):  # ties ordered by relevance: every row's own chance
            p, _, _ = cpu.exposure(log.offsets, scores, log.relevant(conv), log.grades.astype(np.float64, copy=False),
                                   items, thr, tie, np.full(log.n_queries, kq, np.int64))
            return np.bincount(np.repeat(np.arange(log.n_queries), np.diff(log.offsets)), weights=np.where(rows, p, 0.0),
                               minlength=log.n_queries)
        zeros = np.zeros((0, 1))
        cols = cpu.Columns(log.offsets, scores, rows, rows, _EMPTY_F, items, log.per_query_sum(rows).astype(np.int64),
                           np.zeros((0, len(scores))))
        prm = cpu.Params(np.array([kq], np.int64), thr, tie, False, False, zeros, zeros, self.path)
        return cpu.compute(cols, prm, threads).h[:, 0]

    def query_ranking(self, log: GroupedLog, R, q: int, conv: Conventions, model: str, k: int):
        """One query of a log as the kernel orders it (:meth:`~topkeval.Results.side_by_side`): per
        candidate its rank (0 below ``score_threshold``; tied candidates in input order under
        ``ties="expected"``), its score as compared, whether it is relevant, and its chance of being
        in the top ``k``; and the query's R."""
        from ..kernels import cpu

        lo, hi = int(log.offsets[q]), int(log.offsets[q + 1])
        offsets = np.array([0, hi - lo], np.int64)
        scores = comparable_scores(log.scores[model][lo:hi], conv)
        rel = log.relevant(conv)[lo:hi]
        grades = log.grades[lo:hi].astype(np.float64)
        tie, items = tie_rule(log, conv, comparable_scores(log.scores[model], conv))
        items = items[lo:hi] if len(items) else items
        thr = threshold(conv)
        keep = scores >= thr
        order = cpu.TIE_FIRST if tie == cpu.TIE_EXPECTED else tie
        rank = cpu.ranks(offsets, np.where(keep, scores, -np.inf), rel, grades, items, order, hi - lo)
        rank[~keep] = 0
        rq = int(rel.sum()) if R is None else int(R[q])  # R counts relevant candidates below score_threshold too
        p = cpu.inclusion(offsets, scores, rel, grades, items, thr, tie, np.array([k], np.int64))
        return rank, scores, rel, p, rq

    def items_changed(self, evaluation, baseline: str, model: str, metric: Metric):
        """``(gained, lost)``: per query, the relevant items whose chance of being in the top k rose /
        fell from ``baseline`` to ``model`` (k = R for r_precision); None when the evaluation keeps no
        rows or no item ids."""
        if evaluation.sources is None or evaluation.conventions is None:
            return None
        from ..engine.plan import conventions_of

        # under the metric's own relevance threshold (rel=) when it has one
        return items_changed(evaluation.sources, conventions_of(metric, evaluation.conventions), baseline, model,
                             metric)


def _ranked_stats(st: QueryStats, log: GroupedLog, plan: Plan, judgments: Judgments, scores: np.ndarray,
                  rel: np.ndarray, grade: np.ndarray, tie: int, items: np.ndarray, thr: float,
                  threads: int | None) -> None:
    """The second pass (:mod:`topkeval.kernels.ranked`): judged candidates, bpref, interpolated
    precision, AUC, ERR, inferred AP and trec_eval's Rprec_mult, binG, G, Rndcg and ndcg_rel, into
    ``st``; and the judged non-relevant candidates retrieved."""
    from ..kernels import ranked

    conv = plan.conv
    need = plan.ranked
    judged = log.judged_rows()
    grades = np.asarray(log.grades)
    jnr = judged & (grades >= 0) & ~rel
    unj = judged & (grades < 0) & ~rel  # trec_eval: in the pool but not judged
    err = np.stack([err_gains(grades, m) for m in plan.err_grades]) if plan.err_grades else np.zeros((0, len(rel)))
    active = rel.copy()
    if "judged" in need:
        active |= judged
    if need & {"bpref", "infap"}:
        active |= jnr
    if "infap" in need:
        active |= unj
    if len(err):
        active |= (err > 0).any(axis=0)
    longest = int(np.diff(log.offsets).max()) if log.n_queries else 0
    wgain, ioff, ival, icnt, wdisc = walk_columns(plan, grades, rel, judgments, log.judged_rows, longest)
    if len(wgain):
        active |= (wgain != 0).any(axis=0)  # negative gains count too (trec_eval)
    keys = ([grades.astype(np.float64)] if len(err) else []) + list(wgain)  # to order tie mates (sums in one order)
    order = np.stack(keys) if keys else np.zeros((0, 0))
    cols = ranked.RankedColumns(log.offsets, scores, rel, active, judged, jnr, unj, grade, items, err, order,
                                judgments.R.astype(np.int64, copy=False),
                                np.asarray(judgments.judged_nonrelevant(conv), dtype=np.int64), wgain, ioff, ival, icnt)
    whole = bool(need & {"bpref", "iprec", "auc", "infap", "h_mult", "bin_g", "gain_walk"})
    prm = ranked.RankedParams(plan.cutoffs, thr, tie, whole, "judged" in need, "bpref" in need, "auc" in need,
                              "infap" in need, np.asarray(plan.iprec_levels, dtype=np.float64),
                              np.asarray(plan.mults, dtype=np.float64), "bin_g" in need, wdisc)
    out = ranked.compute(cols, prm, threads)
    st.judged, st.bpref_sum, st.iprec, st.auc_sum, st.err = out.judged, out.bpref, out.iprec, out.auc, out.err
    st.infap_sum, st.h_mult, st.bin_g_sum, st.walk = out.infap, out.h_mult, out.bin_g, out.walk
    st.iprec_levels, st.err_grades, st.mults, st.walk_specs = plan.iprec_levels, plan.err_grades, plan.mults, plan.walk_specs
    if "nonrel_judged" in need:  # retrieved: at or above score_threshold
        st.nonrel_judged = log.per_query_sum(jnr & (scores >= thr)).astype(np.float64)


def _sequence_stats(st: QueryStats, log: GroupedLog, plan: Plan, judgments: Judgments, scores: np.ndarray,
                    rel: np.ndarray, grade: np.ndarray, tie: int, items: np.ndarray, thr: float, longest: int) -> None:
    """The statistics of each list in rank order (:mod:`topkeval.kernels.sequence`), into ``st``:
    the rows ranked once by the tie rule (deterministic: the plan refuses ``ties="expected"``)."""
    from ..kernels import cpu, sequence
    from ..metrics import DcgSpec

    kept = scores >= thr
    rank = cpu.ranks(log.offsets, np.where(kept, scores, -np.inf), rel, grade, items, tie, max(longest, 1))
    rank[~kept] = 0
    out = np.empty((len(plan.seq_specs), log.n_queries))
    for v, spec in enumerate(plan.seq_specs):
        if spec[0] == "cwl":
            _, kind, k, param, gain, column = spec
            gains = gains_of(log.grades, DcgSpec(gain))
            judged = log.judged_rows()
            if not judged.all():  # a candidate without a judgment gains nothing (cwl_eval's worst case)
                gains[~judged] = 0.0
            total = None
            if kind == "trap":  # the judged items of positive gain (cwl_eval's total_qrel_rels)
                positive = gains_of(np.asarray(judgments.grades), DcgSpec(gain)) > 0
                total = np.bincount(np.repeat(np.arange(log.n_queries), np.diff(judgments.offsets)), weights=positive,
                                    minlength=log.n_queries)
                if judgments.zeros is not None and float(gains_of(np.zeros(1), DcgSpec(gain))[0]) > 0:
                    total = total + np.asarray(judgments.zeros, np.float64)  # the cells of grade 0 a matrix omits
            out[v] = sequence.cwl(log.offsets, rank, gains, kind, k, param, CWL_DEPTH, column, total)
        elif spec[0] == "compat":
            judged_rel = plan.conv.is_relevant(np.asarray(judgments.grades))
            places = None
            if spec[3] == "judgments":  # ir_measures' ideal: equal grades by score, then in the judgments' order
                places = sequence.ideal_places(rank, scores, judgments.offsets, judgments.grades, judged_rel,
                                               _row_judgments(log, judgments))
            out[v] = sequence.compat(log.offsets, rank, rel, log.grades, judgments.R, judgments.offsets,
                                     judgments.grades, judged_rel, spec[1], spec[2], places)
        else:  # accuracy
            out[v] = sequence.accuracy(log.offsets, rank, rel, spec[1])
    st.seq, st.seq_specs = out, plan.seq_specs


def _row_judgments(log: GroupedLog, judgments: Judgments) -> np.ndarray:
    """Per row of ``log``, the index of its judgment in ``judgments`` (-1 without one): the row itself
    when the judgments are the log's own rows, else its item looked up among its query's judged items."""
    from ..kernels.grouping import judge

    if judgments.grades is log.grades:
        return np.arange(log.n_rows, dtype=np.int64)
    if judgments.items is None or not log.has_items:
        raise ParameterError("compat(ideal=judgments) orders the ideal by the judgments' order, which needs the "
                             "judged items of each query (judgments apart, qrels=, or one table of graded rows).")
    items = cast(np.ndarray, log.items)  # has_items: the codes exist
    index, found = judge(log.offsets, items, judgments.offsets, judgments.items,
                         np.arange(len(judgments.grades), dtype=np.float64))
    return np.where(found, index, -1).astype(np.int64)


def _relevant_kept(log: GroupedLog, rel: np.ndarray, scores: np.ndarray, conv: Conventions) -> np.ndarray:
    """Relevant candidates per query that survive ``score_threshold``."""
    kept = rel if conv.score_threshold is None else rel & (scores >= conv.score_threshold)
    return log.per_query_sum(kept)


CPU = CpuBackend()


def _inclusion(log, R, conv, model: str, metric) -> np.ndarray:
    """Per row of ``log``: the chance that the row, when relevant, is in ``model``'s top k (0 for the rest)."""
    from ..kernels import cpu

    rel = log.relevant(conv)
    if R is None:
        R = log.per_query_sum(rel)
    kq = R.astype(np.int64) if metric.k is None else np.full(log.n_queries, metric.k, np.int64)
    thr = threshold(conv)
    grades = log.grades.astype(np.float64, copy=False)
    scores = comparable_scores(log.scores[model], conv)
    tie, items = tie_rule(log, conv, scores)
    return cpu.inclusion(log.offsets, scores, rel, grades, items, thr, tie, kq)


def _changed_rows(log, R, conv, baseline: str, model: str, metric) -> tuple[dict, dict]:
    """Both models in one log (the rows align): the relevant rows whose chance rose / fell, by query."""
    a = _inclusion(log, R, conv, baseline, metric)
    b = _inclusion(log, R, conv, model, metric)
    q_of_row = np.repeat(np.arange(log.n_queries), np.diff(log.offsets))
    out = []
    for mask in (b > a + 1e-12, a > b + 1e-12):
        rows = np.flatnonzero(mask)  # grouped by query already: the log's rows are
        ids = log.item_ids(log.items[rows]).tolist()
        qs = q_of_row[rows]
        cuts = np.flatnonzero(np.diff(qs)) + 1
        starts = np.concatenate([[0], cuts]).astype(np.int64)
        ends = np.concatenate([cuts, [len(rows)]]).astype(np.int64)
        queries = log.queries[qs[starts]] if len(rows) else log.queries[:0]
        out.append({q: ids[s:e] for q, s, e in zip(queries.tolist(), starts.tolist(), ends.tolist())})
    return out[0], out[1]


def _inclusion_rows(log, R, conv, model: str, metric) -> pd.DataFrame:
    """(query, item, p) for each relevant row of ``model`` with its chance p of being in the top k."""
    p = _inclusion(log, R, conv, model, metric)
    rows = np.flatnonzero(log.relevant(conv))
    q_of_row = np.repeat(np.arange(log.n_queries), np.diff(log.offsets))
    return pd.DataFrame({"query": log.queries[q_of_row[rows]], "item": log.item_ids(log.items[rows]),
                         "p": p[rows]})


def items_changed(sources, conv, baseline: str, model: str, metric):
    """{query: [items]} of relevant items whose chance of being in the top k rose / fell; None
    without item ids."""
    frames: dict[str, list[pd.DataFrame]] = {baseline: [], model: []}
    gained: dict = {}
    lost: dict = {}
    aligned = False
    for log, R in sources():
        if not log.has_items:
            return None
        if baseline in log.scores and model in log.scores:  # one table with both score columns: no join
            g, lo = _changed_rows(log, R, conv, baseline, model, metric)
            gained.update(g)
            lost.update(lo)
            aligned = True
            continue
        for name in frames:
            if name in log.scores:
                frames[name].append(_inclusion_rows(log, R, conv, name, metric))
    if frames[baseline] and frames[model]:  # runs kept apart (judgments apart): join on (query, item)
        a = pd.concat(frames[baseline], ignore_index=True)
        b = pd.concat(frames[model], ignore_index=True)
        both = a.merge(b, on=["query", "item"], how="outer", suffixes=("_a", "_b"), sort=False).fillna(
            {"p_a": 0.0, "p_b": 0.0})
        for found, mask in ((gained, both["p_b"] > both["p_a"] + 1e-12), (lost, both["p_a"] > both["p_b"] + 1e-12)):
            found.update(both[mask].groupby("query", sort=False)["item"].agg(list).to_dict())
    elif not aligned:
        return None
    return gained, lost


def _items_once(log: GroupedLog, conv, shared: dict | None):
    """The item tie key of ``log`` (:func:`tie_items`), ranked once for every model of a call."""
    def items() -> np.ndarray:
        if shared is None:
            return tie_items(log, conv)
        memo = shared.get("tie_items")
        if memo is None or memo[0] is not log:
            memo = shared["tie_items"] = (log, tie_items(log, conv))
        return memo[1]
    return items
