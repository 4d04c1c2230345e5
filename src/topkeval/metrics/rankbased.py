"""Rank-aware metrics: reciprocal rank, average precision, (n)DCG.

=================  ====================================================  ==================
metric             value                                                 undefined when
=================  ====================================================  ==================
rr@k               1 / rank of the first relevant candidate, 0 beyond k  never
ap@k               sum over relevant ranks <= k of precision@rank, / R   R = 0
ap_capped@k        the same sum / min(R, k)  (Spark, RecBole, MS Recs)   R = 0
ap_found@k         the same sum / h(k)  (torchmetrics RetrievalMAP)      h(k) = 0
dcg@k              sum over ranks <= k of gain x discount(rank)          never
ndcg@k             dcg@k / ideal dcg@k                                   ideal dcg is 0
rbp(p=p)@k         (1 - p) sum over relevant ranks i <= k of p^(i - 1)   never
rbp_residual@k     (1 - p) sum over unjudged ranks i <= min(k, n) of     never
                   p^(i - 1), + p^min(k, n) (Moffat & Zobel)
rbp_resid          trec_eval's: the residual over the whole list, with   never
                   negative grades unjudged; 0 when nothing is unjudged
=================  ====================================================  ==================

Without ``@k`` the whole list counts. Gains are the grades (``gain=linear``, trec_eval),
``2**grade - 1`` (``gain=exp``, ranx's ndcg_burges) or a map of grades to gains
(``gain={1:3,2:7}``, trec_eval's ``ndcg.1=3,2=7``; unlisted grades gain their own value when
positive), for every candidate with a positive grade: the relevance threshold decides binary
relevance (rr, ap), not graded gain. A gain map applies to judged candidates only: a retrieved
candidate without a judgment (judgments kept apart, ``qrels=``) gains nothing, even when the map
gives grade 0 a gain (trec_eval, ir_measures' ``nDCG(gains=...)``); every non-excluded cell of a
score matrix is judged, grade 0 when not stored. A negative gain counts in the DCG but not in the
ideal DCG (trec_eval: "gains are allowed to be 0 or negative"). The discount is
``1 / log2(rank + 1)``, or LensKit's ``1 / log2(max(rank, 2))`` under ``discount="lenskit"``.
The ideal DCG ranks the positive gains of all of the query's judged items, those not retrieved
included.
``short_lists`` "pad" and "shrink" do not change these metrics (ranks beyond the list add
nothing); "error" still refuses a cutoff larger than a list. Under ``ties="expected"`` each is
its exact expected value over the orders of tied candidates (McSherry & Najork 2008).
"""

from __future__ import annotations

import numpy as np

from ..conventions import TIES
from .registry import DcgSpec, Param, format_value, register
from .setbased import ratio

#: The tie rules under which a ratio of counts over the top k is exact: every one but "expected".
DETERMINISTIC = tuple(t for t in TIES if t != "expected")


@register("rr", undefined="never", counts_found=True, cutoff="optional", needs=("rank",), depth="list", aliases=("mrr", "recip_rank", "reciprocal_rank", "retrievalmrr"),
          trec_uncut="recip_rank",
          summary="reciprocal rank of the first relevant candidate (0 beyond k)", formula="1 / rank of the first relevant")
def rr(st, m, conv):
    return st.rr[:, st.column(m.k)].copy()


@register("ap", ips="snips", undefined="R = 0", needs_all_relevant=True, counts_found=True, cutoff="optional", needs=("rank",), depth="list", aliases=("map", "map_cut", "average_precision"),
          trec="map_cut", trec_uncut="map",
          summary="average precision (TREC AP: the sum runs over relevant ranks <= k, divided by R)",
          formula="sum(precision@rank of each relevant) / R")
def ap(st, m, conv):
    return ratio(st.ap_sum[:, st.column(m.k)], st.R, conv.undefined)


@register("ap_capped", undefined="R = 0", needs_all_relevant=True, counts_found=True, cutoff="required", needs=("rank",),
          summary="average precision divided by min(R, k) (Spark, RecBole, Microsoft Recommenders' MAP@k)",
          formula="sum(precision@rank of each relevant rank <= k) / min(R, k)")
def ap_capped(st, m, conv):
    return ratio(st.ap_sum[:, st.column(m.k)], np.minimum(st.R, float(m.k)), conv.undefined)


@register("ap_found", undefined="no relevant candidate in the top k", counts_found=True, cutoff="optional",
          needs=("rank", "h"), depth="list", aliases=("retrievalmap",), ties=DETERMINISTIC,
          summary="the precisions at the relevant ranks <= k averaged over the relevant candidates found in the top "
                  "k (torchmetrics RetrievalMAP)",
          formula="sum(precision@rank of each relevant rank <= k) / h(k)")
def ap_found(st, m, conv):
    return ratio(st.ap_sum[:, st.column(m.k)], st.h[:, st.column(m.k)], conv.undefined)


def _graded(m, conv) -> DcgSpec:
    return DcgSpec(m.param("gain"), conv.discount, conv.negative_grades == "gain")


_GAIN = (Param("gain", "gain", "linear", False),)


@register("dcg", ips="ips", undefined="never", cutoff="optional", needs=("dcg",), depth="list", params=_GAIN, bounded=False, dcg=_graded,
          trec_uncut="dcg",
          summary="discounted cumulative gain, graded gains", formula="sum(gain / log2(rank + 1))")
def dcg(st, m, conv):
    return _finite_dcg(st.dcg_at(_graded(m, conv), m.k), m)


def _finite_dcg(values, m):
    """A DCG's values (a copy), refused when the grades make one overflow."""
    if not np.isfinite(values).all():
        from ..errors import DataError

        raise DataError(f"{m} exceeds the largest float64 for some queries: the grades are too large for "
                        "a DCG; rescale them (nDCG is unaffected by scale).")
    return values.copy()


@register("ndcg", ips="snips", undefined="ideal DCG = 0", needs_all_relevant=True, cutoff="optional", needs=("dcg",), depth="list", params=_GAIN, dcg=_graded,
          aliases=("ndcg_cut", "retrievalnormalizeddcg"), trec="ndcg_cut", trec_uncut="ndcg", variants={"ndcg_burges": {"gain": "exp"}},
          summary="normalised discounted cumulative gain, graded gains",
          formula="DCG@k / ideal DCG@k, DCG = sum(gain / log2(rank + 1))")
def ndcg(st, m, conv):
    return ratio(*st.ndcg_terms(_graded(m, conv), m.k), conv.undefined)


@register("ideal_dcg", undefined="never", needs_all_relevant=True, cutoff="optional", needs=("dcg",), depth="list",
          params=_GAIN, bounded=False, dcg=_graded, trec_uncut="ideal_dcg",
          summary="the DCG of the ideal order of the query's judged gains, nDCG's denominator (trec_eval ideal_dcg)",
          formula="sum over ideal ranks i <= k of the i-th largest positive gain / log2(i + 1)")
def ideal_dcg(st, m, conv):
    return _finite_dcg(st.ideal_at(_graded(m, conv), m.k), m)


def _jarvelin(m, conv) -> DcgSpec:
    # Jarvelin & Kekalainen's discount, whatever conventions.discount: rank 1 undiscounted, rank r >= 2 by log2(r)
    return DcgSpec(m.param("gain"), "lenskit", conv.negative_grades == "gain")


@register("ndcg_p", undefined="ideal DCG = 0", needs_all_relevant=True, cutoff="none", needs=("dcg",), depth="list",
          params=_GAIN, dcg=_jarvelin, trec_uncut="ndcg_p",
          summary="trec_eval's ndcg_p (m_ndcg_p.c): nDCG with Jarvelin & Kekalainen's discount, 1 / log2(max(rank, 2)), "
                  "over the whole list; 0 when no relevant candidate is retrieved",
          formula="DCG / ideal DCG, DCG = sum(gain / log2(max(rank, 2))); 0 if no relevant candidate is retrieved")
def ndcg_p(st, m, conv):
    values = ratio(*st.ndcg_terms(_jarvelin(m, conv), None), conv.undefined)
    _, ideal = st.ndcg_terms(_jarvelin(m, conv), None)
    # trec_eval sets the value only when a relevant document is retrieved (num_rel_ret > 0)
    return np.where((st.rel_ret > 0) | (ideal == 0), values, 0.0)


def _rbp(m, conv) -> DcgSpec:
    gain = m.param("gain")
    return DcgSpec(gain, ("rbp", m.param("p")), gain != "binary" and conv.negative_grades == "gain")


@register("rbp", ips="ips", undefined="never", cutoff="optional", needs=("dcg",), depth="list", bounded=False,  # graded
          params=(Param("p", "unit"), Param("gain", "gain", "binary", False)), dcg=_rbp,
          summary="rank-biased precision (Moffat & Zobel 2008): a user reads on from each rank with probability p; "
                  "gain=linear weighs a rank by its grade (ranx, ir_measures' RBP without rel=)",
          formula="(1 - p) sum over relevant ranks i <= k of p^(i - 1)  (gain=linear: of grade x p^(i - 1))")
def rbp(st, m, conv):
    return (1.0 - m.param("p")) * st.dcg_at(_rbp(m, conv), m.k)


def _trec_rbp(m, conv) -> tuple[DcgSpec, DcgSpec]:
    # the grades as gains (negative grades none) and, from the ideal order with the discount 0^(rank - 1), the
    # query's largest judged grade
    return DcgSpec("linear", ("rbp", m.param("p"))), DcgSpec("linear", ("rbp", 0.0))


@register("rbp_trec", undefined="never", cutoff="none", needs=("dcg",), depth="list",
          params=(Param("p", "unit", 0.9, False),), dcg=_trec_rbp,
          trec_format=lambda m: "rbp" if m.param("p") == 0.9 else f"rbp_p={format_value(m.param('p'))}",
          summary="trec_eval's rbp (m_rbp.c; p = 0.9 by default): RBP of the grades, each divided by the query's "
                  "largest judged grade when that exceeds 1 (binary judgments: rbp(p=...))",
          formula="(1 - p) sum over ranks i of p^(i - 1) grade_i / max(1, the largest judged grade)")
def rbp_trec(st, m, conv):
    terms, largest = _trec_rbp(m, conv)
    top = st.ideal_at(largest, None)
    return (1.0 - m.param("p")) * st.dcg_at(terms, None) / np.maximum(top, 1.0)


def _rank_weights(m, conv) -> DcgSpec:
    return DcgSpec("binary", ("weights", tuple(float(w) for w in m.param("weights"))))


@register("rbp_weighted", undefined="R = 0, or no weight on the ranks of the list", needs_all_relevant=True,
          cutoff="required", needs=("dcg",), params=(Param("weights", "weights"),), dcg=_rank_weights,
          summary="LensKit's RBP with the rank weights of a field (RBP(weight_field=...)): the weights of the "
                  "relevant ranks of the top k over the weights of every rank of it",
          formula="sum over relevant ranks i <= min(k, n) of w_i / sum over ranks i <= min(k, n) of w_i")
def rbp_weighted(st, m, conv):
    weights = tuple(float(w) for w in m.param("weights"))
    if m.k > len(weights):
        from ..errors import ParameterError

        raise ParameterError(f"{m} weighs ranks 1 to {len(weights)} only: give a weight for each rank up to its "
                             f"cutoff {m.k}.")
    cum = np.concatenate([[0.0], np.cumsum(weights)])
    den = cum[np.minimum(st.n, m.k)]
    values = ratio(st.dcg_at(_rank_weights(m, conv), m.k), den, conv.undefined)
    values[st.R == 0] = conv.undefined  # LensKit: a user without test items has no value
    return values


def _unjudged(m, conv) -> DcgSpec:
    return DcgSpec("unjudged", ("rbp", m.param("p")))


@register("rbp_residual", undefined="never", cutoff="optional", needs=("dcg",), depth="list", params=(Param("p", "unit"),),
          dcg=_unjudged, higher_is_better=False,
          summary="RBP's residual (Moffat & Zobel 2008): how much rbp(p) could still grow if every unjudged "
                  "candidate of the top k, and every rank past the list, were relevant",
          formula="(1 - p) sum over unjudged ranks i <= min(k, n) of p^(i - 1) + p^min(k, n)")
def rbp_residual(st, m, conv):
    p = m.param("p")
    depth = st.n.astype(np.float64) if m.k is None else np.minimum(st.n, m.k).astype(np.float64)
    return (1.0 - p) * st.dcg_at(_unjudged(m, conv), m.k) + p ** depth


def _trec_resid(m, conv) -> tuple[DcgSpec, DcgSpec]:
    # the discounted sum over the candidates trec_eval calls unjudged, and their number (p = 1)
    return DcgSpec("unknown", ("rbp", m.param("p"))), DcgSpec("unknown", ("rbp", 1.0))


@register("rbp_resid", undefined="never", cutoff="none", needs=("dcg",), depth="list", params=(Param("p", "unit", 0.9, False),),
          dcg=_trec_resid, trec_uncut="rbp_resid", higher_is_better=False,
          trec_format=lambda m: "rbp_resid" if m.param("p") == 0.9 else f"rbp_resid_p={format_value(m.param('p'))}",
          summary="trec_eval's rbp_resid (p = 0.9 by default): RBP's residual over the whole list, 0 when no "
                  "retrieved candidate is unjudged (no judgment, or a negative grade)",
          formula="p^n + (1 - p) sum over unjudged ranks i of p^(i - 1) if any candidate is unjudged, else 0")
def rbp_resid(st, m, conv):
    p = m.param("p")
    terms, count = _trec_resid(m, conv)
    residual = (1.0 - p) * st.dcg_at(terms, None) + p ** st.n.astype(np.float64)
    return np.where(st.dcg_at(count, None) > 0, residual, 0.0)
