"""Set metrics: precision, recall, F-beta, specificity, fallout, R-precision, hit rate, the confusion
counts at k, and trec_eval's set measures over the whole retrieved list.

With ``kk = min(k, n)``, ``h = h(k)``, ``R`` relevant items, ``n`` candidates, ``r`` relevant
candidates (``num_rel_ret``) and ``N = n - r`` non-relevant candidates:

======================  ==========================================  ==========================
metric                  value                                       undefined when
======================  ==========================================  ==========================
precision@k             h / k  (shrink: h / kk)                     shrink and n = 0
recall@k                h / R                                       R = 0
recall_capped@k         h / min(R, k)  (LensKit's Recall@k)         R = 0
fbeta@k                 (1 + b^2) h / (b^2 R + k)  (shrink: kk)     the denominator is 0
specificity@k           (N - (kk - h)) / N                          N = 0
fallout@k               (kk - h) / N                                N = 0
r_precision             h(R) / R  (shrink: h(R) / min(R, n))        R = 0
hit_rate@k              P(h >= 1)                                   never
tp, fp, fn, tn @k       h, kk - h, R - h, N - (kk - h)              never
set_precision           r / n  (trec_eval set_P)                    n = 0
set_recall              r / R  (trec_eval set_recall)               R = 0
set_f(beta=b)           (1 + b^2) r / (b^2 R + n)  (set_F)           R + n = 0
set_relative_precision  r / min(n, R)  (set_relative_P)             min(n, R) = 0
set_ap                  r^2 / (n R)  (set_map, ir_measures SetAP)   min(n, R) = 0
num_ret, num_rel        n, R                                        never
num_rel_ret             r                                           never
======================  ==========================================  ==========================

An undefined value takes ``conventions.undefined`` (0, 1 or nan; nan drops the query from that
metric's mean).
"""

from __future__ import annotations

import numpy as np

from .registry import Param, register


def ratio(num, den, undefined: float) -> np.ndarray:
    """``num / den``, and ``undefined`` where ``den`` is 0 (den: an array or a scalar)."""
    num = np.asarray(num, dtype=np.float64)
    den = np.asarray(den, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        out = num / den
    zero = den == 0
    if zero.any():
        out = np.array(out, dtype=np.float64)
        out[np.broadcast_to(zero, out.shape)] = undefined
    return out


def _h(st, m) -> np.ndarray:
    return st.h[:, st.column(m.k)]


def _kk(st, m) -> np.ndarray:
    return np.minimum(float(m.k), st.n)


def _k_den(st, m, conv):
    return _kk(st, m) if conv.short_lists == "shrink" else float(m.k)


def f_measure(hits, R, listed, beta: float, undefined: float) -> np.ndarray:
    """``(1 + b^2) hits / (b^2 R + listed)``, written so that no term overflows for large or small b.

    For b >= 1 both sides are divided by b^2: ``(1/b^2 + 1) hits / (R + listed / b^2)``, which tends
    to recall as b grows; for b < 1 the plain form tends to precision as b shrinks.
    """
    if beta >= 1:
        inv = 1.0 / (beta * beta)
        return ratio((inv + 1.0) * np.asarray(hits, np.float64), R + np.asarray(listed, np.float64) * inv, undefined)
    b2 = beta * beta
    return ratio((1.0 + b2) * np.asarray(hits, np.float64), b2 * np.asarray(R, np.float64) + listed, undefined)


@register("precision", pads=True, ips="ips", undefined="shrink and n = 0", counts_found=True, cutoff="required", needs=("h",), aliases=("p", "prec", "p_k", "retrievalprecision"), trec="P",
          summary="relevant share of the top k", formula="h(k) / k  (shrink: h(k) / min(k, n))")
def precision(st, m, conv):
    return ratio(_h(st, m), _k_den(st, m, conv), conv.undefined)


@register("recall", ips="snips", undefined="R = 0", needs_all_relevant=True, counts_found=True, cutoff="required", needs=("h",), aliases=("r", "rec", "recall_k", "retrievalrecall"), trec="recall",
          summary="share of the relevant items found in the top k", formula="h(k) / R")
def recall(st, m, conv):
    return ratio(_h(st, m), st.R, conv.undefined)


@register("recall_capped", undefined="R = 0", needs_all_relevant=True, counts_found=True, cutoff="required", needs=("h",),
          trec="relative_P",
          summary="recall with the denominator capped at k (LensKit's Recall@k; trec_eval relative_P_k)",
          formula="h(k) / min(R, k)")
def recall_capped(st, m, conv):
    return ratio(_h(st, m), np.minimum(st.R, float(m.k)), conv.undefined)


@register("f1", pads=True, ips="snips", undefined="shrink, n = 0 and R = 0", needs_all_relevant=True, counts_found=True, cutoff="required", needs=("h",), aliases=("f", "f1_score"),
          summary="harmonic mean of precision@k and recall@k", formula="2 h(k) / (k + R)")
def f1(st, m, conv):
    return f_measure(_h(st, m), st.R, _k_den(st, m, conv), 1.0, conv.undefined)


@register("fbeta", pads=True, ips="snips", undefined="shrink, n = 0 and R = 0", needs_all_relevant=True, counts_found=True, cutoff="required", needs=("h",), params=(Param("beta", "positive"),),
          summary="weighted harmonic mean of precision@k and recall@k", formula="(1 + b^2) h(k) / (b^2 R + k)")
def fbeta(st, m, conv):
    return f_measure(_h(st, m), st.R, _k_den(st, m, conv), m.param("beta"), conv.undefined)


@register("specificity", undefined="N = 0", cutoff="required", needs=("h",), aliases=("tnr",),
          summary="non-relevant candidates kept out of the top k", formula="(N - (min(k, n) - h(k))) / N")
def specificity(st, m, conv):
    return ratio(st.N - (_kk(st, m) - _h(st, m)), st.N, conv.undefined)


@register("fallout", undefined="N = 0", cutoff="required", needs=("h",), aliases=("fpr", "retrievalfallout"), higher_is_better=False,
          summary="non-relevant candidates let into the top k", formula="(min(k, n) - h(k)) / N")
def fallout(st, m, conv):
    return ratio(_kk(st, m) - _h(st, m), st.N, conv.undefined)


@register("r_precision", pads=True, ips="snips", undefined="R = 0 (shrink: min(R, n) = 0)", needs_all_relevant=True, cutoff="none", needs=("h_at_r",), depth="R", aliases=("rprec", "r-precision", "rprecision", "retrievalrprecision"),
          trec_uncut="Rprec", summary="precision at rank R (TREC Rprec)", formula="h(R) / R")
def r_precision(st, m, conv):
    den = np.minimum(st.R, st.n) if conv.short_lists == "shrink" else st.R
    return ratio(st.h_at_r, den, conv.undefined)


@register("hit_rate", undefined="never", cutoff="required", needs=("hit",), aliases=("success", "hit", "hitrate", "hr", "retrievalhitrate"), trec="success",
          summary="1 if any relevant item is in the top k (TREC success@k)", formula="1 if h(k) >= 1 else 0")
def hit_rate(st, m, conv):
    return st.hit[:, st.column(m.k)].copy()


@register("tp", ips="ips", undefined="never", counts_found=True, cutoff="required", needs=("h",), aliases=("hits",), bounded=False,
          summary="relevant candidates in the top k (ranx hits@k)", formula="h(k)")
def tp(st, m, conv):
    return _h(st, m).copy()


@register("fp", undefined="never", cutoff="required", needs=("h",), bounded=False, higher_is_better=False,
          summary="non-relevant candidates in the top k", formula="min(k, n) - h(k)")
def fp(st, m, conv):
    return _kk(st, m) - _h(st, m)


@register("fn", undefined="never", needs_all_relevant=True, counts_found=True, cutoff="required", needs=("h",), bounded=False, higher_is_better=False,
          summary="relevant items outside the top k", formula="R - h(k)")
def fn(st, m, conv):
    return st.R - _h(st, m)


@register("tn", undefined="never", cutoff="required", needs=("h",), bounded=False,
          summary="non-relevant candidates outside the top k", formula="N - (min(k, n) - h(k))")
def tn(st, m, conv):
    return st.N - (_kk(st, m) - _h(st, m))


@register("set_precision", undefined="n = 0", cutoff="none", aliases=("set_p", "setp"), trec_uncut="set_P",
          summary="relevant share of the whole list (trec_eval set_P)", formula="num_rel_ret / n")
def set_precision(st, m, conv):
    return ratio(st.rel_ret, st.n, conv.undefined)


@register("set_recall", undefined="R = 0", needs_all_relevant=True, cutoff="none", aliases=("setr",), trec_uncut="set_recall",
          summary="share of the relevant items in the whole list (trec_eval set_recall)", formula="num_rel_ret / R")
def set_recall(st, m, conv):
    return ratio(st.rel_ret, st.R, conv.undefined)


@register("set_f", undefined="n = 0 and R = 0", needs_all_relevant=True, cutoff="none", aliases=("setf",), params=(Param("beta", "positive", 1.0, False),),
          trec_uncut="set_F",
          summary="F-beta of the whole list (trec_eval set_F.x has beta = sqrt(x))",
          formula="(1 + b^2) num_rel_ret / (b^2 R + n)")
def set_f(st, m, conv):
    return f_measure(st.rel_ret, st.R, st.n, m.param("beta"), conv.undefined)


@register("set_relative_precision", undefined="min(n, R) = 0", needs_all_relevant=True, cutoff="none", aliases=("set_relative_p", "setrelp"), trec_uncut="set_relative_P",
          summary="num_rel_ret over the most it could be (trec_eval set_relative_P)",
          formula="num_rel_ret / min(n, R)")
def set_relative_precision(st, m, conv):
    return ratio(st.rel_ret, np.minimum(st.n, st.R), conv.undefined)


@register("set_ap", undefined="min(n, R) = 0", needs_all_relevant=True, cutoff="none", aliases=("setap", "set_map"),
          trec_uncut="set_map",
          summary="unranked average precision of the whole list: set_precision x set_recall (trec_eval set_map, "
                  "ir_measures SetAP)",
          formula="num_rel_ret^2 / (n R)")
def set_ap(st, m, conv):
    return ratio(st.rel_ret.astype(np.float64) ** 2, st.n.astype(np.float64) * st.R, conv.undefined)


@register("num_ret", undefined="never", cutoff="none", aliases=("numret",), bounded=False, trec_uncut="num_ret", summed=True,
          summary="candidates retrieved (n)", formula="n")
def num_ret(st, m, conv):
    return st.n.astype(np.float64)


@register("num_rel", undefined="never", needs_all_relevant=True, cutoff="none", aliases=("numrel",), bounded=False, trec_uncut="num_rel", summed=True,
          summary="relevant items (R)", formula="R")
def num_rel(st, m, conv):
    return st.R.astype(np.float64)


@register("num_rel_ret", undefined="never", cutoff="none", aliases=("numrelret",), bounded=False, trec_uncut="num_rel_ret", summed=True,
          summary="relevant candidates retrieved", formula="relevant among the n")
def num_rel_ret(st, m, conv):
    return st.rel_ret.astype(np.float64)
