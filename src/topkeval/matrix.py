"""Score matrices: full-catalogue evaluation of recommenders (users x items), on CPU or GPU.

``evaluate_matrix`` never sorts a user's whole catalogue. With T the largest cutoff the metrics
need (the largest R of a user for R-precision; the whole list for uncut rank metrics), it finds
each user's T-th largest score ``v`` by selection (``numpy.partition`` or ``torch.topk``), keeps the
candidates scoring ``>= v`` (so the tie group at the boundary is kept whole, and ties are resolved
exactly as in the long format), and hands only those to the CPU kernel, with each user's true list
length and relevant count. On a torch tensor the masking and selection run on the tensor's device,
batch by batch, and only the selected (user, item, score) triples are copied to the host.
"""

from __future__ import annotations

import math
import sys

import numpy as np

from .conventions import UNSET, resolve
from .errors import DataError, ParameterError
from .log import GroupedLog
from .names import parse_metrics
from .results import Results


def _is_torch(x) -> bool:
    return "torch" in sys.modules and isinstance(x, sys.modules["torch"].Tensor)


def _to_csr(values, shape, name: str, dense_dtype=np.float64):
    """A scipy CSR (float grades) from a dense array, a scipy sparse matrix, a torch tensor or an edge list."""
    import scipy.sparse as sp

    U, I = shape
    if values is None:
        return sp.csr_matrix((U, I), dtype=dense_dtype)
    if _is_torch(values):
        values = values.to_dense() if values.is_sparse else values
        values = values.detach().cpu().numpy()
    if sp.issparse(values):
        csr = sp.csr_matrix(values, dtype=dense_dtype)
    else:
        arr = np.asarray(values)
        if arr.ndim == 2 and arr.shape[0] == 2 and arr.shape != (U, I) and np.issubdtype(arr.dtype, np.integer):
            users, items = arr
            if len(users) and (users.min() < 0 or users.max() >= U or items.min() < 0 or items.max() >= I):
                raise DataError(f"{name} as an edge list (2 x E) must hold user ids in [0, {U}) and item ids in "
                                f"[0, {I}); subtract the number of users from bipartite item ids first (as seed 002 does).")
            csr = sp.csr_matrix((np.ones(len(users), dense_dtype), (users, items)), shape=(U, I))
            csr.data[:] = 1.0  # an edge listed twice is still one relevant item
        elif arr.shape == (U, I):
            if arr.dtype.kind not in "biuf":
                raise DataError(f"{name} must be boolean or numeric; got dtype {arr.dtype}.")
            if arr.dtype.kind == "f" and not np.isfinite(arr).all():
                raise DataError(f"{name} holds NaN or infinite values; grades must be finite.")
            csr = sp.csr_matrix(arr.astype(dense_dtype))
        else:
            raise DataError(f"{name} must have the shape of scores {shape} (dense or sparse) or be an edge list "
                            f"of shape (2, E); got shape {arr.shape}.")
    if csr.shape != (U, I):
        raise DataError(f"{name} has shape {csr.shape}, scores have {shape}.")
    csr.sum_duplicates()
    csr.sort_indices()
    csr.eliminate_zeros()
    return csr


def _needed_depth(metrics, R_max: int, n_items: int) -> int:
    from .metrics import RANK_FAMILIES

    depth = 1
    for m in metrics:
        if m.k is not None:
            depth = max(depth, m.k)
        elif m.family == "r_precision":
            depth = max(depth, R_max)
        elif m.family in RANK_FAMILIES:
            return n_items  # uncut rank metrics need the whole list
    return min(depth, n_items)


def _select_numpy(S: np.ndarray, depth: int):
    """Rows, columns and scores of the candidates scoring >= each row's depth-th largest score
    (excluded cells, at -inf, left out), row by row, columns ascending."""
    I = S.shape[1]
    kth = np.partition(S, I - depth, axis=1)[:, I - depth]
    rows, cols = np.nonzero((S >= kth[:, None]) & (S > -np.inf))
    return rows, cols, S[rows, cols]


def _select_torch(S, depth: int):
    """As :func:`_select_numpy`, on the tensor's device; only the selected cells are copied back
    (columns as int32, a count per row instead of a row per cell, scores in their own dtype)."""
    import torch

    kth = torch.topk(S, depth, dim=1, sorted=False).values.min(dim=1).values
    chosen = (S >= kth[:, None]) & (S > -math.inf)
    counts = chosen.sum(dim=1)
    idx = torch.nonzero(chosen)
    vals = S[idx[:, 0], idx[:, 1]]
    cols = idx[:, 1].to(torch.int32) if S.shape[1] < 2**31 else idx[:, 1]
    rows = np.repeat(np.arange(S.shape[0], dtype=np.int64), counts.cpu().numpy())
    return rows, cols.cpu().numpy(), vals.cpu().numpy().astype(np.float64)


def evaluate_matrix(scores, relevant, metrics=("recall@20", "precision@20", "r_precision"), exclude=None, *,
                    conventions=None, ties=UNSET, empty_queries=UNSET, undefined=UNSET, short_lists=UNSET,
                    threshold=UNSET, score_threshold=UNSET, batch_size: int | None = None,
                    threads: int | None = None) -> Results:
    """Evaluate a dense score matrix (users x items) against held-out relevance.

    Each row is a user's ranking of the whole catalogue; the metrics are those of
    :func:`topkeval.evaluate`, with the same conventions and the same values as on the long format
    of the same data (one row per non-excluded (user, item) pair). ``recall@k = h(k) / R`` with R
    the user's relevant, non-excluded items.

    Parameters
    ----------
    scores : ndarray or torch.Tensor, shape (users, items)
        Finite scores; a torch tensor is processed on its own device (CPU or CUDA).
    relevant : array, scipy sparse matrix, torch tensor (dense or sparse), or edge list (2, E)
        Grades (or booleans) of the held-out interactions. An edge list is seed 002's
        ``edge_index``: row 0 user ids, row 1 item ids in ``[0, items)``.
    metrics : list of str
        As in :func:`topkeval.evaluate`.
    exclude : same forms as ``relevant``, optional
        Items never to recommend to a user (the training interactions): removed from that user's
        candidates, as if their rows were absent from the long format.
    conventions, ties, empty_queries, undefined, short_lists, threshold, score_threshold
        As in :func:`topkeval.evaluate`.
    batch_size : int, optional
        Users per batch; by default about 2**24 scores per batch. Bounds the extra memory.

    Returns
    -------
    Results
        Queries are the user indices.

    Examples
    --------
    >>> import numpy as np, topkeval as tk
    >>> scores = np.array([[0.9, 0.1, 0.5], [0.2, 0.8, 0.4]])
    >>> truth = np.array([[1, 0, 1], [1, 0, 0]])
    >>> tk.evaluate_matrix(scores, truth, metrics=["recall@1", "r_precision"]).summary
            recall@1  r_precision
    model
    scores      0.25          0.5
    """
    from .api import evaluate_log

    conv = resolve(conventions, owner="evaluate_matrix", ties=ties, empty_queries=empty_queries, undefined=undefined,
                   short_lists=short_lists, threshold=threshold, score_threshold=score_threshold)
    mets = parse_metrics(metrics)
    torch_input = _is_torch(scores)
    if not torch_input:
        scores = np.asarray(scores)
        if scores.dtype.kind not in "biuf":
            raise DataError(f"scores must be numeric; got dtype {scores.dtype}.")
    if scores.ndim != 2:
        raise DataError(f"scores must be a 2-D matrix (users x items); got {scores.ndim} dimensions.")
    U, I = (int(x) for x in scores.shape)
    if U == 0 or I == 0:
        raise DataError(f"scores is empty (shape {(U, I)}).")
    rel_csr = _to_csr(relevant, (U, I), "relevant")
    exc_csr = _to_csr(exclude, (U, I), "exclude", np.float64) if exclude is not None else None
    if exc_csr is not None:
        exc_csr.data[:] = 1.0
        rel_csr = rel_csr - rel_csr.multiply(exc_csr)  # excluded items leave the candidates
        rel_csr.eliminate_zeros()
    on_gpu = torch_input and scores.device.type != "cpu"
    if batch_size is None:  # about 2**24 scores per batch on the CPU, 2**27 on a GPU (fewer synchronisations)
        batch_size = max(1, (1 << (27 if on_gpu else 24)) // I)
    elif isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise ParameterError(f"The 'batch_size' parameter of evaluate_matrix must be a positive int. Got {batch_size!r} instead.")
    grades_rel = rel_csr.data
    is_rel = grades_rel > 0 if conv.threshold is None else grades_rel >= conv.threshold
    from .kernels.grouping import count_per_group

    R = count_per_group(rel_csr.indptr.astype(np.int64), is_rel)
    depth = _needed_depth(mets, int(R.max()) if U else 0, I)
    thr = conv.score_threshold
    rel_keys = np.repeat(np.arange(U, dtype=np.int64), np.diff(rel_csr.indptr)) * I + rel_csr.indices
    rows_all, cols_all, vals_all, n_all = [], [], [], np.empty(U, np.int64)
    for u0 in range(0, U, batch_size):
        u1 = min(U, u0 + batch_size)
        if torch_input:
            import torch

            S = scores[u0:u1]
            if not S.dtype.is_floating_point:
                S = S.to(torch.float64)
            elif exc_csr is not None or thr is not None:
                S = S.clone()  # masked below; the caller's tensor is never written
            if not bool(torch.isfinite(S).all()):
                raise DataError(f"scores hold NaN or infinite values (users {u0}..{u1 - 1}); every score must be finite.")
        else:
            S = np.array(scores[u0:u1], dtype=np.float64 if scores.dtype.kind != "f" else scores.dtype)
            if not np.isfinite(S).all():
                raise DataError(f"scores hold NaN or infinite values (users {u0}..{u1 - 1}); every score must be finite.")
        removed = np.zeros(u1 - u0, np.int64)
        if exc_csr is not None:
            part = exc_csr[u0:u1].tocoo()
            removed += np.bincount(part.row, minlength=u1 - u0)
            if torch_input:
                S[torch.as_tensor(part.row, device=S.device), torch.as_tensor(part.col, device=S.device)] = -math.inf
            else:
                S[part.row, part.col] = -np.inf
        if thr is not None:
            below = (S < thr) & (S > -math.inf)
            removed += below.sum(1).cpu().numpy() if torch_input else below.sum(1)
            S[below] = -math.inf
        n_all[u0:u1] = I - removed
        r, c, v = (_select_torch if torch_input else _select_numpy)(S, depth)
        rows_all.append(r + u0)
        cols_all.append(c)
        vals_all.append(v)
    # nonzero() lists a batch's cells row by row, columns ascending, and batches come in order:
    # the triples are sorted by (user, item) already
    rows = np.concatenate(rows_all).astype(np.int64)
    cols = np.concatenate(cols_all).astype(np.int64)
    vals = np.concatenate(vals_all).astype(np.float64)
    from .kernels.grouping import sorted_positions

    at = sorted_positions(rel_keys, rows * I + cols)  # both sorted: one merge, not a binary search each
    grades = np.where(at >= 0, grades_rel[np.maximum(at, 0)] if len(grades_rel) else 0.0, 0.0)
    offsets = np.concatenate([[0], np.cumsum(np.bincount(rows, minlength=U))]).astype(np.int64)
    log = GroupedLog(offsets, np.arange(U), grades, {"scores": vals}, cols, np.arange(I))
    rel_ret = R  # every relevant, non-excluded item of a user is among its candidates
    if thr is not None:
        # relevant items scoring below score_threshold leave the candidates but stay in R
        all_scores = _gather(scores, rel_keys // I, rel_keys % I)
        kept = is_rel & (all_scores >= thr)
        rel_ret = np.bincount((rel_keys // I)[kept], minlength=U)
    res = evaluate_log(log, mets, conv, n_rows=U * I, threads=threads, R=R,
                       judged=(rel_csr.indptr.astype(np.int64), grades_rel), list_sizes=(n_all, rel_ret))
    res.info["matrix"] = {"users": U, "items": I, "candidates_selected": int(len(vals)), "depth": depth}
    return res


def _gather(scores, users: np.ndarray, items: np.ndarray) -> np.ndarray:
    if _is_torch(scores):
        import torch

        u = torch.as_tensor(users, device=scores.device)
        i = torch.as_tensor(items, device=scores.device)
        return scores[u, i].double().cpu().numpy()
    return np.asarray(scores)[users, items].astype(np.float64)
