"""Presets reproduce other tools, tested against the real packages where they install."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pandas as pd
import pytest

import topkeval as tk

pytestmark = pytest.mark.peers


def _tied_log(seed, n_queries=25, length=12):
    rng = np.random.default_rng(seed)
    rows = []
    for q in range(n_queries):
        items = rng.choice(100, length, replace=False)
        scores = rng.integers(1, 5, length) / 4  # heavy ties, all positive
        grades = rng.choice([0, 0, 0, 1, 2, 3], length)
        if q % 7 == 0:
            grades[:] = 0  # an empty query now and then
        rows += [(f"q{q:02d}", f"d{i:03d}", float(s), int(g)) for i, s, g in zip(items, scores, grades)]
    return pd.DataFrame(rows, columns=["query", "item", "score", "grade"])


@pytest.mark.parametrize("seed", range(4))
def test_ranx_preset(seed):
    ranx = pytest.importorskip("ranx")
    frame = _tied_log(seed)
    qrels, run = {}, {}
    for q, it, s, g in frame.itertuples(index=False):
        qrels.setdefault(q, {})[it] = g
        run.setdefault(q, {})[it] = s
    names = ["precision@5", "recall@5", "f1@5", "r-precision", "mrr@5", "map@10", "ndcg@5", "ndcg_burges@5",
             "hit_rate@3", "precision@20"]
    ours = ["precision@5", "recall@5", "f1@5", "r_precision", "rr@5", "ap@10", "ndcg@5", "ndcg(gain=exp)@5",
            "hit_rate@3", "precision@20"]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ref = ranx.evaluate(ranx.Qrels(qrels), ranx.Run(run), names, return_mean=False)
    res = tk.evaluate(frame, metrics=ours, relevance="grade", item="item", conventions="ranx")
    for name, mine in zip(names, ours):
        np.testing.assert_allclose(res.per_query[mine].to_numpy(), ref[name], atol=1e-12, err_msg=name)


def _ranx_per_query(ranx, frame, names):
    """ranx's per-query values, with its Qrels and Run objects (built from the rows in their order),
    keyed by query; every row is judged."""
    qrels, run = {}, {}
    for q, it, s, g in frame[["query", "item", "score", "grade"]].itertuples(index=False):
        run.setdefault(q, {})[it] = s
        qrels.setdefault(q, {})[it] = int(g)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        values = ranx.evaluate(ranx.Qrels(qrels), ranx.Run(run), names, return_mean=False)
    order = sorted(run)  # ranx sorts its queries by id
    return {name: dict(zip(order, values[name] if len(names) > 1 else values)) for name in names}


def _long_ties(seed, lengths=(3, 15, 16, 17, 40, 100, 1000), levels=3):
    """Queries of the given lengths whose scores take a few values (the longest: one tie group)."""
    rng = np.random.default_rng(seed)
    rows = []
    for q, n in enumerate(lengths):
        scores = rng.integers(0, levels, n) / 2 if n < 1000 else np.ones(n)
        grades = rng.choice([0, 0, 0, 1, 2], n)
        grades[0] = 1  # every query has a relevant document (ranx skips queries without judgments)
        items = rng.choice(100_000, n, replace=False)
        rows += [(f"q{q}", f"d{i}", float(s), int(g)) for i, s, g in zip(items, scores, grades)]
    return pd.DataFrame(rows, columns=["query", "item", "score", "grade"])


RANX_NAMES = ["precision@10", "recall@100", "r-precision", "mrr", "map", "map@10", "ndcg@10", "ndcg_burges@20",
              "hit_rate@5", "hits@10", "bpref"]
OURS = ["precision@10", "recall@100", "r_precision", "rr", "ap", "ap@10", "ndcg@10", "ndcg(gain=exp)@20",
        "hit_rate@5", "tp@10", "bpref"]


@pytest.mark.parametrize("seed", range(3))
def test_ranx_preset_orders_long_tied_lists_as_ranx(seed):
    """ranx orders a query's documents with numba's np.argsort (quicksort) of the negated scores, in
    the run's order: from 16 tied documents up that is not the row order. 16, 17, 100 and 1000 ties."""
    ranx = pytest.importorskip("ranx")
    frame = _long_ties(seed)
    theirs = _ranx_per_query(ranx, frame, RANX_NAMES)
    res = tk.evaluate(frame, metrics=OURS, relevance="grade", item="item", conventions="ranx")
    pq = res.per_query.set_index("query")
    for name, mine in zip(RANX_NAMES, OURS):
        for q, value in theirs[name].items():
            assert pq.loc[q, mine] == pytest.approx(value, abs=1e-12), (name, q)
    # the row order (ties="first") is ranx's only below 16 candidates
    first = tk.evaluate(frame, metrics=["ndcg@10", "ap"], relevance="grade", item="item", conventions="ranx",
                        ties="first").per_query.set_index("query")
    short = [q for q, n in frame.groupby("query").size().items() if n < 16]
    assert np.allclose(first.loc[short, "ndcg@10"], pq.loc[short, "ndcg@10"], rtol=0, atol=1e-12)
    assert not np.allclose(first["ndcg@10"], pq["ndcg@10"], rtol=0, atol=1e-6)


@pytest.mark.parametrize("seed", range(2))
def test_ranx_make_comparable_sorts_a_second_time(seed):
    """ranx.evaluate(..., make_comparable=True) calls Run.make_comparable, which sorts every query's
    documents again (Run.sort: numba's quicksort of the negated scores, this time in the order of the
    first sort): from 16 tied documents up the order, and the numbers, differ from ranx's own without
    it, which the ranx preset reproduces. Sorting twice, transcribed, gives ranx's numbers with it."""
    import sys
    from pathlib import Path

    ranx = pytest.importorskip("ranx")
    sys.path.insert(0, str(Path(__file__).parent))
    from reference import numba_argsort

    frame = _long_ties(seed)
    names, ours = ["ndcg@10", "map@10", "precision@10", "mrr"], ["ndcg@10", "ap@10", "precision@10", "rr"]
    qrels, run = {}, {}
    for q, it, s, g in frame.itertuples(index=False):
        run.setdefault(q, {})[it] = s
        qrels.setdefault(q, {})[it] = int(g)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        plain = ranx.evaluate(ranx.Qrels(qrels), ranx.Run(run), names, return_mean=False)
        again = ranx.evaluate(ranx.Qrels(qrels), ranx.Run(run), names, return_mean=False, make_comparable=True)
    order = sorted(run)  # ranx's queries by id
    preset = tk.evaluate(frame, metrics=ours, relevance="grade", item="item", conventions="ranx").per_query
    preset = preset.set_index("query").loc[order]
    twice = []
    for _, rows in frame.groupby("query", sort=False):
        first = np.asarray(numba_argsort(-rows["score"].to_numpy()))
        second = np.asarray(numba_argsort(-rows["score"].to_numpy()[first]))
        twice.append(rows.iloc[first[second]])
    resorted = tk.evaluate(pd.concat(twice), metrics=ours, relevance="grade", item="item", conventions="ranx",
                           ties="first").per_query.set_index("query").loc[order]
    for name, mine in zip(names, ours):
        np.testing.assert_allclose(preset[mine].to_numpy(), plain[name], atol=1e-12, err_msg=name)
        np.testing.assert_allclose(resorted[mine].to_numpy(), again[name], atol=1e-12, err_msg=name)
    assert not np.allclose(plain["ndcg@10"], again["ndcg@10"], rtol=0, atol=1e-6)  # the second sort matters here
    short = [i for i, q in enumerate(order) if (frame["query"] == q).sum() < 16]
    assert np.allclose(plain["ndcg@10"][short], again["ndcg@10"][short], rtol=0, atol=1e-12)


def test_ranx_preset_on_every_path():
    """The same order on a score matrix (a popularity recommender: one score per item, for every
    user), a streamed parquet file and judgments kept apart; depth is refused (ranx has no cut)."""
    ranx = pytest.importorskip("ranx")
    rng = np.random.default_rng(9)
    users, items = 15, 70
    popularity = rng.integers(0, 4, items).astype(float)
    scores = np.tile(popularity, (users, 1))
    grades = (rng.random((users, items)) < 0.15) * rng.integers(1, 3, (users, items))
    grades[:, 0] = 1
    exclude = (rng.random((users, items)) < 0.1) & (grades == 0)
    u, i = np.nonzero(~exclude)
    long = pd.DataFrame({"query": [f"u{x:02d}" for x in u], "item": [f"i{y:02d}" for y in i],
                         "score": scores[u, i], "grade": grades[u, i]})
    names, ours = ["ndcg@10", "map", "mrr", "precision@5", "recall@20"], ["ndcg@10", "ap", "rr", "precision@5",
                                                                         "recall@20"]
    theirs = _ranx_per_query(ranx, long, names)
    on_matrix = tk.evaluate_matrix(scores, grades, ours, exclude=exclude, conventions="ranx").per_query
    in_memory = tk.evaluate(long, ours, relevance="grade", item="item", conventions="ranx").per_query
    qrels = long[long["grade"] > 0][["query", "item", "grade"]].rename(columns={"grade": "relevance"})
    apart = tk.evaluate(long[["query", "item", "score"]], ours, item="item", qrels=qrels, conventions="ranx").per_query
    for name, mine in zip(names, ours):
        for q, value in theirs[name].items():
            assert on_matrix.set_index("user").loc[int(q[1:]), mine] == pytest.approx(value, abs=1e-12), (name, q)
            assert in_memory.set_index("query").loc[q, mine] == pytest.approx(value, abs=1e-12), (name, q)
            assert apart.set_index("query").loc[q, mine] == pytest.approx(value, abs=1e-12), (name, q)
    with pytest.raises(tk.ParameterError, match="depth is not available with ties='ranx'"):
        tk.evaluate(long, ours, relevance="grade", item="item", conventions="ranx", depth=10)


def test_ranx_order_streamed_and_in_views(tmp_path):
    """A parquet file streamed in small batches gives the in-memory numbers; side_by_side and
    beyond_accuracy show ranx's order too."""
    frame = _long_ties(4, lengths=(20, 33, 17))
    path = tmp_path / "log.parquet"
    frame.to_parquet(path)
    kw = dict(metrics=["ndcg@5", "ap"], relevance="grade", item="item", conventions="ranx")
    whole = tk.evaluate(frame, **kw)
    streamed = tk.evaluate(path, chunk_rows=7, **kw)
    pd.testing.assert_frame_equal(whole.per_query, streamed.per_query)
    from reference import numba_argsort

    part = frame[frame["query"] == "q1"]
    order = numba_argsort(-part["score"].to_numpy())  # ranx's order of the query's rows
    shown = whole.side_by_side("q1", k=10)
    assert shown.iloc[:, 1].tolist() == part["item"].to_numpy()[order][:10].tolist()
    coverage = whole.beyond_accuracy(k=3, catalog=frame["item"].nunique())
    tops = {it for q, p in frame.groupby("query", sort=False) for it in p["item"].to_numpy()[
        numba_argsort(-p["score"].to_numpy())][:3]}
    assert coverage.loc["score", "coverage@3"] == pytest.approx(len(tops) / frame["item"].nunique())


def test_quicksort_argsort_is_numbas():
    """The kernels' transcription of numba's np.argsort (quicksort), interpreted and compiled,
    gives numba's own permutation, ties included, at every size around the insertion-sort cut."""
    numba = pytest.importorskip("numba")
    from topkeval.kernels.sort import quicksort_argsort

    theirs = numba.njit(lambda a: np.argsort(a))
    rng = np.random.default_rng(0)
    for n in list(range(0, 40)) + [100, 1000, 5000]:
        for levels in (1, 2, 5, 1_000_000):
            keys = rng.integers(0, levels, n).astype(np.float64)
            want = theirs(keys)
            np.testing.assert_array_equal(quicksort_argsort.py_func(keys), want, err_msg=f"{n} {levels}")
            np.testing.assert_array_equal(quicksort_argsort(keys), want)  # compiled (tests/conftest.py)


@pytest.mark.parametrize("seed", range(4))
def test_sklearn_preset_ndcg_with_ties(seed):
    metrics = pytest.importorskip("sklearn.metrics")
    frame = _tied_log(seed)
    res = tk.evaluate(frame, metrics=["ndcg@3", "ndcg@5", "ndcg", "dcg@5"], relevance="grade", conventions="sklearn")
    pq = res.per_query.set_index("query")
    for q, part in frame.groupby("query"):
        y, s = part["grade"].to_numpy()[None, :], part["score"].to_numpy()[None, :]
        for k in (3, 5):
            assert pq.loc[q, f"ndcg@{k}"] == pytest.approx(metrics.ndcg_score(y, s, k=k), abs=1e-12)
        assert pq.loc[q, "ndcg"] == pytest.approx(metrics.ndcg_score(y, s), abs=1e-12)
        assert pq.loc[q, "dcg@5"] == pytest.approx(metrics.dcg_score(y, s, k=5), abs=1e-12)


@pytest.mark.parametrize("seed", range(3))
def test_torchmetrics_preset(seed):
    torch = pytest.importorskip("torch")
    R = pytest.importorskip("torchmetrics.functional.retrieval")
    frame = _tied_log(seed)
    frame["score"] = frame["score"] + np.random.default_rng(seed).random(len(frame)) * 1e-3  # no ties
    # about half the scores <= 0: torchmetrics never counts those as found in precision, recall, rr
    frame["score"] -= frame["score"].median()
    binary = frame.assign(rel=(frame["grade"] > 0).astype(int))
    res = tk.evaluate(binary, metrics=["precision@5", "precision@20", "recall@5", "r_precision", "hit_rate@3", "rr@5",
                                       "rr"], relevance="rel", conventions="torchmetrics")
    counted = tk.evaluate(binary, metrics=["recall@5"], relevance="rel", conventions="torchmetrics",
                          nonpositive_scores="count")
    assert counted.summary.iloc[0, 0] > res.summary.loc["score", "recall@5"]  # the rule matters on this log
    graded = tk.evaluate(frame, metrics=["ndcg@5"], relevance="grade", conventions="torchmetrics")
    pq = res.per_query.set_index("query")
    gq = graded.per_query.set_index("query")
    for q, part in binary.groupby("query"):
        p = torch.tensor(part["score"].to_numpy())
        t = torch.tensor(part["rel"].to_numpy())
        g = torch.tensor(part["grade"].to_numpy())
        assert pq.loc[q, "precision@5"] == pytest.approx(float(R.retrieval_precision(p, t, top_k=5)), abs=1e-6)
        assert pq.loc[q, "precision@20"] == pytest.approx(float(R.retrieval_precision(p, t, top_k=20)), abs=1e-6)
        assert pq.loc[q, "recall@5"] == pytest.approx(float(R.retrieval_recall(p, t, top_k=5)), abs=1e-6)
        assert pq.loc[q, "r_precision"] == pytest.approx(float(R.retrieval_r_precision(p, t)), abs=1e-6)
        assert pq.loc[q, "hit_rate@3"] == pytest.approx(float(R.retrieval_hit_rate(p, t, top_k=3)), abs=1e-6)
        assert pq.loc[q, "rr@5"] == pytest.approx(float(R.retrieval_reciprocal_rank(p, t, top_k=5)), abs=1e-6)
        assert pq.loc[q, "rr"] == pytest.approx(float(R.retrieval_reciprocal_rank(p, t)), abs=1e-6)
        assert gq.loc[q, "ndcg@5"] == pytest.approx(float(R.retrieval_normalized_dcg(p, g, top_k=5)), abs=1e-6)


@pytest.mark.parametrize("seed", range(3))
def test_torchmetrics_and_sklearn_presets_take_negative_grades_as_negative_gains(seed):
    """torchmetrics' retrieval_normalized_dcg and scikit-learn's dcg_score take a negative target as
    a negative gain, and their ideal DCG ranks every target (negative ones last, when the top k
    reaches them): negative_grades="gain". nDCG then lies outside [0, 1]. torchmetrics computes in
    float32 (hence the relative tolerance). Heavy ties, queries
    without a positive target, cutoffs beyond some lists."""
    torch = pytest.importorskip("torch")
    R = pytest.importorskip("torchmetrics.functional.retrieval")
    from sklearn.metrics import dcg_score

    rng = np.random.default_rng(700 + seed)
    rows = []
    for q in range(40):
        n = int(rng.integers(1, 12))
        grades = rng.choice([-3, -1, 0, 0, 1, 2, 3], n) if q % 4 else -rng.integers(0, 3, n)
        rows += [(q, float(s), int(g)) for s, g in zip(rng.integers(0, 4, n) / 2, grades)]
    frame = pd.DataFrame(rows, columns=["query", "score", "grade"])
    metrics = ["ndcg", "ndcg@1", "ndcg@3", "ndcg@8", "dcg@3", "dcg"]
    pq = tk.evaluate(frame, metrics, relevance="grade", conventions="torchmetrics").per_query.set_index("query")
    sk = tk.evaluate(frame, metrics, relevance="grade", conventions="sklearn").per_query.set_index("query")
    outside = 0
    for q, part in frame.groupby("query"):
        p, t = torch.tensor(part["score"].to_numpy()), torch.tensor(part["grade"].to_numpy())
        for k in (None, 1, 3, 8):
            name = "ndcg" if k is None else f"ndcg@{k}"
            assert pq.loc[q, name] == pytest.approx(float(R.retrieval_normalized_dcg(p, t, top_k=k)), rel=1e-5, abs=1e-6), (q, k)
            outside += not 0 <= pq.loc[q, name] <= 1
        if len(part) > 1:  # scikit-learn needs two documents
            y, s = part["grade"].to_numpy()[None, :], part["score"].to_numpy()[None, :]
            assert sk.loc[q, "dcg@3"] == pytest.approx(dcg_score(y, s, k=3), abs=1e-12), q
            assert sk.loc[q, "dcg"] == pytest.approx(dcg_score(y, s), abs=1e-12), q
    assert outside > 0  # the rule matters here
    # the default (trec_eval): a negative grade gains nothing, the ideal ranks positive gains only
    plain = tk.evaluate(frame, ["ndcg@3"], relevance="grade", empty_queries="keep").per_query["ndcg@3"]
    assert plain.between(0, 1).all()


def _untied_recs(seed, users=30):
    rng = np.random.default_rng(seed)
    rows = []
    for u in range(users):
        n = int(rng.integers(1, 15))  # some lists shorter than k
        rel = (rng.random(n) < 0.3).astype(int)
        if u % 5 == 0:
            rel[:] = 0
        rows += [(u, i, float(s), int(r)) for i, s, r in zip(range(n), rng.permutation(n) + rng.random(), rel)]
    return pd.DataFrame(rows, columns=["user", "item", "score", "rel"])


@pytest.mark.parametrize("seed", range(4))
def test_lenskit_preset_against_its_documented_formulas(seed):
    """LensKit: Precision = |L ∩ I| / |L| over the list truncated to k; Recall = |L ∩ I| / min(|I|, k)
    (transcribed from lenskit.metrics Precision and Recall); test users have a test item."""
    frame = _untied_recs(seed)
    k = 5
    res = tk.evaluate(frame, metrics=[f"precision@{k}", f"recall_capped@{k}"], query="user", relevance="rel",
                      conventions="lenskit")
    pq = res.per_query.set_index("user")
    users = [u for u, part in frame.groupby("user") if part["rel"].sum() > 0]
    assert sorted(pq.index) == users
    for u in users:
        part = frame[frame.user == u].sort_values("score", ascending=False)
        recs = part["item"].to_numpy()[:k]
        test = part.loc[part.rel > 0, "item"].to_numpy()
        good = np.isin(recs, test).sum()
        assert pq.loc[u, f"precision@{k}"] == pytest.approx(good / len(recs))
        assert pq.loc[u, f"recall_capped@{k}"] == pytest.approx(good / min(len(test), k))


@pytest.mark.parametrize("seed", range(4))
def test_lenskit_ndcg_discount_against_its_code(seed):
    """LensKit's nDCG (lenskit.metrics.topn._dcg, 0.14 to 2025.1; LogRankWeight since): the discount
    of rank r is 1 / max(log2 r, 1), so ranks 1 and 2 both count fully; gains are the test ratings;
    the ideal DCG ranks the user's k largest test ratings. Transcribed."""
    frame = _untied_recs(seed).assign(rating=lambda f: f["rel"] * np.random.default_rng(seed).integers(1, 6, len(f)))

    def dcg(gains):
        disc = np.maximum(np.log2(np.arange(1, len(gains) + 1)), 1)  # np.maximum(disc, 1) then reciprocal
        return float(np.dot(gains, 1 / disc))

    k = 5
    res = tk.evaluate(frame, metrics=[f"ndcg@{k}", f"dcg@{k}"], query="user", relevance="rating", conventions="lenskit")
    pq = res.per_query.set_index("user")
    for u, part in frame.groupby("user"):
        if part["rating"].sum() == 0:
            continue
        ranked = part.sort_values("score", ascending=False)["rating"].to_numpy()[:k]
        ideal = np.sort(part["rating"].to_numpy())[::-1][:k]
        assert pq.loc[u, f"dcg@{k}"] == pytest.approx(dcg(ranked), abs=1e-12)
        assert pq.loc[u, f"ndcg@{k}"] == pytest.approx(dcg(ranked) / dcg(ideal), abs=1e-12)
    default = tk.evaluate(frame, metrics=[f"dcg@{k}"], query="user", relevance="rating", conventions="lenskit",
                          discount="log2")
    assert not default.per_query.equals(res.per_query)  # the discount matters on this log


@pytest.mark.parametrize("seed", range(4))
def test_lenskit_rbp_with_rank_weights_from_a_field(seed):
    """LensKit's RBP(weight_field=...) (lenskit/metrics/ranking/_rbp.py, transcribed): the list cut to
    n, weights read from a field of its items, RBP = the weights of its items in the test set over
    the sum of its weights; a user without test items has no value (NaN). With the weights a field
    holding each rank's weight (here 1 / rank and a geometric 0.8^(rank-1) with a gap), topkeval's
    rbp_weighted(weights={...})@n, on lists shorter than n too."""
    frame = _untied_recs(seed)
    n = 6
    for weights in ([1 / r for r in range(1, n + 1)], [0.8**r if r != 2 else 0.0 for r in range(n)]):
        name = "rbp_weighted(weights={" + ",".join(repr(w) for w in weights) + f"}})@{n}"
        res = tk.evaluate(frame, metrics=[name], query="user", relevance="rel", conventions="lenskit")
        pq = res.per_query.set_index("user")[res.metrics[0]]

        def lenskit_rbp(recs, test, field):
            recs, field = recs[:n], field[:n]  # self.truncate(recs)
            if len(test) == 0:
                return math.nan
            good = np.isin(recs, test)
            return float(np.sum(field[good])) / float(np.sum(field))

        theirs = {}
        for u, part in frame.groupby("user"):
            ranked = part.sort_values("score", ascending=False)
            field = np.array(weights + [0.0] * len(ranked))[:len(ranked)]  # the field: the weight of each item's rank
            theirs[u] = lenskit_rbp(ranked["item"].to_numpy(), ranked.loc[ranked.rel > 0, "item"].to_numpy(), field)
        kept = {u: v for u, v in theirs.items() if not math.isnan(v)}
        assert sorted(pq.index) == sorted(kept)  # users without a test item: skipped here, NaN there
        for u, value in kept.items():
            assert pq.loc[u] == pytest.approx(value, abs=1e-12), (u, weights)
        assert res.summary.iloc[0, 0] == pytest.approx(np.mean(list(kept.values())), abs=1e-12)
    with pytest.raises(tk.ParameterError, match="give a weight for each rank up to its cutoff 6"):
        tk.evaluate(frame, metrics=["rbp_weighted(weights={1,0.5})@6"], query="user", relevance="rel")
    with pytest.raises(tk.UnknownMetricError, match="numbers >= 0"):
        tk.parse_metric("rbp_weighted(weights={1,-0.5})@2")


@pytest.mark.parametrize("seed", range(4))
def test_ap_capped_against_spark_recbole_and_recommenders(seed):
    """MAP@k of Spark (RankingMetrics.meanAveragePrecisionAt), RecBole (MAP) and Microsoft
    Recommenders (map_at_k): the sum of precision at each relevant rank <= k, divided by
    min(|relevant|, k); Spark scores a user without relevant items 0. Spark's loop transcribed."""
    frame = _untied_recs(seed)

    def spark_average_precision(pred, lab, k):
        lab_set = set(lab)
        if not lab_set:
            return 0.0
        cnt, prec_sum = 0, 0.0
        for i in range(min(k, len(pred))):
            if pred[i] in lab_set:
                cnt += 1
                prec_sum += cnt / (i + 1)
        return prec_sum / min(len(lab_set), k)

    for k in (1, 3, 10):
        res = tk.evaluate(frame, metrics=[f"ap_capped@{k}"], query="user", relevance="rel", ties="first",
                          empty_queries="keep")
        expected = np.mean([spark_average_precision(part.sort_values("score", ascending=False)["item"].tolist(),
                                                    part.loc[part.rel > 0, "item"].tolist(), k)
                            for _, part in frame.groupby("user")])
        assert res.summary.iloc[0, 0] == pytest.approx(expected, abs=1e-12)
    trec = tk.evaluate(frame, metrics=["ap_capped@3", "ap@3"], query="user", relevance="rel")
    assert trec.summary.iloc[0, 0] > trec.summary.iloc[0, 1]  # TREC's ap@k divides by R, never less


@pytest.mark.parametrize("seed", range(4))
def test_evidently_preset_against_its_code(seed):
    """Evidently's get_precision_and_recall_dict (transcribed), on scores without ties."""
    frame = _untied_recs(seed)
    df = pd.DataFrame({"users": frame.user, "target": frame.rel,
                       "preds": frame.groupby("user")["score"].rank(ascending=False).astype(int)})
    df = df[df.users.isin(df[df.target > 0].users.unique())]  # no_feedback_users=False
    user_df = df.groupby("users").target.agg(["size", "sum"])
    user_df.columns = ["size", "all"]
    expected = {}
    for k in (1, 3, 10):
        tp = df[df.preds <= k].groupby("users").target.sum()
        tp = tp.reindex(user_df.index).fillna(0)
        expected[f"precision@{k}"] = (tp / np.minimum(user_df["size"], k)).mean()
        expected[f"recall@{k}"] = (tp / user_df["all"]).mean()
    res = tk.evaluate(frame, metrics=list(expected), query="user", relevance="rel", conventions="evidently")
    for name, value in expected.items():
        assert res.summary.iloc[0][name] == pytest.approx(value), name


def test_evidently_diversity_divides_by_the_list_length():
    """Evidently's DiversityMetric (get_ild, transcribed): per user, the cosine distances of the pairs
    of the top k summed and divided by the list length L, not by the L(L - 1)/2 pairs; topkeval's
    diversity@k is the mean over the pairs, so Evidently's value is it times (L - 1)/2 when every
    list holds L items (docs/conventions.md). Scores without ties."""
    from itertools import combinations

    rng = np.random.default_rng(3)
    users, items, k = 12, 9, 4
    rows = [(u, i, float(s), int(rng.random() < 0.4)) for u in range(users)
            for i, s in zip(range(items), rng.permutation(items) + rng.random())]
    frame = pd.DataFrame(rows, columns=["user", "item", "score", "rel"])
    frame.loc[frame.groupby("user")["score"].idxmax(), "rel"] = 1  # every user has a relevant item
    features = pd.DataFrame(rng.random((items, 3)), index=range(items))
    unit = features.to_numpy() / np.linalg.norm(features.to_numpy(), axis=1, keepdims=True)
    distance = 1 - unit @ unit.T
    ilds = []
    for _, part in frame.groupby("user"):
        top = part.sort_values("score", ascending=False)["item"].to_numpy()[:k]
        ilds.append(sum(distance[i, j] for i, j in combinations(top, 2)) / len(top))
    res = tk.evaluate(frame, ["recall@1"], query="user", relevance="rel", item="item", conventions="evidently")
    ours = res.beyond_accuracy(k=k, features=features).loc["score", f"diversity@{k}"]
    assert np.mean(ilds) == pytest.approx(ours * (k - 1) / 2, rel=1e-12)
