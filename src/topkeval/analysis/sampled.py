"""Sampled evaluation of score matrices, reproduced exactly and corrected to the full catalogue.

The protocol (:func:`topkeval.evaluate_sampled`): every held-out relevant item of a user gets
``m`` negatives drawn from the user's **pool**, the items that are neither excluded (``exclude``,
the training interactions) nor relevant held-out items of the user; non-relevant held-out items (a
grade below the relevance threshold) stay in the pool, as they are negatives of the full catalogue
too. ``N_u``, the pool's size, is the user's number of negatives in the full catalogue.

Draws: with replacement, as RecBole's sampler (which redraws an item the user has interacted with,
so that each draw is uniform over the pool), ``uniform`` or by ``popularity`` (an item's weight is
the number of users whose ``exclude`` holds it: its training frequency; an item no user trained on is
never drawn). The order is fixed: ``numpy.random.default_rng(seed).random((P, m))``, one number per
draw, the held-out items in (user, item) order, each number ``r`` mapped to the item at ``floor(r
W)`` of the user's pool laid out in item order, each item taking as many places as its weight (W
the pool's total weight; 1 per item under ``uniform``). Draws depend on the held-out items, the
exclusions, m, the sampling and the seed only: every model is ranked against the same negatives.

Estimators, each a column named after what it estimates:

* ``metric[sampled:uni100]`` (``pop100`` for popularity; the number is m): the metric on each user's
  **sampled list**, its held-out items and the distinct negatives drawn for any of them, ranked by
  the model with topkeval's conventions. This is RecBole's ``uni100`` / ``pop100`` evaluation
  (RecBole scatters the scores of the positives and of every draw into a row of -inf, one cell per
  item, and ranks that row) and, with one held-out item per user, the leave-one-out HR@k / NDCG@k
  of the NCF papers (He et al. 2017: ``hit_rate@10`` and ``ndcg@10`` here).
* ``metric[corrected:...]``: an estimate of the full-catalogue metric. A held-out item with ``a``
  held-out items of its user above it (known: the model scored them) and ``b`` of the ``N_u``
  negatives above it has full rank ``a + b + 1``; each metric handled here is a sum over held-out
  items of a function of that rank (``recall@k = sum 1[rank <= k] / R``, ``ndcg@k = sum gain
  1[rank <= k] / log2(rank + 1) / IDCG``, ...; hit_rate and rr read the top held-out item, a = 0).
  ``b`` is unknown; its own m draws give ``j``, the draws above it, binomial with ``p = b / N_u``
  (exactly, under uniform draws with replacement). :mod:`topkeval.analysis.sampled_ranks` turns j
  into an estimate of each term: ``rescaled`` (``b ~ j N_u / m``), ``bv`` (Krichene & Rendle's
  bias-variance correction; ``corrected``) or ``mle`` (the maximum-likelihood distribution of
  ranks, fitted to the held-out items). Uniform sampling only: under popularity sampling j depends on which items
  are above, not on how many.
* ``metric`` itself: the full catalogue, exactly (:func:`topkeval.evaluate_matrix`).

Every column is per-user values, paired across models by the shared draws: ``compare`` and
``summary_ci`` read them as any other, except that a corrected column gets no interval
(:func:`without_interval`).

Ties: the sampled lists and the full catalogue follow the conventions (``ties="expected"``: the
exact mean over orders). The corrections count a draw as above a held-out item by the same rule;
under ``"expected"`` a tie is settled by one random order of the user's items (seeded: what the
expected value averages over), so a correction estimates the expected full-catalogue value.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import cast

import numpy as np

from ..errors import DataError, ParameterError, show
from ..metrics.names import Metric, labelled_metrics

SAMPLINGS = ("uniform", "popularity")
CORRECTIONS = ("bv", "mle", "rescaled")
ESTIMATORS = ("sampled", "corrected", *CORRECTIONS, "full")
#: the correction "corrected" names: the one that met the validation's criteria best on MovieLens 100k
#: (benchmarks/sampled_bench.py; docs/how-to/sampled.md): within 20% of every model's full HR@10 and
#: NDCG@10 in the leave-one-out split, in the right order in 98% of seeds (the MLE: 82%); 80/20: recall@10
#: within 15%, NDCG@10 24 to 31% low (the MLE: 9 to 19%), both orders right in every seed
RECOMMENDED = "bv"
#: the families the corrections estimate: a sum over held-out items of a function of the full rank
CORRECTABLE = ("recall", "precision", "hit_rate", "ndcg", "rr", "ap", "f1")
#: held-out items per chunk when their draws are compared (bounds the memory of the gathered scores)
CHUNK_CELLS = 1 << 22


@dataclass
class Draws:
    """The negatives of a sampled protocol, the same for every model."""

    users: np.ndarray  # (U,) the users evaluated (with a held-out relevant item), ascending
    pos_query: np.ndarray  # (P,) index into users of each held-out item
    pos_item: np.ndarray  # (P,) item of each held-out item, ascending within its user
    pos_grade: np.ndarray  # (P,)
    negatives: np.ndarray  # (P, m) items drawn for each held-out item
    pool: np.ndarray  # (U,) N_u: the user's negatives
    candidates: np.ndarray  # (U,) the user's candidates in the full catalogue (pool + held-out relevant)
    n_items: int
    seed: int

    @property
    def m(self) -> int:
        return int(self.negatives.shape[1])

    @property
    def R(self) -> np.ndarray:
        return np.bincount(self.pos_query, minlength=len(self.users))


def tag(sampling: str, m: int) -> str:
    """``"sampled:uni100"``: RecBole's name of the protocol."""
    return f"sampled:{'uni' if sampling == 'uniform' else 'pop'}{m}"


def columns(metrics, estimators, sampling: str, m: int) -> tuple[list[str], list[Metric], list[tuple]]:
    """The column labels, their metrics and ``(estimator, base label, base metric)`` of each column:
    per metric (in the order requested) one column per estimator (in the order requested)."""
    labels, parsed = labelled_metrics(metrics)
    for label, metric in zip(labels, parsed):
        if metric.estimate:
            raise ParameterError(f"metrics names the metric itself ({str(metric).split('[')[0]!r}); the estimate "
                                 f"{label!r} is chosen with estimator= ('sampled', 'corrected', ...).")
    out_labels, out_metrics, roles = [], [], []
    for label, metric in zip(labels, parsed):
        for est in estimators:
            if est == "full":
                out_labels.append(label)
                out_metrics.append(metric)
            else:
                name = tag(sampling, m) if est == "sampled" else f"corrected:{RECOMMENDED if est == 'corrected' else est}"
                out_labels.append(f"{label}[{name}]")
                out_metrics.append(replace(metric, estimate=name))
            roles.append((RECOMMENDED if est == "corrected" else est, label, metric))
    if len(set(out_labels)) != len(out_labels):
        dup = next(x for x in out_labels if out_labels.count(x) > 1)
        raise ParameterError(f"estimator= asks for the column {dup!r} twice ('corrected' is "
                             f"'{RECOMMENDED}'): name each estimator once.")
    return out_labels, out_metrics, roles


def check_corrections(roles, conv, sampling: str) -> None:
    """Refuse a correction of a metric or under conventions it does not estimate, saying why."""
    corrected = [(est, label, m) for est, label, m in roles if est in CORRECTIONS]
    if not corrected:
        return
    est, label, _ = corrected[0]
    if sampling != "uniform":
        raise ParameterError(f"The correction {est!r} of {label} reads each held-out item's sampled rank as a binomial "
                             "count of the negatives above it, which holds for uniform draws only: under popularity "
                             "sampling the draws above an item depend on which items are above it, not on how many. "
                             "Use sampling='uniform' for corrected estimates, or estimator=['sampled', 'full'].")
    for _, label, m in corrected:
        if m.family not in CORRECTABLE or m.k is None:
            raise ParameterError(f"{label} has no correction here: the corrections estimate metrics that sum a "
                                 f"function of each held-out item's full rank up to a cutoff ("
                                 f"{', '.join(f + '@k' for f in CORRECTABLE)}); use estimator='sampled' or 'full' for it.")
        extra = [n for n, _ in m.params if n != "gain"]
        if extra:
            raise ParameterError(f"{label}: the corrections take the metric with its conventions, not with its own "
                                 f"{extra[0]}= parameter; drop it, or use estimator='sampled' or 'full'.")
    for setting, default, why in (("score_threshold", None, "removes candidates by score, which the draws cannot see"),
                                  ("nonpositive_scores", "count", "changes what counts as found by the score"),
                                  ("negative_grades", "zero", "gives negative grades a gain")):
        if getattr(conv, setting) != default:
            raise ParameterError(f"The corrections are not defined under {setting}={getattr(conv, setting)!r} (it "
                                 f"{why}): use the default, or estimator=['sampled', 'full'].")
    if conv.ties == "ranx":
        raise ParameterError("The corrections compare each draw with a held-out item by the tie rule; ties='ranx' "
                             "orders a list as a whole (numba's quicksort): use another tie rule, or "
                             "estimator=['sampled', 'full'].")


# ---------------------------------------------------------------------------------------------
# the draws


def draw(prepared, conv, m: int, sampling: str, seed: int, *, smaller_than_pool: bool = True) -> Draws:
    """Draw ``m`` negatives for every held-out relevant item (see the module docstring).
    ``smaller_than_pool``: refuse m not below a user's pool (False: tests of the draws themselves)."""
    rel = prepared.relevant  # CSR of grades, excluded cells already out
    exc = prepared.exclude
    U, I = prepared.shape
    is_rel = conv.is_relevant(rel.data)
    row_of = np.repeat(np.arange(U, dtype=np.int64), np.diff(rel.indptr))
    pos_user, pos_item, pos_grade = row_of[is_rel], rel.indices[is_rel].astype(np.int64), rel.data[is_rel]
    excluded = np.zeros(U, np.int64) if exc is None else np.diff(exc.indptr).astype(np.int64)
    candidates = I - excluded
    users, pos_query = np.unique(pos_user, return_inverse=True)
    if not len(users):
        raise DataError("No user has a held-out relevant item (outside exclude): there is nothing to rank against "
                        "sampled negatives. Check that test holds the held-out interactions (grades > 0, or >= "
                        "the threshold).")
    # the forbidden items of each evaluated user: its exclusions and its relevant held-out items, sorted
    if exc is not None:
        ex_rows = np.repeat(np.arange(U, dtype=np.int64), np.diff(exc.indptr))
        keys = np.concatenate([ex_rows * I + exc.indices.astype(np.int64), pos_user * I + pos_item])
    else:
        keys = pos_user * I + pos_item
    keys = _distinct(keys)  # a relevant item cannot also be excluded (prepare took it out of the relevance)
    keys = keys[np.isin(keys // I, users)]
    f_user = np.searchsorted(users, keys // I)
    f_item = keys % I
    pool = I - np.bincount(f_user, minlength=len(users))
    if sampling == "popularity":
        if exc is None:
            raise ParameterError("sampling='popularity' weighs each item by how many users trained on it, read from "
                                 "exclude= (the training interactions): pass exclude, or sampling='uniform'.")
        weights = np.bincount(exc.indices, minlength=I).astype(np.int64)
    else:
        weights = np.ones(I, np.int64)
    f_weight = weights[f_item]
    starts = np.searchsorted(f_user, np.arange(len(users) + 1))
    f_cum = np.concatenate([[0], np.cumsum(f_weight)])
    mass = int(weights.sum()) - (f_cum[starts[1:]] - f_cum[starts[:-1]])  # the pool's total weight per user
    drawable = pool if sampling == "uniform" else _positive_in_pool(weights, f_user, f_item, len(users))
    short = np.flatnonzero(drawable <= m) if smaller_than_pool else np.flatnonzero(drawable == 0)
    if len(short):
        u = short[0]
        what = "negatives" if sampling == "uniform" else "negatives with a training frequency above 0"
        raise DataError(f"n_negatives={m} is not fewer than the {int(drawable[u]):,} {what} of user "
                        f"{show(users[u])} (items neither excluded nor relevant held-out items; {len(short):,} users "
                        f"have {m} or fewer): sampled evaluation needs a catalogue larger than the sample. Lower "
                        "n_negatives, or evaluate the full catalogue (evaluate_matrix).")
    rng = np.random.default_rng(seed)
    r = rng.random((len(pos_query), m))
    target = np.floor(r * mass[pos_query][:, None]).astype(np.int64)  # the place in the user's pool
    if sampling == "uniform":
        negatives = _uniform_items(target, pos_query, f_user, f_item, starts, I)
    else:
        negatives = _weighted_items(target, pos_query, f_user, f_item, f_cum, starts, weights, I)
    return Draws(users, pos_query, pos_item, pos_grade, negatives, pool.astype(np.int64),
                 candidates[users].astype(np.int64), I, int(seed))


def _distinct(keys: np.ndarray) -> np.ndarray:
    """The distinct values, ascending (a sort: numpy's hash-based unique is slower on these keys)."""
    keys = np.sort(keys)
    return keys[np.concatenate([[True], keys[1:] != keys[:-1]])] if len(keys) else keys


def _positive_in_pool(weights, f_user, f_item, n_users) -> np.ndarray:
    """Per user, the items of its pool with a positive weight."""
    positive = int((weights > 0).sum())
    return positive - np.bincount(f_user, weights=(weights[f_item] > 0).astype(np.float64), minlength=n_users).astype(np.int64)


def _uniform_items(target, pos_query, f_user, f_item, starts, I) -> np.ndarray:
    """The ``target``-th item (0-based) of each user's pool in item order: ``target + #{t: f_t - t <=
    target}`` over the user's sorted forbidden items f_t (t their index among them)."""
    within = np.arange(len(f_item)) - starts[f_user]
    shifted = f_user * (I + 1) + (f_item - within)  # ascending: users in order, f_t - t non-decreasing
    q = pos_query[:, None] * (I + 1) + target
    count = np.searchsorted(shifted, q, side="right") - starts[pos_query][:, None]
    return target + count


def _weighted_items(target, pos_query, f_user, f_item, f_cum, starts, weights, I) -> np.ndarray:
    """The smallest item x whose weight in the user's pool up to x exceeds ``target``: a binary search
    over x, the pool's weight up to x being the catalogue's less the user's forbidden items'."""
    cum = np.concatenate([[0], np.cumsum(weights)])  # cum[x + 1]: weight of items 0..x
    f_key = f_user * I + f_item
    lo = np.zeros(target.shape, np.int64)
    hi = np.full(target.shape, I - 1, np.int64)
    base = starts[pos_query][:, None]
    for _ in range(max(1, int(I - 1).bit_length())):
        mid = (lo + hi) // 2
        at = np.searchsorted(f_key, pos_query[:, None] * I + mid, side="right")
        below = cum[mid + 1] - (f_cum[at] - f_cum[base])
        go_left = below > target
        hi = np.where(go_left, mid, hi)
        lo = np.where(go_left, lo, mid + 1)
    return lo


# ---------------------------------------------------------------------------------------------
# ranks of the held-out items


def _mix(x: np.ndarray) -> np.ndarray:
    """splitmix64's finaliser: a random-looking uint64 of a uint64 (wrapping arithmetic)."""
    x = x.astype(np.uint64, copy=True)
    x ^= x >> np.uint64(30)
    x *= np.uint64(0xBF58476D1CE4E5B9)
    x ^= x >> np.uint64(27)
    x *= np.uint64(0x94D049BB133111EB)
    x ^= x >> np.uint64(31)
    return x


def tie_keys(seed: int, users: np.ndarray, items: np.ndarray, n_items: int) -> np.ndarray:
    """One random key per (user, item), the same wherever the pair appears: under ``ties="expected"``
    the order of tied items (higher key first), uniformly random for each seed."""
    cell = users.astype(np.uint64) * np.uint64(n_items) + items.astype(np.uint64)
    return _mix(cell ^ _mix(np.full(1, seed % (1 << 64), np.uint64)))


def _above(s_other, s_item, other, item, k_other, k_item, ties: str) -> np.ndarray:
    """Whether each other candidate ranks above the held-out item under the tie rule."""
    if ties == "optimistic":
        return s_other > s_item
    if ties == "pessimistic":
        return s_other >= s_item
    tied = s_other == s_item
    if ties == "expected":
        after = k_other > k_item
    elif ties == "item_desc":
        after = other > item
    else:  # "first" (a score matrix's rows come in item order) and "item_asc"
        after = other < item
    return (s_other > s_item) | (tied & after)


@dataclass
class HeldOutRanks:
    """Per held-out item of one model: ``above`` (a), its held-out items above it; ``count`` (j), its
    draws above it."""

    above: np.ndarray
    count: np.ndarray


def held_out_ranks(S, draws: Draws, conv) -> HeldOutRanks:
    """j and a of every held-out item of the model scoring ``S``."""
    from ..backends.matrix import gather

    users = draws.users[draws.pos_query]
    s_pos = _comparable(gather(S, users, draws.pos_item), conv)
    expected = conv.ties == "expected"
    k_pos = tie_keys(draws.seed, users, draws.pos_item, draws.n_items) if expected else None
    item_key = _item_keys(draws.pos_item, conv, draws.n_items)
    # a: the position of each held-out item among its user's, in the order of the rule (as
    # evaluate_matrix: optimistic puts the higher grades of a tie first, pessimistic the lower ones)
    if conv.ties == "expected":
        second = -(k_pos >> np.uint64(11)).astype(np.float64)  # higher key first (53 bits: exact in a float)
    elif conv.ties == "optimistic":
        second = -draws.pos_grade.astype(np.float64)
    elif conv.ties == "pessimistic":
        second = draws.pos_grade.astype(np.float64)
    elif conv.ties == "item_desc":
        second = -item_key.astype(np.float64)
    else:
        second = item_key.astype(np.float64)
    order = np.lexsort((item_key, second, -s_pos, draws.pos_query))
    firsts = np.searchsorted(draws.pos_query[order], draws.pos_query[order], side="left")
    above = np.empty(len(order), np.int64)
    above[order] = np.arange(len(order)) - firsts
    count = np.empty(len(order), np.int64)
    m = draws.m
    step = max(1, CHUNK_CELLS // max(m, 1))
    for a in range(0, len(users), step):
        b = min(len(users), a + step)
        items = draws.negatives[a:b]
        rows = np.repeat(users[a:b], m)
        s_neg = _comparable(gather(S, rows, items.ravel()), conv).reshape(b - a, m)
        k_neg = tie_keys(draws.seed, rows, items.ravel(), draws.n_items).reshape(b - a, m) if expected else None
        up = _above(s_neg, s_pos[a:b, None], _item_keys(items, conv, draws.n_items), item_key[a:b, None], k_neg,
                    None if k_pos is None else k_pos[a:b, None], conv.ties)
        count[a:b] = up.sum(axis=1)
    return HeldOutRanks(above, count)


def _item_keys(items: np.ndarray, conv, n_items: int) -> np.ndarray:
    """Keys that order item ids as the item tie rules compare them: the ids themselves (a score
    matrix's column indices), or, under ``item_order="text"`` (the trec_eval presets), their rank as
    text ("9" > "14" > "10"), as :func:`topkeval.evaluate_matrix` orders them."""
    if conv.item_order != "text" or conv.ties not in ("item_desc", "item_asc"):
        return items
    return _text_ranks(int(n_items))[items]


@functools.lru_cache(maxsize=8)
def _text_ranks(n_items: int) -> np.ndarray:
    from ..inputs.ids import text_rank

    ranks = text_rank(np.arange(n_items, dtype=np.int64), None)
    ranks.setflags(write=False)
    return ranks


def _comparable(values: np.ndarray, conv) -> np.ndarray:
    if not np.isfinite(values).all():
        raise DataError("scores hold NaN or infinite values at held-out items or sampled negatives; every score of a "
                        "candidate must be finite (excluded cells may hold anything).")
    return values.astype(np.float32).astype(np.float64) if conv.score_precision == "float32" else values


# ---------------------------------------------------------------------------------------------
# the corrections


def correction_weights(estimator: str, ranks: list[HeldOutRanks], draws: Draws, depth: int) -> list[np.ndarray]:
    """Per model, ``w[p, b]`` for each held-out item p and rank b < depth (see
    :mod:`topkeval.analysis.sampled_ranks`); zero for the items with ``depth`` or more held-out
    items above them, whose terms are zero whatever their rank."""
    from . import sampled_ranks as sr

    N = draws.pool[draws.pos_query]
    out = []
    for r in ranks:
        w = np.zeros((len(N), depth))
        if estimator == "mle":
            for group in strata(r.above, depth):
                dist = sr.RankDistribution(r.count[group], draws.m,
                                           sr.COMPONENTS if len(group) >= MIXTURE_ITEMS else 1)
                inside = group[r.above[group] < depth]
                w[inside] = dist.weights(r.count[inside], N[inside], depth)
            out.append(w)
            continue
        for n in np.unique(N):
            at = np.flatnonzero((N == n) & (r.above < depth))
            table = (sr.rescaled_weights(int(n), draws.m, depth) if estimator == "rescaled"
                     else sr.bv_weights(int(n), draws.m, depth))
            w[at] = table[r.count[at]]
        out.append(w)
    return out


#: the MLE fits one rank distribution per stratum of held-out items: the items with a held-out
#: items of their user above them, for a = 0, 1, ... in turn, a stratum closed once it holds this many
STRATUM_ITEMS = 100
#: ... and a mixture of up to COMPONENTS betas (by BIC) to a stratum of at least this many items, one beta otherwise
MIXTURE_ITEMS = 300


def strata(above: np.ndarray, depth: int) -> list[np.ndarray]:
    """The strata of held-out items (each fitted on its own) that hold an item with a < depth.

    The items are grouped by a (held-out items of the user above them): a = 0, 1, 2, ... in turn join
    the current stratum, which closes once it holds :data:`STRATUM_ITEMS` items; what remains at the
    deep end joins the last stratum closed. The strata depend on the model's held-out items alone,
    never on ``depth`` (the deepest cutoff asked for): a column's estimate does not depend on which
    other metrics share the call. Only the strata reaching below ``depth`` are returned (the items
    deeper down have a term of zero whatever their rank).

    Examples
    --------
    >>> [len(g) for g in strata(np.repeat([0, 1, 2, 3], [60, 50, 150, 30]), 10)]
    [110, 180]
    >>> [len(g) for g in strata(np.repeat([0, 1, 2, 3], [60, 50, 150, 30]), 1)]
    [110]
    """
    above = np.asarray(above, dtype=np.int64)
    if not len(above):
        return []
    sizes = np.bincount(above)
    bounds, filled = [0], 0  # bounds: the first a of each stratum
    for a, size in enumerate(sizes):
        filled += int(size)
        if filled >= STRATUM_ITEMS and a + 1 < len(sizes):
            bounds.append(a + 1)
            filled = 0
    if filled < STRATUM_ITEMS and len(bounds) > 1:
        bounds.pop()  # the deep remainder joins the last stratum closed
    stratum = np.searchsorted(np.asarray(bounds), above, side="right") - 1
    order = np.argsort(stratum, kind="stable")
    cuts = np.searchsorted(stratum[order], np.arange(1, len(bounds)))
    return [g for g, first in zip(np.split(order, cuts), bounds) if first < depth and len(g)]


def corrected_values(metric: Metric, conv, draws: Draws, r: HeldOutRanks, w: np.ndarray) -> np.ndarray:
    """Per evaluated user, the estimate of ``metric`` from the weights ``w`` of its held-out items."""
    from ..engine.rules import discounts, gains_of

    k = int(cast(int, metric.k))  # every corrected metric has a cutoff (check_corrections)
    U = len(draws.users)
    b = np.arange(w.shape[1])[None, :k]
    rank = r.above[:, None] + b + 1  # (P, k)
    inside = (rank <= k).astype(np.float64)
    q = draws.pos_query
    family = metric.family
    R = draws.R.astype(np.float64)
    if family in ("hit_rate", "rr"):
        top = r.above == 0
        term = inside / rank if family == "rr" else inside
        est = (w[:, :k] * term).sum(axis=1)
        return np.bincount(q[top], weights=est[top], minlength=U)
    if family == "ndcg":
        spec = cast(Callable, metric.info.dcg)(metric, conv)
        disc, _ = discounts(spec, k)
        gains = gains_of(draws.pos_grade, spec, np.ones(len(draws.pos_grade), bool))
        dcg = np.bincount(q, weights=gains * (w[:, :k] * inside * disc[np.minimum(rank, k)]).sum(axis=1), minlength=U)
        return _ratio(dcg, _ideal(gains, q, U, disc, k), conv.undefined)
    found = (w[:, :k] * (inside * (r.above[:, None] + 1) / rank if family == "ap" else inside)).sum(axis=1)
    h = np.bincount(q, weights=found, minlength=U)
    listed = np.full(U, float(k)) if conv.short_lists != "shrink" else np.minimum(float(k), draws.candidates)
    if family in ("recall", "ap"):
        return _ratio(h, R, conv.undefined)
    if family == "precision":
        return h / listed
    return 2.0 * h / (listed + R)  # f1


def _ideal(gains: np.ndarray, q: np.ndarray, U: int, disc: np.ndarray, k: int) -> np.ndarray:
    """Each user's ideal DCG@k: its held-out gains in decreasing order."""
    order = np.lexsort((-gains, q))
    firsts = np.searchsorted(q[order], q[order], side="left")
    place = np.arange(len(order)) - firsts + 1  # 1-based rank in the ideal order
    kept = place <= k
    return np.bincount(q[order][kept], weights=gains[order][kept] * disc[place[kept]], minlength=U)


def _ratio(num: np.ndarray, den: np.ndarray, undefined: float) -> np.ndarray:
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(den > 0, num / np.where(den > 0, den, 1.0), undefined)


def refuse_graded_negatives(roles, prepared, conv) -> None:
    """Corrected nDCG sums the gains of the relevant held-out items: a non-relevant one with a gain
    (under linear gains, a grade above 0 but below the threshold) would be a term it cannot see."""
    from ..engine.rules import gains_of

    grades = prepared.relevant.data
    negative = grades[~conv.is_relevant(grades)]
    for est, label, m in roles:
        if est in CORRECTIONS and m.family == "ndcg" and len(negative):
            if (gains_of(negative, m.info.dcg(m, conv), np.zeros(len(negative), bool)) != 0).any():
                raise ParameterError(f"The corrected {label} estimates the ranks of the relevant held-out items; test "
                                     "holds held-out items below the relevance threshold that gain something in "
                                     "nDCG, terms it cannot see. Use ndcg(gain=binary)@k, keep only the relevant "
                                     "items in test, or estimator=['sampled', 'full'] for it.")


# ---------------------------------------------------------------------------------------------
# the evaluation


def evaluate_sampled_scores(scores, test, metrics, *, conv, n_negatives: int, sampling: str, exclude, seed: int,
                            estimators, batch_size=None, threads=None):
    """The evaluation behind :func:`topkeval.evaluate_sampled` (parameters checked one by one): an
    :class:`~topkeval.engine.Evaluation` whose columns are the estimates asked for."""
    from .. import engine
    from ..backends.matrix import evaluate_rows, prepare
    from ..engine import warn_leaked

    estimators = list(dict.fromkeys(estimators))
    labels, tagged, roles = columns(metrics, estimators, sampling, n_negatives)
    if conv.empty_queries != "skip":
        raise ParameterError(f"evaluate_sampled draws negatives for each held-out item; a user without one has no "
                             f"sampled list, so empty_queries={conv.empty_queries!r} has nothing to keep or refuse: "
                             "use empty_queries='skip' (the default).")
    if conv.score_threshold is not None and any(est != "full" for est, _, _ in roles):
        raise ParameterError("score_threshold removes candidates by score, which a sampled list cannot see (a draw "
                             "below it would be ranked): drop it, or use estimator='full'.")
    check_corrections(roles, conv, sampling)
    base_labels = list(dict.fromkeys(label for _, label, _ in roles))
    base = {label: m for _, label, m in roles}
    plan = engine.make_plan([base[label] for label in base_labels], conv)
    plan = replace(plan, labels=tuple(base_labels))
    prepared = prepare(scores, test, exclude)
    warn_leaked(prepared.leaked)
    refuse_graded_negatives(roles, prepared, conv)
    U_all, I = prepared.shape
    models = list(prepared.models)
    draws = draw(prepared, conv, n_negatives, sampling, seed)
    wanted = {est for est, _, _ in roles}
    values: dict[str, dict[str, np.ndarray]] = {model: {} for model in models}
    info: dict = {}
    ties: dict[str, int] = dict.fromkeys(models, 0)
    short: dict[str, dict[str, int]] = {model: {} for model in models}
    rows = 0
    if "sampled" in wanted:
        log = sampled_log(prepared, draws)
        rows = log.n_rows
        batch = _evaluate_log(log, plan, threads)
        for mv in batch.models:
            for est, label, _ in roles:
                if est == "sampled":
                    values[mv.model][_label(labels, roles, est, label)] = mv.values[label]
            ties[mv.model] = mv.ties
            for label, count in (mv.short or {}).items():
                short[mv.model][_label(labels, roles, "sampled", label)] = count
        if not np.array_equal(batch.models[0].queries, draws.users):  # pragma: no cover - a broken invariant
            raise AssertionError("the sampled lists' users differ from the draws'")
        info["sampled_lists"] = {"rows": int(log.n_rows), "longest": int(np.diff(log.offsets).max()),
                                 "shortest": int(np.diff(log.offsets).min())}
    if "full" in wanted:
        run = evaluate_rows(prepared, np.arange(U_all), plan, batch_size=batch_size, threads=threads)
        for model in models:
            parts = [mv for b in run.evaluated for mv in b.models if mv.model == model]
            queries = np.concatenate([p.queries for p in parts])
            if not np.array_equal(queries, draws.users):  # pragma: no cover - a broken invariant
                raise AssertionError("the full catalogue's users differ from the draws'")
            for est, label, _ in roles:
                if est == "full":
                    values[model][label] = np.concatenate([p.values[label] for p in parts])
            if "sampled" not in wanted:
                ties[model] = sum(p.ties for p in parts)
            for p in parts:
                for label, count in (p.short or {}).items():
                    short[model][label] = short[model].get(label, 0) + count
        rows = rows or U_all * I - (0 if prepared.exclude is None else prepared.exclude.nnz)
    corrections = [est for est in CORRECTIONS if est in wanted]
    if corrections:
        ranks = [held_out_ranks(S, draws, conv) for S in prepared.models.values()]
        depth = max(int(m.k) for est, _, m in roles if est in CORRECTIONS)
        for est in corrections:
            weights = correction_weights(est, ranks, draws, depth)
            for model, r, w in zip(models, ranks, weights):
                for e, label, m in roles:
                    if e == est:
                        values[model][_label(labels, roles, est, label)] = corrected_values(m, conv, draws, r, w)
    batch = _assemble(models, draws.users, labels, values, ties, rows, short)
    out_plan = replace(plan, metrics=tuple(tagged), labels=tuple(labels))
    with_candidates = U_all if prepared.exclude is None else int((np.diff(prepared.exclude.indptr) < I).sum())
    skipped = with_candidates - len(draws.users)
    summary_info = {
        "queries": with_candidates, "skipped_empty": skipped,
        "sampled": _sampled_info(draws, sampling, roles, labels, info, models, values),
        "matrix": {"users": U_all, "items": I, "relevant_excluded": prepared.leaked},
        "longest_list": dict.fromkeys(models),  # lists of two lengths (sampled, full): see info["sampled"]
    }
    evaluation = engine.build_results([batch], out_plan, query_name="user", info=summary_info)
    # the per-query table built now: the results hold data only (they pickle), nothing to read again
    return replace(evaluation, _per_query=[evaluation.per_query])


def _label(labels, roles, est, base_label) -> str:
    for label, (e, b, _) in zip(labels, roles):
        if e == est and b == base_label:
            return label
    raise KeyError(base_label)  # pragma: no cover


def _evaluate_log(log, plan, threads):
    from .. import engine
    from ..backends.cpu import CPU

    batch, _ = engine.evaluate_grouped(log, plan, backend=CPU, threads=threads)
    return batch


def sampled_log(prepared, draws: Draws):
    """The sampled lists of every user as one grouped log: its held-out relevant items and the
    distinct items drawn for any of them, in item order, with every model's scores."""
    from ..backends.matrix import gather
    from ..inputs.grouped import GroupedLog

    I = draws.n_items
    user_of = draws.users[draws.pos_query]
    keys = np.concatenate([user_of * I + draws.pos_item, (np.repeat(user_of, draws.m) * I + draws.negatives.ravel())])
    keys = _distinct(keys)
    row_user, row_item = keys // I, keys % I
    query = np.searchsorted(draws.users, row_user)
    offsets = np.searchsorted(query, np.arange(len(draws.users) + 1)).astype(np.int64)
    rel = prepared.relevant  # the grade of each row: a held-out item's (relevant or not), else 0
    rel_keys = np.repeat(np.arange(prepared.shape[0], dtype=np.int64), np.diff(rel.indptr)) * I + rel.indices
    at = np.searchsorted(rel_keys, keys)
    found = (at < len(rel_keys)) & (rel_keys[np.minimum(at, len(rel_keys) - 1)] == keys)
    grades = np.where(found, rel.data[np.minimum(at, len(rel.data) - 1)] if len(rel.data) else 0.0, 0.0)
    scores = {}
    for model, S in prepared.models.items():
        values = gather(S, row_user, row_item)
        if not np.isfinite(values).all():
            raise DataError(f"the scores of model {model!r} hold NaN or infinite values at a held-out item or a "
                            "sampled negative; every score of a candidate must be finite (excluded cells may hold "
                            "anything).")
        scores[model] = values
    return GroupedLog(offsets, draws.users, grades.astype(np.float64), scores, row_item.astype(np.int64))


def _assemble(models, users, labels, values, ties, rows, short):
    from ..engine.evaluate import Evaluated, ModelValues

    parts = []
    for model in models:
        parts.append(ModelValues(model, users, {label: values[model][label] for label in labels}, ties[model], rows,
                                 len(users), short=short[model] or None))
    return Evaluated(parts, len(users), 0, relevant=1)


def _sampled_info(draws: Draws, sampling: str, roles, labels, info, models, values) -> dict:
    """``info["sampled"]``: the protocol, each column's estimator and standard error, and the pairs of
    models a sampled column orders otherwise than the full catalogue (or, without it, the correction), and
    those a corrected column orders otherwise than the full catalogue when it is in the call (a correction
    orders the models as the full catalogue does on average over the draws, not in every draw)."""
    estimators = {label: est for label, (est, _, _) in zip(labels, roles)}
    se = {model: {label: _standard_error(values[model][label]) for label in labels} for model in models}
    reordered = {}
    for label, (est, base_label, _) in zip(labels, roles):
        if est not in ("sampled", *CORRECTIONS):
            continue
        truth = next((lab for lab, (e, b, _) in zip(labels, roles) if b == base_label and e == "full"), None)
        if est == "sampled":
            truth = truth or next((lab for lab, (e, b, _) in zip(labels, roles) if b == base_label and e in CORRECTIONS),
                                  None)
        if truth is None:
            continue
        pairs = []
        for a in models:
            for b in models:
                sa, sb = _mean(values[a][label]), _mean(values[b][label])
                ta, tb = _mean(values[a][truth]), _mean(values[b][truth])
                if sa > sb and ta < tb:
                    pairs.append([a, b])
        if pairs:
            reordered[label] = {"against": truth, "pairs": pairs}
    return {"sampling": sampling, "n_negatives": draws.m, "seed": draws.seed, "tag": tag(sampling, draws.m),
            "held_out": int(len(draws.pos_item)), "catalog": int(draws.n_items),
            "negatives_min": int(draws.pool.min()), "negatives_max": int(draws.pool.max()),
            "estimators": estimators, "standard_error": se, "reordered": reordered, **info}


def without_interval(results, labels) -> list[str]:
    """The columns among ``labels`` (of the Evaluation ``results``) that are corrected estimates: their
    intervals (summary_ci, compare) are withheld. An interval over users and draws leaves out the
    correction's bias, which the sample cannot measure (the ranks finer than N / m are extrapolated); on
    MovieLens 100k such intervals covered the full-catalogue value in 0 to 98% of samplings, not 95%.
    Each column's Metric names its estimate (``corrected:bv``...), in results rebuilt from the
    per-query table too (:meth:`topkeval.Results.from_per_query` reads ``ndcg@10[corrected:bv]``)."""
    return [label for label in labels if results.metric(label).estimate.startswith("corrected:")]


def _mean(v: np.ndarray) -> float:
    v = v[~np.isnan(v)]
    return float(v.mean()) if len(v) else math.nan


def _standard_error(v: np.ndarray) -> float:
    v = v[~np.isnan(v)]
    return float(v.std(ddof=1) / math.sqrt(len(v))) if len(v) > 1 else math.nan
