"""TopkMetrics: topkeval's score-matrix metrics as a torchmetrics ``Metric`` (Lightning, torchmetrics loops).

Each ``update`` evaluates a batch of rows exactly as :func:`~topkeval.evaluate_matrix` does (the
same selection of each user's top candidates, the same engine, the same conventions: empty
queries, undefined values) and keeps, per metric, only the sum of the users' values and the number
of users whose value enters the mean (NaN values, ``undefined="nan"``, and users skipped as empty
never do). These are torchmetrics states reduced by ``"sum"``: under DDP, torchmetrics adds them up
over the processes in ``compute`` (one all-reduce per state, a few numbers whatever the number of
users), and each mean is the sum over every process's users divided by their count, the mean that
:func:`~topkeval.evaluate_matrix` computes on all the rows stacked (to the rounding of the sums:
relative differences of about 1e-16), whatever the batches and the number of processes.

torch and torchmetrics are the ``[torchmetrics]`` extra (Lightning is not needed: any loop that calls
``update`` and ``compute`` works); ``import topkeval`` never imports them, and without them
``from topkeval.integrations.torchmetrics import TopkMetrics`` raises one
:class:`~topkeval.errors.TopkevalError` that names the extra. For the per-user values (paired tests,
``compare``) use :class:`topkeval.MatrixEvaluator`, which gathers them instead of their sums.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import numpy as np

from ..conventions import resolve
from ..errors import DataError, ParameterError, TopkevalError
from ..metrics.names import DEFAULT_MATRIX_METRICS
from ..params import CONVENTIONS, SETTINGS, THREADS, Bool, Given, Int, Metrics, Text, validate_params

if TYPE_CHECKING:
    from typing_extensions import Unpack

    from ..conventions import ConventionSettings

#: what ``TopkMetrics`` needs, in the one line raised without it
MISSING = ("topkeval.integrations.torchmetrics needs torch and torchmetrics, which are not installed: pip install "
           "torchmetrics (or pip install '.[torchmetrics]' in topkeval's checkout).")

try:
    import torch
    from torchmetrics import Metric
except ImportError:
    def __getattr__(name: str) -> Any:
        if name == "TopkMetrics":
            raise TopkevalError(MISSING)
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
else:
    class TopkMetrics(Metric):
        """topkeval's metrics of a score matrix as a torchmetrics ``Metric``: ``update`` per batch,
        ``compute`` a dict of scalar tensors (for Lightning's ``self.log_dict``), synced under DDP.

        ``update(scores, relevant)`` evaluates a batch of rows (users or queries) against the whole
        catalogue as :func:`~topkeval.evaluate_matrix` does and adds, per metric, the sum of the rows'
        values and the number of rows whose value enters the mean to the metric's states;
        ``compute()`` divides the one by the other, after torchmetrics has summed the states of every
        process (``dist_reduce_fx="sum"``). The means are those of
        :func:`~topkeval.evaluate_matrix` on all the rows stacked, whatever the batch sizes: the mean
        over users, not of batch means (equal to the rounding of the sums, about 1e-16).

        In a ``LightningModule``, update in ``validation_step`` and log in
        ``on_validation_epoch_end``: ``self.log_dict(self.topk.compute())``, then
        ``self.topk.reset()``. Lightning's ``self.log_dict(metric)`` takes a ``MetricCollection`` or
        metrics that compute one number each, not one that computes a dict, and logging
        ``compute()`` in each step would average running means. Under DDP, a
        ``DistributedSampler`` pads the last batch with rows of other ranks, which are then counted
        twice, as in every torchmetrics metric: give the validation set a size that divides
        evenly, or use :class:`topkeval.MatrixEvaluator` with ``users=``, which refuses a user
        counted twice.

        Parameters
        ----------
        metrics : str or list of str
            As in :func:`topkeval.evaluate_matrix`; each metric carries its cutoff (``"ndcg@10"``).
        conventions, **settings
            As in :func:`topkeval.evaluate` (``ties``, ``empty_queries``, ``undefined``, ...).
        prefix : str, default ""
            Put before each key of ``compute``'s dict: ``"val/"`` logs ``val/recall@20``.
        batch_size : int, optional
            Rows evaluated at once inside one update; by default about 2**24 scores.
        threads : int, optional
            Threads of the CPU kernel.
        sync_on_compute : bool, default True
            Sum the states of every process in ``compute`` when ``torch.distributed`` is initialised
            (torchmetrics' own setting).
        process_group : optional
            The ``torch.distributed`` group to sum over (the default group when None).

        Attributes
        ----------
        metrics : list of str
            The metric names, as given (the keys of ``compute``, after ``prefix``).
        conventions : Conventions
        value_sum, value_count : torch.Tensor
            The states, one entry per metric: the sum of the users' values, and the number of users
            whose value is defined (float64, int64).
        users, queries, evaluated : torch.Tensor
            The rows updated, those with a candidate (a row whose every item is excluded has none:
            no query, as in :func:`~topkeval.evaluate_matrix`), and the queries evaluated (not
            skipped as empty).

        Raises
        ------
        DataError
            From ``update``: scores, relevance or exclusions that :func:`~topkeval.evaluate_matrix`
            refuses; a batch with another number of columns than the first. From ``compute``: no row
            updated (on any process), or every item of every row excluded.

        See Also
        --------
        topkeval.MatrixEvaluator : the per-user values, gathered (``compare``, paired tests).
        topkeval.evaluate_matrix : the whole matrix at once.

        Examples
        --------
        >>> import torch
        >>> from topkeval.integrations.torchmetrics import TopkMetrics
        >>> metric = TopkMetrics(["recall@1", "r_precision"], prefix="val/")
        >>> metric.update(torch.tensor([[0.9, 0.1, 0.5]]), torch.tensor([[1, 0, 1]]))   # user 0: R = 2
        >>> metric.update(torch.tensor([[0.2, 0.8, 0.4]]), torch.tensor([[1, 0, 0]]))   # user 1
        >>> {key: float(value) for key, value in metric.compute().items()}   # = evaluate_matrix, both rows
        {'val/recall@1': 0.25, 'val/r_precision': 0.5}
        >>> metric.reset()

        In a LightningModule (the states follow the module to its device)::

            def __init__(self):
                ...
                self.topk = TopkMetrics(["recall@20", "ndcg@10"], ties="expected", prefix="val/")

            def validation_step(self, batch, batch_idx):
                self.topk.update(self(batch["users"]), batch["held_out"], exclude=batch["train"])

            def on_validation_epoch_end(self):
                self.log_dict(self.topk.compute())
                self.topk.reset()
        """

        is_differentiable = False
        higher_is_better = None  # per metric (topkeval.FAMILIES): one dict holds several
        full_state_update = False

        value_sum: torch.Tensor
        value_count: torch.Tensor
        users: torch.Tensor
        queries: torch.Tensor
        evaluated: torch.Tensor
        relevant: torch.Tensor
        relevant_excluded: torch.Tensor
        items: torch.Tensor

        @validate_params(metrics=Metrics(), conventions=CONVENTIONS, prefix=Text(), batch_size=[Int(1), None],
                         threads=THREADS, sync_on_compute=Bool(),
                         process_group=[Given("a torch.distributed process group"), None], settings=SETTINGS)
        def __init__(self, metrics=DEFAULT_MATRIX_METRICS, *, conventions=None, prefix: str = "",
                     batch_size: int | None = None, threads: int | None = None, sync_on_compute: bool = True,
                     process_group=None, **settings: Unpack[ConventionSettings]):
            from .. import engine

            super().__init__(sync_on_compute=sync_on_compute, process_group=process_group)
            self.conventions = resolve(conventions, owner="TopkMetrics", also=(
                "prefix", "batch_size", "threads", "sync_on_compute", "process_group"), **settings)
            self._plan = engine.make_plan(metrics, self.conventions)
            self.metrics = list(self._plan.names)
            self.prefix = prefix
            self._batch_size, self._threads = batch_size, threads
            n = len(self.metrics)
            self.add_state("value_sum", torch.zeros(n, dtype=torch.float64), dist_reduce_fx="sum")
            self.add_state("value_count", torch.zeros(n, dtype=torch.int64), dist_reduce_fx="sum")
            for name in ("users", "queries", "evaluated", "relevant", "relevant_excluded"):
                self.add_state(name, torch.tensor(0, dtype=torch.int64), dist_reduce_fx="sum")
            # the catalogue's width, to refuse a batch of another one (0: no update yet)
            self.add_state("items", torch.tensor(0, dtype=torch.int64), dist_reduce_fx="max")

        @validate_params(scores=Given("a matrix (torch, numpy), checked by update"),
                         relevant=Given("a matrix, a sparse matrix or an edge list, checked by update"),
                         exclude=[Given("as relevant, checked by update"), None])
        def update(self, scores, relevant, exclude=None) -> None:
            """Evaluate a batch of rows and add their values to the states.

            Parameters
            ----------
            scores : torch.Tensor or ndarray, shape (rows, items)
                The batch's scores of the whole catalogue, on any device (a GPU's are read there:
                see :mod:`topkeval.backends.matrix`); the columns are the same items in every update.
            relevant : tensor, array, scipy sparse matrix of shape (rows, items), or an edge list
                The held-out relevance (grades, or 0/1), as in :func:`~topkeval.evaluate_matrix`; an
                edge list ``(rows, items[, grades])`` numbers the batch's rows from 0.
            exclude : same forms as ``relevant``, optional
                Items never to recommend to a row's user (the training interactions): a boolean mask
                of the batch's shape, or an edge list.

            Raises
            ------
            DataError
                Inputs that :func:`~topkeval.evaluate_matrix` refuses; another number of columns
                than the first update.
            """
            from ..request import matrix_update

            if isinstance(scores, dict):
                raise ParameterError("TopkMetrics evaluates one model: give update one score matrix, and each "
                                     "model a TopkMetrics of its own (or several models to one tk.MatrixEvaluator).")
            prepared = matrix_update(scores, relevant, exclude, self._plan, batch_size=self._batch_size,
                                     threads=self._threads)
            rows, width = prepared.shape
            seen = int(self.items)
            if seen and width != seen:
                raise DataError(f"scores have {width} columns, but the first update had {seen}: every update scores "
                                "the whole catalogue, the same items in the same columns.")
            self.items.fill_(width)
            if not rows:
                return
            run = prepared.evaluate(np.arange(rows, dtype=np.int64))
            found = [mv for done in run.evaluated for mv in done.models]
            sums, counts = np.zeros(len(self.metrics)), np.zeros(len(self.metrics), np.int64)
            for j, name in enumerate(self.metrics):
                values = np.concatenate([mv.values[name] for mv in found]) if found else np.zeros(0)
                defined = values[~np.isnan(values)]
                sums[j], counts[j] = math.fsum(defined), len(defined)  # fsum: the batch's sum, rounded once
            device = self.value_sum.device
            self.value_sum += torch.as_tensor(sums, dtype=torch.float64, device=device)
            self.value_count += torch.as_tensor(counts, dtype=torch.int64, device=device)
            self.users += rows
            self.queries += sum(done.queries for done in run.evaluated)
            self.evaluated += sum(mv.evaluated for mv in found)
            self.relevant += run.relevant
            self.relevant_excluded += prepared.leaked

        @validate_params()
        def compute(self) -> dict:
            """The mean of each metric over every update (of every process under DDP): a dict of
            0-d float64 tensors keyed by ``prefix`` + metric name, NaN where no user's value is
            defined (every user skipped as empty, say), as :func:`~topkeval.evaluate_matrix` reports.

            Raises
            ------
            DataError
                No row updated yet (on any process), or every item of every row excluded.
            """
            from ..engine import warn_if_nothing_relevant, warn_leaked

            if not int(self.users):
                raise DataError("TopkMetrics.compute() was called before any update() with rows (on any process): "
                                "nothing to evaluate. Call update(scores, relevant) on each batch first, and "
                                "reset() after compute(), at the end of each epoch.")
            if not int(self.queries):
                raise DataError("Every item of every row updated so far is in exclude: no user has a candidate, so "
                                "there is nothing to evaluate.")
            warn_leaked(int(self.relevant_excluded))
            warn_if_nothing_relevant(self.conventions, int(self.relevant))
            means = torch.where(self.value_count > 0, self.value_sum / self.value_count.clamp(min=1),
                                torch.full_like(self.value_sum, math.nan))
            return {f"{self.prefix}{name}": means[j] for j, name in enumerate(self.metrics)}
