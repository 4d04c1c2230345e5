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
* ``mle`` (the maximum-likelihood rank distribution, as Jin et al. 2021 and Krichene & Rendle's
  adaptive estimators): the distribution of the relative position ``t = b / N``, a mixture of one
  to three beta distributions (their number by BIC), fitted to the items' ``j`` (then beta-binomial);
  each item's posterior of t given j, mapped to ``b = round(t N)``, gives ``w[j, b]``. A beta
  density goes as ``t^(a - 1)`` near 0, the power law of ranks near the top of a list: the fit at
  the sample's resolution, 1 / m, extrapolates to the catalogue's, 1 / N. Each shape ``a`` is at
  most :data:`SHAPE_MAX` (2): the draws cannot tell a spike below 1 / m from a spread, and a free
  fit can become one (a = 1310, b = 277536 on 300 items ranked 2 to 22 of 3,000: every rank on one
  side of a cutoff, a hit rate of exactly 0 for a true 0.39). (The nonparametric maximum
  likelihood, Jin et al.'s EM over every rank, puts its mass on a few atoms below 1 / m: unstable
  there, and slow to converge.)

Below 1 / m the sample says nothing: every correction fills that gap with an assumption (a point,
a uniform prior, a power law), and its bias depends on how well the ranks follow it. On MovieLens
100k (benchmarks/sampled_bench.py; docs/how-to/sampled.md) BV stayed within 15% of every model's
full HR@10 and NDCG@10 in the leave-one-out split and ordered the models right in 98% of seeds; the
MLE, within 16% there but more variable (85%), was the closer with 20 held-out items per user
(NDCG@10 within 19%, BV 24 to 31% low). Ranks built against the MLE's power law (a flat density
near the top, a log-normal) move it by half.

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
#: against the squared bias
BV_GAMMA = 0.1

#: catalogues of fewer than this many negatives per draw get the exact sums over b of the BV system;
#: larger ones their Euler-Maclaurin expansion (relative error below 1e-9 from here on: tests/test_sampled.py)
EXACT_SUMS = 4



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
    """``w[j, b]``: 1 where ``b == round(j N / m)`` (halves rounded to even), for b < depth.

    Examples
    --------
    >>> rescaled_weights(1000, 100, 25)[:3].nonzero()  # j = 0, 1, 2: b = 0, 10, 20
    (array([0, 1, 2]), array([ 0, 10, 20]))
    """
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
    """``w[j, b]`` of Krichene & Rendle's bias-variance correction (see the module docstring): the
    estimate of ``phi(b)`` from j is ``sum_b w[j, b] phi(b)``.

    Examples
    --------
    The hit rate at 10 of an item among 1,000 negatives (``phi(b) = 1[b < 10]``) from j, its draws
    above it of 100: an item's value need not lie in [0, 1], only its mean over items estimates the
    metric.

    >>> w = bv_weights(1000, 100, 10)
    >>> [round(float(w[j].sum()), 2) for j in range(4)]
    [1.1, 0.17, -0.23, -0.15]
    """
    if not 0.0 < gamma <= 1.0:
        raise ValueError(f"gamma must lie in (0, 1]; got {gamma}")
    return _bv_cached(int(N), int(m), int(depth), float(gamma))


#: the most beta components of the rank distribution's mixture: the number is chosen by BIC
COMPONENTS = 3


class RankDistribution:
    """The maximum-likelihood distribution of the relative positions ``t = b / N`` of held-out items,
    in a mixture of beta distributions, fitted to their sampled counts ``j`` (m draws each): then
    ``j`` is beta-binomial, ``P(j) = sum_c w_c C(m, j) B(j + a_c, m - j + b_c) / B(a_c, b_c)``, and the
    posterior of t given j is the mixture of ``Beta(a_c + j, b_c + m - j)`` weighted by
    ``w_c P_c(j) / P(j)``. A beta density goes as ``t^(a - 1)`` near 0, the power law of ranks near the
    top of a list, so the fit at the sample's resolution (1 / m) extrapolates below it (1 / N); each
    ``a`` is at most :data:`SHAPE_MAX` (no spike below the sample's resolution).

    The number of components, 1 to ``components``, is the one of the smallest BIC,
    ``-2 log L + (3 C - 1) log n`` (n the items).

    Parameters
    ----------
    counts : array of int
        ``j`` of each held-out item (0..m).
    m : int
        Draws per item.
    components : int
        The most beta components of the mixture.
    """

    def __init__(self, counts: np.ndarray, m: int, components: int = COMPONENTS):
        self.m = int(m)
        n = np.bincount(np.asarray(counts, dtype=np.int64), minlength=self.m + 1).astype(np.float64)
        self.n = n
        fits = [_fit_mixture(n, self.m, c) for c in range(1, max(1, components) + 1)]
        bic = [-2 * fit[3] + (3 * c - 1) * math.log(max(n.sum(), 1.0)) for c, fit in enumerate(fits, 1)]
        self.a, self.b, self.w, self.loglik = fits[int(np.argmin(bic))]

    def log_marginal(self, j: np.ndarray) -> np.ndarray:
        """``log w_c + log P_c(j)`` per item and component."""
        return np.log(self.w)[None, :] + _beta_binomial_log(np.asarray(j)[:, None], self.m, self.a[None, :],
                                                             self.b[None, :])

    def posterior_cdf(self, j: np.ndarray, x: np.ndarray) -> np.ndarray:
        """``P(t <= x | j)`` for each item's j and each of its points ``x`` (shape (items, points))."""
        lw = self.log_marginal(j)
        resp = np.exp(lw - special.logsumexp(lw, axis=1, keepdims=True))  # (items, C)
        j = np.asarray(j, dtype=np.float64)[:, None, None]
        cdf = special.betainc(self.a[None, None, :] + j, self.b[None, None, :] + self.m - j,
                              np.clip(x, 0.0, 1.0)[:, :, None])
        return np.einsum("ipc,ic->ip", cdf, resp)

    def weights(self, j: np.ndarray, N: np.ndarray, depth: int) -> np.ndarray:
        """``w[p, b]``: the posterior mass of ``round(t N) == b`` given j, for b < depth (per item)."""
        N = np.asarray(N, dtype=np.float64)[:, None]
        edges = (np.arange(depth + 1)[None, :] - 0.5) / N
        cdf = self.posterior_cdf(j, edges)
        return np.diff(cdf, axis=1)


def _beta_binomial_log(j, m: int, a, b):
    return (special.gammaln(m + 1) - special.gammaln(j + 1) - special.gammaln(m - j + 1)
            + special.betaln(j + a, m - j + b) - special.betaln(a, b))


#: the largest |logit (a / SHAPE_MAX)|, |log b| and weight logit of the fit
LIMIT = 30.0
#: the largest shape a of a component (its density goes as t^(a - 1) near the top of the list)
SHAPE_MAX = 2.0


def _fit_mixture(n: np.ndarray, m: int, components: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, float]:
    """The beta mixture maximising ``sum_j n_j log P(j)`` (BFGS on logit a, log b and the weights'
    logits, with the analytic gradient), from a fixed set of starting points: deterministic."""
    from scipy import optimize

    j = np.arange(m + 1, dtype=np.float64)[:, None]
    total = n.sum()
    freq = n / total
    C = components

    choose = _log_choose(m)[:, None]
    jj = j
    rest = m - j

    def lse(x, axis):  # numpy's own: scipy's logsumexp costs more than the rest of the objective here
        top = x.max(axis=axis, keepdims=True)
        return (top + np.log(np.exp(x - top).sum(axis=axis, keepdims=True))).squeeze(axis)

    def objective(theta):
        theta = np.clip(theta, -LIMIT, LIMIT)  # beyond, a or b is 0 or infinite for every purpose here
        xa, lb, logits = theta[:C], theta[C:2 * C], np.concatenate([theta[2 * C:], [0.0]])
        a, b = SHAPE_MAX * special.expit(xa)[None, :], np.exp(lb)[None, :]  # a = SHAPE_MAX / (1 + e^-x)
        lw = logits - lse(logits, 0)
        # log P_c(j) = log C(m, j) + log B(j + a, m - j + b) - log B(a, b)
        comp = (choose + special.gammaln(jj + a) + special.gammaln(rest + b) - special.gammaln(m + a + b)
                - special.gammaln(a) - special.gammaln(b) + special.gammaln(a + b))
        joint = lw[None, :] + comp
        ll = lse(joint, 1)
        resp = np.exp(joint - ll[:, None]) * freq[:, None]  # n_j rho_jc / total
        ab = special.digamma(a + b) - special.digamma(m + a + b)
        da = (special.digamma(jj + a) - special.digamma(a) + ab) * a * (1.0 - a / SHAPE_MAX)  # d/dx of a
        db = (special.digamma(rest + b) - special.digamma(b) + ab) * b
        w = np.exp(lw)
        grad = np.concatenate([(resp * da).sum(0), (resp * db).sum(0), (resp.sum(0) - w)[:-1]])
        return -float(freq @ ll), -grad

    starts = _starts(C, m)
    best = optimize.minimize(objective, starts[0], jac=True, method="BFGS")  # no BLAS call: no thread wake-ups
    for start in starts[1:]:
        found = optimize.minimize(objective, start, jac=True, method="BFGS")
        if found.fun < best.fun - 1e-12:
            best = found
    theta = np.clip(best.x, -LIMIT, LIMIT)
    logits = np.concatenate([theta[2 * C:], [0.0]])
    return (SHAPE_MAX * special.expit(theta[:C]), np.exp(theta[C:2 * C]), np.exp(logits - special.logsumexp(logits)),
            -best.fun * total)


def _starts(C: int, m: int) -> list[np.ndarray]:
    """Starting points: components from near the top of the list to spread over it (one beta: one
    start, its likelihood having one maximum in every case tried)."""
    shapes = [(0.3, 30.0), (0.9, 3.0), (0.2, 200.0)]
    out = []
    for shift in range(len(shapes) if C > 1 else 1):
        chosen = [shapes[(shift + c) % len(shapes)] for c in range(C)]
        a = special.logit(np.array([s[0] for s in chosen]) / SHAPE_MAX)
        b = np.log([s[1] for s in chosen])
        out.append(np.concatenate([a, b, np.zeros(C - 1)]))
    return out
