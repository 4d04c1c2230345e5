"""A click simulator of its own, for the simulation suite of estimates from clicks
(tests/test_clicks_simulation.py, benchmarks/clicks_simulation.py). Pure numpy; it shares nothing
with ``topkeval.demo.click_log`` and imports nothing from topkeval, so that the truth it computes does
not come from the code under test.

The world
---------
A query has ``CANDIDATES`` (20) candidates. Each candidate has an appeal ``a ~ N(0, 1)`` and is
relevant with probability ``sigmoid(slope * a + intercept)`` (binary relevance; ``intercept`` sets
how many are relevant, so how many clicks a query gets).

Scores are ``a + s * (rho * e_L + sqrt(1 - rho**2) * e_own)`` with standard normal noises: the logging
ranker has ``s = logger_noise`` (1 unless said), ``rho = 1`` (its own noise ``e_L``), and the three rankers evaluated from its clicks
are not the logger (:data:`RANKERS`):

* ``A``: as noisy as the logger and close to it (``s = 1, rho = 0.9``);
* ``B2``: slightly better than A, as close to the logger (``s = 0.8, rho = 0.9``);
* ``B``: much better and far from the logger (``s = 0.4, rho = 0.3``).

Clicks
------
The logging ranker shows its top ``shown`` candidates at positions 1, 2, ... (the others never shown:
no position). ``model="position"`` (position-based): a candidate at position j is examined with
probability ``j ** -eta`` and clicked when examined and relevant; its propensity is ``j ** -eta``.
``model="cascade"`` (a dependent click model): the user reads from the top, clicks every relevant
candidate read, and reads on with probability ``go_on_click`` after a click, ``go_on_skip`` after a
skip; the propensity of a candidate is its chance of being read given the clicks above it, the product
of those probabilities (which the log shows): given the clicks above, a click divided by it has
expectation the relevance, so inverse propensity weighting stays unbiased.

Truth
-----
:func:`truth` computes every metric from the true relevance with numpy, by sorting each ranker's
scores (continuous scores: no ties), over a large population of queries drawn from the same world:
the population value that an estimate from a log of fresh queries should cover.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

CANDIDATES = 20

#: ranker -> (noise scale s, correlation rho of its noise with the logging ranker's)
RANKERS = {"A": (1.0, 0.9), "B2": (0.85, 0.3), "B": (0.4, 0.3)}


@dataclass(frozen=True)
class Setting:
    """One kind of click log. ``intercept`` sets the relevance rate; ``eta`` the position-based
    examination ``j ** -eta``; ``go_on_click`` / ``go_on_skip`` the cascade; ``shown`` how many
    candidates the logging ranker shows."""

    name: str
    model: str = "position"
    eta: float = 1.0
    intercept: float = -1.5
    slope: float = 2.0
    go_on_click: float = 0.5
    go_on_skip: float = 0.85
    shown: int = CANDIDATES
    logger_noise: float = 1.0


#: the settings of the suite: sparse (about 1 click per query) and dense (about 4), position-based
#: and cascade clicks
SETTINGS = {
    "position, sparse": Setting("position, sparse", "position", eta=1.0, intercept=-2.6),
    "position, dense": Setting("position, dense", "position", eta=0.5, intercept=-0.3),
    "cascade, sparse": Setting("cascade, sparse", "cascade", intercept=-2.6, go_on_click=0.5, go_on_skip=0.85),
    "cascade, dense": Setting("cascade, dense", "cascade", intercept=-0.3, go_on_click=0.85, go_on_skip=0.95),
}


@dataclass
class World:
    """Queries x candidates: the true relevance and every ranker's scores (the logger's included)."""

    relevant: np.ndarray  # (Q, C) bool
    scores: dict  # name -> (Q, C) float64: "logger", "A", "B2", "B"


def world(setting: Setting, n_queries: int, rng: np.random.Generator, loggers: int = 1) -> World:
    """Draw ``n_queries`` queries; with ``loggers`` > 1, as many logging rankers (``logger``,
    ``logger1``, ...: two arms of an A/B test showing the same queries in different orders)."""
    shape = (n_queries, CANDIDATES)
    appeal = rng.standard_normal(shape)
    relevant = rng.random(shape) < 1.0 / (1.0 + np.exp(-(setting.slope * appeal + setting.intercept)))
    noise = rng.standard_normal(shape)
    scores = {"logger": appeal + setting.logger_noise * noise}
    for name, (s, rho) in RANKERS.items():
        scores[name] = appeal + s * (rho * noise + np.sqrt(1 - rho * rho) * rng.standard_normal(shape))
    for arm in range(1, loggers):
        scores[f"logger{arm}"] = appeal + setting.logger_noise * rng.standard_normal(shape)
    return World(relevant, scores)


def clicks(setting: Setting, w: World, rng: np.random.Generator, logger: str = "logger"):
    """The logging ranker's page and the user's clicks: ``(position, click, propensity)``, each
    (Q, C): position 1-based (NaN never shown), click bool, propensity the examination probability
    of each shown candidate given what the log shows (NaN never shown)."""
    Q = w.relevant.shape[0]
    order = np.argsort(-w.scores[logger], axis=1, kind="stable")  # candidate at each position
    rows = np.arange(Q)[:, None]
    rel = w.relevant[rows, order]  # relevance by position
    shown = setting.shown
    chance = np.full((Q, CANDIDATES), np.nan)
    click = np.zeros((Q, CANDIDATES), bool)
    if setting.model == "position":
        p = np.arange(1, shown + 1, dtype=np.float64) ** -setting.eta
        chance[:, :shown] = p
        click[:, :shown] = rel[:, :shown] & (rng.random((Q, shown)) < p)
    elif setting.model == "cascade":
        reading = np.ones(Q, bool)
        chance[:, 0] = 1.0
        for j in range(shown):
            if j:
                go_on = np.where(click[:, j - 1], setting.go_on_click, setting.go_on_skip)
                chance[:, j] = chance[:, j - 1] * go_on
                reading &= rng.random(Q) < go_on
            click[:, j] = reading & rel[:, j]
    else:
        raise ValueError(setting.model)
    position = np.full((Q, CANDIDATES), np.nan)
    out_click = np.zeros((Q, CANDIDATES), bool)
    propensity = np.full((Q, CANDIDATES), np.nan)
    ranks = np.arange(1, CANDIDATES + 1, dtype=np.float64)
    position[rows, order] = np.where(ranks <= shown, ranks, np.nan)
    out_click[rows, order] = click
    propensity[rows, order] = chance
    return position, out_click, propensity


def log(setting: Setting, n_queries: int, seed: int, rankers=tuple(RANKERS)) -> dict:
    """A click log of fresh queries as flat columns: ``query, item, click, position, propensity,
    relevant`` (the truth, never read by an estimate) and one score column per ranker."""
    rng = np.random.default_rng(seed)
    w = world(setting, n_queries, rng)
    position, click, propensity = clicks(setting, w, rng)
    Q = n_queries
    out = {"query": np.repeat(np.arange(Q), CANDIDATES), "item": np.tile(np.arange(CANDIDATES), Q),
           "click": click.ravel().astype(np.int8), "position": position.ravel(),
           "propensity": propensity.ravel(), "relevant": w.relevant.ravel().astype(np.int8)}
    out.update({name: w.scores[name].ravel() for name in rankers})
    return out


def arms(setting: Setting, n_queries: int, seed: int, n_arms: int = 2) -> dict:
    """Impressions of the same queries under ``n_arms`` logging rankers (an A/B test's arms), for
    estimating the examination curve by intervention harvesting: ``query, item, position, click,
    arm`` stacked arm by arm (position-based clicks only)."""
    rng = np.random.default_rng(seed)
    w = world(setting, n_queries, rng, loggers=n_arms)
    parts = []
    for arm in range(n_arms):
        position, click, _ = clicks(setting, w, rng, logger="logger" if arm == 0 else f"logger{arm}")
        parts.append({"query": np.repeat(np.arange(n_queries), CANDIDATES),
                      "item": np.tile(np.arange(CANDIDATES), n_queries), "position": position.ravel(),
                      "click": click.ravel().astype(np.int8), "arm": np.full(n_queries * CANDIDATES, arm)})
    return {k: np.concatenate([p[k] for p in parts]) for k in parts[0]}


# --- the truth: every metric from the true relevance, plain numpy ---

def _ranked(relevant: np.ndarray, scores: np.ndarray) -> np.ndarray:
    """Relevance by rank (descending score) of each query, as float (Q, C)."""
    order = np.argsort(-scores, axis=1, kind="stable")
    return relevant[np.arange(len(relevant))[:, None], order].astype(np.float64)


def per_query(relevant: np.ndarray, scores: np.ndarray, k: int) -> dict:
    """Per query: the ingredients of every metric at cutoff k (``pad``: k is the divisor)."""
    rel = _ranked(relevant, scores)
    R = rel.sum(axis=1)
    disc = 1.0 / np.log2(np.arange(2, CANDIDATES + 2))
    h = rel[:, :k].sum(axis=1)
    dcg = (rel[:, :k] * disc[:k]).sum(axis=1)
    ideal = np.array([disc[:min(int(r), k)].sum() for r in range(CANDIDATES + 1)])[R.astype(int)]
    prec_at = np.cumsum(rel, axis=1) / np.arange(1, CANDIDATES + 1)
    ap = (prec_at * rel).sum(axis=1)  # the sum over every relevant rank (the uncut ap)
    h_at_r = np.array([row[:int(r)].sum() for row, r in zip(rel, R)])
    rbp = ((1 - 0.8) * rel[:, :k] * 0.8 ** np.arange(k)).sum(axis=1)
    return {"h": h, "R": R, "dcg": dcg, "ideal": ideal, "ap_sum": ap, "h_at_r": h_at_r, "rbp": rbp}


def values(parts: dict, k: int) -> dict:
    """Population values of every metric from :func:`per_query`'s ingredients: the means over
    queries (the macro metrics over the queries with a relevant item, as topkeval skips empty ones)
    and the pooled ratios."""
    h, R = parts["h"], parts["R"]
    has = R > 0
    return {
        f"precision@{k}": h.mean() / k,
        f"tp@{k}": h.mean(),
        f"dcg@{k}": parts["dcg"].mean(),
        f"rbp(p=0.8)@{k}": parts["rbp"].mean(),
        f"recall_micro@{k}": h.sum() / R.sum(),
        f"f1_micro@{k}": 2 * h.sum() / (R.sum() + k * len(R)),
        f"recall@{k}": (h[has] / R[has]).mean(),
        f"f1@{k}": (2 * h[has] / (R[has] + k)).mean(),
        f"ndcg@{k}": (parts["dcg"][has] / parts["ideal"][has]).mean(),
        "ap": (parts["ap_sum"][has] / R[has]).mean(),
        "r_precision": (parts["h_at_r"][has] / R[has]).mean(),
    }


def truth(setting: Setting, k: int = 10, n_queries: int = 400_000, seed: int = 12345) -> dict:
    """Population value of every metric of :func:`values` for every ranker (and the logger), from a
    population of ``n_queries`` queries (Monte Carlo error about 0.07 of the standard error of an
    estimate from 2,000 queries at the default size)."""
    rng = np.random.default_rng(seed)
    out: dict = {}
    for start in range(0, n_queries, 100_000):  # in blocks: bounded memory
        w = world(setting, min(100_000, n_queries - start), rng)
        for name in ("logger", *RANKERS):
            parts = per_query(w.relevant, w.scores[name], k)
            acc = out.setdefault(name, {})
            for key, v in parts.items():
                acc[key] = np.concatenate([acc[key], v]) if key in acc else v
    return {name: values(parts, k) for name, parts in out.items()}


def snips(click: np.ndarray, weight: np.ndarray, scores: np.ndarray, k: int) -> dict:
    """The per-query self-normalised estimates (SNIPS) that topkeval refuses, computed here to show
    why: recall@k as ``sum over the top k of w c / sum of w c`` per query, F1@k as
    ``2 sum_top_k w c / (sum w c + k)``, each averaged over the queries with a click. ``click``,
    ``weight`` (1 / propensity) and ``scores`` are (Q, C)."""
    order = np.argsort(-scores, axis=1, kind="stable")
    cw = np.where(click, weight, 0.0)[np.arange(len(click))[:, None], order]
    Rw = cw.sum(axis=1)
    has = Rw > 0
    top = cw[has, :k].sum(axis=1)
    return {f"recall@{k}": (top / Rw[has]).mean(), f"f1@{k}": (2 * top / (Rw[has] + k)).mean()}
