"""Sampled evaluation on MovieLens 100k: the sampled metrics and their corrections against the full catalogue.

    python benchmarks/sampled_bench.py [--seeds 100] [--negatives 100] [--split ratio|loo] [--out FILE]
    python benchmarks/sampled_bench.py --synthetic 2000x100000      # the timing alone, on random scores

MovieLens 100k (943 users, 1,682 films, 100,000 ratings; every rating an interaction) is read from
the copy RecBole's wheel ships (``recbole/dataset_example/ml-100k``), fetched with ``pip download
--no-deps recbole==1.2.1`` into ``benchmarks/data/`` (not committed: the GroupLens licence forbids
redistribution); without network access or pip, the benchmark says so and stops. Split: each user's
interactions 80/20 at random (``ratio``, seeded), or the latest one held out (``loo``, the NCF
protocol). Models, trained on the training part in numpy (``--models``): popularity (training
frequency), item-kNN (cosine similarity of items; ``item_knn10`` keeps each item's 10 nearest,
``item_knn`` all), PureSVD (Cremonesi et al. 2010, a matrix factorisation: the training matrix
projected on its top 8, 20 or 50 item factors: ``mf8``, ``mf20``, ``mf50``) and EASE (Steck 2019,
lambda 500). The default three, popularity, item_knn10 and mf8, differ by 18% or more in full
HR@10 and NDCG@10, and sampled HR@10 ranks mf8 above item_knn10, which the full catalogue ranks
the other way round (Krichene & Rendle's finding).

For each sampling seed, ``evaluate_sampled`` with m uniform negatives per held-out item: the sampled
metric and each correction (``bv``, ``mle``, ``rescaled``) of recall@10 and NDCG@10 (and hit_rate@10),
against the full catalogue (``evaluate_matrix`` with the training items excluded). The table gives per
model and estimator the mean over seeds, the mean relative error ``mean |estimate - full| / full``,
the relative bias ``|mean estimate - full| / full``, the coverage of the interval ``estimate +- 1.96
SE`` (``info["sampled"]["standard_error"]``) for the full value, the share of seeds in which the
estimator orders every model as the full catalogue does (``order``) and each pair of models
(``pairs``), and the share of (pair, seed) in which a paired t-test at 5% on the per-user values
declares the wrong order (``wrong``).
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


def item_knn(X: np.ndarray, neighbours: int | None = None) -> np.ndarray:
    """Item-kNN: the cosine similarity of items' training columns, each item's ``neighbours`` most
    similar kept (every one by default), summed over the user's training items."""
    norms = np.sqrt(X.sum(0)) + 1e-12
    sim = (X.T @ X) / np.outer(norms, norms)
    np.fill_diagonal(sim, 0.0)
    if neighbours:
        kth = -np.sort(-sim, axis=0)[neighbours - 1]
        sim = np.where(sim >= kth[None, :], sim, 0.0)
    return X @ sim


def pure_svd(X: np.ndarray, factors: int) -> np.ndarray:
    """PureSVD (Cremonesi et al. 2010), a matrix factorisation: the training matrix projected on its top
    ``factors`` right singular vectors."""
    _, _, vt = np.linalg.svd(X, full_matrices=False)
    v = vt[:factors].T
    return X @ v @ v.T


def ease(X: np.ndarray, lam: float = 500.0) -> np.ndarray:
    """EASE (Steck 2019): the closed-form item-item ridge regression with a zero diagonal."""
    p = np.linalg.inv(X.T @ X + lam * np.eye(X.shape[1]))
    b = -p / np.diag(p)
    np.fill_diagonal(b, 0.0)
    return X @ b


MODELS = {
    "popularity": lambda X: np.broadcast_to(X.sum(0), X.shape),
    "item_knn": item_knn,
    "item_knn10": lambda X: item_knn(X, 10),
    "mf8": lambda X: pure_svd(X, 8),
    "mf20": lambda X: pure_svd(X, 20),
    "mf50": lambda X: pure_svd(X, 50),
    "ease": ease,
}


def models(train: np.ndarray, names=("popularity", "item_knn10", "mf8")) -> dict[str, np.ndarray]:
    """Score matrices (float32) of recommenders of different strength, trained on ``train``."""
    return {name: np.ascontiguousarray(MODELS[name](train), dtype=np.float32) for name in names}


def order_of(values: dict[str, float]) -> tuple[str, ...]:
    return tuple(sorted(values, key=lambda m: -values[m]))


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--seeds", type=int, default=100)
    p.add_argument("--negatives", type=int, default=100)
    p.add_argument("--split", default="ratio", choices=("ratio", "loo"))
    p.add_argument("--metrics", default="recall@10,ndcg@10,hit_rate@10")
    p.add_argument("--estimators", default="sampled,bv,mle,rescaled")
    p.add_argument("--models", default="popularity,item_knn10,mf8", help=f"of {', '.join(MODELS)}")
    p.add_argument("--no-timing", action="store_true")
    p.add_argument("--out", default=None, help="write the table as JSON")
    p.add_argument("--synthetic", default=None, metavar="USERSxITEMS",
                   help="time only, on random float32 scores of this size (one held-out item per user, 2 models)")
    args = p.parse_args()
    import topkeval as tk

    if args.synthetic:
        users, items = (int(x) for x in args.synthetic.lower().split("x"))
        rng = np.random.default_rng(0)
        test = np.zeros((users, items), dtype=bool)
        test[np.arange(users), rng.integers(0, items, users)] = True
        scores = {name: rng.random((users, items), dtype=np.float32) for name in ("a", "b")}
        print(f"random scores: {users:,} users, {items:,} items, one held-out item each, m = {args.negatives}")
        time_it(tk, scores, test, None, args.metrics.split(","), args.negatives)
        return
    rows = movielens()
    if rows is None:
        return
    train, test = split(rows, args.split)
    scores = models(train, args.models.split(","))
    metrics = args.metrics.split(",")
    estimators = args.estimators.split(",")
    print(f"MovieLens 100k: {train.shape[0]} users, {train.shape[1]} items, {int(train.sum()):,} training and "
          f"{int(test.sum()):,} held-out interactions ({args.split} split); m = {args.negatives} uniform negatives, "
          f"{args.seeds} seeds")
    full = tk.evaluate_matrix(scores, test, metrics, exclude=train).summary
    print("\nfull catalogue:\n" + full.round(4).to_string())
    runs, covered, wrong = [], [], []
    t0 = time.perf_counter()
    names = list(scores)
    pairs = list(itertools.combinations(names, 2))
    for seed in range(args.seeds):
        res = tk.evaluate_sampled(scores, test, metrics, n_negatives=args.negatives, exclude=train, seed=seed,
                                  estimator=estimators)
        runs.append(res.summary)
        se = res.info["sampled"]["standard_error"]
        covered.append({(m, c): abs(res.summary.loc[m, c] - full.loc[m, c.split("[")[0]]) <= 1.96 * se[m][c]
                        for m in names for c in res.metrics})
        per_user = {m: res.per_query[res.per_query.model == m] for m in names}
        wrong.append({(a, b, c): _paired(per_user[a][c].to_numpy(), per_user[b][c].to_numpy(),
                                         full.loc[a, c.split("[")[0]] - full.loc[b, c.split("[")[0]])
                      for a, b in pairs for c in res.metrics})
    took = time.perf_counter() - t0
    print(f"\n{args.seeds} sampled evaluations in {took:.1f} s")
    table = []
    for metric in metrics:
        truth = {m: float(full.loc[m, metric]) for m in names}
        true_order = order_of(truth)
        for est in estimators:
            col = next(c for c in runs[0].columns if c.startswith(metric + "[") and
                       (c.endswith(f":{est}]") or (est == "sampled" and "[sampled:" in c)))
            per_seed = np.array([[r.loc[m, col] for m in names] for r in runs])  # seeds x models
            agree = np.mean([order_of(dict(zip(names, row))) == true_order for row in per_seed])
            pair_agree = np.mean([[(row[names.index(a)] > row[names.index(b)]) == (truth[a] > truth[b])
                                   for a, b in pairs] for row in per_seed])
            wrong_way = float(np.mean([[w[(a, b, col)][0] for a, b in pairs] for w in wrong]))
            delta_cover = float(np.mean([[w[(a, b, col)][1] for a, b in pairs] for w in wrong]))
            for i, m in enumerate(names):
                v = per_seed[:, i]
                table.append({"metric": metric, "estimator": est, "model": m, "full": truth[m],
                              "mean": float(v.mean()), "sd": float(v.std(ddof=1)) if len(v) > 1 else 0.0,
                              "rel_error": float(np.mean(np.abs(v - truth[m])) / truth[m]),
                              "rel_bias": float(abs(v.mean() - truth[m]) / truth[m]),
                              "coverage": float(np.mean([c[(m, col)] for c in covered])),
                              "order": float(agree), "pairs": float(pair_agree), "wrong_way": wrong_way,
                              "delta_coverage": delta_cover})
    print("\nmodel x estimator: mean over seeds (sd), mean |estimate - full| / full, |bias| / full, coverage of the "
          "95% interval +- 1.96 SE for the full value; share of seeds ordering every model as the full catalogue "
          "(order), each pair (pairs); share of (pair, seed) where a paired t-test at 5% declares the wrong order "
          "(wrong), and where the paired 95% interval of the difference covers the full catalogue's (dcover)")
    for metric in metrics:
        print(f"\n{metric} (full order: {' > '.join(order_of({m: float(full.loc[m, metric]) for m in names}))})")
        print(f"{'estimator':<10} {'model':<11} {'full':>7} {'mean':>7} {'sd':>7} {'rel.err':>8} {'rel.bias':>8} "
              f"{'cover':>6} {'order':>6} {'pairs':>6} {'wrong':>6} {'dcover':>6}")
        for row in table:
            if row["metric"] == metric:
                print(f"{row['estimator']:<10} {row['model']:<11} {row['full']:7.4f} {row['mean']:7.4f} "
                      f"{row['sd']:7.4f} {row['rel_error']:8.1%} {row['rel_bias']:8.1%} {row['coverage']:6.0%} "
                      f"{row['order']:6.0%} {row['pairs']:6.0%} {row['wrong_way']:6.1%} {row['delta_coverage']:6.0%}")
    recbole_check(tk, scores, test, train, args.negatives)
    timing = None if args.no_timing else time_it(tk, scores, test, train, metrics, args.negatives)
    if args.out:
        Path(args.out).write_text(json.dumps({"table": table, "timing": timing}, indent=1))


def _paired(a: np.ndarray, b: np.ndarray, true_delta: float) -> tuple[bool, bool]:
    """(whether a paired t-test at 5% finds a and b different in the direction opposite to the truth,
    whether the paired 95% interval of the mean difference covers the true difference)."""
    from scipy.stats import t as student

    d = a - b
    half = student.ppf(0.975, len(d) - 1) * d.std(ddof=1) / np.sqrt(len(d)) if len(d) > 1 else np.inf
    covers = bool(abs(d.mean() - true_delta) <= half)
    wrong = bool(half < abs(d.mean()) and true_delta != 0 and np.sign(d.mean()) != np.sign(true_delta))
    return wrong, covers


def recbole_check(tk, scores, test, train, m) -> None:
    """RecBole's Collector and Evaluator on evaluate_sampled's sampled lists (seed 0), when RecBole imports."""
    import sys
    import types

    try:
        import torch
    except ImportError:
        print("\nRecBole check skipped: torch is not installed")
        return
    for name in ("colorlog", "texttable", "torch.utils.tensorboard"):  # imported by RecBole, unused here
        try:
            __import__(name)
        except ImportError:
            stub = types.ModuleType(name)
            stub.ColoredFormatter = stub.Texttable = stub.SummaryWriter = object
            sys.modules[name] = stub
    try:
        from recbole.evaluator.collector import Collector
        from recbole.evaluator.evaluator import Evaluator
    except ImportError as exc:
        print(f"\nRecBole check skipped: {exc}")
        return
    from topkeval.analysis import sampled as S
    from topkeval.backends.matrix import prepare
    from topkeval.conventions import resolve

    np.float = float  # RecBole 1.2.1 still writes np.float
    config = {"metrics": ["Hit", "Recall", "NDCG", "MRR", "Precision", "MAP"], "topk": [10],
              "eval_args": {"mode": f"uni{m}"}, "device": "cpu", "metric_decimal_place": 12}
    metrics = ["hit_rate@10", "recall@10", "ndcg@10", "rr@10", "precision@10", "ap_capped@10"]
    names = {"hit": "hit_rate@10", "recall": "recall@10", "ndcg": "ndcg@10", "mrr": "rr@10",
             "precision": "precision@10", "map": "ap_capped@10"}
    print(f"\nRecBole {__import__('recbole').__version__}'s evaluator on the same sampled lists (seed 0):")
    for model, S_ in scores.items():
        prepared = prepare({model: S_}, test, train)
        draws = S.draw(prepared, resolve(), m, "uniform", 0)
        log = S.sampled_log(prepared, draws)
        row = torch.full((len(draws.users), S_.shape[1]), -np.inf, dtype=torch.float64)
        q = np.repeat(np.arange(len(draws.users)), np.diff(log.offsets))
        row[q, log.items] = torch.as_tensor(log.scores[model], dtype=torch.float64)
        collector, evaluator = Collector(config), Evaluator(config)
        collector.eval_batch_collect(row, None, torch.as_tensor(draws.pos_query), torch.as_tensor(draws.pos_item))
        theirs = evaluator.evaluate(collector.get_data_struct())
        ours = tk.evaluate_sampled({model: S_}, test, metrics, n_negatives=m, exclude=train, seed=0,
                                   estimator="sampled").summary.iloc[0]
        diff = max(abs(v - ours[f"{names[k.split('@')[0]]}[sampled:uni{m}]"]) for k, v in theirs.items())
        ties = int(sum(len(np.unique(log.scores[model][a:b])) < b - a for a, b in zip(log.offsets[:-1], log.offsets[1:])))
        print(f"  {model:<11} " + ", ".join(f"{k} {v:.4f}" for k, v in theirs.items())
              + f"; largest difference from topkeval's: {diff:.2e} (lists with tied scores: {ties})")


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
