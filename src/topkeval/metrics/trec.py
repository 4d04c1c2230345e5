"""trec_eval's other measures: utility, gm_map, gm_bpref, Rprec_mult, binG, G, Rndcg, ndcg_rel and
num_nonrel_judged_ret, each defined as trec_eval 10 computes it (its ``m_*.c`` files). trec_eval's
set_map is :mod:`~topkeval.metrics.setbased`'s ``set_ap`` (ir_measures' SetAP; ``set_map`` is its alias).

With R relevant items, n candidates of which r are relevant, gains as nDCG's (the grade by
default; ``gain=exp``, a map), the ideal gains the positive gains of the query's judged items in
decreasing order (P of them):

=========================  ================================================================  ===========================
metric                     value                                                             undefined when
=========================  ================================================================  ===========================
utility(a,b,c,d,docs)      a r + b (n - r) + c (R - r) + d (docs - n - R + r)                 never
gm_map, gm_bpref           ln(max(AP, 1e-5)), ln(max(bpref, 1e-5)): their mean is the log     R = 0
                           of the geometric mean (the TREC output prints exp of the mean)
r_precision_mult(mult=x)   h(c) / c, c = floor(x R + 0.9)  (shrink: h(c) / min(c, n))         c = 0 (shrink: or n = 0)
bin_g                      (1/R) sum over relevant candidates of 1 / log2(2 + X), X the       R = 0
                           candidates above it that are not relevant
g                          (1 / sum of the ideal gains) sum over ranks i of                   no positive ideal gain
                           gain_i / log2(2 + C(i) - S(i))
rndcg                      mean of nDCG at the end of each run of equal ideal gains           R = 0 or no positive ideal
                           (and at n, for a list longer than P + 1)                           gain
ndcg_rel                   mean over the P ideal gains of nDCG at the rank of each            no positive ideal gain
                           candidate of positive gain, nDCG of the whole list for the rest
num_nonrel_judged_ret      judged non-relevant candidates retrieved (a grade >= 0)            never
=========================  ================================================================  ===========================

S(i) is the sum of the gains of the top i, C(i) the sum over ideal ranks j <= i of max(ideal gain
of j, 1) (1 past the ideal gains). An undefined value takes ``conventions.undefined``.

trec_eval's measure sets are here too: ``metrics="all_trec"``, ``"official"`` and ``"set"`` stand for
the measures trec_eval 10.0 prints for that set, in its order and under its names (:func:`trec_set`).
"""

from __future__ import annotations

import numpy as np

from ..errors import ShortListError, UnknownMetricError
from .judged import DETERMINISTIC
from .registry import DcgSpec, Param, format_value, register
from .setbased import ratio

#: trec_eval's floor of a value before its logarithm (MIN_GEO_MEAN), for the geometric means.
MIN_GEO_MEAN = 0.00001


def log_floor(values) -> np.ndarray:
    """``ln(max(value, 0.00001))`` (NaN stays NaN): trec_eval's per-query value of a geometric mean."""
    return np.log(np.maximum(np.asarray(values, np.float64), MIN_GEO_MEAN))


_UTILITY = (Param("a", "real", 1.0, False), Param("b", "real", -1.0, False), Param("c", "real", 0.0, False),
            Param("d", "real", 0.0, False), Param("docs", "positive", 0.0, False))


def _utility_name(m) -> str:
    coefficients = tuple(float(m.param(p)) for p in "abcd")
    if coefficients == (1.0, -1.0, 0.0, 0.0):
        return "utility"
    return "utility_" + ",".join(format_value(x) for x in coefficients)


def _utility_params(text: str) -> list[str]:
    values = text.split(",")
    if len(values) != 4:
        raise ValueError(f"utility.a,b,c,d takes four coefficients (trec_eval's), got {len(values)}")
    return [",".join(f"{p}={v}" for p, v in zip("abcd", values))]


@register("utility", undefined="never", needs_all_relevant=True, cutoff="none", params=_UTILITY, bounded=False,
          trec_uncut="utility", trec_format=_utility_name, trec_params=_utility_params,
          summary="trec_eval's utility: a weighted sum of the four cells of the contingency table of the whole "
                  "list (trec_eval utility.a,b,c,d; docs, the collection's size, is trec_eval's -N)",
          formula="a r + b (n - r) + c (R - r) + d (docs - n - R + r), r = num_rel_ret")
def utility(st, m, conv):
    a, b, c, d = (float(m.param(p)) for p in "abcd")
    n, r, R = st.n.astype(np.int64), st.rel_ret.astype(np.int64), st.R.astype(np.int64)
    rest = (float(m.param("docs")) + r) - n - R  # non-relevant items not retrieved
    return a * r + b * (n - r) + c * (R - r) + d * rest


@register("gm_map", undefined="R = 0", needs_all_relevant=True, counts_found=True, cutoff="none", needs=("rank",),
          depth="list", trec_uncut="gm_map", geometric=True, bounded=False, ties=DETERMINISTIC,
          summary="trec_eval's gm_map: ln of AP floored at 0.00001, so that the mean is the log of the geometric "
                  "mean AP (the TREC output prints its exp)",
          formula="ln(max(ap, 0.00001)); exp(mean) is the geometric mean")
def gm_map(st, m, conv):
    return log_floor(ratio(st.ap_sum[:, st.column(None)], st.R, conv.undefined))


@register("gm_bpref", undefined="R = 0", needs_all_relevant=True, cutoff="none", needs=("bpref",), depth="list",
          trec_uncut="gm_bpref", geometric=True, bounded=False, ties=DETERMINISTIC,
          summary="trec_eval's gm_bpref: ln of bpref floored at 0.00001, so that the mean is the log of the "
                  "geometric mean bpref (the TREC output prints its exp)",
          formula="ln(max(bpref, 0.00001)); exp(mean) is the geometric mean")
def gm_bpref(st, m, conv):
    return log_floor(ratio(st.bpref_sum, st.R, conv.undefined))


@register("yaap", undefined="never", needs_all_relevant=True, counts_found=True, cutoff="none", needs=("rank",),
          depth="list", trec_uncut="yaap", bounded=False, ties=DETERMINISTIC,
          summary="trec_eval's yaap, yet another average precision (Robertson, ECIR 2012): a log-odds form of AP "
                  "that averages better over queries",
          formula="ln((1 + S) / (1 + R - S)), S = sum of the precisions at the relevant ranks (AP times R)")
def yaap(st, m, conv):
    S = st.ap_sum[:, st.column(None)]
    return np.log((1.0 + S) / (1.0 + st.R - S))


@register("num_q", undefined="never", cutoff="none", trec_uncut="num_q", summed=True,
          summary="trec_eval's num_q: each evaluated query counts 1, so that the sum (trec_eval's all line) is "
                  "the number of queries the means run over",
          formula="1")
def num_q(st, m, conv):
    return np.ones(st.n_queries)


def _mult_name(m) -> str:
    return f"Rprec_mult_{m.param('mult'):.2f}"


def mult_cutoff(mult: float, R) -> np.ndarray:
    """trec_eval's cutoff of Rprec_mult: ``(long)(mult R + 0.9)``."""
    return np.floor(mult * np.asarray(R, np.float64) + 0.9)


@register("r_precision_mult", pads=True, undefined="floor(mult R + 0.9) = 0 (shrink: or n = 0)", needs_all_relevant=True,
          cutoff="none", needs=("h_mult",), depth="list", params=(Param("mult", "positive"),),
          trec_uncut="Rprec_mult", trec_format=_mult_name, trec_params=lambda text: [f"mult={x}" for x in text.split(",")],
          mults=lambda m: (m.param("mult"),),
          summary="precision at a multiple of R (trec_eval Rprec_mult_0.20 is r_precision_mult(mult=0.2))",
          formula="h(c) / c, c = floor(mult R + 0.9)")
def r_precision_mult(st, m, conv):
    x = m.param("mult")
    c = mult_cutoff(x, st.R)
    if conv.short_lists == "error" and (c > st.n).any():
        q = int(np.argmax(c > st.n))
        raise ShortListError(f"{m} looks at the top {int(c[q])} (floor(mult R + 0.9)), but a query has only "
                             f"{int(st.n[q])} candidates. Use short_lists='pad' to count the missing slots as "
                             "non-relevant (trec_eval), or short_lists='shrink' to divide by the list length.")
    den = np.minimum(c, st.n) if conv.short_lists == "shrink" else c
    return ratio(st.h_mult[:, st.mult(x)], den, conv.undefined)


@register("bin_g", undefined="R = 0", needs_all_relevant=True, cutoff="none", needs=("bin_g",), depth="list",
          trec_uncut="binG",
          summary="trec_eval's binG: a relevant candidate scores 1 / log2(2 + the non-relevant candidates above it)",
          formula="(1/R) sum over relevant candidates of 1 / log2(2 + X), X the candidates above it not relevant")
def bin_g(st, m, conv):
    return ratio(st.bin_g_sum, st.R, conv.undefined)


_GAIN = (Param("gain", "gain", "linear", False),)


def _walk_gain(m, conv) -> DcgSpec:
    # G discounts by the gain still missing, not by rank: the rank discount plays no part
    return DcgSpec(m.param("gain"), "log2", conv.negative_grades == "gain")


def _walk_dcg(m, conv) -> DcgSpec:
    return DcgSpec(m.param("gain"), conv.discount, conv.negative_grades == "gain")


def _walked(st, measure: str, spec, undefined: float) -> np.ndarray:
    values = np.array(st.walk_at(measure, spec))
    values[np.isnan(values)] = undefined
    return values


@register("g", undefined="no judged item has a positive gain", needs_all_relevant=True, cutoff="none",
          needs=("gain_walk",), depth="list", params=_GAIN, walk=_walk_gain, trec_uncut="G", ties=DETERMINISTIC,
          summary="trec_eval's G (normalized gain): a candidate's gain divided by log2(2 + the gain its rank "
                  "could still have had)",
          formula="(1/sum of the ideal gains) sum over ranks i of gain_i / log2(2 + C(i) - S(i)): S(i) the gains of "
                  "the top i, C(i) the sum of max(ideal gain, 1) over ideal ranks <= i")
def g(st, m, conv):
    return _walked(st, "G", _walk_gain(m, conv), conv.undefined)


@register("rndcg", undefined="R = 0, or no judged item has a positive gain", needs_all_relevant=True,
          cutoff="none", needs=("gain_walk",), depth="list", params=_GAIN, walk=_walk_dcg, trec_uncut="Rndcg",
          summary="trec_eval's Rndcg: nDCG averaged at the R levels, the ranks where the ideal gain drops "
                  "(and at n, for a list longer than the ideal gains and one more)",
          formula="mean of DCG@min(L, n) / ideal DCG@L over the ends L of the runs of equal ideal gains")
def rndcg(st, m, conv):
    values = _walked(st, "Rndcg", _walk_dcg(m, conv), conv.undefined)
    values[st.R == 0] = conv.undefined  # trec_eval computes nothing for a query without a relevant item
    return values


@register("ndcg_rel", undefined="no judged item has a positive gain", needs_all_relevant=True, cutoff="none",
          needs=("gain_walk",), depth="list", params=_GAIN, walk=_walk_dcg, trec_uncut="ndcg_rel", ties=DETERMINISTIC,
          summary="trec_eval's ndcg_rel: nDCG averaged over the P items of positive gain, at the rank of each "
                  "retrieved one, and at the end of the list for the others",
          formula="(sum over ranks i of positive gain of DCG@i / ideal DCG@i + (P - those) DCG / ideal DCG) / P")
def ndcg_rel(st, m, conv):
    return _walked(st, "ndcg_rel", _walk_dcg(m, conv), conv.undefined)


@register("num_nonrel_judged_ret", undefined="never", cutoff="none", needs=("nonrel_judged",), depth="list",
          aliases=("numnonreljudgedret",), bounded=False, trec_uncut="num_nonrel_judged_ret", summed=True,
          higher_is_better=False,
          summary="judged non-relevant candidates retrieved (trec_eval num_nonrel_judged_ret: a judgment of "
                  "grade >= 0 that is not relevant)",
          formula="candidates with a judgment of grade >= 0 that are not relevant")
def num_nonrel_judged_ret(st, m, conv):
    return st.nonrel_judged.copy()



# trec_eval's measure sets ------------------------------------------------------------------------------------------

#: trec_eval 10's default cutoffs of P, recall, relative_P, ndcg_cut and map_cut (each ``m_*.c`` file's
#: ``long_cutoff_array``)
_CUTOFFS = (5, 10, 15, 20, 30, 100, 200, 500, 1000)
#: ... the levels of iprec_at_recall (and of 11pt_avg, which is one number) and the multiples of Rprec_mult
_LEVELS = tuple(i / 10 for i in range(11))
_MULTS = tuple(i / 5 for i in range(1, 11))

#: The measures of trec_eval 10.0's ``all_trec`` set in the order trec_eval computes and prints them (its
#: array ``te_trec_measures`` of measures.c: the order of the measures, not of the set's list), each with the
#: names trec_eval prints for it under its default parameters (``P_5`` ... ``P_1000``): the names of its
#: output's first column, as its test outputs out.test (no -m) and out.test.a (-m all_trec) print them. A
#: measure with no name is not a number: ``runid`` (the run's name, which the TREC output prints from the
#: model's name) and ``relstring`` (per query, the relevance of the first ten documents as a string of
#: digits). dcg, ideal_dcg and yaap are trec_eval measures outside every set (``-m dcg`` asks for one).
TREC_EVAL_MEASURES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("runid", ()), ("num_q", ("num_q",)), ("num_ret", ("num_ret",)), ("num_rel", ("num_rel",)),
    ("num_rel_ret", ("num_rel_ret",)), ("map", ("map",)), ("gm_map", ("gm_map",)), ("Rprec", ("Rprec",)),
    ("bpref", ("bpref",)), ("recip_rank", ("recip_rank",)),
    ("iprec_at_recall", tuple(f"iprec_at_recall_{x:.2f}" for x in _LEVELS)),
    ("P", tuple(f"P_{k}" for k in _CUTOFFS)), ("relstring", ()),
    ("recall", tuple(f"recall_{k}" for k in _CUTOFFS)), ("infAP", ("infAP",)), ("gm_bpref", ("gm_bpref",)),
    ("Rprec_mult", tuple(f"Rprec_mult_{x:.2f}" for x in _MULTS)), ("utility", ("utility",)),
    ("11pt_avg", ("11pt_avg",)), ("binG", ("binG",)), ("G", ("G",)), ("ndcg", ("ndcg",)),
    ("ndcg_rel", ("ndcg_rel",)), ("Rndcg", ("Rndcg",)), ("ndcg_cut", tuple(f"ndcg_cut_{k}" for k in _CUTOFFS)),
    ("map_cut", tuple(f"map_cut_{k}" for k in _CUTOFFS)), ("relative_P", tuple(f"relative_P_{k}" for k in _CUTOFFS)),
    ("success", ("success_1", "success_5", "success_10")), ("set_P", ("set_P",)),
    ("set_relative_P", ("set_relative_P",)), ("set_recall", ("set_recall",)), ("set_map", ("set_map",)),
    ("set_F", ("set_F",)), ("num_nonrel_judged_ret", ("num_nonrel_judged_ret",)), ("rbp", ("rbp",)),
    ("rbp_resid", ("rbp_resid",)), ("unj", ("unj_5", "unj_10", "unj_20")),
)

#: trec_eval 10.0's measure sets that topkeval computes (measures.c's ``te_trec_measure_nicknames``), by the
#: measures each holds: ``official``, what trec_eval prints without -m; ``set``, the measures of the
#: retrieved set as a whole; ``all_trec``, every measure of the usual qrels.
TREC_SETS: dict[str, frozenset[str]] = {
    "official": frozenset({"runid", "num_q", "num_ret", "num_rel", "num_rel_ret", "map", "gm_map", "Rprec", "bpref",
                           "recip_rank", "iprec_at_recall", "P"}),
    "set": frozenset({"runid", "num_q", "num_ret", "num_rel", "num_rel_ret", "utility", "set_P", "set_recall",
                      "set_relative_P", "set_map", "set_F"}),
    "all_trec": frozenset(measure for measure, _ in TREC_EVAL_MEASURES),
}

#: trec_eval's sets of measures topkeval does not compute, and why.
TREC_SETS_REFUSED: dict[str, str] = {
    "all_prefs": "its measures (prefs_simp, prefs_pair, prefs_avgjg, ...) read preference judgments (trec_eval -R "
                 "prefs), which topkeval does not read",
    "prefs": "its measures (prefs_simp, prefs_pair, prefs_avgjg, ...) read preference judgments (trec_eval -R "
             "prefs), which topkeval does not read",
    "qrels_jg": "its measures (map_avgjg, P_avgjg, Rprec_mult_avgjg) read judgments of several judges (trec_eval "
                "-R qrels_jg), which topkeval does not read",
}

#: A printed name that topkeval reads otherwise: trec_eval's plain ``rbp`` is ``rbp_trec`` here (topkeval's
#: ``rbp`` is Moffat and Zobel's, and needs its p); the set's column is labelled ``rbp_trec``, and the TREC
#: output prints it ``rbp``.
_LABELS = {"rbp": "rbp_trec"}


def trec_set(name) -> tuple[str, ...] | None:
    """The metric names a trec_eval measure set stands for, in trec_eval's order; None when ``name`` is
    not the name of a set.

    ``all_trec`` (``trec_eval -m all_trec``: every measure of the usual qrels), ``official`` (what
    trec_eval prints without -m) and ``set`` (the measures of the whole retrieved list), case aside,
    are each measure of trec_eval 10.0's set under its default parameters (``P`` is ``P_5`` ...
    ``P_1000``), named as trec_eval prints it (those names are then the columns' labels), in the
    order trec_eval prints them: 98 metrics for ``all_trec``, 29 for ``official``, 10 for ``set``
    (:data:`TREC_EVAL_MEASURES`). The sets leave out ``runid`` and ``relstring``, which trec_eval
    prints but which are not numbers (the run's name; per query, the relevance of the first ten
    documents as text); the TREC output (``to_string("trec")``) prints the run's name on its
    ``runid`` line itself. trec_eval's plain ``rbp`` is labelled ``rbp_trec`` (topkeval's ``rbp``
    is Moffat and Zobel's and needs its p); the TREC output prints it ``rbp``.

    Raises
    ------
    UnknownMetricError
        For trec_eval's sets of preference measures (``all_prefs``, ``prefs``) and of several
        judges' measures (``qrels_jg``): topkeval does not read those judgments.

    Examples
    --------
    >>> trec_set("official")[:6], len(trec_set("all_trec")), trec_set("map")
    (('num_q', 'num_ret', 'num_rel', 'num_rel_ret', 'map', 'gm_map'), 98, None)
    """
    if not isinstance(name, str):
        return None
    key = name.strip().lower()
    if key in TREC_SETS_REFUSED:
        raise UnknownMetricError(f"{name!r} is trec_eval's set of measures that topkeval does not compute: "
                                 f"{TREC_SETS_REFUSED[key]}. Use trec_eval for it; topkeval computes the sets "
                                 f"{', '.join(repr(s) for s in TREC_SETS)}.")
    members = TREC_SETS.get(key)
    if members is None:
        return None
    return tuple(_LABELS.get(printed, printed) for measure, names in TREC_EVAL_MEASURES if measure in members
                 for printed in names)
