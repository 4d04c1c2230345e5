"""Slow, obviously correct definitions, written apart from the engine.

Each metric is computed from an explicit ranked list. ``ties="expected"`` is the plain mean of the
metric over every order of the tied candidates (all permutations of every tie group), so keep
tie groups small.
"""

from __future__ import annotations

import itertools
import math
from collections import OrderedDict


def ranked_lists(scores, rel, items, ties, score_threshold=None, grades=None):
    """Return the ranked lists (one per equally likely order) of (relevant, grade) pairs."""
    grades = grades if grades is not None else [1.0 if x else 0.0 for x in rel]
    idx = [i for i in range(len(scores)) if score_threshold is None or scores[i] >= score_threshold]
    if ties == "expected":
        groups = {}
        for i in idx:
            groups.setdefault(scores[i], []).append(i)
        levels = [groups[s] for s in sorted(groups, reverse=True)]
        out = []
        for combo in itertools.product(*[list(itertools.permutations(g)) for g in levels]):
            order = [i for group in combo for i in group]
            out.append([(rel[i], grades[i]) for i in order])
        return out
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
    else:
        raise ValueError(ties)
    return [[(rel[i], grades[i]) for i in order]]


def _div(a, b, undefined):
    return a / b if b != 0 else undefined


def _gain(grade, mode):
    if grade <= 0:
        return 0.0
    return 2.0**grade - 1.0 if mode == "exp" else float(grade)


def _dcg(gains, k):
    return sum(g / math.log2(p + 2) for p, g in enumerate(gains[:k]))


def metric_on_list(family, k, beta, pairs, R, conv, judged=(), gain=None):
    """One metric on one fully ordered list of (relevant, grade) pairs.

    ``judged``: every judged grade of the query (for the ideal DCG).
    """
    ranked = [bool(r) for r, _ in pairs]
    n = len(ranked)
    cut = n if k is None else k
    if family == "rr":
        first = next((p for p, r in enumerate(ranked) if r), None)
        return 1.0 / (first + 1) if first is not None and first < cut else 0.0
    if family == "ap":
        total, seen = 0.0, 0
        for p, r in enumerate(ranked[:cut]):
            if r:
                seen += 1
                total += seen / (p + 1)
        return _div(total, R, conv["undefined"])
    if family in ("dcg", "ndcg"):
        value = _dcg([_gain(g, gain) for _, g in pairs], cut)
        if family == "dcg":
            return value
        ideal = _dcg(sorted((_gain(g, gain) for g in judged), reverse=True), len(judged) if k is None else k)
        return _div(value, ideal, conv["undefined"])
    if family == "num_ret":
        return n
    if family == "num_rel":
        return R
    if family == "num_rel_ret":
        return sum(ranked)
    N = n - sum(ranked)
    und = conv["undefined"]
    shrink = conv["short_lists"] == "shrink"
    if family == "r_precision":
        hits = sum(ranked[:R])
        return _div(hits, min(R, n) if shrink else R, und)
    h = sum(ranked[:k])
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
    if family == "hit_rate":
        return 1.0 if h >= 1 else 0.0
    if family == "tp":
        return h
    if family == "fp":
        return kk - h
    if family == "fn":
        return R - h
    if family == "tn":
        return N - (kk - h)
    raise ValueError(family)


def evaluate_reference(rows, metrics, conv, models):
    """rows: list of dicts with query, grade, item and one score per model.

    Returns (per_query, summary): per_query maps (model, query) to {metric: value}; summary maps
    model to {metric: mean}. ``metrics`` are (name, family, k, beta) tuples.
    """
    threshold = conv["threshold"]
    by_query = OrderedDict()
    for r in rows:
        by_query.setdefault(r["query"], []).append(r)
    per_query = {}
    for model in models:
        for q, cands in by_query.items():
            rel = [(c["grade"] > 0) if threshold is None else (c["grade"] >= threshold) for c in cands]
            R = sum(rel)
            if R == 0:
                if conv["empty_queries"] == "skip":
                    continue
                if conv["empty_queries"] == "error":
                    raise ValueError("empty query")
            scores = [c[model] for c in cands]
            items = [c.get("item") for c in cands]
            grades = [c["grade"] for c in cands]
            lists = ranked_lists(scores, rel, items, conv["ties"], conv["score_threshold"], grades)
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
