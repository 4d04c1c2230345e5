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
    total = w.sum(axis=1)
    for prefix in itertools.permutations(range(n), depth):
        prob = np.ones(rounds)
        rest = total.copy()
        for j, a in enumerate(prefix):
            prob = prob * w[:, a] / rest
            rest = rest - w[:, a]
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
                            estimator=list(expected), min_clicks=0)
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
                        pscore=PSCORES, estimator=list(expected), min_clicks=0)
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
                            min_clicks=0)
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
                        estimator=["iips", "rips", "sips"], min_clicks=0)
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
