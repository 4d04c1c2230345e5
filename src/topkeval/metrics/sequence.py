"""Metrics of a list read in rank order: cwl_eval's C/W/L measures, compatibility, accuracy.

The C/W/L measures (Moffat et al. 2013; cwl_eval, Azzopardi, Thomas & Moffat 2019) give the
expected utility per item a user gains: with ``C_i`` the chance to go on from rank i to rank i + 1,
``W_i = prod_{j<i} C_j / sum_l prod_{j<l} C_j`` and the value ``sum_i W_i g_i``. Gains are
cwl_eval's as ir_measures passes grades to it: ``g = (min(max(max(grade, 0), min_rel), max_rel) -
min_rel) / (max_rel - min_rel)`` for a judged candidate, 0 for one without a judgment. cwl_eval
pads every list with gain 0 to 1000 ranks and cuts it there (:data:`~topkeval.metrics.registry.CWL_DEPTH`);
the measures whose user may go on past a list's end normalise over those 1000 ranks.

=========================  ================================================================  ===========
metric                     C_i (rank i from 1; G_i the gain of ranks 1..i)                    ties
=========================  ================================================================  ===========
insq(T, max_rel)           ``((i + 2T - 1) / (i + 2T))^2``: W_i ~ 1 / (i + 2T - 1)^2          every rule
sdcg(max_rel)@k            ``log2(i + 1) / log2(i + 2)`` for i < k: W_i ~ 1 / log2(i + 1)     every rule
bpm(T, max_rel)@K          1 while G_i < T and i < K                                          deterministic
inst(T, max_rel)           ``((i + T + T_i - 1) / (i + T + T_i))^2``, T_i = T - G_i           deterministic
nerr8(max_rel)@k           ``1 - g_i`` for i < k                                              deterministic
nerr9(max_rel)@k           ``i / (i + 1) (1 - g_i)`` for i < k                                deterministic
nerr10(p, max_rel)         ``p (1 - g_i)``                                                    deterministic
nerr11(T, max_rel)         ``((i + 2T - 1) / (i + 2T))^2 (1 - g_i)``                         deterministic
tbg(H, max_rel)            W_i ~ ``2^(-(i - 1) / H)`` (cwl_eval gives W), C_i = W_{i+1} / W_i   every rule
u_measure(L, max_rel)      W_i ~ ``max(0, 1 - (i - 1) / L)``, 0 at rank 1000                     every rule
npv(rate, max_rel)         ``1 / (1 + rate)``                                                 every rule
bpm_dynamic(T, hb, ...)@K  1 while G_i < T + hb (G_{i-1} - (i - 1) gain_med) and i < K          deterministic
ift_goal, ift_rate, ift    ``1 - 1/(1 + b1 e^{(T - G_i) R1})``, ``1/(1 + b2 e^{(A - G_i/i) R2})``  deterministic
trap(max_rel)              W_i = G_i / (i R) given (not summing to 1), C_i = W_{i+1} / W_i      deterministic
=========================  ================================================================  ===========

``value=`` gives cwl_eval's other columns (unit costs): ``etu`` (sum L_i G_i, L_i the chance to stop
at rank i), ``ec`` (sum W_i), ``etc`` (sum L_i i), ``ed`` (1 / W_1); ``eu``, the measure, by default.

INSQ and SDCG weigh each rank by a fixed weight: they are discounted gains (the ``dcg``
statistic) and exact under ``ties="expected"`` too. The others adapt to the gains seen, and the
mean over the orders of tied candidates has no closed form here: deterministic tie rules only
(:mod:`topkeval.kernels.sequence`).

``compat(p=0.95)``: Clarke, Vtyurina & Smucker (2021), ir_measures' Compat: the rank-biased overlap
of the list with the ideal ranking of the query's relevant items, over depths 1..max(n, R), divided
by that of the ideal with itself (``normalize=true``, the default) or by ``sum p^(d-1)``
(``normalize=false``). The ideal ranks the relevant items by grade; ``ideal=`` orders equal grades:
``list`` (the default; Clarke et al.): in the list's order, those the list misses last;
``judgments`` (ir_measures' compat provider): by the list's score, descending, an item the list
lacks scoring 0, and equal scores in the order the judgments list the items (the rows' order of a
table without judgments apart).
``accuracy@k``: ir_measures' Accuracy, the share of (relevant, non-relevant) pairs of the top k
ranked in that order (the whole list without k; ``auc`` is the whole list's under
``ties="expected"``). Both need a deterministic tie rule.
"""

from __future__ import annotations

import functools

import numpy as np

from ..kernels.sequence import COLUMNS, cwl_static
from .judged import DETERMINISTIC
from .registry import CWL_DEPTH, DcgSpec, Param, ScaledGain, register

_MIN = Param("min_rel", "number", 0.0, False)
_MAX = Param("max_rel", "grade")
_T = Param("T", "positive", 1.0, False)
#: cwl_eval's columns (:data:`topkeval.kernels.sequence.COLUMNS`): eu (the measure), etu, ec, etc, ed
_VALUE = Param("value", "choice", "eu", False, choices=COLUMNS)


def _gain(m) -> ScaledGain:
    return ScaledGain(float(m.param("min_rel")), float(m.param("max_rel")))


def _values(values, conv) -> np.ndarray:
    """NaN (undefined) -> the ``undefined`` convention."""
    return np.where(np.isnan(values), conv.undefined, values)


def _cwl(kind: str, *params: str):
    """The sequence spec of a C/W/L measure whose continuation depends on the gains seen:
    ("cwl", kind, k or 0, its parameter (or a tuple of them), gain, column)."""
    def spec(m):
        values = tuple(float(m.param(p)) for p in params)
        return ("cwl", kind, m.k or 0, values[0] if len(values) == 1 else values if values else 0.0, _gain(m),
                m.param("value"))

    return spec


def _static(kind: str, param: str | None):
    """The discounted gain of a C/W/L measure whose continuation does not depend on the gains: its
    weights W (eu) or its chances T_j to stop at rank j or below (etu) (:func:`cwl_static`)."""
    def spec(m, conv):
        if m.param("value") in ("ec", "etc", "ed"):
            return ()  # the same for every list
        value = float(m.param(param)) if param else 0.0
        return DcgSpec(_gain(m), ("cwlw", kind, m.k or 0, value, m.param("value")))

    return spec


def _static_value(kind: str, param: str | None):
    def value(st, m, conv):
        column = m.param("value")
        if column in ("eu", "etu"):
            return st.dcg_at(_static(kind, param)(m, conv), m.k).copy()
        _, _, ec, etc, ed = cwl_static(kind, m.k or 0, float(m.param(param)) if param else 0.0, CWL_DEPTH)
        return np.full(st.n_queries, {"ec": ec, "etc": etc, "ed": ed}[column])

    return value


def _insq(m, conv):
    if m.param("value") != "eu":
        return _static("insq", "T")(m, conv)
    return DcgSpec(_gain(m), ("cwl", "insq", float(m.param("T"))))


@functools.lru_cache(maxsize=64)
def _insq_total(T: float) -> float:
    i = np.arange(1, CWL_DEPTH + 1, dtype=np.float64)
    return float((1.0 / (i + 2.0 * T - 1.0) ** 2).sum())


@register("insq", undefined="never", cutoff="none", needs=("dcg",), depth="list", params=(_T, _MIN, _MAX, _VALUE),
          dcg=_insq,
          summary="INSQ (Moffat, Scholer & Thomas 2012; cwl_eval, ir_measures INSQ): a user who wants T of gain "
                  "goes on from rank i with probability ((i + 2T - 1) / (i + 2T))^2",
          formula="sum over ranks i <= 1000 of g_i / (i + 2T - 1)^2, / sum over i <= 1000 of 1 / (i + 2T - 1)^2")
def insq(st, m, conv):
    if m.param("value") != "eu":
        return _static_value("insq", "T")(st, m, conv)
    return st.dcg_at(_insq(m, conv), None) / _insq_total(float(m.param("T")))


def _sdcg(m, conv):
    if m.param("value") != "eu":
        return _static("sdcg", None)(m, conv)
    return DcgSpec(_gain(m), ("cwl", "log2", 0.0))


@functools.lru_cache(maxsize=64)
def _sdcg_total(k: int) -> float:
    return float((1.0 / np.log2(np.arange(2, min(k, CWL_DEPTH) + 2, dtype=np.float64))).sum())


@register("sdcg", undefined="never", cutoff="required", needs=("dcg",), params=(_MIN, _MAX, _VALUE), dcg=_sdcg,
          summary="scaled DCG (cwl_eval's NDCG-k, ir_measures SDCG): DCG@k over that of k items of the "
                  "largest gain, as if k relevant items existed",
          formula="sum over ranks i <= k of g_i / log2(i + 1), / sum over i <= k of 1 / log2(i + 1)")
def sdcg(st, m, conv):
    if m.param("value") != "eu":
        return _static_value("sdcg", None)(st, m, conv)
    return st.dcg_at(_sdcg(m, conv), m.k) / _sdcg_total(m.k)


register("tbg", undefined="never", cutoff="none", needs=("dcg",), depth="list",
         params=(Param("H", "positive", 224.0, False), _MIN, _MAX, _VALUE), dcg=_static("tbg", "H"),
         summary="time-biased gain (Smucker & Clarke 2012; cwl_eval's TBG, each item costing 1): the weight of a "
                 "rank halves every H ranks",
         formula="sum over ranks i <= 1000 of g_i 2^(-(i - 1) / H), / sum over i <= 1000 of 2^(-(i - 1) / H)")(
    _static_value("tbg", "H"))
register("u_measure", undefined="never", cutoff="none", needs=("dcg",), depth="list",
         params=(Param("L", "positive", 1000.0, False), _MIN, _MAX, _VALUE), dcg=_static("umeasure", "L"),
         summary="U-measure (Sakai & Dou 2013; cwl_eval's U, each item costing 1): the weight of a rank falls "
                 "linearly to 0 at L",
         formula="sum over ranks i < 1000 of g_i max(0, 1 - (i - 1) / L), / the same sum of the weights")(
    _static_value("umeasure", "L"))
register("npv", undefined="never", cutoff="none", needs=("dcg",), depth="list",
         params=(Param("rate", "positive", 0.1, False), _MIN, _MAX, _VALUE), dcg=_static("npv", "rate"),
         summary="net present value (cwl_eval's NPV, Azzopardi, Thomas & Moffat 2019): RBP with the persistence "
                 "1 / (1 + rate), over 1000 ranks",
         formula="C/W/L with C_i = 1 / (1 + rate): sum over i <= 1000 of g_i p^(i-1) / sum of p^(i-1), p = 1/(1+rate)")(
    _static_value("npv", "rate"))


def _cwl_value(st, m, conv):
    return st.seq_at(m.info.seq(m)).copy()


register("bpm", undefined="never", cutoff="required", needs=("seq",), params=(_T, _MIN, _MAX, _VALUE),
         seq=_cwl("bpm", "T"), ties=DETERMINISTIC,
         summary="Bejeweled Player Model, static (Zhang et al. 2017; cwl_eval, ir_measures BPM): a user stops "
                 "once T of gain is seen, or at rank K",
         formula="G(s) / s, s = min(K, 1000, the first rank where the gain summed reaches T)")(_cwl_value)
register("bpm_dynamic", undefined="never", cutoff="required", needs=("seq",),
         params=(_T, Param("hb", "real", 1.0, False), Param("gain_med", "real", 0.5, False), _MIN, _MAX, _VALUE),
         seq=_cwl("bpmd", "T", "hb", "gain_med"), ties=DETERMINISTIC,
         summary="Bejeweled Player Model, dynamic (Zhang et al. 2017; cwl_eval's BPM-Dynamic): the goal T moves by "
                 "hb (g - gain_med) after each rank; the cost limit K stays (cwl_eval's hc never reaches it)",
         formula="C/W/L with C_i = 1 while G_i < T + hb (G_{i-1} - (i - 1) gain_med) and i < K, 0 from the first "
                 "rank that fails")(_cwl_value)
register("inst", undefined="never", cutoff="none", needs=("seq",), depth="list", params=(_T, _MIN, _MAX, _VALUE),
         seq=_cwl("inst", "T"), ties=DETERMINISTIC,
         summary="INST (Moffat et al. 2015; cwl_eval, ir_measures INST): INSQ whose goal shrinks by the gain seen",
         formula="C/W/L with C_i = ((i + T + T_i - 1) / (i + T + T_i))^2, T_i = T - gain of ranks 1..i")(_cwl_value)
register("nerr8", undefined="never", cutoff="required", needs=("seq",), params=(_MIN, _MAX, _VALUE),
         seq=_cwl("nerr8"), ties=DETERMINISTIC,
         summary="not (but nearly) ERR, eq. 8 (Azzopardi, Mackenzie & Moffat 2021; ir_measures NERR8)",
         formula="C/W/L with C_i = 1 - g_i for i < k, 0 at k")(_cwl_value)
register("nerr9", undefined="never", cutoff="required", needs=("seq",), params=(_MIN, _MAX, _VALUE),
         seq=_cwl("nerr9"), ties=DETERMINISTIC,
         summary="not (but nearly) ERR, eq. 9 (Azzopardi, Mackenzie & Moffat 2021; ir_measures NERR9)",
         formula="C/W/L with C_i = i / (i + 1) (1 - g_i) for i < k, 0 at k")(_cwl_value)
register("nerr10", undefined="never", cutoff="none", needs=("seq",), depth="list",
         params=(Param("p", "unit", 0.9, False), _MIN, _MAX, _VALUE), seq=_cwl("nerr10", "p"), ties=DETERMINISTIC,
         summary="not (but nearly) ERR, eq. 10 (Azzopardi, Mackenzie & Moffat 2021; ir_measures NERR10)",
         formula="C/W/L with C_i = p (1 - g_i)")(_cwl_value)
register("nerr11", undefined="never", cutoff="none", needs=("seq",), depth="list", params=(_T, _MIN, _MAX, _VALUE),
         seq=_cwl("nerr11", "T"), ties=DETERMINISTIC,
         summary="not (but nearly) ERR, eq. 11 (Azzopardi, Mackenzie & Moffat 2021; ir_measures NERR11)",
         formula="C/W/L with C_i = ((i + 2T - 1) / (i + 2T))^2 (1 - g_i)")(_cwl_value)
_GOAL = (Param("T", "positive"), Param("b1", "positive"), Param("R1", "real"))
_RATE = (Param("A", "positive"), Param("b2", "positive"), Param("R2", "real"))
register("ift_goal", undefined="never", cutoff="none", needs=("seq",), depth="list", params=(*_GOAL, _MIN, _MAX, _VALUE),
         seq=_cwl("iftg", "T", "b1", "R1"), ties=DETERMINISTIC,
         summary="information foraging, the goal alone (Azzopardi, Thomas & Craswell 2018; cwl_eval's IFT-C1): "
                 "the nearer the gain seen to T, the likelier the user stops",
         formula="C/W/L with C_i = 1 - 1 / (1 + b1 e^{(T - G_i) R1})")(_cwl_value)
register("ift_rate", undefined="never", cutoff="none", needs=("seq",), depth="list", params=(*_RATE, _MIN, _MAX, _VALUE),
         seq=_cwl("iftr", "A", "b2", "R2"), ties=DETERMINISTIC,
         summary="information foraging, the rate alone (Azzopardi, Thomas & Craswell 2018; cwl_eval's IFT-C2, each "
                 "item costing 1): the user goes on while the gain per item stays above A",
         formula="C/W/L with C_i = 1 / (1 + b2 e^{(A - G_i / i) R2})")(_cwl_value)
register("ift", undefined="never", cutoff="none", needs=("seq",), depth="list",
         params=(*_GOAL, *_RATE, _MIN, _MAX, _VALUE), seq=_cwl("ift", "T", "b1", "R1", "A", "b2", "R2"),
         ties=DETERMINISTIC,
         summary="information foraging, goal and rate (Azzopardi, Thomas & Craswell 2018; cwl_eval's IFT-C1-C2, the "
                 "variant that fitted users best)",
         formula="C/W/L with C_i = (1 - 1 / (1 + b1 e^{(T - G_i) R1})) / (1 + b2 e^{(A - G_i / i) R2})")(_cwl_value)
register("trap", undefined="never", cutoff="none", needs=("seq",), depth="list", params=(_MIN, _MAX, _VALUE),
         seq=_cwl("trap"), ties=DETERMINISTIC,
         summary="cwl_eval's TrAP: Harman's average precision as a C/W/L measure, weights G_i / (i R) not summing "
                 "to 1 (R the judged items of positive gain)",
         formula="sum over ranks i <= 1000 of g_i G_i / (i R), G_i the gain of ranks 1..i")(_cwl_value)


@register("compat", undefined="R = 0", needs_all_relevant=True, cutoff="none", needs=("seq",), depth="list",
          params=(Param("p", "unit", 0.95, False), Param("normalize", "bool", True, False),
                  Param("ideal", "choice", "list", False, ("list", "judgments"))),
          seq=lambda m: ("compat", float(m.param("p")), bool(m.param("normalize")), m.param("ideal")),
          ties=DETERMINISTIC,
          summary="compatibility (Clarke, Vtyurina & Smucker 2021; ir_measures Compat): rank-biased overlap with "
                  "the ideal ranking",
          formula="sum over depths d <= max(n, R) of p^(d-1) |top d of the list and of the ideal| / d, over the "
                  "same sum for the ideal with itself; the ideal by grade, equal grades in the list's order "
                  "(ideal=judgments: by the list's score, then in the judgments' order)")
def compat(st, m, conv):
    return _values(st.seq_at(m.info.seq(m)), conv)


@register("accuracy", undefined="no relevant or no non-relevant candidate in the top k", cutoff="optional",
          needs=("seq",), depth="list", seq=lambda m: ("accuracy", m.k or 0), ties=DETERMINISTIC,
          summary="share of the (relevant, non-relevant) pairs of the top k ranked in that order (ir_measures "
                  "Accuracy)",
          formula="1 - sum over relevant ranks of the non-relevant above / (r N), r and N of the top k")
def accuracy(st, m, conv):
    return _values(st.seq_at(m.info.seq(m)), conv)
