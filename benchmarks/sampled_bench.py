"""Sampled evaluation on MovieLens 100k: the sampled metrics and their corrections against the full catalogue.

    python benchmarks/sampled_bench.py [--seeds 100] [--negatives 100] [--split ratio|loo] [--out FILE]

MovieLens 100k (943 users, 1,682 films, 100,000 ratings; every rating an interaction) is read from
the copy RecBole's wheel ships (``recbole/dataset_example/ml-100k``), fetched with ``pip download
--no-deps recbole==1.2.1`` into ``benchmarks/data/`` (not committed: the GroupLens licence forbids
redistribution); without network access or pip, the benchmark says so and stops. Split: each user's
interactions 80/20 at random (``ratio``, seeded), or the latest one held out (``loo``, the NCF
protocol). Models, trained on the training part in numpy: popularity (training frequency), item-kNN
(cosine similarity of items, every neighbour), PureSVD (the training matrix projected on its top 50
item factors, a matrix factorisation) and EASE (the closed-form item-item ridge regression of
Steck 2019, lambda 500).

For each sampling seed, ``evaluate_sampled`` with m uniform negatives per held-out item: the sampled
metric and each correction (``bv``, ``mle``, ``rescaled``) of recall@10 and NDCG@10 (and hit_rate@10),
against the full catalogue (``evaluate_matrix`` with the training items excluded). The table gives per
model and estimator the mean over seeds, the mean relative error ``mean |estimate - full| / full``,
the relative bias ``|mean estimate - full| / full``, and the share of seeds in which the estimator
orders every model as the full catalogue does (``order``), and each pair of models (``pairs``).
Then the time of evaluate_sampled (sampled only, and with the recommended correction) against
evaluate_matrix on the full catalogue, and RecBole's own metric code on the same sampled lists
(when RecBole can be imported).
"""

from __future__ import annotations

import argparse
import itertools
import json
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import numpy as np

DATA = Path(__file__).resolve().parent / "data"
WHEEL = "recbole==1.2.1"
MEMBER = "recbole/dataset_example/ml-100k/ml-100k.inter"


def movielens() -> np.ndarray | None:
    """(user, item, rating, timestamp) rows of MovieLens 100k, users and items as 0-based codes; None
    when the copy cannot be fetched."""
    DATA.mkdir(parents=True, exist_ok=True)
    target = DATA / "ml-100k.inter"
    if not target.exists():
        wheels = sorted(DATA.glob("recbole-*.whl"))
        if not wheels:
            done = subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--quiet", WHEEL, "-d",
                                   str(DATA)], capture_output=True, text=True)
            wheels = sorted(DATA.glob("recbole-*.whl"))
            if done.returncode or not wheels:
                print(f"MovieLens 100k unavailable (pip download {WHEEL} failed: {done.stderr.strip()[-300:]})")
                return None
        with zipfile.ZipFile(wheels[-1]) as z:
            target.write_bytes(z.read(MEMBER))
    rows = np.loadtxt(target, skiprows=1, dtype=np.float64)
    users = np.unique(rows[:, 0], return_inverse=True)[1]
    items = np.unique(rows[:, 1], return_inverse=True)[1]
    return np.column_stack([users, items, rows[:, 2], rows[:, 3]])


def split(rows: np.ndarray, how: str, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Binary train and test matrices (users x items)."""
    U, I = int(rows[:, 0].max()) + 1, int(rows[:, 1].max()) + 1
    user, item = rows[:, 0].astype(int), rows[:, 1].astype(int)
    rng = np.random.default_rng(seed)
    held = np.zeros(len(rows), bool)
    if how == "loo":  # the latest interaction of each user (ties: the last row)
        order = np.lexsort((np.arange(len(rows)), rows[:, 3], user))
        last = np.r_[user[order][1:] != user[order][:-1], True]
        held[order[last]] = True
    else:
        u = rng.random(len(rows))
        for who in np.unique(user):
            at = np.flatnonzero(user == who)
            n = max(1, int(round(0.2 * len(at))))
            held[at[np.argsort(u[at])[:n]]] = True
    train, test = np.zeros((U, I)), np.zeros((U, I))
    train[user[~held], item[~held]] = 1.0
    test[user[held], item[held]] = 1.0
    return train, test


def models(train: np.ndarray) -> dict[str, np.ndarray]:
    """Score matrices of four recommenders of different strength (float32)."""
    X = train
    out = {"popularity": np.broadcast_to(X.sum(0), X.shape).astype(np.float32).copy()}
    norms = np.sqrt(X.sum(0)) + 1e-12
    sim = (X.T @ X) / np.outer(norms, norms)
    np.fill_diagonal(sim, 0.0)
    out["item_knn"] = (X @ sim).astype(np.float32)
    _, _, vt = np.linalg.svd(X, full_matrices=False)
    v = vt[:50].T
    out["pure_svd"] = (X @ v @ v.T).astype(np.float32)
    gram = X.T @ X + 500.0 * np.eye(X.shape[1])
    p = np.linalg.inv(gram)
    b = -p / np.diag(p)
    np.fill_diagonal(b, 0.0)
    out["ease"] = (X @ b).astype(np.float32)
    return out


def order_of(values: dict[str, float]) -> tuple[str, ...]:
    return tuple(sorted(values, key=lambda m: -values[m]))


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--seeds", type=int, default=100)
    p.add_argument("--negatives", type=int, default=100)
    p.add_argument("--split", default="ratio", choices=("ratio", "loo"))
    p.add_argument("--metrics", default="recall@10,ndcg@10,hit_rate@10")
    p.add_argument("--estimators", default="sampled,bv,mle,rescaled")
    p.add_argument("--out", default=None, help="write the table as JSON")
    args = p.parse_args()
    import topkeval as tk

    rows = movielens()
    if rows is None:
        return
    train, test = split(rows, args.split)
    scores = models(train)
    metrics = args.metrics.split(",")
    estimators = args.estimators.split(",")
    print(f"MovieLens 100k: {train.shape[0]} users, {train.shape[1]} items, {int(train.sum()):,} training and "
          f"{int(test.sum()):,} held-out interactions ({args.split} split); m = {args.negatives} uniform negatives, "
          f"{args.seeds} seeds")
    full = tk.evaluate_matrix(scores, test, metrics, exclude=train).summary
    print("\nfull catalogue:\n" + full.round(4).to_string())
    runs = []
    t0 = time.perf_counter()
    for seed in range(args.seeds):
        res = tk.evaluate_sampled(scores, test, metrics, n_negatives=args.negatives, exclude=train, seed=seed,
                                  estimator=estimators)
        runs.append(res.summary)
    took = time.perf_counter() - t0
    print(f"\n{args.seeds} sampled evaluations in {took:.1f} s")
    names = list(scores)
    table = []
    for metric in metrics:
        truth = {m: float(full.loc[m, metric]) for m in names}
        true_order = order_of(truth)
        for est in estimators:
            col = next(c for c in runs[0].columns if c.startswith(metric + "[") and
                       (c.endswith(f":{est}]") or (est == "sampled" and "[sampled:" in c)))
            per_seed = np.array([[r.loc[m, col] for m in names] for r in runs])  # seeds x models
            agree = np.mean([order_of(dict(zip(names, row))) == true_order for row in per_seed])
            pairs = [(a, b) for a, b in itertools.combinations(names, 2)]
            pair_agree = np.mean([[(row[names.index(a)] > row[names.index(b)]) == (truth[a] > truth[b])
                                   for a, b in pairs] for row in per_seed])
            for i, m in enumerate(names):
                v = per_seed[:, i]
                table.append({"metric": metric, "estimator": est, "model": m, "full": truth[m],
                              "mean": float(v.mean()), "sd": float(v.std(ddof=1)) if len(v) > 1 else 0.0,
                              "rel_error": float(np.mean(np.abs(v - truth[m])) / truth[m]),
                              "rel_bias": float(abs(v.mean() - truth[m]) / truth[m]),
                              "order": float(agree), "pairs": float(pair_agree)})
    print("\nmodel x estimator: mean over seeds, mean |estimate - full| / full, |bias| / full, share of seeds "
          "ordering the models as the full catalogue")
    for metric in metrics:
        print(f"\n{metric} (full order: {' > '.join(order_of({m: float(full.loc[m, metric]) for m in names}))})")
        print(f"{'estimator':<10} {'model':<11} {'full':>7} {'mean':>7} {'sd':>7} {'rel.err':>8} {'rel.bias':>8} "
              f"{'order':>6} {'pairs':>6}")
        for row in table:
            if row["metric"] == metric:
                print(f"{row['estimator']:<10} {row['model']:<11} {row['full']:7.4f} {row['mean']:7.4f} "
                      f"{row['sd']:7.4f} {row['rel_error']:8.1%} {row['rel_bias']:8.1%} {row['order']:6.0%} "
                      f"{row['pairs']:6.0%}")
    timing = time_it(tk, scores, test, train, metrics, args.negatives)
    if args.out:
        Path(args.out).write_text(json.dumps({"table": table, "timing": timing}, indent=1))


def time_it(tk, scores, test, train, metrics, m) -> dict:
    def best(fn, repeat=3):
        times = []
        for _ in range(repeat):
            t = time.perf_counter()
            fn()
            times.append(time.perf_counter() - t)
        return min(times)

    out = {
        "evaluate_matrix (full catalogue)": best(lambda: tk.evaluate_matrix(scores, test, metrics, exclude=train)),
        "evaluate_sampled, sampled": best(lambda: tk.evaluate_sampled(scores, test, metrics, n_negatives=m,
                                                                      exclude=train, estimator="sampled")),
        "evaluate_sampled, corrected": best(lambda: tk.evaluate_sampled(scores, test, metrics, n_negatives=m,
                                                                        exclude=train, estimator="corrected")),
        "evaluate_sampled, sampled + corrected + full": best(lambda: tk.evaluate_sampled(
            scores, test, metrics, n_negatives=m, exclude=train)),
    }
    print(f"\ntime ({len(scores)} models, best of 3):")
    base = out["evaluate_matrix (full catalogue)"]
    for name, t in out.items():
        print(f"  {name:<46} {t * 1000:8.1f} ms  ({t / base:.2f} x evaluate_matrix)")
    return out


if __name__ == "__main__":
    main()
