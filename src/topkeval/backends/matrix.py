"""Score matrices: full-catalogue evaluation of recommenders (users x items), on CPU or GPU.

``evaluate_matrix`` never sorts a user's whole catalogue. With T the deepest rank the metrics look
at (the largest cutoff; the largest R of a user for R-precision; the whole list for uncut rank
metrics: :meth:`topkeval.engine.Plan.depth`), a batch of rows takes one of two paths:

* on a GPU (a torch tensor on a device other than the CPU), the counts the kernel needs for each
  relevant item (candidates above it, level with it, its tie rule's place) are made on the device
  with torch ops (:mod:`topkeval.kernels.torch_counts`); only those few integers per relevant
  item reach the host, where the CPU kernel's accumulation turns them into statistics;
* on a CPU (numpy, or a CPU tensor read in place), each row's T-th largest score ``v`` is found in
  one pass (:mod:`topkeval.kernels.select`), the candidates scoring ``>= v`` (the whole tie group
  at the boundary, so ties are resolved exactly as in the long format) are handed to the CPU
  kernel with each user's true list length and relevant count.

Plans the device counts do not cover (the second pass of bpref, judged, ERR...; RBP's residual;
columns ordered as text) take the selection path on a GPU too, with ``torch.topk``; only the
selected (user, item, score) triples are copied to the host.
"""

from __future__ import annotations

import math
import sys
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from ..engine import warn_leaked
from ..errors import DataError, show
from ..inputs.grouped import GroupedLog, Judgments
from ..kernels.select import select_top
from .plugins import BackendPlugin


def _is_torch(x) -> bool:
    return "torch" in sys.modules and isinstance(x, sys.modules["torch"].Tensor)


def _is_edge_list(values) -> bool:
    return isinstance(values, tuple) and len(values) in (2, 3)


def as_numpy(x) -> np.ndarray:
    if _is_torch(x):
        _refuse_meta(x, "a tensor")
        x = x.to_dense() if _is_sparse_tensor(x) else x
        x = x.detach()
        if x.dtype in _torch_halves():
            x = x.float()
        return x.cpu().numpy()
    _refuse_masked(x, "an edge list's array")
    try:
        return np.asarray(x)
    except ValueError as exc:  # nested lists of different lengths
        raise DataError(f"An array given as nested lists must be rectangular: {exc}") from None


def _is_sparse_tensor(x) -> bool:
    """A torch tensor in any sparse layout (COO, CSR, CSC, BSR, BSC); ``is_sparse`` is COO only."""
    return _is_torch(x) and x.layout != sys.modules["torch"].strided


def _refuse_meta(x, name: str) -> None:
    if _is_torch(x) and x.device.type == "meta":
        raise DataError(f"{name} is a tensor on the 'meta' device, which has a shape but no values: compute it on a "
                        "real device first.")


def _refuse_masked(x, name: str) -> None:
    """A numpy masked array with masked cells: numpy would read the values hidden behind the mask."""
    if isinstance(x, np.ma.MaskedArray) and np.ma.getmaskarray(x).any():
        fix = ("pass the masked cells as exclude= (exclude=np.ma.getmaskarray(scores)) and scores.filled(0)"
               if name.startswith("scores") else f"fill them in first ({name}.filled(0))")
        raise DataError(f"{name} is a masked array with {int(np.ma.getmaskarray(x).sum()):,} masked cells, whose "
                        f"hidden values numpy would read as if they were given: {fix}.")


def _refuse_repeats(cells: np.ndarray, n_items: int, name: str) -> None:
    """A (user, item) cell given twice with grades is ambiguous (summed by scipy and torch): refused,
    as the long format refuses a repeated (query, item) pair."""
    if len(cells) < 2:
        return
    ordered = np.sort(cells)
    twice = np.flatnonzero(ordered[1:] == ordered[:-1])
    if len(twice):
        cell = int(ordered[twice[0]])
        raise DataError(f"{name} gives user {cell // n_items}, item {cell % n_items} more than once "
                        f"({len(np.unique(ordered[twice])):,} cells are repeated): scipy and torch would add the "
                        "grades up. Keep one grade per (user, item) (torch: coalesce() after choosing one; "
                        "scipy: build the matrix from unique pairs).")


def _to_csr(values, shape, name: str):
    """A scipy CSR of float grades from a dense array, a scipy sparse matrix, a torch tensor (dense
    or sparse) or an edge list given as a tuple ``(users, items[, grades])``. Never guessed from a
    shape: an array is a matrix and must have the shape of ``scores``."""
    import scipy.sparse as sp

    U, I = shape
    if values is None:
        return sp.csr_matrix((U, I), dtype=np.float64)
    _refuse_meta(values, name)
    _refuse_masked(values, name)
    if isinstance(values, dict) and not sp.issparse(values):  # a scipy DOK matrix is a dict too
        raise DataError(f"{name} is a dict; give a matrix of the shape of scores or an edge list (users, items). "
                        "From {user: [items]}: users = np.repeat(list(d), [len(v) for v in d.values()]); "
                        "items = np.concatenate([list(v) for v in d.values()]); pass (users, items).")
    if _is_edge_list(values):
        parts = [as_numpy(v) for v in values]
        if any(p.ndim != 1 or len(p) != len(parts[0]) for p in parts):
            raise DataError(f"{name} as an edge list (users, items[, grades]) needs 1-D arrays of one length; got "
                            f"shapes {[p.shape for p in parts]}.")
        users, items = parts[0], parts[1]
        for ids, what, top in ((users, "user", U), (items, "item", I)):
            if ids.dtype.kind not in "iu":
                raise DataError(f"{name}: the {what} ids of an edge list must be integers; got dtype {ids.dtype}.")
            if len(ids) and (ids.min() < 0 or ids.max() >= top):
                hint = ("Subtract the number of users from bipartite item ids first." if what == "item" else
                        "They number the rows of scores from 0 (in MatrixEvaluator.update, the rows of the batch: "
                        "subtract the batch's first dataset index); a tuple is (users, items), in that order.")
                raise DataError(f"{name}: {what} ids of the edge list must lie in [0, {top}) (the {what}s of scores); "
                                f"got {int(ids.min())}..{int(ids.max())}. {hint}")
        grades = _checked_grades(parts[2], name) if len(parts) == 3 else np.ones(len(users))
        if len(parts) == 3:
            _refuse_repeats(users.astype(np.int64) * I + items.astype(np.int64), I, name)
        csr = sp.csr_matrix((grades.astype(np.float64), (users, items)), shape=(U, I))
        if len(parts) == 2:
            csr.sum_duplicates()
            csr.data[:] = 1.0  # an edge listed twice is still one relevant item
    elif sp.issparse(values) or _is_sparse_tensor(values):
        if _is_torch(values):
            if values.dtype.is_complex:
                raise DataError(f"{name} must be boolean or numeric; got dtype {values.dtype}.")
            if not values.is_sparse:  # CSR, CSC, BSR, BSC: as COO (coalesced: a cell once)
                values = values.to_sparse()
            if not values.is_coalesced() and name != "exclude":
                raw = values._indices().cpu().numpy()
                _refuse_repeats(raw[0].astype(np.int64) * values.shape[1] + raw[1], values.shape[1], name)
            values = values.coalesce()
            idx = values.indices().cpu().numpy()
            values = sp.coo_matrix((values.values().cpu().numpy(), (idx[0], idx[1])), shape=tuple(values.shape))
        if values.shape != (U, I):
            raise DataError(f"{name} has shape {values.shape}, scores have {(U, I)}.")
        if name != "exclude" and not _is_torch(values):
            coo = values.tocoo()
            _refuse_repeats(coo.row.astype(np.int64) * values.shape[1] + coo.col, values.shape[1], name)
        csr = sp.csr_matrix(values, copy=True)  # sorted and summed below: never the caller's arrays
        csr.data = _checked_grades(csr.data, name).astype(np.float64)
    else:
        try:
            shape = tuple(values.shape) if _is_torch(values) else np.shape(values)
        except ValueError:  # nested lists of different lengths
            raise DataError(f"{name} given as nested lists must be rectangular (one list per user, each of "
                            f"{I} items); the lists have different lengths.") from None
        if shape != (U, I):
            raise DataError(f"{name} has shape {shape}, scores have {(U, I)}: a dense or sparse matrix must have "
                            "the shape of scores. An edge list is given as a tuple (users, items), for example "
                            "tuple(edge_index).")
        rows, cols, data = _nonzero_cells(values)  # NaN is not zero: it is found, and refused below
        csr = sp.csr_matrix((_checked_grades(data, name).astype(np.float64), (rows, cols)), shape=(U, I))
    csr.sum_duplicates()
    csr.sort_indices()
    csr.eliminate_zeros()
    return csr


def _nonzero_cells(values):
    """Rows, columns and values of the non-zero cells of a dense matrix, found where it lives (a
    tensor on its device: only those cells are copied to the host)."""
    if _is_torch(values):
        if values.dtype.is_complex:
            raise DataError(f"grades must be boolean or numeric; got dtype {values.dtype}.")
        idx = values.nonzero()
        data = values[idx[:, 0], idx[:, 1]]
        data = data.double() if data.dtype in _torch_halves() else data
        return idx[:, 0].cpu().numpy(), idx[:, 1].cpu().numpy(), data.detach().cpu().numpy()
    arr = np.asarray(values)
    if arr.dtype.kind not in "biuf":
        return np.zeros(0, np.int64), np.zeros(0, np.int64), arr.ravel()  # refused by _checked_grades
    rows, cols = np.nonzero(arr)
    return rows, cols, arr[rows, cols]


def _torch_unsigned() -> tuple:
    torch = sys.modules["torch"]
    return tuple(getattr(torch, n) for n in ("uint16", "uint32", "uint64") if hasattr(torch, n))


def _torch_halves() -> tuple:
    torch = sys.modules["torch"]
    return (torch.float16, torch.bfloat16)


def _checked_grades(values: np.ndarray, name: str) -> np.ndarray:
    if values.dtype.kind not in "biuf":
        raise DataError(f"{name} must be boolean or numeric; got dtype {values.dtype}.")
    if values.dtype.kind in "iu" and values.size and np.abs(values).max() > 2**53:
        raise DataError(f"{name} holds integers beyond 2**53, which a float cannot hold exactly; rescale them.")
    if values.dtype.kind == "f" and not np.isfinite(values).all():
        raise DataError(f"{name} holds NaN or infinite grades; every grade must be finite (0 for not relevant).")
    return values


def _select_torch(S, depth: int, masked: bool = True):
    """Rows, columns and scores of the candidates scoring >= each row's depth-th largest score
    (excluded cells, at -inf, left out when ``masked``), row by row, columns ascending, on the
    tensor's device (:func:`~topkeval.kernels.select.select_top` is the CPU's); only the selected
    cells are copied back (columns as int32, a count per row instead of a row per cell, scores in
    their own dtype)."""
    import torch

    kth = torch.topk(S, depth, dim=1, sorted=False).values.min(dim=1).values
    chosen = S >= kth[:, None]
    if masked:
        chosen &= S > -math.inf
    idx = torch.nonzero(chosen)
    counts = torch.bincount(idx[:, 0], minlength=S.shape[0])  # over the selected cells, not the matrix
    vals = S[idx[:, 0], idx[:, 1]]
    cols = idx[:, 1].to(torch.int32) if S.shape[1] < 2**31 else idx[:, 1]
    rows = np.repeat(np.arange(S.shape[0], dtype=np.int64), counts.cpu().numpy())
    return rows, cols.cpu().numpy(), vals.cpu().numpy().astype(np.float64)


def is_matrix(data, plan=None) -> bool:
    """A score matrix: a 2-D numpy array or torch tensor (a dict is a table of columns; the dict of
    matrices that :func:`topkeval.evaluate_matrix` takes, one per model, is told apart there)."""
    kind = type(data).__module__.split(".")[0]
    return kind in ("numpy", "torch") and getattr(data, "ndim", 0) == 2


def evaluate_request(r):
    """A checked request of ``evaluate_matrix`` (:class:`topkeval.request.MatrixRequest`)."""
    return evaluate_scores(r.scores, r.relevant, r.plan, r.exclude, batch_size=r.batch_size, threads=r.threads)


def evaluate_scores(scores, relevant, plan, exclude=None, *, batch_size: int | None = None,
                    threads: int | None = None):
    """The evaluation behind :func:`topkeval.evaluate_matrix` (checked parameters, a plan): an
    :class:`~topkeval.engine.Evaluation` that keeps the matrices as they were, to evaluate them again
    at other metrics (curves)."""
    prepared = prepare(scores, relevant, exclude)
    warn_leaked(prepared.leaked)
    evaluation = _results(prepared, plan, batch_size, threads)
    return replace(evaluation, rerun=_MatrixRerun(_kept(prepared, scores), plan.conv, batch_size, threads))


def _results(prepared: Prepared, plan, batch_size: int | None, threads: int | None):
    from .. import engine

    U, I = prepared.shape
    run = evaluate_rows(prepared, np.arange(U), plan, batch_size=batch_size, threads=threads)
    if not run.evaluated:
        raise DataError("Every item of every user is in exclude: no user has a candidate, so there is nothing "
                        "to evaluate (the long format of these matrices has no row).")
    engine.warn_if_nothing_relevant(plan.conv, run.relevant)
    return engine.build_results(run.evaluated, plan, query_name="user", info={"matrix": {
        "users": U, "items": I, "candidates_selected": run.selected, "depth": run.depth,
        "relevant_excluded": prepared.leaked,
        "users_without_candidates": 0 if run.absent is None else len(run.absent)}})


class _MatrixRerun:
    """Results.curves: the same matrices again, as they were (an object holding them, so that the
    results pickle: unpickled, its tensors are its own copies, which no one changes in place)."""

    def __init__(self, kept: Prepared, conv, batch_size: int | None, threads: int | None) -> None:
        self.kept, self.conv, self.batch_size, self.threads = kept, conv, batch_size, threads

    def __call__(self, names, lists: bool = False):  # no lists capability: the plan refuses a list-only metric
        from .. import engine

        _check_unchanged(self.kept)
        evaluation = _results(self.kept, engine.make_plan(names, self.conv), self.batch_size, self.threads)
        return replace(evaluation, rerun=self)

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        self.kept = replace(self.kept, versions={})  # the tensors read back: copies of their own


def _kept(prepared: Prepared, given) -> Prepared:
    """What the Results of :func:`evaluate_matrix` keep to evaluate again (curves): the score matrices
    as they were. A matrix in host memory that may be the caller's (its array, a view, a CPU
    tensor) is copied, so that a change the caller makes in place afterwards is never read; a
    tensor on another device (a GPU) is kept as it is, with its version counter, which every
    in-place torch operation moves (:func:`_check_unchanged` refuses to read it after one)."""
    given = given if isinstance(given, dict) else {"scores": given}
    models = {}
    for name, S in prepared.models.items():
        if _is_torch(S):
            models[name] = S.detach().clone() if S.device.type == "cpu" else S
        elif S is given.get(name) or not S.flags.owndata:
            models[name] = S.copy()
        else:
            models[name] = S  # made here (from nested lists): nobody else holds it
    return Prepared(models, prepared.relevant, prepared.exclude, prepared.leaked,
                    {name: S._version for name, S in models.items() if _is_torch(S) and S is prepared.models[name]
                     and S.device.type != "cpu"})


def _check_unchanged(kept: Prepared) -> None:
    for name, version in kept.versions.items():
        if kept.models[name]._version != version:
            which = "scores" if name == "scores" else f"scores[{name!r}]"
            raise DataError(f"{which} (a tensor on {kept.models[name].device}) was changed in place since "
                            "evaluate_matrix read it: evaluating it again would mix the new scores with the old "
                            "results. Evaluate again, or give evaluate_matrix a tensor that stays as it is "
                            "(scores.clone()).")


@dataclass
class Prepared:
    """Score matrices, one per model, checked and of one shape, with the relevance and the
    exclusions as scipy CSR matrices (excluded items already taken out of the relevance)."""

    models: dict  # {model: ndarray or torch.Tensor}
    relevant: Any  # scipy CSR of grades
    exclude: Any  # scipy CSR of ones, or None
    leaked: int  # relevant pairs also excluded (taken out of the relevance)
    versions: dict = field(default_factory=dict)  # {model: torch version counter} of tensors kept as given

    @property
    def shape(self) -> tuple[int, int]:
        return tuple(int(x) for x in next(iter(self.models.values())).shape)  # type: ignore[return-value]


def prepare(scores, relevant, exclude=None, *, allow_no_rows: bool = False) -> Prepared:
    """Check the inputs of a score-matrix evaluation (or of one batch of it) and bring the relevance
    and the exclusions to scipy CSR form. Nothing here depends on the size of the catalogue beyond
    the relevance and exclusions themselves: the scores are only checked, never copied."""
    models = _score_matrices(scores, allow_no_rows)
    U, I = next(iter(models.values())).shape
    rel_csr = _to_csr(relevant, (U, I), "relevant")
    exc_csr = _to_csr(exclude, (U, I), "exclude") if exclude is not None else None
    leaked = 0
    if exc_csr is not None:
        exc_csr.data[:] = 1.0
        before = rel_csr.nnz
        rel_csr = rel_csr - rel_csr.multiply(exc_csr)  # excluded items leave the candidates
        rel_csr.eliminate_zeros()
        leaked = before - rel_csr.nnz
    return Prepared(models, rel_csr, exc_csr, leaked)


@dataclass
class Update:
    """One batch of an accumulating front door (:class:`topkeval.MatrixEvaluator`,
    ``TopkMetrics``): its inputs checked (:func:`prepare`), ready to evaluate under the request's plan
    and options. The front door reads its shape, models and leaked pairs to refuse what it must
    before anything counts, then :meth:`evaluate` runs the rows."""

    prepared: Prepared
    request: Any  # topkeval.request.MatrixRequest (its plan, batch_size, threads)

    @property
    def shape(self) -> tuple[int, int]:
        return self.prepared.shape

    @property
    def models(self) -> list[str]:
        return list(self.prepared.models)

    @property
    def leaked(self) -> int:
        return self.prepared.leaked

    def evaluate(self, users: np.ndarray) -> MatrixRun:
        """The rows evaluated as the users ``users`` (one id per row): :func:`evaluate_rows`."""
        r = self.request
        return evaluate_rows(self.prepared, users, r.plan, batch_size=r.batch_size, threads=r.threads)

    @staticmethod
    def ids(values) -> np.ndarray:
        """Ids given beside the batch (``users=``) as a numpy array, from any array a score matrix may
        be (a torch tensor on any device)."""
        return as_numpy(values)

    def signatures(self) -> np.ndarray:
        """Per row, a 64-bit signature of its relevance (items and grades) and exclusions: rows of one
        user given to several models in separate updates must have the same (compare() pairs their
        values)."""
        prepared = self.prepared
        out = np.zeros(prepared.shape[0], np.uint64)
        for csr, salt in ((prepared.relevant, 0x9E3779B97F4A7C15), (prepared.exclude, 0xC2B2AE3D27D4EB4F)):
            if csr is None:  # no exclusions: as an empty matrix of them
                with np.errstate(over="ignore"):
                    out = out * np.uint64(0x94D049BB133111EB)
                continue
            with np.errstate(over="ignore"):
                h = csr.indices.astype(np.uint64) * np.uint64(salt) ^ csr.data.astype(np.float64).view(np.uint64)
                h ^= h >> np.uint64(31)
                h *= np.uint64(0xBF58476D1CE4E5B9)
                h ^= h >> np.uint64(29)
                total = np.concatenate([np.zeros(1, np.uint64), np.cumsum(h, dtype=np.uint64)])
                out = out * np.uint64(0x94D049BB133111EB) + (total[csr.indptr[1:]] - total[csr.indptr[:-1]])
        return out


def prepare_update(r) -> Update:
    """One batch of a :class:`topkeval.request.MatrixRequest` from an accumulating front door (the
    plugin's ``prepare``): its inputs checked, a batch of no rows allowed."""
    return Update(prepare(r.scores, r.relevant, r.exclude, allow_no_rows=True), r)


def _score_matrices(scores, allow_no_rows: bool) -> dict:
    """{model: matrix}: one matrix is the model ``scores``, a dict names its models."""
    if isinstance(scores, dict):
        if not scores:
            raise DataError("scores is an empty dict: give one score matrix per model, {'model name': matrix}.")
        models = {}
        for name, S in scores.items():
            if not isinstance(name, str) or not name:
                raise DataError(f"scores as a dict maps model names (non-empty str) to matrices; got the key {name!r}.")
            models[name] = _checked_matrix(S, f"scores[{name!r}]", allow_no_rows)
        shapes = {name: tuple(int(x) for x in S.shape) for name, S in models.items()}
        if len(set(shapes.values())) > 1:
            raise DataError(f"the score matrices of the models have different shapes ({shapes}): every model scores "
                            "the same users (rows) and items (columns).")
        return models
    return {"scores": _checked_matrix(scores, "scores", allow_no_rows)}


def _checked_matrix(scores, name: str, allow_no_rows: bool):
    import scipy.sparse as sp

    if sp.issparse(scores) or _is_sparse_tensor(scores):
        raise DataError(f"{name} is a sparse matrix; scores must be dense (a cell missing from a sparse matrix is not "
                        "a score of 0). Pass scores.toarray() (scipy) or scores.to_dense() (torch) if 0 is meant.")
    if _is_torch(scores):
        import torch

        _refuse_meta(scores, name)
        if scores.dtype.is_complex:
            raise DataError(f"{name} must hold real numbers; got complex numbers (dtype {scores.dtype}). Taking the "
                            "real part would be a guess: convert them first.")
        if scores.dtype in _torch_unsigned():  # torch has no max, sort or topk for them: as int64 (exact)
            wide = scores.detach().to(torch.int64)
            if scores.dtype == torch.uint64 and wide.numel() and bool((wide < 0).any()):  # beyond 2**63
                _check_integer_scores(np.array([2**63], np.uint64), name)
            scores = wide
        elif scores.dtype.is_floating_point and scores.dtype.itemsize == 1:  # float8: as float32 (exact)
            scores = scores.detach().float()
    else:
        _refuse_masked(scores, name)
        try:
            scores = np.asarray(scores)
        except ValueError:
            raise DataError(f"{name} given as nested lists must be rectangular (one list of item scores per user, "
                            "all of one length).") from None
        if scores.dtype.kind not in "biuf":
            what = "complex numbers" if scores.dtype.kind == "c" else f"dtype {scores.dtype}"
            raise DataError(f"{name} must hold real numbers; got {what}.")
        if scores.dtype.kind == "f" and scores.dtype.itemsize > 8:  # float128: as float64 if that holds it
            narrow = scores.astype(np.float64)
            if ((narrow != scores) & ~np.isnan(narrow)).any():
                raise DataError(f"{name} hold scores in extended precision ({scores.dtype}) that a float64 cannot hold "
                                "exactly (two different scores could become equal, a false tie): convert them to "
                                "float64 first, deciding how to round.")
            scores = narrow
    if scores.ndim != 2:
        hint = (" One user's scores of every item: scores.reshape(1, -1) (or tk.evaluate for a ranked list)."
                if scores.ndim == 1 else "")
        raise DataError(f"{name} must be a 2-D matrix (users x items); got {scores.ndim} dimensions.{hint}")
    U, I = (int(x) for x in scores.shape)
    if I == 0 or (U == 0 and not allow_no_rows):
        raise DataError(f"{name} is empty (shape {(U, I)}).")
    _check_integer_scores(scores, name)
    return scores


#: Where the statistics of torch tensors are counted: None: with torch ops on a GPU
#: (:mod:`~topkeval.kernels.torch_counts`), by the CPU kernel after a selection on a CPU; True: with
#: torch ops on CPU tensors too (the tests run the GPU's algorithm this way); False: never.
DEVICE_COUNTS: bool | None = None

#: On a CPU, plans that look at least 1 / IN_PLACE_DEPTH of the way down each row (``ap``, ``rr``,
#: ``ndcg`` without a cutoff look at all of it) are counted on each row in place
#: (:func:`~topkeval.kernels.cpu.matrix_rows`) rather than by selecting cells out; 0: never.
IN_PLACE_DEPTH = 4


@dataclass
class MatrixRun:
    """The evaluated batches of some rows of a score matrix, and what ``info["matrix"]`` reports."""

    evaluated: list  # of engine.Evaluated, one per batch
    selected: int = 0  # candidates handed to the kernel
    depth: int = 0  # the deepest selection
    relevant: int = 0  # relevant (user, item) pairs, for the warning when there are none
    absent: np.ndarray | None = None  # users whose every item is excluded: no candidate, not a query


def evaluate_rows(prepared: Prepared, users: np.ndarray, plan, *, batch_size: int | None = None,
                  threads: int | None = None) -> MatrixRun:
    """Evaluate every row of ``prepared`` (the users ``users``, one id per row) batch by batch
    through :class:`MatrixBackend` and the engine: the one path of :func:`evaluate_matrix` and of
    :class:`topkeval.MatrixEvaluator`. Only per-query values are kept, never the scores.

    A user whose every item is excluded has no candidate: the long format has no row of it, so it
    is no query (not evaluated, not skipped, not counted); ``absent`` lists them."""
    from .. import engine

    U, I = prepared.shape
    first = next(iter(prepared.models.values()))
    on_gpu = _is_torch(first) and first.device.type != "cpu"
    batch_size = batch_size or max(1, (1 << (27 if on_gpu else 24)) // I)  # fewer synchronisations on a GPU
    backend = MatrixBackend(device_counts=DEVICE_COUNTS)
    run = MatrixRun([])
    rel, exc = prepared.relevant, prepared.exclude
    rows = None  # every row, batches as views; else the rows with a candidate, batches copied out
    if exc is not None:
        empty = np.diff(exc.indptr) >= I
        if empty.any():
            rows = np.flatnonzero(~empty)
            run.absent = np.asarray(users)[empty]
    total = U if rows is None else len(rows)
    for u0 in range(0, total, batch_size):
        u1 = min(total, u0 + batch_size)
        part: slice | np.ndarray
        if rows is None:
            part = slice(u0, u1)
            models = {m: S[u0:u1] for m, S in prepared.models.items()}
        else:
            part = rows[u0:u1]
            models = {m: _take_rows(S, rows[u0:u1]) for m, S in prepared.models.items()}
        batch = MatrixBatch(models, users[part], rel[part], None if exc is None else exc[part])
        done = engine.evaluate_log(batch, plan, backend=backend, threads=threads)
        run.evaluated.append(done)
        run.relevant += done.relevant
        run.selected += batch.selected
        run.depth = max(run.depth, batch.depth)
    return run


def _take_rows(S, rows: np.ndarray):
    """Some rows of a score matrix (a copy of a batch, on the matrix's device)."""
    if _is_torch(S):
        return S[sys.modules["torch"].as_tensor(rows, device=S.device)]
    return S[rows]


class MatrixBatch:
    """Users of a score matrix, as the engine sees a batch of queries: their scores (one numpy array
    or torch tensor on any device per model), their held-out relevance and exclusions (scipy CSR
    rows)."""

    def __init__(self, scores: dict, users: np.ndarray, relevant, exclude=None):
        self.scores = scores
        self.queries = users
        self.relevant = relevant
        self.exclude = exclude
        self.n_items = int(next(iter(scores.values())).shape[1])
        self.selected = 0  # candidates the backend handed to the kernel, for info
        self.depth = 0
        self.candidates: dict = {}  # (model, threshold) -> (depth, selected log, n, rel_ret), for the plan's parts

    @property
    def models(self) -> list[str]:
        return list(self.scores)

    @property
    def n_rows(self) -> int:
        return len(self.queries) * self.n_items

    def judgments(self, conv) -> Judgments:
        from ..kernels.grouping import count_per_group

        indptr = self.relevant.indptr.astype(np.int64)
        rel = conv.is_relevant(self.relevant.data)
        R = count_per_group(indptr, rel)
        # every other candidate (a non-excluded cell) is judged with grade 0, as in the long format
        excluded = np.zeros(len(self.queries), np.int64) if self.exclude is None else np.diff(self.exclude.indptr)
        negative = count_per_group(indptr, (self.relevant.data < 0) & ~rel)
        zeros = (self.n_items - excluded - np.diff(indptr)).astype(np.int64)  # cells without a stored grade
        return Judgments(R, indptr, self.relevant.data, nonrelevant=self.n_items - excluded - R - negative, zeros=zeros)


class MatrixBackend:
    """The backend of score matrices: leaves out the exclusions and the cells below the score
    threshold, and either counts, on a GPU, what the kernel needs for each relevant cell
    (:mod:`~topkeval.kernels.torch_counts`, then the kernel's accumulation), or selects each user's
    candidates down to the depth the plan needs and runs the CPU kernel on them with each user's
    true list length and relevant count. ``device_counts``: None counts on a GPU only, True on
    CPU tensors too (tests), False never.

    Scores are compared in their own precision: float16 and bfloat16 as float32 (which holds them
    exactly, so their order and ties are kept), and everything as float32 under
    ``score_precision="float32"`` (as the long format rounds them). ``score_threshold`` is compared
    as if in float64, whatever the precision of the scores."""

    def __init__(self, cpu=None, device_counts: bool | None = None):
        from .cpu import CPU

        self.cpu = cpu or CPU
        self.device_counts = device_counts  # None: on a GPU; True: also on CPU tensors (tests); False: never

    def compute(self, batch: MatrixBatch, model: str, plan, judgments: Judgments, threads=None, shared=None):
        users, I = len(batch.queries), batch.n_items
        depth = plan.depth(int(judgments.R.max()) if users else 0, I)
        if plan.conv.ties == "ranx":  # ranx's order of a row (numba's quicksort) depends on every candidate
            depth = I
        scores = batch.scores[model]
        on_device = _is_torch(scores) and (self.device_counts or (self.device_counts is None
                                                                   and scores.device.type != "cpu"))
        if on_device and counted_on_device(plan):
            return self._device_stats(batch, model, plan, judgments, depth)
        if not on_device and IN_PLACE_DEPTH and depth * IN_PLACE_DEPTH >= I and counted_on_device(plan):
            return self._rows_in_place(batch, model, plan, judgments, depth, threads)
        key = (model, plan.conv.threshold)  # the parts of one plan share it (their relevant counts: per threshold)
        kept = batch.candidates.get(key)
        if kept is None or kept[0] < depth:
            kept = batch.candidates[key] = (depth, *self._select(batch, model, plan.conv, judgments, depth))
        _, log, n, rel_ret = kept
        st = self.cpu.compute(log, model, plan, judgments, threads, shared=shared)
        st.n, st.rel_ret = n, rel_ret  # the rows beyond the selection, counted without them
        return st

    def _device_stats(self, batch: MatrixBatch, model: str, plan, judgments: Judgments, depth: int):
        """The statistics from counts made on the device of the scores (:mod:`topkeval.kernels.torch_counts`):
        only a few integers per relevant cell come back to the host, then the CPU kernel's accumulation."""
        from ..engine.rules import dcg_columns, gains_of
        from ..kernels import cpu, torch_counts
        from ..kernels.stats import QueryStats

        conv = plan.conv
        users, I = len(batch.queries), batch.n_items
        S, removed, rel_ret = self._masked(batch, model, conv, judgments)
        rel = batch.relevant
        rows = np.repeat(np.arange(users, dtype=np.int64), np.diff(rel.indptr))
        grades = rel.data
        gain = np.zeros(len(grades), bool)
        for spec in plan.dcg_specs:
            if spec.gain != "binary":  # binary gains are the relevance itself
                gain |= gains_of(grades, spec) != 0
        tie = cpu.TIE_CODES[conv.ties]
        c = torch_counts.counts(S, depth, rows, rel.indices.astype(np.int64), grades, conv.is_relevant(grades), gain,
                                tie, plan.positive_hits)
        del S
        batch.depth = max(batch.depth, depth)
        batch.selected += len(c["g"])  # the cells whose counts reached the host
        aoff = np.zeros(users + 1, np.int64)
        np.cumsum(np.bincount(c["row"], minlength=users), out=aoff[1:])
        longest = int((c["g"] + c["e"]).max()) if len(c["g"]) else 1
        judged_rel = conv.is_relevant(judgments.grades) if plan.dcg_specs else None
        gains, disc, cum, ideal, shifts = dcg_columns(plan, grades[c["cell"]], c["rel"], judgments, judged_rel, longest)
        prm = cpu.Params(plan.cutoffs, -np.inf, tie, plan.want_r, plan.want_rank, disc, cum, cpu.PATH_AUTO)
        R = judgments.R.astype(np.int64, copy=False)
        out = cpu.compute_from_counts(aoff, c["g"], c["e"], c["r"], c["b"], c["rel"], gains, R, prm)
        st = QueryStats(plan.cutoffs, out.h, out.hit, out.h_at_r, I - removed, rel_ret, R, out.tie, out.rr, out.ap,
                        out.dcg, ideal, plan.dcg_specs, shifts)
        st.err = np.zeros((0, users, len(plan.cutoffs)))
        return st

    def _rows_in_place(self, batch: MatrixBatch, model: str, plan, judgments: Judgments, depth: int, threads=None):
        """The statistics of metrics that look deep into the list (``ap``, ``rr``, ``ndcg`` without a
        cutoff), counted on each row in place (:func:`topkeval.kernels.cpu.matrix_rows`): no cell
        is selected or copied out, only each relevant cell's counts are made."""
        from ..engine.rules import dcg_columns, threshold
        from ..kernels import cpu
        from ..kernels.stats import QueryStats

        conv = plan.conv
        users, I = len(batch.queries), batch.n_items
        scores = batch.scores[model]
        S = _batch(scores, batch.queries, _is_torch(scores), masked=False, float32=conv.score_precision == "float32",
                   model=model, check=False, exclude=batch.exclude)
        converted = S.dtype != scores.dtype  # then checked before the conversion
        S = np.ascontiguousarray(S.numpy() if _is_torch(S) else S)
        rel = batch.relevant
        r_users = np.repeat(np.arange(users, dtype=np.int64), np.diff(rel.indptr))
        cols = rel.indices.astype(np.int64)
        grades = rel.data.astype(np.float64)
        r_scores = S[r_users, cols].astype(np.float64)
        is_rel = conv.is_relevant(grades)
        thr = threshold(conv)
        rel_ret = np.bincount(r_users[is_rel & (r_scores >= thr)], minlength=users) if thr > -np.inf else judgments.R
        if plan.positive_hits:
            is_rel = is_rel & (r_scores > 0)
        judged_rel = conv.is_relevant(judgments.grades) if plan.dcg_specs else None
        gains, disc, cum, ideal, shifts = dcg_columns(plan, grades, is_rel, judgments, judged_rel, I)
        active = is_rel | (gains != 0).any(axis=0) if len(plan.dcg_specs) else is_rel
        if batch.exclude is None:
            eptr, eidx = np.zeros(users + 1, np.int64), np.zeros(0, np.int64)
        else:
            eptr, eidx = batch.exclude.indptr.astype(np.int64), batch.exclude.indices.astype(np.int64)
        tie = cpu.TIE_CODES[conv.ties]
        prm = cpu.Params(plan.cutoffs, thr, tie, plan.want_r, plan.want_rank, disc, cum, cpu.PATH_AUTO)
        R = judgments.R.astype(np.int64, copy=False)
        out, finite = cpu.compute_matrix_rows(S, eptr, eidx, rel.indptr.astype(np.int64), cols, grades, is_rel,
                                              active, gains, R, thr, prm, threads)
        if not converted and not finite.all():  # checked in the kernel's pass; excluded cells may hold anything
            refuse_non_finite(S, batch.queries, batch.exclude, model, rows=np.flatnonzero(~finite))
        batch.depth = max(batch.depth, depth)
        batch.selected += int(active.sum())  # the cells counted
        st = QueryStats(plan.cutoffs, out.h, out.hit, out.h_at_r, out.n, np.asarray(rel_ret, np.int64), R, out.tie,
                        out.rr, out.ap, out.dcg, ideal, plan.dcg_specs, shifts)
        st.err = np.zeros((0, users, len(plan.cutoffs)))
        return st

    def _masked(self, batch: MatrixBatch, model: str, conv, judgments: Judgments):
        """The batch's scores as compared (a copy where masked): excluded cells and cells below
        ``score_threshold`` at -inf; each user's removed candidates; its relevant candidates that
        pass ``score_threshold``."""
        scores = batch.scores[model]
        torch_input = _is_torch(scores)
        users = len(batch.queries)
        thr = conv.score_threshold
        S = _batch(scores, batch.queries, torch_input, masked=batch.exclude is not None or thr is not None,
                   float32=conv.score_precision == "float32", model=model, exclude=batch.exclude)
        rel = batch.relevant
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
            below = (S < _threshold_in(S, thr)) & (S > -math.inf)
            removed += below.sum(1).cpu().numpy() if torch_input else below.sum(1)
            # relevant items scoring below score_threshold leave the candidates but stay in R
            r_users = np.repeat(np.arange(users, dtype=np.int64), np.diff(rel.indptr))
            r_scores = gather(S, r_users, rel.indices)
            rel_ret = np.bincount(r_users[conv.is_relevant(rel.data) & (r_scores >= thr)], minlength=users)
            S[below] = -math.inf
        return S, removed, rel_ret

    def _select(self, batch: MatrixBatch, model: str, conv, judgments: Judgments, depth: int):
        """The grouped log of each user's selected candidates, each user's list length and its
        relevant candidates that pass ``score_threshold``."""
        from ..kernels.grouping import sorted_positions

        users, I = len(batch.queries), batch.n_items
        scores = batch.scores[model]
        if _is_torch(scores) and scores.device.type != "cpu":
            S, removed, rel_ret = self._masked(batch, model, conv, judgments)
            rows, cols, vals = _select_torch(S, depth, batch.exclude is not None or conv.score_threshold is not None)
        else:  # numpy, or a CPU tensor seen as numpy: the threshold selection, no masked copy
            S = _batch(scores, batch.queries, _is_torch(scores), masked=False,
                       float32=conv.score_precision == "float32", model=model, check=False, exclude=batch.exclude)
            converted = S.dtype != scores.dtype  # then checked before the conversion
            S = S.numpy() if _is_torch(S) else S
            rows, cols, vals, below, finite = select_top(S, depth, batch.exclude, conv.score_threshold)
            if not converted and not finite.all():  # unless every non-finite score is excluded
                refuse_non_finite(S, batch.queries, batch.exclude, model, rows=np.flatnonzero(~finite))
            removed = below + (0 if batch.exclude is None else np.diff(batch.exclude.indptr))
            rel_ret = judgments.R
            if conv.score_threshold is not None:  # relevant items below it leave the candidates, stay in R
                rel = batch.relevant
                r_users = np.repeat(np.arange(users, dtype=np.int64), np.diff(rel.indptr))
                kept = conv.is_relevant(rel.data) & (S[r_users, rel.indices].astype(np.float64) >= conv.score_threshold)
                rel_ret = np.bincount(r_users[kept], minlength=users)
        del S
        batch.selected += len(vals)
        batch.depth = max(batch.depth, depth)
        rel = batch.relevant
        r_users = np.repeat(np.arange(users, dtype=np.int64), np.diff(rel.indptr))
        # rows come row by row, columns ascending: the triples are sorted by (user, item)
        at = sorted_positions(r_users * I + rel.indices, rows.astype(np.int64) * I + cols)  # a merge, not searches
        grades = np.where(at >= 0, rel.data[np.maximum(at, 0)] if len(rel.data) else 0.0, 0.0)
        offsets = np.concatenate([[0], np.cumsum(np.bincount(rows, minlength=users))]).astype(np.int64)
        log = GroupedLog(offsets, batch.queries, grades, {model: vals.astype(np.float64, copy=False)},
                         cols.astype(np.int64), None)  # the column index is the item id
        return log, I - removed, rel_ret


def counted_on_device(plan) -> bool:
    """Whether :mod:`topkeval.kernels.torch_counts` gives every statistic of ``plan``: not the
    second pass (judged, bpref, ...) nor the statistics of lists in rank order, not RBP's residual (nor trec_eval's rbp_resid and unj), not ``item_order="text"`` (columns
    ordered as text), not ``ties="ranx"`` (its order depends on the whole row), and no grade-0 cell
    relevant or with a gain (then every cell would count)."""
    from ..engine.rules import UNJUDGED_GAINS, gains_of

    conv = plan.conv
    zero = np.zeros(1)
    if plan.ranked or plan.seq_specs or conv.is_relevant(zero)[0] or conv.ties == "ranx":
        return False
    if conv.ties in ("item_desc", "item_asc") and conv.item_order == "text":
        return False
    return all(spec.gain not in UNJUDGED_GAINS and gains_of(zero, spec)[0] == 0 for spec in plan.dcg_specs)


def _check_integer_scores(scores, name: str = "scores") -> None:
    if _is_torch(scores):
        import torch

        big = (not scores.dtype.is_floating_point and scores.dtype != torch.bool and scores.numel()
               and int(scores.abs().max()) > 2**53)
    else:
        big = scores.dtype.kind in "iu" and scores.size and (scores.max() > 2**53 or scores.min() < -(2**53))
    if big:
        raise DataError(f"{name} hold integers beyond 2**53, which a float cannot hold exactly (two different "
                        "scores could become equal, a false tie); rescale them.")


def _batch(S, users: np.ndarray, torch_input: bool, masked: bool, float32: bool = False, model: str = "scores",
           check: bool = True, exclude=None):
    """Scores of a batch of users as float32 or float64, checked finite; a copy where it will be masked.

    float16 and bfloat16 become float32 and integers float64: both hold every value exactly, so the
    order and the ties are those of the given values. ``float32``: everything as float32 (the
    ``score_precision="float32"`` convention, where scores equal in float32 tie). Autograd is
    detached (the evaluation never needs gradients). ``check=False``: scores kept in their own
    dtype are not checked here (the caller's selection checks them in its pass); converted ones are
    checked before the conversion. Cells in ``exclude`` (a CSR) may hold anything: they are never
    candidates.
    """
    original = S
    if torch_input:
        import torch

        S = S.detach()
        target = S.dtype
        if S.dtype in (torch.float16, torch.bfloat16) or (float32 and S.dtype == torch.float64):
            target = torch.float32
        elif S.dtype not in (torch.float32, torch.float64):
            target = torch.float32 if float32 else torch.float64
        ok = True
        if S.dtype.is_floating_point and (check or target != S.dtype):
            low, high = torch.aminmax(S)  # NaN propagates: one pass, no mask of the batch's size
            ok = bool(torch.isfinite(low) & torch.isfinite(high))
        if target != S.dtype:
            S = S.to(target)
        elif masked:
            S = S.clone()  # masked below; the caller's tensor is never written
    else:
        S = np.asarray(S)
        dtype = np.float32 if float32 or S.dtype in (np.float16, np.float32) else np.float64
        ok = True
        if S.dtype.kind == "f" and S.size and (check or S.dtype != dtype):
            ok = bool(np.isfinite(S.min()) and np.isfinite(S.max()))
        with np.errstate(over="ignore"):
            S = np.array(S, dtype=dtype) if masked else np.asarray(S, dtype=dtype)  # unmasked: read in place
    if not ok:
        refuse_non_finite(original, users, exclude, model)
    return S


def refuse_non_finite(S, users: np.ndarray, exclude, model: str = "scores", rows=None) -> None:
    """Raise a DataError naming the first non-finite score of ``S`` (of its rows ``rows``) outside
    ``exclude``; return when every non-finite score is in an excluded cell."""
    rows = np.arange(S.shape[0]) if rows is None else np.asarray(rows)
    if _is_torch(S):
        import torch

        part = S[torch.as_tensor(rows, device=S.device)].detach()
        idx = torch.nonzero(~torch.isfinite(part))
        r, c = rows[idx[:, 0].cpu().numpy()], idx[:, 1].cpu().numpy()
        v = part[idx[:, 0], idx[:, 1]].double().cpu().numpy()
    else:
        part = np.asarray(S)[rows]
        i, c = np.nonzero(~np.isfinite(part))
        r, v = rows[i], part[i, c]
    if exclude is not None and len(r):
        ex = exclude.tocoo()
        keep = ~np.isin(r.astype(np.int64) * S.shape[1] + c, ex.row.astype(np.int64) * S.shape[1] + ex.col)
        r, c, v = r[keep], c[keep], v[keep]
    if not len(r):
        return
    which = "scores" if model == "scores" else f"the scores of model {model!r}"
    kind = "NaN" if np.isnan(v[0]) else ("-inf" if v[0] < 0 else "inf")
    more = f" ({len(r):,} such cells in users {show(users[r[0]])}..{show(users[r[-1]])})" if len(r) > 1 else ""
    hint = ("To keep training items out of the ranking, pass them as exclude= (excluded cells may hold -inf)."
            if kind == "-inf" else "NaN and inf come from a division by zero or an overflow in the model (float16 "
            "overflows beyond 65504).")
    raise DataError(f"{which} hold NaN or infinite values: {kind} at user {show(users[r[0]])}, item {int(c[0])}"
                    f"{more}; every score must be finite. {hint}")


def _threshold_in(S, thr: float) -> float:
    """The smallest value of the dtype of ``S`` that is >= ``thr``: for every score s of that dtype,
    ``s < thr`` (in exact arithmetic, as the long format compares) iff ``s <`` this value, which is
    what a comparison in the dtype of ``S`` computes."""
    single = S.dtype == np.float32 if isinstance(S, np.ndarray) else S.dtype == sys.modules["torch"].float32
    if not single:
        return thr
    with np.errstate(over="ignore"):
        t = np.float32(thr)
    if float(t) < thr:
        t = np.nextafter(t, np.float32(np.inf))
    return float(t)


def gather(S, users: np.ndarray, items: np.ndarray) -> np.ndarray:
    if _is_torch(S):
        import torch

        u = torch.as_tensor(users, device=S.device)
        i = torch.as_tensor(items, device=S.device)
        return S[u, i].double().cpu().numpy()
    return np.asarray(S)[users, items].astype(np.float64)


#: The matrix backend as the dispatcher sees it (registered in :mod:`topkeval.backends`).
PLUGIN = BackendPlugin(
    "matrix", "a score matrix (users x items)", is_matrix, frozenset({"matrices", "updates"}),
    hints={"rows": "evaluate_matrix(scores, relevant) evaluates a score matrix; evaluate() takes a table of (query, "
                   "relevance, score) rows",
           "lists": "it reads each top k's items again: evaluate the long format (one row per user and item, "
                    "with an item column) with tk.evaluate(..., item='<column>')"},
    evaluate=evaluate_request, prepare=prepare_update)
