"""MatrixEvaluator: :func:`~topkeval.evaluate_matrix` accumulated batch by batch, in a training loop.

Each ``update`` runs the score-matrix path of :func:`~topkeval.evaluate_matrix` on its batch (the
selection of each user's top candidates, the tie group at the boundary whole, the engine) and keeps
only each user's metric values; ``compute`` builds the same :class:`~topkeval.results.Results`
from them, after gathering them from every process of a ``torch.distributed`` group.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from .conventions import resolve
from .errors import DataError, ParameterError, show, warn
from .metrics.names import DEFAULT_MATRIX_METRICS
from .params import CONVENTIONS, SETTINGS, THREADS, Bool, Given, Int, Metrics, Model, validate_params
from .results import Results

if TYPE_CHECKING:
    from typing_extensions import Unpack

    from .conventions import ConventionSettings


@dataclass
class _Update:
    """What one ``update`` leaves: the per-user values of its models, never its scores."""

    users: np.ndarray
    models: list[str]
    evaluated: list  # of engine.Evaluated, one per batch of rows
    selected: int
    depth: int
    relevant: int
    leaked: int
    truth: np.ndarray | None = None  # per row, a 64-bit signature of its relevance and exclusions
    absent: np.ndarray | None = None  # users whose every item is excluded: no candidate, no query


@dataclass
class _State:
    """The state of one process: what ``compute`` gathers from every rank."""

    updates: list[_Update] = field(default_factory=list)
    items: int | None = None  # columns of the catalogue
    numbered: bool = False  # some rows got the running counter as ids (no users=)
    named: bool = False  # some rows were named with users=


class _Seen:
    """The user ids one model was updated with (this process): sorted runs of ids, merged as they grow
    (a binary counter), so that ``update`` finds a user updated before in O(log^2 n) per id and
    8 bytes per numeric id, whatever the number of updates."""

    def __init__(self) -> None:
        self.runs: list[np.ndarray] = []

    def first_repeated(self, ids: np.ndarray):
        """One of ``ids`` seen before, or None (ids of another kind than before: left to compute())."""
        for run in self.runs:
            if run.dtype.kind != ids.dtype.kind or ids.dtype.kind == "O":
                continue  # numbers then text: compute() refuses the mix; objects: compared there too
            pos = np.minimum(np.searchsorted(run, ids), len(run) - 1)
            hit = run[pos] == ids
            if hit.any():
                return ids[np.argmax(hit)]
        return None

    def add(self, ids: np.ndarray) -> None:
        if ids.dtype.kind == "O" or not len(ids):
            return
        run = np.sort(ids)
        while self.runs and len(self.runs[-1]) <= len(run) and self.runs[-1].dtype.kind == run.dtype.kind:
            run = np.sort(np.concatenate([self.runs.pop(), run]))
        self.runs.append(run)


class MatrixEvaluator:
    """Evaluate a score matrix one batch of users at a time: :func:`~topkeval.evaluate_matrix` for a
    validation loop, with the same metrics, conventions and values.

    ``update(scores, relevant)`` evaluates a batch of rows (users or queries) against the whole
    catalogue and keeps each user's metric values, h(k) / R for ``recall@k`` and so on (a few floats
    per user and metric, whatever the number of items); ``compute()`` returns the
    :class:`~topkeval.results.Results` that :func:`~topkeval.evaluate_matrix` returns for all the
    rows stacked into one matrix: the summary is the mean over the evaluated users of each user's
    value, not a mean of per-batch means, so the batch sizes never change a number.

    Each update finds each user's top T candidates (T: the deepest cutoff, or R for
    ``r_precision``), with the whole tie group at the boundary, where the scores live: on a GPU
    the counts behind every metric are made there with torch ops and only a few integers per
    relevant item reach the host; on a CPU one pass over each row selects them (see
    :mod:`topkeval.backends.matrix`). Half-precision scores (float16, bfloat16) are compared as float32,
    which holds them exactly: ties are those of the half-precision values.

    Under ``torch.distributed`` (a process group initialised when ``compute`` is called),
    ``compute`` gathers every rank's per-user values (``all_gather_object``) and every rank gets
    the same Results: ranks in order, each rank's users in the order of its updates. The ranks must
    then name their rows with ``users=`` (dataset indices), or the ids of different ranks would
    collide.

    Parameters
    ----------
    metrics : list of str
        As in :func:`topkeval.evaluate`.
    conventions, **settings
        As in :func:`topkeval.evaluate`.
    batch_size : int, optional
        Rows evaluated at once inside one update; by default about 2**24 scores.
    threads : int, optional
        Threads of the CPU kernel.
    sync_on_compute : bool, default True
        Gather the values of every rank in ``compute`` when ``torch.distributed`` is initialised;
        False: each rank computes over its own updates.
    process_group : optional
        The ``torch.distributed`` group to gather over (the default group when None).

    Attributes
    ----------
    metrics : list of str
        The canonical metric names.
    conventions : Conventions

    Raises
    ------
    DataError
        From ``update``: scores, relevance or exclusions that :func:`~topkeval.evaluate_matrix`
        refuses, a batch with another number of columns than the first, ``users`` not one distinct
        id per row, a user of ``users=`` updated before (for that model). From ``compute``: no update
        yet, a user updated twice on two processes, rows without ``users=`` on more than one process.

    See Also
    --------
    topkeval.evaluate_matrix : the whole matrix at once.

    Examples
    --------
    >>> import numpy as np, topkeval as tk
    >>> ev = tk.MatrixEvaluator(["recall@1", "r_precision"])
    >>> ev.update(np.array([[0.9, 0.1, 0.5]]), np.array([[1, 0, 1]]))  # user 0
    >>> ev.update(np.array([[0.2, 0.8, 0.4]]), np.array([[1, 0, 0]]))  # user 1
    >>> ev.compute().summary                    # = evaluate_matrix on the two rows stacked
            recall@1  r_precision
    model
    scores      0.25          0.5
    >>> ev.compute().per_query                  # user 0: R = 2, both relevant items ranked first
        model  user  recall@1  r_precision
    0  scores     0       0.5          1.0
    1  scores     1       0.0          0.0

    Several models, an edge list relative to the batch, training items excluded, user ids:

    >>> ev = tk.MatrixEvaluator(["recall@1"], ties="pessimistic")
    >>> old, new = np.array([[0.9, 0.1, 0.5], [0.2, 0.8, 0.4]]), np.array([[0.5, 0.1, 0.9], [0.9, 0.8, 0.4]])
    >>> ev.update({"old": old, "new": new}, (np.array([0, 1]), np.array([2, 0])),
    ...           exclude=(np.array([0]), np.array([1])), users=[10, 11])
    >>> ev.compute().summary
           recall@1
    model
    old         0.0
    new         1.0
    >>> ev.reset()
    """

    @validate_params(metrics=Metrics(), conventions=CONVENTIONS, batch_size=[Int(1), None], threads=THREADS,
                     sync_on_compute=Bool(), process_group=[Given("a torch.distributed process group"), None],
                     settings=SETTINGS)
    def __init__(self, metrics=DEFAULT_MATRIX_METRICS, *, conventions=None,
                 batch_size: int | None = None, threads: int | None = None, sync_on_compute: bool = True,
                 process_group=None, **settings: Unpack[ConventionSettings]):
        from . import engine

        owner = "MatrixEvaluator"
        self.conventions = resolve(conventions, owner=owner, also=("batch_size", "threads", "sync_on_compute",
                                                                   "process_group"), **settings)
        self._plan = engine.make_plan(metrics, self.conventions)
        self.metrics = self._plan.names
        self._batch_size = batch_size
        self._threads = threads
        self._sync = sync_on_compute
        self._group = process_group
        self.reset()

    @validate_params()
    def reset(self) -> None:
        """Forget every update (call it at the start of each evaluation, each epoch)."""
        self._state = _State()
        self._next: dict[str, int] = {}  # per model, the running counter of rows without users=
        self._seen: dict[str, _Seen] = {}  # per model, the users= of its updates (not gathered: this process's)
        self._computed = False  # compute() ran since the last update or reset

    @validate_params(scores=Given("a matrix (numpy, torch) or a dict of them, checked by update"),
                     relevant=Given("a matrix, a sparse matrix or an edge list, checked by update"),
                     exclude=[Given("as relevant, checked by update"), None],
                     users=[Given("one distinct id per row, checked by update"), None], model=[Model(), None])
    def update(self, scores, relevant, exclude=None, users=None, *, model: str | None = None) -> None:
        """Evaluate a batch of rows and keep their per-user values.

        Parameters
        ----------
        scores : ndarray or torch.Tensor, shape (rows, items), or a dict of them
            The batch's scores of the whole catalogue, on any device; the columns are the same
            items in every update. A dict ``{"old": S1, "new": S2}`` evaluates several models of
            the same rows.
        relevant : array, scipy sparse matrix or torch tensor of shape (rows, items), or an edge list
            As in :func:`~topkeval.evaluate_matrix`, relative to the batch: an edge list
            ``(rows, items[, grades])`` numbers the batch's rows from 0.
        exclude : same forms as ``relevant``, optional
            Items never to recommend to a row's user (the training interactions).
        users : array-like of ids, optional
            The id of each row (dataset indices, user ids): the ``user`` column of ``per_query``.
            By default a running counter over the updates of each model: 0, 1, 2, ...
        model : str, optional
            The name of the model of ``scores`` (one matrix), for models evaluated in separate
            updates (give each model the same rows and relevance); ``"scores"`` by default. A
            name per epoch (``model=f"epoch {n}"``, no ``reset()``) compares epochs.

        Raises
        ------
        DataError
            Inputs that :func:`~topkeval.evaluate_matrix` refuses; another number of columns than
            the first update; ``users`` not one distinct id per row, or naming a user updated
            before (for one of these models; the update then counts nothing).
        """
        from .request import matrix_update

        if model is not None:
            if isinstance(scores, dict):
                raise ParameterError("model= names the model of one score matrix, but scores is already a dict "
                                     "of models: drop model=, or pass one matrix.")
            if not isinstance(model, str) or not model:
                raise ParameterError(f"The 'model' parameter of MatrixEvaluator.update must be a non-empty str. "
                                     f"Got {model!r} instead.")
            scores = {model: scores}
        prepared = matrix_update(scores, relevant, exclude, self._plan, batch_size=self._batch_size,
                                 threads=self._threads)
        U, I = prepared.shape
        state = self._state
        if state.items is not None and I != state.items:
            raise DataError(f"scores have {I} columns, but the first update had {state.items}: every update scores "
                            "the whole catalogue, the same items in the same columns.")
        models = prepared.models
        if (users is None and state.named) or (users is not None and state.numbered):
            raise DataError("some updates name their rows with users= and others do not (a running counter 0, 1, "
                            "2, ...): the two kinds of ids can collide. Pass users= to every update, or to none.")
        ids = self._ids(users, U, models, prepared.ids)
        if users is not None:  # a user updated before: refused now, before this update counts
            for m in models:
                repeated = self._seen[m].first_repeated(ids) if m in self._seen else None
                if repeated is not None:
                    raise DataError(
                        f"user {show(repeated)} was updated before"
                        + (f" for model {m!r}" if len(set(self._next) | set(models)) > 1 else "")
                        + ": each user is evaluated once, and counting one twice would weigh it twice in the means. "
                        "Call reset() at the start of each evaluation; with a DistributedSampler, which repeats rows "
                        "to even out the ranks, drop the repeated rows or pass drop_last=True; otherwise give each "
                        "row its own id with users=.")
        if self._computed and users is None and U and any(self._next.get(m, 0) for m in models):


            seen = max(self._next.get(m, 0) for m in models)
            warn(f"update() after compute() without reset(): these rows add to the {seen:,} "
                          "already evaluated, numbered on from there. For a new evaluation (a new epoch) call reset() "
                          "first; pass users= to make a user updated twice an error.")
        if U:
            run = prepared.evaluate(ids)
            state.updates.append(_Update(ids, models, run.evaluated, run.selected, run.depth, run.relevant,
                                         prepared.leaked, prepared.signatures(), run.absent))
        # only an update that went through counts (an error above leaves the evaluator as it was)
        self._computed = False
        state.items = I
        state.numbered |= users is None
        state.named |= users is not None
        for m in models:
            self._next[m] = self._next.get(m, 0) + U
            if users is not None:
                self._seen.setdefault(m, _Seen()).add(ids)

    def _ids(self, users, U: int, models: list[str], as_numpy) -> np.ndarray:
        if users is None:
            start = {m: self._next.get(m, 0) for m in models}
            if len(set(start.values())) > 1:
                raise DataError(f"the models {models} of this update have seen different numbers of rows before "
                                f"({start}), so the running counter gives their rows different ids: pass users=.")
            return np.arange(start[models[0]], start[models[0]] + U, dtype=np.int64)
        from .inputs.ids import check_ids

        if isinstance(users, (list, tuple)):
            text = {isinstance(u, str) for u in users}
            if len(text) > 1:  # numpy would turn the numbers into text: 1 and "1" one user
                raise DataError("users mixes numbers and text (for example "
                                f"{show(next(u for u in users if not isinstance(u, str)))} and "
                                f"{show(next(u for u in users if isinstance(u, str)))}): give ids of one kind.")
        # a copy: the ids are read when compute() builds the results, after the caller may have reused its array
        ids = np.array(as_numpy(users) if not isinstance(users, (list, tuple)) else users)
        if ids.dtype.kind == "c" or ids.dtype.kind == "V":
            raise DataError(f"users must be ids (numbers or text); got dtype {ids.dtype}.")
        if ids.ndim != 1 or len(ids) != U:
            raise DataError(f"users must hold one id per row of scores ({U}); got shape {ids.shape}.")
        check_ids(ids, "users", "user")
        if U > 1:
            import pandas as pd

            dup = pd.Index(ids).duplicated()
            if dup.any():
                raise DataError(f"users holds {int(dup.sum())} repeated ids in one update (for example "
                                f"{show(ids[np.argmax(dup)])}): each row is one user, evaluated once; give each row "
                                "its own id.")
        return ids

    @validate_params()
    def compute(self) -> Results:
        """The Results of every update so far (of every rank under ``torch.distributed``): the same
        as :func:`~topkeval.evaluate_matrix` on the rows of all updates stacked into one matrix.

        Raises
        ------
        DataError
            No update yet (on any rank); a user updated twice for one model (on two ranks: one
            rank's repeats are refused by ``update``); rows numbered by the running counter on more
            than one process.
        """
        import pandas as pd

        from . import engine

        states, world = self._gather()
        updates = [u for s in states for u in s.updates]
        if not updates:
            raise DataError("MatrixEvaluator.compute() was called before any update() with rows"
                            + (f" (on any of the {world} processes)" if world > 1 else "")
                            + ": nothing to evaluate. Call update(scores, relevant) on each batch first.")
        if world > 1 and any(s.numbered for s in states):
            raise DataError(f"compute() gathers the users of {world} processes, but some rows were updated without "
                            "users=, so each process numbered its rows from 0 and the ids collide: pass users= "
                            "(the dataset indices of the batch's rows) to update().")
        items = {s.items for s in states if s.items is not None}
        if len(items) > 1:
            raise DataError(f"the processes scored catalogues of different sizes ({sorted(items)} columns): every "
                            "update scores the whole catalogue, the same items in the same columns.")
        kinds = {"text" if u.users.dtype.kind in "US" else "numbers" for u in updates if u.users.dtype.kind != "O"}
        if len(kinds) > 1:  # numpy would turn the numbers into text: 1 and "1" the same user
            raise DataError("some updates name their users with numbers and others with text: give every update ids "
                            "of one kind, or none (a running counter).")
        models = list(dict.fromkeys(m for u in updates for m in u.models))
        for m in models:
            ids = pd.Index(np.concatenate([u.users for u in updates if m in u.models]))
            dup = ids.duplicated()
            if dup.any():
                first = ids[np.argmax(dup)]
                raise DataError(
                    f"{int(dup.sum())} users were updated more than once"
                    + (f" for model {m!r}" if len(models) > 1 else "")
                    + f" (for example user {show(first)}): each user is evaluated once, and counting one twice "
                    "would weigh it twice in the means. Call reset() at the start of each evaluation; with a "
                    "DistributedSampler, which repeats rows to even out the ranks, drop the repeated rows or "
                    "pass drop_last=True; otherwise give each row its own id with users=.")
        users_of = {m: pd.Index(np.concatenate([u.users for u in updates if m in u.models])).sort_values()
                    for m in models}
        first_model = models[0]
        for m in models[1:]:  # a model left out of some updates: its mean would be over other users
            if not users_of[m].equals(users_of[first_model]):
                counts = ", ".join(f"{k!r}: {len(v):,}" for k, v in users_of.items())
                raise DataError(f"the models were updated with different users ({counts} users): every model must "
                                "score the same users, or the means and compare() mix different users. Update "
                                "every model with every batch (call reset() to start again).")
        _same_truth(updates, models)
        all_ids = pd.Index(np.concatenate([u.users for u in updates])).unique()
        rows = len(all_ids)  # the rows of the matrix: users whose every item is excluded included
        absent = [u.absent for u in updates if u.absent is not None]
        if absent:  # every item excluded: no candidate, so no query (the long format has no row of them)
            all_ids = all_ids.difference(pd.Index(np.concatenate(absent)), sort=False)
        if not any(u.evaluated for u in updates):
            raise DataError("Every item of every user updated so far is in exclude: no user has a candidate, so "
                            "there is nothing to evaluate.")
        evaluated_ids = pd.Index(np.concatenate([mv.queries for u in updates for ev in u.evaluated
                                                 for mv in ev.models])).unique()
        leaked = sum(u.leaked for u in updates)
        engine.warn_leaked(leaked)
        engine.warn_if_nothing_relevant(self.conventions, sum(u.relevant for u in updates))
        info = {"queries": len(all_ids), "skipped_empty": len(all_ids) - len(evaluated_ids),
                "matrix": {"users": rows, "items": items.pop(), "candidates_selected":
                           sum(u.selected for u in updates), "depth": max(u.depth for u in updates),
                           "relevant_excluded": leaked, "updates": len(updates), "processes": world,
                           "users_without_candidates": sum(len(a) for a in absent)}}
        self._computed = True
        return Results(engine.build_results([ev for u in updates for ev in u.evaluated], self._plan,
                                            query_name="user", info=info))

    def _gather(self) -> tuple[list[_State], int]:
        """Every rank's state (this one's alone without an initialised ``torch.distributed``)."""
        dist = _distributed() if self._sync else None
        if dist is None:
            return [self._state], 1
        world = dist.get_world_size(self._group)
        states: list = [None] * world
        dist.all_gather_object(states, self._state, group=self._group)
        return states, world

    def __repr__(self) -> str:
        users = sum(len(u.users) for u in self._state.updates)
        return f"MatrixEvaluator(metrics={self.metrics}, updates={len(self._state.updates)}, rows={users})"


def _same_truth(updates: list[_Update], models: list[str]) -> None:
    """Models updated in separate calls must have been given each user's same relevance and exclusions."""
    if len(models) < 2 or all(len(u.models) == len(models) for u in updates):
        return  # every update held every model: one relevance for all
    import pandas as pd

    def truth(m):
        parts = [u for u in updates if m in u.models and u.truth is not None]
        return pd.Series(np.concatenate([u.truth for u in parts]), index=np.concatenate([u.users for u in parts]))

    first = truth(models[0])
    for m in models[1:]:
        other = truth(m).reindex(first.index)
        differ = other.to_numpy() != first.to_numpy()
        if differ.any():
            raise DataError(f"models {models[0]!r} and {m!r} were given different relevance or exclusions for "
                            f"{int(differ.sum()):,} users (for example user {show(first.index[np.argmax(differ)])}): "
                            "compare() pairs each user's values, so every model must be evaluated against the same "
                            "held-out items, with the same items excluded.")


def _distributed():
    """``torch.distributed`` when torch is loaded and a process group is initialised, else None
    (never imports torch)."""
    if "torch" not in sys.modules:
        return None
    import torch.distributed as dist

    return dist if dist.is_available() and dist.is_initialized() else None
