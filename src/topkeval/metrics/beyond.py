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
"""

from __future__ import annotations

from .registry import Param, register


def _elsewhere(st, m, conv):
    from ..errors import ParameterError

    raise ParameterError(f"{m} is a beyond-accuracy metric, read off each top k's items: pass it to evaluate() on a "
                         f"table with item=, or to Results.with_beyond.")


def _variant(*choices: str) -> tuple[Param, ...]:
    return (Param("variant", "choice", choices[0], False, choices),)


_LIST = "an empty list"

register("novelty", beyond="query", cutoff="required", params=_variant("rectools", "replay"), bounded=False,
         aliases=("miuf", "mean_inv_user_freq", "meaninvuserfreq"), undefined=_LIST,
         summary="mean self-information of the items shown (RecTools MeanInvUserFreq); variant=replay: the share "
                 "of them the query's history lacks (RePlay Novelty)",
         formula="mean over the min(k, n) items shown of -log2 pop(i)")(_elsewhere)
register("popularity", beyond="query", cutoff="required", higher_is_better=False, undefined=_LIST,
         aliases=("arp", "avg_rec_popularity", "avgrecpopularity", "average_popularity", "averagepopularity"),
         summary="average recommendation popularity (RecTools AvgRecPopularity, RecBole AveragePopularity, as shares)",
         formula="mean over the items shown of pop(i)")(_elsewhere)
register("diversity", beyond="query", cutoff="required", bounded=False,
         aliases=("ild", "intra_list_diversity", "intralistdiversity"), undefined="fewer than 2 items shown",
         summary="intra-list diversity, with features= (cosine), similarity= or distance= (RecTools "
                 "IntraListDiversity with any distance calculator, Microsoft Recommenders diversity)",
         formula="mean over the pairs of items shown of 1 - sim(i, j), or of distance(i, j)")(_elsewhere)
register("category_diversity", beyond="query", cutoff="required", undefined=_LIST,
         aliases=("categorical_diversity", "categoricaldiversity"),
         summary="distinct categories in the top k, over k, with categories= (RePlay CategoricalDiversity)",
         formula="distinct categories of the items shown / k")(_elsewhere)
register("unexpectedness", beyond="query", cutoff="required", undefined="never",
         summary="share of the top k that a baseline model's top k lacks, with baseline= (RePlay Unexpectedness)",
         formula="1 - |top k ∩ baseline's top k| / k")(_elsewhere)
register("serendipity", beyond="query", cutoff="required", params=_variant("rectools", "evidently", "recommenders"),
         bounded=False, undefined="an empty list; evidently, recommenders: no history (evidently: no relevant item "
                                  "shown)",
         summary="relevant and unpopular (RecTools Serendipity); variant=evidently, recommenders: relevant and unlike "
                 "the query's history (features=, history=)",
         formula="mean over the items shown of rel(i) max((N + 1 - rank) / N - (N + 1 - poprank(i)) / N, 0)")(_elsewhere)
register("tail", beyond="query", cutoff="required", params=(Param("share", "fraction", 0.1, False),), undefined=_LIST,
         aliases=("tail_percentage", "tailpercentage"),
         summary="share of the items shown in the long tail: the least popular share of the items with a popularity "
                 "(RecBole TailPercentage)",
         formula="mean over the items shown of 1 if i is in the tail")(_elsewhere)
register("mean_pop_rank", beyond="query", cutoff="required", higher_is_better=False, undefined=_LIST,
         aliases=("meanpoprank", "obscurity"),
         summary="mean popularity quantile of the items shown, 1 the most popular (LensKit MeanPopRank)",
         formula="mean over the items shown of the average rank of pop(i) among the positive ones / their count")(
    _elsewhere)
register("pauc", beyond="query", cutoff="required", undefined="R = 0", aliases=("partial_auc", "partialauc"),
         summary="partial AUC: every relevant item against the top k non-relevant ones (RecTools PartialAUC)",
         formula="sum over relevant candidates of max(k - non-relevant above, 0) / (k R)")(_elsewhere)
register("pap", beyond="query", cutoff="required", undefined="R = 0",
         summary="partial AUC + precision: the top min(k, R) relevant against the top k non-relevant (RecTools PAP)",
         formula="sum over the first min(k, R) relevant of max(k - non-relevant above, 0) / (k min(k, R))")(_elsewhere)
register("rbp_norm", beyond="query", cutoff="required", params=(Param("p", "unit", 0.85, False),),
         undefined="R = 0, or an empty list",
         summary="rank-biased precision over the best the query's relevant items allow (LensKit RBP(normalize=True))",
         formula="sum over relevant ranks i <= min(k, n) of p^(i - 1) / sum over i <= min(R, k, n) of p^(i - 1)")(
    _elsewhere)

# one value per model: no per-query value (beyond_accuracy's table only)
register("coverage", beyond="catalog", cutoff="required", undefined="never",
         aliases=("catalog_coverage", "catalogcoverage", "item_coverage", "itemcoverage"),
         summary="share of the catalogue shown in some top k (RecTools CatalogCoverage, RecBole ItemCoverage)",
         formula="distinct items shown / catalogue size")(_elsewhere)
register("gini", beyond="catalog", cutoff="required", higher_is_better=False, undefined="nothing shown",
         aliases=("gini_index", "giniindex"),
         summary="Gini index of the items' exposures over the catalogue (RecBole GiniIndex, RecPack)",
         formula="sum_j (2j - n - 1) x_(j) / (n sum x), exposures ascending")(_elsewhere)
register("entropy", beyond="catalog", cutoff="required", params=_variant("shannon", "recbole"), bounded=False,
         undefined="nothing shown", aliases=("distributional_coverage", "distributionalcoverage"),
         variants={"shannon_entropy": {"variant": "recbole"}, "shannonentropy": {"variant": "recbole"}},
         summary="Shannon entropy in bits of the items' shares of the top-k slots (Microsoft Recommenders "
                 "distributional_coverage); variant=recbole: in nats, over the items shown (RecBole ShannonEntropy)",
         formula="-sum_i s_i log2 s_i, s_i = exposure of i / all exposures")(_elsewhere)
register("personalization", beyond="catalog", cutoff="required", undefined="fewer than 2 lists",
         aliases=("personalisation",),
         summary="1 - the mean overlap of two queries' top k, over k (Evidently PersonalizationMetric)",
         formula="1 - (sum_i c_i^2 - U k) / (k U (U - 1)), c_i the lists showing i, U the lists")(_elsewhere)
