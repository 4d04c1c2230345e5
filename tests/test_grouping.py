"""Grouping rows by query: every path (grouped input, dense / sparse integer ids, other ids, the
radix partition with many buckets and threads) against a stable sort."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import topkeval as tk
from topkeval.inputs import grouped as logmod
from topkeval.kernels import grouping


def reference(query: np.ndarray):
    """(offsets, labels, order): grouped input stays in input order, anything else ascending ids."""
    starts = np.concatenate([[0], np.flatnonzero(query[1:] != query[:-1]) + 1]) if len(query) else np.zeros(0, int)
    runs = query[starts]
    if len(np.unique(runs)) == len(runs):
        return np.append(starts, len(query)), runs, np.arange(len(query))
    labels, codes = np.unique(query, return_inverse=True)
    order = np.argsort(codes, kind="stable")
    counts = np.bincount(codes, minlength=len(labels))
    return np.concatenate([[0], np.cumsum(counts)]), labels, order


def check(query: np.ndarray) -> None:
    offsets, grp, labels = logmod.group_rows(query)
    ref_offsets, ref_labels, order = reference(query)
    np.testing.assert_array_equal(offsets, ref_offsets)
    np.testing.assert_array_equal(np.asarray(labels), ref_labels)
    rows = np.arange(len(query), dtype=np.int64)
    moved = rows if grp is None else grp.apply(rows)
    np.testing.assert_array_equal(moved, order)  # input order kept within each query
    values = np.random.default_rng(0).random(len(query))
    np.testing.assert_array_equal(values if grp is None else grp.apply(values), values[order])


@pytest.fixture
def small_buckets(monkeypatch):
    """Many buckets and two threads even for a few hundred rows (the same for every example)."""
    monkeypatch.setattr(grouping, "BUCKET_ROWS", 8)
    monkeypatch.setattr(grouping, "THREAD_ROWS", 16)


ids = st.sampled_from(["dense", "negative", "sparse", "huge", "uint64", "str", "float"])


@settings(max_examples=150, deadline=None)
@given(st.integers(1, 40), st.integers(1, 400), ids, st.booleans(), st.integers(0, 2**32 - 1))
def test_group_rows_equals_a_stable_sort(n_queries, n_rows, kind, shuffled, seed):
    rng = np.random.default_rng(seed)
    q = np.sort(rng.integers(0, n_queries, n_rows)) if not shuffled else rng.integers(0, n_queries, n_rows)
    if kind == "sparse":
        q = q * 3 + 7  # span between n/4 and 4n: the ranked table
    elif kind == "negative":
        q = q - 20  # dense ids below zero
    elif kind == "uint64":
        q = q.astype(np.uint64) + np.uint64(2**64 - 100)  # beyond the int64 range
    elif kind == "huge":
        q = q.astype(np.int64) * 10**12 - 5  # no table: a sort of the distinct ids
    elif kind == "str":
        q = np.array([f"q{v:03d}" for v in q], dtype=object)
    elif kind == "float":
        q = q / 2.0
    check(q)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.integers(1, 60), st.integers(50, 600), st.integers(0, 2**32 - 1))
def test_radix_partition_with_many_buckets_and_threads(small_buckets, n_queries, n_rows, seed):
    rng = np.random.default_rng(seed)
    check(rng.integers(0, n_queries, n_rows))


def test_every_row_its_own_query_stays_in_input_order():
    q = np.array([5, 2, 9, 1], np.int64)
    offsets, grp, labels = logmod.group_rows(q)
    assert grp is None and offsets.tolist() == [0, 1, 2, 3, 4] and labels.tolist() == [5, 2, 9, 1]


def test_absent_ids_of_a_dense_range_are_not_queries():
    q = np.array([40, 0, 40, 3, 0, 3, 40, 0, 0, 3, 3, 40] * 3, np.int64)  # ids 1, 2, 4..39 absent
    offsets, grp, labels = logmod.group_rows(q)
    assert labels.tolist() == [0, 3, 40] and np.diff(offsets).tolist() == [12, 12, 12]


def test_mixed_id_types_are_refused():
    """'1' and 1 are different ids as typed: a column mixing them is almost surely a mistake."""
    q = np.array(["b", 1, "b", 1, "a"], dtype=object)
    with pytest.raises(tk.ColumnError, match="one kind.*str.*int"):
        logmod.group_rows(q)


def test_evaluate_shuffled_equals_grouped_with_threads(small_buckets):
    import topkeval as tk

    rng = np.random.default_rng(3)
    n = 3000
    q = np.repeat(np.arange(60), 50)
    frame = {"query": q, "relevance": (rng.random(n) < 0.2).astype(int), "s": rng.random(n).round(2)}
    perm = rng.permutation(n)
    shuffled = {k: v[perm] for k, v in frame.items()}
    metrics = ["recall@5", "precision@10", "r_precision", "ndcg@10"]
    a = tk.evaluate(frame, metrics=metrics, score="s", ties="expected").per_query
    b = tk.evaluate(shuffled, metrics=metrics, score="s", ties="expected").per_query
    np.testing.assert_array_equal(a[metrics].to_numpy(), b[metrics].to_numpy())  # to the last bit


def test_per_query_order_is_documented_order():
    """Results.per_query: queries in input order for grouped rows, ascending ids otherwise."""
    import topkeval as tk

    grouped = {"query": [7, 7, 3, 3, 5, 5], "relevance": [1, 0, 0, 1, 1, 1], "s": [0.1, 0.2, 0.3, 0.4, 0.5, 0.6]}
    assert tk.evaluate(grouped, metrics=["recall@1"], score="s").per_query["query"].tolist() == [7, 3, 5]
    shuffled = {k: [v[i] for i in (0, 2, 4, 1, 3, 5)] for k, v in grouped.items()}
    assert tk.evaluate(shuffled, metrics=["recall@1"], score="s").per_query["query"].tolist() == [3, 5, 7]
    names = {**shuffled, "query": [f"q{q}" for q in shuffled["query"]]}
    assert tk.evaluate(names, metrics=["recall@1"], score="s").per_query["query"].tolist() == ["q3", "q5", "q7"]


@pytest.mark.parametrize("seed", range(5))
def test_duplicate_checks_equal_pandas(seed):
    """The compiled per-query duplicate checks (integer keys, and strings read from Arrow buffers)
    count exactly the rows pandas finds duplicated within their query."""
    import pyarrow as pa

    from topkeval.kernels.grouping import count_duplicates, count_text_duplicates

    rng = np.random.default_rng(seed)
    sizes = rng.integers(1, 60, 300)
    offsets = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
    q = np.repeat(np.arange(len(sizes)), sizes)
    keys = rng.integers(-5, 400, offsets[-1])
    words = np.array(["", "a", "é", "ab", "ba", "x" * 40, "日本", "a\x00b", "a\x00c"] + [f"w{i}" for i in range(300)],
                     dtype=object)
    text = words[rng.integers(0, len(words), offsets[-1])]
    for got, values in ((count_duplicates(offsets, keys), keys),
                        (count_text_duplicates(offsets, pa.array(text, pa.string())), text),
                        (count_text_duplicates(offsets, pa.array(text, pa.large_string()).slice(0)), text)):
        dup = pd.DataFrame({"q": q, "v": values}).duplicated().to_numpy()
        assert got == (int(dup.sum()), int(np.argmax(dup)) if dup.any() else -1)


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("spread", ["dense", "sparse"])
def test_duplicates_and_grades_by_key_equal_pandas_whether_keys_are_dense_or_not(seed, spread, monkeypatch):
    """Keys that are codes of distinct ids (in [0, DENSE_KEYS): looked up in one array indexed by key)
    and keys that are not (large or negative: a hash table per query) give the same duplicates and
    grades as pandas, on one thread and on several (queries split between them)."""
    from topkeval.kernels import grouping

    rng = np.random.default_rng(seed)
    sizes = rng.integers(0, 80, 400)
    offsets = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
    q = np.repeat(np.arange(len(sizes)), sizes)
    keys = rng.integers(0, 3000, offsets[-1])
    j_sizes = rng.integers(0, 30, len(sizes))
    j_offsets = np.concatenate([[0], np.cumsum(j_sizes)]).astype(np.int64)
    jq = np.repeat(np.arange(len(sizes)), j_sizes)
    j_items = np.concatenate([rng.choice(3000, n, replace=False) for n in j_sizes]).astype(np.int64)
    j_grades = rng.integers(-1, 4, len(j_items)).astype(np.float64)
    if spread == "sparse":
        keys, j_items = keys * 10**9 - 7, j_items * 10**9 - 7
    assert bool(grouping._dense(keys, j_items)) == (spread == "dense")
    dup = pd.DataFrame({"q": q, "k": keys}).duplicated().to_numpy()
    table = pd.DataFrame({"q": jq, "k": j_items, "g": j_grades})
    looked = pd.DataFrame({"q": q, "k": keys}).merge(table, how="left", on=["q", "k"])
    for threads in (1, 3):
        monkeypatch.setattr(grouping, "THREAD_ROWS", 1 if threads > 1 else 10**9)
        assert grouping.count_duplicates(offsets, keys, threads=threads) == (int(dup.sum()), int(np.argmax(dup)))
        grades, found = grouping.judge(offsets, keys, j_offsets, j_items, j_grades, threads=threads)
        assert found.tolist() == looked["g"].notna().tolist()
        assert grades.tolist() == looked["g"].fillna(0.0).tolist()


def test_duplicate_count_by_hand():
    """Rows repeating an earlier key of their query, each counted once: a key three times is two
    repeats, in a short query (pairs compared) and a long one (hashed)."""
    from topkeval.kernels.grouping import count_duplicates

    assert count_duplicates(np.array([0, 3, 5]), np.array([7, 7, 7, 1, 2])) == (2, 1)
    assert count_duplicates(np.array([0, 20]), np.full(20, 5)) == (19, 1)
    assert count_duplicates(np.array([0, 2, 4]), np.array([1, 2, 1, 2])) == (0, -1)


def test_text_duplicates_in_a_sliced_shuffled_arrow_column():
    import pyarrow as pa

    import topkeval as tk

    table = pa.table({"query": ["b", "a", "b", "a", "a"], "item": ["x", "y", "y", "é", "y"],
                      "relevance": [1, 0, 1, 1, 1], "score": [0.1, 0.2, 0.3, 0.4, 0.5]})
    with pytest.raises(tk.DataError, match="1 duplicate .* query 'a' lists item 'y'"):
        tk.evaluate(table, ["P@1"], item="item")
    ok = tk.evaluate(table.slice(0, 4), ["P@1", "recall@2"], item="item", ties="item_desc")
    assert ok.per_query["query"].tolist() == ["a", "b"]  # not grouped: ascending ids


def test_grouped_object_ids_keep_input_order_and_refuse_missing():
    import topkeval as tk

    frame = pd.DataFrame({"query": np.array(["z", "z", "a", "m"], dtype=object), "relevance": [1, 0, 1, 1],
                          "score": [0.1, 0.2, 0.3, 0.4]})
    assert tk.evaluate(frame, ["P@1"]).per_query["query"].tolist() == ["z", "a", "m"]
    with pytest.raises(tk.ColumnError, match="missing query ids"):
        tk.evaluate(frame.assign(query=np.array(["z", None, "a", "m"], dtype=object)), ["P@1"])


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
def test_count_nonfinite_interpreted_and_compiled_in_every_float_width(dtype):
    # interpreted, a float64 bound (1.797e308) overflowed to inf as a float32, with a RuntimeWarning,
    # and float32 infinities counted as finite
    import warnings

    values = np.array([0.5, np.inf, -np.inf, np.nan, np.finfo(dtype).max, -np.finfo(dtype).max, 0.0], dtype=dtype)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert grouping._nonfinite_range.py_func(values, 0, len(values)) == 3
        if dtype != np.float16:  # numeric_column converts float16 to float64 first (numba has no float16)
            assert grouping.count_nonfinite(values) == 3


@settings(max_examples=100, deadline=None)
@given(st.lists(st.integers(0, 3), max_size=300), st.integers(1, 5))
def test_run_starts_split_over_threads_equals_one_pass(values, threads):
    """Runs found in parts (a run may cross a part's edge, or a part hold no new run) equal one pass
    by hand."""
    values = np.asarray(values, np.int64)
    want = [i for i in range(len(values)) if i == 0 or values[i] != values[i - 1]]
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(grouping, "THREAD_ROWS", 4)
        assert grouping.run_starts(values, threads=threads).tolist() == want
