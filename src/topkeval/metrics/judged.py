"""Metrics of the second pass: judged share, bpref, interpolated precision, AUC, ERR, inferred AP.

With R relevant items, NJ judged non-relevant items (a judgment with grade >= 0 that is not
relevant), n candidates of which r are relevant and N = n - r are not:

=====================  ===================================================================  ==================
metric                 value                                                                undefined when
=====================  ===================================================================  ==================
judged@k               judged candidates in the top k / k (shrink: / min(k, n))             shrink and n = 0
unj@k                  candidates without a judgment or with a negative grade in the top    shrink and n = 0
                       k / k (trec_eval unj_k; shrink: / min(k, n))
bpref                  (1/R) sum over relevant candidates of 1 - min(X, R) / min(NJ, R),    R = 0
                       X the judged non-relevant candidates above it (1 when min(NJ, R)=0)
infap                  (1/R) sum over relevant candidates at rank i of 1 at rank 1, else    R = 0
                       1/i + ((i-1)/i) (P/(i-1)) (a + eps)/(a + b + 2 eps): P of the i - 1
                       ranks above in the pool (a relevant, b judged non-relevant, the
                       rest with a negative grade), eps = 1e-5 (trec_eval infAP)
iprec(recall=x)        largest precision at or beyond the lround(x R)-th relevant rank;     R = 0, or n = 0 and
                       0 when fewer relevant candidates are listed (trec_eval)              lround(x R) = 0
iprec_avg              mean of iprec at recall 0, 0.1, ..., 1 or the levels given            R = 0, or n = 0 and
                       (trec_eval 11pt_avg, 11pt_avg.0.25,0.5)                              lround(x R) = 0 for a level
auc                    share of (relevant, non-relevant) candidate pairs ranked in that     r = 0 or N = 0
                       order, a tied pair 1/2 under ties="expected"
err(max_grade=m)@k     sum over ranks i <= k of p_i / i prod_{j<i} (1 - p_j),               never
                       p = (2^grade - 1) / 2^m
=====================  ===================================================================  ==================

A candidate is judged when it has a judgment: every row of a log (its grade is its judgment),
and, with judgments kept apart from the run (``qrels=``), a retrieved item the judgments list,
whatever its grade. A negative grade is trec_eval's "in the pool but not judged": such a candidate
is judged for judged@k, but neither relevant nor judged non-relevant for bpref and infAP, and
infAP counts it among the pooled ranks above a relevant candidate (P). ``iprec``, ``iprec_avg``
and ``infap`` are computed under deterministic tie rules only (the mean of a maximum, or of a
ratio of counts, over the orders of tied candidates has no closed form here); the others are
exact under every tie rule, ``ties="expected"`` included.
"""

from __future__ import annotations

import numpy as np

from ..conventions import TIES
from .registry import DcgSpec, Param, format_value, register
from .setbased import ratio

#: trec_eval's recall levels of iprec_at_recall and 11pt_avg.
ELEVEN_POINTS = (0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0)

#: The tie rules under which interpolated precision is exact: every one but "expected".
DETERMINISTIC = tuple(t for t in TIES if t != "expected")


@register("judged", pads=True, undefined="shrink and n = 0", cutoff="required", needs=("judged",),
          summary="share of the top k that has a judgment, relevant or not (ir_measures Judged@k)",
          formula="judged candidates in the top k / k  (shrink: / min(k, n))")
def judged(st, m, conv):
    den = np.minimum(float(m.k), st.n) if conv.short_lists == "shrink" else float(m.k)
    return ratio(st.judged[:, st.column(m.k)], den, conv.undefined)


@register("bpref", undefined="R = 0", needs_all_relevant=True, cutoff="none", needs=("bpref",), depth="list", trec_uncut="bpref",
          summary="binary preference (Buckley & Voorhees 2004; trec_eval bpref): unjudged candidates ignored",
          formula="(1/R) sum over relevant candidates of 1 - min(X, R) / min(NJ, R), X judged non-relevant above")
def bpref(st, m, conv):
    return ratio(st.bpref_sum, st.R, conv.undefined)


@register("infap", undefined="R = 0", needs_all_relevant=True, cutoff="none", needs=("infap",), depth="list", trec_uncut="infAP", ties=DETERMINISTIC,
          summary="inferred average precision (Yilmaz & Aslam 2006; trec_eval infAP): a sampled pool, grade -1 "
                  "in the pool but not judged",
          formula="(1/R) sum over relevant ranks i of 1/i + (P/i) (a + eps)/(a + b + 2 eps), eps = 1e-5: of the ranks "
                  "above, a relevant, b judged non-relevant, P with a judgment of any grade")
def infap(st, m, conv):
    return ratio(st.infap_sum, st.R, conv.undefined)


def _iprec_name(m) -> str:
    return f"iprec_at_recall_{m.param('recall'):.2f}"


@register("iprec", undefined="R = 0", needs_all_relevant=True, cutoff="none", needs=("iprec",), depth="list",
          params=(Param("recall", "fraction"),), levels=lambda m: (m.param("recall"),), ties=DETERMINISTIC,
          trec_format=_iprec_name,
          summary="interpolated precision at a recall level (trec_eval iprec_at_recall_0.50 is iprec(recall=0.5))",
          formula="max precision at ranks at or beyond the lround(x R)-th relevant; 0 if fewer are listed")
def iprec(st, m, conv):
    x = m.param("recall")
    # lround(x R) = 0 (half away from zero) exactly when x R < 0.5
    return _per_r(st.iprec[:, st.level(x)], st, conv, (st.n == 0) & (x * st.R < 0.5))


def _per_r(values, st, conv, empty=None) -> np.ndarray:
    """``values`` where R > 0, ``conv.undefined`` where R = 0, and where ``empty``: an empty list at
    a level whose count of relevant items is 0, where the largest precision is over no rank at all
    (trec_eval computes 0 / 0 there, NaN: its -J on a query whose retrieved items are all unjudged)."""
    out = np.array(values, dtype=np.float64)
    out[st.R == 0] = conv.undefined
    if empty is not None:
        out[empty & (st.R > 0)] = conv.undefined
    return out


def _iprec_avg_name(m) -> str:
    levels = m.param("levels")
    return "11pt_avg" if levels == ELEVEN_POINTS else "11pt_avg_" + ",".join(format_value(x) for x in levels)


@register("iprec_avg", undefined="R = 0, or an empty list", needs_all_relevant=True, cutoff="none", needs=("iprec",), depth="list", aliases=("11pt_avg", "iprec_11pt"),
          params=(Param("levels", "levels", ELEVEN_POINTS, False),), trec_uncut="11pt_avg", trec_format=_iprec_avg_name,
          trec_params=lambda text: ["levels={" + text + "}"], levels=lambda m: m.param("levels"), ties=DETERMINISTIC,
          summary="interpolated precision averaged over recall levels, 11 by default (trec_eval 11pt_avg; "
                  "11pt_avg.0.25,0.5 is iprec_avg(levels={0.25,0.5}))",
          formula="mean of iprec at recall 0, 0.1, ..., 1 (or the levels given)")
def iprec_avg(st, m, conv):
    levels = m.param("levels")
    total = np.zeros(st.n_queries)
    for x in reversed(levels):  # trec_eval's order of summation
        total += st.iprec[:, st.level(x)]
    # a level whose count of relevant items is 0 is undefined on an empty list (level 0 always is)
    empty = (st.n == 0) & (min(levels) * st.R < 0.5)
    return _per_r(total / len(levels), st, conv, empty)


@register("auc", undefined="no relevant or no non-relevant candidate retrieved", needs_all_relevant=True, cutoff="none", needs=("auc",), depth="list", aliases=("auroc", "roc_auc", "gauc", "retrievalauroc"),
          summary="area under the ROC curve of a query's candidates (torchmetrics binary AUROC per query)",
          formula="pairs (relevant, non-relevant) ranked in that order / (r N); a tie counts 1/2 (expected ties)")
def auc(st, m, conv):
    return ratio(st.auc_sum, st.rel_ret.astype(np.float64) * st.N, conv.undefined)


@register("err", undefined="never", cutoff="optional", needs=("err",), depth="list", params=(Param("max_grade", "grade", 4.0, False),),
          err=lambda m: m.param("max_grade"),
          summary="expected reciprocal rank (Chapelle et al. 2009), gdeval / ir_measures ERR: grades up to max_grade",
          formula="sum over ranks i <= k of p_i / i prod_{j<i} (1 - p_j), p = (2^grade - 1) / 2^max_grade")
def err(st, m, conv):
    return st.err_at(m.param("max_grade"), m.k).copy()


def _unknown_count(m, conv) -> DcgSpec:
    return DcgSpec("unknown", ("rbp", 1.0))  # a discount of 1 at every rank: the count in the top k


@register("unj", pads=True, undefined="shrink and n = 0", cutoff="required", needs=("dcg",), dcg=_unknown_count, trec="unj", higher_is_better=False,
          summary="trec_eval's unj_k: share of the top k without a judgment or with a negative grade",
          formula="unjudged candidates (no judgment, or a negative grade) in the top k / k  (shrink: / min(k, n))")
def unj(st, m, conv):
    den = np.minimum(float(m.k), st.n) if conv.short_lists == "shrink" else float(m.k)
    return ratio(st.dcg_at(_unknown_count(m, conv), m.k), den, conv.undefined)
