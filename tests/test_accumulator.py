"""MatrixEvaluator: batches accumulated equal evaluate_matrix on the whole matrix and the long format
of the same data, under every convention, for numpy and torch, every form of relevance, half
precision, several models, and torch.distributed (a 2-process gloo group on CPU)."""

from __future__ import annotations

import gc
import math
import pickle
import socket
import warnings
import weakref

import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st

import topkeval as tk
from strategies import conventions
from topkeval.metrics.names import FAMILIES

# every family with a cutoff and no required parameter, exact under every tie rule (those computed under
# deterministic rules only are checked on score matrices in test_ir_measures.py), beyond-accuracy ones apart
METRICS = [f"{name}@3" for name, fam in FAMILIES.items()
           if fam.cutoff != "none" and not fam.beyond and fam.ips != "pooled" and not any(p.required for p in fam.params)
           and fam.ties is None] + [
    "fbeta(beta=2)@2", "recall@1", "precision@9", "ndcg(gain=exp)@4", "r_precision", "num_ret", "num_rel_ret", "num_rel"]
UNCUT = ["ap", "rr", "ndcg", "bpref", "auc", "err"]
INFO_KEYS = ["queries", "evaluated", "skipped_empty", "rows", "evaluated_per_model", "rows_per_model", "ties_at_cutoff",
             "models", "metrics", "conventions"]


def _data(seed, users=12, items=9):
    rng = np.random.default_rng(seed)
    scores = rng.integers(0, 4, (users, items)) / 2  # heavy ties
    grades = rng.choice([0, 0, 0, 1, 2], (users, items))
    grades[0] = 0  # a user with no relevant item
    exclude = (rng.random((users, items)) < 0.2) & (grades == 0)
    exclude[1] = True  # a user whose whole catalogue is excluded
    return scores, grades, exclude


def _long(scores: dict, grades, exclude, users=None):
    """The long format: one row per non-excluded (user, item), one score column per model."""
    u, i = np.nonzero(~exclude) if exclude is not None else np.nonzero(np.ones(grades.shape, bool))
    frame = {"user": u if users is None else np.asarray(users)[u], "item": i, "relevance": grades[u, i]}
    frame.update({m: np.asarray(S, dtype=np.float64)[u, i] for m, S in scores.items()})
    return pd.DataFrame(frame)


def _bounds(cuts, users):
    """Row ranges of the batches: cut points in (0, users), sorted, distinct."""
    edges = [0, *sorted(set(c for c in cuts if 0 < c < users)), users]
    return list(zip(edges[:-1], edges[1:]))


def _relevance(grades, form):
    """A batch's relevance in one of the accepted forms (edge lists relative to the batch)."""
    if form == "dense":
        return grades
    if form == "scipy":
        return sp.csr_matrix(grades)
    rows, items = np.nonzero(grades)
    return (rows, items, grades[rows, items])


def _exclusion(exclude, form):
    if exclude is None or form == "dense":
        return exclude
    if form == "scipy":
        return sp.coo_matrix(exclude)
    return np.nonzero(exclude)


def _accumulate(scores, grades, exclude, bounds, metrics, conv, form="dense", users=None, **kw):
    ev = tk.MatrixEvaluator(metrics, **conv, **kw)
    for u0, u1 in bounds:
        batch = {m: S[u0:u1] for m, S in scores.items()} if isinstance(scores, dict) else scores[u0:u1]
        ev.update(batch, _relevance(grades[u0:u1], form),
                  _exclusion(None if exclude is None else exclude[u0:u1], form),
                  users=None if users is None else users[u0:u1])
    return ev.compute()


def _same(got, want, metrics, common=None):
    """Per-query values equal (on the users both have), and so the means where the users are the same."""
    pq_got = got.per_query.set_index(["model", "user"])
    pq_want = want.per_query.set_index(["model", "user"])
    index = pq_want.index if common is None else common
    pd.testing.assert_frame_equal(pq_got.loc[index, metrics], pq_want.loc[index, metrics], check_exact=False,
                                  rtol=1e-12, atol=1e-12)


@given(seed=st.integers(0, 10_000), conv=conventions(), uncut=st.booleans(),
       cuts=st.lists(st.integers(1, 11), max_size=6), form=st.sampled_from(["dense", "scipy", "edges"]),
       excluded=st.booleans())
def test_batches_equal_the_whole_matrix_and_the_long_format(seed, conv, uncut, cuts, form, excluded):
    scores, grades, exclude = _data(seed)
    exclude = exclude if excluded else None
    metrics = METRICS + (UNCUT if uncut else [])
    bounds = _bounds(cuts, len(scores))
    got = _accumulate(scores, grades, exclude, bounds, metrics, conv, form)
    whole = tk.evaluate_matrix(scores, grades, metrics=metrics, exclude=exclude, **conv)
    pd.testing.assert_frame_equal(got.per_query, whole.per_query)
    pd.testing.assert_frame_equal(got.summary, whole.summary)
    assert {k: got.info[k] for k in INFO_KEYS} == {k: whole.info[k] for k in INFO_KEYS}
    # candidates_selected depends on the batches (R-precision selects down to the largest R of a batch)
    same = ["users", "items", "depth", "relevant_excluded"]
    assert {k: got.info["matrix"][k] for k in same} == {k: whole.info["matrix"][k] for k in same}
    assert got.info["matrix"]["updates"] == len(bounds)
    long = tk.evaluate(_long({"scores": scores}, grades, exclude), metrics=metrics, query="user", score="scores",
                       item="item", **conv)
    # a user whose whole catalogue is excluded has no row in the long format, and is no query of the matrix
    # either, under every empty_queries
    _same(got, long, long.metrics)
    assert len(got.per_query) == len(long.per_query)
    pd.testing.assert_frame_equal(got.summary, long.summary, check_exact=False, rtol=1e-12, atol=1e-12)
    assert {k: got.info[k] for k in ("queries", "evaluated", "skipped_empty")} == \
        {k: long.info[k] for k in ("queries", "evaluated", "skipped_empty")}


@settings(max_examples=100)
@given(cuts=st.lists(st.integers(1, 29), max_size=8), seed=st.integers(0, 100))
def test_any_split_and_user_ids(cuts, seed):
    """Batches of one row, uneven batches, batches larger than the internal batch size, own ids."""
    scores, grades, exclude = _data(seed, users=30, items=7)
    users = np.array([f"u{i:02d}" for i in range(30)])
    got = _accumulate(scores, grades, exclude, _bounds(cuts, 30), METRICS + UNCUT, {}, users=users, batch_size=4)
    long = tk.evaluate(_long({"scores": scores}, grades, exclude, users=users), metrics=METRICS + UNCUT,
                       query="user", score="scores", item="item")
    assert got.per_query["user"].tolist() == [u for u in users if u in set(long.per_query["user"])]
    _same(got, long, long.metrics)
    pd.testing.assert_frame_equal(got.summary, long.summary, check_exact=False, rtol=1e-12, atol=1e-12)


def test_one_row_at_a_time():
    scores, grades, exclude = _data(1)
    got = _accumulate(scores, grades, exclude, [(u, u + 1) for u in range(len(scores))], METRICS + UNCUT, {})
    whole = tk.evaluate_matrix(scores, grades, metrics=METRICS + UNCUT, exclude=exclude)
    pd.testing.assert_frame_equal(got.per_query, whole.per_query)
    assert got.info["matrix"]["updates"] == len(scores)


def test_several_models_and_compare():
    scores, grades, exclude = _data(4, users=40)
    rng = np.random.default_rng(0)
    models = {"old": scores, "new": np.where(grades > 0, scores + rng.integers(0, 2, scores.shape), scores)}
    bounds = _bounds([5, 6, 30], 40)
    got = _accumulate(models, grades, exclude, bounds, METRICS, {})
    long = tk.evaluate(_long(models, grades, exclude), metrics=METRICS, query="user", score=["old", "new"],
                       item="item")
    assert got.info["models"] == ["old", "new"]
    _same(got, long, long.metrics)
    pd.testing.assert_frame_equal(got.summary, long.summary, check_exact=False, rtol=1e-12, atol=1e-12)
    options = {"baseline": "old", "n_resamples": 500, "seed": 1}
    pd.testing.assert_frame_equal(got.compare(**options), long.compare(**options), check_exact=False, rtol=1e-12)
    # the same models in separate updates (model=), in another order of batches
    ev = tk.MatrixEvaluator(METRICS)
    for name in ("old", "new"):
        for u0, u1 in bounds[::-1]:
            ev.update(models[name][u0:u1], grades[u0:u1], exclude[u0:u1], users=np.arange(u0, u1), model=name)
    apart = ev.compute()
    pd.testing.assert_frame_equal(apart.summary, got.summary)
    # user 1's every item is excluded: no row in the long format, no query here (40 users, 39 queries)
    assert apart.info["queries"] == long.info["queries"] == 39 and apart.info["matrix"]["users"] == 40
    assert apart.info["skipped_empty"] == got.info["skipped_empty"] == long.info["skipped_empty"]
    by_user = ["model", "user"]
    pd.testing.assert_frame_equal(apart.per_query.sort_values(by_user, ignore_index=True),
                                  got.per_query.sort_values(by_user, ignore_index=True))
    # the resampled intervals depend on the order of the users; the paired counts do not
    paired = ["model", "metric", "delta", "wins", "ties", "losses"]
    pd.testing.assert_frame_equal(apart.compare(**options)[paired], got.compare(**options)[paired])


def test_state_holds_no_scores():
    """The evaluator keeps per-user values, not the scores: a batch's matrix is freed after update."""
    ev = tk.MatrixEvaluator(["recall@5", "ndcg@5"])
    rng = np.random.default_rng(0)
    scores = rng.random((50, 3000))
    ref = weakref.ref(scores)
    ev.update(scores, rng.random((50, 3000)) < 0.01)
    del scores
    gc.collect()
    assert ref() is None
    state_bytes = len(pickle.dumps(ev._state))
    assert state_bytes < 50 * 3000  # the matrix alone is 1.2 MB; the state a few values per user


def test_reset_and_empty_compute():
    scores, grades, exclude = _data(2)
    ev = tk.MatrixEvaluator(METRICS)
    with pytest.raises(tk.DataError, match=r"before any update\(\)"):
        ev.compute()
    ev.update(scores[:3], grades[:3])
    ev.reset()
    with pytest.raises(tk.DataError, match=r"before any update\(\)"):
        ev.compute()
    ev.update(scores[:0], grades[:0])  # a batch of no rows changes nothing
    with pytest.raises(tk.DataError, match=r"before any update\(\)"):
        ev.compute()
    for u0 in range(0, 12, 5):
        ev.update(scores[u0:u0 + 5], grades[u0:u0 + 5], exclude[u0:u0 + 5])
    pd.testing.assert_frame_equal(ev.compute().per_query,
                                  tk.evaluate_matrix(scores, grades, metrics=METRICS, exclude=exclude).per_query)


def test_a_user_twice_is_an_error_not_double_counting():
    scores, grades, _ = _data(3)
    ev = tk.MatrixEvaluator(["recall@3"])
    ev.update(scores[:6], grades[:6], users=np.arange(6))
    with pytest.raises(tk.DataError, match=r"^user 4 was updated before: each user is evaluated once.*reset\(\)"):
        ev.update(scores[4:], grades[4:], users=np.arange(4, 12))  # users 4 and 5 again (a padded shard)
    ev.update(scores[6:], grades[6:], users=np.arange(6, 12))  # refused at update: the evaluator is as it was
    pd.testing.assert_frame_equal(ev.compute().per_query,
                                  tk.evaluate_matrix(scores, grades, metrics=["recall@3"]).per_query)
    with pytest.raises(tk.DataError, match="user 11 was updated before"):
        ev.update(scores[:1], grades[:1], users=[11])  # after compute() too, without reset()
    ev.reset()
    ev.update(scores[:6], grades[:6], users=np.arange(6))  # a new evaluation: the same users again
    named = tk.MatrixEvaluator(["recall@3"])
    named.update(scores[:2], grades[:2], users=["u1", "u2"])
    with pytest.raises(tk.DataError, match="user 'u2' was updated before"):
        named.update(scores[2:4], grades[2:4], users=["u3", "u2"])
    with pytest.raises(tk.DataError, match="repeated ids in one update"):
        tk.MatrixEvaluator(["recall@3"]).update(scores[:2], grades[:2], users=[7, 7])
    mixed = tk.MatrixEvaluator(["recall@3"])
    mixed.update(scores[:2], grades[:2], users=[1, 2])
    mixed.update(scores[2:4], grades[2:4], users=["1", "3"])
    with pytest.raises(tk.DataError, match="numbers and others with text"):
        mixed.compute()
    two = tk.MatrixEvaluator(["recall@3"])
    two.update({"a": scores[:3], "b": scores[:3]}, grades[:3], users=[0, 1, 2])
    with pytest.raises(tk.DataError, match="user 0 was updated before for model 'b'"):
        two.update(scores[:3], grades[:3], users=[0, 1, 2], model="b")
    two.update(scores[:3], grades[:3], users=[0, 1, 2], model="c")  # another model: the same users again
    assert two.compute().models == ["a", "b", "c"]


@pytest.mark.parametrize("call,error,pattern", [
    (lambda ev: ev.update(np.ones((2, 4)), np.ones((2, 4))) or ev.update(np.ones((2, 5)), np.ones((2, 5))),
     tk.DataError, "scores have 5 columns, but the first update had 4"),
    (lambda ev: ev.update(np.ones((2, 4)), np.ones((2, 4)), users=[1, 2, 3]), tk.DataError, "one id per row"),
    (lambda ev: ev.update(np.ones((2, 4)), np.ones((2, 4)), users=[1.0, np.nan]), tk.ColumnError, "missing user ids"),
    (lambda ev: ev.update({"a": np.ones((2, 4))}, np.ones((2, 4)), model="b"), tk.ParameterError, "already a dict"),
    (lambda ev: ev.update(np.array([[0.1, np.nan]]), np.ones((1, 2)), model="m"), tk.DataError,
     "scores of model 'm' hold NaN"),
    (lambda ev: ev.update(np.ones((2, 4)), (np.array([0, 2]), np.array([0, 1]))), tk.DataError,
     r"user ids of the edge list must lie in \[0, 2\)"),
    (lambda ev: ev.update(np.ones((2, 4)), np.ones((4, 2))), tk.DataError, "shape"),
    (lambda ev: ev.update({"a": np.ones((2, 4)), "b": np.ones((1, 4))}, np.ones((2, 4))), tk.DataError,
     "different shapes"),
])
def test_update_errors(call, error, pattern):
    with pytest.raises(error, match=pattern):
        call(tk.MatrixEvaluator(["recall@3"]))


@pytest.mark.parametrize("kwargs,error,pattern", [
    ({"metrics": ["recal@3"]}, tk.UnknownMetricError, "Unknown metric 'recal@3'.*Did you mean 'recall"),
    ({"ties": "random"}, tk.ParameterError, "ties"),
    ({"batch_sise": 3}, tk.ParameterError, "batch_size"),
    ({"batch_size": 0}, tk.ParameterError, "batch_size"),
    ({"sync_on_compute": "yes"}, tk.ParameterError, "sync_on_compute"),
])
def test_constructor_errors(kwargs, error, pattern):
    with pytest.raises(error, match=pattern):
        tk.MatrixEvaluator(**kwargs)


def test_empty_queries_error_and_short_lists_error_at_update():
    scores, grades, _ = _data(5)
    with pytest.raises(tk.EmptyQueryError):
        tk.MatrixEvaluator(["recall@3"], empty_queries="error").update(scores, grades)
    with pytest.raises(tk.ShortListError):
        tk.MatrixEvaluator(["recall@20"], short_lists="error").update(scores[2:], grades[2:])


def test_warnings_once_at_compute():
    scores, grades, _ = _data(6)
    ev = tk.MatrixEvaluator(["recall@3"])
    for u0 in range(0, 12, 4):
        ev.update(scores[u0:u0 + 4], grades[u0:u0 + 4], exclude=grades[u0:u0 + 4] > 0)  # held-out in exclude
    with pytest.warns(tk.TopkevalWarning) as caught:
        res = ev.compute()
    leaked = [str(w.message) for w in caught if "also in exclude" in str(w.message)]
    assert leaked == [f"{int((grades > 0).sum())} held-out relevant (user, item) pairs are also in exclude: they "
                      "leave the candidates and R (a training item cannot be recommended). If exclude holds the "
                      "training interactions, the held-out set overlaps it."]
    assert res.info["matrix"]["relevant_excluded"] == int((grades > 0).sum())


# --- torch ------------------------------------------------------------------------------------------


def test_torch_cpu_every_form_of_relevance():
    torch = pytest.importorskip("torch", reason="torch is not installed")
    scores, grades, exclude = _data(8, users=20)
    want = tk.evaluate_matrix(scores, grades, metrics=METRICS + UNCUT, exclude=exclude, ties="item_desc")
    for form in ("dense", "sparse", "edges"):
        ev = tk.MatrixEvaluator(METRICS + UNCUT, ties="item_desc")
        for u0, u1 in _bounds([1, 2, 9], 20):
            S, G, E = torch.tensor(scores[u0:u1]), torch.tensor(grades[u0:u1]), torch.tensor(exclude[u0:u1])
            if form == "sparse":
                G, E = G.to_sparse(), E.to_sparse()
            elif form == "edges":
                rows, items = torch.nonzero(G, as_tuple=True)
                G, E = (rows, items, G[rows, items]), tuple(torch.nonzero(E, as_tuple=True))
            ev.update(S, G, E, users=torch.arange(u0, u1))
        pd.testing.assert_frame_equal(ev.compute().per_query, want.per_query)


def test_torch_gradients_and_no_grad():
    torch = pytest.importorskip("torch", reason="torch is not installed")
    scores, grades, exclude = _data(9)
    want = tk.evaluate_matrix(scores, grades, metrics=METRICS, exclude=exclude).per_query
    S = torch.tensor(scores, requires_grad=True)
    ev = tk.MatrixEvaluator(METRICS)
    ev.update(S * 1.0, grades, exclude)  # a tensor with a graph, outside no_grad
    pd.testing.assert_frame_equal(ev.compute().per_query, want)
    ev.reset()
    with torch.no_grad():
        ev.update(S * 1.0, grades, exclude)
        pd.testing.assert_frame_equal(ev.compute().per_query, want)
    assert S.grad is None


@pytest.mark.parametrize("device_counts", [None, True])
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_half_precision_ties_at_that_precision(dtype, device_counts, monkeypatch):
    """Scores equal in half precision tie; the oracle is the long format on the scores rounded to
    that precision, then cast to float32 (exact). ``device_counts``: the counts made with torch ops
    (the GPU's algorithm), here on CPU tensors."""
    torch = pytest.importorskip("torch", reason="torch is not installed")
    from topkeval.backends import matrix

    monkeypatch.setattr(matrix, "DEVICE_COUNTS", device_counts)
    rng = np.random.default_rng(11)
    users, items = 40, 60
    fine = rng.random((users, items)).astype(np.float32) * 0.05 + 0.5  # distinct in float32
    grades = (rng.random((users, items)) < 0.2).astype(int)
    exclude = (rng.random((users, items)) < 0.1) & (grades == 0)
    half = torch.tensor(fine).to(getattr(torch, dtype))
    rounded = half.to(torch.float32).numpy()
    assert len(np.unique(rounded)) < len(np.unique(fine)) / 10  # many ties that float32 does not have
    metrics = ["recall@5", "precision@5", "ndcg@10", "r_precision", "ap@10"]
    for conv in ({}, {"ties": "item_asc"}, {"ties": "pessimistic", "score_threshold": 0.52}):
        ev = tk.MatrixEvaluator(metrics, **conv)
        for u0, u1 in _bounds([7, 8, 33], users):
            ev.update(half[u0:u1], grades[u0:u1], exclude[u0:u1], users=np.arange(u0, u1))
        got = ev.compute()
        long = tk.evaluate(_long({"scores": rounded}, grades, exclude), metrics=metrics, query="user",
                           score="scores", item="item", **conv)
        _same(got, long, metrics)
        pd.testing.assert_frame_equal(got.summary, long.summary, check_exact=False, rtol=1e-12, atol=1e-12)
        assert got.info["ties_at_cutoff"] == long.info["ties_at_cutoff"]
        assert got.info["ties_at_cutoff"]["scores"] > 0  # the half-precision ties decided values
        if not conv:
            unrounded = tk.evaluate_matrix(fine, grades, metrics=metrics, exclude=exclude)
            assert not np.allclose(unrounded.summary.to_numpy(), got.summary.to_numpy())
    # numpy float16 too
    ev = tk.MatrixEvaluator(metrics)
    ev.update(fine.astype(np.float16), grades, exclude)
    long = tk.evaluate(_long({"scores": fine.astype(np.float16).astype(np.float32)}, grades, exclude),
                       metrics=metrics, query="user", score="scores", item="item")
    pd.testing.assert_frame_equal(ev.compute().summary, long.summary, check_exact=False, rtol=1e-12, atol=1e-12)


def test_cuda_equals_numpy():
    torch = pytest.importorskip("torch", reason="torch is not installed")
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device on this machine (the GPU path is checked where one is present)")
    scores, grades, exclude = _data(12, users=40, items=30)
    for conv in ({}, {"ties": "item_desc"}, {"ties": "optimistic", "score_threshold": 0.5}):
        want = tk.evaluate_matrix(scores, grades, metrics=METRICS + UNCUT, exclude=exclude, **conv)
        for dtype in (torch.float64, torch.float32, torch.float16, torch.bfloat16):  # exact for multiples of 0.5
            ev = tk.MatrixEvaluator(METRICS + UNCUT, **conv)
            for u0, u1 in _bounds([1, 17, 18], 40):
                ev.update(torch.tensor(scores[u0:u1], dtype=dtype, device="cuda"),
                          torch.tensor(grades[u0:u1], device="cuda").to_sparse(),
                          torch.tensor(exclude[u0:u1], device="cuda"), users=torch.arange(u0, u1, device="cuda"))
            got = ev.compute()
            pd.testing.assert_frame_equal(got.per_query, want.per_query)
            assert got.info["ties_at_cutoff"] == want.info["ties_at_cutoff"]


# --- torch.distributed --------------------------------------------------------------------------------


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _init(rank: int, world: int, port: int):
    import torch.distributed as dist

    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world)
    return dist


def test_distributed_world_of_one():
    """An initialised group of one process: compute goes through all_gather_object."""
    pytest.importorskip("torch", reason="torch is not installed")
    dist = _init(0, 1, _free_port())
    try:
        scores, grades, exclude = _data(13)
        got = _accumulate(scores, grades, exclude, _bounds([4], 12), METRICS, {})
        assert got.info["matrix"]["processes"] == 1
        pd.testing.assert_frame_equal(got.per_query, tk.evaluate_matrix(scores, grades, metrics=METRICS,
                                                                         exclude=exclude).per_query)
    finally:
        dist.destroy_process_group()


CASES = ("sharded", "padded", "numbered")


def _rank_main(rank: int, world: int, port: int, out: str) -> None:
    """One process of the 2-process test: rank r evaluates the users u with u % world == r (as a
    DistributedSampler without shuffling does), in three cases, and writes its Results or its error."""
    dist = _init(rank, world, port)
    try:
        scores, grades, exclude = _data(14, users=25)
        for case in CASES:
            mine = np.arange(rank, 25, world)
            if case == "padded" and rank == 1:  # DistributedSampler pads the shorter shard with the first users
                mine = np.concatenate([mine, [0]])
            ev = tk.MatrixEvaluator(METRICS + UNCUT, ties="item_desc")
            for part in np.array_split(mine, 3):
                ev.update(scores[part], grades[part], exclude[part], users=None if case == "numbered" else part)
            try:
                res = ev.compute()
                result = (res.summary, res.per_query, res.info)
            except tk.TopkevalError as error:
                result = error
            with open(f"{out}/{case}{rank}.pkl", "wb") as f:
                pickle.dump(result, f)
    finally:
        dist.destroy_process_group()


def test_distributed_two_processes(tmp_path):
    """Two processes on CPU (gloo): every rank gets the Results of all users, equal to
    evaluate_matrix on the whole matrix; a user on both ranks and rows without ids are errors on both."""
    pytest.importorskip("torch", reason="torch is not installed")
    import torch.multiprocessing as mp

    mp.spawn(_rank_main, args=(2, _free_port(), str(tmp_path)), nprocs=2, join=True)
    results = {case: [pickle.loads((tmp_path / f"{case}{r}.pkl").read_bytes()) for r in range(2)] for case in CASES}
    for r in results["padded"]:
        assert isinstance(r, tk.DataError) and "1 users were updated more than once (for example user 0)" in str(r)
    for r in results["numbered"]:
        assert isinstance(r, tk.DataError) and "pass users=" in str(r)
    scores, grades, exclude = _data(14, users=25)
    want = tk.evaluate_matrix(scores, grades, metrics=METRICS + UNCUT, exclude=exclude, ties="item_desc")
    for summary, per_query, info in results["sharded"]:
        pd.testing.assert_frame_equal(summary, want.summary, check_exact=False, rtol=1e-12, atol=1e-12)
        got = per_query.set_index("user").sort_index()
        pd.testing.assert_frame_equal(got, want.per_query.set_index("user"))
        assert info["matrix"]["processes"] == 2 and info["queries"] == want.info["queries"] == 24  # user 1: all excluded
        assert info["evaluated"] == want.info["evaluated"] and info["skipped_empty"] == want.info["skipped_empty"]
    (s0, pq0, _), (s1, pq1, _) = results["sharded"]
    pd.testing.assert_frame_equal(s0, s1, check_exact=True)  # every rank the same numbers, to the last bit
    pd.testing.assert_frame_equal(pq0, pq1, check_exact=True)


@pytest.mark.parametrize("dtype", ["float64", "float32", "float16", "bfloat16"])
@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf])
def test_torch_non_finite_scores_are_refused(dtype, bad):
    torch = pytest.importorskip("torch", reason="torch is not installed")
    scores = torch.rand(3, 5).to(getattr(torch, dtype))
    scores[2, 4] = bad
    kind = "NaN" if math.isnan(bad) else ("-inf" if bad < 0 else "inf")
    with pytest.raises(tk.DataError, match=rf"NaN or infinite values: {kind} at user 2, item 4; every score"):
        tk.MatrixEvaluator(["recall@3"]).update(scores, torch.ones(3, 5))
    grades = torch.ones(3, 5)
    grades[1, 1] = math.nan  # a dense tensor of grades: found without copying the matrix to the host
    with pytest.raises(tk.DataError, match="NaN or infinite grades"):
        tk.MatrixEvaluator(["recall@3"]).update(torch.rand(3, 5), grades)


def test_a_refused_update_changes_nothing():
    scores, grades, exclude = _data(15)
    ev = tk.MatrixEvaluator(METRICS)
    ev.update(scores[:4], grades[:4], exclude[:4])
    bad = scores[4:8].copy()
    bad[1, 1] = np.nan
    with pytest.raises(tk.DataError, match="NaN"):
        ev.update(bad, grades[4:8], exclude[4:8])
    ev.update(scores[4:], grades[4:], exclude[4:])  # the counter goes on from 4
    pd.testing.assert_frame_equal(ev.compute().per_query,
                                  tk.evaluate_matrix(scores, grades, metrics=METRICS, exclude=exclude).per_query)


def test_models_must_score_the_same_users():
    scores, grades, _ = _data(6, users=8)
    ev = tk.MatrixEvaluator(["recall@3"])
    ev.update({"a": scores[:4], "b": scores[:4]}, grades[:4], users=[0, 1, 2, 3])
    ev.update({"a": scores[4:]}, grades[4:], users=[4, 5, 6, 7])
    with pytest.raises(tk.DataError, match="different users"):
        ev.compute()
    ev = tk.MatrixEvaluator(["recall@3"])
    ev.update(scores[:4], grades[:4], users=[0, 1, 2, 3], model="a")
    ev.update(scores[4:], grades[4:], users=[4, 5, 6, 7], model="b")  # as many users, other ones
    with pytest.raises(tk.DataError, match="different users"):
        ev.compute()


def test_repeated_graded_cells_are_refused_and_bool_scores_work():
    import scipy.sparse as sp

    S = np.array([[0.9, 0.8, 0.7, 0.1]])
    with pytest.raises(tk.DataError, match="more than once"):
        tk.evaluate_matrix(S, (np.array([0, 0, 0]), np.array([1, 3, 3]), np.array([1.0, 1.0, 1.0])), ["ndcg@4"])
    with pytest.raises(tk.DataError, match="more than once"):
        tk.evaluate_matrix(S, sp.coo_matrix((np.ones(3), ([0, 0, 0], [1, 3, 3])), shape=(1, 4)), ["ndcg@4"])
    once = tk.evaluate_matrix(S, (np.array([0, 0, 0]), np.array([1, 3, 3])), ["ndcg@4"]).summary  # an edge twice: one
    assert once.equals(tk.evaluate_matrix(S, np.array([[0, 1, 0, 1]]), ["ndcg@4"]).summary)
    as_bool = tk.evaluate_matrix(S > 0.75, np.array([[0, 1, 0, 1]]), ["recall@2"]).summary.iloc[0, 0]
    assert as_bool == tk.evaluate_matrix((S > 0.75).astype(float), np.array([[0, 1, 0, 1]]), ["recall@2"]).summary.iloc[0, 0]


def test_update_after_compute_without_reset_warns():
    """The running counter cannot tell a forgotten reset() from new users: a warning says so."""
    scores, grades, exclude = _data(2)
    ev = tk.MatrixEvaluator(["recall@3"])
    ev.update(scores[:6], grades[:6], exclude[:6])
    ev.compute()
    with pytest.warns(tk.TopkevalWarning, match=r"update\(\) after compute\(\) without reset\(\).*6 already"):
        ev.update(scores[:6], grades[:6], exclude[:6])
    ev.reset()
    ev.update(scores[:6], grades[:6], exclude[:6])
    ev.compute()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ev.reset()
        ev.update(scores[:6], grades[:6], exclude[:6])  # after reset(): no warning
        ev.update(scores[6:], grades[6:], exclude[6:])  # between updates: none either


def test_ids_of_one_kind_and_one_source():
    ev = tk.MatrixEvaluator(["recall@3"])
    with pytest.raises(tk.DataError, match="users mixes numbers and text"):
        ev.update(np.ones((2, 4)), np.ones((2, 4)), users=[1, "1"])
    ev.update(np.ones((2, 4)), np.ones((2, 4)), users=[10, 11])
    with pytest.raises(tk.DataError, match="some updates name their rows with users= and others do not"):
        ev.update(np.ones((2, 4)), np.ones((2, 4)))
    ev = tk.MatrixEvaluator(["recall@3"])
    ev.update(np.ones((2, 4)), np.ones((2, 4)))
    with pytest.raises(tk.DataError, match="some updates name their rows"):
        ev.update(np.ones((2, 4)), np.ones((2, 4)), users=[10, 11])


def test_models_updated_apart_need_the_same_truth():
    scores, grades, exclude = _data(4)
    ev = tk.MatrixEvaluator(["recall@3"])
    ev.update(scores, grades, exclude, model="old")
    ev.update(scores[::-1].copy(), grades, exclude, model="new")
    ev.compute()  # the same relevance and exclusions: fine
    ev = tk.MatrixEvaluator(["recall@3"])
    ev.update(scores, grades, model="old")
    ev.update(scores, grades, np.zeros_like(exclude), model="new")
    ev.compute()  # no exclusions, or an empty matrix of them: the same
    other = grades.copy()
    other[3, np.argmax(grades[3] == 0)] = 1
    for truth, ex in ((other, exclude), (grades, exclude ^ (np.arange(exclude.shape[1]) == 0))):
        ev = tk.MatrixEvaluator(["recall@3"])
        ev.update(scores, grades, exclude, model="old")
        ev.update(scores, truth, ex, model="new")
        with pytest.raises(tk.DataError, match="models 'old' and 'new' were given different relevance or exclusions"):
            ev.compute()


def test_epochs_as_models_compare_without_warnings():
    """One evaluator over epochs (a model name per epoch, compute() after each) compares them."""
    scores, grades, exclude = _data(8)
    rng = np.random.default_rng(8)
    epochs = [scores, scores + rng.normal(0, 0.3, scores.shape)]
    ev = tk.MatrixEvaluator(["recall@3", "ndcg@5"])
    with warnings.catch_warnings():
        warnings.filterwarnings("error", message=r"update\(\) after compute\(\)")
        for n, S in enumerate(epochs, 1):
            for lo in range(0, len(S), 5):
                ev.update(S[lo:lo + 5], grades[lo:lo + 5], exclude[lo:lo + 5], model=f"epoch {n}")
            ev.compute()  # logged after each epoch
    res = ev.compute()
    for n, S in enumerate(epochs, 1):
        alone = tk.evaluate_matrix(S, grades, metrics=["recall@3", "ndcg@5"], exclude=exclude)
        np.testing.assert_allclose(res.summary.loc[f"epoch {n}"].to_numpy(), alone.summary.iloc[0].to_numpy(),
                                   rtol=1e-12)
    table = res.compare(baseline="epoch 1")
    assert set(table.reset_index()["model"]) == {"epoch 2"}
