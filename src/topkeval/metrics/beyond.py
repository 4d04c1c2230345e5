"""Beyond-accuracy metrics: what each model's top k shows, read off its lists again.

These families are not functions of the kernel's statistics: each needs the items of each top k
(and, for some, item popularities, features, categories or the queries' histories), so they are
computed by :mod:`topkeval.analysis.beyond` from the rows that the evaluation kept
(:meth:`topkeval.Results.with_beyond`, :meth:`topkeval.Results.beyond_accuracy`, or
``evaluate(..., metrics=["novelty@10"])`` on a table with ``item=``). The registry holds their
names, parameters and facts, so that they parse, round-trip, and are listed beside the others.

``beyond="query"`` families have a value per query (means, compare, summary_ci, segments and
weights apply); ``beyond="catalog"`` families describe a model's lists all together (coverage,
Gini, entropy, personalization): they have no per-query value and appear only in
:meth:`~topkeval.Results.beyond_accuracy`'s table of means.

Where peers define one name two ways, ``variant=`` selects each (``novelty(variant=replay)@10``);
the default is the first peer named. docs/conventions.md ("Beyond accuracy") has every formula
with its source.

Each family's formula is its registered function, as for every other family; what it reads is
not the kernel's :class:`~topkeval.kernels.stats.QueryStats` but the statistics of the lists,
which :mod:`topkeval.analysis.beyond` supplies from the rows the evaluation kept:

* a ``beyond="query"`` family gets one model's top k in one log (``top``, a ``TopK``), for the
  queries of that log: per shown row (grouped by query, each query's in rank order) ``qix`` (its
  query), ``p`` (the chance that it is in the top k: 1, or a share under ``ties="expected"``),
  ``g``, ``e``, ``b`` (candidates above it, in its tie group, of its group before it), ``rel``
  (relevant), ``item`` (a code of its item); per query of the log ``L`` (``min(k, n)``), ``keep``
  (evaluated, not skipped as empty), ``R`` (relevant items) and ``soff`` (its shown rows:
  ``soff[q]:soff[q + 1]``); and what the caller's inputs give per shown row (``novelty_values()``,
  ``shares()``, ``tail(share)``, ``quantiles()``, ``categories()``, ``any_user_chance(n)``,
  ``catalog_size()``), per query (``seen_in_history()``, ``history_similarities()``,
  ``baseline_overlap()``, ``auc_numerators()``), and ``diversity()`` (the pairwise sums: the
  compiled cosine kernel, or the caller's function called pair by pair). It returns one value per
  evaluated query of the log (``[top.keep]``);
* a ``beyond="catalog"`` family gets one model's lists all together (``shown``, an ``Exposures``):
  ``item`` and ``p`` of every shown row, ``exposure`` (per item of every model's lists: the sum of
  ``p``), ``lists`` (the evaluated queries with a non-empty list) and ``catalog_size()``. Sums over
  items are exact (``math.fsum``): the items are numbered over every model's lists, so that a float
  sum in their order would change in its last bits with the models beside this one.

A new beyond-accuracy family over these statistics is one registered function here.
"""

from __future__ import annotations

import math

import numpy as np

from ..conventions import TIES
from ..errors import ParameterError
from .registry import Param, register


def _supplied(top, m) -> None:
    """The statistics of the lists, not a kernel's (the engine refuses these families in its plan)."""
    if not hasattr(top, "soff") and not hasattr(top, "exposure"):
        raise ParameterError(f"{m} is a beyond-accuracy metric, read off each top k's items: pass it to evaluate() on "
                             f"a table with item=, or to Results.with_beyond.")


def mean_over_list(top, value: np.ndarray, empty: float = np.nan) -> np.ndarray:
    """Per evaluated query: ``sum(p value) / L`` over its shown rows (``empty`` when L = 0)."""
    n_q = len(top.L)
    total = np.bincount(top.qix, weights=top.p * value, minlength=n_q)
    L = top.L.astype(np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):
        out = np.where(L > 0, total / np.where(L > 0, L, 1.0), empty)
    return out[top.keep]


def _ratio(num: np.ndarray, den: np.ndarray, undefined: float) -> np.ndarray:
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(den > 0, num / np.where(den > 0, den, 1.0), undefined)


def _novelty(top, m, conv) -> np.ndarray:
    _supplied(top, m)
    if m.param("variant") == "replay":
        top.needs_history()
        seen, in_history = top.seen_in_history()
        out = mean_over_list(top, 1.0 - seen, empty=1.0)
        return np.where(in_history[top.keep], out, np.nan)
    return mean_over_list(top, top.novelty_values())


def _popularity(top, m, conv) -> np.ndarray:
    _supplied(top, m)
    share = top.shares()
    return mean_over_list(top, np.where(np.isnan(share), 0.0, share))


def _diversity(top, m, conv) -> np.ndarray:
    _supplied(top, m)
    return top.diversity()


def _category_diversity(top, m, conv) -> np.ndarray:
    from ..kernels.beyond import distinct_categories

    _supplied(top, m)
    cats = top.categories()
    count = np.zeros(len(top.L))
    distinct_categories(top.soff, top.p, top.e, cats, count)
    return np.where(top.L > 0, count / m.k, np.nan)[top.keep]


def _unexpectedness(top, m, conv) -> np.ndarray:
    """RePlay: ``1 - |top k ∩ baseline's top k| / k`` (expected overlap: the two models' orders of
    tied candidates are independent), 0 when either list is empty."""
    _supplied(top, m)
    overlap, base_L = top.baseline_overlap()
    value = np.where((top.L > 0) & (base_L > 0), 1.0 - overlap / m.k, 0.0)
    return value[top.keep]


def _serendipity(top, m, conv) -> np.ndarray:
    _supplied(top, m)
    variant = m.param("variant")
    expected = conv.ties == "expected"
    if variant == "rectools":
        from ..kernels.beyond import serendipity_terms

        n_items = top.catalog_size()
        pu = top.any_user_chance(n_items)
        terms = serendipity_terms(top.g, top.e, top.b, expected, m.k, float(n_items), pu) * top.rel
        total = np.bincount(top.qix, weights=terms, minlength=len(top.L))
        return _ratio(total, top.L.astype(np.float64), np.nan)[top.keep]
    sims, count = top.history_similarities()
    n_q = len(top.L)
    if variant == "recommenders":  # mean over the list of rel (1 - mean similarity to the history)
        with np.errstate(invalid="ignore", divide="ignore"):
            value = np.where(top.rel, 1.0 - sims / np.where(count[top.qix] > 0, count[top.qix], 1.0), 0.0)
        out = _ratio(np.bincount(top.qix, weights=top.p * value, minlength=n_q), top.L.astype(np.float64), np.nan)
        return np.where(count > 0, out, np.nan)[top.keep]
    # evidently: 1 - (sum over history items and relevant items shown of the similarity) / |history|
    total = np.bincount(top.qix, weights=top.p * top.rel * sims, minlength=n_q)
    hits = np.bincount(top.qix, weights=top.p * top.rel, minlength=n_q)
    with np.errstate(invalid="ignore", divide="ignore"):
        out = np.where((count > 0) & (hits > 0), 1.0 - total / np.where(count > 0, count, 1.0), np.nan)
    return out[top.keep]


def _tail(top, m, conv) -> np.ndarray:
    _supplied(top, m)
    return mean_over_list(top, top.tail(m.param("share")))


def _mean_pop_rank(top, m, conv) -> np.ndarray:
    _supplied(top, m)
    return mean_over_list(top, top.quantiles())


def _pauc(top, m, conv) -> np.ndarray:
    _supplied(top, m)
    pauc, _ = top.auc_numerators()
    return _ratio(pauc, m.k * top.R.astype(np.float64), conv.undefined)[top.keep]


def _pap(top, m, conv) -> np.ndarray:
    _supplied(top, m)
    _, pap = top.auc_numerators()
    return _ratio(pap, m.k * np.minimum(top.R.astype(np.float64), m.k), conv.undefined)[top.keep]


def _rbp_norm(top, m, conv) -> np.ndarray:
    """LensKit's RBP with normalize=True: the discounted relevant ranks of the top k over the best
    the query's R relevant items allow in a list of L: ``sum p^(rank-1) / sum_{i <= min(R, L)} p^(i-1)``."""
    _supplied(top, m)
    patience = m.param("p")
    k = m.k
    if conv.ties == "expected":  # the mean of p^(r - 1) over the group's ranks r <= k
        top_rank = np.minimum(top.g + top.e, k)
        terms = (patience ** top.g - patience ** top_rank) / (1.0 - patience) / top.e
    else:
        terms = patience ** (top.g + top.b)
    num = np.bincount(top.qix, weights=terms * top.rel, minlength=len(top.L))
    best = np.minimum(top.R, top.L)
    den = (1.0 - patience ** best) / (1.0 - patience)
    return _ratio(num, np.where(top.R > 0, den, 0.0), conv.undefined)[top.keep]


def _coverage(shown, m, conv) -> float:
    _supplied(shown, m)
    size = shown.catalog_size()
    if size == 0:
        return float("nan")
    item, p, exposure = shown.item, shown.p, shown.exposure
    n_items = len(exposure)
    sure = np.bincount(item[p >= 1.0], minlength=n_items) > 0
    frac = p < 1.0  # shown with a chance: missed by every query with prod (1 - p)
    missed = np.exp(np.bincount(item[frac], weights=np.log1p(-p[frac]), minlength=n_items))
    covered = np.where(sure, 1.0, np.where(exposure > 0, 1.0 - missed, 0.0))
    return math.fsum(covered) / size


def _gini_of(shown, m, conv) -> float:
    _supplied(shown, m)
    return gini(shown.exposure[shown.exposure > 0], shown.catalog_size())


def gini(exposures: np.ndarray, size: int) -> float:
    """Gini index of the exposures of the ``size`` items of the catalogue (items never shown: 0):
    ``sum_i (2i - n - 1) x_(i) / (n sum x)`` over the exposures sorted ascending, i = 1..n.

    >>> round(gini(np.array([1.0, 3.0]), 4), 4)  # exposures 0, 0, 1, 3: (1 * 1 + 3 * 3) / (4 * 4)
    0.625
    """
    total = math.fsum(exposures)
    if size == 0 or total <= 0:
        return float("nan")
    # the items never shown take the first size - m places with x = 0: only the m shown are summed
    # (a catalogue of 10**12 items is never materialised)
    x = np.sort(exposures)
    i = np.arange(size - len(x) + 1, size + 1, dtype=np.float64)
    return math.fsum((2 * i - size - 1) * x) / (float(size) * total)


def _entropy(shown, m, conv) -> float:
    _supplied(shown, m)
    exposure = shown.exposure
    total = math.fsum(exposure)
    if total <= 0:
        return float("nan")
    s = exposure[exposure > 0] / total
    if m.param("variant") == "recbole":
        return -math.fsum(s * np.log(s)) / len(s)
    return -math.fsum(s * np.log2(s))


def _personalization(shown, m, conv) -> float:
    _supplied(shown, m)
    k = m.k
    U = shown.lists
    if U < 2:
        return float("nan")
    squares = math.fsum(shown.exposure ** 2) + float((shown.p * (1.0 - shown.p)).sum())
    return float(1.0 - (squares - U * k) / (k * U * (U - 1)))


def _variant(*choices: str) -> tuple[Param, ...]:
    return (Param("variant", "choice", choices[0], False, choices),)


_LIST = "an empty list"

register("novelty", beyond="query", cutoff="required", params=_variant("rectools", "replay"), bounded=False,
         aliases=("miuf", "mean_inv_user_freq", "meaninvuserfreq"), undefined=_LIST,
         summary="mean self-information of the items shown (RecTools MeanInvUserFreq); variant=replay: the share "
                 "of them the query's history lacks (RePlay Novelty)",
         formula="mean over the min(k, n) items shown of -log2 pop(i)")(_novelty)
register("popularity", beyond="query", cutoff="required", higher_is_better=False, undefined=_LIST,
         aliases=("arp", "avg_rec_popularity", "avgrecpopularity", "average_popularity", "averagepopularity"),
         summary="average recommendation popularity (RecTools AvgRecPopularity, RecBole AveragePopularity, as shares)",
         formula="mean over the items shown of pop(i)")(_popularity)
register("diversity", beyond="query", cutoff="required", bounded=False,
         aliases=("ild", "intra_list_diversity", "intralistdiversity"), undefined="fewer than 2 items shown",
         summary="intra-list diversity, with features= (cosine), similarity= or distance= (RecTools "
                 "IntraListDiversity with any distance calculator, Microsoft Recommenders diversity)",
         formula="mean over the pairs of items shown of 1 - sim(i, j), or of distance(i, j)")(_diversity)
register("category_diversity", beyond="query", cutoff="required", undefined=_LIST,
         aliases=("categorical_diversity", "categoricaldiversity"),
         summary="distinct categories in the top k, over k, with categories= (RePlay CategoricalDiversity)",
         formula="distinct categories of the items shown / k")(_category_diversity)
register("unexpectedness", beyond="query", cutoff="required", undefined="never", reads=("baseline",),
         summary="share of the top k that a baseline model's top k lacks, with baseline= (RePlay Unexpectedness)",
         formula="1 - |top k ∩ baseline's top k| / k")(_unexpectedness)
#: the tie rules that give each query one top k (every rule but the mean over the orders of tied candidates)
_DETERMINISTIC = tuple(t for t in TIES if t != "expected")

register("serendipity", beyond="query", cutoff="required", params=_variant("rectools", "evidently", "recommenders"),
         variant_ties=(("evidently", _DETERMINISTIC, "Evidently leaves out a query whose top k holds no relevant "
                                                     "item, which the order of tied candidates decides"),),
         bounded=False, undefined="an empty list; evidently, recommenders: no history (evidently: no relevant item "
                                  "shown)",
         summary="relevant and unpopular (RecTools Serendipity); variant=evidently, recommenders: relevant and unlike "
                 "the query's history (features=, history=)",
         formula="mean over the items shown of rel(i) max((N + 1 - rank) / N - (N + 1 - poprank(i)) / N, 0)")(_serendipity)
register("tail", beyond="query", cutoff="required", params=(Param("share", "fraction", 0.1, False),), undefined=_LIST,
         aliases=("tail_percentage", "tailpercentage"),
         summary="share of the items shown in the long tail: the least popular share of the items with a popularity "
                 "(RecBole TailPercentage)",
         formula="mean over the items shown of 1 if i is in the tail")(_tail)
register("mean_pop_rank", beyond="query", cutoff="required", higher_is_better=False, undefined=_LIST,
         aliases=("meanpoprank", "obscurity"),
         summary="mean popularity quantile of the items shown, 1 the most popular (LensKit MeanPopRank)",
         formula="mean over the items shown of the average rank of pop(i) among the positive ones / their count")(
    _mean_pop_rank)
register("pauc", beyond="query", cutoff="required", undefined="R = 0", aliases=("partial_auc", "partialauc"),
         summary="partial AUC: every relevant item against the top k non-relevant ones (RecTools PartialAUC)",
         formula="sum over relevant candidates of max(k - non-relevant above, 0) / (k R)")(_pauc)
register("pap", beyond="query", cutoff="required", undefined="R = 0",
         summary="partial AUC + precision: the top min(k, R) relevant against the top k non-relevant (RecTools PAP)",
         formula="sum over the first min(k, R) relevant of max(k - non-relevant above, 0) / (k min(k, R))")(_pap)
register("rbp_norm", beyond="query", cutoff="required", params=(Param("p", "unit", 0.85, False),),
         undefined="R = 0, or an empty list",
         summary="rank-biased precision over the best the query's relevant items allow (LensKit RBP(normalize=True))",
         formula="sum over relevant ranks i <= min(k, n) of p^(i - 1) / sum over i <= min(R, k, n) of p^(i - 1)")(
    _rbp_norm)

# one value per model: no per-query value (beyond_accuracy's table only)
register("coverage", beyond="catalog", cutoff="required", undefined="never",
         aliases=("catalog_coverage", "catalogcoverage", "item_coverage", "itemcoverage"),
         summary="share of the catalogue shown in some top k (RecTools CatalogCoverage, RecBole ItemCoverage)",
         formula="distinct items shown / catalogue size")(_coverage)
register("gini", beyond="catalog", cutoff="required", higher_is_better=False, undefined="nothing shown",
         aliases=("gini_index", "giniindex"),
         summary="Gini index of the items' exposures over the catalogue (RecBole GiniIndex, RecPack)",
         formula="sum_j (2j - n - 1) x_(j) / (n sum x), exposures ascending")(_gini_of)
register("entropy", beyond="catalog", cutoff="required", params=_variant("shannon", "recbole"), bounded=False,
         undefined="nothing shown", aliases=("distributional_coverage", "distributionalcoverage"),
         variants={"shannon_entropy": {"variant": "recbole"}, "shannonentropy": {"variant": "recbole"}},
         summary="Shannon entropy in bits of the items' shares of the top-k slots (Microsoft Recommenders "
                 "distributional_coverage); variant=recbole: in nats, over the items shown (RecBole ShannonEntropy)",
         formula="-sum_i s_i log2 s_i, s_i = exposure of i / all exposures")(_entropy)
register("personalization", beyond="catalog", cutoff="required", undefined="fewer than 2 lists",
         aliases=("personalisation",),
         summary="1 - the mean overlap of two queries' top k, over k (Evidently PersonalizationMetric)",
         formula="1 - (sum_i c_i^2 - U k) / (k U (U - 1)), c_i the lists showing i, U the lists")(_personalization)
