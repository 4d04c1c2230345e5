"""Rank-aware metrics: reciprocal rank, average precision, (n)DCG, and the TREC counts.

=================  ====================================================  ==================
metric             value                                                 undefined when
=================  ====================================================  ==================
rr@k               1 / rank of the first relevant candidate, 0 beyond k  never
ap@k               sum over relevant ranks <= k of precision@rank, / R   R = 0
dcg@k              sum over ranks <= k of gain / log2(rank + 1)          never
ndcg@k             dcg@k / ideal dcg@k                                   ideal dcg is 0
num_ret            n (candidates after score_threshold and depth)        never
num_rel            R                                                     never
num_rel_ret        relevant candidates among the n                       never
=================  ====================================================  ==================

Without ``@k`` the whole list counts. Gains are the grades (linear, as trec_eval) or
``2**grade - 1`` (``gain=exp``), for every candidate with a positive grade: the relevance
threshold decides binary relevance (rr, ap), not graded gain. The ideal DCG ranks all of the
query's judged gains, those of candidates not retrieved included. ``short_lists`` "pad" and
"shrink" do not change these metrics (ranks beyond the list add nothing); "error" still refuses a
cutoff larger than a list. Under ``ties="expected"`` each
is its exact expected value over the orders of tied candidates (McSherry & Najork 2008).
"""

from __future__ import annotations

import numpy as np

from .setbased import _ratio


def rr(st, m, conv):
    return st.rr[:, st.column(m.k)].copy()


def ap(st, m, conv):
    return _ratio(st.ap[:, st.column(m.k)], st.R, conv.undefined)


def dcg(st, m, conv):
    source = st.dcg_exp if m.gain == "exp" else st.dcg
    return source[:, st.column(m.k)].copy()


def ndcg(st, m, conv):
    col = st.column(m.k)
    if m.gain == "exp":
        return _ratio(st.dcg_exp[:, col], st.idcg_exp[:, col], conv.undefined)
    return _ratio(st.dcg[:, col], st.idcg[:, col], conv.undefined)


def num_ret(st, m, conv):
    return st.n.astype(np.float64)


def num_rel(st, m, conv):
    return st.R.astype(np.float64)


def num_rel_ret(st, m, conv):
    return st.rel_ret.astype(np.float64)


FUNCTIONS = {"rr": rr, "ap": ap, "dcg": dcg, "ndcg": ndcg, "num_ret": num_ret, "num_rel": num_rel,
             "num_rel_ret": num_rel_ret}

RANK_FAMILIES = frozenset({"rr", "ap", "dcg", "ndcg"})
