"""The front doors: ``evaluate()``, ``evaluate_matrix()``, ``off_policy()``, ``evaluate_sampled()`` and
the one-ranking functions.

Each declares its public signature, checks each parameter alone (``@validate_params``), documents
itself, and makes one call: :mod:`topkeval.request` checks the parameters together and hands the
request to the backend that takes the data (:mod:`topkeval.backends`); none computes anything itself.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from . import request
from .analysis.offpolicy import ESTIMATORS, MIN_CLICKS, MIN_ESS
from .analysis.offpolicy import TIES as OFF_POLICY_TIES
from .conventions import Conventions, resolve
from .metrics.names import DEFAULT_MATRIX_METRICS, DEFAULT_METRICS, MAX_CUTOFF
from .params import (
    CONVENTIONS,
    SEED,
    SETTINGS,
    THREADS,
    Bool,
    Column,
    Columns,
    Function,
    Given,
    Int,
    Metrics,
    OptionList,
    Options,
    Real,
    Text,
    validate_params,
)
from .results import CATALOG, CATEGORIES, FEATURES, HISTORY, POPULARITY, Results

if TYPE_CHECKING:
    from typing_extensions import Unpack

    from .conventions import ConventionSettings


@validate_params(
    data=Given("read by topkeval.inputs (tables, files, TREC runs) or topkeval.backends.spark"),
    metrics=Metrics(), query=Column(), relevance=[Column(), None], score=Columns(), item=[Column(), None],
    conventions=CONVENTIONS, qrels=[Given("read as judgments by topkeval.inputs.judgments"), None], model=[Column(), None],
    missing_queries=Options("skip", "zero"), depth=[Int(1, MAX_CUTOFF), None], judged_only=Bool(),
    chunk_rows=[Int(1), None], progress=[Function(), Bool(), None], keep_per_query=Bool(), threads=THREADS,
    ascending=Bool(), by=[Columns(), None], weight=[Column(), None], position=[Column(), None],
    propensity=[Given("a column, a mapping position -> probability, or estimate_position_bias's or "
                      "popularity_propensity's result: checked by topkeval.engine.unbiased"), None],
    clip=[Real(1.0), None], popularity=POPULARITY, features=FEATURES, similarity=[Function(), None], catalog=CATALOG,
    categories=CATEGORIES, history=HISTORY, baseline=[Text(empty=False), None], distance=[Function(), None],
    settings=SETTINGS,
)
def evaluate(
    data,
    metrics=DEFAULT_METRICS,
    query: str = "query",
    relevance: str | None = "relevance",
    score: str | Sequence[str] = "score",
    item: str | None = None,
    *,
    conventions: str | Conventions | None = None,
    qrels=None,
    model: str | None = None,
    missing_queries: str = "skip",
    depth: int | None = None,
    judged_only: bool = False,
    chunk_rows: int | None = None,
    progress=None,
    keep_per_query: bool = True,
    threads: int | None = None,
    ascending: bool = False,
    by: str | Sequence[str] | None = None,
    weight: str | None = None,
    position: str | None = None,
    propensity=None,
    clip: float | None = None,
    popularity=None,
    features=None,
    similarity=None,
    catalog=None,
    categories=None,
    history=None,
    baseline: str | None = None,
    distance=None,
    **settings: Unpack[ConventionSettings],
) -> Results:
    """Evaluate one or more models on a log of many queries.

    Each row of ``data`` is a candidate: a query id, a relevance grade and one score column per
    model. For every model and query the kernel computes h(k) (relevant candidates among the top
    k) for all requested cutoffs in one pass; metrics are functions of h(k), R (relevant items)
    and N (non-relevant candidates), for example ``recall@k = h(k) / R`` and
    ``precision@k = h(k) / k``. The summary is the mean over the evaluated queries.

    Parameters
    ----------
    data : pandas.DataFrame, polars.DataFrame, pyarrow.Table, dict of arrays, str or Path
        The log (an Arrow dataset or record batch reader is read whole; a dict's columns may be
        lists, arrays, tensors or pandas, polars and Arrow columns and arrays), or a path to a
        .parquet file (or directory: its files are read in the schema of the folder, a value that
        does not fit it is an error) or a .csv / .tsv file (whose id columns are read as text), or
        a TREC run file, or a list of TREC run files (with ``qrels``). Rows of a query need not be
        contiguous. ir_datasets' and ir_measures' rows (namedtuples, read once), dicts of dicts
        ``{query: {doc: score}}`` (with ``qrels``) and tables in ir_measures' or PyTerrier's column
        names (``query_id``/``doc_id``, ``qid``/``docno``) are read as those tools name them, for
        the roles left at their defaults (:mod:`topkeval.inputs.ecosystems`); so are ``qrels``.
    metrics : str or list of str
        Metric names such as ``"recall@20"``, ``"fbeta(beta=0.5)@10"``, ``"r_precision"``;
        aliases (``P@10``, ``Rprec``, ``success@5``) are accepted. The defaults are recall@20,
        precision@20, f1@20, specificity@20 and r_precision, less specificity with ``qrels=``
        (the rows are then each model's retrieved list, without the candidates it left out, so
        specificity would count only the negatives it retrieved: 0 for a list of 20 or fewer; name
        it to have it) or with ``propensity=``.
    query : str
        Column name of the query id. The query column appears in the results beside other
        columns, so it may not be called ``model``, ``baseline``, ``delta``, ``gained``, ``lost``
        or like a metric (``recall@10``): rename such a column.
    relevance : str or None
        Column name of the relevance grade. None, with a qrels table: the table lists the relevant
        (query, item) pairs only (interactions: a user's purchases, clicks, ratings kept), and each
        is relevant with grade 1; a pair listed twice (a repeat purchase) counts once.
    score : str or list of str
        One score column per model (higher is better unless ``ascending``); the column name is the
        model name.
    item : str, optional
        Item id column: checks that no item appears twice in a query, and is needed by
        ``ties="item_desc"`` / ``"item_asc"``, by ``qrels`` and by ``Results.diff``'s item lists.
    conventions : str or Conventions, optional
        A preset (``"trec_eval"``, ``"surprise"``...); the convention keywords override it.
    qrels : table or path, optional
        Judgments kept apart from the run (TREC style): columns ``query``, ``item`` and
        ``relevance`` (same names as above), or a TREC qrels file. Then ``data`` is a run (query,
        item, score; or TREC run files), R counts every judged-relevant item, retrieved or not,
        and a retrieved item without a judgment is non-relevant. Queries of the run without any
        judgment are left out (counted in ``info``). This is also how to evaluate a table of
        top-N recommendations against a separate table of true interactions. With TREC run files
        as ``data``, ``query``, ``item`` and ``relevance`` name the columns of a qrels table (and
        ``query`` the query column of the results); ``score`` and ``model`` are refused (a run's
        fields are fixed, its tag names the model).
    model : str, optional
        A run-name column of ``data`` (a stacked table: one row per model, query and candidate): each
        of its values is a model, named by its text, with the one ``score`` column. With ``qrels``
        every model is matched to the judgments; without, each model's rows are evaluated as that
        model's table alone would be (R counts the relevant candidates among its own rows, as in
        the wide form). ``info["evaluated_per_model"]``, ``info["skipped_empty_per_model"]`` and
        ``info["without_rows_per_model"]`` give each model's counts, which add up to
        ``info["queries"]``; ``info["evaluated"]`` and ``info["skipped_empty"]`` are those of the
        model with the most evaluated queries (``info["counts_of_model"]`` where the models' counts
        differ). A stacked file is read whole.
    missing_queries : {"skip", "zero"}
        With ``qrels``: a judged query absent from a run is left out (trec_eval) or scored as an
        empty list (trec_eval ``-c``).
    depth : int, optional
        Keep only the first ``depth`` candidates of each query under the tie rule (trec_eval
        ``-M``); needs a deterministic tie rule.
    judged_only : bool
        With ``qrels``: drop retrieved items without a judgment before ranking (trec_eval ``-J``).
    chunk_rows : int, optional
        For a parquet or CSV path: read and evaluate it in batches of this many rows, in bounded
        memory (see :mod:`topkeval.inputs.stream`); by default parquet files of more than 20 million rows
        are streamed in batches of 5 million. Results equal the in-memory path.
    progress : bool or callable, optional
        True: progress bars on stderr while a file is streamed (see :mod:`topkeval.progress`); a
        callable: called with the number of rows read after each batch of a streamed file.
    keep_per_query : bool
        For a streamed file: False keeps only running sums, so memory does not grow with the
        number of queries (``per_query`` is then empty, and ``compare``, ``summary_ci`` and
        ``diff``, which need the per-query values, refuse the results).
    threads : int, optional
        Threads for the kernel (default: the CPUs available, or ``TOPKEVAL_THREADS``).
    ascending : bool
        The score columns are ranks or distances: lower is better.
    by : str or list of str, optional
        Segment columns: query-level attributes (the same on every row of a query; refused
        otherwise), such as device or market. ``per_query`` gains them, ``Results.segments`` gives
        the means per segment, ``compare``, ``summary_ci`` and the report break down by segment
        (plus the overall rows). Tables, files (streamed too), judgments apart (read from the run)
        and Spark DataFrames (the per-query values are then collected); not TREC run files.
    weight : str, optional
        A column of query weights (traffic, revenue; the same on every row of a query, finite and
        >= 0): the summary holds weighted means ``sum_q w_q v_q / sum_q w_q`` and the comparison
        resamples with the weights, exactly for any finite weights (1e308 or 5e-324 alike).
        ``info["weight"]`` has the total weight (inf beyond the largest float).
    position : str, optional
        A click log's column with the 1-based position at which the logging ranker showed each
        candidate (empty: never shown). Alone it lets :meth:`Results.bounds` bound every metric
        over what the never-shown candidates could be; with ``propensity`` the metrics are
        estimated by inverse propensity weighting.
    propensity : mapping, str or estimate_position_bias's / popularity_propensity's result, optional
        The examination probability of each position (``{1: 1.0, 2: 0.62, ...}``, or a
        :class:`~topkeval.analysis.bias.PositionBias`), a column of per-row probabilities, or per-item
        propensities (:func:`~topkeval.popularity_propensity`, with ``item``). Each click weighs
        ``1 / p``: precision@k, tp@k, dcg@k and rbp become unbiased sums (IPS), and
        recall_micro@k, f1_micro@k and fbeta_micro@k ratios of such sums pooled over the queries
        (consistent; :mod:`topkeval.metrics.pooled`). Per-query ratios (recall@k, F1@k,
        R-precision, ap, ndcg) are refused, with what to use instead: their self-normalised
        estimates are biased with few clicks per query; so are the metrics without a per-item
        form. The default metrics become recall_micro@20, precision@20 and f1_micro@20.
        ``info["ips"]`` has the effective sample size ``(sum w)^2 / sum w^2``, each metric's
        estimator, the skewness the weights give the estimates (judged from every shown
        candidate's propensity: above 0.3 for a sum, 0.08 for a pooled ratio, their intervals
        may be overconfident) and the
        ``warnings`` given (once each, as :class:`~topkeval.TopkevalWarning`). Unless
        ``conventions`` or ``empty_queries`` / ``undefined`` say otherwise, every query enters the
        means (a query without a click estimates 0, exactly: ``empty_queries="keep",
        undefined="nan"``). :meth:`Results.bounds` puts the naive numbers (clicks as relevance)
        beside them. See the how-to page on click logs.
    clip : float, optional
        The largest weight a click may take (``>= 1``). It lowers the variance and biases every
        estimate low, toward the logging ranker: evaluate warns when a weight was clipped, and
        summary_ci, compare and the other decisions refuse such results.
    popularity, features, similarity, catalog, categories, history, baseline, distance : optional
        What the beyond-accuracy metrics among ``metrics`` read besides the lists (``novelty@10``,
        ``diversity@10``, ``serendipity@10``...; they need ``item``): see
        :meth:`Results.with_beyond`, which this calls, and :meth:`Results.beyond_accuracy`.
    **settings
        The conventions of :class:`~topkeval.conventions.Conventions`: ``ties``,
        ``empty_queries``, ``undefined``, ``short_lists``, ``threshold``, ``score_threshold``,
        ``discount``, ``item_order``, ``score_precision``, ``nonpositive_scores`` (defaults:
        ``"expected"``, ``"skip"``, ``0.0``, ``"pad"``, None, None, ``"log2"``, ``"typed"``,
        ``"exact"``, ``"count"``).

    Returns
    -------
    Results
        ``summary`` (model x metric means), ``per_query`` and ``info``.

    Raises
    ------
    TopkevalError
        A ValueError subclass for every user error: missing columns, NaN scores, unknown metrics or
        conventions, duplicate (query, item) rows, an empty table, a missing file.

    Warns
    -----
    TopkevalWarning
        Every query has exactly the same number of candidates and no ``qrels`` were given: if the
        log holds each query's top N only, recall counts only the relevant items inside it. With
        ``propensity``: heavy-tailed weights, candidates never shown in a model's top k, clipped
        weights, or an estimated curve resting on few observations where clicks are weighted by it
        (``info["ips"]["warnings"]``).

    Examples
    --------
    >>> import topkeval as tk
    >>> log = {"query": [1, 1, 1, 2, 2], "relevance": [1, 0, 1, 0, 1],
    ...        "score": [0.9, 0.8, 0.1, 0.5, 0.4]}
    >>> res = tk.evaluate(log, metrics=["recall@2", "precision@2"])
    >>> res.summary
           recall@2  precision@2
    model
    score      0.75          0.5

    Top-N recommendations in one table and the true interactions in another:

    >>> recs = {"user": [1, 1, 2, 2], "item": ["a", "b", "c", "a"], "score": [2.0, 1.0, 2.0, 1.0]}
    >>> truth = {"user": [1, 1, 2], "item": ["a", "z", "b"], "relevance": [1, 1, 1]}
    >>> tk.evaluate(recs, ["recall@2"], query="user", item="item", qrels=truth).summary
           recall@2
    model
    score      0.25
    """
    return Results(request.evaluate(
        data, metrics, query, relevance, score, item, conventions=conventions, qrels=qrels, model=model,
        missing_queries=missing_queries, depth=depth, judged_only=judged_only, chunk_rows=chunk_rows, progress=progress,
        keep_per_query=keep_per_query, threads=threads, ascending=ascending, by=by, weight=weight, position=position,
        propensity=propensity, clip=clip, popularity=popularity, features=features, similarity=similarity,
        catalog=catalog, categories=categories, history=history, baseline=baseline, distance=distance, **settings))


@validate_params(scores=Given("a matrix (numpy, torch) or a dict of them, checked by prepare()"),
                 relevant=Given("a matrix, a sparse matrix or an edge list, checked by prepare()"), metrics=Metrics(),
                 exclude=[Given("as relevant, checked by prepare()"), None], conventions=CONVENTIONS,
                 batch_size=[Int(1), None], threads=THREADS, settings=SETTINGS)
def evaluate_matrix(scores, relevant, metrics=DEFAULT_MATRIX_METRICS, exclude=None, *,
                    conventions=None, batch_size: int | None = None, threads: int | None = None,
                    **settings: Unpack[ConventionSettings]) -> Results:
    """Evaluate a dense score matrix (users x items) against held-out relevance.

    Each row is a user's ranking of the whole catalogue; the metrics are those of
    :func:`topkeval.evaluate`, with the same conventions and the same values as on the long format
    of the same data (one row per non-excluded (user, item) pair). ``recall@k = h(k) / R`` with R
    the user's relevant, non-excluded items.

    Parameters
    ----------
    scores : ndarray or torch.Tensor, shape (users, items), or a dict of them
        Finite scores (cells in ``exclude`` may hold anything, -inf or NaN included: they are never
        candidates; a numpy masked array with masked cells is refused, as numpy would read the
        values behind the mask: pass the mask as ``exclude``); a torch tensor is processed on its own device (CPU or CUDA). A dict
        ``{"old": S1, "new": S2}`` of matrices of one shape evaluates several models of the same
        users (for :meth:`~topkeval.results.Results.compare`); one matrix is the model ``scores``.
        Half-precision scores (float16, bfloat16) are compared as float32, which holds them
        exactly: their order and their ties are those of the half-precision values.
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
        candidates, as if their rows were absent from the long format. A user whose every item is
        excluded has no row there, so it is no query here either (not evaluated, not skipped as
        empty, under every ``empty_queries``; ``info["matrix"]["users_without_candidates"]``).
    conventions, **settings
        As in :func:`topkeval.evaluate`.
    batch_size : int, optional
        Users per batch; by default about 2**24 scores per batch. Bounds the extra memory.
    threads : int, optional
        Threads of the CPU kernel.

    Returns
    -------
    Results
        Queries are the user indices (the per-query column is ``user``). For
        :meth:`~topkeval.results.Results.curves` they keep the score matrices as they were: a copy
        of those in host memory (numpy arrays, CPU tensors), as much memory again; a tensor on a
        GPU as it is (no second copy on the device), refused by ``curves`` once changed in place.

    See Also
    --------
    topkeval.MatrixEvaluator : the same evaluation accumulated batch by batch (a training loop).

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
    return Results(request.evaluate_matrix(scores, relevant, metrics, exclude, conventions=conventions,
                                           batch_size=batch_size, threads=threads, **settings))


@validate_params(
    log=Given("read by topkeval.inputs; checked by topkeval.analysis.offpolicy"), metrics=Metrics(empty=False),
    policy=Given("score columns, or a mapping name -> column, table or PlackettLuce: checked by "
                 "topkeval.analysis.offpolicy"),
    query=Column(), item=Column(), position=Column(), click=Column(),
    pscore=[Column(), Given("a mapping of pscore forms to columns: checked by topkeval.analysis.offpolicy")],
    estimator=[Options(*ESTIMATORS), Given("a list of estimator names: checked by topkeval.analysis.offpolicy")],
    on_policy=[Text(empty=False, max_length=1000), None],
    support=[Given("a table of (item, position) pairs: checked by topkeval.analysis.offpolicy"), None],
    clip=[Real(1.0), None], min_clicks=Real(0), min_ess=Real(0), refuse=Bool(), ties=Options(*OFF_POLICY_TIES),
    seed=SEED, by=[Columns(), None], weight=[Column(), None],
)
def off_policy(log, metrics, *, policy, query: str = "query", item: str = "item", position: str = "position",
               click: str = "click", pscore="pscore", estimator="iips", on_policy: str | None = "logger",
               support=None, clip: float | None = None, min_clicks: float = MIN_CLICKS, min_ess: float = MIN_ESS,
               refuse: bool = True, ties: str = "expected", seed: int | None = 0, by=None, weight=None) -> Results:
    """Estimate a new ranking policy's clicks from the log of a randomised logging policy.

    The log has one row per shown (round, position, item) with its click and ``pscore``, the
    logging policy's probability of what it showed; a round may also list candidates it did not show
    (no position), which a ranker or a Plackett-Luce policy may rank. For each policy the clicks it
    would get at positions 1..k are estimated position by position, ``theta_j = E[click at j]``,
    and each metric is a weighted sum ``sum_j coef_j theta_j``: ``precision@k`` is CTR@k
    (``coef_j = 1/k``), ``tp@k`` the expected clicks in the top k (``coef_j = 1``), ``dcg@k`` the
    clicks weighted by ``1 / log2(j + 1)``. With ``w_ij`` the importance weight of round i's click at
    position j (``n_j`` rounds log position j):

    * ``"iips"``: ``w = pi_e(a_ij at j) / pi_b(a_ij at j)``, ``theta_j = sum_i w_ij c_ij / n_j``
      (unbiased when a click depends only on the round, the position and the item there);
    * ``"rips"``: ``w = pi_e(a_i1..a_ij) / pi_b(a_i1..a_ij)`` (unbiased under cascade clicks: a click
      at j depends only on the items at 1..j);
    * ``"sips"``: ``w = pi_e(slate) / pi_b(slate)`` (unbiased, no assumption on clicks; needs the
      logger to have shown the policy's whole slate);
    * ``"sniips"``, ``"snrips"``, ``"snsips"``: ``theta_j = sum_i w_ij c_ij / sum_i w_ij``
      (self-normalised over the rounds, as Open Bandit Pipeline does: consistent, not unbiased);
    * ``"dr"``: ``theta_j = sum_i [sum_a pi_e(a at j) q(a, j) + w_ij (c_ij - q(a_ij, j))] / n_j``
      with iips's weights and ``q`` each (item, position)'s smoothed click rate, cross-fitted over two
      folds of rounds (see docs/conventions.md).

    Every estimate assumes the logger could show whatever the policy shows (``pi_b > 0`` wherever
    ``pi_e > 0``); with ``support=`` this is checked, and an estimate of a policy with mass where the
    logger had none is refused (NaN) with its bounds in ``info``: IPS counts those clicks as 0, and
    clicks are in [0, 1]. Definitions, assumptions and the simulations that validate the intervals:
    docs/conventions.md ("Off-policy estimates") and docs/how-to/off-policy.md.

    Parameters
    ----------
    log : pandas.DataFrame, polars.DataFrame, pyarrow.Table, dict of arrays, str or Path
        One row per shown (round, position, item), and optionally per candidate not shown (its
        position empty). Read as :func:`evaluate` reads its data.
    metrics : str or list of str
        ``precision@k``, ``tp@k`` or ``dcg@k`` (k at most the logged slate's length).
    policy : str, list of str or mapping
        The policies to evaluate: score columns of the log (deterministic rankers: each round's
        candidates by score, ties under ``ties``), or a mapping from a name to a score column, a
        :class:`~topkeval.PlackettLuce` policy, or a table of the policy's probability of each
        (item, position): columns ``item``, ``position`` and ``probability`` (named as the log's
        item and position columns), with the round column for a policy that differs per round.
        At most 1 per position and per item.
    query, item, position, click : str
        The log's columns: the round id, the item id, the 1-based position at which the logger showed
        the item (empty: not shown), the click (0 or 1).
    pscore : str or mapping
        The column of the logger's probabilities, in the form the estimators read:
        ``item_position`` (the item at its position: iips, sniips, dr), ``cascade`` (the items at
        positions 1..j: rips, snrips) or ``slate`` (the whole slate, the same on its rows: sips,
        snsips). One column, or ``{"item_position": col, "cascade": col, ...}`` for estimators that
        read different forms.
    estimator : str or list of str
        ``"iips"`` (default), ``"sniips"``, ``"rips"``, ``"snrips"``, ``"sips"``, ``"snsips"``,
        ``"dr"``; with several, each policy's rows are named ``"policy (estimator)"``.
    on_policy : str or None
        The name of the row with the logger's own click rates (unweighted: its on-policy value,
        what :meth:`Results.compare` compares the policies with); None leaves it out.
    support : table, optional
        What the logger could show: rows of (item, position), with the round column where it differs
        per round and a ``probability`` column optionally (rows of probability 0 are left out). A
        policy's mass outside it is reported and its estimate refused.
    clip : float, optional
        The largest weight (>= 1): lowers the variance; the IPS and DR estimates become biased low
        (by about ``clip_bias`` in ``info``), the self-normalised ones biased towards the logger.
    min_clicks : float
        The least number of effective clicks an estimate may rest on (Kish's effective size of the
        rounds' weighted clicks); below it the estimate is refused (NaN) with a warning. Default 10:
        below it the simulations of docs/how-to/off-policy.md show intervals that do not cover.
    min_ess : float
        The least effective sample size of the weights (Kish: ``(sum w)^2 / sum w^2`` over the
        rounds) at each position a metric reads; below it the estimate is refused. Default 30: the
        cascade and slate estimators' deep positions, where the logger almost never showed the
        policy's whole prefix, fall below it in the simulations and their intervals do not cover.
    refuse : bool
        True (default): an estimate whose diagnostics say it cannot be trusted is NaN, its reason in
        ``info`` and a warning. False keeps every number, the reason it would have been refused
        beside it (``would_refuse``): to check formulas, or to look at a number at your own risk.
        The checks besides ``min_clicks`` and ``min_ess``: mass where ``support=`` says the logger
        could not show; cascade-like clicks for an estimator assuming item-position clicks; for the
        unnormalised IPS forms (iips, rips, sips), weights whose mean at a position is more than 2
        standard errors below the policy's mass there or 3 above (it must equal it under full
        support: the rounds under-represent the policy's choices); a skewness of the weighted clicks above 0.6,
        judged from the weights of every round the logger matched and a click rate fitted to them
        (``skewness`` in ``info``: a few rare large weights whose clicks the estimate swings on).
    ties : {"expected", "first", "item_asc", "item_desc"}
        A ranker's order among equal scores: ``"expected"`` spreads a tie group uniformly over the
        ranks it spans (a stochastic policy), the others break ties by row order or item id.
    seed : int or None
        Of the doubly robust estimator's folds and of a Plackett-Luce policy's Monte Carlo.
    by, weight : None
        Refused: segments and weights of rounds have no off-policy form here (a segment's mean of
        the per-round terms is not that segment's estimate); filter the log and estimate each
        segment from its own rounds.

    Returns
    -------
    Results
        One row per policy (and estimator), and the logger's row: ``summary`` holds the estimates,
        ``per_query`` each round's term of them (see docs/conventions.md: its mean is the estimate,
        and :meth:`Results.summary_ci` and :meth:`Results.compare` resample rounds; a term is not
        the round's outcome, so ``info["per_query_terms"]`` says so, and compare refuses the
        signed-rank test and leaves out wins, ties and losses, :meth:`Results.diff` refuses, the
        report leaves out the per-query sections), ``info["off_policy"]``
        what each column estimates, per position the click rate with its interval, and per estimate
        its diagnostics: ``effective_sample_size``, ``effective_clicks``, the weights clipped,
        ``never_shown`` (the policy's mass on (item, position) pairs this log never shows),
        ``unsupported`` and its bounds (with ``support=``), and why an estimate was refused.

    Raises
    ------
    TopkevalError
        A pscore outside (0, 1] or missing on a shown row, a click on a row without a position, two
        rows at one (round, position), a policy whose probabilities sum above 1 at a position or for
        an item, a slate pscore that differs within a round, k beyond the logged positions.

    Warns
    -----
    TopkevalWarning
        An estimate refused (the policy's mass where the logger could not show, too few effective
        clicks or rounds, or cascade-like clicks for an estimator that assumes item-position clicks:
        clicks below a click at most half as frequent as below none, by more than 3 standard errors);
        weights capped by ``clip``. The tiny example below passes ``refuse=False`` to show the
        arithmetic (4 rounds are far too few to trust); a real log keeps the default.

    Examples
    --------
    A logger that shows two of three items in uniformly random order (each item at each position
    with probability 1/3); the new ranker puts ``c`` first:

    >>> import topkeval as tk
    >>> log = {"round": [1, 1, 1, 2, 2, 2, 3, 3, 3, 4, 4, 4],
    ...        "item": list("abc" * 4),
    ...        "position": [1, 2, None, 2, None, 1, None, 1, 2, 1, None, 2],
    ...        "click": [0, 0, 0, 0, 0, 1, 0, 0, 1, 0, 0, 0],
    ...        "pscore": [1 / 3] * 12,
    ...        "new": [0.1, 0.5, 0.9] * 4}
    >>> res = tk.off_policy(log, ["precision@2"], policy="new", query="round", refuse=False)
    >>> res.summary
            precision@2
    model
    logger        0.250
    new           0.375
    """
    from .analysis import offpolicy

    evaluation, messages = offpolicy.off_policy(
        log, metrics, policy=policy, query=query, item=item, position=position, click=click, pscore=pscore,
        estimator=estimator, on_policy=on_policy, support=support, clip=clip, min_clicks=min_clicks, ties=ties,
        seed=seed, min_ess=min_ess, refuse=refuse, by=by, weight=weight)
    offpolicy.give_warnings(messages)
    return Results(evaluation)


@validate_params(scores=Given("a matrix (numpy, torch) or a dict of them, checked by prepare()"),
                 test=Given("a matrix, a sparse matrix or an edge list, checked by prepare()"), metrics=Metrics(),
                 n_negatives=Int(1, 2**31 - 1), sampling=Options("uniform", "popularity"),
                 exclude=[Given("as test, checked by prepare()"), None], seed=Int(0, 2**63 - 1),
                 estimator=OptionList("sampled", "corrected", "bv", "mle", "rescaled", "full"),
                 conventions=CONVENTIONS, batch_size=[Int(1), None], threads=THREADS, settings=SETTINGS)
def evaluate_sampled(scores, test, metrics=("recall@10", "ndcg@10"), n_negatives: int = 100,
                     sampling: str = "uniform", exclude=None, seed: int = 0,
                     estimator: str | Sequence[str] = ("sampled", "corrected", "full"), *, conventions=None,
                     batch_size: int | None = None, threads: int | None = None,
                     **settings: Unpack[ConventionSettings]) -> Results:
    """Evaluate score matrices on sampled negatives, as papers do, and estimate the full-catalogue metrics.

    Each relevant held-out item of a user is ranked with ``m = n_negatives`` negatives drawn from
    the user's **pool**, the items neither in ``exclude`` nor relevant held-out items (``N_u`` of
    them, the user's negatives in the full catalogue). A user's **sampled list** is its relevant
    held-out items and the distinct items drawn for any of them (RecBole's ``uni100`` / ``pop100``;
    with one held-out item per user the leave-one-out HR@k and NDCG@k of He et al. 2017). Every
    estimator is a column named after what it estimates (here for ``recall@10``):

    * ``recall@10[sampled:uni100]``: recall@10 of the sampled lists (``pop100`` under popularity
      sampling; the number is m): a number of its own, which orders models differently from the
      full catalogue (Krichene & Rendle 2020);
    * ``recall@10[corrected:bv]`` (also ``mle``, ``rescaled``): an estimate of the full-catalogue
      recall@10. A held-out item with ``a`` relevant held-out items and ``b`` negatives above it has
      full rank ``a + b + 1``; of its own m draws, ``j ~ Binomial(m, b / N_u)`` score above it. The
      metric is a sum over held-out items of a function ``phi`` of the rank (``recall@k = sum
      1[rank <= k] / R``, ``precision@k = sum 1[rank <= k] / k``, ``ndcg@k = sum gain
      1[rank <= k] / log2(rank + 1) / IDCG@k``, ``ap@k = sum 1[rank <= k] (a + 1) / rank / R``,
      ``f1@k = 2 sum 1[rank <= k] / (k + R)``; ``hit_rate@k`` and ``rr@k`` read the top held-out
      item), each ``phi(b)`` estimated from j: ``rescaled`` by ``phi(round(j N_u / m))``; ``bv`` by
      Krichene & Rendle's bias-variance correction ``x = ((1 - g) A'A + g diag(c))^-1 A' phi`` with
      ``A[b, j] = P(j | b)`` over ``b = 0..N_u`` and ``g = 0.1``; ``mle`` by its posterior mean
      under the maximum-likelihood distribution of ``b / N_u`` (a mixture of one to three beta
      distributions, by BIC, per number ``a``), fitted to the held-out items' j. ``"corrected"`` is
      ``mle``, the most accurate on MovieLens 100k (docs/how-to/sampled.md). Uniform sampling
      only. The ranks finer than ``N_u / m`` are extrapolated, so a correction's bias cannot be
      measured from the sample: its columns get no interval in ``summary_ci`` and ``compare``;
    * ``recall@10``: the metric itself on the full catalogue, exactly as :func:`evaluate_matrix`.

    Parameters
    ----------
    scores : ndarray or torch.Tensor of shape (users, items), or a dict of them
        As in :func:`evaluate_matrix`: the full catalogue's scores (its columns are the catalogue,
        of size N). Only the cells of held-out items and of draws are read for the sampled and
        corrected columns.
    test : array, scipy sparse matrix or torch tensor of shape (users, items), or an edge list
        The held-out interactions (grades, or booleans), as ``relevant`` of :func:`evaluate_matrix`.
        A grade below the relevance threshold is a negative (it may be drawn).
    metrics : str or list of str
        Metric names, as in :func:`evaluate`. The corrections take ``recall``, ``precision``,
        ``hit_rate``, ``ndcg``, ``rr``, ``ap`` and ``f1`` at a cutoff.
    n_negatives : int
        m, the negatives drawn per held-out item (with replacement, as RecBole); fewer than every
        user's pool.
    sampling : {"uniform", "popularity"}
        Each draw uniform over the user's pool, or in proportion to each item's training frequency
        (the number of users whose ``exclude`` holds it; needs ``exclude``).
    exclude : same forms as ``test``, optional
        Items never to recommend to a user (the training interactions): out of the full catalogue
        and of the draws.
    seed : int
        The draws are ``numpy.random.default_rng(seed).random((P, m))``, one number per draw of the
        P held-out items in (user, item) order, each mapped to the place ``floor(r W_u)`` of the
        user's pool laid out in item order (each item taking as many places as its weight; W_u the
        pool's total weight). Under ``ties="expected"`` the seed also orders tied candidates for the
        corrections.
    estimator : str or list of str
        Any of ``"sampled"``, ``"corrected"`` (topkeval's recommended correction, ``"bv"``),
        ``"bv"``, ``"mle"``, ``"rescaled"`` and ``"full"``, one column each per metric.
    conventions, **settings
        As in :func:`evaluate`; ``empty_queries`` must be ``"skip"`` (a user without a held-out item
        has no sampled list). The corrections follow ``ties`` (a tied draw counts as above by the rule;
        under ``"expected"`` by a seeded random order of the user's items), ``short_lists`` and
        ``discount``.
    batch_size, threads : int, optional
        As in :func:`evaluate_matrix`.

    Returns
    -------
    Results
        One row per user with a relevant held-out item (the per-query column is ``user``), one
        column per metric and estimator. ``info["sampled"]``: the protocol, each column's estimator
        (``estimators``), its standard error over users (``standard_error``), and ``reordered``: per
        sampled column, the pairs ``[a, b]`` of models it ranks a above b while the full catalogue
        (or, without it, the correction) ranks b above a; the report and ``repr`` say so.

    Raises
    ------
    TopkevalError
        ``n_negatives`` not below a user's pool (a catalogue no larger than the sample); no held-out
        item; a correction of a metric it does not take, or under popularity sampling; NaN scores
        of a held-out item or a draw; bad matrices (as :func:`evaluate_matrix`).

    References
    ----------
    W. Krichene and S. Rendle, On Sampled Metrics for Item Recommendation, KDD 2020. R. Jin et al.,
    On Estimating Recommendation Evaluation Metrics under Sampling, AAAI 2021. X. He et al., Neural
    Collaborative Filtering, WWW 2017. RecBole's ``uni100`` evaluation (``recbole.sampler``).

    Examples
    --------
    >>> import numpy as np, topkeval as tk
    >>> rng = np.random.default_rng(0)
    >>> scores = rng.random((50, 400))
    >>> test = (np.arange(400)[None, :] == rng.integers(0, 400, 50)[:, None])  # one held-out item each
    >>> res = tk.evaluate_sampled(scores, test, ["hit_rate@10"], n_negatives=99, estimator=["sampled", "full"])
    >>> res.metrics
    ['hit_rate@10[sampled:uni99]', 'hit_rate@10']
    >>> res.summary.round(2)  # random scores: about 10 / 100 among 99 negatives, 10 / 400 in the catalogue
            hit_rate@10[sampled:uni99]  hit_rate@10
    model
    scores                         0.1         0.04
    """
    from .analysis.sampled import evaluate_sampled_scores

    conv = resolve(conventions, owner="evaluate_sampled",
                   also=("n_negatives", "sampling", "exclude", "seed", "estimator", "batch_size", "threads"), **settings)
    return Results(evaluate_sampled_scores(scores, test, metrics, conv=conv, n_negatives=n_negatives,
                                           sampling=sampling, exclude=exclude, seed=seed, estimators=estimator,
                                           batch_size=batch_size, threads=threads))


# ---------------------------------------------------------------------------------------------
# one ranking


RANKING = Given("one value per candidate, read by topkeval.request.one_ranking")

_SINGLE_PARAMS = """
    Parameters
    ----------
    relevance : array-like of shape (n,)
        Relevance grade of each candidate (1/0 clicks, ratings, TREC grades).
    scores : array-like of shape (n,)
        The model's score of each candidate; higher ranks first. Must be finite.
    k : int
        The cutoff, a positive integer.
    items : array-like of shape (n,), optional
        Item ids, for ``ties="item_desc"`` / ``"item_asc"``.
    conventions : str or Conventions, optional
        A preset; the keywords below override it.
    **settings
        The conventions of :class:`~topkeval.conventions.Conventions` (``ties``,
        ``empty_queries``, ``undefined``, ``short_lists``, ``threshold``, ``score_threshold``,
        ``item_order``, ``score_precision``), keyword-only.

    Returns
    -------
    float
        nan when the ranking has no relevant item and ``empty_queries="skip"`` (nothing to
        average), the ``undefined`` value under ``"keep"``.

    Raises
    ------
    TopkevalError
        Lengths differ, k is not a positive int, NaN scores, ``empty_queries="error"`` with no
        relevant item, ``short_lists="error"`` with k > n.
"""


@validate_params(relevance=RANKING, scores=RANKING, k=Int(1, MAX_CUTOFF), items=[RANKING, None],
                 conventions=CONVENTIONS, settings=SETTINGS)
def recall_at_k(relevance, scores, k, *, items=None, conventions=None,
                **settings: Unpack[ConventionSettings]) -> float:
    """Recall at k of one ranking: the share of the relevant items found in the top k.

    ``recall@k = h(k) / R`` where h(k) counts the relevant candidates among the top k (its
    expected value over tie orders under ``ties="expected"``) and R the relevant items.
    {params}
    Examples
    --------
    >>> recall_at_k([1, 1, 0, 0, 1], [0.4, 0.1, 0.2, 0.5, 0.3], 3)  # ranks: 0.5, 0.4, 0.3
    0.6666666666666666
    >>> recall_at_k([1, 0, 0], [0.5, 0.5, 0.1], 1)  # a tie across the cutoff: expected value
    0.5
    """
    return request.one_ranking("recall", relevance, scores, k, items=items, conventions=conventions,
                               owner="recall_at_k", **settings)


@validate_params(relevance=RANKING, scores=RANKING, k=Int(1, MAX_CUTOFF), items=[RANKING, None],
                 conventions=CONVENTIONS, settings=SETTINGS)
def precision_at_k(relevance, scores, k, *, items=None, conventions=None,
                   **settings: Unpack[ConventionSettings]) -> float:
    """Precision at k of one ranking: the share of relevant candidates in the top k.

    ``precision@k = h(k) / k``; with ``short_lists="shrink"`` the denominator is min(k, n).
    {params}
    Examples
    --------
    >>> precision_at_k([1, 1, 0, 0, 1], [0.4, 0.1, 0.2, 0.5, 0.3], 3)
    0.6666666666666666
    >>> precision_at_k([1, 0], [0.9, 0.1], 4), precision_at_k([1, 0], [0.9, 0.1], 4, short_lists="shrink")
    (0.25, 0.5)
    """
    return request.one_ranking("precision", relevance, scores, k, items=items, conventions=conventions,
                               owner="precision_at_k", **settings)


@validate_params(relevance=RANKING, scores=RANKING, k=Int(1, MAX_CUTOFF), beta=Real(0, low_open=True),
                 items=[RANKING, None], conventions=CONVENTIONS, settings=SETTINGS)
def fbeta_at_k(relevance, scores, k, *, beta=1.0, items=None, conventions=None,
               **settings: Unpack[ConventionSettings]) -> float:
    """F-beta at k of one ranking: the weighted harmonic mean of precision@k and recall@k.

    ``fbeta@k = (1 + b^2) h(k) / (b^2 R + k)``, which equals
    ``(1 + b^2) P R / (b^2 P + R)`` and is 0 (not undefined) when h(k) = 0.
    {params}
    beta : float
        Weight of recall relative to precision (positive).

    Examples
    --------
    >>> fbeta_at_k([1, 1, 0, 0, 1], [0.4, 0.1, 0.2, 0.5, 0.3], 3, beta=2.0)
    0.6666666666666666
    """
    family, params = ("f1", ()) if beta == 1.0 else ("fbeta", (("beta", beta),))
    return request.one_ranking(family, relevance, scores, k, params=params, items=items, conventions=conventions,
                               owner="fbeta_at_k", **settings)


@validate_params(relevance=RANKING, scores=RANKING, k=Int(1, MAX_CUTOFF), items=[RANKING, None],
                 conventions=CONVENTIONS, settings=SETTINGS)
def f1_at_k(relevance, scores, k, *, items=None, conventions=None,
            **settings: Unpack[ConventionSettings]) -> float:
    """F1 at k of one ranking: the harmonic mean of precision@k and recall@k.

    ``f1@k = 2 h(k) / (k + R)``; 0 when no relevant candidate is in the top k.
    {params}
    Examples
    --------
    >>> f1_at_k([1, 1, 0, 0, 1], [0.4, 0.1, 0.2, 0.5, 0.3], 3)
    0.6666666666666666
    """
    return request.one_ranking("f1", relevance, scores, k, items=items, conventions=conventions, owner="f1_at_k",
                               **settings)


@validate_params(relevance=RANKING, scores=RANKING, k=Int(1, MAX_CUTOFF), items=[RANKING, None],
                 conventions=CONVENTIONS, settings=SETTINGS)
def specificity_at_k(relevance, scores, k, *, items=None, conventions=None,
                     **settings: Unpack[ConventionSettings]) -> float:
    """Specificity at k of one ranking: the share of non-relevant candidates kept out of the top k.

    ``specificity@k = (N - (min(k, n) - h(k))) / N`` with N the non-relevant candidates
    (true negatives over all negatives); undefined when N = 0.
    {params}
    Examples
    --------
    >>> specificity_at_k([1, 1, 0, 0, 1], [0.4, 0.1, 0.2, 0.5, 0.3], 3)  # one negative in the top 3
    0.5
    """
    return request.one_ranking("specificity", relevance, scores, k, items=items, conventions=conventions,
                               owner="specificity_at_k", **settings)


@validate_params(relevance=RANKING, scores=RANKING, items=[RANKING, None], conventions=CONVENTIONS,
                 settings=SETTINGS)
def r_precision(relevance, scores, *, items=None, conventions=None,
                **settings: Unpack[ConventionSettings]) -> float:
    """R-precision of one ranking: precision at rank R, R being the number of relevant items.

    ``r_precision = h(R) / R`` (TREC ``Rprec``). Not the min(k, R) variants some tools call
    R-precision.
    {params}
    Examples
    --------
    >>> r_precision([1, 1, 0, 0, 1], [0.4, 0.1, 0.2, 0.5, 0.3])  # R = 3, top 3 holds 2
    0.6666666666666666
    """
    return request.one_ranking("r_precision", relevance, scores, None, items=items, conventions=conventions,
                               owner="r_precision", **settings)


for _f in (recall_at_k, precision_at_k, fbeta_at_k, f1_at_k, specificity_at_k, r_precision):
    _f.__doc__ = (_f.__doc__ or "").replace("    {params}", _SINGLE_PARAMS.rstrip("\n"))
