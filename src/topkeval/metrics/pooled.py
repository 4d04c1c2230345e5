"""Ratios pooled over the queries of a click log: what recall and F-beta become when estimated from
clicks (``evaluate(..., position=, propensity=)``).

A per-query recall ``h(k) / R`` estimated from clicks divides two inverse propensity weighted sums of
the same query's one or two clicks: a self-normalised ratio, badly biased with few clicks per query
(topkeval refuses it). Summed over many queries each sum is unbiased and the ratio of the sums is
consistent; these families estimate such ratios:

=======================  ==========================================  ================================
metric                   value (sums over the evaluated queries)     undefined when
=======================  ==========================================  ================================
recall_micro@k           ``sum h(k) / sum R``                        no query has a relevant item
fbeta_micro(beta=b)@k    ``(1 + b^2) sum h(k) / (b^2 sum R + sum k)``  every sum is 0
f1_micro@k               ``2 sum h(k) / (sum R + sum k)``             every sum is 0
=======================  ==========================================  ================================

(``k`` is ``min(k, n)`` under ``short_lists="shrink"``.) From clicks, ``h(k)`` is the inverse
propensity weighted count of the clicks in the top k and ``R`` that of the query's clicks.

A pooled ratio ``r = sum a_q / sum b_q`` is one number for all the queries, not a mean of per-query
values, so each query's value (``per_query``) is its linearised share (the empirical influence
function, Woodruff's linearisation)::

    psi_q = r + (a_q - r b_q) / mean(b)

Their mean is ``r`` exactly, and any analysis of means sees the ratio's own sampling variance: the
t interval of ``mean(psi)`` is the delta-method interval of ``r``, a bootstrap of ``mean(psi)`` the
linearised bootstrap of ``r``, and the paired differences ``psi_q(M) - psi_q(B)`` compare two
models' ratios (``Results.summary_ci``, ``compare``, ``compare_all`` as they are). A subset of the
queries (a segment) does not have the mean of its ``psi`` as its own ratio, which is why these
families are evaluated only over every query of one click log (without ``by=`` and ``weight=``).
"""

from __future__ import annotations

import numpy as np

from .registry import Param, register


def linearised(num, den, undefined: float) -> np.ndarray:
    """Each query's linearised share ``r + (num_q - r den_q) / mean(den)`` of the pooled ratio
    ``r = sum num / sum den`` (``undefined`` everywhere when ``sum den`` is 0).

    Three queries with numerators 1, 0, 2 and denominators 2, 1, 2: the ratio is 3 / 5, the mean
    denominator 5 / 3, and the first query's share 0.6 + (1 - 0.6 * 2) / (5 / 3) = 0.48:

    >>> psi = linearised(np.array([1.0, 0.0, 2.0]), np.array([2.0, 1.0, 2.0]), float("nan"))
    >>> psi.round(12).tolist(), round(float(psi.mean()), 12)
    ([0.48, 0.24, 1.08], 0.6)
    """
    num = np.asarray(num, np.float64)
    den = np.asarray(den, np.float64)
    total = float(den.sum())
    if len(den) == 0 or total == 0:
        return np.full(len(den), undefined)
    r = float(num.sum()) / total
    return r + (num - r * den) / (total / len(den))


def _h(st, m) -> np.ndarray:
    return st.h[:, st.column(m.k)]


def _listed(st, m, conv):
    return np.minimum(float(m.k), st.n) if conv.short_lists == "shrink" else np.full(len(st.n), float(m.k))


@register("recall_micro", ips="pooled", undefined="no query has a relevant item", needs_all_relevant=True,
          counts_found=True, cutoff="required", needs=("h",), aliases=("micro_recall",),
          summary="recall pooled over the queries (micro-averaged), for click logs with propensity=: each query's "
                  "value is its linearised share, their mean the pooled ratio",
          formula="sum h(k) / sum R")
def recall_micro(st, m, conv):
    return linearised(_h(st, m), st.Rw, conv.undefined)


def _f_micro(st, m, conv, beta: float) -> np.ndarray:
    # divided by b^2 for b >= 1 (as f_measure): no term overflows for large or small b
    h, R, k = _h(st, m), st.Rw, _listed(st, m, conv)
    if beta >= 1:
        inv = 1.0 / (beta * beta)
        return linearised((inv + 1.0) * h, R + k * inv, conv.undefined)
    b2 = beta * beta
    return linearised((1.0 + b2) * h, b2 * R + k, conv.undefined)


@register("f1_micro", ips="pooled", pads=True, undefined="every sum is 0", needs_all_relevant=True, counts_found=True,
          cutoff="required", needs=("h",), aliases=("micro_f1",),
          summary="F1 pooled over the queries (micro-averaged), for click logs with propensity=: each query's value "
                  "is its linearised share, their mean the pooled ratio",
          formula="2 sum h(k) / (sum R + sum k)")
def f1_micro(st, m, conv):
    return _f_micro(st, m, conv, 1.0)


@register("fbeta_micro", ips="pooled", pads=True, undefined="every sum is 0", needs_all_relevant=True,
          counts_found=True, cutoff="required", needs=("h",), params=(Param("beta", "positive"),),
          summary="F-beta pooled over the queries (micro-averaged), for click logs with propensity=: each query's "
                  "value is its linearised share, their mean the pooled ratio",
          formula="(1 + b^2) sum h(k) / (b^2 sum R + sum k)")
def fbeta_micro(st, m, conv):
    return _f_micro(st, m, conv, m.param("beta"))
