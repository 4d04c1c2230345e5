"""Off-policy estimates (topkeval.off_policy): Open Bandit Pipeline's formulas, brute-force policies,
bad input, invariances, and a simulation with known truth (slow).

The formulas of Open Bandit Pipeline (OBP, st-tech/zr-obp) are transcribed below into plain numpy,
function by function, from its source:

* ``obp/ope/estimators_slate.py``: ``BaseSlateInverseProbabilityWeighting._estimate_round_rewards``
  (``reward * evaluation_policy_pscore / behavior_policy_pscore``) with ``SlateStandardIPS``,
  ``SlateIndependentIPS`` and ``SlateRewardInteractionIPS.estimate_policy_value`` (the sum over every
  row divided by the number of slates); ``BaseSlateSelfNormalizedInverseProbabilityWeighting.
  _estimate_round_rewards`` (per position: ``reward * iw / iw[position == p].mean()``) and
  ``SelfNormalizedSlateStandardIPS._estimate_round_rewards`` (``reward * iw / iw.mean()`` over every
  row), as of OBP 0.5.5;
* ``obp/ope/estimators.py``: ``DoublyRobust._estimate_round_rewards`` (``np.average(q_hat_at_position,
  weights=pi_e_at_position, axis=1) + iw * (reward - q_hat_factual)``, then the mean), as of 0.4.1.

When OBP itself imports (0.4.1 installs with ``pip install --no-deps obp==0.4.1``), its own classes
are run on the same arrays too (``test_obp_itself_agrees``); otherwise that test is skipped.
"""

from __future__ import annotations

import itertools
import math
import pickle
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import topkeval as tk

pytestmark = pytest.mark.filterwarnings("ignore::topkeval.TopkevalWarning")


# ---------------------------------------------------------------------------------------------
# Open Bandit Pipeline's formulas, transcribed (see the module docstring)


def obp_slate_ips(slate_id, reward, behavior_pscore, evaluation_pscore):
    """SlateStandardIPS / SlateIndependentIPS / SlateRewardInteractionIPS.estimate_policy_value."""
    iw = evaluation_pscore / behavior_pscore
    return (reward * iw).sum() / np.unique(slate_id).shape[0]


def obp_slate_snips_by_position(slate_id, reward, position, behavior_pscore, evaluation_pscore, len_list):
    """SelfNormalizedSlateIndependentIPS / SelfNormalizedSlateRewardInteractionIPS (0.5.5): each
    position's weights divided by their mean."""
    estimated = np.zeros_like(behavior_pscore)
    iw = np.zeros_like(behavior_pscore)
    for pos_ in range(len_list):
        idx = position == pos_
        iw[idx] = evaluation_pscore[idx] / behavior_pscore[idx]
        estimated[idx] = reward[idx] * iw[idx] / iw[idx].mean()
    return estimated.sum() / np.unique(slate_id).shape[0]


def obp_slate_snsips(slate_id, reward, behavior_pscore, evaluation_pscore):
    """SelfNormalizedSlateStandardIPS (0.5.5): the weights divided by their mean over every row."""
    iw = evaluation_pscore / behavior_pscore
    return (reward * iw / iw.mean()).sum() / np.unique(slate_id).shape[0]


def obp_dr(reward, action, position, pscore, action_dist, q_hat):
    """DoublyRobust.estimate_policy_value: one row per (round, position) impression."""
    n = action.shape[0]
    iw = action_dist[np.arange(n), action, position] / pscore
    q_at_position = q_hat[np.arange(n), :, position]
    q_factual = q_hat[np.arange(n), action, position]
    pi_at_position = action_dist[np.arange(n), :, position]
    estimated = np.average(q_at_position, weights=pi_at_position, axis=1)
    estimated += iw * (reward - q_factual)
    return estimated.mean()


# ---------------------------------------------------------------------------------------------
# random logs of a Plackett-Luce logger, every probability by brute force


def brute_marginals(w: np.ndarray, depth: int) -> np.ndarray:
    """P(candidate a at position j) of Plackett-Luce with weights w (rounds, n), by every ordered prefix."""
    rounds, n = w.shape
    out = np.zeros((rounds, n, depth))
    for prefix in itertools.permutations(range(n), depth):
        prob = np.ones(rounds)
        for j, a in enumerate(prefix):
            rest = w[:, [b for b in range(n) if b not in prefix[:j]]].sum(axis=1)  # what is left, summed
            prob = prob * w[:, a] / rest
        for j, a in enumerate(prefix):
            out[:, a, j] += prob
    return out


def prefix_probability(w: np.ndarray, shown: np.ndarray) -> np.ndarray:
    """P(the logged items at 1..j) per round and j: (rounds, L)."""
    rounds, L = shown.shape
    out = np.ones((rounds, L))
    rest = w.sum(axis=1)
    prob = np.ones(rounds)
    for j in range(L):
        a = shown[:, j]
        prob = prob * w[np.arange(rounds), a] / rest
        rest = rest - w[np.arange(rounds), a]
        out[:, j] = prob
    return out


def random_log(seed: int, rounds: int = 300, n: int = 5, L: int = 3, items: int = 8, unshown: bool = True):
    """A Plackett-Luce logger over n candidates per round (drawn from ``items`` items) showing L; clicks
    by item and position. Returns the log (a DataFrame), the logger's weights and the shown items."""
    rng = np.random.default_rng(seed)
    cand = np.stack([rng.choice(items, n, replace=False) for _ in range(rounds)])
    logger_score = rng.normal(size=(rounds, n))
    w = np.exp(logger_score)
    keys = logger_score + rng.gumbel(size=(rounds, n))
    ranking = np.argsort(-keys, axis=1)[:, :L]  # candidate index at each position
    marg = brute_marginals(w, L)
    pref = prefix_probability(w, ranking)
    attract = rng.uniform(0.05, 0.6, size=items)
    exam = 1.0 / np.arange(1, L + 1)
    rows = []
    new_score = rng.normal(size=(rounds, n))
    for i in range(rounds):
        pos_of = {int(ranking[i, j]): j for j in range(L)}
        for c in range(n):
            if c in pos_of:
                j = pos_of[c]
                click = float(rng.random() < attract[cand[i, c]] * exam[j])
                rows.append((i, int(cand[i, c]), j + 1, click, marg[i, c, j], pref[i, j], pref[i, L - 1],
                             new_score[i, c], logger_score[i, c]))
            elif unshown:
                rows.append((i, int(cand[i, c]), np.nan, 0.0, np.nan, np.nan, np.nan, new_score[i, c],
                             logger_score[i, c]))
    log = pd.DataFrame(rows, columns=["round", "item", "position", "click", "p_item", "p_cascade", "p_slate",
                                      "new", "old"])
    return log


PSCORES = {"item_position": "p_item", "cascade": "p_cascade", "slate": "p_slate"}


def _flat(log: pd.DataFrame):
    shown = log.dropna(subset=["position"]).sort_values(["round", "position"])
    return shown.reset_index(drop=True)


def deterministic_policy(log: pd.DataFrame, L: int):
    """Per round, the new ranker's item at each position 1..L (no ties in random normal scores)."""
    top = (log.sort_values(["round", "new"], ascending=[True, False]).groupby("round").head(L)
           .assign(rank=lambda f: f.groupby("round").cumcount() + 1))
    return {(r, int(k)): int(i) for r, i, k in zip(top["round"], top["item"], top["rank"])}


def test_iips_rips_sips_equal_obp_formulas_for_a_ranker():
    L = 3
    for seed in range(3):
        log = random_log(seed, unshown=seed != 1)
        flat = _flat(log)
        top = deterministic_policy(log, L)
        match = np.array([top.get((r, int(p))) == i for r, p, i in zip(flat["round"], flat["position"], flat["item"])],
                         float)
        # pi_e of the prefix and of the slate: every position above matched too
        prefix = flat.assign(m=match).groupby("round")["m"].cumprod().to_numpy()
        slate = flat.assign(m=match).groupby("round")["m"].transform("prod").to_numpy()
        sid, r, pos = flat["round"].to_numpy(), flat["click"].to_numpy(), flat["position"].to_numpy() - 1
        expected = {
            "iips": obp_slate_ips(sid, r, flat["p_item"].to_numpy(), match),
            "rips": obp_slate_ips(sid, r, flat["p_cascade"].to_numpy(), prefix),
            "sips": obp_slate_ips(sid, r, flat["p_slate"].to_numpy(), slate),
            "sniips": obp_slate_snips_by_position(sid, r, pos, flat["p_item"].to_numpy(), match, L),
            "snrips": obp_slate_snips_by_position(sid, r, pos, flat["p_cascade"].to_numpy(), prefix, L),
            "snsips": obp_slate_snsips(sid, r, flat["p_slate"].to_numpy(), slate),
        }
        res = tk.off_policy(log, [f"tp@{L}"], policy="new", query="round", pscore=PSCORES,
                            estimator=list(expected), refuse=False)
        for name, value in expected.items():
            assert res.summary.loc[f"new ({name})", f"tp@{L}"] == pytest.approx(value, rel=1e-12, abs=1e-15), name


def test_estimators_equal_obp_formulas_for_a_plackett_luce_policy():
    L, T = 3, 0.7
    log = random_log(7, rounds=200)
    flat = _flat(log)
    # the new policy's probabilities, by brute force over every ordered prefix of each round's candidates
    by_round = {r: g for r, g in log.groupby("round")}
    w_new = np.stack([np.exp(by_round[r]["new"].to_numpy() / T) for r in sorted(by_round)])
    cands = np.stack([by_round[r]["item"].to_numpy() for r in sorted(by_round)])
    marg = brute_marginals(w_new, L)
    where = {(r, int(i)): c for r in sorted(by_round) for c, i in enumerate(cands[r])}
    e_item = np.array([marg[r, where[(r, int(i))], int(p) - 1] for r, i, p in zip(flat["round"], flat["item"],
                                                                                  flat["position"])])
    shown_idx = np.array([[where[(r, int(i))] for i in g.sort_values("position")["item"]]
                          for r, g in flat.groupby("round")])
    pref = prefix_probability(w_new, shown_idx)
    e_cascade = pref[flat["round"].to_numpy(), flat["position"].to_numpy().astype(int) - 1]
    e_slate = pref[flat["round"].to_numpy(), L - 1]
    sid, r, pos = flat["round"].to_numpy(), flat["click"].to_numpy(), flat["position"].to_numpy() - 1
    expected = {
        "iips": obp_slate_ips(sid, r, flat["p_item"].to_numpy(), e_item),
        "rips": obp_slate_ips(sid, r, flat["p_cascade"].to_numpy(), e_cascade),
        "sips": obp_slate_ips(sid, r, flat["p_slate"].to_numpy(), e_slate),
        "sniips": obp_slate_snips_by_position(sid, r, pos, flat["p_item"].to_numpy(), e_item, L),
        "snrips": obp_slate_snips_by_position(sid, r, pos, flat["p_cascade"].to_numpy(), e_cascade, L),
        "snsips": obp_slate_snsips(sid, r, flat["p_slate"].to_numpy(), e_slate),
    }
    res = tk.off_policy(log, [f"tp@{L}"], policy={"pl": tk.PlackettLuce("new", temperature=T)}, query="round",
                        pscore=PSCORES, estimator=list(expected), refuse=False)
    for name, value in expected.items():
        assert res.summary.loc[f"pl ({name})", f"tp@{L}"] == pytest.approx(value, rel=1e-12, abs=1e-15), name


def reference_rates(flat: pd.DataFrame, n_rounds: int, seed: int, K: int):
    """The doubly robust estimator's click rates as docs/conventions.md defines them, by pandas:
    folds ``default_rng(seed).permutation(n) % 2`` over the rounds (in order of first appearance),
    ``q_f(a, j) = (C + mu_j) / (S + 1)`` counted outside fold f, mu_j the position's click rate there."""
    fold = np.random.default_rng(seed).permutation(n_rounds) % 2
    flat = flat.assign(fold=fold[flat["round"].to_numpy()], j=flat["position"].astype(int) - 1)
    flat = flat[flat["j"] < K]
    q = {}
    for f in (0, 1):
        other = flat[flat["fold"] != f]
        mu = other.groupby("j")["click"].mean()
        counts = other.groupby(["item", "j"])["click"].agg(["sum", "count"])
        q[f] = (counts, mu)

    def rate(f, a, j):
        counts, mu = q[f]
        m = mu.get(j, 0.0)
        if (a, j) in counts.index:
            c, s = counts.loc[(a, j)]
            return (c + m) / (s + 1.0)
        return m

    return fold, rate


def test_dr_equals_obp_formula_with_the_documented_reward_model():
    L = 3
    for seed, policy in ((3, "ranker"), (4, "table")):
        log = random_log(seed, rounds=250, items=10)
        flat = _flat(log)
        n_rounds = log["round"].nunique()
        fold, rate = reference_rates(flat, n_rounds, seed=5, K=L)
        n_items = 10
        if policy == "ranker":
            top = deterministic_policy(log, L)
            dist = np.zeros((n_rounds, n_items, L))
            for (rr, k), it in top.items():
                dist[rr, it, k - 1] = 1.0
            spec = "new"
        else:  # a context-free stochastic table: item a at position j with probability t[a, j]
            rng = np.random.default_rng(seed)
            t = rng.dirichlet(np.ones(n_items), size=L).T  # each position sums to 1 over the items
            t = t / t.sum(axis=1, keepdims=True).clip(1, None)  # and each item to at most 1
            t[:, :] = t / np.maximum(t.sum(axis=0, keepdims=True), 1)
            dist = np.broadcast_to(t, (n_rounds, n_items, L)).copy()
            spec = {"t": pd.DataFrame([(a, j + 1, t[a, j]) for a in range(n_items) for j in range(L)],
                                      columns=["item", "position", "probability"])}
            # OBP's np.average divides by the sum of the weights: the same when each position sums to 1
            assert np.allclose(t.sum(axis=0), 1.0)
        q_hat = np.array([[[rate(fold[rr], a, j) for j in range(L)] for a in range(n_items)] for rr in range(n_rounds)])
        value = 0.0
        for j in range(L):
            rows = flat[flat["position"] == j + 1]
            value += obp_dr(rows["click"].to_numpy(), rows["item"].to_numpy().astype(int), np.full(len(rows), j),
                            rows["p_item"].to_numpy(), dist[rows["round"].to_numpy()], q_hat[rows["round"].to_numpy()])
        res = tk.off_policy(log, [f"tp@{L}"], policy=spec, query="round", pscore="p_item", estimator="dr", seed=5,
                            refuse=False)
        assert res.summary.iloc[1, 0] == pytest.approx(value, rel=1e-12, abs=1e-15), policy


def test_obp_itself_agrees():
    obp_ope = pytest.importorskip("obp.ope", reason="Open Bandit Pipeline is not installed (pip install --no-deps "
                                                    "obp==0.4.1): its formulas are checked by the transcription above")
    L = 3
    log = random_log(11, rounds=200)
    flat = _flat(log)
    top = deterministic_policy(log, L)
    match = np.array([top.get((r, int(p))) == i for r, p, i in zip(flat["round"], flat["position"], flat["item"])],
                     float)
    prefix = flat.assign(m=match).groupby("round")["m"].cumprod().to_numpy()
    slate = flat.assign(m=match).groupby("round")["m"].transform("prod").to_numpy()
    sid, r, pos = flat["round"].to_numpy(), flat["click"].to_numpy(), (flat["position"].to_numpy() - 1).astype(int)
    res = tk.off_policy(log, [f"tp@{L}"], policy="new", query="round", pscore=PSCORES,
                        estimator=["iips", "rips", "sips"], refuse=False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        iips = obp_ope.SlateIndependentIPS(len_list=L).estimate_policy_value(
            slate_id=sid, reward=r, position=pos, pscore_item_position=flat["p_item"].to_numpy(),
            evaluation_policy_pscore_item_position=match)
        rips = obp_ope.SlateRewardInteractionIPS(len_list=L).estimate_policy_value(
            slate_id=sid, reward=r, position=pos, pscore_cascade=flat["p_cascade"].to_numpy(),
            evaluation_policy_pscore_cascade=prefix)
    assert res.summary.loc["new (iips)", f"tp@{L}"] == pytest.approx(iips, rel=1e-12)
    assert res.summary.loc["new (rips)", f"tp@{L}"] == pytest.approx(rips, rel=1e-12)
    try:  # its input check runs a pandas groupby that newer pandas may refuse
        sips = obp_ope.SlateStandardIPS(len_list=L).estimate_policy_value(
            slate_id=sid, reward=r, position=pos, pscore=flat["p_slate"].to_numpy(), evaluation_policy_pscore=slate)
    except (TypeError, AttributeError):
        return
    assert res.summary.loc["new (sips)", f"tp@{L}"] == pytest.approx(sips, rel=1e-12)


# ---------------------------------------------------------------------------------------------
# the policies' probabilities, by brute force


def test_plackett_luce_marginals_equal_every_ordered_prefix():
    from topkeval.analysis import plackett_luce as pl

    rng = np.random.default_rng(3)
    sizes = [1, 2, 4, 6, 7, 6]
    scores = rng.normal(size=sum(sizes)) * 2
    offsets = np.concatenate([[0], np.cumsum(sizes)])
    for T in (0.3, 1.0, 5.0):
        got, how = pl.marginals(scores, offsets, T, 4)
        assert how["exact"] == len(sizes)
        for i, n in enumerate(sizes):
            w = np.exp(scores[offsets[i]:offsets[i + 1]] / T)[None, :]
            want = np.zeros((n, 4))
            want[:, :min(n, 4)] = brute_marginals(w, min(n, 4))[0]
            np.testing.assert_allclose(got[offsets[i]:offsets[i + 1]], want, atol=1e-13)
    sampled, how = pl.marginals(scores, offsets, 1.0, 4, samples=40_000, seed=1)
    exact, _ = pl.marginals(scores, offsets, 1.0, 4)
    assert how["sampled"] == len(sizes) and how["samples"] == 40_000
    assert np.abs(sampled - exact).max() < 5 * math.sqrt(0.25 / 40_000)  # within 5 standard errors
    # each sampled marginal within 5 of its own standard errors, which are what info reports (a chance
    # that no draw reaches, below about 1 / samples, has a standard error of 0: 4 / samples allowed)
    errors = how["_standard_errors"]
    assert (np.abs(sampled - exact) <= 5 * errors + 4 / 40_000).all()
    assert how["largest_standard_error"] == pytest.approx(errors.max()) and 0 < errors.max() < 0.01
    np.testing.assert_allclose(sampled[:, 0], exact[:, 0], atol=1e-12)  # position 1 is exact (Rao-Blackwell)


def decimal_marginals(scores, T: float, depth: int) -> np.ndarray:
    """Plackett-Luce marginals by every ordered prefix in 60-digit decimals, each draw's remaining
    weight summed afresh (no weight underflows: exp(40 / 0.001) is a decimal like any other)."""
    import decimal

    ctx = decimal.Context(prec=60, Emax=10**9, Emin=-10**9)
    w = [ctx.exp(ctx.divide(decimal.Decimal(float(x)), decimal.Decimal(T))) for x in scores]
    n = len(w)
    out = [[decimal.Decimal(0)] * depth for _ in range(n)]
    for prefix in itertools.permutations(range(n), min(depth, n)):
        p = decimal.Decimal(1)
        for j, a in enumerate(prefix):
            p = ctx.multiply(p, ctx.divide(w[a], sum((w[b] for b in range(n) if b not in prefix[:j]),
                                                     decimal.Decimal(0))))
        for j, a in enumerate(prefix):
            out[a][j] += p
    return np.array([[float(x) for x in row] for row in out])


@pytest.mark.parametrize("T", [1.0, 0.02, 1e-3])
def test_plackett_luce_holds_every_positions_mass_at_sharp_temperatures(T):
    """exp(s / T) of scores 40..1 at T = 0.02 underflows (exp(-1400)): the marginals and the prefix
    probabilities are taken relative to the largest weight left, so each position's chances still sum
    to 1 and equal the brute force in 60-digit decimals."""
    from topkeval.analysis import plackett_luce as pl

    scores = np.array([40.0, 30.0, 20.0, 12.0, 5.0, 1.0])
    got, how = pl.marginals(scores, np.array([0, 6]), T, 4)
    np.testing.assert_allclose(got, decimal_marginals(scores, T, 4), atol=1e-14)
    np.testing.assert_allclose(got.sum(axis=0), 1.0, rtol=1e-14)
    # the probability of a logged prefix (scores in the order shown), the rest unshown
    shown = np.array([[12.0, 40.0, 5.0]])
    top, total = pl.log_weight_sums(np.array([30.0, 20.0, 1.0]), np.zeros(3, np.int64), 1, T)
    prefix = pl.prefix_probabilities(shown, top, total, T)
    want = decimal_marginals_prefix(np.array([12.0, 40.0, 5.0, 30.0, 20.0, 1.0]), T, 3)
    np.testing.assert_allclose(prefix[0], want, rtol=1e-12, atol=1e-300)


def decimal_marginals_prefix(scores, T: float, depth: int) -> np.ndarray:
    """P(the first ``depth`` candidates of ``scores`` drawn in their order), for each prefix, in decimals."""
    import decimal

    ctx = decimal.Context(prec=60, Emax=10**9, Emin=-10**9)
    w = [ctx.exp(ctx.divide(decimal.Decimal(float(x)), decimal.Decimal(T))) for x in scores]
    p, out = decimal.Decimal(1), []
    for j in range(depth):
        p = ctx.multiply(p, ctx.divide(w[j], sum(w[j:], decimal.Decimal(0))))
        out.append(float(p))
    return np.array(out)


def test_a_sharp_plackett_luce_policy_is_the_ranker_and_huge_scores_stay_finite():
    from topkeval.analysis import plackett_luce as pl

    # the degenerate limit: each candidate at its rank with probability 1 (ties spread, as ties="expected")
    got, _ = pl.marginals(np.array([3.0, 9.0, 1.0, 9.0, 5.0]), np.array([0, 5]), 1e-4, 3)
    want = np.array([[0, 0, 0], [0.5, 0.5, 0], [0, 0, 0], [0.5, 0.5, 0], [0, 0, 1.0]])
    np.testing.assert_allclose(got, want, atol=1e-300)
    # scores of +-1e308: differences overflow double, the chances do not
    got, _ = pl.marginals(np.array([1e308, -1e308, 1e308, 0.0, 5e307]), np.array([0, 5]), 1.0, 3)
    np.testing.assert_allclose(got, [[0.5, 0.5, 0], [0, 0, 0], [0.5, 0.5, 0], [0, 0, 0], [0, 0, 1.0]], atol=1e-300)
    # through off_policy: a Plackett-Luce policy at T = 0.02 over BM25-like scores estimates the ranker's value
    rng = np.random.default_rng(1)
    rounds, n, L = 400, 10, 5
    base = np.array([40.0, 30, 20, 12, 5, 1, 0.5, 0.2, 0.1, 0.0])
    perm = np.argsort(rng.random((rounds, n)), axis=1)
    pos = np.full((rounds, n), np.nan)
    pos[np.arange(rounds)[:, None], perm[:, :L]] = np.arange(1, L + 1)
    click = np.where(np.isnan(pos), 0.0, (rng.random((rounds, n)) < 0.5).astype(float))
    log = pd.DataFrame({"round": np.repeat(np.arange(rounds), n), "item": np.tile(np.arange(n), rounds),
                        "position": pos.ravel(), "click": click.ravel(), "pscore": 1 / n,
                        "score": np.tile(base, rounds)})
    res = tk.off_policy(log, ["precision@5"], policy={"ranker": "score", "pl": tk.PlackettLuce("score", 0.02)},
                        query="round", estimator=["iips", "sniips", "dr"], refuse=False)
    for e in ("iips", "sniips", "dr"):
        assert res.summary.loc[f"pl ({e})", "precision@5"] == pytest.approx(
            res.summary.loc[f"ranker ({e})", "precision@5"], rel=1e-12)


def _tied_log():
    """Two rounds of four candidates, ties in the new ranker's scores across positions 1..3."""
    return pd.DataFrame({
        "round": [0, 0, 0, 0, 1, 1, 1, 1],
        "item": ["a", "b", "c", "d", "a", "b", "c", "d"],
        "position": [1, 2, 3, None, 2, 1, None, 3],
        "click": [1, 0, 1, 0, 1, 1, 0, 0],
        "p_item": [0.5, 0.25, 0.2, None, 0.3, 0.4, None, 0.25],
        "p_cascade": [0.5, 0.2, 0.1, None, 0.4 * 0.3, 0.4, None, 0.4 * 0.3 * 0.5],
        "p_slate": [0.1, 0.1, 0.1, None, 0.06, 0.06, None, 0.06],
        "new": [2.0, 1.0, 1.0, 1.0, 3.0, 3.0, 0.0, 3.0],
    })


def test_expected_ties_are_the_mean_over_every_order_of_the_tied_candidates():
    log = _tied_log()
    metrics = ["tp@3", "precision@2", "dcg@3"]
    est = ["iips", "rips", "sips"]
    expected = tk.off_policy(log, metrics, policy="new", query="round", pscore=PSCORES, estimator=est,
                             ties="expected", refuse=False, on_policy=None).summary
    # every order of each round's tied candidates, as a strict order (ties="first" on reordered rows)
    groups = [[1, 2, 3], [4, 5, 7]]  # rows of the tied candidates of round 0 and round 1
    runs = []
    for first in itertools.permutations(groups[0]):
        for second in itertools.permutations(groups[1]):
            order = [0, *first, *second, 6]
            res = tk.off_policy(log.iloc[order], metrics, policy="new", query="round", pscore=PSCORES, estimator=est,
                                ties="first", refuse=False, on_policy=None)
            runs.append(res.summary.to_numpy())
    np.testing.assert_allclose(expected.to_numpy(), np.mean(runs, axis=0), rtol=1e-12, atol=1e-15)


def test_item_tie_rules_order_ties_by_item_id():
    log = _tied_log()
    desc = tk.off_policy(log, ["tp@3"], policy="new", query="round", pscore="p_item", ties="item_desc",
                         refuse=False, on_policy=None).summary.iloc[0, 0]
    # item_desc: round 0 ranks a, d, c, b; round 1 ranks d, b, a, c
    ranked = {(0, "a"): 1, (0, "d"): 2, (0, "c"): 3, (1, "d"): 1, (1, "b"): 2, (1, "a"): 3}
    shown = log.dropna(subset=["position"])
    want = sum(c / p for r, i, j, c, p in zip(shown["round"], shown["item"], shown["position"], shown["click"],
                                             shown["p_item"]) if ranked.get((r, i)) == j) / 2
    assert desc == pytest.approx(want, rel=1e-12)


def test_a_table_of_zeros_and_ones_is_the_same_ranker():
    log = random_log(21, rounds=150)
    L = 3
    top = deterministic_policy(log, L)
    table = pd.DataFrame([(r, i, k, 1.0) for (r, k), i in top.items()], columns=["round", "item", "position",
                                                                                 "probability"])
    for est in ("iips", "sniips", "dr"):
        as_ranker = tk.off_policy(log, ["tp@3", "dcg@2"], policy="new", query="round", pscore="p_item", estimator=est,
                                  refuse=False, on_policy=None)
        as_table = tk.off_policy(log, ["tp@3", "dcg@2"], policy={"new": table}, query="round", pscore="p_item",
                                 estimator=est, refuse=False, on_policy=None)
        np.testing.assert_allclose(as_table.summary.to_numpy(), as_ranker.summary.to_numpy(), rtol=1e-12)
        np.testing.assert_allclose(as_table.per_query["tp@3"], as_ranker.per_query["tp@3"], rtol=1e-12, atol=1e-15)


def test_the_logger_row_is_its_own_click_rate_per_position():
    log = random_log(5)
    shown = log.dropna(subset=["position"])
    rates = shown.groupby("position")["click"].mean()
    res = tk.off_policy(log, ["precision@3", "tp@2", "dcg@3"], policy="new", query="round", pscore="p_item",
                        refuse=False)
    assert res.summary.loc["logger", "precision@3"] == pytest.approx(rates.sum() / 3, rel=1e-12)
    assert res.summary.loc["logger", "tp@2"] == pytest.approx(rates[1.0] + rates[2.0], rel=1e-12)
    assert res.summary.loc["logger", "dcg@3"] == pytest.approx(sum(rates[j] / math.log2(j + 1) for j in (1, 2, 3)),
                                                               rel=1e-12)


def test_each_rounds_value_averages_to_the_estimate():
    log = random_log(8)
    res = tk.off_policy(log, ["tp@3", "precision@1"], policy={"new": "new", "pl": tk.PlackettLuce("old", 2.0)},
                        query="round", pscore="p_item", estimator=["iips", "sniips", "dr"], refuse=False)
    means = res.per_query.groupby("model", sort=False)[["tp@3", "precision@1"]].mean()
    np.testing.assert_allclose(means.loc[res.models].to_numpy(), res.summary.to_numpy(), rtol=1e-12)


def test_results_do_not_depend_on_row_order_nor_on_the_other_policies():
    log = random_log(9)
    spec = dict(query="round", pscore=PSCORES, estimator=["iips", "snrips", "dr", "sips"], refuse=False)
    both = tk.off_policy(log, ["tp@3"], policy={"a": "new", "b": tk.PlackettLuce("old", 0.5)}, **spec)
    alone = tk.off_policy(log, ["tp@3"], policy={"b": tk.PlackettLuce("old", 0.5)}, **spec)
    for e in spec["estimator"]:
        assert both.summary.loc[f"b ({e})", "tp@3"] == alone.summary.loc[f"b ({e})", "tp@3"]
    shuffled = tk.off_policy(log.sample(frac=1.0, random_state=1), ["tp@3"],
                             policy={"a": "new", "b": tk.PlackettLuce("old", 0.5)}, **spec)
    # the doubly robust folds follow the rounds' order of first appearance: the others are equal
    keep = [m for m in both.models if "(dr)" not in m]
    np.testing.assert_allclose(shuffled.summary.loc[keep].to_numpy(), both.summary.loc[keep].to_numpy(), rtol=1e-12)


def test_results_pickle():
    log = random_log(10)
    res = tk.off_policy(log, ["tp@3"], policy="new", query="round", pscore="p_item", estimator=["iips", "dr"],
                        refuse=False)
    again = pickle.loads(pickle.dumps(res))
    pd.testing.assert_frame_equal(again.summary, res.summary)
    pd.testing.assert_frame_equal(again.per_query, res.per_query)
    assert again.info == res.info
    assert pickle.loads(pickle.dumps(tk.PlackettLuce("s", 0.5))) == tk.PlackettLuce("s", 0.5)


def test_clipping_caps_the_weights_and_estimates_its_bias():
    log = random_log(12)
    base = tk.off_policy(log, ["tp@3"], policy="new", query="round", pscore="p_item", refuse=False, on_policy=None)
    loose = tk.off_policy(log, ["tp@3"], policy="new", query="round", pscore="p_item", refuse=False, on_policy=None,
                          clip=1e9)
    assert loose.summary.iloc[0, 0] == base.summary.iloc[0, 0]
    with pytest.warns(tk.TopkevalWarning, match="biased low"):
        tight = tk.off_policy(log, ["tp@3"], policy="new", query="round", pscore="p_item", refuse=False,
                              on_policy=None, clip=2.0)
    shown = _flat(log)
    top = deterministic_policy(log, 3)
    w = np.array([float(top.get((r, int(p))) == i) for r, p, i in zip(shown["round"], shown["position"],
                                                                        shown["item"])]) / shown["p_item"].to_numpy()
    n = log["round"].nunique()
    c = shown["click"].to_numpy()
    assert tight.summary.iloc[0, 0] == pytest.approx((np.minimum(w, 2.0) * c).sum() / n, rel=1e-12)
    bias = tight.info["off_policy"]["diagnostics"]["new"]["metrics"]["tp@3"]["clip_bias"]
    assert bias == pytest.approx((np.maximum(w - 2.0, 0) * c).sum() / n, rel=1e-12)
    assert base.summary.iloc[0, 0] == pytest.approx(tight.summary.iloc[0, 0] + bias, rel=1e-12)


def test_too_few_effective_clicks_are_refused_with_a_warning():
    log = random_log(13, rounds=60)
    with pytest.warns(tk.TopkevalWarning, match="effective clicks"):
        res = tk.off_policy(log, ["tp@3"], policy="new", query="round", pscore="p_item", estimator="dr",
                            min_clicks=1e6, min_ess=0)  # dr: no check of the weights' mean comes first
    assert math.isnan(res.summary.loc["new", "tp@3"])
    assert not math.isnan(res.summary.loc["logger", "tp@3"])  # the logger's own row is never refused
    assert "effective clicks" in res.info["off_policy"]["diagnostics"]["new"]["metrics"]["tp@3"]["refused"]
    assert res.per_query.loc[res.per_query["model"] == "new", "tp@3"].isna().all()


def test_a_policy_where_the_logger_could_not_show_is_refused_with_bounds():
    from offpolicy_simulation import simulate

    log, support = simulate(800, seed=4, logger="shuffle")
    with pytest.warns(tk.TopkevalWarning, match="cannot show"):
        res = tk.off_policy(log, ["precision@5"], policy="new", query="round", pscore="p_item", support=support,
                            estimator=["iips", "sniips", "dr"])
    for e in ("iips", "sniips", "dr"):
        m = res.info["off_policy"]["diagnostics"][f"new ({e})"]["metrics"]["precision@5"]
        assert math.isnan(res.summary.loc[f"new ({e})", "precision@5"])
        assert 0 < m["unsupported"] <= 1 and m["lower"] <= m["upper"]
    # without support= the same log is estimated (support assumed), and its never-shown share is reported
    assumed = tk.off_policy(log, ["precision@5"], policy="new", query="round", pscore="p_item", refuse=False)
    assert assumed.info["off_policy"]["diagnostics"]["new"]["metrics"]["precision@5"]["never_shown"] > 0


# ---------------------------------------------------------------------------------------------
# bad input: (change to the log or the arguments, error, message)


def _small():
    return pd.DataFrame({"round": [1, 1, 1, 2, 2, 2], "item": ["a", "b", "c", "a", "b", "c"],
                         "position": [1, 2, None, 2, 1, None], "click": [1, 0, 0, 0, 1, 0],
                         "pscore": [0.5, 0.5, None, 0.5, 0.5, None], "new": [0.3, 0.2, 0.1, 0.1, 0.2, 0.3]})


BAD = [
    (lambda f: f.assign(pscore=[0.0, 0.5, None, 0.5, 0.5, None]), {}, tk.DataError, r"in \(0, 1\]"),
    (lambda f: f.assign(pscore=[1.5, 0.5, None, 0.5, 0.5, None]), {}, tk.DataError, "at most 1"),
    (lambda f: f.assign(pscore=[None, 0.5, None, 0.5, 0.5, None]), {}, tk.DataError, "no pscore"),
    (lambda f: f.assign(click=[1, 0, 1, 0, 1, 0]), {}, tk.DataError, "never showed"),
    (lambda f: f.assign(click=[2, 0, 0, 0, 1, 0]), {}, tk.DataError, "clicks are 0 or 1"),
    (lambda f: f.assign(position=[1, 1, None, 2, 1, None]), {}, tk.DataError, "two rows at position 1"),
    (lambda f: f.assign(item=["a", "a", "c", "a", "b", "c"]), {}, tk.DataError, "twice"),
    (lambda f: f.assign(position=[None] * 6), {}, tk.DataError, "No row of the log has a position"),
    (lambda f: f.assign(new=[0.3, np.nan, 0.1, 0.1, 0.2, 0.3]), {}, tk.DataError, "finite"),
    (lambda f: f, {"metrics": ["precision@3"]}, tk.ParameterError, "at most 2"),
    (lambda f: f, {"metrics": ["recall@2"]}, tk.ParameterError, "no off-policy estimate"),
    (lambda f: f, {"estimator": "ips"}, tk.ParameterError, "estimator"),
    (lambda f: f, {"estimator": ["iips", "bogus"]}, tk.ParameterError, "Unknown estimator 'bogus'"),
    (lambda f: f, {"estimator": ["iips", "rips"]}, tk.ParameterError, "different forms of pscore"),
    (lambda f: f, {"pscore": {"cascade": "pscore"}, "estimator": "iips"}, tk.ParameterError, "item_position"),
    (lambda f: f, {"ties": "optimistic"}, tk.ParameterError, "ties"),
    (lambda f: f, {"policy": {"logger": "new"}}, tk.ParameterError, "on_policy"),
    (lambda f: f, {"policy": None}, tk.ParameterError, "needs the policy"),
    (lambda f: f, {"policy": {"t": pd.DataFrame({"item": ["a", "b"], "position": [1, 1],
                                                 "probability": [0.7, 0.6]})}}, tk.DataError, "one position"),
    (lambda f: f, {"policy": {"t": pd.DataFrame({"item": ["a", "a"], "position": [1, 2],
                                                 "probability": [0.7, 0.6]})}}, tk.DataError, "item over the positions"),
    (lambda f: f, {"policy": {"t": pd.DataFrame({"item": ["a"], "position": [1]})}}, tk.ColumnError, "probability"),
    (lambda f: f, {"policy": {"t": pd.DataFrame({"item": [1], "position": [1], "probability": [0.5]})}},
     tk.DataError, "numbers"),
    (lambda f: f, {"policy": {"t": pd.DataFrame({"item": ["a"], "position": [1], "probability": [0.5]})},
                   "estimator": "rips", "pscore": {"cascade": "pscore"}}, tk.ParameterError, "prefix"),
    (lambda f: f.assign(ps=[0.2, 0.3, None, 0.2, 0.2, None]), {"pscore": {"slate": "ps"}, "estimator": "sips"},
     tk.DataError, "differs within round"),
    (lambda f: f.assign(pc=[0.2, 0.3, None, 0.2, 0.1, None]), {"pscore": {"cascade": "pc"}, "estimator": "rips"},
     tk.DataError, "rises"),
    (lambda f: f.assign(position=[1, 3, None, 2, 1, None]), {"pscore": {"cascade": "pscore"}, "estimator": "rips",
                                                              "metrics": ["tp@1"]}, tk.DataError, "gap"),
    (lambda f: f, {"support": pd.DataFrame({"round": [7], "item": ["a"], "position": [1]})}, tk.DataError,
     "round the log does not have"),
]


@pytest.mark.parametrize("change, kwargs, error, message", BAD)
def test_bad_input_is_refused_with_a_clear_error(change, kwargs, error, message):
    args = dict(metrics=["precision@2"], policy="new", query="round", pscore="pscore", refuse=False)
    args.update(kwargs)
    with pytest.raises(error, match=message):
        tk.off_policy(change(_small()), **args)


# ---------------------------------------------------------------------------------------------
# the command line and the report


def test_the_command_line_prints_what_the_function_returns(tmp_path, capsys):
    import json

    from topkeval.cli import main

    log = random_log(14)
    path = tmp_path / "log.csv"
    log.to_csv(path, index=False)
    table = pd.DataFrame({"item": [0, 1, 2], "position": [1, 1, 2], "probability": [0.5, 0.5, 1.0]})
    table.to_csv(tmp_path / "policy.csv", index=False)
    code = main(["off-policy", str(path), "--query", "round", "--pscore", "p_item", "--policy", "new",
                 "--plackett-luce", "old:0.5", "--policy-table", f"t={tmp_path / 'policy.csv'}", "--estimator", "iips",
                 "--estimator", "dr", "-m", "tp@3", "--no-refuse", "--format", "json", "--positions"])
    out, err = capsys.readouterr()
    assert code == 0, err
    payload = json.loads(out)
    want = tk.off_policy(log, ["tp@3"], policy={"new": "new", "pl:old": tk.PlackettLuce("old", 0.5), "t": table},
                         query="round", pscore="p_item", estimator=["iips", "dr"], refuse=False)
    for model in want.models:
        assert payload["summary"][model]["tp@3"] == pytest.approx(want.summary.loc[model, "tp@3"], rel=1e-12)
    code = main(["off-policy", str(path), "--query", "round", "--pscore", "p_item", "--policy", "new", "--ci",
                 "--no-refuse"])
    out, err = capsys.readouterr()
    assert code == 0 and "95% CI" in out and "off-policy estimates from 300 rounds" in out


@pytest.mark.parametrize("args, message", [
    (["--pscore", "nope", "--policy", "new"], "'nope'"),
    (["--pscore", "p_item"], "name the policy"),
    (["--pscore", "p_item", "--policy", "new", "--clip", "0.5"], "clip"),
    (["--pscore", "p_item", "--policy", "new", "-m", "tp@9"], "at most 3"),
    (["--pscore", "p_item", "--plackett-luce", "new:hot"], "temperature"),
])
def test_the_command_line_refuses_bad_input_in_one_line(tmp_path, capsys, args, message):
    from topkeval.cli import main

    path = tmp_path / "log.csv"
    random_log(15, rounds=20).to_csv(path, index=False)
    code = main(["off-policy", str(path), "--query", "round", *args])
    out, err = capsys.readouterr()
    assert code == 2 and out == "" and len(err.strip().splitlines()) == 1 and message in err, err


def test_the_report_has_an_off_policy_section(tmp_path):
    log = random_log(16)
    res = tk.off_policy(log, ["tp@3", "precision@2"], policy="new", query="round", pscore="p_item",
                        estimator=["iips", "dr"], refuse=False)
    page = Path(res.report(tmp_path / "r.html", n_resamples=200, curves=False)).read_text(encoding="utf-8")
    assert "Off-policy estimates" in page and "Click rate at each position" in page
    ci = res.summary_ci(n_resamples=200).set_index(["model", "metric"])
    low = ci.loc[("new (dr)", "tp@3"), "ci_low"]
    assert f'data-low="{float(low)!r}"' in page  # the summary's intervals are summary_ci's
    assert "item-position clicks" in page  # each estimator's assumption is stated


def test_thin_positions_are_refused_by_their_effective_sample_size():
    log = random_log(17, rounds=300)
    res = tk.off_policy(log, ["tp@3", "precision@1"], policy="new", query="round", pscore=PSCORES,
                        estimator=["sips", "iips"], min_clicks=0, min_ess=1e6)
    assert res.summary.drop(index="logger").isna().all().all()
    why = res.info["off_policy"]["diagnostics"]["new (sips)"]["metrics"]["tp@3"]["refused"]
    assert "effective sample size" in why and "min_ess" in why


def test_cascade_clicks_refuse_the_item_position_estimators_below_the_first_position():
    from offpolicy_simulation import simulate

    log, _ = simulate(1500, seed=6, clicks="cascade")
    with pytest.warns(tk.TopkevalWarning, match="cascade"):
        res = tk.off_policy(log, ["precision@5", "precision@1"], policy="new", query="round", pscore=PSCORES,
                            estimator=["iips", "dr", "rips"])
    assert res.info["off_policy"]["clicks_below_a_click"]["cascade_like"]
    assert math.isnan(res.summary.loc["new (iips)", "precision@5"]) and math.isnan(res.summary.loc["new (dr)", "precision@5"])
    assert not math.isnan(res.summary.loc["new (iips)", "precision@1"])  # position 1 has nothing above it
    position, _ = simulate(1500, seed=6, clicks="position")
    check = tk.off_policy(position, ["precision@5"], policy="new", query="round", pscore="p_item")
    assert not check.info["off_policy"]["clicks_below_a_click"]["cascade_like"]


def test_weights_far_from_the_policys_mass_refuse_the_unnormalised_estimate():
    from topkeval.demo import randomized_log

    log = randomized_log(5000, seed=0)  # the logger explores its top 10 only: the new ranker leaves its support
    with pytest.warns(tk.TopkevalWarning, match="weights average"):
        res = tk.off_policy(log, ["precision@5"], policy="new", query="round", estimator=["iips", "sniips", "dr"])
    assert math.isnan(res.summary.loc["new (iips)", "precision@5"])
    d = res.info["off_policy"]["per_position"]["new (iips)"][1]
    assert abs(d["mean_weight"] - 1) > 3 * d["mean_weight_se"]
    kept = tk.off_policy(log, ["precision@5"], policy="new", query="round", estimator="iips", refuse=False)
    assert "weights average" in kept.info["off_policy"]["diagnostics"]["new"]["metrics"]["precision@5"]["would_refuse"]
    assert not math.isnan(kept.summary.loc["new", "precision@5"])


def test_skewness_estimates_the_cumulants_of_every_match_and_click_enumerated():
    """Round r adds t_rj when the logger matches the policy at j (probability p_rj) and the user clicks
    (q_j), all independent. The exact second and third cumulants of the total, over all 2^12
    (match, click) outcomes of 3 rounds and 2 positions, equal the expectation over every match pattern
    (2^6, each with its probability) of the cumulants estimated from the matched pairs alone
    (Horvitz-Thompson); the skewness is their ratio."""
    from topkeval.analysis.offpolicy import _cumulants, skewness

    p = np.array([[0.5, 0.9], [0.05, 0.3], [0.01, 0.6]])
    t = np.array([1.0, 0.5])[None, :] / p  # coef_j times the weight 1 / p of a deterministic policy
    q = np.array([0.3, 0.7])
    totals, probs = [], []
    for bits in itertools.product([0, 1], repeat=2 * t.size):
        m = np.array(bits[:t.size], float).reshape(t.shape)
        c = np.array(bits[t.size:], float).reshape(t.shape)
        qq = np.broadcast_to(q, t.shape)
        probs.append(float(np.prod(np.where(m > 0, p, 1 - p)) * np.prod(np.where(c > 0, qq, 1 - qq))))
        totals.append(float((t * m * c).sum()))
    x, pr = np.array(totals), np.array(probs)
    mean = (x * pr).sum()
    k2 = ((x - mean) ** 2 * pr).sum()
    k3 = ((x - mean) ** 3 * pr).sum()
    e2 = e3 = 0.0
    for bits in itertools.product([0, 1], repeat=t.size):
        m = np.array(bits, float).reshape(t.shape)
        h2, h3 = _cumulants(t * m, p, q, scaled=False)
        prob = float(np.prod(np.where(m > 0, p, 1 - p)))
        e2, e3 = e2 + prob * h2, e3 + prob * h3
    assert e2 == pytest.approx(k2, rel=1e-12) and e3 == pytest.approx(k3, rel=1e-12)
    every = np.ones_like(t)  # a log that matched everywhere: the ratio of its estimated cumulants
    h2, h3 = _cumulants(t * every, p, q, scaled=False)
    assert skewness(t, p, q) == pytest.approx(h3 / h2 ** 1.5, rel=1e-12)
    assert skewness(t * 1e200, p, q) == pytest.approx(h3 / h2 ** 1.5, rel=1e-12)  # no cube overflows
    assert math.isnan(skewness(t, p, np.zeros(2)))  # no click: nothing varies
    assert math.isnan(skewness(np.zeros((3, 2)), p, q))


def test_the_skewness_in_info_is_that_of_the_logs_weights_and_fitted_click_rate():
    """info's skewness of iips precision@1 and tp@3 from the log's own rows: the weights 1 / pscore
    where the logger showed the ranker's item at its position, the click rate fitted to their clicks
    (the coefficients are the same at every position here, and the skewness is scale-free)."""

    log = random_log(41, rounds=400)
    res = tk.off_policy(log, ["precision@1", "tp@3"], policy="new", query="round", pscore="p_item", estimator="iips",
                        min_ess=0, min_clicks=0, refuse=False)
    pol = deterministic_policy(log, 3)
    flat = _flat(log)
    w = np.array([1 / p if pol[(r, int(j))] == i else 0.0 for r, i, j, p in
                  zip(flat["round"], flat["item"], flat["position"], flat["p_item"])])
    for metric, depth in (("precision@1", 1), ("tp@3", 3)):
        k2 = k3 = 0.0
        for j in range(depth):
            at = (flat["position"] == j + 1).to_numpy() & (w > 0)
            q = (w[at] * flat["click"].to_numpy()[at]).sum() / w[at].sum()
            pq = flat["p_item"].to_numpy()[at] * q
            k2 += (w[at] ** 2 * q * (1 - pq)).sum()
            k3 += (w[at] ** 3 * q * (1 - pq) * (1 - 2 * pq)).sum()
        got = res.info["off_policy"]["diagnostics"]["new"]["metrics"][metric]["skewness"]
        assert got == pytest.approx(k3 / k2 ** 1.5, rel=1e-9)


def _one_rare_weight(rounds: int = 1000, rare: bool = True) -> pd.DataFrame:
    """Rounds of two candidates, one shown: the policy's item ``a`` (score 1) shown with probability
    0.5 in every other round, clicked in 3 of every 10 of those; with ``rare``, the last round shows it
    with probability 0.002 (weight 500) and no click: a log that drew a rare large weight unclicked."""
    rows = []
    for r in range(rounds):
        p_a = 0.002 if rare and r == rounds - 1 else 0.5
        shows_a = r % 2 == 0 or p_a < 0.5
        click = float(shows_a and p_a == 0.5 and (r // 2) % 10 < 3)
        rows.append((r, f"a{r}", 1.0 if shows_a else np.nan, click if shows_a else 0.0, p_a if shows_a else np.nan, 1.0))
        rows.append((r, f"b{r}", np.nan if shows_a else 1.0, 0.0, np.nan if shows_a else 1 - p_a, 0.0))
    return pd.DataFrame(rows, columns=["round", "item", "position", "click", "pscore", "new"])


def test_a_rare_large_weight_refuses_the_estimate_by_its_skewness():
    from topkeval.analysis.offpolicy import SKEWNESS_LIMITS

    log = _one_rare_weight()
    with pytest.warns(tk.TopkevalWarning, match="skewness"):
        res = tk.off_policy(log, ["precision@1"], policy="new", query="round", estimator=["iips", "sniips", "dr"],
                            min_ess=0)
    for e, form in (("iips", "ips"), ("sniips", "normalised"), ("dr", "dr")):
        m = res.info["off_policy"]["diagnostics"][f"new ({e})"]["metrics"]["precision@1"]
        if m["skewness"] > SKEWNESS_LIMITS[form]:
            assert math.isnan(res.summary.loc[f"new ({e})", "precision@1"]), e
            assert "skewness" in m["refused"] and "every round" in m["refused"] and "Use " in m["refused"], e
            assert res.info["refused"][f"new ({e})"]["precision@1"] == m["refused"]
    assert "skewness" in res.info["off_policy"]["diagnostics"]["new (iips)"]["metrics"]["precision@1"]["refused"]
    kept = tk.off_policy(log, ["precision@1"], policy="new", query="round", estimator="iips", min_ess=0, refuse=False)
    m = kept.info["off_policy"]["diagnostics"]["new"]["metrics"]["precision@1"]
    assert m["refused"] is None and "skewness" in m["would_refuse"]
    assert kept.summary.loc["new", "precision@1"] == pytest.approx(150 * 2 / 1000)  # the clicks' weights, 2 each
    calm = tk.off_policy(_one_rare_weight(rare=False), ["precision@1"], policy="new", query="round", estimator="iips",
                         min_ess=0)  # without the rare weight: offered
    assert calm.summary.loc["new", "precision@1"] == pytest.approx(0.3)
    assert calm.info["off_policy"]["diagnostics"]["new"]["metrics"]["precision@1"]["skewness"] < 0.2


# ---------------------------------------------------------------------------------------------
# simulation with known truth (the full table: benchmarks/offpolicy_bench.py table)


@pytest.mark.slow
def test_offered_estimates_cover_the_truth_and_never_go_the_wrong_way():
    """Logs of 2,000 rounds (tests/offpolicy_simulation.py): a Plackett-Luce logger over 20 candidates
    showing 5 and a better deterministic ranker, with position-based clicks (120 logs), cascade clicks
    (10) and dependent-click-model clicks going on after a click with probability 0.3, 0.6 and 0.8 (10
    each); and a logger that only shuffles its top 5, with support= given (10). With position-based
    clicks every estimate offered (not refused) covers the population's truth in >= 88% of the logs
    that offer it, pooled over the metrics, and >= 85% for each metric alone: 120 logs measure a
    coverage to +-2% (the claim, >= 90%, is the 300-log table of benchmarks/offpolicy_bench.py). None
    says the better ranker is significantly worse. Where clicks depend on the clicks above (cascade,
    DCM), iips, sniips and dr are refused below position 1 in every log, and rips at position 1 is
    offered; where the logger cannot show the ranker's choices nothing is offered and the bounds hold
    the truth."""
    import offpolicy_simulation as sim

    metrics = ["precision@5", "precision@1", "dcg@3"]
    estimators = ["iips", "sniips", "dr", "rips", "snrips", "sips"]
    pscores = {"item_position": "p_item", "cascade": "p_cascade", "slate": "p_slate"}
    settings = [("position", "plackett_luce", 0.0, 120), ("cascade", "plackett_luce", 0.0, 10),
                ("dcm", "plackett_luce", 0.3, 10), ("dcm", "plackett_luce", 0.6, 10), ("dcm", "plackett_luce", 0.8, 10),
                ("position", "shuffle", 0.0, 10)]
    for clicks, logger, go_on, logs in settings:
        truth = sim.truth(clicks=clicks, logger=logger, rounds=100_000, continuation=go_on)
        hits: dict = {}
        for rep in range(logs):
            log, support = sim.simulate(2000, seed=500 + rep, clicks=clicks, logger=logger, continuation=go_on)
            res = tk.off_policy(log, metrics, policy="new", query="round", pscore=pscores, estimator=estimators,
                                support=support)
            cmp = res.compare(baseline="logger", test="t", correction=None, n_resamples=100).set_index(["model",
                                                                                                           "metric"])
            ci = (res.summary_ci(n_resamples=1000, seed=rep).set_index(["model", "metric"])
                  if clicks == "position" and logger == "plackett_luce" else None)
            for model in res.models[1:]:
                for metric in metrics:
                    t = sim.metric_truth(truth["new"], metric)
                    assert cmp.loc[(model, metric), "verdict"] != "worse", (clicks, go_on, logger, model, metric)
                    m = res.info["off_policy"]["diagnostics"][model]["metrics"][metric]
                    got = hits.setdefault((model, metric), [])
                    if math.isfinite(res.summary.loc[model, metric]):
                        if ci is not None:
                            lo, hi = ci.loc[(model, metric), ["ci_low", "ci_high"]]
                            got.append(lo <= t <= hi)
                        else:
                            got.append(True)
                    if m.get("lower") is not None:
                        assert m["lower"] <= t <= m["upper"], (clicks, logger, model, metric)
        if clicks == "position" and logger == "plackett_luce":
            pooled: dict = {}
            for (model, metric), covered in hits.items():
                if len(covered) >= 80:  # coverage measured where 80 logs or more offer the estimate
                    assert np.mean(covered) >= 0.85, (model, metric, np.mean(covered))
                    pooled.setdefault(model, []).extend(covered)
            for model, covered in pooled.items():
                assert np.mean(covered) >= 0.88, (model, np.mean(covered))
            for e in ("sniips", "dr"):
                assert len(hits[(f"new ({e})", "precision@5")]) == logs, e
        elif logger == "plackett_luce":  # cascade and DCM: the item-position estimators refused below position 1
            for e in ("iips", "sniips", "dr"):
                assert not hits[(f"new ({e})", "precision@5")] and not hits[(f"new ({e})", "dcg@3")], (go_on, e)
            assert len(hits[("new (rips)", "precision@1")]) == logs, go_on
        else:  # nothing is offered where the logger cannot show the ranker's choices
            assert not any(hits.values())


@pytest.mark.slow
def test_a_sharply_peaked_logger_refuses_skewed_estimates_and_the_offered_dr_covers():
    """A Plackett-Luce logger with tau 2 (its chance of showing the ranker's item often under 1%), 40
    logs of 2,000 rounds, position-based clicks: the skewness of the weighted clicks refuses iips's
    precision@1 in at least 15% of the logs (against at most 10% of 40 logs with tau 5), no offered estimate's
    skewness is above its limit, and the offered dr estimates, pooled over the metrics, cover the truth
    in at least 80% of the cases (about 35 of them here: a check against gross breakage, 0.93 expected;
    the claim, >= 90%, is the 300-log table of benchmarks/offpolicy_bench.py: 93-96%). None says the
    better ranker is worse."""
    import offpolicy_simulation as sim
    from topkeval.analysis.offpolicy import SKEWNESS_LIMITS

    metrics = ["precision@5", "precision@1", "dcg@3"]
    skewed = {}
    for tau in (2.0, 5.0):
        truth = sim.truth(clicks="position", rounds=100_000, tau=tau)
        covered, refused = [], 0
        for rep in range(40):
            log, _ = sim.simulate(2000, seed=900 + rep, tau=tau)
            res = tk.off_policy(log, metrics, policy="new", query="round", pscore="p_item", estimator=["iips", "dr"])
            d = res.info["off_policy"]["diagnostics"]
            for e in ("iips", "dr"):
                for metric in metrics:
                    m = d[f"new ({e})"]["metrics"][metric]
                    if math.isfinite(res.summary.loc[f"new ({e})", metric]):
                        assert m["skewness"] <= SKEWNESS_LIMITS["ips" if e == "iips" else "dr"], (tau, e, metric)
            refused += "skewness" in (d["new (iips)"]["metrics"]["precision@1"]["refused"] or "")
            if tau == 2.0:
                cmp = res.compare(baseline="logger", test="t", correction=None).set_index(["model", "metric"])
                ci = res.summary_ci(n_resamples=1000, seed=rep).set_index(["model", "metric"])
                for metric in metrics:
                    assert cmp.loc[("new (dr)", metric), "verdict"] != "worse", metric
                    if math.isfinite(res.summary.loc["new (dr)", metric]):
                        lo, hi = ci.loc[("new (dr)", metric), ["ci_low", "ci_high"]]
                        covered.append(lo <= sim.metric_truth(truth["new"], metric) <= hi)
        skewed[tau] = refused / 40
        if tau == 2.0:
            assert len(covered) >= 25 and np.mean(covered) >= 0.80, (len(covered), np.mean(covered))
    assert skewed[2.0] >= 0.15 and skewed[5.0] <= 0.10, skewed  # the 300-log table: 19% and 2.7%


@pytest.mark.slow
def test_compares_tests_hold_their_level_on_off_policy_estimates():
    """compare's permutation (sign-flip), t and bootstrap tests on off-policy estimates, 100 logs of 2,000
    rounds (position-based clicks, Plackett-Luce logger): under a true null (the new ranker against its
    twin, whose population value is the same) each rejects at 5% in at most 8% of (log, estimator,
    metric) cases and its interval of the difference holds 0 in at least 90%; against the logger (a
    known difference) its interval holds the truth in at least 88% and the better ranker is never
    declared worse. The Wilcoxon signed-rank test on the same terms (scipy's: compare refuses it)
    rejects the true null in most logs for sniips, whose terms in the rounds without a match are each
    policy's own estimate (so thousands of equal differences of one sign): why it is refused. The
    300-log table: docs/how-to/off-policy.md."""
    from scipy import stats

    import offpolicy_simulation as sim

    truth = sim.truth(clicks="position", rounds=100_000)
    metrics = ["precision@5", "precision@1"]
    rejects: dict = {}
    holds: dict = {}
    wilcoxon = []
    for rep in range(100):
        log, _ = sim.simulate(2000, seed=900 + rep)
        res = tk.off_policy(log, metrics, policy=["new", "twin"], query="round", pscore="p_item",
                            estimator=["iips", "sniips", "dr"])
        pq = res.per_query
        for e in ("iips", "sniips", "dr"):
            for test in ("permutation", "t", "bootstrap"):
                cmp = res.compare(baseline=f"new ({e})", metrics=metrics, test=test, correction=None,
                                  n_resamples=400, seed=rep).set_index(["model", "metric"])
                for metric in metrics:
                    twin = cmp.loc[(f"twin ({e})", metric)]
                    if twin["verdict"] == "refused":
                        continue
                    rejects.setdefault(test, []).append(twin["p_value"] < 0.05)
                    holds.setdefault(("null", test), []).append(twin["ci_low"] <= 0 <= twin["ci_high"])
                    other = cmp.loc[("logger", metric)]
                    delta = sim.metric_truth(truth["logger"], metric) - sim.metric_truth(truth["new"], metric)
                    holds.setdefault(("logger", test), []).append(other["ci_low"] <= delta <= other["ci_high"])
                    assert other["verdict"] != "better", (rep, e, test, metric)  # the logger is truly worse
        for metric in metrics:
            a = pq.loc[pq["model"] == "new (sniips)", metric].to_numpy()
            b = pq.loc[pq["model"] == "twin (sniips)", metric].to_numpy()
            if np.isfinite(a).all() and np.isfinite(b).all():
                wilcoxon.append(stats.wilcoxon(a, b).pvalue < 0.05)
    for test, rejected in rejects.items():
        assert len(rejected) >= 300 and np.mean(rejected) <= 0.08, (test, np.mean(rejected))
    for (kind, test), held in holds.items():
        assert np.mean(held) >= (0.90 if kind == "null" else 0.88), (kind, test, np.mean(held))
    assert len(wilcoxon) >= 150 and np.mean(wilcoxon) > 0.5  # ranking the terms rejects a true null in most logs


def test_items_the_log_lacks_are_one_item_in_every_table():
    log = _small()
    policy = pd.DataFrame({"item": ["z", "a"], "position": [1, 2], "probability": [0.5, 0.5]})
    support = pd.DataFrame({"item": ["y", "a", "b"], "position": [1, 2, 1]})  # 'y' is not 'z'
    res = tk.off_policy(log, ["tp@2"], policy={"t": policy}, query="round", support=support, refuse=False)
    m = res.info["off_policy"]["diagnostics"]["t"]["metrics"]["tp@2"]
    assert m["unsupported"] == pytest.approx(0.5)  # 'z' at position 1 is outside the support
    assert m["never_shown"] == pytest.approx(0.5)


# ---------------------------------------------------------------------------------------------
# what each estimate is over: rounds without a position, policies that show nothing some of the time


def test_a_round_with_nothing_at_a_position_adds_zero_there():
    """Round 1 shows 3 items, round 2 has only 2 candidates (all shown), every one clicked: the clicks in
    the top 3 per round are (3 + 2) / 2 = 2.5, and round 2's own value is 2, not 3."""
    log = pd.DataFrame({"round": [1, 1, 1, 2, 2], "item": ["a", "b", "c", "d", "e"], "position": [1, 2, 3, 1, 2],
                        "click": [1.0, 1, 1, 1, 1], "pscore": [1.0] * 5, "new": [3.0, 2, 1, 2, 1]})
    res = tk.off_policy(log, ["tp@3", "precision@3"], policy="new", query="round", refuse=False)
    assert res.summary.loc["new", "tp@3"] == pytest.approx(2.5) and res.summary.loc["logger", "tp@3"] == 2.5
    assert res.summary.loc["new", "precision@3"] == pytest.approx(2.5 / 3)
    rows = res.per_query.set_index(["model", "round"])["tp@3"]
    assert rows[("new", 1)] == pytest.approx(3.0) and rows[("new", 2)] == pytest.approx(2.0)
    assert rows[("logger", 2)] == pytest.approx(2.0)
    third = res.info["off_policy"]["per_position"]["new"][2]
    assert third["rounds"] == 2 and third["logged"] == 1 and third["estimate"] == pytest.approx(0.5)


def test_rounds_that_show_nothing_are_refused():
    log = _small().assign(round=[1, 1, 1, 2, 2, 3])
    log.loc[5, "position"] = np.nan  # round 3: one candidate, not shown
    with pytest.raises(tk.DataError, match="show none"):
        tk.off_policy(log, ["precision@2"], policy="new", query="round", refuse=False)


def test_self_normalised_estimates_are_normalised_to_the_policys_mass():
    """A table policy that shows something at each position only part of the time (allowed: at most 1
    per position): sniips is the policy's mass times the weighted click rate, m_j sum(w c) / sum(w),
    here by hand in numpy; OBP's form (m_j = 1) would estimate the rate given that it shows something."""
    log = random_log(31, rounds=400)
    table = pd.DataFrame({"item": [0, 1, 2, 3, 4], "position": [1, 1, 2, 3, 3],
                          "probability": [0.3, 0.2, 0.6, 0.1, 0.15]})
    res = tk.off_policy(log, ["tp@3"], policy={"t": table}, query="round", pscore="p_item",
                        estimator=["iips", "sniips"], refuse=False)
    shown = _flat(log)
    prob = {(int(i), int(j)): p for i, j, p in zip(table["item"], table["position"], table["probability"])}
    w = np.array([prob.get((int(i), int(j)), 0.0) for i, j in zip(shown["item"], shown["position"])]) / shown["p_item"]
    c, j = shown["click"].to_numpy(), shown["position"].to_numpy().astype(int)
    mass = table.groupby("position")["probability"].sum()
    want = sum(mass[p] * (w * c)[j == p].sum() / w[j == p].sum() for p in (1, 2, 3))
    assert res.summary.loc["t (sniips)", "tp@3"] == pytest.approx(want, rel=1e-12)
    # the same policy at full mass per position (each probability scaled to sum 1): the self-normalised
    # estimate of the half-mass policy is the full one's times the mass, position by position
    assert res.per_query.groupby("model")["tp@3"].mean()["t (sniips)"] == pytest.approx(want, rel=1e-12)


def test_items_the_log_never_lists_refuse_every_estimator_with_bounds():
    log = random_log(32, rounds=600)
    table = pd.DataFrame({"item": [0, 999, 1, 2], "position": [1, 2, 2, 3], "probability": [1.0, 0.9, 0.1, 1.0]})
    with pytest.warns(tk.TopkevalWarning, match="never lists") as caught:
        res = tk.off_policy(log, ["precision@3"], policy={"t": table}, query="round", pscore="p_item",
                            estimator=["iips", "sniips", "dr"])
    assert not any("sniips or dr" in str(w.message) for w in caught)
    for e in ("iips", "sniips", "dr"):
        m = res.info["off_policy"]["diagnostics"][f"t ({e})"]["metrics"]["precision@3"]
        assert math.isnan(res.summary.loc[f"t ({e})", "precision@3"])
        assert m["absent_items"] == pytest.approx(0.9 / 3) and "999" in m["refused"]
        assert 0 <= m["lower"] <= m["upper"] <= 1


def test_bounds_stay_in_the_metrics_range():
    log = _small()
    support = pd.DataFrame({"item": ["x"], "position": [1]})  # nothing the policy shows is supported
    res = tk.off_policy(log, ["precision@2", "tp@2"], policy="new", query="round", support=support, refuse=False)
    m = res.info["off_policy"]["diagnostics"]["new"]["metrics"]
    assert m["precision@2"]["upper"] == 1.0 and m["tp@2"]["upper"] <= 2.0
    assert m["precision@2"]["lower"] >= 0.0


def test_doubly_robust_clip_bias_is_what_clipping_took_away():
    """dr with weights capped at M loses sum (w - M)+ (c - q) / n_j (not iips's sum (w - M)+ c / n_j): by
    pandas with the documented reward model, and it is the difference of the two estimates."""
    log = random_log(33, rounds=300, items=10)
    flat = _flat(log)
    fold, rate = reference_rates(flat, log["round"].nunique(), seed=5, K=3)
    top = deterministic_policy(log, 3)
    w = np.array([float(top.get((r, int(p))) == i) for r, p, i in zip(flat["round"], flat["position"], flat["item"])])
    w = w / flat["p_item"].to_numpy()
    q = np.array([rate(fold[r], i, int(p) - 1) for r, i, p in zip(flat["round"], flat["item"], flat["position"])])
    want = (np.maximum(w - 2.0, 0) * (flat["click"].to_numpy() - q)).sum() / log["round"].nunique()
    spec = dict(policy="new", query="round", pscore="p_item", estimator="dr", seed=5, refuse=False, on_policy=None)
    with pytest.warns(tk.TopkevalWarning, match="reward model"):
        clipped = tk.off_policy(log, ["tp@3"], clip=2.0, **spec)
    bias = clipped.info["off_policy"]["diagnostics"]["new"]["metrics"]["tp@3"]["clip_bias"]
    assert bias == pytest.approx(want, rel=1e-12)
    full = tk.off_policy(log, ["tp@3"], **spec).summary.iloc[0, 0]
    assert full - clipped.summary.iloc[0, 0] == pytest.approx(bias, rel=1e-9)


@pytest.mark.parametrize("continuation", [0.3, 0.6, 0.8])
def test_clicks_that_depend_on_the_clicks_above_refuse_the_item_position_estimators(continuation, monkeypatch):
    """The dependent click model (after a click the user goes on with probability 0.3, 0.6, 0.8):
    below a click, clicks at the same position are rarer, far beyond chance; iips, sniips and dr are
    refused below position 1, rips is not (its thin deep prefixes let through: min_ess=0, no skewness
    limit, and the weights' mean checked at 3 standard errors either side)."""
    from offpolicy_simulation import simulate
    from topkeval.analysis import offpolicy

    monkeypatch.setitem(offpolicy.SKEWNESS_LIMITS, "ips", math.inf)
    monkeypatch.setattr(offpolicy, "WEIGHT_T_BELOW", 3.0)

    log, _ = simulate(2000, seed=60, clicks="dcm", continuation=continuation)
    with pytest.warns(tk.TopkevalWarning, match="depend on the clicks above"):
        res = tk.off_policy(log, ["precision@3", "precision@1"], policy="new", query="round", pscore=PSCORES,
                            estimator=["iips", "sniips", "dr", "rips"], min_ess=0)
    check = res.info["off_policy"]["clicks_below_a_click"]
    assert check["cascade_like"] and check["z"] < -3 and check["ratio"] < 0.95
    for e in ("iips", "sniips", "dr"):
        assert math.isnan(res.summary.loc[f"new ({e})", "precision@3"])
        assert not math.isnan(res.summary.loc[f"new ({e})", "precision@1"])
    assert not math.isnan(res.summary.loc["new (rips)", "precision@3"])


def test_position_based_clicks_are_not_taken_for_a_cascade():
    """Position-based clicks, with unique items (a deep position has more clicks above it and fewer clicks
    of its own: the stratification by position keeps them apart) and with recurring items."""
    from offpolicy_simulation import simulate

    for seed in (61, 62):
        log, _ = simulate(4000, seed=seed, clicks="position")
        check = tk.off_policy(log, ["precision@5"], policy="new", query="round", pscore="p_item")
        assert not check.info["off_policy"]["clicks_below_a_click"]["cascade_like"]
        assert abs(check.info["off_policy"]["clicks_below_a_click"]["z"]) < 3
    recurring = random_log(63, rounds=3000, n=5, L=3, items=8)
    check = tk.off_policy(recurring, ["tp@3"], policy="new", query="round", pscore="p_item", refuse=False)
    assert not check.info["off_policy"]["clicks_below_a_click"]["cascade_like"]


# ---------------------------------------------------------------------------------------------
# per-round values are terms of an estimate: what compare, diff and the report make of them


def test_compare_refuses_the_signed_rank_test_on_terms_of_an_estimate():
    log = random_log(34, rounds=300)
    res = tk.off_policy(log, ["tp@3"], policy="new", query="round", pscore="p_item", estimator="iips", refuse=False)
    assert res.info["per_query_terms"]
    with pytest.raises(tk.ParameterError, match="signed-rank"):
        res.compare(baseline="logger", test="wilcoxon")
    table = res.compare(baseline="logger", test="t", n_resamples=200)
    assert not {"wins", "ties", "losses"} & set(table.columns)
    with pytest.raises(tk.ParameterError, match="outcome"):
        res.diff("logger", "new", "tp@3")
    # the same declaration for a click log's inverse propensity weighted metrics
    clicks = pd.DataFrame({"query": np.repeat(np.arange(40), 5), "click": np.tile([1, 0, 0, 1, 0], 40),
                           "position": np.tile(np.arange(1, 6), 40), "a": np.tile([5.0, 4, 3, 2, 1], 40),
                           "b": np.tile([1.0, 2, 3, 4, 5], 40)})
    ips = tk.evaluate(clicks, ["precision@2"], relevance="click", score=["a", "b"], position="position",
                      propensity={1: 1.0, 2: 0.5, 3: 0.4, 4: 0.3, 5: 0.25})
    assert ips.info["per_query_terms"]
    with pytest.raises(tk.ParameterError, match="signed-rank"):
        ips.compare(baseline="a", test="wilcoxon")
    plain = tk.evaluate(clicks, ["precision@2"], relevance="click", score=["a", "b"])
    assert "wins" in plain.compare(baseline="a", test="wilcoxon", n_resamples=100).columns


def test_the_report_leaves_out_per_query_sections_for_terms_and_says_refused(tmp_path):
    log = random_log(35, rounds=300)
    res = tk.off_policy(log, ["tp@3"], policy="new", query="round", pscore="p_item", estimator=["iips", "dr"],
                        min_clicks=1e6)
    page = Path(res.report(tmp_path / "r.html", baseline="logger", n_resamples=200, curves=False)).read_text(
        encoding="utf-8")
    assert 'id="deltas"' not in page and 'id="queries"' not in page and "No per-query differences" in page
    assert "Refused, new (iips) on tp@3" in page and "no query to compare" not in page
    table = res.compare(baseline="logger", n_resamples=200)
    assert (table["verdict"] == "refused").all() and "effective clicks" in next(iter(table.attrs["refused"].values()))


def test_refuse_false_says_why_it_would_refuse_in_print_report_and_command_line(tmp_path, capsys):
    from topkeval.cli import main

    log = random_log(36, rounds=60)
    res = tk.off_policy(log, ["tp@3"], policy="new", query="round", pscore="p_item", refuse=False)
    why = res.info["off_policy"]["diagnostics"]["new"]["metrics"]["tp@3"]["would_refuse"]
    assert why and why in str(res)
    page = Path(res.report(tmp_path / "r.html", n_resamples=100, curves=False)).read_text(encoding="utf-8")
    assert "would be refused" in page
    log.to_csv(tmp_path / "log.csv", index=False)
    assert main(["off-policy", str(tmp_path / "log.csv"), "--query", "round", "--pscore", "p_item", "--policy", "new",
                 "-m", "tp@3", "--no-refuse"]) == 0
    out = capsys.readouterr().out
    assert "would be refused" in out and "effective sample size" in out


# ---------------------------------------------------------------------------------------------
# messages


def test_a_wrong_pscore_scale_is_named_in_the_refusal():
    log = random_log(37, rounds=500).assign(p_item=lambda f: f["p_item"].notna().map({True: 1.0, False: np.nan}))
    with pytest.warns(tk.TopkevalWarning, match="pscore is not") as caught:
        tk.off_policy(log, ["tp@3"], policy="new", query="round", pscore="p_item", min_ess=0, min_clicks=0)
    assert "Use sniips or dr" not in str(caught[0].message)


def test_a_policy_on_pairs_no_round_shows_is_refused_not_zero():
    log = _small()  # item 'c' is never shown
    table = pd.DataFrame({"item": ["c"], "position": [1], "probability": [1.0]})
    with pytest.warns(tk.TopkevalWarning, match="no round of this log shows"):
        res = tk.off_policy(log, ["precision@1"], policy={"t": table}, query="round", min_ess=0, min_clicks=0)
    assert math.isnan(res.summary.loc["t", "precision@1"])


def test_a_position_no_round_logs_is_named_for_the_logger_too():
    log = _small().assign(position=[1, 3, None, 3, 1, None])
    with pytest.warns(tk.TopkevalWarning, match="no round of the log logs position 2.*logger"):
        res = tk.off_policy(log, ["precision@3"], policy="new", query="round", refuse=False)
    assert res.summary.isna().all().all()


@pytest.mark.parametrize("change, kwargs, error, message", [
    (lambda f: f, {"policy": {"t": pd.DataFrame({"item": ["a"], "position": [0], "probability": [1.0]})}},
     tk.DataError, r"policy 't'.*position 0.*0-based"),
    (lambda f: f, {"policy": {"t": [("a", 1, 1.0)]}}, tk.ParameterError, "list of rows"),
    (lambda f: f, {"policy": {"t": pd.DataFrame({"item": [], "position": [], "probability": []})}}, tk.DataError,
     "policy 't' has no rows"),
    (lambda f: f, {"support": [("a", 1)]}, tk.ParameterError, r"support table \(support=\) must be a table"),
    (lambda f: f.assign(pscore=[1.0000000001, 0.5, None, 0.5, 0.5, None]), {}, tk.DataError, "1.0000000001"),
    (lambda f: f.assign(pscore=[1e-320, 0.5, None, 0.5, 0.5, None]), {}, tk.DataError, "below 1e-300"),
    (lambda f: f, {"policy": {"t": pd.DataFrame({"item": [True], "position": [1], "probability": [1.0]})}},
     tk.DataError, "True / False"),
    (lambda f: f, {"by": "round"}, tk.ParameterError, "segment"),
    (lambda f: f, {"weight": "pscore"}, tk.ParameterError, "weight"),
])
def test_more_bad_input_is_refused_with_a_clear_error(change, kwargs, error, message):
    args = dict(metrics=["precision@2"], policy="new", query="round", pscore="pscore", refuse=False)
    args.update(kwargs)
    with pytest.raises(error, match=message):
        tk.off_policy(change(_small()), **args)


def test_clip_is_shown_with_every_digit():
    log = random_log(38, rounds=100)
    with pytest.warns(tk.TopkevalWarning, match=r"clip=1\.0000001 "):
        tk.off_policy(log, ["tp@3"], policy="new", query="round", pscore="p_item", clip=1.0000001, refuse=False)


def test_tiny_pscores_leave_no_numpy_warning():
    """pscores of 1e-299 give weights of 1e299, whose squares overflow unless scaled: the estimate is
    made (and refused: one round), with no RuntimeWarning (the suite turns warnings into errors)."""
    log = _small().assign(pscore=[1e-299, 0.5, None, 0.5, 1e-299, None], new=[0.9, 0.2, 0.1, 0.1, 0.9, 0.3])
    res = tk.off_policy(log, ["precision@2"], policy="new", query="round", estimator=["iips", "sniips", "dr"],
                        refuse=False)
    assert np.isfinite(res.summary.loc["new (sniips)", "precision@2"])


def test_a_stray_deep_position_is_refused_before_any_matrix():
    import tracemalloc

    n = 200
    log = pd.DataFrame({"round": np.repeat(np.arange(n), 2), "item": np.tile([1, 2], n),
                        "position": np.tile([1.0, 5_000_000.0], n), "click": 0.0, "pscore": 0.5,
                        "new": np.tile([1.0, 0.0], n)})
    tracemalloc.start()
    try:
        with pytest.raises(tk.DataError, match="gap"):
            tk.off_policy(log, ["precision@1"], policy="new", query="round", estimator="sips", pscore={"slate": "pscore"})
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 50e6


def test_many_candidates_sample_the_plackett_luce_marginals_and_say_so():
    """100 candidates, 5 positions: beyond the exact recursion; the Monte Carlo is Rao-Blackwellised
    (position 1 exact: w_a / W), every position's chances sum to 1, and info and print say so."""
    rng = np.random.default_rng(39)
    rounds, n = 30, 100
    scores = rng.normal(size=(rounds, n))
    pos = np.full((rounds, n), np.nan)
    pos[:, :5] = np.arange(1, 6)
    log = pd.DataFrame({"round": np.repeat(np.arange(rounds), n), "item": np.tile(np.arange(n), rounds),
                        "position": pos.ravel(), "click": np.where(np.isnan(pos), 0.0, 1.0).ravel(),
                        "pscore": np.where(np.isnan(pos), np.nan, 0.01).ravel(), "s": scores.ravel()})
    res = tk.off_policy(log, ["precision@5"], policy={"pl": tk.PlackettLuce("s", 0.5)}, query="round", refuse=False)
    how = res.info["off_policy"]["plackett_luce"]["pl"]
    assert how["sampled"] == rounds and how["samples"] == 1000 and 0 < how["largest_standard_error"] < 0.05
    assert "Monte Carlo" in str(res)
    from topkeval.analysis import plackett_luce as pl

    marg, _ = pl.marginals(scores.ravel(), np.arange(0, rounds * n + 1, n), 0.5, 5)
    w = np.exp(scores / 0.5)
    np.testing.assert_allclose(marg[:, 0], (w / w.sum(axis=1, keepdims=True)).ravel(), rtol=1e-9)
    np.testing.assert_allclose(marg.reshape(rounds, n, 5).sum(axis=1), 1.0, rtol=1e-9)


def test_per_position_intervals_stay_in_the_click_rates_range():
    log = random_log(40, rounds=40)
    res = tk.off_policy(log, ["tp@3"], policy="new", query="round", pscore="p_item", estimator="dr", refuse=False)
    for p in res.info["off_policy"]["per_position"]["new"]:
        assert 0.0 <= p["ci_low"] <= p["ci_high"] <= 1.0


def test_a_log_of_single_positions_averages_each_position_over_the_rounds_that_log_it():
    """The Open Bandit Dataset's shape: each round one impression at one position. The logger's row is
    each position's own click rate (not diluted by the rounds that log another position), and a table
    policy's iips its weighted clicks over the rounds of that position, by hand."""
    rng = np.random.default_rng(41)
    n = 3000
    pos = rng.integers(1, 4, n)
    item = rng.integers(0, 5, n)
    click = (rng.random(n) < 0.1 + 0.05 * item / pos).astype(float)
    log = pd.DataFrame({"round": np.arange(n), "item": item, "position": pos.astype(float), "click": click,
                        "pscore": 0.2})
    P = np.array([[0.3, 0.2, 0.1], [0.3, 0.2, 0.2], [0.2, 0.3, 0.2], [0.1, 0.2, 0.3], [0.1, 0.1, 0.2]])
    table = pd.DataFrame([(a, j + 1, P[a, j]) for a in range(5) for j in range(3)],
                         columns=["item", "position", "probability"])
    res = tk.off_policy(log, ["precision@3"], policy={"t": table}, query="round", refuse=False)
    rates = [click[pos == j].mean() for j in (1, 2, 3)]
    assert res.summary.loc["logger", "precision@3"] == pytest.approx(np.mean(rates), rel=1e-12)
    prob = table.set_index(["item", "position"])["probability"]
    w = np.array([prob[(a, j)] for a, j in zip(item, pos)]) / 0.2
    want = np.mean([(w * click)[pos == j].mean() for j in (1, 2, 3)])
    assert res.summary.loc["t", "precision@3"] == pytest.approx(want, rel=1e-12)
