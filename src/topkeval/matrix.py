"""Score matrices: full-catalogue evaluation of recommenders (users x items), on CPU or GPU.

``evaluate_matrix`` never sorts a user's whole catalogue. With T the deepest rank the metrics look
at (the largest cutoff; the largest R of a user for R-precision; the whole list for uncut rank
metrics: :meth:`topkeval.engine.Plan.depth`), it finds each user's T-th largest score ``v`` by
selection (``numpy.partition`` or ``torch.topk``), keeps the candidates scoring ``>= v`` (so the tie
group at the boundary is kept whole, and ties are resolved exactly as in the long format), and
hands only those to the engine, batch by batch, with each user's true list length and relevant
count. On a torch tensor the masking and selection run on the tensor's device, and only the
selected (user, item, score) triples are copied to the host.
"""

from __future__ import annotations

import math
import sys
from typing import TYPE_CHECKING

import numpy as np

from .conventions import resolve
from .errors import DataError, check_int
from .log import GroupedLog, Judgments

if TYPE_CHECKING:
    from typing_extensions import Unpack

    from .conventions import ConventionSettings
    from .results import Results


def _is_torch(x) -> bool:
    return "torch" in sys.modules and isinstance(x, sys.modules["torch"].Tensor)


def _is_edge_list(values) -> bool:
    return isinstance(values, tuple) and len(values) in (2, 3)


def _numpy(x) -> np.ndarray:
    if _is_torch(x):
        x = x.to_dense() if x.is_sparse else x
        return x.detach().cpu().numpy()
    return np.asarray(x)


def _to_csr(values, shape, name: str):
    """A scipy CSR of float grades from a dense array, a scipy sparse matrix, a torch tensor (dense
    or sparse) or an edge list given as a tuple ``(users, items[, grades])``. Never guessed from a
    shape: an array is a matrix and must have the shape of ``scores``."""
    import scipy.sparse as sp

    U, I = shape
    if values is None:
        return sp.csr_matrix((U, I), dtype=np.float64)
    if _is_edge_list(values):
        parts = [_numpy(v) for v in values]
        if any(p.ndim != 1 or len(p) != len(parts[0]) for p in parts):
            raise DataError(f"{name} as an edge list (users, items[, grades]) needs 1-D arrays of one length; got "
                            f"shapes {[p.shape for p in parts]}.")
        users, items = parts[0], parts[1]
        for ids, what, top in ((users, "user", U), (items, "item", I)):
            if ids.dtype.kind not in "iu":
                raise DataError(f"{name}: the {what} ids of an edge list must be integers; got dtype {ids.dtype}.")
            if len(ids) and (ids.min() < 0 or ids.max() >= top):
                raise DataError(f"{name}: {what} ids of the edge list must lie in [0, {top}) (the {what}s of scores); "
                                f"got {int(ids.min())}..{int(ids.max())}. Subtract the number of users from "
                                "bipartite item ids first.")
        grades = _checked_grades(parts[2], name) if len(parts) == 3 else np.ones(len(users))
        csr = sp.csr_matrix((grades.astype(np.float64), (users, items)), shape=(U, I))
        if len(parts) == 2:
            csr.sum_duplicates()
            csr.data[:] = 1.0  # an edge listed twice is still one relevant item
    elif sp.issparse(values) or (_is_torch(values) and values.is_sparse):
        if _is_torch(values):
            values = values.coalesce()
            idx = values.indices().cpu().numpy()
            values = sp.coo_matrix((values.values().cpu().numpy(), (idx[0], idx[1])), shape=tuple(values.shape))
        if values.shape != (U, I):
            raise DataError(f"{name} has shape {values.shape}, scores have {(U, I)}.")
        csr = sp.csr_matrix(values)
        csr.data = _checked_grades(csr.data, name).astype(np.float64)
    else:
        arr = _numpy(values)
        if arr.shape != (U, I):
            raise DataError(f"{name} has shape {arr.shape}, scores have {(U, I)}: a dense or sparse matrix must have "
                            "the shape of scores. An edge list is given as a tuple (users, items), for example "
                            "tuple(edge_index).")
        csr = sp.csr_matrix(_checked_grades(arr, name).astype(np.float64))
    csr.sum_duplicates()
    csr.sort_indices()
    csr.eliminate_zeros()
    return csr


def _checked_grades(values: np.ndarray, name: str) -> np.ndarray:
    if values.dtype.kind not in "biuf":
        raise DataError(f"{name} must be boolean or numeric; got dtype {values.dtype}.")
    if values.dtype.kind in "iu" and values.size and np.abs(values).max() > 2**53:
        raise DataError(f"{name} holds integers beyond 2**53, which a float cannot hold exactly; rescale them.")
    if values.dtype.kind == "f" and not np.isfinite(values).all():
        raise DataError(f"{name} holds NaN or infinite grades; every grade must be finite (0 for not relevant).")
    return values


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
                    conventions=None, batch_size: int | None = None, threads: int | None = None,
                    **settings: Unpack[ConventionSettings]) -> Results:
    """Evaluate a dense score matrix (users x items) against held-out relevance.

    Each row is a user's ranking of the whole catalogue; the metrics are those of
    :func:`topkeval.evaluate`, with the same conventions and the same values as on the long format
    of the same data (one row per non-excluded (user, item) pair). ``recall@k = h(k) / R`` with R
    the user's relevant, non-excluded items.

    Parameters
    ----------
    scores : ndarray or torch.Tensor, shape (users, items)
        Finite scores; a torch tensor is processed on its own device (CPU or CUDA).
    relevant : array, scipy sparse matrix or torch tensor of shape (users, items), or an edge list
        Grades (or booleans) of the held-out interactions. An edge list is a tuple
        ``(users, items)`` or ``(users, items, grades)`` of 1-D arrays or tensors: for a PyTorch
        Geometric ``edge_index`` (row 0 user ids, row 1 item ids in ``[0, items)``), pass
        ``tuple(edge_index)``. An array is always a matrix: a shape other than that of ``scores``
        is an error, never read as an edge list.
    metrics : list of str
        As in :func:`topkeval.evaluate`.
    exclude : same forms as ``relevant``, optional
        Items never to recommend to a user (the training interactions): removed from that user's
        candidates, as if their rows were absent from the long format.
    conventions, **settings
        As in :func:`topkeval.evaluate`.
    batch_size : int, optional
        Users per batch; by default about 2**24 scores per batch. Bounds the extra memory.
    threads : int, optional
        Threads of the CPU kernel.

    Returns
    -------
    Results
        Queries are the user indices (the per-query column is ``user``).

    Examples
    --------
    >>> import numpy as np, topkeval as tk
    >>> scores = np.array([[0.9, 0.1, 0.5], [0.2, 0.8, 0.4]])
    >>> truth = np.array([[1, 0, 1], [1, 0, 0]])
    >>> tk.evaluate_matrix(scores, truth, metrics=["recall@1", "r_precision"]).summary
            recall@1  r_precision
    model
    scores      0.25          0.5
    >>> edges = (np.array([0, 0, 1]), np.array([0, 2, 0]))  # the same truth as an edge list
    >>> tk.evaluate_matrix(scores, edges, metrics=["recall@1", "r_precision"]).summary.iloc[0].tolist()
    [0.25, 0.5]
    """
    from . import engine

    conv = resolve(conventions, owner="evaluate_matrix", also=("exclude", "batch_size", "threads"), **settings)
    plan = engine.make_plan(metrics, conv)
    threads = check_int(threads, "threads", "evaluate_matrix", optional=True)
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
    _check_integer_scores(scores)
    batch_size = check_int(batch_size, "batch_size", "evaluate_matrix", optional=True)
    rel_csr = _to_csr(relevant, (U, I), "relevant")
    exc_csr = _to_csr(exclude, (U, I), "exclude") if exclude is not None else None
    leaked = 0
    if exc_csr is not None:
        exc_csr.data[:] = 1.0
        before = rel_csr.nnz
        rel_csr = rel_csr - rel_csr.multiply(exc_csr)  # excluded items leave the candidates
        rel_csr.eliminate_zeros()
        leaked = before - rel_csr.nnz
        if leaked:
            import warnings

            from .errors import TopkevalWarning

            warnings.warn(f"{leaked} held-out relevant (user, item) pairs are also in exclude: they leave the "
                          "candidates and R (a training item cannot be recommended). If exclude holds the training "
                          "interactions, the held-out set overlaps it.", TopkevalWarning, stacklevel=2)
    on_gpu = torch_input and scores.device.type != "cpu"
    batch_size = batch_size or max(1, (1 << (27 if on_gpu else 24)) // I)  # fewer synchronisations on a GPU
    backend = MatrixBackend()
    batches, evaluated, relevant_count = [], [], 0
    for u0 in range(0, U, batch_size):
        u1 = min(U, u0 + batch_size)
        batch = MatrixBatch(scores[u0:u1], np.arange(u0, u1), rel_csr[u0:u1], None if exc_csr is None else
                            exc_csr[u0:u1])
        done = engine.evaluate_log(batch, plan, backend=backend, threads=threads)
        relevant_count += done.relevant
        evaluated.append(done)
        batches.append(batch)
    engine.warn_if_nothing_relevant(conv, relevant_count)
    return engine.build_results(evaluated, plan, query_name="user", info={"matrix": {
        "users": U, "items": I, "candidates_selected": sum(b.selected for b in batches),
        "depth": max((b.depth for b in batches), default=0), "relevant_excluded": leaked}})


class MatrixBatch:
    """Users of a score matrix, as the engine sees a batch of queries: their scores (a numpy array
    or a torch tensor on any device), their held-out relevance and exclusions (scipy CSR rows)."""

    models = ["scores"]

    def __init__(self, scores, users: np.ndarray, relevant, exclude=None):
        self.scores = scores
        self.queries = users
        self.relevant = relevant
        self.exclude = exclude
        self.n_items = int(scores.shape[1])
        self.selected = 0  # candidates the backend handed to the kernel, for info
        self.depth = 0

    @property
    def n_rows(self) -> int:
        return len(self.queries) * self.n_items

    def judgments(self, conv) -> Judgments:
        from .kernels.grouping import count_per_group

        indptr = self.relevant.indptr.astype(np.int64)
        rel = conv.is_relevant(self.relevant.data)
        R = count_per_group(indptr, rel)
        # every other candidate (a non-excluded cell) is judged with grade 0, as in the long format
        excluded = np.zeros(len(self.queries), np.int64) if self.exclude is None else np.diff(self.exclude.indptr)
        negative = count_per_group(indptr, (self.relevant.data < 0) & ~rel)
        return Judgments(R, indptr, self.relevant.data, nonrelevant=self.n_items - excluded - R - negative)


class MatrixBackend:
    """The backend of score matrices: masks the exclusions and the score threshold, selects each
    user's candidates down to the depth the plan needs (on the tensor's device), and runs the CPU
    kernel on the selected cells with each user's true list length and relevant count."""

    def __init__(self, cpu=None):
        from .engine import CPU

        self.cpu = cpu or CPU

    def compute(self, batch: MatrixBatch, model: str, plan, judgments: Judgments, threads=None):
        from .kernels.grouping import sorted_positions

        conv = plan.conv
        torch_input = _is_torch(batch.scores)
        users, I = len(batch.queries), batch.n_items
        thr = conv.score_threshold
        S = _batch(batch.scores, batch.queries, torch_input, masked=batch.exclude is not None or thr is not None)
        rel = batch.relevant
        indptr = rel.indptr.astype(np.int64)
        r_users = np.repeat(np.arange(users, dtype=np.int64), np.diff(indptr))
        is_rel = conv.is_relevant(rel.data)
        removed = np.zeros(users, np.int64)
        if batch.exclude is not None:
            part = batch.exclude.tocoo()
            removed += np.bincount(part.row, minlength=users)
            if torch_input:
                import torch

                S[torch.as_tensor(part.row, device=S.device), torch.as_tensor(part.col, device=S.device)] = -math.inf
            else:
                S[part.row, part.col] = -np.inf
        rel_ret = judgments.R  # every relevant, non-excluded item of a user is among its candidates
        if thr is not None:
            below = (S < thr) & (S > -math.inf)
            removed += below.sum(1).cpu().numpy() if torch_input else below.sum(1)
            # relevant items scoring below score_threshold leave the candidates but stay in R
            r_scores = _gather(S, r_users, rel.indices)
            rel_ret = np.bincount(r_users[is_rel & (r_scores >= thr)], minlength=users)
            S[below] = -math.inf
        depth = plan.depth(int(judgments.R.max()) if users else 0, I)
        rows, cols, vals = (_select_torch if torch_input else _select_numpy)(S, depth)
        del S
        batch.selected += len(vals)
        batch.depth = max(batch.depth, depth)
        # nonzero() lists the cells row by row, columns ascending: the triples are sorted by (user, item)
        at = sorted_positions(r_users * I + rel.indices, rows.astype(np.int64) * I + cols)  # a merge, not searches
        grades = np.where(at >= 0, rel.data[np.maximum(at, 0)] if len(rel.data) else 0.0, 0.0)
        offsets = np.concatenate([[0], np.cumsum(np.bincount(rows, minlength=users))]).astype(np.int64)
        log = GroupedLog(offsets, batch.queries, grades, {model: vals.astype(np.float64, copy=False)},
                         cols.astype(np.int64), None)  # the column index is the item id
        st = self.cpu.compute(log, model, plan, judgments, threads)
        st.n, st.rel_ret = I - removed, rel_ret  # the rows beyond the selection, counted without them
        return st


def _check_integer_scores(scores) -> None:
    if _is_torch(scores):
        big = not scores.dtype.is_floating_point and scores.numel() and int(scores.abs().max()) > 2**53
    else:
        big = scores.dtype.kind in "iu" and scores.size and (scores.max() > 2**53 or scores.min() < -(2**53))
    if big:
        raise DataError("scores hold integers beyond 2**53, which a float cannot hold exactly (two different "
                        "scores could become equal, a false tie); rescale them.")


def _batch(S, users: np.ndarray, torch_input: bool, masked: bool):
    """Scores of a batch of users as floats, checked finite; a copy where it will be masked."""
    if torch_input:
        import torch

        if not S.dtype.is_floating_point:
            S = S.to(torch.float64)
        elif masked:
            S = S.clone()  # masked below; the caller's tensor is never written
        ok = bool(torch.isfinite(S).all())
    else:
        S = np.array(S, dtype=np.float64 if S.dtype.kind != "f" else S.dtype)
        ok = bool(np.isfinite(S).all())
    if not ok:
        raise DataError(f"scores hold NaN or infinite values (users {users[0]}..{users[-1]}); every score must be "
                        "finite.")
    return S


def _gather(S, users: np.ndarray, items: np.ndarray) -> np.ndarray:
    if _is_torch(S):
        import torch

        u = torch.as_tensor(users, device=S.device)
        i = torch.as_tensor(items, device=S.device)
        return S[u, i].double().cpu().numpy()
    return np.asarray(S)[users, items].astype(np.float64)
