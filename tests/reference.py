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
COUNTS_FOUND = {"precision", "recall", "recall_capped", "f1", "fbeta", "tp", "fn", "rr", "ap", "ap_capped", "ap_found"}


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
        # an empty list at a level counting 0 relevant items: the largest precision over no rank
        if not ranked and (family == "iprec_avg" or _c_round(beta * R) == 0):
            return und
        if family == "iprec":  # beta carries the recall level
            return _iprec(ranked, R, beta)
        return sum(_iprec(ranked, R, x) for x in reversed(ELEVEN)) / 11
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
        return _cwl(family, k, beta, triples)
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
    if family in ("ap", "ap_capped", "ap_found"):
        total, seen = 0.0, 0
        for p, r in enumerate(found[:cut]):
            if r:
                seen += 1
                total += seen / (p + 1)
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
CWL = {"insq", "sdcg", "bpm", "inst", "nerr8", "nerr9", "nerr10", "nerr11"}


def _cwl(family, k, params, triples):
    """cwl_eval's expected utility per item: the gains (clipped, scaled, 0 without a judgment) padded
    to 1000 ranks, the continuation probabilities C of each measure (cwl/ruler/measures), then
    W_i = prod_{j<i} C_j / sum_l prod_{j<l} C_j and sum_i W_i g_i, term by term."""
    low, high = params.get("min_rel", 0.0), params["max_rel"]
    gains = [(min(max(max(g, 0), low), high) - low) / (high - low) if j else 0.0 for _, g, _, j in triples]
    return _cwl_of_gains(family, k, params.get("T", 1.0), params.get("p", 0.9), tuple(gains))


@functools.lru_cache(maxsize=100_000)  # the orders of a tie group often give the same gains
def _cwl_of_gains(family, k, T, p, gains):
    gains = (list(gains) + [0.0] * CWL_DEPTH)[:CWL_DEPTH]
    cont, seen = [], 0.0
    for i, g in enumerate(gains, start=1):
        seen += g
        if family == "insq":
            c = ((i + 2 * T - 1) / (i + 2 * T)) ** 2
        elif family == "sdcg":
            c = math.log2(i + 1) / math.log2(i + 2) if i < k else 0.0
        elif family == "bpm":
            c = 1.0 if seen < T and i < k else 0.0
        elif family == "inst":
            t_i = T - seen
            c = ((i + T + t_i - 1) / (i + T + t_i)) ** 2
        elif family == "nerr8":
            c = 1 - g if i < k else 0.0
        elif family == "nerr9":
            c = i / (i + 1) * (1 - g) if i < k else 0.0
        elif family == "nerr10":
            c = p * (1 - g)
        else:  # nerr11
            c = ((i + 2 * T - 1) / (i + 2 * T)) ** 2 * (1 - g)
        cont.append(c)
    reach, total, value = 1.0, 0.0, 0.0
    for i, g in enumerate(gains):
        total += reach
        value += reach * g
        reach *= cont[i]
    return value / total


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
            rel = [(c["grade"] > 0) if threshold is None else (c["grade"] >= threshold) for c in cands]
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
