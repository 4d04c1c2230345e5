"""A built-in example log: an image search engine, its old ranker and a new one.

Each query shows 20 to 60 candidate images. Users clicked some of them (the relevance); the old
ranker's scores are coarse (rounded to one decimal, so ties are common) and the new ranker's are
closer to what users want. About one query in ten got no click at all.
"""

from __future__ import annotations

import numpy as np
import pandas as pd


def example_log(n_queries: int = 3000, seed: int = 0) -> pd.DataFrame:
    """Return the example log: columns ``query, image, click, old_ranker, new_ranker``.

    Parameters
    ----------
    n_queries : int
        Number of search queries.
    seed : int
        Seed of the generator; the same seed gives the same log.

    Examples
    --------
    >>> log = example_log(10)
    >>> list(log.columns)
    ['query', 'image', 'click', 'old_ranker', 'new_ranker']
    """
    rng = np.random.default_rng(seed)
    sizes = rng.integers(20, 61, n_queries)
    n = int(sizes.sum())
    query = np.repeat(np.arange(n_queries), sizes)
    appeal = rng.normal(size=n)  # how much users like the image for this query
    propensity = rng.uniform(0.2, 1.0, n_queries)[query]  # some queries get no click at all
    silent = (rng.random(n_queries) < 0.08)[query]
    click = (rng.random(n) < propensity / (1 + np.exp(-(2.2 * appeal - 2.8)))) & ~silent
    old = np.round(0.6 * appeal + rng.normal(scale=1.0, size=n), 1)
    new = np.round(0.9 * appeal + rng.normal(scale=0.9, size=n), 2)
    image = np.concatenate([rng.permutation(s) for s in sizes]) + 10_000 * query
    return pd.DataFrame({
        "query": np.char.add("q", query.astype(str)),
        "image": np.char.add("img", image.astype(str)),
        "click": click.astype(np.int8),
        "old_ranker": old,
        "new_ranker": new,
    })


def click_log(n_queries: int = 3000, candidates: int = 20, shown: int = 20, *, eta: float = 1.0, arms: int = 1,
              model: str = "position", seed: int = 0) -> pd.DataFrame:
    """A simulated click log with its truth: which candidates were relevant, and what the old
    ranker showed where. ``model="position"``: a candidate shown at position k is examined with
    probability ``k ** -eta`` and clicked when examined and relevant. ``model="cascade"`` (a
    dependent click model): the user reads from the top, clicks a relevant candidate, and goes on
    with probability 0.5 after a click and 0.85 after a skip; the column ``examination`` is then
    each candidate's chance of being read given the clicks above it (what IPS weighs by).

    Columns: ``query, image, relevant`` (the truth), ``arm`` (with ``arms`` > 1: the same queries
    logged under as many variants of the old ranker, as an A/B test does), ``position`` (1-based; NaN
    for a candidate not among the ``shown`` first), ``click``, ``old_ranker``, ``new_ranker`` (a better
    ranker, to be evaluated from the old one's clicks).

    Examples
    --------
    >>> log = click_log(5)
    >>> list(log.columns)
    ['query', 'image', 'relevant', 'arm', 'position', 'click', 'old_ranker', 'new_ranker']
    >>> bool((log["click"] <= log["relevant"]).all())
    True
    """
    rng = np.random.default_rng(seed)
    n = n_queries * candidates
    query = np.repeat(np.arange(n_queries), candidates)
    appeal = rng.normal(size=n)
    relevant = rng.random(n) < 1 / (1 + np.exp(-(2.0 * appeal - 1.5)))
    new = 1.0 * appeal + rng.normal(scale=0.6, size=n)
    image = np.tile(np.arange(candidates), n_queries) + candidates * query
    frames = []
    for arm in range(arms):
        old = 0.35 * appeal + rng.normal(scale=1.0, size=n)
        order = np.lexsort((-old, query))  # by query, then the old ranker's order
        rank = np.empty(n, np.int64)
        rank[order] = np.tile(np.arange(1, candidates + 1), n_queries)
        position = np.where(rank <= shown, rank, np.nan).astype(np.float64)
        extra = {}
        if model == "cascade":
            clicked, examination = _cascade(relevant, order, candidates, shown, rng)
            extra = {"examination": examination}
        else:
            examined = rng.random(n) < np.where(rank <= shown, rank.astype(np.float64) ** -eta, 0.0)
            clicked = examined & relevant
        frames.append(pd.DataFrame({"query": query, "image": image, "relevant": relevant.astype(np.int8), "arm": arm,
                                    "position": position, "click": clicked.astype(np.int8),
                                    "old_ranker": old, "new_ranker": new, **extra}))
    return pd.concat(frames, ignore_index=True) if arms > 1 else frames[0]


def _cascade(relevant: np.ndarray, order: np.ndarray, candidates: int, shown: int, rng) -> tuple[np.ndarray, np.ndarray]:
    """Clicks of a dependent click model over pages in ``order`` (rows by query, then position),
    and each row's probability of being examined given the clicks above it (NaN if never shown)."""
    pages = order.reshape(-1, candidates)[:, :shown]  # row indices, position by position
    rel = relevant[pages]
    clicks = np.zeros(pages.shape, bool)
    chance = np.ones(pages.shape)
    reading = np.ones(len(pages), bool)
    for j in range(shown):
        if j:
            go_on = np.where(clicks[:, j - 1], 0.5, 0.85)
            chance[:, j] = chance[:, j - 1] * go_on  # given the clicks above (each seen by then)
            reading &= rng.random(len(pages)) < go_on
        clicks[:, j] = reading & rel[:, j]
    clicked = np.zeros(len(relevant), bool)
    examination = np.full(len(relevant), np.nan)
    clicked[pages.ravel()] = clicks.ravel()
    examination[pages.ravel()] = chance.ravel()
    return clicked, examination


def randomized_log(n_rounds: int = 5000, candidates: int = 20, shown: int = 5, explore: int = 10, *,
                   seed: int = 0) -> pd.DataFrame:
    """A simulated log of a randomised logger, for off-policy estimates (:func:`topkeval.off_policy`).

    Each round has ``candidates`` items of latent quality ``x ~ N(0, 1)``; a shown item is clicked with
    probability ``attractiveness / position``, ``attractiveness = 1 / (1 + exp(2 - 1.5 x))``
    (position-based clicks). The production ranker scores ``old = x + N(0, 1)``; the logger explores
    by showing ``shown`` of the production ranker's top ``explore`` in uniformly random order, so each
    of those is at each position with probability ``1 / explore`` (and the others never are). A new
    ranker scores ``new = x + N(0, 0.5)``.

    Columns: ``round, item, position`` (1-based; NaN: not shown), ``click``, ``pscore`` (the logger's
    probability of the item at its position), ``pscore_cascade`` (of the items at positions 1..j),
    ``pscore_slate`` (of the whole slate), ``old_rank`` (the production ranker's rank), ``old``,
    ``new`` and ``attractiveness`` (the truth, for checking an estimate).

    Examples
    --------
    >>> log = randomized_log(3, seed=1)
    >>> log.groupby("round")["position"].count().tolist(), float(log["pscore"].max())
    ([5, 5, 5], 0.1)
    """
    rng = np.random.default_rng(seed)
    n = n_rounds * candidates
    x = rng.normal(size=(n_rounds, candidates))
    attract = 1.0 / (1.0 + np.exp(2.0 - 1.5 * x))
    old = x + rng.normal(size=x.shape)
    new = x + 0.5 * rng.normal(size=x.shape)
    by_old = np.argsort(-old, axis=1)
    rank = np.empty_like(by_old)
    np.put_along_axis(rank, by_old, np.arange(candidates)[None, :].repeat(n_rounds, axis=0), axis=1)
    picks = np.argsort(rng.random((n_rounds, explore)), axis=1)[:, :shown]  # an ordered draw from the top
    slate = np.take_along_axis(by_old[:, :explore], picks, axis=1)  # candidate at each position
    position = np.full(x.shape, np.nan)
    rows = np.arange(n_rounds)[:, None]
    position[rows, slate] = np.arange(1, shown + 1)[None, :]
    seen = ~np.isnan(position)
    click = seen & (rng.random(x.shape) < attract / np.where(seen, position, 1.0))
    prefix = np.cumprod(1.0 / (explore - np.arange(shown)))  # P(the items at 1..j)
    j = np.where(seen, position, 1).astype(int) - 1
    return pd.DataFrame({
        "round": np.repeat(np.arange(n_rounds), candidates),
        "item": np.arange(n),
        "position": position.ravel(),
        "click": click.ravel().astype(np.int8),
        "pscore": np.where(seen, 1.0 / explore, np.nan).ravel(),
        "pscore_cascade": np.where(seen, prefix[j], np.nan).ravel(),
        "pscore_slate": np.where(seen, prefix[-1], np.nan).ravel(),
        "old_rank": (rank + 1).ravel(),
        "old": old.ravel(),
        "new": new.ravel(),
        "attractiveness": attract.ravel(),
    })
