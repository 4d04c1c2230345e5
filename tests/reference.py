"""Slow, obviously correct definitions, written apart from the engine.

Each metric is computed from an explicit ranked list. ``ties="expected"`` is the plain mean of the
metric over every order of the tied candidates (all permutations of every tie group), so keep
tie groups small. Every convention is applied here by its plain meaning: scores rounded to
float32 before they are compared (``score_precision="float32"``), item ids compared as text
(``item_order="text"``), relevant candidates scoring <= 0 not counted as found
(``nonpositive_scores="miss"``), LensKit's discount.
"""

from __future__ import annotations

import functools
import itertools
import math
import struct
from collections import OrderedDict

#: Families that count the relevant candidates they find (``nonpositive_scores="miss"`` applies).
COUNTS_FOUND = {"precision", "recall", "recall_capped", "f1", "fbeta", "tp", "fn", "rr", "ap", "ap_capped", "gm_map",
                "ap_found", "yaap"}


def as_float32(x: float) -> float:
    return struct.unpack("f", struct.pack("f", x))[0]


def ranked_lists(scores, rel, items, conv, grades, judged=None):
    """Return the ranked lists (one per equally likely order) of (relevant, grade, score, judged) tuples."""
    if judged is None:
        judged = [True] * len(scores)
    if conv.get("score_precision") == "float32":
        scores = [as_float32(s) for s in scores]
    return [[(rel[i], grades[i], scores[i], judged[i]) for i in order]
            for order in ranked_orders(scores, rel, items, conv, grades)]


def ranked_orders(scores, rel, items, conv, grades):
    """The candidates' indices in rank order: one order per equally likely order of the tie groups
    (every permutation under ``ties="expected"``), one order under a deterministic tie rule."""
    ties = conv["ties"]
    if conv.get("score_precision") == "float32":
        scores = [as_float32(s) for s in scores]
    if conv.get("item_order") == "text":
        items = [str(i) for i in items]
    thr = conv.get("score_threshold")
    idx = [i for i in range(len(scores)) if thr is None or scores[i] >= thr]
    if ties == "expected":
        groups = {}
        for i in idx:
            groups.setdefault(scores[i], []).append(i)
        levels = [groups[s] for s in sorted(groups, reverse=True)]
        return [[i for group in combo for i in group]
                for combo in itertools.product(*[list(itertools.permutations(g)) for g in levels])]
    if ties == "first":
        order = sorted(idx, key=lambda i: -scores[i])  # sorted() is stable: input order within ties
    elif ties == "optimistic":
        order = sorted(idx, key=lambda i: (-scores[i], not rel[i], -grades[i], i))
    elif ties == "pessimistic":
        order = sorted(idx, key=lambda i: (-scores[i], rel[i], grades[i], i))
    elif ties == "item_desc":
        order = sorted(sorted(idx, key=lambda i: items[i], reverse=True), key=lambda i: -scores[i])
    elif ties == "item_asc":
        order = sorted(sorted(idx, key=lambda i: items[i]), key=lambda i: -scores[i])
    elif ties == "ranx":  # ranx's Run: numba's np.argsort (quicksort) of the negated scores, in row order
        order = [idx[p] for p in numba_argsort([-scores[i] for i in idx])]
    else:
        raise ValueError(ties)
    return [order]


def numba_argsort(keys) -> list[int]:
    """numba's own ``np.argsort`` (its default quicksort) of ``keys``: the order ranx gives a query."""
    global _NUMBA_ARGSORT
    import numpy as np

    if _NUMBA_ARGSORT is None:
        import numba

        _NUMBA_ARGSORT = numba.njit(lambda a: np.argsort(a))
    return _NUMBA_ARGSORT(np.asarray(keys, dtype=np.float64)).tolist()


_NUMBA_ARGSORT = None


def _div(a, b, undefined):
    return a / b if b != 0 else undefined


def _gain(grade, mode, signed=False):
    """trec_eval's gains: the grade (linear), 2**grade - 1 (exp) or a map, other grades their own value;
    0 for grades <= 0 unless ``signed`` (torchmetrics: a negative grade is a negative gain)."""
    if isinstance(mode, tuple):
        mapped = dict(mode)
        if grade in mapped:
            return float(mapped[grade])
    if grade <= 0 and not signed:
        return 0.0
    return 2.0**grade - 1.0 if mode == "exp" else float(grade)


def _discount(rank: int, conv) -> float:
    if conv.get("discount") == "lenskit":
        return 1.0 / math.log2(max(rank, 2))
    return 1.0 / math.log2(rank + 1)


def _dcg(gains, k, conv):
    return sum(g * _discount(p + 1, conv) for p, g in enumerate(gains[:k]))


def _c_round(x: float) -> int:
    """C's lround (half away from zero) for x >= 0."""
    f = math.floor(x)
    return f + (1 if x - f >= 0.5 else 0)


def _iprec(ranked, R, level):
    """trec_eval's m_iprec_at_recall.c, transcribed: a reverse walk keeping the running maximum."""
    cut = _c_round(level * R)
    num_ret, num_rel_ret = len(ranked), sum(ranked)
    if cut > num_rel_ret or num_ret == 0:
        return 0.0
    int_precis = num_rel_ret / num_ret
    rel_so_far = num_rel_ret
    i = num_ret
    while i > 0 and rel_so_far > 0:
        int_precis = max(int_precis, rel_so_far / i)
        if ranked[i - 1]:
            if rel_so_far == cut:
                return int_precis
            rel_so_far -= 1
        i -= 1
    return int_precis


def _infap_sum(triples, conv, eps=1e-5):
    """The sum over relevant ranks k of the expected precision at k of inferred AP: 1 at rank 1,
    else 1/k + (k-1)/k * (pooled above / (k-1)) * (relevant + eps) / (relevant + non-relevant + 2 eps)
    above. Pooled: a judgment of any grade; judged (sampled): a grade >= 0 (trec_eval's -1 is
    in the pool, not sampled); no judgment: outside the pool."""
    total = 0.0
    for k, (r, *_) in enumerate(triples, start=1):
        if not r:
            continue
        above = triples[: k - 1]
        rel = sum(1 for t in above if t[0])
        nonrel = sum(1 for t in above if not t[0] and t[3] and t[1] >= 0)
        pooled = sum(1 for t in above if t[0] or t[3])
        if k == 1:
            total += 1.0
        else:
            total += 1 / k + (k - 1) / k * (pooled / (k - 1)) * (rel + eps) / (rel + nonrel + 2 * eps)
    return total


ELEVEN = (0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0)


def _log_floor(value: float) -> float:
    """trec_eval's per-query value of a geometric mean: ln(max(value, MIN_GEO_MEAN = 0.00001))."""
    return value if math.isnan(value) else math.log(max(value, 0.00001))


def _trec_g(gains, ideal):
    """trec_eval's G (m_G.c): a retrieved document's gain over log2(2 + what the ideal ranking had
    gained by its rank, each ideal rank counting at least 1, - what the ranking had gained)."""
    total = sum(ideal)
    if total <= 0:
        return None
    value, got, cost = 0.0, 0.0, 0.0
    for i, gain in enumerate(gains):
        got += gain
        cost += max(ideal[i] if i < len(ideal) else 0.0, 1.0)
        if gain != 0:
            value += gain / math.log2(2 + cost - got)
    return value / total


def _trec_rndcg(gains, ideal, conv):
    """trec_eval's Rndcg (m_Rndcg.c): the mean of nDCG at each rank where the ideal gain drops to the
    next level (the last level: to 0), and at the end of a list longer than the ideal one by 2 or more."""
    def at(values, k):
        return sum(g * _discount(p + 1, conv) for p, g in enumerate(values[:k]))

    P = len(ideal)
    if P == 0:  # trec_eval: 0 / 0
        return None
    ends = [p for p in range(1, P + 1) if p == P or ideal[p] != ideal[p - 1]]
    values = [at(gains, L) / at(ideal, L) for L in ends]
    if len(gains) >= P + 2:
        values.append(at(gains, len(gains)) / at(ideal, P))
    return sum(values) / len(values)


def _trec_ndcg_rel(gains, ideal, conv):
    """trec_eval's ndcg_rel (m_ndcg_rel.c): nDCG at the rank of each retrieved document of positive
    gain, and nDCG of the whole list for each ideal document left, averaged over the ideal ones;
    0 when that sum is not positive."""
    def at(values, k):
        return sum(g * _discount(p + 1, conv) for p, g in enumerate(values[:k]))

    P = len(ideal)
    if P == 0:
        return None
    terms = [at(gains, i + 1) / at(ideal, min(i + 1, P)) for i, g in enumerate(gains) if g > 0]
    total = sum(terms) + (P - len(terms)) * at(gains, len(gains)) / at(ideal, P)
    return total / P if total > 0 else 0.0


def metric_on_list(family, k, beta, triples, R, conv, judged=(), gain=None):
    """One metric on one fully ordered list of (relevant, grade, score, judged) tuples.

    ``judged``: every judged grade of the query (for the ideal DCG and bpref's judged non-relevant
    items).
    """
    ranked = [bool(r) for r, *_ in triples]
    und = conv["undefined"]
    if family in ("judged", "unj"):  # trec_eval's unj_k: no judgment, or a negative grade (in the pool only)
        flags = [bool(t[3]) if family == "judged" else not t[3] or t[1] < 0 for t in triples]
        return _div(sum(flags[:k]), min(k, len(flags)) if conv["short_lists"] == "shrink" else k, und)
    if family == "bpref":  # trec_eval's m_bpref.c, transcribed
        num_nonrel = sum(1 for g in judged if g >= 0 and not _is_rel(g, conv))
        nonrel_so_far, total = 0, 0.0
        for r, g, _, j in triples:
            if r:
                total += 1.0 - min(nonrel_so_far, R) / min(num_nonrel, R) if nonrel_so_far > 0 else 1.0
            elif j and g >= 0:
                nonrel_so_far += 1
        return _div(total, R, und)
    if family == "infap":  # Yilmaz & Aslam 2006, with trec_eval's classes and smoothing (m_infap.c)
        return _div(_infap_sum(triples, conv), R, und)
    if family in ("iprec", "iprec_avg"):
        if R == 0:
            return und
        levels = (beta,) if family == "iprec" else (beta or ELEVEN)  # beta carries the level(s)
        # an empty list at a level counting 0 relevant items: the largest precision over no rank
        if not ranked and any(_c_round(x * R) == 0 for x in levels):
            return und
        return sum(_iprec(ranked, R, x) for x in reversed(levels)) / len(levels)
    if family == "gm_bpref":  # bpref, below, then its log
        return _log_floor(metric_on_list("bpref", k, beta, triples, R, conv, judged, gain))
    if family == "bin_g":  # trec_eval's m_binG.c, transcribed
        total, rel_so_far = 0.0, 0
        for i, r in enumerate(ranked):
            if r:
                rel_so_far += 1
                total += 1 / math.log2(3 + i - rel_so_far)
        return _div(total, R, und)
    if family == "num_nonrel_judged_ret":
        return sum(1 for r, g, _, j in triples if j and g >= 0 and not r)
    if family == "r_precision_mult":  # beta carries the multiplier; trec_eval's cutoff (long)(x R + 0.9)
        c = int(math.floor(beta * R + 0.9))
        den = min(c, len(ranked)) if conv["short_lists"] == "shrink" else c
        return _div(sum(ranked[:c]), den, und)
    if family in ("g", "rndcg", "ndcg_rel"):  # gains as nDCG's (signed: a negative grade's own); the ideal
        signed = conv.get("negative_grades") == "gain"  # ranks the positive gains of the judged items
        gains = [_gain(g, gain, signed) if j else 0.0 for _, g, _, j in triples]
        ideal = sorted((x for x in (_gain(g, gain, signed) for g in judged) if x > 0), reverse=True)
        if family == "rndcg" and R == 0:
            return und
        value = {"g": _trec_g(gains, ideal), "rndcg": _trec_rndcg(gains, ideal, conv),
                 "ndcg_rel": _trec_ndcg_rel(gains, ideal, conv)}[family]
        return und if value is None else value
    if family == "auc":
        pos = [p for p, r in enumerate(ranked) if r]
        neg = [p for p, r in enumerate(ranked) if not r]
        return _div(sum(1 for a in pos for b in neg if a < b), len(pos) * len(neg), und)
    if family == "err":  # beta carries the largest grade
        total, decay = 0.0, 1.0
        for p, (_, g, _, _) in enumerate(triples[: len(triples) if k is None else k]):
            stop = (2.0 ** max(g, 0) - 1) / 2.0**beta
            total += stop * decay / (p + 1)
            decay *= 1 - stop
        return total
    if family in CWL:  # beta carries the parameters
        return _cwl(family, k, beta, triples, judged)
    if family == "compat":
        return _compat(triples, R, conv, judged, beta["p"], beta["normalize"], und)
    if family == "accuracy":  # ir_measures' AccuracyEvaluator, transcribed
        nonrels = [0]
        for relevant in ranked[: len(ranked) if k is None else k]:
            if relevant:
                nonrels.append(nonrels[-1])
            else:
                nonrels[-1] += 1
        if len(nonrels) < 2 or nonrels[-1] == 0:
            return und
        return 1.0 - sum(nonrels[:-1]) / (float(nonrels[-1]) * (len(nonrels) - 1))
    if family in COUNTS_FOUND and conv.get("nonpositive_scores") == "miss":
        found = [bool(r) and s > 0 for r, _, s, _ in triples]  # torchmetrics: kept in place, never found
    else:
        found = ranked
    n = len(ranked)
    cut = n if k is None else k
    if family == "rr":
        first = next((p for p, r in enumerate(found) if r), None)
        return 1.0 / (first + 1) if first is not None and first < cut else 0.0
    if family in ("ap", "ap_capped", "gm_map", "ap_found", "yaap"):
        total, seen = 0.0, 0
        for p, r in enumerate(found[:cut]):
            if r:
                seen += 1
                total += seen / (p + 1)
        if family == "gm_map":
            return _log_floor(_div(total, R, und))
        if family == "yaap":  # Robertson's yet another AP (trec_eval m_yaap.c)
            return math.log((1 + total) / (1 + R - total))
        return _div(total, R if family == "ap" else seen if family == "ap_found" else min(R, k), und)
    signed = conv.get("negative_grades") == "gain"

    def gain_of(grade):  # a judged item's gain: binary (the relevance threshold), or graded
        return (1.0 if _is_rel(grade, conv) else 0.0) if gain == "binary" else _gain(grade, gain, signed)

    if family == "rbp":  # beta carries p; binary by default, graded with a gain
        if gain in (None, "binary"):
            return (1 - beta) * sum(beta**p for p, r in enumerate(ranked[:cut]) if r)
        return (1 - beta) * sum(beta**p * (gain_of(g) if j else 0.0) for p, (_, g, _, j) in enumerate(triples[:cut]))
    if family == "rbp_resid":  # trec_eval's m_rbp_resid.c: no judgment or a negative grade; 0 if none is
        unknown = [not t[3] or t[1] < 0 for t in triples]
        if not any(unknown):
            return 0.0
        return beta**n + (1 - beta) * sum(beta**p for p, u in enumerate(unknown) if u)
    if family == "rbp_residual":  # Moffat & Zobel 2008: unjudged ranks of the top k, and every rank past it
        depth = min(cut, n)
        unjudged = [not t[3] for t in triples][:depth]
        return (1 - beta) * sum(beta**p for p, u in enumerate(unjudged) if u) + beta**depth
    if family == "rbp_weighted":  # LensKit's RBP(weight_field=...): rank weights, normalised over the list
        if R == 0:
            return und
        depth = min(k, n)
        return _div(sum(beta[i] for i in range(depth) if ranked[i]), sum(beta[:depth]), und)
    if family == "rbp_trec":  # trec_eval's m_rbp.c: the grades over the query's largest judged grade when above 1
        top = max([g for g in judged if g >= 0], default=0)
        return (1 - beta) * sum(beta**p * (max(g, 0) if j else 0) for p, (_, g, _, j) in enumerate(triples)) / max(top, 1)
    if family == "ideal_dcg":  # the ideal order of the positive gains (trec_eval), every judged gain when signed
        best = sorted((x for x in (gain_of(g) for g in judged) if x > 0 or signed), reverse=True)
        return _dcg(best, len(best) if k is None else k, conv)
    if family == "ndcg_p":  # trec_eval's m_ndcg_p.c: Jarvelin & Kekalainen's discount, 0 without a relevant retrieved
        jk = {**conv, "discount": "lenskit"}
        value = _dcg([gain_of(g) if j else 0.0 for _, g, _, j in triples], n, jk)
        best = sorted((x for x in (gain_of(g) for g in judged) if x > 0 or signed), reverse=True)
        ideal = _dcg(best, len(best), jk)
        if ideal == 0:
            return und
        return value / ideal if sum(ranked) else 0.0
    if family in ("dcg", "ndcg"):  # a candidate without a judgment gains nothing, whatever the gain map
        value = _dcg([gain_of(g) if j else 0.0 for _, g, _, j in triples], cut, conv)
        if family == "dcg":
            return value
        # the ideal ranks the positive gains (trec_eval), or every judged item's gain (torchmetrics)
        best = sorted((x for x in (gain_of(g) for g in judged) if x > 0 or signed), reverse=True)
        ideal = _dcg(best, len(best) if k is None else k, conv)
        return _div(value, ideal, und)
    hits_all = sum(ranked)  # relevant among the n: the set measures
    if family == "num_ret":
        return n
    if family == "num_rel":
        return R
    if family == "num_rel_ret":
        return hits_all
    if family == "num_q":
        return 1.0
    if family == "set_precision":
        return _div(hits_all, n, und)
    if family == "set_recall":
        return _div(hits_all, R, und)
    if family == "set_f":
        b2 = (beta if beta is not None else 1.0) ** 2
        return _div((1 + b2) * hits_all, b2 * R + n, und)
    if family == "set_ap":
        return _div(hits_all * hits_all, n * R, und)
    if family == "set_relative_precision":
        return _div(hits_all, min(n, R), und)
    if family == "utility":  # beta carries (a, b, c, d, docs); trec_eval's default 1, -1, 0, 0
        a, b, c, d, docs = beta or (1.0, -1.0, 0.0, 0.0, 0.0)
        return a * hits_all + b * (n - hits_all) + c * (R - hits_all) + d * (docs - n - R + hits_all)
    N = n - hits_all
    shrink = conv["short_lists"] == "shrink"
    if family == "r_precision":
        hits = sum(ranked[:R])
        return _div(hits, min(R, n) if shrink else R, und)
    if family == "hit_rate":
        return 1.0 if sum(ranked[:k]) >= 1 else 0.0
    h = sum(found[:k])
    kk = min(k, n)
    den = kk if shrink else k
    if family == "precision":
        return _div(h, den, und)
    if family == "recall":
        return _div(h, R, und)
    if family == "recall_capped":
        return _div(h, min(R, k), und)
    if family in ("f1", "fbeta"):
        b2 = 1.0 if family == "f1" else beta**2
        return _div((1 + b2) * h, b2 * R + den, und)
    if family == "specificity":
        return _div(N - (kk - h), N, und)
    if family == "fallout":
        return _div(kk - h, N, und)
    if family == "tp":
        return h
    if family == "fp":
        return kk - h
    if family == "fn":
        return R - h
    if family == "tn":
        return N - (kk - h)
    raise ValueError(family)


#: cwl_eval's measures: each list padded with gain 0 to, and cut at, this many ranks.
CWL_DEPTH = 1000
CWL = {"insq", "sdcg", "bpm", "inst", "nerr8", "nerr9", "nerr10", "nerr11", "tbg", "u_measure", "npv", "bpm_dynamic",
       "ift_goal", "ift_rate", "ift", "trap"}


def _cwl(family, k, params, triples, judged=()):
    """cwl_eval's columns of a list: the gains (clipped, scaled, 0 without a judgment) padded to 1000
    ranks, the continuation probabilities C of each measure (cwl/ruler/measures), then W_i =
    prod_{j<i} C_j / sum_l prod_{j<l} C_j, L_i = prod_{j<i} C_j (1 - C_i) and the column, term by
    term. TrAP's R: the judged items of positive gain."""
    low, high = params.get("min_rel", 0.0), params["max_rel"]

    def scaled(g):
        return (min(max(max(g, 0), low), high) - low) / (high - low)

    gains = [scaled(g) if j else 0.0 for _, g, _, j in triples]
    total = sum(1 for g in judged if scaled(g) > 0)
    rest = tuple(sorted((n, v) for n, v in params.items() if n not in ("min_rel", "max_rel", "value")))
    return _cwl_of_gains(family, k, rest, tuple(gains), params.get("value", "eu"), total)


@functools.lru_cache(maxsize=100_000)  # the orders of a tie group often give the same gains
def _cwl_of_gains(family, k, rest, gains, column="eu", total=0):
    params = dict(rest)
    T, p = params.get("T", 1.0), params.get("p", 0.9)
    gains = (list(gains) + [0.0] * CWL_DEPTH)[:CWL_DEPTH]
    D = len(gains)
    weights = None
    if family in ("tbg", "u_measure", "trap"):  # cwl_eval gives W; C follows from it, 0 at the last rank
        if family == "tbg":
            weights = [2.0 ** (-i / params.get("H", 224.0)) for i in range(D)]
        elif family == "u_measure":
            weights = [max(0.0, 1 - i / params.get("L", 1000.0)) for i in range(D - 1)] + [0.0]
        else:
            seen, weights, leading = 0.0, [], True
            for i, g in enumerate(gains):
                seen += g
                leading = leading and seen == 0 and i < D - 1
                weights.append((1.0 if leading else seen) / (i + 1) / (total if total > 0 else 1))
        if family != "trap":
            weights = [w / sum(weights) for w in weights]
        cont = [weights[i + 1] / weights[i] if weights[i] > 0 else 0.0 for i in range(D - 1)] + [0.0]
    else:
        cont, seen = [], 0.0
        goal = params.get("T", 1.0)
        bpmd_on = True
        for i, g in enumerate(gains, start=1):
            seen += g
            if family == "insq":
                c = ((i + 2 * T - 1) / (i + 2 * T)) ** 2
            elif family == "sdcg":
                c = math.log2(i + 1) / math.log2(i + 2) if i < k else 0.0
            elif family == "bpm":
                c = 1.0 if seen < T and i < k else 0.0
            elif family == "bpm_dynamic":  # cwl_eval's while loop: stops at the first rank that fails
                bpmd_on = bpmd_on and seen < goal
                c = 1.0 if bpmd_on and i < k else 0.0
                goal += params["hb"] * (g - params["gain_med"])
            elif family == "inst":
                t_i = T - seen
                c = ((i + T + t_i - 1) / (i + T + t_i)) ** 2
            elif family == "nerr8":
                c = 1 - g if i < k else 0.0
            elif family == "nerr9":
                c = i / (i + 1) * (1 - g) if i < k else 0.0
            elif family == "nerr10":
                c = p * (1 - g)
            elif family == "nerr11":
                c = ((i + 2 * T - 1) / (i + 2 * T)) ** 2 * (1 - g)
            elif family == "npv":
                c = 1 / (1 + params["rate"])
            else:  # the information foraging measures
                c = 1.0
                if family in ("ift_goal", "ift"):
                    x = (T - seen) * params["R1"]
                    c *= 1 - 1 / (1 + params["b1"] * math.exp(x)) if x < 700 else 1.0
                if family in ("ift_rate", "ift"):
                    x = (params["A"] - seen / i) * params["R2"]
                    c *= 1 / (1 + params["b2"] * math.exp(x)) if x < 700 else 0.0
            cont.append(c)
    reach, reaches = 1.0, []
    for c in cont:
        reaches.append(reach)
        reach *= c
    if weights is None:
        weights = [r / sum(reaches) for r in reaches]
    if column == "eu":
        return sum(w * g for w, g in zip(weights, gains))
    if column == "ec":
        return sum(weights)
    if column == "ed":
        return 1 / weights[0]
    stops = [r * (1 - c) for r, c in zip(reaches, cont)]
    if column == "etu":
        return sum(s_ * sum(gains[: i + 1]) for i, s_ in enumerate(stops))
    return sum(s_ * (i + 1) for i, s_ in enumerate(stops))  # etc


def _compat(triples, R, conv, judged, p, normalize, und):
    """Clarke et al.'s compatibility as rank-biased overlap (ir_measures' compat_provider): the ideal
    ranks the relevant items by grade, equal grades in the list's order, the items the list misses
    after those it has; the overlap of each pair of prefixes is counted item by item."""
    if R == 0:
        return und
    listed = [(("listed", i), g) for i, (r, g, _, _) in enumerate(triples) if r]
    missed = sorted(judged_grade for judged_grade in judged if _is_rel(judged_grade, conv))
    for _, g in listed:
        missed.remove(g)
    entries = [(-g, 0, i, item) for i, (item, g) in enumerate(listed)]
    entries += [(-g, 1, i, ("missed", i)) for i, g in enumerate(missed)]
    ideal = [item for *_, item in sorted(entries)]
    ranking = [("listed", i) for i in range(len(triples))]

    def rbo(a, b):
        depth = max(len(ranking), len(ideal))
        score = norm = 0.0
        for d in range(1, depth + 1):
            score += p ** (d - 1) * len(set(a[:d]) & set(b[:d])) / d
            norm += p ** (d - 1)
        return score / norm

    value = rbo(ranking, ideal)
    return value / rbo(ideal, ideal) if normalize else value


def _is_rel(grade, conv) -> bool:
    return grade > 0 if conv["threshold"] is None else grade >= conv["threshold"]


def evaluate_reference(rows, metrics, conv, models, judgments=None):
    """rows: list of dicts with query, grade, item, one score per model and (optionally) judged.

    ``judgments``: {query: [grade of every judged item]} when judgments are kept apart from the
    rows (then R counts them, and only the queries they list are evaluated); by default every row
    is judged.

    Returns (per_query, summary): per_query maps (model, query) to {metric: value}; summary maps
    model to {metric: mean}. ``metrics`` are (name, family, k, beta[, gain]) tuples.
    """
    threshold = conv["threshold"]
    by_query = OrderedDict()
    for r in rows:
        by_query.setdefault(r["query"], []).append(r)
    per_query = {}
    if judgments is not None:
        by_query = OrderedDict((q, by_query.get(q, [])) for q in judgments)
    for model in models:
        for q, cands in by_query.items():
            # an unjudged candidate (its filler grade 0) is never relevant, whatever the threshold (trec_eval)
            rel = [c.get("judged", True) and ((c["grade"] > 0) if threshold is None else (c["grade"] >= threshold))
                   for c in cands]
            grades = [c["grade"] for c in cands] if judgments is None else list(judgments[q])
            R = sum(rel) if judgments is None else sum(1 for g in grades if _is_rel(g, conv))
            if R == 0:
                if conv["empty_queries"] == "skip":
                    continue
                if conv["empty_queries"] == "error":
                    raise ValueError("empty query")
            scores = [c[model] for c in cands]
            items = [c.get("item") for c in cands]
            lists = ranked_lists(scores, rel, items, conv, [c["grade"] for c in cands],
                                 [c.get("judged", True) for c in cands])
            values = {}
            for name, family, k, beta, *gain in metrics:
                vals = [metric_on_list(family, k, beta, lst, R, conv, grades, gain[0] if gain else None)
                        for lst in lists]
                values[name] = sum(vals) / len(vals)
            per_query[(model, q)] = values
    summary = {}
    for model in models:
        summary[model] = {}
        for name, *_ in metrics:
            vals = [v[name] for (m, _), v in per_query.items() if m == model and not math.isnan(v[name])]
            summary[model][name] = sum(vals) / len(vals) if vals else math.nan
    return per_query, summary


def beyond_reference(rows, models, conv, k, popularity=None, similarity=None, catalog=None):
    """Coverage, novelty, popularity, Gini and diversity of each model's top k, from explicit lists.

    Each evaluated query's top k is taken from every equally likely order of its candidates
    (:func:`ranked_orders`); a per-query value is the plain mean over those orders. Coverage is the
    mean, over every combination of one order per query, of the number of distinct items shown
    (when there are at most 4,000 combinations; otherwise, by the independence of the queries'
    orders, ``sum_i 1 - prod_q P(i not in top k of q)``). Gini is over the mean exposures.
    Popularity by default: the share of the queries with a relevant candidate in which the item
    is relevant (RecTools' MeanInvUserFreq; an item relevant nowhere counts as relevant once).

    Returns {model: {"coverage": ..., "novelty": ..., "popularity": ..., "gini": ..., "diversity": ...}}.
    """
    by_query = OrderedDict()
    for r in rows:
        by_query.setdefault(r["query"], []).append(r)
    relevant_pairs = {(r["query"], r["item"]) for r in rows if _is_rel(r["grade"], conv)}
    n_rel_queries = len({q for q, _ in relevant_pairs})
    if popularity is None:
        counts = {}
        for _, item in relevant_pairs:
            counts[item] = counts.get(item, 0) + 1
        pop = {i: c / n_rel_queries for i, c in counts.items()}
        cold = 1 / n_rel_queries if n_rel_queries else math.nan
    else:
        pop, cold = dict(popularity), math.nan
    items_all = {r["item"] for r in rows}
    size = len(items_all) if catalog is None else (catalog if isinstance(catalog, int) else len(set(catalog)))
    out = {}
    for model in models:
        tops_of_query = []  # per evaluated query: the list of its top k, one per order
        for cands in by_query.values():
            rel = [_is_rel(c["grade"], conv) for c in cands]
            if sum(rel) == 0 and conv["empty_queries"] == "skip":
                continue
            orders = ranked_orders([c[model] for c in cands], rel, [c["item"] for c in cands], conv,
                                   [c["grade"] for c in cands])
            tops_of_query.append([[cands[i]["item"] for i in order[:k]] for order in orders])
        nov, arp, ild = [], [], []
        exposure = {}
        for tops in tops_of_query:
            if not tops[0]:
                continue  # nothing above score_threshold: no list
            for top in tops:
                for i in top:
                    exposure[i] = exposure.get(i, 0.0) + 1 / len(tops)
            nov.append(sum(sum(-math.log2(pop.get(i, cold)) for i in top) / len(top) for top in tops) / len(tops))
            arp.append(sum(sum(pop.get(i, 0.0) for i in top) / len(top) for top in tops) / len(tops))
            if similarity is not None and len(tops[0]) >= 2:
                per_order = []
                for top in tops:
                    pairs = list(itertools.combinations(top, 2))
                    per_order.append(sum(1 - similarity(a, b) for a, b in pairs) / len(pairs))
                ild.append(sum(per_order) / len(per_order))
        combos = math.prod(len(t) for t in tops_of_query)
        if combos <= 4000:
            shown = [len(set().union(*map(set, choice))) for choice in itertools.product(*tops_of_query)]
            covered = sum(shown) / len(shown)
        else:
            covered = 0.0
            for i in items_all | set(exposure):
                missed = 1.0
                for tops in tops_of_query:
                    missed *= sum(i not in top for top in tops) / len(tops)
                covered += 1 - missed
        x = sorted(list(exposure.values()) + [0.0] * (size - len(exposure)))
        total = sum(x)
        gini = (sum((2 * j - size - 1) * v for j, v in enumerate(x, start=1)) / (size * total)) if total > 0 else math.nan
        out[model] = {"coverage": covered / size,
                      "novelty": sum(nov) / len(nov) if nov else math.nan,
                      "popularity": sum(arp) / len(arp) if arp else math.nan,
                      "gini": gini,
                      "diversity": sum(ild) / len(ild) if ild else math.nan}
    return out


def _popularity_reference(rows, conv, popularity=None, history=None):
    """(item -> share, the share of a cold item for novelty): given, from ``history`` (users of the
    item / users of history), or from the relevant rows (queries where the item is relevant /
    queries with a relevant row)."""
    if popularity is not None:
        return dict(popularity), math.nan
    if history is not None:
        users = {q for q, _ in history}
        counts = {}
        for _, i in set(history):
            counts[i] = counts.get(i, 0) + 1
        return {i: c / len(users) for i, c in counts.items()}, (1 / len(users) if users else math.nan)
    pairs = {(r["query"], r["item"]) for r in rows if _is_rel(r["grade"], conv)}
    n = len({q for q, _ in pairs})
    counts = {}
    for _, i in pairs:
        counts[i] = counts.get(i, 0) + 1
    return {i: c / n for i, c in counts.items()}, (1 / n if n else math.nan)


def shown_items_reference(rows, models, conv, ks):
    """The items some model shows in a top k (k of ``ks``) of an evaluated query, under some order of
    its tied candidates (those with a chance of being there), from the orders of :func:`ranked_orders`."""
    by_query = OrderedDict()
    for r in rows:
        by_query.setdefault(r["query"], []).append(r)
    shown = set()
    for model in models:
        for cands in by_query.values():
            rel = [_is_rel(c["grade"], conv) for c in cands]
            if sum(rel) == 0 and conv["empty_queries"] == "skip":
                continue
            for order in ranked_orders([c[model] for c in cands], rel, [c["item"] for c in cands], conv,
                                       [c["grade"] for c in cands]):
                shown |= {cands[i]["item"] for k in ks for i in order[:k]}
    return shown


def beyond_lists_reference(rows, models, conv, metrics, *, popularity=None, similarity=None, catalog=None,
                           categories=None, history=None, baseline=None):
    """Every beyond-accuracy family from explicit lists, by its peer's definition written out.

    ``metrics``: (label, family, k, params dict). Each evaluated query's top k is taken from every
    equally likely order of its candidates (:func:`ranked_orders`); a per-query value is the plain
    mean over those orders (over the pairs of orders of the model and the baseline for
    unexpectedness). Catalogue-level values: exposures are the mean counts over the orders;
    personalization is the mean over every combination of one order per query (at most 4,000 of
    them; otherwise by the independence of the queries' orders, ``E[c^2] = E[c]^2 + sum_q p(1-p)``).
    ``history``: a list of (query, item) pairs.

    Returns {model: ({query: {label: value}}, {label: value})}.
    """
    by_query = OrderedDict()
    for r in rows:
        by_query.setdefault(r["query"], []).append(r)
    pop, cold = _popularity_reference(rows, conv, popularity, history)
    hist = {}
    for q, i in set(history or []):
        hist.setdefault(q, set()).add(i)
    size = (len({r["item"] for r in rows}) if catalog is None
            else (catalog if isinstance(catalog, int) else len(set(catalog))))
    shares = sorted(pop.items(), key=lambda kv: (kv[1], kv[0]))
    by_share = sorted(set(pop.values()), reverse=True)
    dense = {i: by_share.index(s) + 1 for i, s in pop.items()}
    ascending = sorted(pop.values())
    quantile = {i: (sum(1 for v in ascending if v < s) + (sum(1 for v in ascending if v == s) + 1) / 2) / len(pop)
                for i, s in pop.items()}

    def tops(cands, model, k):
        rel = [_is_rel(c["grade"], conv) for c in cands]
        orders = ranked_orders([c[model] for c in cands], rel, [c["item"] for c in cands], conv,
                               [c["grade"] for c in cands])
        return orders, rel

    def value(family, k, params, cands, order, rel, base_order, q):
        top = order[:k]
        items = [cands[i]["item"] for i in top]
        L = len(top)
        R = sum(rel)
        undefined = conv["undefined"]
        if family == "novelty":
            if params.get("variant") == "replay":
                if q not in hist:
                    return math.nan
                return 1.0 if L == 0 else 1 - len(set(items) & hist[q]) / L
            return sum(-math.log2(pop.get(i, cold)) for i in items) / L if L else math.nan
        if family == "popularity":
            return sum(pop.get(i, 0.0) for i in items) / L if L else math.nan
        if family == "tail":
            cut = max(int(len(shares) * params.get("share", 0.1)), 1)
            tail = {i for i, _ in shares[:cut]}
            return sum(i in tail for i in items) / L if L else math.nan
        if family == "mean_pop_rank":
            return sum(quantile.get(i, 0.0) for i in items) / L if L else math.nan
        if family == "diversity":
            if L < 2:
                return math.nan
            pairs = list(itertools.combinations(items, 2))
            return sum(1 - similarity(a, b) for a, b in pairs) / len(pairs)
        if family == "category_diversity":
            return len({categories[i] for i in items}) / k if L else math.nan
        if family == "unexpectedness":
            base = [cands[i]["item"] for i in base_order[:k]]
            if not base or not items:
                return 0.0
            return 1 - len(set(items) & set(base)) / k
        if family == "serendipity":
            variant = params.get("variant", "rectools")
            if variant == "rectools":
                if not L:
                    return math.nan
                total = 0.0
                for r, i in enumerate(top, start=1):
                    item = cands[i]["item"]
                    pu = (size + 1 - dense[item]) / size if item in dense else 0.0
                    total += rel[i] * max((size + 1 - r) / size - pu, 0.0)
                return total / L
            if q not in hist:
                return math.nan
            h = sorted(hist[q])
            if variant == "recommenders":
                if not L:
                    return math.nan
                return sum(rel[i] * (1 - sum(similarity(x, cands[i]["item"]) for x in h) / len(h)) for i in top) / L
            shown = [cands[i]["item"] for i in top if rel[i]]
            if not shown:
                return math.nan
            return 1 - sum(similarity(x, j) for x in h for j in shown) / len(h)
        if family in ("pauc", "pap"):
            if R == 0:
                return undefined
            f = 0
            seen = 0
            total = 0.0
            for i in order:
                if rel[i]:
                    if f < k and (family == "pauc" or seen < k):
                        total += k - f
                    seen += 1
                else:
                    f += 1
            return total / (k * R) if family == "pauc" else total / (k * min(R, k))
        if family == "rbp_norm":
            p = params.get("p", 0.85)
            best = min(R, L)
            if R == 0 or best == 0:
                return undefined
            return sum(p ** r for r, i in enumerate(top) if rel[i]) / sum(p ** r for r in range(best))
        raise ValueError(family)

    out = {}
    for model in models:
        per_query = {}
        lists_of_query = []
        for q, cands in by_query.items():
            orders, rel = tops(cands, model, 10**9)
            if sum(rel) == 0 and conv["empty_queries"] == "skip":
                continue
            base_orders = tops(cands, baseline, 10**9)[0] if baseline is not None else [[]]
            values = {}
            for label, family, k, params in metrics:
                if family in ("coverage", "gini", "entropy", "personalization"):
                    continue
                if family == "unexpectedness":
                    got = [value(family, k, params, cands, o, rel, b, q) for o in orders for b in base_orders]
                else:
                    got = [value(family, k, params, cands, o, rel, None, q) for o in orders]
                values[label] = sum(got) / len(got)
            per_query[q] = values
            lists_of_query.append((cands, orders))
        catalog_values = {}
        for label, family, k, params in metrics:
            if family not in ("coverage", "gini", "entropy", "personalization"):
                continue
            tops_of_query = [[[cands[i]["item"] for i in o[:k]] for o in orders] for cands, orders in lists_of_query]
            exposure = {}
            for tq in tops_of_query:
                for t in tq:
                    for i in t:
                        exposure[i] = exposure.get(i, 0.0) + 1 / len(tq)
            total = sum(exposure.values())
            if family == "entropy":
                s = [x / total for x in exposure.values() if x > 0] if total else []
                if not s:
                    catalog_values[label] = math.nan
                elif params.get("variant") == "recbole":
                    catalog_values[label] = -sum(x * math.log(x) for x in s) / len(s)
                else:
                    catalog_values[label] = -sum(x * math.log2(x) for x in s)
            elif family == "gini":
                x = sorted(list(exposure.values()) + [0.0] * (size - len(exposure)))
                catalog_values[label] = (sum((2 * j - size - 1) * v for j, v in enumerate(x, 1)) / (size * total)
                                         if total > 0 else math.nan)
            elif family == "coverage":
                covered = 0.0
                for i in exposure:
                    missed = 1.0
                    for tq in tops_of_query:
                        missed *= sum(i not in t for t in tq) / len(tq)
                    covered += 1 - missed
                catalog_values[label] = covered / size
            else:  # personalization, Evidently's formula on each combination of one order per query
                nonempty = [tq for tq in tops_of_query if tq[0]]
                U = len(nonempty)
                if U < 2:
                    catalog_values[label] = math.nan
                    continue
                if math.prod(len(tq) for tq in nonempty) <= 4000:
                    got = []
                    for choice in itertools.product(*nonempty):
                        counts = {}
                        for t in choice:
                            for i in t:
                                counts[i] = counts.get(i, 0) + 1
                        got.append(1 - (sum(c * c for c in counts.values()) - U * k) / (k * U * (U - 1)))
                    catalog_values[label] = sum(got) / len(got)
                else:
                    squares = 0.0
                    for i in exposure:
                        ps = [sum(i in t for t in tq) / len(tq) for tq in nonempty]
                        squares += sum(ps) ** 2 + sum(p * (1 - p) for p in ps)
                    catalog_values[label] = 1 - (squares - U * k) / (k * U * (U - 1))
        out[model] = (per_query, catalog_values)
    return out
