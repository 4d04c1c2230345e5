"""A randomised logger's click log with known truth, for the off-policy simulations (the slow tests
of tests/test_offpolicy.py and benchmarks/offpolicy_bench.py). Independent of topkeval.demo.

Each round has ``n`` candidates (items unique to the round) with a latent quality ``x ~ N(0, 1)`` and
an attractiveness ``rel = 1 / (1 + exp(-(A + B x)))``. The logger's production ranking orders them by
``x + N(0, 1)`` noise:

* ``logger="plackett_luce"``: a Plackett-Luce draw over weights ``exp(-r / TAU)`` of the production
  rank r (0 first), showing the first ``L``: every candidate can reach every position (full
  support); the probability of the candidate of rank r at position j is the same in every round,
  computed once by brute force over every ordered prefix;
* ``logger="shuffle"``: its top ``L`` by score, shown in uniformly random order: a candidate outside
  its top L is never shown (the support is missing wherever the new ranker differs).

The new ranker ranks by ``x + N(0, 0.5)``: deterministic, and better than the logger; its ``twin``
ranks by ``x`` plus noise of the same law drawn apart (its own generator): another ranker whose
population value is exactly the new ranker's (a true null for the paired comparisons). Clicks:

* ``clicks="position"``: position-based, ``P(click at j) = rel / j`` independently at each position;
* ``clicks="cascade"``: the user scans from the top, clicks the item at j with probability ``rel``
  and stops at the first click;
* ``clicks="dcm"``: the dependent click model (Guo et al. 2009): the same scan, but after a click the
  user goes on with probability ``continuation`` (0: the cascade; 1: position-independent clicks of
  ``rel``).

:func:`truth` gives the population's expected click rate at each position under the new ranker
(exactly, per round, averaged over many rounds) and under the logger (Monte Carlo over many rounds).
"""

from __future__ import annotations

import itertools
from functools import lru_cache

import numpy as np
import pandas as pd

A, B = -2.0, 1.5
TAU = 5.0


@lru_cache(maxsize=8)
def rank_marginals(n: int, L: int, tau: float = TAU) -> np.ndarray:
    """P(the candidate of production rank r at position j) under the logger: (n, L), by brute force."""
    w = np.exp(-np.arange(n) / tau)
    prefixes = np.array(list(itertools.permutations(range(n), L)))
    prob = np.ones(len(prefixes))
    rest = np.full(len(prefixes), w.sum())
    for j in range(L):
        prob = prob * w[prefixes[:, j]] / rest
        rest = rest - w[prefixes[:, j]]
    out = np.zeros((n, L))
    for j in range(L):
        out[:, j] = np.bincount(prefixes[:, j], weights=prob, minlength=n)
    return out


def _rounds(rng, rounds: int, n: int):
    x = rng.normal(size=(rounds, n))
    rel = 1.0 / (1.0 + np.exp(-(A + B * x)))
    logger_score = x + rng.normal(size=(rounds, n))
    new_score = x + 0.5 * rng.normal(size=(rounds, n))
    return x, rel, logger_score, new_score


def _logger_ranking(rng, logger_score, L: int, logger: str, tau: float = TAU):
    """Candidate indices at positions 1..L, and the production ranking (candidates by score)."""
    rounds, n = logger_score.shape
    production = np.argsort(-logger_score, axis=1)
    if logger == "plackett_luce":
        keys = -np.arange(n)[None, :] / tau + rng.gumbel(size=(rounds, n))  # over production ranks
        ranks = np.argsort(-keys, axis=1)[:, :L]
        return np.take_along_axis(production, ranks, axis=1)
    top = production[:, :L]
    shuffle = np.argsort(rng.random((rounds, L)), axis=1)
    return np.take_along_axis(top, shuffle, axis=1)


def _continuation(clicks: str, continuation: float) -> float:
    return 0.0 if clicks == "cascade" else continuation


def _clicks(rng, rel_shown, clicks: str, continuation: float = 0.0):
    rounds, L = rel_shown.shape
    if clicks == "position":
        return (rng.random((rounds, L)) < rel_shown / np.arange(1, L + 1)).astype(float)
    go_on = _continuation(clicks, continuation)
    u = rng.random((rounds, L)) < rel_shown
    stay = rng.random((rounds, L)) < go_on
    out = np.zeros((rounds, L))
    scanning = np.ones(rounds, bool)
    for j in range(L):
        out[:, j] = scanning & u[:, j]
        scanning &= ~u[:, j] | stay[:, j]
    return out


def _expected(rel_ranked, clicks: str, continuation: float = 0.0):
    """E[click at j] of a fixed ranking (rounds, L) of attractiveness."""
    L = rel_ranked.shape[1]
    if clicks == "position":
        return rel_ranked / np.arange(1, L + 1)
    stop = rel_ranked[:, :-1] * (1.0 - _continuation(clicks, continuation))  # a click above ends the scan
    survive = np.cumprod(np.concatenate([np.ones((len(rel_ranked), 1)), 1 - stop], axis=1), axis=1)
    return rel_ranked * survive


def simulate(rounds: int, *, seed: int, clicks: str = "position", logger: str = "plackett_luce", n: int = 20,
             L: int = 5, tau: float = TAU, continuation: float = 0.6):
    """The log (one row per candidate: round, item, position (NaN: not shown), click, the three pscores,
    the new ranker's score ``new``) and, for ``logger="shuffle"``, the support table (round, item,
    position) of what the logger could show."""
    rng = np.random.default_rng(seed)
    x, rel, logger_score, new_score = _rounds(rng, rounds, n)
    ranking = _logger_ranking(rng, logger_score, L, logger, tau)
    rel_shown = np.take_along_axis(rel, ranking, axis=1)
    click_shown = _clicks(rng, rel_shown, clicks, continuation)
    if logger == "plackett_luce":
        rank_of = np.empty((rounds, n), np.int64)
        np.put_along_axis(rank_of, np.argsort(-logger_score, axis=1), np.arange(n)[None, :].repeat(rounds, 0), axis=1)
        shown_rank = np.take_along_axis(rank_of, ranking, axis=1)
        p_item = rank_marginals(n, L, tau)[shown_rank, np.arange(L)[None, :]]
        w = np.exp(-shown_rank / tau)
        rest = np.exp(-np.arange(n) / tau).sum() - np.concatenate([np.zeros((rounds, 1)), np.cumsum(w, axis=1)[:, :-1]],
                                                                  axis=1)
        prefix = np.cumprod(w / rest, axis=1)
    else:
        p_item = np.full((rounds, L), 1.0 / L)
        prefix = np.cumprod(1.0 / (L - np.arange(L)))[None, :].repeat(rounds, axis=0)
    position = np.full((rounds, n), np.nan)
    click = np.zeros((rounds, n))
    pi = np.full((rounds, n), np.nan)
    pc = np.full((rounds, n), np.nan)
    ps = np.full((rounds, n), np.nan)
    r_idx = np.arange(rounds)[:, None]
    position[r_idx, ranking] = np.arange(1, L + 1)[None, :]
    click[r_idx, ranking] = click_shown
    pi[r_idx, ranking] = p_item
    pc[r_idx, ranking] = prefix
    ps[r_idx, ranking] = prefix[:, [L - 1]]
    twin = x + 0.5 * np.random.default_rng([seed, 1]).normal(size=(rounds, n))  # apart: the other draws unchanged
    log = pd.DataFrame({"round": np.repeat(np.arange(rounds), n), "item": np.arange(rounds * n),
                        "position": position.ravel(), "click": click.ravel(), "p_item": pi.ravel(),
                        "p_cascade": pc.ravel(), "p_slate": ps.ravel(), "new": new_score.ravel(),
                        "twin": twin.ravel()})
    support = None
    if logger == "shuffle":
        top = np.argsort(-logger_score, axis=1)[:, :L]
        items = (np.arange(rounds)[:, None] * n + top).ravel()
        support = pd.DataFrame({"round": np.repeat(np.repeat(np.arange(rounds), L), L),
                                "item": np.repeat(items, L), "position": np.tile(np.arange(1, L + 1), rounds * L)})
    return log, support


def truth(*, clicks: str, logger: str = "plackett_luce", n: int = 20, L: int = 5, rounds: int = 400_000,
          seed: int = 12345, tau: float = TAU, continuation: float = 0.6) -> dict:
    """The population's click rate at each position 1..L: ``{"new": array, "logger": array}``."""
    rng = np.random.default_rng(seed)
    x, rel, logger_score, new_score = _rounds(rng, rounds, n)
    new_top = np.argsort(-new_score, axis=1)[:, :L]
    new = _expected(np.take_along_axis(rel, new_top, axis=1), clicks, continuation).mean(axis=0)
    ranking = _logger_ranking(rng, logger_score, L, logger, tau)
    old = _expected(np.take_along_axis(rel, ranking, axis=1), clicks, continuation).mean(axis=0)
    return {"new": new, "logger": old}


def metric_truth(rates: np.ndarray, metric: str) -> float:
    """precision@k, tp@k or dcg@k from the click rates at positions 1..L."""
    family, k = metric.split("@")
    k = int(k)
    coef = {"precision": np.full(k, 1.0 / k), "tp": np.ones(k), "dcg": 1.0 / np.log2(np.arange(2, k + 2))}[family]
    return float(np.dot(rates[:k], coef))
