"""The Open Bandit Dataset sample: the Bernoulli TS policy's click rate, estimated from the random log.

    python benchmarks/offpolicy_obd.py                      # obp installed: its sample and its BernoulliTS
    python benchmarks/offpolicy_obd.py --obd DIR            # DIR: obp's obd folder (random/all/all.csv, ...)

The Open Bandit Dataset (Saito et al., 2021; ZOZOTOWN: 80 items, 3 positions) ships a sample of 10,000
rows per logging policy in Open Bandit Pipeline's distribution (``obp/dataset/obd``: get it with
``pip download --no-deps obp==0.4.1`` and unzip the wheel, or install it with ``pip install --no-deps
obp==0.4.1``). It is not copied into this repository: the sample is read where obp's distribution
put it.

Each row of ``random/all/all.csv`` is one impression at one position (1, 2 or 3) of a uniformly random
logger (``propensity_score`` 1/80 = 0.0125): a round of its own here. The Bernoulli TS policy's
probability of each (item, position) is its Monte Carlo over its prior (``is_zozotown_prior=True``):
``BernoulliTS(n_actions=80, len_list=3, is_zozotown_prior=True, campaign="all",
random_state=12345).compute_batch_action_dist(n_sim=100000)`` when obp imports, otherwise the same
simulation transcribed (``obp/policy/contextfree.py``: per draw, ``theta ~ Beta(alpha, beta)`` per item
with alpha and beta from ``obp/policy/conf/prior_bts.yaml``, the items ranked by theta fill positions
1..3) from a seeded numpy generator. The estimates of the BTS policy's CTR@3 (precision@3: the mean of
the click rates at positions 1, 2, 3) are compared with the BTS log's own click rate (its
``bts/all/all.csv``), as Saito et al. (2021) do: relative error ``|estimate - on-policy| / on-policy``.
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
import warnings
from pathlib import Path

import numpy as np
import pandas as pd


def find_obd(given: str | None) -> Path:
    if given:
        return Path(given)
    spec = importlib.util.find_spec("obp")
    if spec is None or spec.origin is None:
        sys.exit("Open Bandit Pipeline is not installed: pip download --no-deps obp==0.4.1, unzip the wheel, and pass "
                 "--obd <unzipped>/obp/dataset/obd (or pip install --no-deps obp==0.4.1).")
    return Path(spec.origin).parent / "dataset" / "obd"


def bts_action_dist(obd: Path, n_sim: int) -> tuple[np.ndarray, str]:
    """(80, 3): the Bernoulli TS policy's probability of each item at each position, and how it was made."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            from obp.policy import BernoulliTS

        policy = BernoulliTS(n_actions=80, len_list=3, is_zozotown_prior=True, campaign="all", random_state=12345)
        return policy.compute_batch_action_dist(n_rounds=1, n_sim=n_sim)[0], "obp.policy.BernoulliTS"
    except ImportError:
        pass
    import yaml

    prior = yaml.safe_load((obd.parent.parent / "policy" / "conf" / "prior_bts.yaml").read_text())["all"]
    alpha, beta = np.asarray(prior["alpha"], float), np.asarray(prior["beta"], float)
    rng = np.random.default_rng(12345)
    counts = np.zeros((80, 3))
    for start in range(0, n_sim, 10_000):
        draws = rng.beta(alpha, beta, size=(min(10_000, n_sim - start), 80))
        top = np.argsort(-draws, axis=1)[:, :3]
        for j in range(3):
            counts[:, j] += np.bincount(top[:, j], minlength=80)
    return counts / n_sim, "the transcribed Monte Carlo (obp did not import)"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--obd", help="obp's obd folder (default: found from the installed obp)")
    p.add_argument("--sims", type=int, default=100_000, help="Monte Carlo draws of the BTS policy (default 100000)")
    p.add_argument("--resamples", type=int, default=10_000)
    args = p.parse_args()
    import topkeval as tk

    obd = find_obd(args.obd)
    random = pd.read_csv(obd / "random" / "all" / "all.csv", index_col=0)
    bts = pd.read_csv(obd / "bts" / "all" / "all.csv", index_col=0)
    dist, how = bts_action_dist(obd, args.sims)
    table = pd.DataFrame([(a, j + 1, dist[a, j]) for a in range(80) for j in range(3) if dist[a, j] > 0],
                         columns=["item_id", "position", "probability"])
    log = random.reset_index(drop=True).rename_axis("round").reset_index()
    estimators = ["iips", "sniips", "dr"]
    rows = []
    for refuse in (True, False):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            res = tk.off_policy(log, ["precision@3"], policy={"bts": table}, query="round", item="item_id",
                                position="position", click="click", pscore="propensity_score", estimator=estimators,
                                refuse=refuse)
        ci = res.summary_ci(n_resamples=args.resamples).set_index("model")
        for model in res.models:
            d = res.info["off_policy"]["diagnostics"][model]["metrics"]["precision@3"]
            rows.append(dict(refuse=refuse, model=model, estimate=res.summary.loc[model, "precision@3"],
                             ci_low=ci.loc[model, "ci_low"], ci_high=ci.loc[model, "ci_high"],
                             effective_clicks=d["effective_clicks"],
                             reason=d.get("refused") or d.get("would_refuse") or ""))
        if caught:
            print(f"warnings (refuse={refuse}): " + " | ".join(str(w.message) for w in caught))
    out = pd.DataFrame(rows)
    on_bts = bts["click"].mean()
    own = tk.off_policy(bts.reset_index(drop=True).rename_axis("round").reset_index(), ["precision@3"],
                        policy={"bts": table}, query="round", item="item_id", position="position", click="click",
                        pscore="propensity_score", refuse=False)
    own_ci = own.summary_ci(n_resamples=args.resamples).set_index("model").loc["logger"]
    on_policy = own.summary.loc["logger", "precision@3"]
    out["on_policy"] = on_policy
    out["relative_error"] = (out["estimate"] - on_policy).abs() / on_policy
    print(f"Open Bandit Dataset sample ({obd}): random log {len(random):,} rows, {int(random['click'].sum())} clicks; "
          f"BTS log {len(bts):,} rows, {int(bts['click'].sum())} clicks")
    print(f"BTS policy's (item, position) probabilities: {how}, {args.sims:,} draws")
    print(f"on-policy CTR of the BTS log: {on_bts:.5f} (all rows); CTR@3 (mean of the positions' click rates) "
          f"{on_policy:.5f}, 95% bootstrap interval [{own_ci['ci_low']:.5f}, {own_ci['ci_high']:.5f}]")
    print(f"random log's own CTR@3: {out.loc[out['model'] == 'logger', 'estimate'].iloc[0]:.5f}")
    shown = out[out["model"] != "logger"].copy()
    shown["estimator"] = shown["model"].str.extract(r"\((\w+)\)")
    pd.set_option("display.width", 200)
    print(shown[["refuse", "estimator", "estimate", "ci_low", "ci_high", "on_policy", "relative_error",
                 "effective_clicks", "reason"]].to_markdown(index=False, floatfmt=".5f"))


if __name__ == "__main__":
    main()
