"""The examples and tests of the five seed documents hold, under the conventions each assumes."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import topkeval as tk

# ---- seed 000: recall_k with its unit tests (k > n is an error there) and the object-4 tables


def test_seed000_unit_tests():
    with pytest.raises(ValueError):  # lengths differ
        tk.recall_at_k(np.array([1, 1, 0]), np.array([0.3, 0.2, 0.3, 0.2]), 1, short_lists="error")
    with pytest.raises(ValueError):  # k larger than the list
        tk.recall_at_k(np.array([1, 1, 0, 0, 1]), np.array([0.4, 0.1, 0.2, 0.5, 0.3]), 10, short_lists="error")
    assert tk.recall_at_k(np.array([1, 1, 0, 0, 1]), np.array([0.4, 0.1, 0.2, 0.5, 0.3]), 3,
                          short_lists="error") == pytest.approx(2 / 3, abs=1e-6)


# object 4 of seed 000's example.parquet, transcribed from its two printed tables: item, relevant,
# Random scores, KNN scores
OBJECT4 = [
    (3, 1, 2.465325, 0.779723), (18, 1, 1.985386, 0.548907), (8, 0, 1.656717, 0.654573),
    (25, 0, 1.614408, 0.465849), (19, 1, 1.447166, 0.551094), (4, 0, 1.383232, 0.646239),
    (16, 1, 1.339926, 0.735866), (2, 1, 1.236205, 0.561225), (29, 0, 1.134973, 0.648329),
    (6, 0, 1.022516, 0.352548), (9, 0, 0.667890, 0.641759), (24, 0, 0.377753, 0.278986),
    (5, 0, 0.346233, 0.250546), (28, 0, 0.332350, 0.354639), (13, 0, 0.313831, 0.354840),
    (7, 1, 0.166810, 0.561225), (17, 0, 0.029310, 0.354840), (22, 1, -0.048041, 0.534151),
    (15, 0, -0.221793, 0.453531), (10, 1, -0.229947, 0.653200), (20, 1, -0.287629, 0.737135),
    (27, 1, -0.388728, 0.643070), (23, 1, -0.480787, 0.631478), (0, 1, -0.573113, 0.913773),
    (12, 0, -0.639963, 0.190521), (26, 0, -1.123104, 0.440866), (11, 0, -1.129551, 0.410943),
    (14, 1, -1.225836, 0.792041), (1, 0, -1.320448, 0.360683), (21, 0, -1.359311, 0.172158),
]


def _object4():
    return pd.DataFrame(OBJECT4, columns=["item", "relevant", "Random scores", "KNN scores"]).assign(object=4)


def test_seed000_object4_recall_at_3():
    frame = _object4()
    res = tk.evaluate(frame, metrics=["recall@3", "recall@4"], query="object", relevance="relevant",
                      score=["Random scores", "KNN scores"], item="item", short_lists="error")
    assert round(res.summary.loc["Random scores", "recall@3"] * 100, 2) == 15.38
    assert round(res.summary.loc["KNN scores", "recall@3"] * 100, 2) == 23.08
    # the seed's per-object table at k=4, row 4: 0.153846 and 0.307692
    assert res.summary.loc["Random scores", "recall@4"] == pytest.approx(0.153846, abs=1e-6)
    assert res.summary.loc["KNN scores", "recall@4"] == pytest.approx(0.307692, abs=1e-6)


def test_seed000_single_function_matches_table():
    frame = _object4()
    for col, expected in (("Random scores", 2 / 13), ("KNN scores", 3 / 13)):
        assert tk.recall_at_k(frame["relevant"], frame[col], 3) == pytest.approx(expected)


# ---- seed 001: four hand-written functions (transcribed), on inputs where they are well defined


def seed001_recall(labels, scores, k):
    order = sorted(range(len(scores)), key=lambda i: scores[i], reverse=True)[:k]
    rel = [i for i, label in enumerate(labels) if label == 1]
    return len(set(order) & set(rel)) / len(rel) if rel else 0.0


def seed001_precision(labels, scores, k):
    order = sorted(range(len(scores)), key=lambda i: scores[i], reverse=True)[:k]
    rel = [i for i, label in enumerate(labels) if label == 1]
    return len(set(order) & set(rel)) / k if k > 0 else 0.0


def seed001_specificity(labels, scores, k):
    top = sorted(range(len(scores)), key=lambda i: scores[i], reverse=True)[:k]
    neg = [i for i, label in enumerate(labels) if label == 0]
    return len(set(neg) - set(top)) / len(neg) if neg else 0.0


def seed001_f1(labels, scores, k):
    p, r = seed001_precision(labels, scores, k), seed001_recall(labels, scores, k)
    return 2 * p * r / (p + r) if (p + r) != 0.0 else 0.0


@pytest.mark.parametrize("seed", range(40))
def test_seed001_functions(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(3, 40))
    labels = (rng.random(n) < 0.3).astype(int)
    pos, neg = rng.choice(n, 2, replace=False)
    labels[pos], labels[neg] = 1, 0  # at least one relevant and one non-relevant
    scores = rng.permutation(n) / n  # distinct scores: no ties
    k = int(rng.integers(1, n + 1))
    lab, sc = labels.tolist(), scores.tolist()
    assert tk.recall_at_k(labels, scores, k) == pytest.approx(seed001_recall(lab, sc, k))
    assert tk.precision_at_k(labels, scores, k) == pytest.approx(seed001_precision(lab, sc, k))
    assert tk.specificity_at_k(labels, scores, k) == pytest.approx(seed001_specificity(lab, sc, k))
    assert tk.f1_at_k(labels, scores, k) == pytest.approx(seed001_f1(lab, sc, k))


# ---- seed 002: R-precision, precision and recall from a top-max(R) matrix (its torch code in numpy)


def seed002(scores, truth, k):
    R = truth.sum(axis=1)
    topr = np.argsort(-scores, axis=1, kind="stable")[:, : int(R.max())]
    isin_rmat = np.take_along_axis(truth, topr, axis=1).astype(float)
    isin_mat = isin_rmat[:, :k]
    prec = (isin_mat.sum(-1) / k).sum() / len(R)
    rec = (isin_mat.sum(-1) / R).sum() / len(R)
    msk = np.arange(1, R.max() + 1) > R[:, None]
    isin_rmat[msk] = 0
    rprec = (isin_rmat.sum(-1) / R).sum() / len(R)
    return prec, rec, rprec


@pytest.mark.parametrize("seed", range(5))
def test_seed002_r_precision(seed):
    rng = np.random.default_rng(seed)
    users, items, k = 30, 25, 5
    scores = rng.random((users, items))
    truth = rng.random((users, items)) < 0.2
    truth[np.arange(users), rng.integers(0, items, users)] = True  # every user has R >= 1
    prec, rec, rprec = seed002(scores, truth, k)
    long = pd.DataFrame({"user": np.repeat(np.arange(users), items), "rel": truth.ravel().astype(int),
                         "score": scores.ravel()})
    res = tk.evaluate(long, metrics=[f"precision@{k}", f"recall@{k}", "r_precision"], query="user",
                      relevance="rel", score="score")
    got = res.summary.loc["score"]
    assert got[f"precision@{k}"] == pytest.approx(prec)
    assert got[f"recall@{k}"] == pytest.approx(rec)
    assert got["r_precision"] == pytest.approx(rprec)
    for u in range(3):
        assert tk.r_precision(truth[u], scores[u]) == pytest.approx(seed002(scores[u:u + 1], truth[u:u + 1], k)[2])


# ---- seed 003: ratings thresholded at 3.5, the worked example and Surprise's recipe

SEED003 = pd.DataFrame({
    "item": ["item7", "item5", "item10", "item2", "item2", "item1"],  # item2 twice, as printed
    "actual": [2, 5, 4, 2, 3, 4],
    "predicted": [4.9, 4.5, 4.3, 3.6, 3.4, 2.3],
    "user": "u",
})


def test_seed003_worked_example():
    res = tk.evaluate(SEED003, metrics=["precision@3", "recall@3"], query="user", relevance="actual",
                      score="predicted", threshold=3.5)
    assert res.summary.loc["predicted"].tolist() == pytest.approx([2 / 3, 2 / 3])


def test_seed003_surprise_recipe():
    # only predictions >= 3.5 are recommended; precision over the recommended items
    res = tk.evaluate(SEED003, metrics=["precision@3", "recall@3", "precision@10", "recall@10"], query="user",
                      relevance="actual", score="predicted", conventions="surprise")
    got = res.summary.loc["predicted"]
    assert got["precision@3"] == pytest.approx(2 / 3) and got["recall@3"] == pytest.approx(2 / 3)
    # at 10: four recommended (item7, item5, item10, item2), two relevant; item1 (4, predicted 2.3)
    # is relevant but never recommended
    assert got["precision@10"] == pytest.approx(2 / 4) and got["recall@10"] == pytest.approx(2 / 3)


def test_seed003_limit_cases_undefined_is_one():
    # "If there are no items recommended ... we set precision at k to 1", and recall 1 with no relevant
    frame = pd.DataFrame({"user": ["a", "a", "b"], "actual": [4, 2, 1], "predicted": [1.0, 2.0, 4.0]})
    res = tk.evaluate(frame, metrics=["precision@2", "recall@2"], query="user", relevance="actual",
                      score="predicted", conventions="surprise", undefined=1.0)
    pq = res.per_query.set_index("user")
    assert pq.loc["a", "precision@2"] == 1.0  # nothing scored >= 3.5: nothing recommended
    assert pq.loc["b", "recall@2"] == 1.0  # no relevant item


# ---- seed 004: the recall@10 = 5/8 and recall@5 = 3/8 example, and its groupby-apply recipe


def test_seed004_example():
    relevant = {1, 3, 4, 6, 8, 11, 13, 14}
    rel = [int(i in relevant) for i in range(15)]
    scores = [15 - i for i in range(15)]  # shown in index order
    assert tk.recall_at_k(rel, scores, 10) == 5 / 8
    assert tk.recall_at_k(rel, scores, 5) == 3 / 8


def seed004_recall_at_k(dataframe, k=5, user_col="user", item_col="item", score_col="score", target_col="target"):
    def recall(recommendation, targets):
        if len(targets) == 0:
            return 0.0
        return float(np.sum(np.isin(recommendation, targets))) / len(targets)

    return dataframe.groupby(user_col).apply(lambda d: recall(
        d.sort_values(score_col, ascending=False)[item_col].values[:k],
        d[d[target_col] == 1][item_col].values), include_groups=False).mean()


@pytest.mark.parametrize("k", [1, 5, 10])
def test_seed004_groupby_recipe(k):
    rng = np.random.default_rng(k)
    n = 2000
    frame = pd.DataFrame({"user": rng.integers(0, 100, n), "item": rng.permutation(n),
                          "score": rng.permutation(n) / n, "target": (rng.random(n) < 0.1).astype(int)})
    # seed 004 scores users without a target as 0 and averages them in: empty_queries="keep"
    res = tk.evaluate(frame, metrics=[f"recall@{k}"], query="user", relevance="target", item="item",
                      empty_queries="keep", undefined=0.0)
    assert res.summary.iloc[0, 0] == pytest.approx(seed004_recall_at_k(frame, k=k))
