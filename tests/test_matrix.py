"""Score matrices equal the long format of the same data, on numpy and on torch (CPU, and CUDA where present)."""

from __future__ import annotations

import shutil
import warnings
from pathlib import Path

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


def _has_cuda() -> bool:
    """A CUDA device, asked of torch only where a driver is installed (no torch import on other machines)."""
    if not (Path("/proc/driver/nvidia").exists() or shutil.which("nvidia-smi")):
        return False
    try:
        import torch
    except ImportError:
        return False
    return torch.cuda.is_available()


needs_cuda = pytest.mark.skipif(not _has_cuda(), reason="no CUDA device on this machine (the GPU path is checked "
                                                          "where one is present: benchmarks/gpu_check.sh)")


def _data(seed, users=12, items=9, ties=True):
    rng = np.random.default_rng(seed)
    scores = rng.integers(0, 4, (users, items)) / 2 if ties else rng.random((users, items))
    grades = rng.choice([0, 0, 0, 1, 2], (users, items))
    grades[0] = 0  # a user with no relevant item
    exclude = (rng.random((users, items)) < 0.2) & (grades == 0)
    exclude[1] = True  # a user whose whole catalogue is excluded
    return scores, grades, exclude


def _long(scores, grades, exclude):
    u, i = np.nonzero(~exclude)
    return pd.DataFrame({"user": u, "item": i, "relevance": grades[u, i], "scores": scores[u, i]})


def _check(scores, grades, exclude, metrics, conv, **kw):
    got = tk.evaluate_matrix(scores, grades, metrics=metrics, exclude=exclude, **conv, **kw)
    long = _long(np.asarray(scores if not hasattr(scores, "numpy") else scores.numpy()), grades, exclude)
    want = tk.evaluate(long, metrics=metrics, query="user", score="scores", item="item", **conv)
    pq_got = got.per_query.set_index("user")
    pq_want = want.per_query.set_index("user")
    # users whose whole catalogue is excluded have no row in the long format: no query on the matrix either
    pd.testing.assert_frame_equal(pq_got[want.metrics], pq_want[want.metrics], check_exact=False,
                                  rtol=1e-12, atol=1e-12)
    pd.testing.assert_frame_equal(got.summary.rename(index={"scores": "x"}), want.summary.rename(index={"scores": "x"}),
                                  check_exact=False, rtol=1e-12, atol=1e-12)
    assert {k: got.info[k] for k in ("queries", "evaluated", "skipped_empty")} == \
        {k: want.info[k] for k in ("queries", "evaluated", "skipped_empty")}


@given(seed=st.integers(0, 10_000), conv=conventions(), uncut=st.booleans())
def test_matrix_equals_long_format(seed, conv, uncut):
    scores, grades, exclude = _data(seed)  # user 1: every item excluded, under every empty_queries
    _check(scores, grades, exclude, METRICS + (UNCUT if uncut else []), conv)


#: trec_eval's other measures (the second pass), gain maps that give grade 0 a gain included (then the
#: cells a score matrix does not list take ranks in the ideal gains)
TREC_MEASURES = ["set_map", "utility(a=2,c=-1)", "bin_g", "r_precision_mult(mult=0.6)", "Rprec_mult_1.50", "rndcg",
                 "rndcg(gain={0:1,2:5})", "num_nonrel_judged_ret", "gm_map", "gm_bpref", "g", "g(gain={0:1,1:3})",
                 "ndcg_rel(gain={0:0.5,2:4})", "ndcg_rel", "11pt_avg..25,.5"]


@given(seed=st.integers(0, 10_000), conv=conventions())
def test_trec_measures_on_a_matrix_equal_the_long_format(seed, conv):
    scores, grades, exclude = _data(seed)
    exact = [m for m in TREC_MEASURES if tk.parse_metric(m).info.ties is None
             or conv["ties"] in tk.parse_metric(m).info.ties]
    _check(scores, grades, exclude, exact, conv)


@pytest.mark.parametrize("batch_size", [1, 5, None])
def test_batches_and_forms_of_relevance(batch_size):
    scores, grades, exclude = _data(3)
    binary = (grades > 0).astype(int)
    a = tk.evaluate_matrix(scores, binary, metrics=METRICS, exclude=exclude, batch_size=batch_size)
    b = tk.evaluate_matrix(scores, sp.csr_matrix(binary), metrics=METRICS, exclude=sp.coo_matrix(exclude))
    c = tk.evaluate_matrix(scores, np.nonzero(binary), metrics=METRICS, exclude=np.nonzero(exclude))
    pd.testing.assert_frame_equal(a.summary, b.summary)
    pd.testing.assert_frame_equal(a.summary, c.summary)


def test_torch_cpu_equals_numpy():
    torch = pytest.importorskip("torch")
    scores, grades, exclude = _data(5)
    for conv in ({}, {"ties": "item_desc"}, {"ties": "pessimistic", "short_lists": "shrink"}):
        a = tk.evaluate_matrix(scores, grades, metrics=METRICS + UNCUT, exclude=exclude, **conv)
        b = tk.evaluate_matrix(torch.tensor(scores), torch.tensor(grades), metrics=METRICS + UNCUT,
                               exclude=torch.tensor(exclude).to_sparse(), **conv)
        c = tk.evaluate_matrix(torch.tensor(scores, dtype=torch.float32), torch.tensor(grades).to_sparse(),
                               metrics=METRICS + UNCUT, exclude=torch.tensor(exclude), **conv)
        pd.testing.assert_frame_equal(a.per_query, b.per_query)
        pd.testing.assert_frame_equal(a.per_query, c.per_query)  # scores are exact in float32 here


def test_cuda_equals_numpy():
    """On a GPU: selection on the device, every convention, ties, exclusions, thresholds, batches."""
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device on this machine (the GPU path is checked where one is present)")
    for seed in range(4):
        scores, grades, exclude = _data(seed, users=40, items=30)
        for conv in ({}, {"ties": "item_desc"}, {"ties": "optimistic", "short_lists": "shrink"},
                     {"ties": "first", "score_threshold": 0.5}, {"empty_queries": "keep", "undefined": float("nan")}):
            a = tk.evaluate_matrix(scores, grades, metrics=METRICS + UNCUT, exclude=exclude, **conv)
            for dtype, batch in ((torch.float64, None), (torch.float32, 7)):
                b = tk.evaluate_matrix(torch.tensor(scores, dtype=dtype, device="cuda"),
                                       torch.tensor(grades, device="cuda").to_sparse(), metrics=METRICS + UNCUT,
                                       exclude=torch.tensor(exclude, device="cuda"), batch_size=batch, **conv)
                pd.testing.assert_frame_equal(a.per_query, b.per_query)
                assert a.info["ties_at_cutoff"] == b.info["ties_at_cutoff"]


def test_cuda_device_counts_equal_numpy():
    """On a GPU, metrics the device counts cover are counted there (torch ops): the same values
    as numpy under every tie rule, exclusions, thresholds, half precision, batches."""
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device on this machine (the GPU path is checked where one is present)")
    from topkeval.kernels import torch_counts

    calls = []
    real = torch_counts.counts
    for seed in range(4):
        scores, grades, exclude = _data(seed, users=40, items=30)
        for conv in ({}, {"ties": "item_desc"}, {"ties": "optimistic", "short_lists": "shrink"},
                     {"ties": "pessimistic", "threshold": 2}, {"ties": "first", "score_threshold": 0.5},
                     {"nonpositive_scores": "miss"}, {"empty_queries": "keep", "undefined": float("nan")}):
            metrics = _counted_metrics(conv)
            a = tk.evaluate_matrix(scores, grades, metrics=metrics, exclude=exclude, **conv)
            for dtype, batch in ((torch.float64, None), (torch.float32, 7), (torch.float16, 5)):
                with pytest.MonkeyPatch.context() as mp:
                    mp.setattr(torch_counts, "counts", lambda *x, **k: calls.append(1) or real(*x, **k))
                    b = tk.evaluate_matrix(torch.tensor(scores, dtype=dtype, device="cuda"),
                                           torch.tensor(grades, device="cuda").to_sparse(), metrics=metrics,
                                           exclude=torch.tensor(exclude, device="cuda"), batch_size=batch, **conv)
                pd.testing.assert_frame_equal(a.per_query, b.per_query)  # scores are exact in float16 here
                assert a.info["ties_at_cutoff"] == b.info["ties_at_cutoff"]
    assert calls, "the device counts were not used on the GPU"


@needs_cuda
@settings(max_examples=60)
@given(seed=st.integers(0, 10_000), conv=conventions(), ties=st.booleans(), users=st.integers(2, 70),
       items=st.integers(1, 500), dtype=st.sampled_from(["float64", "float32", "float16"]),
       batch=st.sampled_from([None, 1, 7]), counted=st.booleans())
def test_cuda_equals_numpy_on_any_shape(seed, conv, ties, users, items, dtype, batch, counted):
    """On a GPU, any shape (one item, one user, depths beyond the list), every convention, both device
    paths (counts made with torch ops where the plan allows, else the selection copied to the CPU
    kernel): the numbers of numpy on the same (rounded) scores."""
    import torch

    scores, grades, exclude = _data(seed, users=users, items=items, ties=ties)
    scores = scores.astype(dtype).astype(np.float64)  # what the device holds, exactly
    if dtype == "float16":
        scores = np.clip(scores, -60000, 60000)
    metrics = _counted_metrics(conv) if counted else METRICS + UNCUT
    if not metrics:
        return

    def run(on_device):
        """(the result or the refusal's message, the warnings' messages)"""
        with warnings.catch_warnings(record=True) as said:
            warnings.simplefilter("always")
            try:
                if not on_device:
                    out = tk.evaluate_matrix(scores, grades, metrics=metrics, exclude=exclude, **conv)
                else:
                    out = tk.evaluate_matrix(torch.tensor(scores, dtype=getattr(torch, dtype), device="cuda"),
                                             torch.tensor(grades, device="cuda").to_sparse(), metrics=metrics,
                                             exclude=torch.tensor(exclude, device="cuda"), batch_size=batch, **conv)
            except tk.TopkevalError as exc:
                out = f"{type(exc).__name__}: {exc}"
        return out, sorted(str(w.message) for w in said)

    (want, want_said), (got, got_said) = run(False), run(True)
    assert got_said == want_said  # the same warnings, on the device as on numpy
    if isinstance(want, str):  # refused (every candidate excluded...): refused alike
        assert got == want
        return
    pd.testing.assert_frame_equal(got.per_query, want.per_query, check_exact=False, rtol=1e-12, atol=1e-12)
    assert got.info["ties_at_cutoff"] == want.info["ties_at_cutoff"]


@needs_cuda
@pytest.mark.parametrize("ties", ["expected", "pessimistic", "item_desc"])
def test_cuda_large_matrix_equals_numpy(ties):
    """A matrix several blocks wide (3,000 users x 40,000 items, float32, ties among coarse scores,
    a tenth of the cells excluded): the device's numbers are numpy's, counted and selected."""
    import torch

    rng = np.random.default_rng(3)
    scores = np.round(rng.random((3000, 40_000), dtype=np.float32) * 512) / 512
    grades = np.where(rng.random(scores.shape) < 0.002, rng.integers(1, 4, scores.shape), 0)
    exclude = (rng.random(scores.shape) < 0.1) & (grades == 0)
    S, G, E = torch.tensor(scores, device="cuda"), torch.tensor(grades, device="cuda").to_sparse(), \
        torch.tensor(exclude, device="cuda")
    for metrics in (["recall@20", "precision@10", "ndcg@50", "r_precision", "ap@100", "rr", "hit_rate@5"],
                    ["recall@20", "bpref", "ndcg", "err@10"]):
        want = tk.evaluate_matrix(scores, grades, metrics=metrics, exclude=exclude, ties=ties)
        got = tk.evaluate_matrix(S, G, metrics=metrics, exclude=E, ties=ties, batch_size=1024)
        pd.testing.assert_frame_equal(got.per_query, want.per_query, check_exact=False, rtol=1e-12, atol=1e-12)


def test_seed002_torch_code_transcribed():
    """Seed 002's own PyTorch computation (users with R >= 1, no ties) equals evaluate_matrix."""
    torch = pytest.importorskip("torch")
    gen = torch.Generator().manual_seed(0)
    n_users, n_items, k = 20, 30, 5
    scores = torch.rand(n_users, n_items, generator=gen)
    truth = torch.rand(n_users, n_items, generator=gen) < 0.15
    truth[torch.arange(n_users), torch.randint(0, n_items, (n_users,), generator=gen)] = True
    gt_index = truth.nonzero().T  # edge_index: users, items
    # --- seed 002 ---
    R = torch.bincount(gt_index[0], minlength=n_users).float()
    topr = torch.topk(scores, int(R.max()), dim=1, sorted=True).indices
    ground_truth = torch.full((n_users, n_items), False)
    ground_truth[gt_index[0], gt_index[1]] = True
    isin_rmat = ground_truth.gather(1, topr)
    isin_mat = isin_rmat[:, :k]
    prec = (isin_mat.sum(dim=-1) / k).sum() / n_users
    rec = (isin_mat.sum(dim=-1) / R).sum() / n_users
    msk = torch.arange(1, R.max() + 1) > R.unsqueeze(1)
    isin_rmat[msk] = 0
    rprec = (isin_rmat.sum(dim=-1) / R).sum() / n_users
    # --- topkeval ---
    res = tk.evaluate_matrix(scores, tuple(gt_index), metrics=[f"precision@{k}", f"recall@{k}", "r_precision"])
    assert res.summary.iloc[0].tolist() == pytest.approx([float(prec), float(rec), float(rprec)], abs=1e-6)


def test_selection_keeps_few_candidates():
    rng = np.random.default_rng(0)
    scores = rng.random((50, 2000))
    truth = rng.random((50, 2000)) < 0.01
    res = tk.evaluate_matrix(scores, truth, metrics=["recall@10", "ndcg@20"])
    assert res.info["matrix"]["candidates_selected"] == 50 * 20


@pytest.mark.parametrize("call,pattern", [
    (lambda: tk.evaluate_matrix(np.array([[np.nan, 1.0]]), np.array([[1, 0]])), "NaN or infinite"),
    (lambda: tk.evaluate_matrix(np.ones((2, 3)), np.ones((3, 2))), "shape"),
    (lambda: tk.evaluate_matrix(np.ones(3), np.ones(3)), "2-D"),
    (lambda: tk.evaluate_matrix(np.ones((2, 3)), np.array([[0, 5], [0, 1]])), "edge list is given as a tuple"),
    (lambda: tk.evaluate_matrix(np.ones((2, 3)), (np.array([0, 5]), np.array([0, 1]))), "user ids of the edge list"),
    (lambda: tk.evaluate_matrix(np.ones((2, 3)), np.ones((2, 3)), batch_size=0), "batch_size"),
])
def test_matrix_errors(call, pattern):
    with pytest.raises(tk.TopkevalError, match=pattern):
        call()


def test_float32_precision_selects_the_whole_float32_tie_group():
    """score_precision="float32": scores equal in float32 tie, also across the selection boundary."""
    scores = np.array([[1.0 + 1e-9, 1.0, 0.5]])  # the first two are one float32
    grades = np.array([[0, 1, 0]])
    got = tk.evaluate_matrix(scores, grades, metrics=["recall@1", "hit_rate@1"], score_precision="float32")
    assert got.summary.iloc[0].tolist() == [0.5, 0.5]  # one relevant of a tie of 2 for 1 slot
    exact = tk.evaluate_matrix(scores, grades, metrics=["recall@1", "hit_rate@1"])
    assert exact.summary.iloc[0].tolist() == [0.0, 0.0]


@pytest.mark.parametrize("threshold", [0.7, 0.3, 0.1])
def test_score_threshold_on_float32_scores_is_compared_exactly(threshold):
    """A float32 score equal to float32(threshold) is below a threshold that float32 rounds down (0.7),
    and not below one it rounds up (0.3, 0.1), as in the long format (compared in float64)."""
    near = np.float32(threshold)
    scores = np.array([[near, 0.9]], dtype=np.float32)
    got = tk.evaluate_matrix(scores, np.array([[1, 0]]), metrics=["recall@2", "num_ret"], score_threshold=threshold)
    kept = float(near) >= threshold
    assert got.summary.iloc[0].tolist() == [1.0 if kept else 0.0, 2.0 if kept else 1.0]


def test_a_dict_of_models_equals_each_model_alone():
    scores, grades, exclude = _data(7)
    both = tk.evaluate_matrix({"a": scores, "b": scores[:, ::-1].copy()}, grades, metrics=METRICS, exclude=exclude)
    a = tk.evaluate_matrix(scores, grades, metrics=METRICS, exclude=exclude)
    b = tk.evaluate_matrix(scores[:, ::-1].copy(), grades, metrics=METRICS, exclude=exclude)
    assert both.info["models"] == ["a", "b"]
    pd.testing.assert_series_equal(both.summary.loc["a"], a.summary.loc["scores"], check_names=False)
    pd.testing.assert_series_equal(both.summary.loc["b"], b.summary.loc["scores"], check_names=False)
    assert both.compare(baseline="a", n_resamples=200)["model"].tolist() == ["b"] * len(METRICS)
    with pytest.raises(tk.DataError, match="different shapes"):
        tk.evaluate_matrix({"a": scores, "b": scores[:, :3]}, grades)


def _counted_metrics(conv) -> list[str]:
    """The metrics of METRICS + UNCUT whose statistics the device counts give (no second pass)."""
    from topkeval.conventions import resolve
    from topkeval.engine import make_plan

    c = resolve(None, owner="test", **conv)
    return [m for m in METRICS + UNCUT if not make_plan([m], c).ranked and not m.startswith("rbp_residual")]


@given(seed=st.integers(0, 10_000), conv=conventions(), ties=st.booleans(), float32=st.booleans(),
       batch=st.sampled_from([None, 1, 5]))
def test_device_counts_equal_the_long_format(seed, conv, ties, float32, batch):
    """The GPU's algorithm (torch ops: top T, binary searches, the boundary group counted over the
    row, tie groups of judged cells) run on CPU tensors equals the long format under every convention."""
    torch = pytest.importorskip("torch")
    from topkeval.backends import matrix
    from topkeval.kernels import torch_counts

    conv = dict(conv, empty_queries="skip")
    scores, grades, exclude = _data(seed, users=14, items=11, ties=ties)
    grades = np.where(np.random.default_rng(seed).random(grades.shape) < 0.1, -1, grades)  # judged non-relevant
    calls = []
    real = torch_counts.counts
    metrics = _counted_metrics(conv)
    S = torch.tensor(scores, dtype=torch.float32 if float32 else torch.float64)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(torch_counts, "counts", lambda *a, **k: calls.append(1) or real(*a, **k))
        mp.setattr(matrix, "DEVICE_COUNTS", True)
        _check(S, grades, exclude, metrics, conv, batch_size=batch)
    from topkeval.conventions import resolve
    from topkeval.engine import make_plan

    if matrix.counted_on_device(make_plan(metrics, resolve(None, owner="test", **conv))):
        assert calls, "the device counts were not used"


def test_device_counts_boundary_groups_and_large_depths(monkeypatch):
    """Ties across the T-th score in every row (binary scores), depth beyond the list, whole rows
    excluded: the boundary group is counted over the whole row, under each tie rule."""
    torch = pytest.importorskip("torch")
    from topkeval.backends import matrix

    monkeypatch.setattr(matrix, "DEVICE_COUNTS", True)
    rng = np.random.default_rng(7)
    scores = (rng.random((30, 200)) < 0.3).astype(float)
    grades = rng.choice([0, 0, 0, 1, 3, -1], (30, 200))
    exclude = (rng.random((30, 200)) < 0.1) & (grades == 0)
    for ties in ("expected", "first", "optimistic", "pessimistic", "item_desc", "item_asc"):
        for metrics in (["recall@5", "precision@50", "ndcg@20", "r_precision", "hit_rate@3", "rr@10"],
                        ["ap", "ndcg", "rr", "recall@500"]):
            _check(torch.tensor(scores), grades, exclude, metrics, {"ties": ties, "short_lists": "shrink"})


def test_device_counts_fall_back_where_they_cannot_count(monkeypatch):
    """bpref (a second pass), RBP's residual and columns ordered as text take the selection path."""
    from topkeval.backends import matrix
    from topkeval.conventions import resolve
    from topkeval.engine import make_plan

    def plan(metrics, **conv):
        return make_plan(metrics, resolve(None, owner="test", **conv))

    assert matrix.counted_on_device(plan(["recall@5", "ndcg@3", "ap"]))
    assert not matrix.counted_on_device(plan(["recall@5", "bpref"]))
    assert not matrix.counted_on_device(plan(["rbp_residual(p=0.8)"]))
    assert not matrix.counted_on_device(plan(["recall@5"], ties="item_desc", item_order="text"))
    assert not matrix.counted_on_device(plan(["recall@5"], threshold=0))  # every grade-0 cell relevant


@given(seed=st.integers(0, 10_000), items=st.integers(1, 3000), depth=st.integers(1, 60),
       kind=st.sampled_from(["random", "ties", "ascending", "descending", "excluded_on_top"]),
       threshold=st.sampled_from([None, 0.5, 2.0]))
def test_threshold_selection_equals_a_partition(seed, items, depth, kind, threshold):
    """select_top (a sampled threshold, one pass, a selection among the few above it) keeps exactly
    the cells a full partition keeps, whatever the sample sees: sorted rows, heavy ties, excluded
    cells holding the row's top scores (as training items do)."""
    from topkeval.kernels.select import select_top

    rng = np.random.default_rng(seed)
    users = int(rng.integers(1, 6))
    S = {"random": lambda: rng.random((users, items)),
         "ties": lambda: rng.integers(0, 3, (users, items)).astype(float),
         "ascending": lambda: np.sort(rng.random((users, items)), axis=1),
         "descending": lambda: -np.sort(rng.random((users, items)), axis=1),
         "excluded_on_top": lambda: rng.random((users, items)).astype(np.float32)}[kind]()
    excluded = rng.random(S.shape) < 0.05
    if kind == "excluded_on_top":
        excluded = S >= np.quantile(S, 0.9, axis=1, keepdims=True)
    rows, cols, vals, below, finite = select_top(S, depth, sp.csr_matrix(excluded), threshold)
    assert finite.all()
    want_rows, want_cols = [], []
    for u in range(users):
        ok = ~excluded[u] & (S[u].astype(np.float64) >= (-np.inf if threshold is None else threshold))
        cand = np.flatnonzero(ok)
        if len(cand):
            kth = np.sort(S[u, cand])[::-1][min(depth, len(cand)) - 1]
            keep = cand[S[u, cand] >= kth]
            want_rows += [u] * len(keep)
            want_cols += keep.tolist()
        assert below[u] == (0 if threshold is None else int((~excluded[u] & (S[u] < threshold)).sum()))
    assert rows.tolist() == want_rows and cols.tolist() == want_cols
    assert np.array_equal(vals, S[rows, cols].astype(np.float64))
    bad = S.copy()
    bad[users - 1, int(rng.integers(0, items))] = [np.nan, np.inf, -np.inf][seed % 3]
    assert select_top(bad, depth)[4].tolist() == [True] * (users - 1) + [False]


@pytest.mark.parametrize("bad", [-np.inf, np.inf, np.nan])
def test_non_finite_scores_in_excluded_cells_are_not_candidates(bad):
    """Setting training items to -inf *and* excluding them is a common pattern: excluded cells may
    hold anything (they are never candidates); a non-finite score elsewhere is named precisely."""
    torch = pytest.importorskip("torch")
    from topkeval.backends import matrix

    scores, grades, exclude = _data(9, users=20, items=15)
    masked = np.where(exclude, bad, scores)
    metrics = ["recall@3", "ndcg@5", "r_precision", "ap"]
    want = tk.evaluate_matrix(scores, grades, metrics=metrics, exclude=exclude)
    for S in (masked, torch.tensor(masked), torch.tensor(masked, dtype=torch.float16)):
        for counts in (None, True):
            with pytest.MonkeyPatch.context() as mp:
                mp.setattr(matrix, "DEVICE_COUNTS", counts)
                got = tk.evaluate_matrix(S, grades, metrics=metrics, exclude=exclude, batch_size=7)
            pd.testing.assert_frame_equal(got.per_query, want.per_query)
    u, i = np.argwhere(~exclude)[5]
    masked[u, i] = bad
    kind = "NaN" if np.isnan(bad) else ("-inf" if bad < 0 else "inf")
    for S in (masked, torch.tensor(masked), torch.tensor(masked, dtype=torch.float16)):
        with pytest.raises(tk.DataError, match=rf"NaN or infinite values: {kind} at user {u}, item {i}; every score"):
            tk.evaluate_matrix(S, grades, metrics=metrics, exclude=exclude)  # the excluded ones are fine
    first = np.argwhere(np.isnan(masked) | np.isinf(masked))[0]
    with pytest.raises(tk.DataError, match=rf": \S+ at user {first[0]}, item {first[1]} \([\d,]+ such cells in users"):
        tk.evaluate_matrix(masked, grades, metrics=metrics)  # nothing excluded: every one counts


def test_messages_for_common_mistakes():
    with pytest.raises(tk.DataError, match=r"reshape\(1, -1\)"):
        tk.evaluate_matrix(np.ones(4), np.ones(4))
    with pytest.raises(tk.DataError, match="exclude is a dict.*np.repeat"):
        tk.evaluate_matrix(np.ones((2, 4)), np.ones((2, 4)), exclude={0: [1, 2]})
    with pytest.raises(tk.DataError, match=r"user ids of the edge list must lie in \[0, 2\).*number the rows"):
        tk.evaluate_matrix(np.ones((2, 4)), (np.array([0, 3]), np.array([0, 1])))
    with pytest.raises(tk.DataError, match="item ids of the edge list.*bipartite"):
        tk.evaluate_matrix(np.ones((2, 4)), (np.array([0, 1]), np.array([0, 9])))


@given(seed=st.integers(0, 10_000), conv=conventions(), ties=st.booleans(), batch=st.sampled_from([None, 1, 5]))
def test_rows_counted_in_place_equal_the_long_format(seed, conv, ties, batch):
    """Deep metrics on a CPU are counted on each row in place (no cell selected out): the same
    values as the long format under every convention, with judged non-relevant cells."""
    from topkeval.backends import matrix
    from topkeval.kernels import cpu

    conv = dict(conv, empty_queries="skip")
    scores, grades, exclude = _data(seed, users=14, items=11, ties=ties)
    grades = np.where(np.random.default_rng(seed).random(grades.shape) < 0.1, -1, grades)
    calls = []
    real = cpu.compute_matrix_rows
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(cpu, "compute_matrix_rows", lambda *a, **k: calls.append(1) or real(*a, **k))
        mp.setattr(matrix, "IN_PLACE_DEPTH", 10**6)  # every plan it covers
        _check(scores, grades, exclude, _counted_metrics(conv), conv, batch_size=batch)
    from topkeval.conventions import resolve
    from topkeval.engine import make_plan

    if matrix.counted_on_device(make_plan(_counted_metrics(conv), resolve(None, owner="test", **conv))):
        assert calls, "the rows were not counted in place"


@pytest.mark.parametrize("ties", ["expected", "pessimistic", "item_desc"])
def test_rows_in_place_large_and_threaded(ties):
    """Compiled and threaded (arrays over 2**20 cells), users with many relevant items (the sorting
    path beyond ROW_COUNT_MAX_RELEVANT), exclusions and a threshold: in place equals the selection path."""
    from topkeval.backends import matrix

    rng = np.random.default_rng(1)
    scores = rng.integers(0, 50, (300, 4000)).astype(np.float32)
    grades = (rng.random((300, 4000)) < np.linspace(0.001, 0.05, 300)[:, None]) * rng.integers(1, 4, (300, 4000))
    grades[:3, :1500] = rng.integers(0, 4, (3, 1500))  # rows with over 512 active cells: the sorting path
    exclude = (rng.random((300, 4000)) < 0.05) & (grades == 0)
    metrics = ["ap", "rr", "ndcg", "r_precision", "recall@1000", "ndcg(gain=exp)@2000"]
    for conv in ({"ties": ties}, {"ties": ties, "score_threshold": 10.0, "threshold": 2}):
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(matrix, "IN_PLACE_DEPTH", 0)
            want = tk.evaluate_matrix(scores, grades, metrics=metrics, exclude=exclude, **conv)
        got = tk.evaluate_matrix(scores, grades, metrics=metrics, exclude=exclude, **conv)
        pd.testing.assert_frame_equal(got.per_query, want.per_query, check_exact=False, rtol=1e-12, atol=1e-12)
        assert got.info["ties_at_cutoff"] == want.info["ties_at_cutoff"]
