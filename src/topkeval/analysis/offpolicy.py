"""Off-policy evaluation of a ranking policy from the clicks of a randomised logger.

The log holds rounds (an impression: a query, a user's visit). In round ``i`` the logging policy
showed item ``a_ij`` at position ``j`` and the user clicked it (``c_ij = 1``) or not; ``pscore`` is the
logging policy's probability of what it did, in one of three forms (Open Bandit Pipeline's names):

* ``item_position``: ``pi_b(a_ij at j | i)``, the probability of that item at that position;
* ``cascade``: ``pi_b(a_i1 .. a_ij | i)``, the probability of the whole prefix down to ``j``;
* ``slate``: ``pi_b(a_i1 .. a_iL | i)``, the probability of the whole slate (the same on every row).

A new policy ``pi_e`` (a deterministic ranker over each round's candidates, a table of (item,
position) probabilities, or a Plackett-Luce policy over scores) is valued by the clicks it would get
at positions 1..K. Every estimand is a weighted sum of the click rate at each position,
``V = sum_j coef_j theta_j`` with ``theta_j = E[click at j under pi_e]``: ``precision@k`` is CTR@k
(``coef_j = 1/k`` for ``j <= k``), ``tp@k`` the expected clicks in the top k (``coef_j = 1``),
``dcg@k`` the position-weighted clicks (``coef_j = 1 / log2(j + 1)``).

Each position's click rate is estimated over the rounds that log that position (``n_j`` of them;
every round when each logs a full slate), with importance weights ``w_ij``:

=========  ======================================================  ===========================================
estimator  weight of the click at (i, j)                           assumption on clicks (beside full support)
=========  ======================================================  ===========================================
iips       ``pi_e(a_ij at j) / pi_b(a_ij at j)``                   item-position: the click at j depends only
                                                                   on the round, j and the item there
rips       ``pi_e(a_i1..a_ij) / pi_b(a_i1..a_ij)``                 cascade: only on the items at 1..j
sips       ``pi_e(a_i1..a_iL) / pi_b(a_i1..a_iL)``                 none
dr         iips's, around a reward model ``q``                      item-position (q only lowers the variance)
=========  ======================================================  ===========================================

* IPS forms: ``theta_j = sum_i w_ij c_ij / n_j`` (unbiased);
* self-normalised forms (``sniips``, ``snrips``, ``snsips``): ``theta_j = sum_i w_ij c_ij / sum_i
  w_ij``, normalised over the rounds position by position, as Open Bandit Pipeline does
  (consistent, not unbiased; never above the largest click);
* ``dr``: ``theta_j = sum_i [sum_a pi_e(a at j) q(a, j) + w_ij (c_ij - q(a_ij, j))] / n_j``, where
  ``q(a, j) = (C(a, j) + alpha mu_j) / (S(a, j) + alpha)`` is the item's click rate at j (``C`` clicks
  in ``S`` showings) smoothed towards the position's ``mu_j`` with ``alpha = 1``, cross-fitted: the
  rounds split in two folds (``default_rng(seed).permutation(n) % 2``) and each fold's ``q`` counted
  on the other fold only.

Clipping (``clip=M``) replaces each weight by ``min(w, M)``: the IPS and DR forms then estimate less
than the truth (clicks are >= 0), by ``sum_j coef_j E[(w_ij - M)+ c_ij]``, which ``info`` estimates
(``clip_bias``); the self-normalised forms move towards the logger's own click rate.

Intervals: each round's value in ``per_query`` is its term in the estimate, linearised for the
ratios: ``v_ij = theta_j + (a_ij - theta_j d_ij) / mean_i(d_ij)`` with ``a`` the numerator's and
``d`` the denominator's term of round i (``d_ij = 1`` where i logs j for the IPS and DR forms,
``w_ij`` for the self-normalised ones), and ``v_i = sum_j coef_j v_ij``. Their mean is the estimate
exactly, and resampling them (``Results.summary_ci``, ``compare``) resamples rounds with the delta
method's variance.

Diagnostics, per policy and estimator (``info["off_policy"]``): the effective sample size of the
weights per position (Kish: ``(sum w)^2 / sum w^2`` over the rounds logging j) and of the weighted
clicks (``effective_clicks``: the same of the rounds' weighted clicks, the clicks the estimate
effectively rests on), the weights' mean per position (it equals the policy's mass there under full
support), the weights clipped, the share of the policy's mass on (item, position) pairs this log never
shows, and, with ``support=`` (what the logger could show), the share it could not show. An estimate is
refused (NaN, its reason in ``info``, a warning; ``refuse=False`` keeps it) when the logger could not
show part of the policy (its bounds are given instead: IPS counts those clicks as 0, and clicks are in
[0, 1]); when clicks look like a cascade (below a click, at most half as many clicks as below none, by
more than 3 standard errors) for an estimator that assumes item-position clicks; when a position it
reads has an effective sample size below ``min_ess``; when an unnormalised IPS estimate's weights
average more than 2 standard errors below the policy's mass or 3 above; when it rests on fewer than
``min_clicks`` effective clicks; or when the skewness of its weighted clicks, judged from the weights
of every round the logger matched and a click rate fitted to them (:func:`skewness`), is above
:data:`SKEWNESS_LIMITS`. The simulations that set these rules: docs/how-to/off-policy.md.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, cast

import numpy as np
import pandas as pd

from ..conventions import Conventions
from ..engine.results import Evaluation, check_result_names
from ..engine.unbiased import numbers_or_missing
from ..engine.unbiased import positions as read_positions
from ..errors import ColumnError, DataError, ParameterError, did_you_mean, plural, show, warn
from ..inputs import read_columns
from ..inputs.ids import encode, sorted_codes
from ..inputs.tables import column_names
from ..metrics.names import Metric, labelled_metrics
from ..params import Column, Int, Real, validate_params
from . import plackett_luce as _pl


@dataclass(frozen=True)
class Estimator:
    """One estimator: the pscore form it reads, whether it self-normalises or is doubly robust, and
    what it assumes."""

    name: str
    pscore: str
    normalised: bool
    doubly_robust: bool
    title: str
    assumption: str


#: every estimator by name (Open Bandit Pipeline's names; ``dr`` is its position-wise DoublyRobust)
ESTIMATORS: dict[str, Estimator] = {e.name: e for e in (
    Estimator("iips", "item_position", False, False, "independent IPS (position-wise)",
              "item-position clicks: a click depends only on the round, the position and the item there"),
    Estimator("sniips", "item_position", True, False, "self-normalised independent IPS",
              "item-position clicks (consistent, not unbiased)"),
    Estimator("rips", "cascade", False, False, "reward-interaction IPS (cascade)",
              "cascade clicks: a click at j depends only on the items at positions 1..j"),
    Estimator("snrips", "cascade", True, False, "self-normalised reward-interaction IPS",
              "cascade clicks (consistent, not unbiased)"),
    Estimator("sips", "slate", False, False, "standard slate IPS", "none on clicks: whole slates are matched"),
    Estimator("snsips", "slate", True, False, "self-normalised standard slate IPS",
              "none on clicks (consistent, not unbiased)"),
    Estimator("dr", "item_position", False, True, "doubly robust (position-wise, cross-fitted click rates)",
              "item-position clicks; the reward model only lowers the variance"),
)}

#: the forms of pscore, by the name Open Bandit Pipeline gives them
PSCORE_KINDS = ("item_position", "cascade", "slate")

#: the metric families an off-policy estimate is defined for: name -> (coefficient of position j (1-based), k)
_COEF = {
    "precision": lambda j, k: 1.0 / k,
    "tp": lambda j, k: 1.0,
    "dcg": lambda j, k: 1.0 / math.log2(j + 1.0),
}
_ESTIMANDS = {
    "precision": "CTR@{k}: the expected clicks in the policy's top {k} per round, divided by {k}",
    "tp": "the expected clicks in the policy's top {k} per round",
    "dcg": "the expected clicks in the policy's top {k} per round, the click at position j weighted by 1/log2(j+1)",
}

#: tie rules a ranker may use (the others order ties by relevance, which clicks are not)
TIES = ("expected", "first", "item_asc", "item_desc")

#: smoothing of the doubly robust estimator's click rates (pseudo-showings at the position's rate)
SMOOTHING = 1.0
#: folds of the doubly robust estimator's cross-fitting
FOLDS = 2
#: the 97.5% quantile of the normal distribution (the per-position intervals and the bounds are at 95%)
Z95 = 1.959963984540054
#: the default least number of effective clicks an estimate may rest on
MIN_CLICKS = 10.0
#: the default least effective sample size of the weights at each position an estimate reads
MIN_ESS = 30.0
#: standard errors by which the weights' mean may exceed the policy's mass before an unnormalised IPS
#: estimate is refused
WEIGHT_T = 3.0
#: the same below the policy's mass: weights averaging under it say the log missed the rare large weights
#: that carry part of the estimate (with a sharply peaked logger, 2 rather than 3 standard errors took the
#: offered iips and rips from 84-88% coverage to 93%: docs/how-to/off-policy.md)
WEIGHT_T_BELOW = 2.0
#: the smallest pscore read: a probability below it gives a weight ``1 / p`` beyond 1e300, whose square
#: and sums no floating-point number holds (and a choice no log of fewer than 1e300 rounds can show twice)
PSCORE_FLOOR = 1e-300
#: clicks below a click against below none, stratified by position (and by the item where it recurs):
#: a z-statistic below -CASCADE_Z with a ratio below CASCADE_RATIO says the clicks depend on the clicks
#: above (a cascade, a dependent click model), which iips, sniips and dr assume away
CASCADE_Z = 3.0
CASCADE_RATIO = 0.95
#: the slate estimator's least effective sample size as a share of the rounds (its weights, ratios of
#: whole slates, are so heavy-tailed that below it its interval does not hold: docs/how-to/off-policy.md)
SLATE_ESS_SHARE = 0.05
#: the largest skewness of an estimate's weighted clicks (:func:`skewness`) at which it is offered, by form
#: (unnormalised IPS, self-normalised, doubly robust): above it the simulations' intervals covered too rarely
SKEWNESS_LIMITS = {"ips": 0.6, "normalised": 0.6, "dr": 0.6}
#: the most (round, position) cells held in memory (each about 33 bytes: about 4.4 GB)
MAX_CELLS = 2**27


def number(value: float) -> str:
    """A number for a message: ``:g`` where that shows it exactly, else every digit (1.0000000001 is
    not 1)."""
    value = float(value)
    short = f"{value:g}"
    return short if not math.isfinite(value) or float(short) == value else repr(value)


class PlackettLuce:
    """A stochastic ranking policy: Plackett-Luce over a score column, for :func:`topkeval.off_policy`.

    Position 1, 2, ... is filled by drawing among the round's candidates not placed yet, candidate
    ``a`` with probability ``exp(s_a / T) / sum of exp(s_b / T)`` over the remaining ``b``. The
    probability of each (candidate, position) is computed exactly when a round's candidates allow
    (at most 50,000 candidate sets to walk: 20 candidates for 5 positions, 80 for 3), otherwise by a
    seeded Monte Carlo of ``samples`` rankings per round (standard error ``sqrt(p (1 - p) /
    samples)``); the probability of a logged prefix or slate is always exact.

    Parameters
    ----------
    score : str
        The column of the log with each candidate's score.
    temperature : float
        T > 0: small is close to the ranking by score, large close to uniform.
    samples : int, optional
        Monte Carlo draws per round (default: exact where possible, else 10,000); given, every
        round is sampled.

    Examples
    --------
    >>> import topkeval as tk
    >>> tk.PlackettLuce("new_score", temperature=0.5)
    PlackettLuce('new_score', temperature=0.5)
    """

    @validate_params(score=Column(), temperature=Real(0, low_open=True), samples=[Int(100, 10_000_000), None])
    def __init__(self, score: str, temperature: float = 1.0, samples: int | None = None):
        self.score = score
        self.temperature = float(temperature)
        self.samples = samples

    def __repr__(self) -> str:
        extra = f", samples={self.samples}" if self.samples is not None else ""
        return f"PlackettLuce({self.score!r}, temperature={self.temperature:g}{extra})"

    def __eq__(self, other) -> bool:
        return isinstance(other, PlackettLuce) and (self.score, self.temperature, self.samples) == (
            other.score, other.temperature, other.samples)

    def __hash__(self) -> int:
        return hash((self.score, self.temperature, self.samples))


# ---------------------------------------------------------------------------------------------
# the arguments


@dataclass
class _Spec:
    name: str
    kind: str  # "ranker", "table", "plackett_luce"
    column: str | None = None
    table: object = None
    pl: PlackettLuce | None = None

    def describe(self) -> str:
        if self.kind == "ranker":
            return f"deterministic ranker: the top of score column {self.column!r}"
        if self.kind == "plackett_luce":
            assert self.pl is not None
            return f"Plackett-Luce over {self.pl.score!r}, temperature {self.pl.temperature:g}"
        return "stochastic policy: a table of (item, position) probabilities"


def _specs(policy, on_policy: str | None) -> list[_Spec]:
    owner = "off_policy"
    if policy is None:
        raise ParameterError("off_policy needs the policy to evaluate: policy='score_column' (a deterministic ranker), "
                             "a list of them, or {name: column, table or tk.PlackettLuce(...)}.")
    if isinstance(policy, str):
        policy = [policy]
    if isinstance(policy, PlackettLuce):
        raise ParameterError(f"policy={policy!r}: name it, policy={{'new': {policy!r}}} (the name is its row in the "
                             "results).")
    specs: list[_Spec] = []
    if isinstance(policy, Mapping):
        items = list(policy.items())
    elif isinstance(policy, (list, tuple)):
        bad = [p for p in policy if not isinstance(p, str) or not p]
        if bad or not policy:
            raise ParameterError(f"policy of {owner} must be a score column, a list of score columns, or a mapping "
                                 f"name -> column, table or PlackettLuce; got {policy!r}.")
        items = [(p, p) for p in policy]
    else:
        raise ParameterError(f"policy of {owner} must be a score column, a list of score columns, or a mapping name -> "
                             f"column, table or PlackettLuce; got {type(policy).__name__}.")
    if not items:
        raise ParameterError(f"policy of {owner} is empty: name at least one policy to evaluate.")
    for name, spec in items:
        if not isinstance(name, str) or not name.strip() or "\x00" in name:
            raise ParameterError(f"policy names are non-empty text (each is a row of the results); got {name!r}.")
        if isinstance(spec, str):
            if not spec or "\x00" in spec:
                raise ParameterError(f"policy {name!r}: the score column must be a non-empty name; got {spec!r}.")
            specs.append(_Spec(name, "ranker", column=spec))
        elif isinstance(spec, PlackettLuce):
            specs.append(_Spec(name, "plackett_luce", column=spec.score, pl=spec))
        elif spec is None or isinstance(spec, (int, float, bool, bytes)) or (
                isinstance(spec, (list, tuple)) and not spec):
            raise ParameterError(f"policy {name!r} must be a score column, a table of (item, position, probability) "
                                 f"rows, or tk.PlackettLuce(...); got {spec!r}.")
        else:
            specs.append(_Spec(name, "table", table=spec))
    names = [s.name for s in specs]
    if len(set(names)) < len(names):
        raise ParameterError(f"policy names must differ; {next(n for n in names if names.count(n) > 1)!r} is given twice.")
    if on_policy is not None and on_policy in names:
        raise ParameterError(f"a policy is named {on_policy!r}, the name of the logger's own row (on_policy=): rename "
                             "the policy, or pass another on_policy name (or None).")
    return specs


def _estimator_names(estimator) -> list[str]:
    names = [estimator] if isinstance(estimator, str) else estimator
    if not isinstance(names, (list, tuple)) or not names or not all(isinstance(e, str) for e in names):
        raise ParameterError(f"The 'estimator' parameter of off_policy must be one of {', '.join(map(repr, ESTIMATORS))} "
                             f"or a list of them. Got {estimator!r} instead.")
    out: list[str] = []
    for e in names:
        if e not in ESTIMATORS:
            raise ParameterError(f"Unknown estimator {e!r}.{did_you_mean(e, ESTIMATORS)} Estimators: "
                                 f"{', '.join(ESTIMATORS)} (docs/conventions.md, 'Off-policy estimates').")
        if e not in out:
            out.append(e)
    return out


def _pscore_columns(pscore, estimators: list[str]) -> dict[str, str]:
    kinds = list(dict.fromkeys(ESTIMATORS[e].pscore for e in estimators))
    if isinstance(pscore, str):
        if len(kinds) > 1:
            raise ParameterError(f"the estimators {', '.join(estimators)} read different forms of pscore "
                                 f"({', '.join(kinds)}): give one column for each, pscore={{" +
                                 ", ".join(f"'{k}': '...'" for k in kinds) + "}.")
        return {kinds[0]: pscore}
    if not isinstance(pscore, Mapping) or not pscore:
        raise ParameterError("pscore of off_policy must be a column name, or a mapping from its forms "
                             f"({', '.join(PSCORE_KINDS)}) to columns; got {pscore!r}.")
    for kind, column in pscore.items():
        if kind not in PSCORE_KINDS:
            raise ParameterError(f"pscore form {kind!r} is unknown.{did_you_mean(str(kind), PSCORE_KINDS)} Forms: "
                                 f"{', '.join(PSCORE_KINDS)}.")
        if not isinstance(column, str) or not column:
            raise ParameterError(f"pscore[{kind!r}] must be a column name; got {column!r}.")
    missing = [k for k in kinds if k not in pscore]
    if missing:
        needs = [e for e in estimators if ESTIMATORS[e].pscore == missing[0]]
        raise ParameterError(f"{', '.join(needs)} read{'s' if len(needs) == 1 else ''} the {missing[0]!r} form of "
                             f"pscore ({_KIND_TEXT[missing[0]]}): add pscore[{missing[0]!r}] = its column.")
    return {k: str(pscore[k]) for k in kinds}


_KIND_TEXT = {"item_position": "the logger's probability of the item at its position",
              "cascade": "the logger's probability of the items at positions 1..j",
              "slate": "the logger's probability of the whole slate"}


@dataclass(frozen=True)
class _Metric:
    label: str
    canonical: str
    family: str
    k: int
    metric: Metric  # the parsed metric itself: the results' Metric of this column

    def coefs(self, width: int) -> np.ndarray:
        out = np.zeros(width)
        for j in range(1, self.k + 1):
            out[j - 1] = _COEF[self.family](j, self.k)
        return out


def _metrics(metrics) -> list[_Metric]:
    labels, parsed = labelled_metrics(metrics)
    out = []
    for label, m in zip(labels, parsed):
        if m.family not in _COEF or m.k is None or m.params:
            raise ParameterError(f"{label} has no off-policy estimate: off_policy estimates the clicks at positions "
                                 "1..k, as precision@k (CTR@k), tp@k (expected clicks in the top k) or dcg@k (clicks "
                                 "weighted by 1/log2(position + 1)). Ratios such as recall or nDCG need what a click "
                                 "log does not hold (the relevant items never shown).")
        out.append(_Metric(label, str(m), m.family, int(m.k), m))
    return out


# ---------------------------------------------------------------------------------------------
# the log


@dataclass
class _Log:
    """The log grouped by round: rows sorted by round (stably), and per round and position (columns
    0..width-1 for positions 1..width) the logged row, its click and its pscores."""

    n: int
    labels: np.ndarray
    offsets: np.ndarray
    order: np.ndarray  # sorted row -> row of the input
    round_of: np.ndarray  # per sorted row
    item: np.ndarray  # per sorted row: item code (codes in item order)
    item_labels: np.ndarray
    width: int  # positions in the matrices
    at: np.ndarray  # (n, width): sorted row logged at each position, -1 where none
    click: np.ndarray  # (n, width): 0 where nothing is logged
    logged: np.ndarray  # (n, width) bool
    slate_end: np.ndarray  # (n,): the last position logged (0: none)
    sizes: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))  # (n,): candidates of each round
    prefixes: bool = True  # every round logs positions 1, 2, ... up to its last without a gap
    pscore: dict = field(default_factory=dict)  # kind -> (n, width), NaN where nothing is logged
    slate_pscore: np.ndarray | None = None  # (n,)
    columns: dict = field(default_factory=dict)  # other columns read, per sorted row
    extra_items: dict = field(default_factory=dict)  # items of a policy or support table the log lacks -> code

    @property
    def rows(self) -> int:
        return len(self.order)


def _first(mask: np.ndarray) -> int:
    return int(np.flatnonzero(mask)[0])


def _read_log(log, *, query: str, item: str, position: str, click: str, pscore: dict[str, str],
              scores: list[str], K: int, slate: bool, cascade: bool) -> _Log:
    columns = list(dict.fromkeys([query, item, position, click, *pscore.values(), *scores]))
    roles = {query: "query", item: "item", position: "position", click: "click"}
    roles.update({c: "pscore" for c in pscore.values()})
    roles.update({c: "policy" for c in scores})
    cols = read_columns(log, columns, owner="off_policy", id_columns=[query, item], roles=roles, where="the log")
    n_rows = len(cols[position])
    round_codes, round_labels = encode(cols[query], query, "round")
    if round_labels is None:
        round_codes, uniques = pd.factorize(round_codes, sort=False)
        round_labels = np.asarray(uniques)
    round_codes = np.asarray(round_codes, np.int64)
    item_codes, item_labels = sorted_codes(cols[item], item, "item")
    pos = read_positions(cols[position], position)
    clicks = numbers_or_missing(cols[click], click, "click=")
    grouped = len(round_codes) < 2 or bool((round_codes[1:] >= round_codes[:-1]).all())  # codes by first appearance
    order = np.arange(len(round_codes)) if grouped else np.argsort(round_codes, kind="stable")
    n = len(round_labels)
    counts = np.bincount(round_codes, minlength=n)
    offsets = np.zeros(n + 1, np.int64)
    np.cumsum(counts, out=offsets[1:])
    r = round_codes[order]
    it = np.asarray(item_codes, np.int64)[order]
    p = pos[order]
    c = clicks[order]
    shown = ~np.isnan(p)
    if not shown.any():
        raise DataError(f"No row of the log has a position ({position!r} is empty everywhere): off_policy needs what "
                        "the logger showed, one row per shown (round, position, item).")
    # a click on a candidate never shown, a shown row without a click value, a click outside [0, 1]
    clicked_unshown = ~shown & ~np.isnan(c) & (c != 0)
    if clicked_unshown.any():
        row = int(order[_first(clicked_unshown)])
        raise DataError(f"{plural(int(clicked_unshown.sum()), 'row')} without a position have a click (row {row} "
                        f"first): a click on a candidate the logger never showed cannot be. Fill in {position!r} for "
                        f"them, or check that {click!r} and {position!r} belong to the same log.")
    no_click = shown & np.isnan(c)
    if no_click.any():
        row = int(order[_first(no_click)])
        raise DataError(f"Shown row {row} has no click value in {click!r}: every shown row needs 1 (clicked) or 0.")
    bad = shown & ~((c >= 0) & (c <= 1))
    if bad.any():
        row = int(order[_first(bad)])
        raise DataError(f"Column {click!r} (click=) holds {number(c[_first(bad)])} at row {row}: clicks are 0 or 1 "
                        "(a reward in [0, 1] at most); the bounds and estimates rest on it.")
    c = np.where(shown, c, 0.0)
    # duplicates: (round, position) among shown rows, (round, item) among all rows
    from ..kernels.grouping import count_duplicates

    keys = np.where(shown, np.nan_to_num(p), -1.0 - np.arange(len(p))).astype(np.int64)  # unshown rows: distinct
    count, at_ = count_duplicates(offsets, keys)
    if count:
        raise DataError(f"Round {show(round_labels[r[at_]])} has two rows at position {int(p[at_])}: one row per shown "
                        "(round, position). Check that the round column identifies one impression.")
    count, at_ = count_duplicates(offsets, it)
    if count:
        raise DataError(f"Round {show(round_labels[r[at_]])} has item {show(item_labels[it[at_]])} twice: a round lists "
                        "each candidate once (shown at one position, or not shown).")
    L = int(np.nanmax(p))
    # the last logged position of each round, and whether its positions run 1..end without a gap (before
    # any matrix of rounds x positions is made: one stray position 5,000,000 would make it gigabytes)
    last = np.zeros(n, np.int64)
    np.maximum.at(last, r[shown], p[shown].astype(np.int64))
    count_shown = np.bincount(r[shown], minlength=n)
    empty = count_shown == 0
    if empty.any():
        i = _first(empty)
        raise DataError(f"{plural(int(empty.sum()), 'round')} list candidates but show none (round "
                        f"{show(round_labels[i])} first): the logger's choice to show nothing has no pscore, and "
                        "those rounds would silently drop out of every estimate. Leave them out of the log (the "
                        "estimates then describe the rounds where the logger showed something), or give the rows "
                        "it showed.")
    if (slate or cascade) and (count_shown != last).any():
        i = _first(count_shown != last)
        which = "the slate estimators (sips, snsips)" if slate else "the cascade estimators (rips, snrips)"
        raise DataError(f"Round {show(round_labels[i])} logs {count_shown[i]} positions up to position {last[i]}, with "
                        f"a gap: {which} read the logged prefix of every position, so each round must log "
                        "positions 1, 2, ... without a gap. Use iips, sniips or dr for such a log.")
    width = max(K, L) if slate else K
    if n * width > MAX_CELLS:
        raise DataError(f"{plural(n, 'round')} x {width:,} positions is too large to hold ({n * width:,} cells; at "
                        f"most {MAX_CELLS:,}): evaluate fewer positions (smaller k; the slate estimators read every "
                        "logged position, so a slate as long as the longest logged one), or fewer rounds at once.")
    keep = shown & (p <= width)
    rows_at = np.flatnonzero(keep)
    at = np.full((n, width), -1, np.int64)
    at[r[rows_at], p[rows_at].astype(np.int64) - 1] = rows_at
    logged = at >= 0
    click_m = np.zeros((n, width))
    click_m[logged] = c[at[logged]]
    out = _Log(n=n, labels=round_labels, offsets=offsets, order=order, round_of=r, item=it, item_labels=item_labels,
               width=width, at=at, click=click_m, logged=logged, slate_end=last, sizes=counts.astype(np.int64),
               prefixes=bool((count_shown == last).all()))
    for kind, column in pscore.items():
        values = numbers_or_missing(cols[column], column, "pscore=")[order]
        missing = shown & np.isnan(values)
        if missing.any():
            row = int(order[_first(missing)])
            raise DataError(f"{plural(int(missing.sum()), 'shown row')} have no pscore in {column!r} (row {row} first): "
                            f"every shown item needs {_KIND_TEXT[kind]}.")
        wrong = shown & ~((values > 0) & (values <= 1))
        if wrong.any():
            v = float(values[_first(wrong)])
            why = ("the logger showed the item, so its probability was above 0" if v <= 0 else
                   "a probability is at most 1" + ("; a percentage divided by 100 is one" if 1 < v <= 100 else ""))
            raise DataError(f"pscore {column!r} holds {number(v)} at row {int(order[_first(wrong)])}: pscores are in "
                            f"(0, 1] ({why}).")
        tiny = shown & (values < PSCORE_FLOOR)
        if tiny.any():
            raise DataError(f"pscore {column!r} holds {number(values[_first(tiny)])} at row {int(order[_first(tiny)])}: "
                            f"below {PSCORE_FLOOR:g} its weight 1 / pscore is beyond what floating-point sums can hold "
                            "(and a choice that rare is never seen twice in a log). Check the column: a log-probability "
                            "or an underflowed product, rather than the logger's probability?")
        matrix = np.full((n, width), np.nan)
        matrix[logged] = values[at[logged]]
        if kind == "slate":
            lo = np.full(n, np.inf)
            hi = np.zeros(n)
            np.minimum.at(lo, r[shown], values[shown])
            np.maximum.at(hi, r[shown], values[shown])
            uneven = (hi - lo) > 1e-12 * hi
            if uneven.any():
                i = _first(uneven)
                raise DataError(f"pscore {column!r} (slate) differs within round {show(round_labels[i])} ({number(lo[i])} "
                                f"and {number(hi[i])}): the slate's probability is one number, the same on each of its "
                                "rows.")
            out.slate_pscore = np.where(last > 0, hi, np.nan)
        if kind == "cascade":
            both = logged[:, 1:] & logged[:, :-1]
            rising = both & (matrix[:, 1:] > matrix[:, :-1] * (1 + 1e-9))
            if rising.any():
                i, j = np.argwhere(rising)[0]
                raise DataError(f"pscore {column!r} (cascade) rises from position {j + 1} to {j + 2} in round "
                                f"{show(round_labels[i])}: the probability of the items at 1..j cannot grow with j. "
                                "Give the probability of the whole prefix on each row (the product of the logger's "
                                "choices down to that position).")
        out.pscore[kind] = matrix
    for name in scores:
        score = numbers_or_missing(cols[name], name, "policy=")[order]
        if not np.isfinite(score).all():
            row = int(order[_first(~np.isfinite(score))])
            raise DataError(f"Score column {name!r} (policy=) holds {float(score[_first(~np.isfinite(score))])} at row "
                            f"{row}: scores must be finite numbers on every candidate row.")
        out.columns[name] = score
    del n_rows
    return out


# ---------------------------------------------------------------------------------------------
# the policies


@dataclass
class _Triples:
    """The policy's (round, item, position, probability) entries at positions < K (0-based);
    ``round`` is None for a policy that is the same in every round."""

    round: np.ndarray | None
    item: np.ndarray
    pos: np.ndarray
    prob: np.ndarray


@dataclass
class _Policy:
    spec: _Spec
    at_logged: np.ndarray  # (n, width): pi_e(logged item at j)
    prefix: np.ndarray | None  # (n, width): pi_e(logged items at 1..j); None when unknown (a table)
    triples: _Triples
    how: dict = field(default_factory=dict)


def _ranker(log: _Log, spec: _Spec, K: int, ties: str) -> _Policy:
    from ..kernels.offpolicy import rank_in_rounds

    s = log.columns[str(spec.column)]
    N = log.rows
    idx = np.arange(N)
    tiebreak = {"item_asc": log.item, "item_desc": -log.item}.get(ties, idx)
    g, e = rank_in_rounds(log.offsets, s, tiebreak, ties == "expected")
    width = log.width
    j1 = np.arange(1, width + 1)[None, :]  # positions 1..width
    rows = np.where(log.logged, log.at, 0)
    gl, el = g[rows], e[rows]
    inside = log.logged & (gl < j1) & (j1 <= gl + el)
    at_logged = np.where(inside, 1.0 / el, 0.0)
    with np.errstate(divide="ignore"):
        step = np.where(inside, 1.0 / np.maximum(gl + el - j1 + 1, 1), 0.0)
    step = np.where(log.logged, step, np.nan)
    prefix = np.cumprod(step, axis=1)
    # the entries at positions < K: each candidate of a tie group spread over the group's ranks
    count = np.clip(np.minimum(g + e, K) - g, 0, None)
    rep = np.repeat(idx, count)
    first = np.repeat(np.cumsum(count) - count, count)
    offset = np.arange(len(rep)) - first
    triples = _Triples(log.round_of[rep], log.item[rep], g[rep] + offset, 1.0 / e[rep])
    return _Policy(spec, at_logged, prefix, triples, {"ties": ties})


def _plackett_luce(log: _Log, spec: _Spec, K: int, seed: int | None) -> _Policy:
    pl = spec.pl
    assert pl is not None
    s = log.columns[pl.score]
    marg, how = _pl.marginals(s, log.offsets, pl.temperature, K, samples=pl.samples, seed=seed)
    rows = np.where(log.logged, log.at, 0)
    at_logged = np.zeros((log.n, log.width))
    cols = min(K, log.width)
    at_logged[:, :cols] = np.where(log.logged[:, :cols], marg[rows[:, :cols], np.arange(cols)[None, :]], 0.0)
    in_matrix = np.zeros(log.rows, bool)
    in_matrix[log.at[log.logged]] = True
    top, total = _pl.log_weight_sums(s[~in_matrix], log.round_of[~in_matrix], log.n, pl.temperature)
    prefix = _pl.prefix_probabilities(np.where(log.logged, s[rows], np.nan), top, total, pl.temperature)
    if how["sampled"]:  # the Monte Carlo error of the policy's probability at each logged (item, position)
        errors = how["_standard_errors"]
        how["_at_logged_se"] = np.zeros((log.n, log.width))
        how["_at_logged_se"][:, :cols] = np.where(log.logged[:, :cols], errors[rows[:, :cols],
                                                                                 np.arange(cols)[None, :]], 0.0)
    del how["_standard_errors"]
    nz = np.nonzero(marg > 0)
    triples = _Triples(log.round_of[nz[0]], log.item[nz[0]], nz[1].astype(np.int64), marg[nz])
    return _Policy(spec, at_logged, prefix, triples, how)


def _id_codes(values, column: str, labels: np.ndarray, what: str) -> np.ndarray:
    """Codes of ids into ``labels`` (the log's); -1 for an id the log does not have. Refuses ids of
    another kind (text against numbers), which would match nothing."""
    codes, own = encode(values, column, what)
    if own is None:
        uniq, inverse = np.unique(codes, return_inverse=True)
        own = uniq
        codes = inverse
    own = np.asarray(own)
    boolean = lambda a: a.dtype.kind == "b" or (a.dtype.kind == "O" and len(a) and all(  # noqa: E731
        isinstance(v, (bool, np.bool_)) for v in a[:1000]))
    if len(own) and boolean(own) != boolean(np.asarray(labels)):
        raise DataError(f"The {what} ids of {column!r} are True / False, and those of the log are not: they would "
                        "match nothing (True is not the item 1). Give the ids as the log writes them.")
    numeric = lambda a: a.dtype.kind in "iufb" or (a.dtype.kind == "O" and len(a) and all(  # noqa: E731
        isinstance(v, (int, float, np.integer, np.floating)) for v in a[:1000]))
    if len(own) and len(labels) and numeric(own) != numeric(np.asarray(labels)):
        raise DataError(f"The {what} ids of {column!r} are {'numbers' if numeric(own) else 'text'} and those of the log "
                        f"{'numbers' if numeric(np.asarray(labels)) else 'text'}: 1 and '1' would never match. Write "
                        "them the same way.")
    where = pd.Index(labels).get_indexer(pd.Index(own))
    return where[np.asarray(codes, np.int64)]


def _read_pairs(table, *, log: _Log, query: str, item: str, position: str, what: str,
                probability: bool) -> tuple[np.ndarray | None, np.ndarray, np.ndarray, np.ndarray]:
    """A table of (round, item, position[, probability]) rows, its round column optional: round codes
    (None without the column: the same in every round), item codes (an item the log does not have
    gets a code beyond the log's), positions (1-based) and probabilities (1 without the column)."""
    tabular = hasattr(table, "schema") or hasattr(table, "columns") or isinstance(table, Mapping)
    if not tabular:
        raise ParameterError(f"{what} must be a table (pandas, polars, Arrow or a dict of columns) with the columns "
                             f"{item!r}, {position!r}{', probability' if probability else ''} (and {query!r} for "
                             f"one that differs per round); got {type(table).__name__}"
                             + (" (a list of rows: make it a DataFrame with those columns)"
                                if isinstance(table, (list, tuple, np.ndarray)) else "") + ".")
    names = [str(c) for c in column_names(table)]
    has_round = query in names
    has_prob = "probability" in names
    if probability and not has_prob:
        raise ColumnError(f"{what} has no 'probability' column: a stochastic policy gives the probability of each "
                          f"(item, position) in a column named 'probability' ("
                          + (f"it has {', '.join(map(repr, names))}" if names else "it has no column") + ").")
    wanted = ([query] if has_round else []) + [item, position] + (["probability"] if has_prob else [])
    cols = read_columns(table, wanted, owner="off_policy", id_columns=[c for c in (query, item) if c in wanted],
                        where=what, allow_empty=True)
    if not len(cols[item]):
        raise DataError(f"{what} has no rows: " + ("a policy gives the probability of at least one (item, position)."
                                                   if probability else "the logger could then show nothing at all."))
    items = _id_codes(cols[item], item, log.item_labels, "item")
    unknown = items < 0
    if unknown.any():  # an item the log never has: a code of its own beyond the log's items, the same in every table
        items = items.copy()
        codes = [log.extra_items.setdefault(label, len(log.item_labels) + len(log.extra_items))
                 for label in _labels_at(cols[item], unknown).tolist()]
        items[unknown] = np.asarray(codes, np.int64)
    pos = numbers_or_missing(cols[position], position, what)
    if np.isnan(pos).any():
        row = _first(np.isnan(pos))
        raise DataError(f"{what}: row {row} has no position: every row gives the position its probability is for.")
    bad = ~((pos >= 1) & (pos == np.floor(pos)) & (pos <= 2.0 ** 53))
    if bad.any():
        row = _first(bad)
        raise DataError(f"{what}: row {row} has position {number(pos[row])}: positions are whole numbers from 1 (the "
                        "top), as in the log" + (" (these look 0-based: add 1)" if pos.min() == 0 else "") + ".")
    rounds = None
    if has_round:
        rounds = _id_codes(cols[query], query, log.labels, "round")
        if (rounds < 0).any():
            row = _first(rounds < 0)
            raise DataError(f"{what}: row {row} names a round the log does not have "
                            f"({show(_labels_at(cols[query], rounds < 0)[0])}): every round of the table must be a "
                            "round of the log.")
    prob = (numbers_or_missing(cols["probability"], "probability", what) if has_prob else np.ones(len(pos)))
    bad = ~((prob >= 0) & (prob <= 1))
    if bad.any():
        row = _first(bad)
        raise DataError(f"{what}: row {row} has probability {number(prob[row])}; probabilities are numbers in [0, 1].")
    return rounds, items, pos.astype(np.int64), prob


def _labels_at(values, mask: np.ndarray) -> np.ndarray:
    """The id values at ``mask`` as Python objects (for messages and fresh codes)."""
    from ..inputs.ids import labels_of

    return labels_of(values, np.flatnonzero(mask))


def _table_policy(log: _Log, spec: _Spec, *, query: str, item: str, position: str, K: int) -> _Policy:
    what = f"the table of policy {spec.name!r}"
    rounds, items, pos, prob = _read_pairs(spec.table, log=log, query=query, item=item, position=position, what=what,
                                           probability=True)
    r = rounds if rounds is not None else np.zeros(len(items), np.int64)
    order = np.lexsort((pos, items, r))
    same = (r[order][1:] == r[order][:-1]) & (items[order][1:] == items[order][:-1]) & \
        (pos[order][1:] == pos[order][:-1])
    if same.any():
        row = int(order[1:][same][0])
        raise DataError(f"{what}: row {row} repeats an (item, position){' of its round' if rounds is not None else ''}: "
                        "one row per (round, item, position).")
    for keys, words in (((r, pos), "position"), ((r, items), "item over the positions")):
        group = np.unique(np.column_stack(keys), axis=0, return_inverse=True)[1].ravel()
        sums = np.bincount(group, weights=prob)
        if (sums > 1 + 1e-9).any():
            g = _first(sums > 1 + 1e-9)
            row = _first(group == g)
            raise DataError(f"{what}: the probabilities of one {words} sum to {sums[g]:.6g} > 1 (the group of row "
                            f"{row}): a policy shows at most one item per position, and an item at most once.")
    if rounds is not None:
        present = np.zeros(log.n, bool)
        present[rounds] = True
        if not present.all():
            i = _first(~present)
            raise DataError(f"{what}: round {show(log.labels[i])} of the log has no row: give every round's "
                            "probabilities, or leave the round column out (the same policy in every round).")
    keep = (pos <= K) & (prob > 0)
    triples = _Triples(None if rounds is None else rounds[keep], items[keep], pos[keep] - 1, prob[keep])
    # pi_e at each logged (item, position): the table's entry, 0 where it has none
    at_logged = np.zeros((log.n, log.width))
    cells = np.argwhere(log.logged)
    span = int(max(items.max(initial=0), log.item.max(initial=0))) + 1
    depth = int(max(pos.max(initial=1), log.width)) + 1

    def key(rr, ii, jj):
        return (rr.astype(np.int64) * span + ii) * depth + jj

    table_keys = key(r, items, pos)
    sort = np.argsort(table_keys)
    sorted_keys = table_keys[sort]
    wanted = key(cells[:, 0] if rounds is not None else np.zeros(len(cells), np.int64),
                 log.item[log.at[cells[:, 0], cells[:, 1]]], cells[:, 1] + 1)
    at = np.minimum(np.searchsorted(sorted_keys, wanted), len(sort) - 1)
    hit = sorted_keys[at] == wanted
    at_logged[cells[:, 0], cells[:, 1]] = np.where(hit, prob[sort][at], 0.0)
    return _Policy(spec, at_logged, None, triples, {})


# ---------------------------------------------------------------------------------------------
# sums of a policy's entries per round and position


def _per_round(triples: _Triples, values: np.ndarray, n: int, K: int, fold_of_round: np.ndarray | None = None,
               by_fold: np.ndarray | None = None) -> np.ndarray:
    """``sum over the policy's entries at (i, j) of prob * value``: (n, K). ``values`` per entry;
    for a policy the same in every round, ``by_fold`` (folds x entries) gives each fold's values and
    ``fold_of_round`` each round's fold (the reward model differs per fold)."""
    if triples.round is not None:
        return np.bincount(triples.round * K + triples.pos, weights=triples.prob * values,
                           minlength=n * K).reshape(n, K)
    if by_fold is not None:
        assert fold_of_round is not None
        per = np.stack([np.bincount(triples.pos, weights=triples.prob * v, minlength=K) for v in by_fold])
        return per[fold_of_round]
    row = np.bincount(triples.pos, weights=triples.prob * values, minlength=K)
    return np.broadcast_to(row, (n, K)).copy()


# ---------------------------------------------------------------------------------------------
# the doubly robust estimator's reward model


class _Rates:
    """Cross-fitted, smoothed click rates per (item, position): ``q_f(a, j) = (C(a, j) + alpha mu_j) /
    (S(a, j) + alpha)`` counted on the rounds outside fold f."""

    def __init__(self, log: _Log, K: int, seed: int | None):
        n = log.n
        self.K = K
        self.fold = np.random.default_rng(seed).permutation(n) % FOLDS
        cells = np.argwhere(log.logged[:, :K])
        items = log.item[log.at[cells[:, 0], cells[:, 1]]]
        clicks = log.click[cells[:, 0], cells[:, 1]]
        folds = self.fold[cells[:, 0]]
        keys = items * K + cells[:, 1]
        self.keys, inverse = np.unique(keys, return_inverse=True)
        U = len(self.keys)
        shows = np.bincount(folds * U + inverse, minlength=FOLDS * U).reshape(FOLDS, U)
        hits = np.bincount(folds * U + inverse, weights=clicks, minlength=FOLDS * U).reshape(FOLDS, U)
        self.shows_out = shows.sum(axis=0)[None, :] - shows  # per fold: the showings outside it
        self.clicks_out = hits.sum(axis=0)[None, :] - hits
        pos_shows = np.bincount(folds * K + cells[:, 1], minlength=FOLDS * K).reshape(FOLDS, K)
        pos_hits = np.bincount(folds * K + cells[:, 1], weights=clicks, minlength=FOLDS * K).reshape(FOLDS, K)
        out_shows = pos_shows.sum(axis=0)[None, :] - pos_shows
        out_hits = pos_hits.sum(axis=0)[None, :] - pos_hits
        with np.errstate(divide="ignore", invalid="ignore"):
            self.mu = np.where(out_shows > 0, out_hits / np.maximum(out_shows, 1), 0.0)  # (folds, K)

    def q(self, fold: np.ndarray, item: np.ndarray, pos: np.ndarray) -> np.ndarray:
        keys = item * self.K + pos
        at = np.minimum(np.searchsorted(self.keys, keys), max(len(self.keys) - 1, 0))
        found = (self.keys[at] == keys) if len(self.keys) else np.zeros(len(keys), bool)
        S = np.where(found, self.shows_out[fold, at], 0.0) if len(self.keys) else np.zeros(len(keys))
        C = np.where(found, self.clicks_out[fold, at], 0.0) if len(self.keys) else np.zeros(len(keys))
        mu = self.mu[fold, pos]
        return (C + SMOOTHING * mu) / (S + SMOOTHING)

    def dm(self, policy: _Policy, n: int) -> np.ndarray:
        """``sum_a pi_e(a at j) q(a, j)`` per round and position (n, K), each round with its fold's q."""
        t = policy.triples
        if t.round is not None:
            return _per_round(t, self.q(self.fold[t.round], t.item, t.pos), n, self.K)
        by_fold = np.stack([self.q(np.full(len(t.item), f), t.item, t.pos) for f in range(FOLDS)])
        return _per_round(t, np.zeros(len(t.item)), n, self.K, self.fold, by_fold)


# ---------------------------------------------------------------------------------------------
# what the logger showed, and what it could show


class _Pairs:
    """A set of (round, item, position) keys, or of (item, position) keys when ``rounds`` is None."""

    def __init__(self, rounds: np.ndarray | None, items: np.ndarray, pos: np.ndarray, K: int):
        self.per_round = rounds is not None
        self.K = K
        self.span = int(items.max(initial=0)) + 1
        self.keys = _distinct(self._key(rounds, items, pos))

    def _key(self, rounds, items, pos):
        base = items.astype(np.int64) * self.K + pos
        return base if rounds is None else rounds.astype(np.int64) * (self.span * self.K) + base

    def contains(self, rounds, items, pos) -> np.ndarray:
        inside = items < self.span
        keys = self._key(rounds if self.per_round else None, np.where(inside, items, 0), pos)
        at = np.minimum(np.searchsorted(self.keys, keys), max(len(self.keys) - 1, 0))
        return inside & ((self.keys[at] == keys) if len(self.keys) else np.zeros(len(keys), bool))


def _distinct(values: np.ndarray) -> np.ndarray:
    """The distinct values, sorted (by a sort: numpy's hashing unique is slow on large integer arrays)."""
    out = np.sort(values)
    return out[np.r_[True, out[1:] != out[:-1]]] if len(out) else out


def _outside(policy: _Policy, pairs: _Pairs | None, n: int, K: int, values: np.ndarray | None = None,
             absent: int | None = None) -> np.ndarray:
    """The policy's mass (or ``values``-weighted mass) per (round, position) on entries outside ``pairs``
    (all inside without), and with ``absent`` (the log's number of items) on items the log never lists."""
    t = policy.triples
    if pairs is None:
        miss = t.item >= absent if absent is not None else np.zeros(len(t.item), bool)
        vals = np.ones(len(t.item)) if values is None else values
        return _per_round(t, vals * miss, n, K)
    if t.round is None and pairs.per_round:  # a policy the same in every round against a per-round set
        rounds = np.repeat(np.arange(n), len(t.item))
        if len(rounds) > 200_000_000:
            raise DataError("The policy table times the rounds is too large to check against a per-round support "
                            "table; give the support without its round column (the same in every round).")
        expanded = _Triples(rounds, np.tile(t.item, n), np.tile(t.pos, n), np.tile(t.prob, n))
        vals = np.ones(len(rounds)) if values is None else np.tile(values, n)
        miss = ~pairs.contains(expanded.round, expanded.item, expanded.pos)
        if absent is not None:
            miss |= expanded.item >= absent
        return _per_round(expanded, vals * miss, n, K)
    miss = ~pairs.contains(t.round, t.item, t.pos)
    if absent is not None:
        miss |= t.item >= absent
    vals = np.ones(len(t.item)) if values is None else values
    return _per_round(t, vals * miss, n, K)


# ---------------------------------------------------------------------------------------------
# the estimates


@dataclass
class _Estimate:
    """One (policy, estimator): per-round values of each metric and the diagnostics."""

    values: dict  # metric label -> (n,) per-round values (NaN when refused)
    summary: dict  # metric label -> estimate
    positions: list  # per position: estimate, interval, rounds, ess, shares
    diagnostics: dict


def _kish(w: np.ndarray, axis=0):
    """Kish's effective size ``(sum w)^2 / sum w^2``, the values scaled by their largest first (no
    square overflows)."""
    top = np.abs(w).max(axis=axis, keepdims=True) if w.size else np.ones_like(w)
    x = w / np.where(top > 0, top, 1.0)
    s = x.sum(axis=axis)
    s2 = (x * x).sum(axis=axis)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(s2 > 0, s * s / np.where(s2 > 0, s2, 1.0), 0.0)


def _sd(v: np.ndarray, axis=0) -> np.ndarray:
    """The standard deviation (ddof 1) along ``axis``, the values scaled by their largest first."""
    top = np.abs(v).max(axis=axis, keepdims=True) if v.size else np.ones_like(v)
    top = np.where((top > 0) & np.isfinite(top), top, 1.0)
    with np.errstate(invalid="ignore", over="ignore"):
        return np.squeeze(top, axis=axis) * (v / top).std(axis=axis, ddof=1)


def skewness(terms: np.ndarray, pscore: np.ndarray, rate: np.ndarray) -> float:
    """The skewness of an estimate's weighted clicks, judged from the weights of every round rather
    than from the clicks the log happened to get.

    Round ``r`` adds ``t_rj = coef_j (n / n_j) w_rj`` at position ``j`` when the logger did what the
    policy would there (probability ``p_rj``, the logger's pscore of it) and the user clicked
    (probability ``q_j``, one click rate per position, fitted so that the expected weighted clicks
    are the observed ones: ``q_j = sum_r b w c / sum_r b w``), and 0 otherwise: a Bernoulli draw of
    probability ``p q`` times ``t``, the rounds independent (as :func:`topkeval.engine.unbiased.skewness`
    takes a click log's, each click a draw of probability ``propensity x relevance`` times ``1 /
    propensity``). Its cumulants over every round, ``sum t^2 pq (1 - pq)`` and ``sum t^3 pq (1 - pq)
    (1 - 2pq)``, are estimated from the rounds the logger matched (the others' ``p`` is not logged),
    each weighted by ``1 / p`` (Horvitz-Thompson: unbiased over the logger's draws); their ratio::

        g = sum t^3 q (1 - pq) (1 - 2pq) / (sum t^2 q (1 - pq)) ** 1.5

    over the matched (round, position) pairs is the skewness of the estimate (a multiple of that
    total). A few rare large weights make it large whether or not their clicks happened: a log that
    drew them without their click has few effective clicks and a narrow interval that misses the
    truth, and its weights say so where its clicks cannot.

    Parameters
    ----------
    terms : ndarray of shape (n, K)
        ``t_rj``, each round's weight at each position times the position's coefficient (0 where
        the logger did not do what the policy would).
    pscore : ndarray of shape (n, K)
        ``p_rj``, the logger's probability of what it did (read where ``terms`` is not 0).
    rate : ndarray of shape (K,)
        ``q_j``, each position's click rate (cut to [0, 1]).

    Returns
    -------
    float
        NaN when no term can vary (no weight, or no click).

    Examples
    --------
    >>> terms = np.array([[2.0, 0.0], [2.0, 4.0], [50.0, 0.0]])
    >>> pscore = np.array([[0.5, 1.0], [0.5, 0.25], [0.02, 1.0]])
    >>> round(skewness(terms, pscore, np.array([0.3, 0.2])), 4)
    1.7916
    """
    k2, k3 = _cumulants(terms, pscore, rate)
    return k3 / k2 ** 1.5 if k2 > 0 else (math.inf if math.isinf(k3) else math.nan)


def _cumulants(terms: np.ndarray, pscore: np.ndarray, rate: np.ndarray, scaled: bool = True) -> tuple[float, float]:
    """:func:`skewness`'s estimates of the second and third cumulants of the weighted clicks' total,
    the terms divided by their largest (``scaled=False``: as given)."""
    t = np.asarray(terms, np.float64)
    p = np.clip(np.asarray(pscore, np.float64), 0.0, 1.0)
    q = np.clip(np.asarray(rate, np.float64), 0.0, 1.0)[None, :]
    on = (t != 0) & np.isfinite(p)
    if not on.any():
        return 0.0, 0.0
    top = float(np.abs(t[on]).max()) if scaled else 1.0
    if not math.isfinite(top):
        return 0.0, math.inf
    s = np.where(on, t, 0.0) / top  # scale-free: no cube overflows
    pq = np.where(on, p, 0.0) * q
    return float((s * s * q * (1 - pq)).sum()), float((s ** 3 * q * (1 - pq) * (1 - 2 * pq)).sum())


def _skewed_message(est: Estimator, g: float, limit: float) -> str:
    """Why an estimate whose weighted clicks are too skewed is refused, and what to use instead."""
    instead = "" if est.doubly_robust else "dr (its reward model takes up most of each weighted click), "
    return (f"its weighted clicks have a skewness of {g:.2f} (above {number(limit)}), judged from the weights of every "
            "round the logger matched and the click rate fitted to them: a few rounds carry weights far above the "
            "rest (the logger rarely did what the policy would), so the estimate swings with whether their clicks "
            "happened, and a log whose large weights went unclicked looks precise and is not (above this skewness "
            f"the intervals covered the truth too rarely in simulation). Use {instead}more rounds, a logger less "
            "peaked on its own choices, or clip= (bounded weights: an estimate biased low by about its clip_bias, "
            "a lower bound in expectation)")


def _metric_max(coef: np.ndarray) -> float:
    """The largest value of a weighted sum of click rates (each in [0, 1])."""
    return float(coef.sum())


def _estimate(est: Estimator | None, log: _Log, policy: _Policy | None, metrics: list[_Metric], K: int, *,
              clip: float | None, rates: _Rates | None, support: _Pairs | None, shown_pairs: _Pairs,
              min_clicks: float, min_ess: float = 0.0, cascade: dict | None = None, refuse: bool = True) -> _Estimate:
    n = log.n
    logged = log.logged[:, :K]
    c = log.click[:, :K]
    diag: dict = {}
    # the rounds counted at position j: those that log it, and those where nothing is there (no click, for
    # sure): for the logger a round with fewer than j candidates, for a policy a round where it puts no mass
    # at j. A round that logs nothing at j where the policy would show an item is left out of position j.
    if policy is None:
        # the logger showed nothing below a round's last position when every round logs a whole prefix;
        # a log whose rounds log single positions (the Open Bandit Dataset's) says nothing of the others
        mass_ij = None
        nothing = ((log.slate_end[:, None] < np.arange(1, K + 1)[None, :]) if log.prefixes else
                   np.zeros((n, K), bool))
    else:
        cache = policy.how.setdefault("_shares", {})
        if "mass_ij" not in cache:
            cache["mass_ij"] = _per_round(policy.triples, np.ones(len(policy.triples.item)), n, K)
        mass_ij = cache["mass_ij"]
        nothing = mass_ij <= 0
    b = (logged | nothing).astype(np.float64)
    n_j = b.sum(axis=0)
    qhat = None
    if est is None:  # the logger's own clicks
        w = b.copy()
        a, den = b * c, b
        raw = w
    else:
        assert policy is not None
        with np.errstate(over="ignore"):
            if est.pscore == "item_position":
                raw = np.where(logged, policy.at_logged[:, :K] / np.where(logged, log.pscore["item_position"][:, :K],
                                                                          1.0), 0.0)
            elif est.pscore == "cascade":
                assert policy.prefix is not None
                raw = np.where(logged, np.nan_to_num(policy.prefix[:, :K]) /
                               np.where(logged, log.pscore["cascade"][:, :K], 1.0), 0.0)
            else:
                assert policy.prefix is not None and log.slate_pscore is not None
                end = np.maximum(log.slate_end, 1) - 1
                pe = np.where(log.slate_end > 0, np.nan_to_num(policy.prefix[np.arange(n), end]), 0.0)
                ws = np.where(log.slate_end > 0, pe / np.where(log.slate_end > 0, log.slate_pscore, 1.0), 0.0)
                raw = logged * ws[:, None]
        if est.pscore == "slate":
            assert log.slate_pscore is not None
            p_form = np.where(logged, np.asarray(log.slate_pscore, np.float64)[:, None], np.nan)
        else:
            p_form = np.where(logged, log.pscore[est.pscore][:, :K], np.nan)
        w = np.minimum(raw, clip) if clip is not None else raw
        diag["clipped"] = int(((raw > clip) & logged).sum()) if clip is not None else 0
        diag["max_weight"] = float(raw.max(initial=0.0))
        if est.doubly_robust:
            assert rates is not None
            rr, jj = np.nonzero(logged)
            qhat = np.zeros((n, K))
            qhat[rr, jj] = rates.q(rates.fold[rr], log.item[log.at[rr, jj]], jj)
            dm = rates.dm(policy, n)
            a = b * (dm + w * (c - qhat))
            den = b
        elif est.normalised:
            a, den = b * w * c, b * w
        else:
            a, den = b * c * w, b
    with np.errstate(divide="ignore", invalid="ignore"):
        massj = (np.where(n_j > 0, (b * mass_ij).sum(axis=0) / np.where(n_j > 0, n_j, 1.0), 0.0)
                 if mass_ij is not None else np.ones(K))
    total_den = den.sum(axis=0)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        ratio = np.where(total_den > 0, a.sum(axis=0) / np.where(total_den > 0, total_den, 1.0), np.nan)
        mean_den = total_den / n
        v = ratio[None, :] + (a - ratio[None, :] * den) / np.where(mean_den > 0, mean_den, np.nan)[None, :]
        if est is not None and est.normalised:
            # normalised to the policy's own mass at j (1 for a full ranking, as Open Bandit Pipeline does; less
            # for a policy that shows nothing at j some of the time), which is known: theta = M R
            assert mass_ij is not None
            none_at_all = (massj <= 0) & (n_j > 0)
            ratio = np.where(none_at_all, 0.0, ratio)
            v = np.where(none_at_all[None, :], 0.0, v)
            theta = massj * ratio
            v = massj[None, :] * v + ratio[None, :] * (b * mass_ij - massj[None, :] * b) / np.where(
                n_j > 0, n_j / n, np.nan)[None, :]
        else:
            theta = ratio
    ess = _kish(w * b)
    with np.errstate(over="ignore", invalid="ignore"):
        weighted_clicks = w * c * b
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):  # the click rate fitted to the weighted clicks
        wsum = (w * b).sum(axis=0)
        click_rate = np.where(wsum > 0, weighted_clicks.sum(axis=0) / np.where(wsum > 0, wsum, 1.0), 0.0)
    ess_clicks = _kish(weighted_clicks)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        mean_weight = np.where(n_j > 0, (w * b).sum(axis=0) / np.where(n_j > 0, n_j, 1.0), np.nan)
        counted = np.where(b > 0, w, np.nan)
        weight_se = np.array([_sd(counted[b[:, j] > 0, j]) if n_j[j] > 1 else np.nan for j in range(K)]) / np.sqrt(
            np.where(n_j > 0, n_j, 1.0))
    # position-wise intervals (normal, from the linearised values)
    se = np.full(K, np.nan)
    finite = np.isfinite(theta)
    if n > 1 and finite.any():
        se[finite] = _sd(v[:, finite]) / math.sqrt(n)
    unsupported = never = None
    if policy is not None:
        def mean_over_counted(values: np.ndarray) -> np.ndarray:  # per position, over the rounds counted there
            with np.errstate(divide="ignore", invalid="ignore"):
                return np.where(n_j > 0, (b * values).sum(axis=0) / np.where(n_j > 0, n_j, 1.0), 0.0)

        # the policy's own shares, the same for each estimator: computed once per policy
        cache = policy.how["_shares"]
        if "never" not in cache:
            absent = len(log.item_labels)
            cache["never"] = mean_over_counted(_outside(policy, shown_pairs, n, K))
            cache["absent"] = mean_over_counted(_outside(policy, None, n, K, absent=absent))
            cache["unsupported"] = mean_over_counted(_outside(policy, support, n, K, absent=absent))
        never, unsupported = cache["never"], cache["unsupported"]
        if est is not None and est.doubly_robust and rates is not None and unsupported.any():
            q_out = _outside(policy, support, n, K, values=_entry_q(policy, rates), absent=len(log.item_labels))
            diag["_dr_unsupported_q"] = mean_over_counted(q_out)
        diag["_mass"] = massj
    positions = []
    for j in range(K):
        z = Z95 * se[j]
        # normal, cut to the click rate's range [0, 1]
        positions.append({"position": j + 1, "estimate": float(theta[j]),
                          "ci_low": float(min(max(theta[j] - z, 0.0), 1.0)), "ci_high": float(max(min(theta[j] + z, 1.0),
                                                                                                  0.0)),
                          "rounds": int(n_j[j]), "logged": int(logged[:, j].sum()),
                          "effective_sample_size": float(ess[j]), "effective_clicks": float(ess_clicks[j]),
                          "mean_weight": float(mean_weight[j]), "mean_weight_se": float(weight_se[j]),
                          **({"policy_mass": float(massj[j]), "never_shown": float(never[j])}
                             if never is not None else {}),
                          **({"unsupported": float(unsupported[j])} if unsupported is not None else {})})
    values: dict = {}
    summary: dict = {}
    per_metric: dict = {}
    mc_se = policy.how.get("_at_logged_se") if policy is not None else None
    for m in metrics:
        coef = m.coefs(K)
        used = coef > 0
        with np.errstate(over="ignore", invalid="ignore"):
            vi = v[:, used] @ coef[used]
        est_value = float(np.dot(theta[used], coef[used])) if np.isfinite(theta[used]).all() else math.nan
        with np.errstate(divide="ignore", invalid="ignore"):
            scale = np.where(n_j > 0, n / np.where(n_j > 0, n_j, 1.0), 0.0)
        with np.errstate(over="ignore", invalid="ignore"):
            z_i = (weighted_clicks * (coef * scale)[None, :]).sum(axis=1)
        eff_clicks = float(_kish(z_i))
        info_m: dict = {"effective_clicks": eff_clicks,
                        "effective_sample_size": float(ess[used].min()) if used.any() else 0.0}
        if est is not None and mc_se is not None and est.pscore == "item_position":
            # the Monte Carlo error of the policy's probabilities at the logged pairs, carried into the estimate
            # (independent across rounds; dr's reward-model term aside)
            with np.errstate(divide="ignore", invalid="ignore"):
                per = np.where(logged, c * mc_se[:, :K] / np.where(logged, log.pscore["item_position"][:, :K], 1.0),
                               0.0)
                if est.normalised:
                    per = per * np.where(total_den > 0, massj * n / np.where(total_den > 0, total_den, 1.0), 0.0)
                else:
                    per = per * scale[None, :]
            info_m["monte_carlo_se"] = float(np.sqrt(((per * coef[None, :]).sum(axis=1) ** 2).sum())) / n
        refused = None
        if not math.isfinite(est_value):
            empty = [j + 1 for j in range(K) if used[j] and not np.isfinite(theta[j])]
            refused = (f"no estimate at position {empty[0]}: "
                       + ("no round logs it" if n_j[empty[0] - 1] == 0 else "the policy never agrees with the logger "
                                                                             "there (every weight 0)"))
        if est is not None:
            assert policy is not None and never is not None and unsupported is not None
            if clip is not None and not est.normalised:
                with np.errstate(over="ignore", invalid="ignore"):
                    # what clipping took away: (w - M)+ c for IPS; for dr (w - M)+ (c - q), towards its reward model
                    excess = np.maximum(raw - clip, 0.0) * ((c - qhat) if qhat is not None else c) * b
                    info_m["clip_bias"] = float(np.dot(excess.sum(axis=0) / np.where(n_j > 0, n_j, 1.0), coef))
            # the clicks the estimate cannot see: the mass on pairs the logger could not show (support=) or on
            # items the log never lists; for the cascade and slate estimators, on prefixes (slates) holding one,
            # at most the sum over the positions above
            if est.pscore == "cascade":
                missing = np.minimum(np.cumsum(unsupported), 1.0)
            elif est.pscore == "slate":
                whole = float(unsupported.sum()) if log.width <= K else math.inf  # deeper positions unchecked
                missing = np.full(K, min(whole, 1.0) if whole > 1e-12 else 0.0)
            else:
                missing = unsupported
            gap = float(np.dot(missing, coef))
            if support is not None or gap > 1e-12:
                info_m["unsupported"] = gap
            absent_gap = float(np.dot(policy.how["_shares"]["absent"], coef))
            if absent_gap > 1e-12:
                info_m["absent_items"] = absent_gap
            if gap > 1e-12 and math.isfinite(est_value):
                # the supported part's estimate and its per-round values; the truth lies between its
                # interval's low end and its high end plus the unsupported mass (clicks in [0, 1])
                if est.normalised:  # the IPS form of the same weights (SN rescales by the supported mass)
                    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
                        theta_ips = np.where(n_j > 0, (b * w * c).sum(axis=0) / np.where(n_j > 0, n_j, 1.0), 0.0)
                        part = (theta_ips[None, :] + (b * w * c - theta_ips[None, :] * b)
                                / np.where(n_j > 0, n_j / n, np.nan)[None, :])[:, used] @ coef[used]
                    point = float(np.dot(theta_ips, coef))
                elif est.doubly_robust:
                    point, part = est_value - float(np.dot(diag["_dr_unsupported_q"], coef)), vi
                else:
                    point, part = est_value, vi
                half = Z95 * float(_sd(part)) / math.sqrt(n) if n > 1 else math.inf
                top = _metric_max(coef)
                lower, upper = min(max(point - half, 0.0), top), min(point + gap + half, top)
                info_m["lower"], info_m["upper"] = lower, upper
                if absent_gap > 1e-12:
                    labels = list(log.extra_items)[:3]
                    refused = (f"{absent_gap:.1%} of the policy's weighted mass is on items the log never lists "
                               f"({', '.join(map(show, labels))}{', ...' if len(log.extra_items) > 3 else ''}): no "
                               "round could show them, so no estimator (iips, sniips, dr or any other) can value "
                               f"their clicks; whatever they are, the truth lies in [{lower:.6g}, {upper:.6g}] (95%). "
                               "Give a policy over the log's items")
                else:
                    refused = (f"{gap:.1%} of the policy's weighted mass lies on (item, position) pairs the logger "
                               f"cannot show: the estimate counts their clicks as 0; whatever they are, the truth "
                               f"lies in [{lower:.6g}, {upper:.6g}] (95%)")
            info_m["never_shown"] = float(np.dot(never, coef) / max(float(np.dot(massj, coef)), 1e-300))
            if (refused is None and cascade is not None and cascade.get("cascade_like") and est.pscore == "item_position"
                    and used[1:].any()):
                refused = (f"clicks depend on the clicks above them: below a click they are {cascade['ratio']:.2f} "
                           f"times as frequent as below none, at the same position (z = {cascade['z']:.1f}; a "
                           "cascade or a dependent click model), which "
                           f"{est.name} assumes away (it would count clicks the policy's upper positions prevent). "
                           "Use rips or snrips (cascade: the click at j depends only on the items at 1..j) or sips "
                           "(no assumption)")
            thin = [j + 1 for j in range(K) if used[j] and ess[j] < min_ess]
            if refused is None and thin:
                refused = (f"at position {thin[0]} the weights' effective sample size is {ess[thin[0] - 1]:.1f} rounds "
                           f"(fewer than min_ess={number(min_ess)}): the logger rarely did what the policy would there, "
                           "and the estimate of that position rests on almost nothing (an interval of it would not "
                           "hold)")
            share = [j + 1 for j in range(K) if used[j] and n_j[j] > 0 and ess[j] < SLATE_ESS_SHARE * n_j[j]]
            if refused is None and est.name == "sips" and share and min_ess > 0:
                j = share[0] - 1
                refused = (f"its weights, ratios of whole slates, have an effective sample size of {ess[j]:.1f} of "
                           f"{int(n_j[j]):,} rounds at position {j + 1} (below {SLATE_ESS_SHARE:.0%}): so heavy-"
                           "tailed that the logs which miss their rare large values look precise and are not (its "
                           "interval covers too rarely in simulation). Use snsips, or rips / iips where their "
                           "assumptions hold")
            if refused is None and clip is None and not est.normalised and not est.doubly_robust:
                # the weights average the policy's mass at each position (full support): far from it, the
                # sample under-represents the policy's choices (rare large weights not drawn, or choices the
                # logger cannot make), or pscore is not what the estimator reads
                with np.errstate(divide="ignore", invalid="ignore"):
                    t = np.where(weight_se > 0, (mean_weight - massj) / np.where(weight_se > 0, weight_se, 1.0),
                                 np.where(np.abs(mean_weight - massj) > 1e-9 * np.maximum(massj, 1e-300), np.inf, 0.0))
                off = [j for j in range(K) if used[j] and n_j[j] > 0 and not -WEIGHT_T_BELOW <= t[j] <= WEIGHT_T]
                if off:
                    j = off[0]
                    far = not (0.5 <= mean_weight[j] / max(massj[j], 1e-300) <= 2.0)
                    how_far = (f"{abs(t[j]):.1f} standard errors off" if math.isfinite(t[j]) else
                               "every weight there alike")
                    refused = (f"at position {j + 1} the weights average {mean_weight[j]:.3g} where they should average "
                               f"the policy's mass there, {massj[j]:.3g} ({how_far}): ")
                    if never[j] >= massj[j] * (1 - 1e-9) and massj[j] > 0:
                        refused += ("the policy puts all of it on (item, position) pairs no round of this log shows, "
                                    "so this estimate is 0 whatever their clicks. Give support= to say what the logger "
                                    "could show, or a policy over what it showed")
                    elif far:
                        refused += (f"{'under half' if mean_weight[j] < massj[j] else 'over twice'} the mass usually "
                                    f"means pscore is not {_KIND_TEXT[est.pscore]} (all 1, a percentage, or another "
                                    "form: the slate's or the prefix's probability where the item's is read). Check "
                                    "pscore=; if it is right, the rounds under-represent the policy's choices, and "
                                    "every estimator here rests on the same weights")
                    else:
                        refused += ("the rounds under-represent the policy's choices (rare large weights not drawn, or "
                                    "choices the logger cannot make), and this unnormalised estimate is off by as much. "
                                    "Use sniips or dr, or give support= to check what the logger could show")
            if refused is None and eff_clicks < min_clicks:
                refused = (f"it rests on {eff_clicks:.1f} effective clicks (fewer than min_clicks={number(min_clicks)}): "
                           "too few for its interval to hold")
            with np.errstate(over="ignore", invalid="ignore"):
                g = skewness((w * b)[:, used] * (coef * scale)[None, used], p_form[:, used], click_rate[used])
            info_m["skewness"] = g
            form = "dr" if est.doubly_robust else "normalised" if est.normalised else "ips"
            if refused is None and g > SKEWNESS_LIMITS[form]:
                refused = _skewed_message(est, g, SKEWNESS_LIMITS[form])
        info_m["refused"] = refused
        if refused is not None and not math.isfinite(est_value):
            vi = np.full(n, np.nan)
        elif refused is not None and refuse:
            vi = np.full(n, np.nan)
            est_value = math.nan
        elif refused is not None:  # refuse=False: kept, the reason said beside it
            info_m["refused"] = None
            info_m["would_refuse"] = refused
        values[m.label] = vi
        summary[m.label] = est_value
        per_metric[m.label] = info_m
    diag = {k: v for k, v in diag.items() if not k.startswith("_")}
    diag["metrics"] = per_metric
    return _Estimate(values, summary, positions, diag)


def _cascade_check(log: _Log, K: int) -> dict | None:
    """Whether clicks depend on the clicks above them: the click rate at positions 2..K below a click
    against below none, at the same position (and for the same item where items recur), pooled over
    those strata (Mantel-Haenszel). A randomised logger puts independent items below, so under
    item-position clicks the two are about equal; under a cascade or a dependent click model a click
    above ends or thins the scan. Stratifying matters: a deep position has both more chances of a click
    above and fewer clicks, and an attractive item shown above is one fewer left to show below.

    ``z`` is the Cochran-Mantel-Haenszel statistic ``sum (C1 - N1 p) / sqrt(sum N1 N0 p (1 - p) / N)``
    over the strata (``C1`` clicks in ``N1`` slots below a click, ``N0`` below none, ``p`` the stratum's
    rate), ``ratio`` the Mantel-Haenszel common ratio ``sum C1 N0 / N / sum C0 N1 / N``. Clicks
    depend on those above (``cascade_like``) when ``z < -3`` and the ratio is below 0.95 (a smaller
    dependence is within what rounds that differ produce under position-based clicks: 0.96 measured).
    None without two positions or without both kinds of slot."""
    if K < 2:
        return None
    logged = log.logged[:, :K]
    clicks = log.click[:, :K]
    above = np.cumsum(clicks, axis=1) - clicks > 0  # a click at a position above j
    cells = logged[:, 1:]
    rr, jj = np.nonzero(cells)
    jj = jj + 1
    up = above[rr, jj]
    hit = clicks[rr, jj]
    n1, n0 = int(up.sum()), int((~up).sum())
    if n1 == 0 or n0 == 0:
        return None
    item = log.item[log.at[rr, jj]]
    # strata: (position, item) where that item at that position has slots of both kinds, else the position
    key = item.astype(np.int64) * K + jj
    order = np.argsort(key, kind="stable")
    ks = key[order]
    starts = np.flatnonzero(np.r_[True, ks[1:] != ks[:-1]])
    both = np.add.reduceat(up[order].astype(np.int64), starts)
    sizes = np.diff(np.r_[starts, len(ks)])
    mixed_group = (both > 0) & (both < sizes)
    mixed = np.empty(len(ks), bool)
    mixed[order] = np.repeat(mixed_group, sizes)
    stratum = np.where(mixed, key, -1 - jj)
    codes, inverse = np.unique(stratum, return_inverse=True)
    S = len(codes)
    N1 = np.bincount(inverse, weights=up, minlength=S)
    N0 = np.bincount(inverse, weights=~up, minlength=S)
    C1 = np.bincount(inverse, weights=hit * up, minlength=S)
    C0 = np.bincount(inverse, weights=hit * ~up, minlength=S)
    N = N1 + N0
    ok = (N1 > 0) & (N0 > 0)
    N1, N0, C1, C0, N = N1[ok], N0[ok], C1[ok], C0[ok], N[ok]
    p = (C1 + C0) / np.where(N > 0, N, 1.0)
    var = float((N1 * N0 * p * (1 - p) / N).sum())
    z = float((C1 - N1 * p).sum()) / math.sqrt(var) if var > 0 else 0.0
    num, den = float((C1 * N0 / N).sum()), float((C0 * N1 / N).sum())
    ratio = num / den if den > 0 else (1.0 if num == 0 else math.inf)
    p1, p0 = float(hit[up].mean()), float(hit[~up].mean())
    return {"below_click": p1, "below_no_click": p0, "slots_below_click": n1, "slots_below_no_click": n0,
            "ratio": ratio, "z": z, "strata": int(ok.sum()),
            "cascade_like": bool(z < -CASCADE_Z and ratio < CASCADE_RATIO)}


def _entry_q(policy: _Policy, rates: _Rates) -> np.ndarray:
    """The reward model's value at each policy entry (a per-round policy: its round's fold; the same
    policy in every round: fold 0's, for the bounds only)."""
    t = policy.triples
    fold = rates.fold[t.round] if t.round is not None else np.zeros(len(t.item), np.int64)
    return rates.q(fold, t.item, t.pos)


# ---------------------------------------------------------------------------------------------
# the front door's work


def off_policy(log, metrics, *, policy, query: str, item: str, position: str, click: str, pscore, estimator,
               on_policy: str | None, support, clip: float | None, min_clicks: float, ties: str,
               seed: int | None, min_ess: float = 0.0, refuse: bool = True, by=None,
               weight=None) -> tuple[Evaluation, list[str]]:
    """See :func:`topkeval.off_policy`; returns the Evaluation and the warnings to give."""
    if by is not None or weight is not None:
        what = "by= (segments)" if by is not None else "weight= (weights of rounds)"
        raise ParameterError(f"off_policy takes no {what}: its per-round values are terms of one estimate over every "
                             "round (each position's rate over the rounds that log it, the ratios linearised), so a "
                             "segment's mean of them is not that segment's estimate, nor a weighted mean a weighted "
                             "estimate. Estimate each segment from its own rounds: filter the log and call off_policy "
                             "once per segment.")
    estimators = _estimator_names(estimator)
    specs = _specs(policy, on_policy)
    wanted = _metrics(metrics)
    if ties not in TIES:
        raise ParameterError(f"ties={ties!r} orders tied candidates by relevance, which a click log does not know; "
                             f"a ranker's ties are broken by {', '.join(map(repr, TIES))}.")
    columns = _pscore_columns(pscore, estimators)
    needs_prefix = [e for e in estimators if ESTIMATORS[e].pscore != "item_position"]
    tables = [s for s in specs if s.kind == "table"]
    if needs_prefix and tables:
        raise ParameterError(f"{', '.join(needs_prefix)} weigh a click by the probability of the whole prefix (or "
                             f"slate) under the policy, which a table of (item, position) probabilities does not give "
                             f"(policy {tables[0].name!r}): use iips, sniips or dr for it, or give the policy as a "
                             "ranker or tk.PlackettLuce.")
    K = max(m.k for m in wanted)
    check_result_names(query, (), None, [m.label for m in wanted])
    score_columns = list(dict.fromkeys(s.column for s in specs if s.column is not None))
    data = _read_log(log, query=query, item=item, position=position, click=click, pscore=columns,
                     scores=score_columns, K=K, slate="slate" in columns, cascade="cascade" in columns)
    L = int(data.slate_end.max())
    if K > L:
        raise ParameterError(f"{wanted[[m.k for m in wanted].index(K)].label} looks at positions up to {K}, but the "
                             f"logger showed at most {L}: no click beyond position {L} was ever observed. Use k <= {L}.")
    policies: list[_Policy] = []
    for spec in specs:
        if spec.kind == "ranker":
            policies.append(_ranker(data, spec, K, ties))
        elif spec.kind == "plackett_luce":
            policies.append(_plackett_luce(data, spec, K, seed))
        else:
            policies.append(_table_policy(data, spec, query=query, item=item, position=position, K=K))
    rates = _Rates(data, K, seed) if any(ESTIMATORS[e].doubly_robust for e in estimators) else None
    shown = np.argwhere(data.logged[:, :K])
    shown_pairs = _Pairs(None, data.item[data.at[shown[:, 0], shown[:, 1]]], shown[:, 1], K)
    support_pairs = None
    if support is not None:
        rounds, items, pos, prob = _read_pairs(support, log=data, query=query, item=item, position=position,
                                               what="the support table (support=)", probability=False)
        keep = (prob > 0) & (pos <= K)
        support_pairs = _Pairs(None if rounds is None else rounds[keep], items[keep], pos[keep] - 1, K)
    cascade = _cascade_check(data, K)
    rows: list[tuple[str, str | None, _Estimate]] = []
    described: dict[str, str] = {}
    if on_policy is not None:
        rows.append((on_policy, None, _estimate(None, data, None, wanted, K, clip=None, rates=None, support=None,
                                                shown_pairs=shown_pairs, min_clicks=0.0)))
        described[on_policy] = "the logging policy: its own clicks, unweighted"
    several = len(estimators) > 1
    for pol in policies:
        for e in estimators:
            name = f"{pol.spec.name} ({e})" if several else pol.spec.name
            described[name] = pol.spec.describe()
            rows.append((name, e, _estimate(ESTIMATORS[e], data, pol, wanted, K, clip=clip, rates=rates,
                                            support=support_pairs, shown_pairs=shown_pairs, min_clicks=min_clicks,
                                            min_ess=min_ess, cascade=cascade, refuse=refuse)))
    models = [r[0] for r in rows]
    if len(set(models)) < len(models):
        raise ParameterError(f"two rows of the results would be named {next(m for m in models if models.count(m) > 1)!r}: "
                             "rename a policy.")
    labels = [m.label for m in wanted]
    summary = pd.DataFrame([[r[2].summary[lab] for lab in labels] for r in rows], index=pd.Index(models, name="model"),
                           columns=labels)
    n = data.n

    frame = {"model": pd.Series(np.repeat(np.array(models, dtype=object), n), dtype=object),
             query: np.tile(data.labels, len(rows))}
    for lab in labels:
        frame[lab] = np.concatenate([r[2].values[lab] for r in rows])
    per_query = pd.DataFrame(frame)

    warnings_out: list[str] = []
    conventions = Conventions(ties=cast(Any, ties))
    diagnostics = {}
    for name, kind, res in rows:
        diagnostics[name] = {"estimator": kind or "on-policy", **res.diagnostics}
    unlogged = [j + 1 for j in range(K) if not data.logged[:, j].any()]
    if unlogged:  # a position no round logs: no estimate reading it, for the logger nor for any policy
        reading = [m.label for m in wanted if m.k >= unlogged[0]]
        warnings_out.append(f"off_policy: no round of the log logs position {unlogged[0]}, which {', '.join(reading)} "
                            f"read{'s' if len(reading) == 1 else ''}: no estimate of "
                            f"{'it' if len(reading) == 1 else 'them'}, for the logger ({on_policy!r}) nor for any "
                            "policy (each round's positions: 1, 2, 3... as the logger showed them).")
    refused = {(name, lab): res.diagnostics["metrics"][lab]["refused"] for name, kind, res in rows for lab in labels
               if kind is not None and res.diagnostics["metrics"][lab]["refused"]
               and not (unlogged and "no round logs it" in res.diagnostics["metrics"][lab]["refused"])}
    if refused:
        (name, lab), why = next(iter(refused.items()))
        more = len(refused) - 1
        warnings_out.append(f"off_policy: no estimate of {lab} for {name}: {why}" +
                            (f" (and {plural(more, 'more estimate')} refused: info['off_policy']['diagnostics'])"
                             if more else "") + ".")
    clipped = {name: res.diagnostics.get("clipped", 0) for name, kind, res in rows if kind is not None}
    if clip is not None and any(clipped.values()):
        name = next(k for k, v in clipped.items() if v)
        warnings_out.append(f"off_policy: clip={number(clip)} capped {plural(clipped[name], 'weight')} of {name}: the "
                            "IPS estimates are then biased low, the doubly robust ones towards their reward model "
                            "(by about info['off_policy']['diagnostics'][...]['metrics'][...]['clip_bias'] each), the "
                            "self-normalised ones towards the logger's own clicks.")
    from ..engine.terms import KEY as TERMS

    info = {
        TERMS: "each round's term of the off-policy estimate (its weighted clicks, linearised for the ratios; 0 "
               "wherever the logger did not do what the policy would), not that round's outcome",
        "refused": {name: {lab: m["refused"] for lab, m in res.diagnostics["metrics"].items() if m.get("refused")}
                    for name, kind, res in rows},
        "queries": n, "evaluated": n, "skipped_empty": 0, "rows": data.rows,
        "evaluated_per_model": {m: n for m in models}, "rows_per_model": {m: data.rows for m in models},
        "ties_at_cutoff": {m: 0 for m in models}, "longest_list": {m: None for m in models},
        "shorter_than_k": {m: None for m in models}, "models": models, "metrics": labels,
        "metric_names": {m.label: m.canonical for m in wanted},
        "conventions": conventions.as_dict(),
        "off_policy": {
            "rounds": n, "positions": K, "slate_length": L,
            "estimands": {m.label: _ESTIMANDS[m.family].format(k=m.k) for m in wanted},
            "estimators": {name: (kind or "on-policy") for name, kind, _ in rows},
            "policies": described,
            "support": "checked against support=" if support is not None else
                       "assumed: the logger could show every candidate of a round at every logged position",
            "clip": clip, "min_clicks": min_clicks, "min_ess": min_ess, "refuse": refuse, "seed": seed, "clicks_below_a_click": cascade,
            "diagnostics": diagnostics,
            "per_position": {name: res.positions for name, _, res in rows},
            "plackett_luce": {p.spec.name: {k: v for k, v in p.how.items() if not k.startswith("_")}
                              for p in policies if p.spec.kind == "plackett_luce"},
        },
    }
    evaluation = Evaluation(summary, info, query, conventions, metric_objects={m.label: m.metric for m in wanted},
                            _per_query=[per_query])
    return evaluation, warnings_out


def give_warnings(messages: Sequence[str]) -> None:
    for message in messages:
        warn(message)
