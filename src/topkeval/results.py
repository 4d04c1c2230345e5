"""Results: the one return type of every evaluation."""

from __future__ import annotations

import copy

import pandas as pd

from . import stattests
from .analysis import beyond as _beyond
from .analysis import clicks as _clicks
from .analysis import compare as _compare
from .analysis import diff as _diff
from .analysis import many as _many
from .analysis import segments as _segments
from .analysis import views as _views
from .engine.results import Evaluation
from .engine.rules import KeepsRowsLazily
from .metrics.names import MAX_CUTOFF
from .outputs import frames as _frames
from .params import (
    CONFIDENCE,
    CORRECTION,
    DIGITS,
    INTERVAL,
    RESAMPLES,
    SEED,
    TEST,
    Axes,
    Bool,
    Column,
    FilePath,
    Function,
    Given,
    Ids,
    Int,
    IntList,
    KeyPath,
    Map,
    MetricName,
    Metrics,
    Model,
    Options,
    QueryId,
    Real,
    Template,
    Text,
    validate_params,
)
from .progress import shown

#: cutoffs of one curve: enough for any plot, few enough to evaluate at once
MAX_CURVE_POINTS = 10_000

#: the beyond-accuracy inputs, each checked where it is read (topkeval.analysis.beyond)
POPULARITY = [Given("item -> share, checked by analysis/beyond.py"), None]
FEATURES = [Given("item -> vector, checked by analysis/beyond.py"), None]
CATALOG = [Int(1), Ids(), None]
CATEGORIES = [Given("item -> category, checked by analysis/beyond.py"), None]
HISTORY = [Given("(query, item) rows or query -> items, checked by analysis/beyond.py"), None]


def _unpickled(core, kept: bytes, dropped: dict) -> Results:
    """Results from what :meth:`Results.__reduce_ex__` pickled."""
    from .engine.results import restore

    return Results(restore(core, kept, dropped))


def _copy(frame: pd.DataFrame) -> pd.DataFrame:
    """A frame the caller may change without changing the results: a lazy copy under pandas'
    copy-on-write (pandas 3: no data is copied until written), a copy otherwise."""
    return frame.copy(deep=not _COPY_ON_WRITE)


_COPY_ON_WRITE = int(pd.__version__.split(".")[0]) >= 3


class Results:
    """What an evaluation returns.

    Attributes
    ----------
    summary : pandas.DataFrame
        One row per model (the index, named ``model``), one column per metric: the mean over the
        evaluated queries (a metric's undefined values, under ``undefined=nan``, left out). Each
        metric's column is labelled with its name as requested (blanks removed: :attr:`metrics`);
        :meth:`label` finds it by any of its names.
    per_query : pandas.DataFrame
        One row per (model, query) evaluated: columns ``model``, the query column (named as the
        input's, :attr:`query_name`), then one per metric.
        Queries skipped as empty are not in it; they are counted in ``info``. A ratio pooled over the
        queries of a click log (``recall_micro@k``...) holds each query's linearised share of it, whose
        mean is the ratio (:mod:`topkeval.metrics.pooled`). Queries come in input
        order when the rows arrive grouped by query (each query one run of rows), otherwise in
        ascending order of query id; with judgments apart from the runs (``qrels=``), in the order
        of the run (judged queries a run lacks last, under ``missing_queries="zero"``); for a score
        matrix, by user index.
    info : dict
        The same keys whatever computed the results: ``queries`` (distinct in the input; judged
        queries with judgments apart), ``evaluated`` (queries in the means), ``skipped_empty``,
        ``rows`` (rows read), ``evaluated_per_model`` and ``rows_per_model`` (they differ when runs
        retrieved for different queries), ``ties_at_cutoff`` (per model: queries where a tie group
        of relevant and non-relevant candidates straddles a requested cutoff, R included for
        r_precision, so that the tie rule decides the value), ``longest_list`` (per model: the
        candidates of its longest evaluated list; None where not counted, as on Spark: a cutoff
        beyond it is noted), ``models``, ``metrics`` and
        ``conventions``; judgments apart add ``judged_queries``, ``run_queries_without_judgments``
        and ``missing_from_run``, streamed files ``chunks``, score matrices ``matrix``.
    """

    def __init__(self, evaluation: Evaluation):
        if not isinstance(evaluation, Evaluation):
            from .errors import ParameterError

            raise ParameterError("Results are built by topkeval's front doors (evaluate, evaluate_matrix, "
                                 "MatrixEvaluator.compute); from per-query values of your own, use "
                                 "Results.from_per_query(frame).")
        self._evaluation = evaluation
        # statistics already computed, by their arguments (Results never change): a report after
        # compare() or summary_ci() with the same options reuses them instead of resampling again
        self._memo: dict = {}

    # pickling and copying: users save results and send them to worker processes ------------------

    def __reduce_ex__(self, protocol):
        """Pickles with its per-query table built (a Spark evaluation's collected) and the rows and
        re-evaluation it keeps (``evaluation.sources``, ``rerun``: grouped logs, file paths, score
        matrices), as far as they pickle; what does not (a Spark DataFrame, a user's lambda among
        the beyond-accuracy inputs) is dropped, and a method that needs it says so after unpickling."""
        from .engine.results import portable

        return (_unpickled, portable(self._evaluation, max(int(protocol), 2)))

    def __copy__(self) -> Results:
        return Results(self._evaluation)  # an Evaluation never changes: shared

    def __deepcopy__(self, memo) -> Results:
        """A copy whose tables and counts are its own; the rows and re-evaluation it reads (never
        changed) are shared."""
        from .engine.results import deep_copied

        return Results(deep_copied(self._evaluation, memo))

    def _memoized(self, key: tuple, compute) -> pd.DataFrame:
        """``compute()``, or a copy of the frame it gave for ``key`` before (a seed of None: always anew)."""
        try:
            hash(key)
        except TypeError:  # a metric given as an unhashable object
            return compute()
        if key[-1] is None:
            return compute()
        if key not in self._memo:
            self._memo[key] = compute()
        return self._memo[key].copy()

    @classmethod
    @validate_params(frame=Given("a pandas DataFrame of per-query values: model, the query column, one column per "
                                 "metric"), query=Column())
    def from_per_query(cls, frame: pd.DataFrame, query: str = "query") -> Results:
        """Results from per-query values computed elsewhere (to compare them, report them...).

        ``frame`` has a ``model`` column, the query column and one column per metric; the summary
        is each model's mean over its queries (NaN values left out). What the values were computed
        from is not known: ``info["rows"]``, ``rows_per_model`` and ``ties_at_cutoff`` are None, and
        the conventions unknown (the report says so).

        Examples
        --------
        >>> import pandas as pd, topkeval as tk
        >>> frame = pd.DataFrame({"model": ["a", "a", "b", "b"], "query": [1, 2, 1, 2],
        ...                       "recall@10": [0.5, 1.0, 1.0, 1.0]})
        >>> tk.Results.from_per_query(frame).summary
               recall@10
        model
        a           0.75
        b           1.00
        """
        from .engine.results import from_per_query

        return cls(from_per_query(frame, query))

    @property
    def evaluation(self) -> Evaluation:
        """What the evaluation computed, read-only (:class:`~topkeval.engine.Evaluation`): besides what
        Results shows, how to read its rows again (``sources``), the backend that computed it, and
        how to evaluate the same data at other metrics (``rerun``)."""
        return self._evaluation

    @property
    def summary(self) -> pd.DataFrame:
        """One row per model (the index, named ``model``), one column per metric: the mean over the
        evaluated queries (weighted with ``weight=``). A copy: changing it changes nothing else."""
        return self._evaluation.summary.copy()

    @property
    def per_query(self) -> pd.DataFrame:
        """One row per (model, query) evaluated (see the class docstring); built on first access. The
        results of a Spark evaluation keep these on the cluster: a Spark DataFrame (lazy), collected
        by :meth:`to_pandas`."""
        backend = self._evaluation.backend
        if isinstance(backend, KeepsRowsLazily) and backend.lazy_per_query is not None:
            return backend.lazy_per_query
        return _copy(self._evaluation.per_query)

    @property
    def info(self) -> dict:
        """The counts of the evaluation (see the class docstring). A copy: changing it changes nothing else."""
        return copy.deepcopy(dict(self._evaluation.info))

    @property
    def query_name(self) -> str:
        """The query column of :attr:`per_query`: the input's own column name."""
        return self._evaluation.query_name

    @property
    def by(self) -> list[str]:
        """The segment columns (``evaluate(..., by=)``)."""
        return list(self._evaluation.by)

    @property
    def weight(self) -> str | None:
        """The query-weight column (``evaluate(..., weight=)``)."""
        return self._evaluation.weight

    @property
    def attributes(self) -> pd.DataFrame | None:
        """The query-level attributes (segment and weight columns), one row per query id; None without
        ``by=`` and ``weight=``."""
        return self._evaluation.attributes

    @property
    def conventions(self):
        """The :class:`~topkeval.conventions.Conventions` the results were computed under."""
        return self._evaluation.conventions

    @validate_params(table=Options(*_frames.TABLES))
    def to_pandas(self, table: str = "per_query") -> pd.DataFrame:
        """One table of the results as a pandas DataFrame; by default the per-query values.

        Parameters
        ----------
        table : {"per_query", "summary", "segments"}
            :attr:`per_query` (results of a Spark evaluation keep those on the cluster and collect
            them here), :attr:`summary` (indexed by ``model``) or :attr:`segments` (with ``by=``).

        Returns
        -------
        pandas.DataFrame
            A copy: changing it changes nothing else.

        See Also
        --------
        to_arrow, to_polars : the same tables as Arrow and polars tables.
        """
        if table != "per_query":
            return _frames.frame(self, table)
        return _copy(self._evaluation.per_query)

    @validate_params(table=Options(*_frames.TABLES))
    def to_arrow(self, table: str = "per_query"):
        """One table of the results as a ``pyarrow.Table``: :meth:`to_pandas`'s, its index (``model``,
        the segment columns) as leading columns.

        The column types are pandas' own, turned into Arrow's: text ids stay text, integer ids keep
        their width (an ``Int32`` query column stays int32), model names are text, metrics float64.

        Parameters
        ----------
        table : {"per_query", "summary", "segments"}
            As in :meth:`to_pandas`.

        Examples
        --------
        >>> import topkeval as tk
        >>> res = tk.evaluate({"query": ["q1", "q1", "q2", "q2"], "relevance": [1, 0, 0, 1],
        ...                    "s": [0.9, 0.1, 0.9, 0.1]}, metrics=["P@1"], score="s")
        >>> res.to_arrow().to_pydict()
        {'model': ['s', 's'], 'query': ['q1', 'q2'], 'P@1': [1.0, 0.0]}
        >>> res.to_arrow("summary").to_pydict()
        {'model': ['s'], 'P@1': [0.5]}
        """
        return _frames.to_arrow(self, table)

    @validate_params(table=Options(*_frames.TABLES))
    def to_polars(self, table: str = "per_query"):
        """One table of the results as a ``polars.DataFrame``: :meth:`to_arrow`'s, the same column types
        (polars in, polars out: one call). Needs polars, an optional extra:
        ``pip install "topkeval[polars]"``.

        Parameters
        ----------
        table : {"per_query", "summary", "segments"}
            As in :meth:`to_pandas`.

        Raises
        ------
        ParameterError
            polars is not installed.

        Examples
        --------
        >>> import polars as pl, topkeval as tk
        >>> log = pl.DataFrame({"user": ["u1", "u1", "u2", "u2"], "relevance": [1, 0, 0, 1],
        ...                     "s": [0.9, 0.1, 0.9, 0.1]})
        >>> tk.evaluate(log, metrics=["P@1"], query="user", score="s").to_polars()
        shape: (2, 3)
        ┌───────┬──────┬─────┐
        │ model ┆ user ┆ P@1 │
        │ ---   ┆ ---  ┆ --- │
        │ str   ┆ str  ┆ f64 │
        ╞═══════╪══════╪═════╡
        │ s     ┆ u1   ┆ 1.0 │
        │ s     ┆ u2   ┆ 0.0 │
        └───────┴──────┴─────┘
        """
        return _frames.to_polars(self, table)

    @validate_params(baseline=[Model(), None], metrics=[Metrics(empty=False), None], test=TEST, correction=CORRECTION,
                     confidence=CONFIDENCE, n_resamples=RESAMPLES, seed=SEED, missing=Options("intersect", "zero"),
                     progress=Bool(), interval=INTERVAL)
    def compare(self, baseline: str | None = None, *, metrics=None, test: str = "permutation",
                correction: str | None = "holm", confidence: float = 0.95, n_resamples: int = 10_000,
                seed: int | None = 0, missing: str = "intersect", progress: bool = False,
                interval: str = "bootstrap") -> pd.DataFrame:
        """Paired comparison of every model with ``baseline``: deltas, intervals, tests.

        ``delta = mean(M - B)`` over the queries both models have, with a paired bootstrap
        interval (``interval="t"``: the paired t interval, ``delta +- t sqrt(V / n)``, V the variance
        of the differences), a p-value (``test="permutation"``, ``"t"``, ``"wilcoxon"`` or ``"bootstrap"``)
        and its correction across all rows (``correction="holm"``, ``"bonferroni"``, ``"bh"``,
        ``"none"`` or None: no correction). See :func:`topkeval.analysis.compare.compare` for every option and column.
        ``progress=True`` shows progress bars on stderr while it resamples (see :mod:`topkeval.progress`).

        Examples
        --------
        >>> import topkeval as tk
        >>> res = tk.evaluate({"query": [1, 1, 2, 2], "relevance": [1, 0, 0, 1],
        ...                    "a": [0.9, 0.1, 0.9, 0.1], "b": [0.1, 0.9, 0.1, 0.9]},
        ...                   metrics=["precision@1"], score=["a", "b"])
        >>> res.compare(baseline="a")[["model", "metric", "delta", "wins", "losses"]]
          model       metric  delta  wins  losses
        0     b  precision@1    0.0     1       1
        """
        key = ("compare", baseline, None if metrics is None else tuple(metrics) if not isinstance(metrics, str) else metrics,
               test, correction, confidence, n_resamples, missing, seed, interval)
        with shown(progress):
            return self._memoized(key, lambda: _compare.compare(
                self._evaluation, baseline, metrics=metrics, test=test, correction=correction, confidence=confidence,
                n_resamples=n_resamples, seed=seed, missing=missing, interval=interval))

    @validate_params(confidence=CONFIDENCE, n_resamples=RESAMPLES, seed=SEED, progress=Bool(),
                     method=INTERVAL)
    def summary_ci(self, confidence: float = 0.95, n_resamples: int = 10_000, seed: int | None = 0,
                   progress: bool = False, method: str = "bootstrap") -> pd.DataFrame:
        """Each model's mean of each metric with a bootstrap percentile confidence interval, or
        (``method="t"``) Sakai's t interval: ``mean +- t_{(1 + confidence) / 2}(n - 1) sqrt(V / n)``,
        V the variance of the per-query values (n - 1 in its denominator), the margin of error
        his reporting guidelines ask for (no weighted form: refused with ``weight=``).

        ``progress=True`` shows progress bars on stderr while it resamples (see :mod:`topkeval.progress`).
        The corrected estimates of :func:`~topkeval.evaluate_sampled` get none (NaN): their bias is
        not measurable from the sample.

        Returns
        -------
        pandas.DataFrame
            Columns ``model, metric, mean, ci_low, ci_high, n_queries``.

        Examples
        --------
        >>> import topkeval as tk
        >>> res = tk.evaluate({"query": [1, 1, 2, 2], "relevance": [1, 0, 0, 1], "s": [0.9, 0.1, 0.9, 0.1]},
        ...                   metrics=["precision@1"], score="s")
        >>> res.summary_ci()[["model", "metric", "mean", "ci_low", "ci_high"]]
          model       metric  mean  ci_low  ci_high
        0     s  precision@1   0.5     0.0      1.0
        """
        with shown(progress):
            return self._memoized(("summary_ci", confidence, n_resamples, seed, method),
                                  lambda: _compare.summary_ci(self._evaluation, confidence, n_resamples, seed, method))

    @validate_params(metric=MetricName())
    def anova(self, metric: str) -> pd.DataFrame:
        """The two-way ANOVA without replication of one metric: models x queries, over the queries
        where every model has a value (per segment too, with ``by=``).

        ``SS_models = n sum_j (mean_j - mean)^2``, ``SS_queries = m sum_i (mean_i - mean)^2``,
        ``SS_residual = SS_total - SS_models - SS_queries``; ``F = MS / MS_residual`` (the
        residual variance ``V_E``), p from the F distribution.

        Returns
        -------
        pandas.DataFrame
            Rows ``models, queries, residual, total`` (column ``source``): ``sum_sq, df, mean_sq,
            F, p_value``, and ``queries``.

        Examples
        --------
        >>> import topkeval as tk
        >>> log = {"query": [1, 1, 2, 2, 3, 3], "relevance": [1, 0, 0, 1, 1, 0],
        ...        "a": [0.9, 0.1, 0.2, 0.8, 0.9, 0.1], "b": [0.1, 0.9, 0.1, 0.9, 0.9, 0.1],
        ...        "c": [0.9, 0.1, 0.9, 0.1, 0.1, 0.9]}
        >>> tk.evaluate(log, ["precision@1"], score=["a", "b", "c"]).anova("precision@1")[["source", "df", "sum_sq", "F"]]
             source  df    sum_sq    F
        0    models   2  0.666667  1.0
        1   queries   2  0.000000  0.0
        2  residual   4  1.333333  NaN
        3     total   8  2.000000  NaN
        """
        return _many.anova(self._evaluation, metric)

    @validate_params(metric=[Metrics(empty=False), None], test=Options(*_many.ALL_TESTS), confidence=CONFIDENCE,
                     n_resamples=RESAMPLES, seed=SEED, progress=Bool())
    def compare_all(self, metric=None, *, test: str = "tukey", confidence: float = 0.95, n_resamples: int = 10_000,
                    seed: int | None = 0, progress: bool = False) -> pd.DataFrame:
        """Every pair of models, with the family-wise error over all pairs controlled: Tukey's HSD for
        the randomized block design (``test="tukey"``, studentized range) or the randomized Tukey HSD
        (``"randomized_tukey"``: each query's values permuted across the models, against the largest
        difference of means; exact when every order fits in ``n_resamples``).

        Each row: ``model_a, model_b, mean_a, mean_b, delta`` (a - b), its simultaneous interval
        ``ci_low, ci_high``, ``p_value`` (adjusted for all pairs; Tukey's below 1e-12, which scipy's
        integral of the studentized range cannot tell apart, is given as 1e-12, an upper bound, in
        ``attrs["p_floor"]``, and printed ``< 1e-12``), ``significant`` (p below
        ``1 - confidence``), ``es_e`` (Sakai's ES_E: delta / sqrt(residual variance of the two-way ANOVA), one
        scale for every pair; not :meth:`compare`'s ``effect_size``, Cohen's d of one pair's differences), and
        the compact letter display ``letters_a, letters_b`` (models sharing a letter are not
        distinguishable); per metric and segment. Definitions: :mod:`topkeval.analysis.many`.
        ``progress=True`` shows progress bars on stderr while it resamples (see :mod:`topkeval.progress`).

        Examples
        --------
        >>> import topkeval as tk, numpy as np
        >>> rng = np.random.default_rng(0)
        >>> rel = rng.random(2000) < 0.3
        >>> log = {"query": np.repeat(np.arange(200), 10), "relevance": rel,
        ...        "a": rel + rng.normal(size=2000), "b": rel + rng.normal(size=2000), "c": rng.normal(size=2000)}
        >>> res = tk.evaluate(log, ["precision@5"], score=["a", "b", "c"])
        >>> res.compare_all()[["model_a", "model_b", "significant", "letters_a", "letters_b"]]
          model_a model_b  significant letters_a letters_b
        0       a       b        False         a         a
        1       a       c         True         a         b
        2       b       c         True         a         b
        """
        with shown(progress):
            return _many.compare_all(self._evaluation, metric, test=test, confidence=confidence,
                                     n_resamples=n_resamples, seed=seed)

    @validate_params(metric=MetricName(), delta=Real(0, low_open=True), power=Real(0, 1, low_open=True, high_open=True),
                     alpha=Real(0, 1, low_open=True, high_open=True), test=Options(*stattests.POWER))
    def queries_needed(self, metric: str, delta: float, *, power: float = 0.8, alpha: float = 0.05,
                       test: str = "paired_t") -> pd.DataFrame:
        """Topic set size design: how many queries detect a difference ``delta`` of ``metric`` with
        probability ``power`` at level ``alpha``, from the per-query variance this evaluation shows.

        ``test="paired_t"``: a two-sided paired t-test (noncentral t; the variance of the per-query
        differences of the two models, or twice the ANOVA's residual variance for more);
        ``"anova"``: the F-test of three or more models detecting a range ``delta`` between the best
        and the worst (noncentral F, ``lambda = n delta^2 / (2 V_E)``). Also the power at the
        current number of queries and ``detectable_delta``: the smallest difference detected with
        that power at this size (``inf`` for a metric in [0, 1] when it would exceed 1: no
        difference the metric can take; see :func:`topkeval.analysis.many.unit_range`).

        Examples
        --------
        >>> import topkeval as tk, numpy as np
        >>> rng = np.random.default_rng(1)
        >>> rel = rng.random(3000) < 0.3
        >>> log = {"query": np.repeat(np.arange(300), 10), "relevance": rel,
        ...        "a": rel + rng.normal(size=3000), "b": rel + rng.normal(size=3000)}
        >>> res = tk.evaluate(log, ["precision@5"], score=["a", "b"])
        >>> res.queries_needed("precision@5", delta=0.05)[["queries_needed", "queries_now"]]
           queries_needed  queries_now
        0             112          293
        """
        return _many.queries_needed(self._evaluation, metric, delta, power=power, alpha=alpha, test=test)

    @validate_params(metrics=[Metrics(), None])
    def bounds(self, metrics=None) -> pd.DataFrame:
        """What a click log can and cannot say: each metric's naive value (clicks as relevance),
        its estimate (this evaluation's value: inverse propensity weighted with ``propensity=``),
        and its lower and upper bound over what the candidates the logging ranker never showed
        could be (none relevant / as many as could be), with the mean share of each model's top
        min(k, n) that they fill. Needs ``evaluate(..., position=)``.

        ``lower <= truth <= upper`` whatever the unknown relevance, when the clicks and the shown
        candidates' non-clicks are right: the bounds take the shown candidates as judged (no
        position bias) and bound what the never-shown ones could add; the estimate corrects the
        position bias instead (and counts the never-shown as not relevant), so with
        ``propensity=`` it may lie outside them. Each mean runs over the naive value's queries
        (for the ratios, those with a click). Exact for precision, tp, fp, hit_rate, dcg, rbp and rr
        under every tie rule, and for recall, F1 and F-beta under every rule that does not order
        ties by relevance (``(h + sum_S p) / (R + |S|)`` at its extremes over the set S of
        never-shown candidates taken as relevant); ap, ndcg and the others move both ways with a
        candidate's relevance and get no bound (NaN, and the reason in ``note``).

        Returns
        -------
        pandas.DataFrame
            Indexed by (model, metric): ``naive, estimate, lower, upper, never_shown, note``.

        Examples
        --------
        >>> import topkeval as tk
        >>> log = {"query": [1, 1, 1], "click": [1, 0, 0], "position": [1, 2, None], "new": [0.2, 0.1, 0.9]}
        >>> res = tk.evaluate(log, ["precision@2"], relevance="click", score="new", position="position")
        >>> res.bounds()[["naive", "lower", "upper", "never_shown"]]
                         naive  lower  upper  never_shown
        model metric
        new   precision@2    0.5    0.5    1.0          0.5
        """
        return _clicks.bounds(self._evaluation, metrics)

    @validate_params(baseline=Model(), model=Model(), metric=MetricName(), items=Bool())
    def diff(self, baseline: str, model: str, metric: str, items: bool = True) -> pd.DataFrame:
        """Per query, what changed from ``baseline`` to ``model`` on ``metric``, worst regressions first.

        Returns
        -------
        pandas.DataFrame
            Columns ``query, baseline, model, delta`` and, when item ids were given and ``items``
            is True, ``gained`` and ``lost``: the relevant items that entered / left the top k
            (k = R for r_precision; finding them reads the rows again).
            Under ``ties="expected"`` an item counts as gained or lost when its chance of being in
            the top k went up or down.

        Examples
        --------
        >>> import topkeval as tk
        >>> res = tk.evaluate({"query": [1, 1, 1], "relevance": [1, 1, 0], "item": ["x", "y", "z"],
        ...                    "a": [0.9, 0.1, 0.5], "b": [0.1, 0.9, 0.5]},
        ...                   metrics=["recall@1"], score=["a", "b"], item="item")
        >>> res.diff("a", "b", "recall@1")[["query", "delta", "gained", "lost"]]
           query  delta gained lost
        0      1    0.0    [y]  [x]
        """
        return _diff.diff(self._evaluation, baseline, model, metric, items)

    @validate_params(query=QueryId(), k=Int(1, MAX_CUTOFF), baseline=[Model(), None], model=[Model(), None])
    def side_by_side(self, query, k: int = 20, baseline: str | None = None, model: str | None = None) -> pd.DataFrame:
        """One query's top ``k`` under two models, position by position: what did the new model do?

        Each model's candidates are ordered as the kernel orders them (score, then the tie rule;
        under ``ties="expected"`` tied candidates are listed in input order and ``tied_ranks`` gives
        the ranks the group spans). A relevant item is marked ``gained`` in the model's column when
        its chance of being in the top k is higher than under the baseline, and ``lost`` in the
        baseline's column when it is lower (the same rule as :meth:`diff`).

        Parameters
        ----------
        query
            A query id, as in :attr:`per_query`.
        k : int
            Positions shown.
        baseline, model : str, optional
            The two models (default: the first two); with one model, only its list.

        Returns
        -------
        pandas.DataFrame
            Columns indexed by (model, field): ``("", "rank")``, then for each model ``item``,
            ``score``, ``relevance``, (``judged``: with judgments apart, whether the item has a
            judgment, as its grade 0 does not say,) (``tied_ranks``,) ``change`` and ``other_rank``
            (the item's rank under the other model; NaN when that model did not retrieve it). Empty
            positions (a list shorter than k) are None / NaN.

        Examples
        --------
        >>> import topkeval as tk
        >>> res = tk.evaluate({"query": [1, 1, 1], "relevance": [1, 1, 0], "item": ["x", "y", "z"],
        ...                    "a": [0.9, 0.1, 0.5], "b": [0.1, 0.9, 0.5]},
        ...                   metrics=["recall@1"], score=["a", "b"], item="item")
        >>> view = res.side_by_side(1, k=2)
        >>> view["a"][["item", "change"]].values.tolist(), view["b"][["item", "change"]].values.tolist()
        ([['x', 'lost'], ['z', '']], [['y', 'gained'], ['z', '']])
        """
        return _views.side_by_side(self._evaluation, query, k, baseline, model)

    @validate_params(metrics=[Metrics(), None], ks=[IntList(1, MAX_CUTOFF, max_length=MAX_CURVE_POINTS), None])
    def curves(self, metrics=None, ks=None) -> pd.DataFrame:
        """Each model's mean of ``metric@k`` for k = 1..K (default: the largest cutoff evaluated).

        The same evaluation again at every cutoff (one pass of the kernel), under the same
        conventions. Returns columns ``model, metric, k, value``.

        Examples
        --------
        >>> import topkeval as tk
        >>> res = tk.evaluate({"query": [1, 1, 1], "relevance": [1, 0, 1], "s": [0.9, 0.5, 0.1]},
        ...                   metrics=["recall@3"], score="s")
        >>> res.curves()["value"].tolist()
        [0.5, 0.5, 1.0]
        """
        return _views.curves(self._evaluation, metrics, ks)

    @validate_params(k=Int(1, MAX_CUTOFF), popularity=POPULARITY, features=FEATURES, similarity=[Function(), None],
                     catalog=CATALOG, metrics=[Metrics(empty=False), None], categories=CATEGORIES, history=HISTORY,
                     baseline=[Model(), None], distance=[Function(), None])
    def beyond_accuracy(self, k: int = 10, popularity=None, features=None, similarity=None,
                        catalog=None, *, metrics=None, categories=None, history=None,
                        baseline: str | None = None, distance=None) -> pd.DataFrame:
        r"""Coverage, novelty, popularity bias and diversity of each model's top ``k`` over all queries.

        The recommender teams' view (RecTools, Evidently, RePlay): not whether the top k holds
        relevant items, but which items it shows. The lists are those of the evaluation, read again:
        the evaluated queries (queries skipped as empty are left out, as in :attr:`per_query`),
        their candidates scoring at least ``score_threshold``, ranked by score and the tie rule.
        A query's list has :math:`L_q = \min(k, n_q)` items (whatever ``short_lists``).

        Let :math:`p_{qi}` be the probability that item i is in the top k of query q: 0 or 1 under a
        deterministic tie rule; under ``ties="expected"`` the exact share of the orders of its tie
        group that put it there, :math:`\mathrm{clamp}((k - g)/e, 0, 1)` for a group of e
        candidates with g above it. Then, for each model:

        * ``coverage@k`` = :math:`\sum_i (1 - \prod_q (1 - p_{qi})) / |C|`: the expected number of
          distinct items shown in some top k (the queries' orders are independent), over the
          catalogue size :math:`|C|`;
        * ``novelty@k`` = mean over queries of :math:`\sum_i p_{qi}\,(-\log_2 \mathrm{pop}(i)) / L_q`:
          the expected mean self-information of the items shown (RecTools' ``MeanInvUserFreq``);
        * ``popularity@k`` = mean over queries of :math:`\sum_i p_{qi}\,\mathrm{pop}(i) / L_q`
          (average recommendation popularity, ARP: RecTools' ``AvgRecPopularity``, which counts
          interactions, over the number of queries with one);
        * ``gini@k``: the Gini index :math:`\sum_{j=1}^{n} (2j - n - 1)\,x_{(j)} / (n \sum_j x_j)` of
          the exposures :math:`x_i = \sum_q p_{qi}` of the :math:`n = |C|` catalogue items sorted
          ascending (items never shown: 0); 0 when every item is shown equally often, (n - 1) / n
          when one item takes every slot (RecPack's normalisation; Elliot divides by n - 1). Under
          ``ties="expected"``, of the expected exposures;
        * ``diversity@k`` (with ``features`` or ``similarity``): intra-list diversity, the mean over
          queries with :math:`L_q \ge 2` of :math:`\sum_{i<j} P_{qij}\,(1 - \mathrm{sim}(i, j)) /
          \binom{L_q}{2}`, where :math:`P_{qij} = p_{qi} p_{qj}`, or
          :math:`s(s-1)/(e(e-1))` for two members of one tie group of e that takes s slots: the
          exact expected mean pairwise dissimilarity (RecTools' ``IntraListDiversity`` with
          distance 1 - sim, except that RecTools scores a list of fewer than 2 items 0).
          Evidently's ``DiversityMetric`` divides the sum over the pairs by the list length
          :math:`L_q`, not by the :math:`\binom{L_q}{2}` pairs: its value of a list is this one
          times :math:`(L_q - 1)/2` (equal for 3 items), and 0 for a list of one item.

        By default :math:`\mathrm{pop}(i)` is the share of the queries with a relevant candidate in
        which item i is a relevant candidate (RecTools: users who interacted with the item over
        users with interactions; with judgments apart, the judged-relevant items a run retrieved); for novelty an item relevant nowhere counts as relevant in one
        query, as RecTools counts a cold item, and its popularity is 0. Novelty, popularity and
        diversity are means over the queries whose list is not empty (NaN when there are none).

        With ``metrics=``, any beyond-accuracy metrics instead (each name with its cutoff): the
        means over queries of the per-query ones (:meth:`with_beyond` lists them) and the
        catalogue-level ones, which have no per-query value: ``coverage@k``, ``gini@k``,
        ``entropy@k`` (Shannon entropy in bits of the items' shares of the top-k slots, Microsoft
        Recommenders' ``distributional_coverage``; ``entropy(variant=recbole)@k``, RecBole's
        ``ShannonEntropy``: in nats, over the number of items shown) and ``personalization@k``
        (Evidently: 1 - the mean overlap of two queries' top k, over k). Definitions and sources:
        docs/conventions.md, "Beyond accuracy".

        Parameters
        ----------
        k : int
            The length of the lists looked at (of the default columns; names in ``metrics`` carry
            their own).
        popularity : mapping or pandas.Series, optional
            Item -> share in (0, 1] (for example from the training interactions), for every item
            shown; by default from the relevant candidates of the log.
        features : mapping or pandas.DataFrame, optional
            Item -> vector (a DataFrame: one row per item, indexed by item): ``diversity@k`` with
            the cosine similarity.
        similarity : callable, optional
            ``(item, item) -> float`` in [-1, 1]: ``diversity@k`` with this similarity instead
            (anything else it returns, and any error it raises, is a ParameterError naming the pair).
        distance : callable, optional
            ``(item, item) -> float >= 0``, any size (RecTools' Hamming distance counts the features
            that differ): ``diversity@k`` is then the mean of this distance over the pairs of a
            list, whatever ``features`` or ``similarity`` (which serendipity reads) say.
        catalog : int or collection, optional
            The catalogue: its number of items, or its items. By default the distinct items of
            the log (every model's candidates).
        metrics : str or list of str, optional
            Beyond-accuracy metric names (default: the five columns below).
        categories, history, baseline : optional
            As in :meth:`with_beyond` (``category_diversity``, ``novelty(variant=replay)`` and
            serendipity's variants, ``unexpectedness``).

        Returns
        -------
        pandas.DataFrame
            One row per model (the index, ``model``); columns ``coverage@k``, ``novelty@k``,
            ``popularity@k``, ``gini@k`` and, with ``features`` or ``similarity``, ``diversity@k``;
            with ``metrics``, one column per name, as written.

        Raises
        ------
        ParameterError
            k < 1; results without the rows (a score matrix, Spark, a file streamed with
            ``keep_per_query=False``) or without item ids; an item shown without popularity,
            features or a place in ``catalog``.

        See Also
        --------
        side_by_side : one query's top k under two models.

        References
        ----------
        RecTools ``MeanInvUserFreq``, ``AvgRecPopularity``, ``CatalogCoverage`` and
        ``IntraListDiversity``; RecPack ``gini_index``; Castells, Hurley and Vargas, "Novelty and
        diversity in recommender systems" (2015).

        Examples
        --------
        >>> import topkeval as tk
        >>> res = tk.evaluate({"query": [1, 1, 2, 2, 2, 3, 3], "item": ["x", "y", "x", "z", "y", "x", "z"],
        ...                    "relevance": [1, 0, 0, 1, 0, 1, 0], "s": [0.9, 0.1, 0.5, 0.5, 0.0, 0.8, 0.2]},
        ...                   metrics=["recall@1"], score="s", item="item")
        >>> res.beyond_accuracy(k=1).loc["s"].round(4).to_dict()
        {'coverage@1': 0.5, 'novelty@1': 0.7516, 'popularity@1': 0.6111, 'gini@1': 0.5556}

        The top 1 is x for queries 1 and 3; query 2 ties x and z, each shown with probability 1/2.
        x is relevant in 2 of the 3 queries with a relevant item, z in 1, y in none: pop = 2/3, 1/3,
        0. Coverage: x surely, z with probability 1/2, of 3 items: 1.5 / 3. Novelty: the mean of
        -log2(2/3), (-log2(2/3) - log2(1/3)) / 2 and -log2(2/3). Popularity: the mean of 2/3, 1/2
        and 2/3. Gini of the exposures (0, 0.5, 2.5): (-2 * 0 + 0 * 0.5 + 2 * 2.5) / (3 * 3).
        """
        inputs = _beyond.Inputs(popularity, features, similarity, catalog, categories, history, baseline,
                                distance=distance)
        return _beyond.beyond_accuracy(self._evaluation, k, inputs, metrics)

    @validate_params(metrics=Metrics(empty=False), popularity=POPULARITY, features=FEATURES,
                     similarity=[Function(), None], catalog=CATALOG, categories=CATEGORIES, history=HISTORY,
                     baseline=[Model(), None], distance=[Function(), None])
    def with_beyond(self, metrics, *, popularity=None, features=None, similarity=None, catalog=None,
                    categories=None, history=None, baseline: str | None = None, distance=None) -> Results:
        """These results with beyond-accuracy metrics as more metric columns: one value per query.

        ``res.with_beyond(["novelty@10", "diversity@10"], features=vectors)`` adds the columns to
        :attr:`summary` (the means, weighted with ``weight=``) and :attr:`per_query`, so that
        :meth:`compare`, :meth:`summary_ci`, :attr:`segments`, :meth:`curves` and :meth:`report`
        treat them as any metric. ``tk.evaluate(..., metrics=["recall@10", "novelty@10"])`` does
        the same in one call. The metrics that describe a model's lists all together (coverage,
        gini, entropy, personalization) have no per-query value: :meth:`beyond_accuracy` gives them.

        Per query (definitions and sources: docs/conventions.md, "Beyond accuracy"): ``novelty``
        (``variant=replay``: the share of the list the query's ``history`` lacks), ``popularity``,
        ``tail(share=0.1)``, ``mean_pop_rank``, ``diversity`` (``features``, ``similarity`` or ``distance``),
        ``category_diversity`` (``categories``), ``unexpectedness`` (against ``baseline``),
        ``serendipity`` (RecTools; ``variant=evidently`` and ``variant=recommenders`` need
        ``history`` and ``features`` or ``similarity``), ``pauc``, ``pap`` and
        ``rbp_norm(p=0.85)``. Under ``ties="expected"`` each value is its exact mean over the
        orders of tied candidates.

        Parameters
        ----------
        metrics : str or list of str
            Beyond-accuracy metric names with their cutoffs (``"novelty@10"``).
        popularity, features, similarity, catalog, distance
            As in :meth:`beyond_accuracy`.
        categories : mapping or pandas.Series, optional
            Item -> category, for every item shown (``category_diversity``).
        history : pandas.DataFrame or mapping, optional
            The queries' past interactions (training data): a DataFrame with the query column (named
            as in :attr:`per_query`) and one item column, or a mapping query -> items. Popularity is
            then, unless given, the share of the queries of ``history`` that hold each item
            (RecTools' MeanInvUserFreq).
        baseline : str, optional
            The model whose top k ``unexpectedness`` compares each model's with.

        Returns
        -------
        Results

        Raises
        ------
        ParameterError
            A name that is no beyond-accuracy metric, or one without per-query values; results
            without the rows or without item ids; a missing input (``features`` for diversity...).

        Examples
        --------
        >>> import topkeval as tk
        >>> log = {"query": [1, 1, 2, 2], "item": ["x", "y", "x", "z"], "relevance": [1, 0, 0, 1],
        ...        "a": [0.9, 0.1, 0.9, 0.1], "b": [0.1, 0.9, 0.1, 0.9]}
        >>> res = tk.evaluate(log, ["precision@1"], score=["a", "b"], item="item")
        >>> res = res.with_beyond(["novelty@1"], popularity={"x": 0.5, "y": 0.25, "z": 0.125})
        >>> res.per_query[["model", "query", "novelty@1"]]
          model  query  novelty@1
        0     a      1        1.0
        1     a      2        1.0
        2     b      1        2.0
        3     b      2        3.0
        """
        inputs = _beyond.Inputs(popularity, features, similarity, catalog, categories, history, baseline,
                                owner="with_beyond", distance=distance)
        return Results(_beyond.with_beyond(self._evaluation, metrics, inputs))

    @validate_params(metric=Text(empty=False), ks=[IntList(1, MAX_CUTOFF, max_length=MAX_CURVE_POINTS), None],
                     ax=[Axes(), None])
    def plot_curve(self, metric: str = "recall", ks=None, ax=None):
        """A matplotlib Figure: ``metric@k`` against k for each model (needs matplotlib: the
        ``plot`` extra). See :meth:`curves` for the numbers."""
        from .outputs.plots import plot_curve

        return plot_curve(self, metric, ks, ax)

    @validate_params(metric=MetricName(), baseline=[Model(), None], model=[Model(), None],
                     ax=[Axes(), None])
    def plot_deltas(self, metric: str, baseline: str | None = None, model: str | None = None, ax=None):
        """A matplotlib Figure: the distribution of per-query ``model - baseline`` differences of
        ``metric`` (the values of :meth:`diff`), with their mean."""
        from .outputs.plots import plot_deltas

        return plot_deltas(self, metric, baseline, model, ax)

    @validate_params(path=FilePath(), baseline=[Model(), None], model=[Model(), None], metric=[MetricName(), None],
                     queries=[Ids(), None], worst=Int(0, 100_000), k=[Int(1, MAX_CUTOFF), None],
                     images=[Template("item"), Map(), Function(), None],
                     title=Text(max_length=1000), confidence=CONFIDENCE, test=TEST, correction=CORRECTION,
                     n_resamples=RESAMPLES, seed=SEED, curves=Bool(), digits=DIGITS, overwrite=Bool(), progress=Bool())
    def report(self, path, baseline: str | None = None, *, model: str | None = None, metric: str | None = None,
               queries=None, worst: int = 10, k: int | None = None, images=None, title: str = "topkeval report",
               confidence: float = 0.95, test: str = "permutation", correction: str | None = "holm",
               n_resamples: int = 10_000, seed: int | None = 0, curves: bool = True, digits: int = 4,
               overwrite: bool = False, progress: bool = False) -> str:
        """Write a self-contained HTML report (no network needed to open it) and return its path.

        The summary with confidence intervals, the comparison with ``baseline`` (tests, corrected
        p-values, wins/ties/losses), metric@k curves, the distribution of per-query differences,
        the worst regressions with their top k side by side, the conventions and the counts of
        ``info``.

        Parameters
        ----------
        path : str or Path
            The HTML file. An existing file is replaced only with ``overwrite=True``.
        baseline : str, optional
            The model the others are compared with (default: the first).
        model : str, optional
            The model whose per-query differences and top k are shown (default: the first other one).
        metric : str, optional
            The metric of the worst regressions (default: the first).
        queries : list, optional
            Query ids to show side by side, besides the worst regressions (a list, even for one).
        worst : int
            How many of the worst regressions to list and show, 0 to 100,000 (default 10).
        k : int, optional
            Positions of the side-by-side view (default: the smallest cutoff evaluated, at most 20, or
            10 without one); a list shorter
            than k shows its whole length.
        images : str, mapping or callable, optional
            Thumbnails in the side-by-side view: a URL pattern with ``{item}``
            (``"https://cdn/{item}.jpg"``), a mapping or a function from item id to URL (an error it
            raises is a ParameterError naming the item). Only http(s) and ``data:image/`` URLs are shown.
        title : str
            The page's title.
        confidence : float
            As in :meth:`compare` and :meth:`summary_ci`.
        test : str
            As in :meth:`compare`.
        correction : str or None
            As in :meth:`compare`.
        n_resamples : int
            As in :meth:`compare` and :meth:`summary_ci`.
        seed : int or None
            As in :meth:`compare` and :meth:`summary_ci`.
        curves : bool
            Evaluate the metric@k curves (one more pass over the data; default True).
        digits : int
            Digits after the decimal point, 0 to 15 (default 4).
        overwrite : bool
            Replace an existing regular file at ``path``.
        progress : bool
            Show progress bars on stderr: the report's steps and its resampling (see :mod:`topkeval.progress`).

        Returns
        -------
        str
            The path written.

        Examples
        --------
        >>> import os, tempfile
        >>> import topkeval as tk
        >>> res = tk.evaluate({"query": [1, 1, 2, 2], "relevance": [1, 0, 0, 1], "item": ["x", "y", "x", "y"],
        ...                    "a": [0.9, 0.1, 0.9, 0.1], "b": [0.1, 0.9, 0.1, 0.9]},
        ...                   metrics=["precision@1"], score=["a", "b"], item="item")
        >>> path = res.report(os.path.join(tempfile.mkdtemp(), "report.html"), baseline="a", curves=False)
        >>> from pathlib import Path
        >>> "Comparison with a" in Path(path).read_text(encoding="utf-8")
        True
        """
        from .outputs.html import write_report

        with shown(progress):
            return write_report(self, path, baseline=baseline, model=model, metric=metric, queries=queries or [],
                                worst=worst, k=k, images=images, title=title, confidence=confidence, test=test,
                                correction=correction, n_resamples=n_resamples, seed=seed, curves=curves,
                                digits=digits, overwrite=overwrite)

    @validate_params(run_id=[Text(empty=False, max_length=1000), None], prefix=KeyPath(), per_query=Bool(),
                     report=Bool(), ci=[CONFIDENCE, None], baseline=[Model(), None], n_resamples=RESAMPLES, seed=SEED,
                     step=Int(0, 2**63 - 1), artifact_path=KeyPath())
    def log_mlflow(self, run_id: str | None = None, *, prefix: str = "", per_query: bool = True, report: bool = True,
                   ci: float | None = None, baseline: str | None = None, n_resamples: int = 10_000,
                   seed: int | None = 0, step: int = 0, artifact_path: str = "topkeval") -> str:
        """Log the results to an MLflow run: each model's means as metrics, their intervals, the
        per-query table and the HTML report as artifacts. Needs MLflow, an optional extra:
        ``pip install "topkeval[mlflow]"`` (mlflow-skinny is enough).

        Into the run ``run_id``, else the active run (``with mlflow.start_run():``), else a new run
        of the current experiment that is started and ended here; a run this call did not start is
        never ended. Everything is computed before anything is logged. Names and files:
        :mod:`topkeval.integrations.mlflow`.

        Parameters
        ----------
        run_id : str, optional
            The id of an existing run of the tracking store (``mlflow.get_tracking_uri()``).
        prefix : str
            Put before every metric name: ``"val/"`` logs ``val/<model>/<metric>``. ASCII letters,
            digits, ``_ - .``, spaces and ``/``.
        per_query : bool
            Log the per-query table (:meth:`to_arrow`'s) as ``per_query.parquet``.
        report : bool
            Log the HTML report (:meth:`report`) as ``report.html``.
        ci : float, optional
            Also log each mean's bootstrap interval at this level (:meth:`summary_ci`) as
            ``<model>/<metric>_ci_low`` and ``_ci_high``; the report's intervals take the same level.
        baseline : str, optional
            The report's baseline (default: the first model).
        n_resamples, seed
            Of the intervals and the report's tests, as in :meth:`summary_ci`.
        step : int
            The MLflow step of the metrics (an epoch, a training step).
        artifact_path : str
            The folder of the run's artifacts that receives the files (``""``: the top).

        Returns
        -------
        str
            The id of the run logged into.

        Raises
        ------
        ParameterError
            MLflow is not installed; ``run_id`` names no run, or a deleted one; two means would take
            one MLflow name; the per-query values are needed and were not kept.

        Examples
        --------
        >>> import mlflow, topkeval as tk  # doctest: +SKIP
        >>> res = tk.evaluate("recs.parquet", ["recall@10", "ndcg@10"], query="user", item="item",
        ...                   model="model", qrels="truth.parquet")  # doctest: +SKIP
        >>> with mlflow.start_run():  # doctest: +SKIP
        ...     res.log_mlflow(prefix="val/", ci=0.95)  # val/als/recall_at_10, val/als/recall_at_10_ci_low, ...
        """
        from .integrations.mlflow import log_results

        return log_results(self, run_id, prefix=prefix, per_query=per_query, report=report, ci=ci, baseline=baseline,
                           n_resamples=n_resamples, seed=seed, step=step, artifact_path=artifact_path)

    @validate_params(baseline=[Model(), None], digits=DIGITS, test=TEST, correction=CORRECTION,
                     confidence=CONFIDENCE, n_resamples=RESAMPLES, seed=SEED)
    def to_latex(self, baseline: str | None = None, digits: int = 4, *, test: str = "permutation",
                 correction: str | None = "holm", confidence: float = 0.95, n_resamples: int = 10_000,
                 seed: int | None = 0) -> str:
        """The summary as a LaTeX table (booktabs): the best value of each metric in bold, and with
        ``baseline`` a dagger on the values significantly better than the baseline's (corrected
        p-value of :meth:`compare` below 1 - confidence), explained by a note under the table where a
        value has one. Needs ``\\usepackage{booktabs}``.

        Examples
        --------
        >>> import topkeval as tk
        >>> res = tk.evaluate({"query": [1, 1], "relevance": [1, 0], "a_b": [0.9, 0.1]},
        ...                   metrics=["precision@1"], score="a_b")
        >>> print(res.to_latex())
        \\begin{tabular}{lr}
        \\toprule
        Model & precision@1 \\\\
        \\midrule
        a\\_b & \\textbf{1.0000} \\\\
        \\bottomrule
        \\end{tabular}
        """
        from .outputs.text import latex

        return latex(self, baseline=baseline, digits=digits, test=test, correction=correction,
                     confidence=confidence, n_resamples=n_resamples, seed=seed)

    @validate_params(digits=DIGITS)
    def to_markdown(self, digits: int = 4) -> str:
        """The summary as a GitHub markdown table (every id and name escaped), per segment with
        ``by=``, and the notes of :attr:`info`: ``to_string("markdown")`` without its last newline.

        Examples
        --------
        >>> import topkeval as tk
        >>> res = tk.evaluate({"query": [1, 1], "relevance": [1, 0], "s": [0.9, 0.1]}, metrics=["P@1"], score="s")
        >>> print(res.to_markdown(digits=2))
        | model | P@1 |
        |---|---:|
        | s | 1.00 |
        <BLANKLINE>
        _1 of 1 query evaluated_
        """
        return self.to_string("markdown", digits=digits).rstrip("\n")

    @validate_params(format=Text(empty=False, max_length=100), per_query=Bool(), ci=[CONFIDENCE, None], digits=DIGITS)
    def to_string(self, format: str = "table", per_query: bool = False, ci: float | None = None,
                  digits: int = 4) -> str:
        """The results as ``topkeval evaluate --format`` prints them, in any registered output format
        (:mod:`topkeval.outputs.formats`: ``table``, ``markdown``, ``csv``, ``json``, ``trec``).

        The means (per segment with ``by=``), or with ``per_query`` every (model, query) row and then
        the means; with ``ci``, each mean's bootstrap interval at that level (:meth:`summary_ci`);
        then the notes of :attr:`info` (skipped queries, ties at a cutoff).

        Examples
        --------
        >>> import topkeval as tk
        >>> res = tk.evaluate({"query": [1, 1, 2], "relevance": [1, 0, 1], "s": [0.9, 0.1, 0.5]},
        ...                   metrics=["P@1"], score="s")
        >>> print(res.to_string("csv"), end="")
        model,P@1
        s,1.0
        >>> [line.split() for line in res.to_string("trec").splitlines()]
        [['runid', 'all', 's'], ['num_q', 'all', '2'], ['P_1', 'all', '1.0000']]
        """
        from dataclasses import replace

        from .outputs import formats

        document = formats.results_document(self, per_query=per_query, ci=ci)
        return formats.render(format, replace(document, digits=digits))

    def _repr_html_(self) -> str:
        from .outputs.html import results_html

        return results_html(self)

    @property
    def segments(self) -> pd.DataFrame:
        """The means per segment (``evaluate(..., by=)``) and model, weighted with ``weight=``, then the
        overall rows (segment ``"(all)"``): columns the metrics, ``queries`` (and ``weight``).

        Examples
        --------
        >>> import topkeval as tk
        >>> log = {"query": [1, 1, 2, 2], "relevance": [1, 0, 0, 1], "s": [0.9, 0.1, 0.9, 0.1],
        ...        "device": ["mobile", "mobile", "desktop", "desktop"]}
        >>> tk.evaluate(log, ["precision@1"], score="s", by="device").segments
                       precision@1  queries
        device  model
        desktop s              0.0        1
        mobile  s              1.0        1
        (all)   s              0.5        2
        """
        return _segments.segment_summary(self._evaluation)

    @property
    def models(self) -> list[str]:
        """Model names, in the order given."""
        return list(self._evaluation.summary.index)

    @property
    def metrics(self) -> list[str]:
        """The metrics' column labels: the names as requested (blanks removed), in that order;
        ``info["metric_names"]`` maps each to its canonical name."""
        return list(self._evaluation.summary.columns)

    @validate_params(metric=MetricName())
    def label(self, metric) -> str:
        """The column label of an evaluated metric, found by any of its names: the label itself
        (the name as requested), the canonical name or another alias (``"map"``, ``"ap"`` and
        ``"AP"`` find the one column of average precision). Every method that takes a metric
        name looks it up here.

        Raises
        ------
        ParameterError
            The metric was not evaluated (or is no metric name).

        Examples
        --------
        >>> import topkeval as tk
        >>> res = tk.evaluate({"query": [1, 1], "relevance": [1, 0], "s": [0.9, 0.1]}, metrics=["map", "P@1"], score="s")
        >>> res.metrics, res.label("ap"), res.label("precision@1")
        (['map', 'P@1'], 'map', 'P@1')
        """
        return self._evaluation.label(metric)

    @validate_params(per_query=Bool())
    def to_dict(self, per_query: bool = False) -> dict:
        """A JSON-ready dict: ``{"summary": {model: {metric: value}}, "info": {...}}`` (NaN as None),
        ``"segments"`` (rows of :attr:`segments`) with ``by=``, and ``"per_query"`` (a list of rows)
        when asked."""
        from .outputs.text import json_ready, records

        table = self._evaluation.summary
        summary = {str(m): {c: json_ready(table.loc[m, c]) for c in table.columns} for m in table.index}
        out = {"summary": summary, "info": json_ready(dict(self._evaluation.info))}
        if self.by:
            out["segments"] = records(self.segments.reset_index())
        if per_query:
            out["per_query"] = records(self._evaluation.per_query)  # collected from Spark too
        return out

    def __repr__(self) -> str:
        info = self._evaluation.info
        from .outputs.text import evaluated_text, info_lines, skipped_text

        skipped = skipped_text(info)
        head = (f"Results: {len(self.models)} model(s), {evaluated_text(info)}"
                + (f" ({skipped})" if skipped else " (0 skipped as empty)"))
        # what the first line does not say: judged queries a run lacks, cutoffs beyond every list, ties, clicks
        notes = "".join(f"\nnote: {line}" for line in info_lines(info, self._evaluation.metric_objects)[1:])
        return head + "\n" + self._evaluation.summary.to_string() + notes
