"""Full-catalogue ranks estimated from sampled ranks: the corrections of sampled metrics.

A held-out item of a user has ``b`` negatives above it in the user's whole catalogue of ``N``
negatives (``b`` in ``0..N``: its full rank among them is ``b + 1``). A sampled protocol draws
``m`` negatives uniformly, with replacement, from those ``N``; ``j``, the draws scoring above the
item, is then binomial: ``P(j | b) = C(m, j) p^j (1 - p)^(m - j)`` with ``p = b / N``, exactly.
A metric's term for the item is a function ``phi(b)`` of the full rank, zero from some depth on
(``b >= k`` for a cutoff k). Each estimator here turns the observed ``j`` into weights ``w[j, b]``
over the ranks ``b < depth``, and estimates ``phi(b)`` by ``sum_b w[j, b] phi(b)``:

* ``rescaled``: the sampled count scaled to the catalogue, ``b_hat = round(j N / m)`` (unbiased
  for b before the rounding), and ``phi(b_hat)``: ``w[j, b] = 1`` where ``b == b_hat``;
* ``bv`` (Krichene & Rendle 2020, the bias-variance correction): the vector ``x`` of values over
  ``j`` minimising ``sum_b [(E[x_j | b] - phi(b))^2 + gamma Var(x_j | b)] / (N + 1)``, a uniform
  prior over ``b``: ``x = ((1 - gamma) A'A + gamma diag(c))^-1 A' phi / (N + 1)`` with
  ``A[b, j] = P(j | b)`` and ``c_j = sum_b A[b, j] / (N + 1)`` (gamma = 0: least bias; gamma = 1:
  the posterior mean under the uniform prior);
* ``mle`` (the maximum-likelihood rank distribution, Jin et al. 2021, as Krichene & Rendle's
  adaptive estimator): the distribution ``pi`` of the relative position ``t = b / N`` over a grid,
  fitted to every held-out item's ``j`` by EM (the nonparametric maximum-likelihood estimate of a
  binomial mixture), then each item's posterior ``P(t | j) ~ pi(t) P(j | t)`` mapped to
  ``b = round(t N)``: ``w[j, b]`` is its posterior mass. The mean of these posterior means is the
  plug-in ``sum_t pi(t) phi(t N)``.

References: W. Krichene and S. Rendle, On Sampled Metrics for Item Recommendation, KDD 2020;
R. Jin, D. Li, B. Mudrak, J. Gao, Z. Liu, On Estimating Recommendation Evaluation Metrics under
Sampling, AAAI 2021.
"""

from __future__ import annotations

import functools
import math

import numpy as np
from scipy import linalg, special

#: gamma of the bias-variance correction (Krichene & Rendle's BV): the weight of the variance
#: against the squared bias; chosen by the validation in benchmarks/bench_sampled.py
BV_GAMMA = 0.1

#: catalogues of fewer than this many negatives per draw get the exact sums over b of the BV system;
#: larger ones their Euler-Maclaurin expansion (relative error below 1e-9 from here on: tests/test_sampled.py)
EXACT_SUMS = 4

#: the relative positions of the MLE grid: every b / N_max up to this many ranks, then as many
#: points spaced geometrically up to 1
GRID_FINE = 4096

#: EM of the MLE: at most this many iterations (SQUAREM-accelerated), stopped when the
#: log-likelihood per item changes by less than TOLERANCE
MAX_ITERATIONS = 5000
TOLERANCE = 1e-12


def _log_choose(m: int) -> np.ndarray:
    j = np.arange(m + 1)
    return special.gammaln(m + 1) - special.gammaln(j + 1) - special.gammaln(m - j + 1)


def binomial_pmf(m: int, p: np.ndarray) -> np.ndarray:
    """``P(j | p)`` for j = 0..m, one row per p (exact at p = 0 and 1)."""
    p = np.asarray(p, dtype=np.float64)
    return np.exp(_binomial_log(m, p))


def _binomial_log(m: int, p: np.ndarray) -> np.ndarray:
    j = np.arange(m + 1, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):  # 0 * log(0) is taken as 0 below
        lp, lq = np.log(p)[:, None], np.log1p(-p)[:, None]
        # no draw above when p = 0, every draw above when p = 1
        a = np.where(j[None, :] == 0, 0.0, j[None, :] * lp)
        b = np.where(j[None, :] == m, 0.0, (m - j[None, :]) * lq)
    return _log_choose(m)[None, :] + a + b


def rescaled_weights(N: int, m: int, depth: int) -> np.ndarray:
    """``w[j, b]``: 1 where ``b == round(j N / m)`` (halves rounded to even), for b < depth."""
    w = np.zeros((m + 1, depth))
    b = np.rint(np.arange(m + 1) * (N / m)).astype(np.int64)
    inside = b < depth
    w[np.flatnonzero(inside), b[inside]] = 1.0
    return w


def _power_sums(N: int, n: int) -> np.ndarray:
    """``log sum_{b=0..N} p^s (1 - p)^(n - s)`` with ``p = b / N``, for s = 0..n."""
    s = np.arange(n + 1, dtype=np.float64)
    if N < EXACT_SUMS * n:
        # each term below its largest value over p in [0, 1] (at p = s / n): no overflow, and the
        # b nearest s N / n keeps the sum away from underflow
        with np.errstate(divide="ignore", invalid="ignore"):  # 0 * log(0) is taken as 0
            q = s / n
            peak = np.where(s == 0, 0.0, s * np.log(q)) + np.where(s == n, 0.0, (n - s) * np.log1p(-q))
        total = np.zeros(n + 1)
        for start in range(0, N + 1, 4096):  # chunks of b: bounded memory
            p = np.arange(start, min(N, start + 4095) + 1) / N
            with np.errstate(divide="ignore", invalid="ignore"):
                lp, lq = np.log(p)[:, None], np.log1p(-p)[:, None]
                terms = np.where(s == 0, 0.0, s * lp) + np.where(s == n, 0.0, (n - s) * lq)
            total += np.exp(terms - peak).sum(axis=0)
        return np.log(total) + peak
    # Euler-Maclaurin: sum_b f(b/N) = N int_0^1 f + (f(0) + f(1)) / 2
    #   + sum_k B_2k / (2k)! N^(1-2k) (f^(2k-1)(1) - f^(2k-1)(0)) + ...
    # with f = t^s (1 - t)^(n - s), whose integral is the beta function B(s + 1, n - s + 1) and whose
    # derivatives at 0 and 1 are those of a polynomial: f^(r)(0) = r! C(n - s, r - s) (-1)^(r - s)
    out = special.betaln(s + 1, n - s + 1) + math.log(N)
    edge = np.zeros(n + 1)
    edge[0] += 0.5
    edge[n] += 0.5
    for order, bernoulli in ((1, 1 / 6), (3, -1 / 30), (5, 1 / 42)):
        scale = bernoulli / math.factorial(order + 1) * N ** -order * math.factorial(order)
        for low in range(0, min(order, n) + 1):  # f^(order)(0) != 0 for s <= order
            edge[low] -= scale * math.comb(n - low, order - low) * (-1) ** (order - low)
            # f^(order)(1) = (-1)^order g^(order)(0), g(u) = u^(n - s) (1 - u)^s: s >= n - order
            edge[n - low] += scale * (-1) ** order * math.comb(n - low, order - low) * (-1) ** (order - low)
    ends = np.flatnonzero(edge)  # s near 0 or n, where the integral is of order N / n
    out[ends] = out[ends] + np.log1p(edge[ends] * np.exp(-out[ends]))
    return out


@functools.lru_cache(maxsize=4096)
def _bv_cached(N: int, m: int, depth: int, gamma: float) -> np.ndarray:
    log_c = _log_choose(m)
    pairs = _power_sums(N, 2 * m)  # sum_b P(j|b) P(l|b) = C(m,j) C(m,l) S[j + l]
    idx = np.add.outer(np.arange(m + 1), np.arange(m + 1))
    gram = np.exp(log_c[:, None] + log_c[None, :] + pairs[idx] - math.log(N + 1))
    singles = np.exp(log_c + _power_sums(N, m)[np.arange(m + 1)] - math.log(N + 1))  # c_j
    top = binomial_pmf(m, np.arange(min(depth, N + 1)) / N)  # A[b, j] for b < depth
    rhs = np.zeros((m + 1, depth))
    rhs[:, :len(top)] = top.T / (N + 1)
    system = (1.0 - gamma) * gram + gamma * np.diag(singles)
    w = linalg.solve(system, rhs, assume_a="pos")
    w.setflags(write=False)
    return w


def bv_weights(N: int, m: int, depth: int, gamma: float = BV_GAMMA) -> np.ndarray:
    """``w[j, b]`` of Krichene & Rendle's bias-variance correction (see the module docstring)."""
    if not 0.0 < gamma <= 1.0:
        raise ValueError(f"gamma must lie in (0, 1]; got {gamma}")
    return _bv_cached(int(N), int(m), int(depth), float(gamma))


def grid(N_max: int) -> np.ndarray:
    """The relative positions t of the MLE: ``b / N_max`` for every b up to :data:`GRID_FINE`,
    then geometrically spaced up to 1."""
    if N_max <= 2 * GRID_FINE:
        return np.arange(N_max + 1) / N_max
    fine = np.arange(GRID_FINE + 1) / N_max
    return np.concatenate([fine, np.geomspace(fine[-1], 1.0, GRID_FINE + 1)[1:]])


class RankDistribution:
    """The maximum-likelihood distribution of relative positions ``t = b / N`` of held-out items,
    fitted to their sampled counts ``j`` (m draws each): a mixture of binomials, by EM.

    Parameters
    ----------
    counts : array of int
        ``j`` of each held-out item (0..m).
    m : int
        Draws per item.
    N_max : int
        The most negatives any item's user has (the grid's resolution near the top is 1 / N_max).
    """

    def __init__(self, counts: np.ndarray, m: int, N_max: int):
        self.m = int(m)
        self.t = grid(int(N_max))
        self.like = binomial_pmf(self.m, self.t).T  # (m + 1, G): P(j | t)
        n = np.bincount(np.asarray(counts, dtype=np.int64), minlength=self.m + 1).astype(np.float64)
        self.n = n
        self.pi, self.iterations = _em(self.like, n)
        evidence = self.like @ self.pi  # P(j) under the fit
        with np.errstate(divide="ignore", invalid="ignore"):
            self.posterior = np.where(evidence[:, None] > 0, self.like * self.pi[None, :] / evidence[:, None], 0.0)
        self.cumulative = np.concatenate([np.zeros((self.m + 1, 1)), np.cumsum(self.posterior, axis=1)], axis=1)

    def weights(self, N: int, depth: int) -> np.ndarray:
        """``w[j, b]``: the posterior mass of ``round(t N) == b`` given j, for b < depth."""
        edges = (np.arange(depth + 1) - 0.5) / N
        at = np.searchsorted(self.t, edges, side="left")
        return self.cumulative[:, at[1:]] - self.cumulative[:, at[:-1]]


def _em(like: np.ndarray, n: np.ndarray) -> tuple[np.ndarray, int]:
    """The mixing weights over the grid maximising ``sum_j n_j log sum_g like[j, g] pi_g``: EM with
    SQUAREM steps (Varadhan & Roland 2008), each kept only if it does not lower the likelihood."""
    total = n.sum()
    used = n > 0
    L, w = like[used], n[used] / total
    pi = np.full(like.shape[1], 1.0 / like.shape[1])

    def step(p):
        return p * (L.T @ (w / (L @ p)))

    def loglik(p):
        return float(w @ np.log(L @ p))

    current = loglik(pi)
    for it in range(1, MAX_ITERATIONS + 1):
        p1 = step(pi)
        p2 = step(p1)
        r, v = p1 - pi, p2 - 2 * p1 + pi
        norm_v = float(np.sqrt(v @ v))
        candidate = p2
        if norm_v > 0:
            alpha = -float(np.sqrt(r @ r)) / norm_v
            if alpha < -1.0:
                jump = np.clip(pi - 2 * alpha * r + alpha * alpha * v, 0.0, None)
                if jump.sum() > 0:
                    jump = step(jump / jump.sum())
                    if loglik(jump) >= loglik(p2):
                        candidate = jump
        new = loglik(candidate)
        pi = candidate
        if abs(new - current) < TOLERANCE:
            return pi, it
        current = new
    return pi, MAX_ITERATIONS
