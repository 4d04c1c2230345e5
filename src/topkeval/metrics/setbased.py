"""Top-k set metrics: precision, recall, F-beta, specificity, fallout, R-precision, hit rate, counts.

With ``kk = min(k, n)``, ``h = h(k)``, ``R`` relevant items and ``N`` non-relevant candidates:

==================  ==========================================  ==========================
metric              value                                       undefined when
==================  ==========================================  ==========================
precision@k         h / k  (shrink: h / kk)                     shrink and n = 0
recall@k            h / R                                       R = 0
recall_capped@k     h / min(R, k)  (LensKit's Recall@k)          R = 0
fbeta@k             (1 + b^2) h / (b^2 R + k)  (shrink: kk)     the denominator is 0
specificity@k       (N - (kk - h)) / N                          N = 0
fallout@k           (kk - h) / N                                N = 0
r_precision         h(R) / R  (shrink: h(R) / min(R, n))         R = 0
hit_rate@k          P(h >= 1)                                   never
tp, fp, fn, tn @k   h, kk - h, R - h, N - (kk - h)              never
==================  ==========================================  ==========================

An undefined value takes ``conventions.undefined`` (0, 1 or nan; nan drops the query from that
metric's mean).
"""

from __future__ import annotations

import numpy as np

from ..conventions import Conventions
from ..kernels.stats import QueryStats
from ..names import Metric


def _ratio(num: np.ndarray, den, undefined: float) -> np.ndarray:
    """``num / den``, and ``undefined`` where ``den`` is 0 (den: an array or a scalar)."""
    num = np.asarray(num, dtype=np.float64)
    den = np.asarray(den, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        out = num / den
    zero = den == 0
    if zero.any():
        out[np.broadcast_to(zero, out.shape)] = undefined
    return out


def _h(st: QueryStats, m: Metric) -> np.ndarray:
    return st.h[:, st.column(m.k)]


def _kk(st: QueryStats, m: Metric) -> np.ndarray:
    return np.minimum(m.k, st.n)


def _k_den(st: QueryStats, m: Metric, conv: Conventions):
    return _kk(st, m) if conv.short_lists == "shrink" else m.k


def precision(st, m, conv):
    return _ratio(_h(st, m), _k_den(st, m, conv), conv.undefined)


def recall(st, m, conv):
    return _ratio(_h(st, m), st.R, conv.undefined)


def recall_capped(st, m, conv):
    return _ratio(_h(st, m), np.minimum(st.R, m.k), conv.undefined)


def fbeta(st, m, conv, beta=None):
    b2 = (m.beta if beta is None else beta) ** 2
    return _ratio((1 + b2) * _h(st, m), b2 * st.R + _k_den(st, m, conv), conv.undefined)


def f1(st, m, conv):
    return fbeta(st, m, conv, beta=1.0)


def specificity(st, m, conv):
    return _ratio(st.N - (_kk(st, m) - _h(st, m)), st.N, conv.undefined)


def fallout(st, m, conv):
    return _ratio(_kk(st, m) - _h(st, m), st.N, conv.undefined)


def r_precision(st, m, conv):
    den = np.minimum(st.R, st.n) if conv.short_lists == "shrink" else st.R
    return _ratio(st.h_at_r, den, conv.undefined)


def hit_rate(st, m, conv):
    return st.hit[:, st.column(m.k)].copy()


def tp(st, m, conv):
    return _h(st, m).copy()


def fp(st, m, conv):
    return _kk(st, m) - _h(st, m)


def fn(st, m, conv):
    return st.R - _h(st, m)


def tn(st, m, conv):
    return st.N - (_kk(st, m) - _h(st, m))


SET_FUNCTIONS = {
    "precision": precision, "recall": recall, "recall_capped": recall_capped, "f1": f1, "fbeta": fbeta,
    "specificity": specificity, "fallout": fallout, "r_precision": r_precision,
    "hit_rate": hit_rate, "tp": tp, "fp": fp, "fn": fn, "tn": tn,
}


def metric_values(st: QueryStats, metric: Metric, conv: Conventions) -> np.ndarray:
    """Per-query values of one metric (float64, one per query of ``st``)."""
    from .rankbased import FUNCTIONS as RANK_FUNCTIONS

    fn = SET_FUNCTIONS.get(metric.family) or RANK_FUNCTIONS[metric.family]
    return np.asarray(fn(st, metric, conv), dtype=np.float64)
