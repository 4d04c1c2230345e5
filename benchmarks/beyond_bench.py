"""Beyond-accuracy metrics at scale: each measure on 1M queries x top 20, against the former code and the peers.

    python benchmarks/beyond_bench.py                        # 1,000,000 queries of 20 candidates, k = 20
    python benchmarks/beyond_bench.py --queries 100000 --old-queries 100000 --peers
    python benchmarks/beyond_bench.py --old 57a7ea0          # the former implementation from git (a rev)

A synthetic log: ``--queries`` queries of ``--candidates`` candidates (items of a 50,000-item
catalogue, a few very popular), 10% relevant, two score columns (``model`` and ``base``, the
baseline of unexpectedness), integer item ids; a training history of 5 items per query, 32-dim
item features, 50 categories. Times are wall seconds, best of ``--repeat``, after one warm-up call
(the kernels compiled and cached), on the machine's cores (``TOPKEVAL_THREADS``):

1. ``evaluate(recall@k)`` alone, for scale;
2. each measure alone through ``Results.with_beyond`` (one ranking pass of both models and the
   per-query sums; the catalogue-level ones through ``beyond_accuracy(metrics=[...])``), then all of
   them in one call;
3. the former ``beyond_accuracy`` (means only, per-query loops in pandas; ``--old REV`` reads it from
   git: give the revision, 57a7ea0 is the last before per-query values) on ``--old-queries``
   queries, with and without features (diversity);
4. with ``--peers`` (the peers installed in this interpreter) or ``--peer-python PATH`` (another
   interpreter that has them: RecTools, RePlay and Evidently pin numpy < 2 or pandas < 3), each
   peer measure's time on ``--peer-queries`` queries, and the largest difference between its
   per-user values and topkeval's on the same log (``ties`` never arise: distinct random scores).
"""

from __future__ import annotations

import argparse
import importlib.util
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]

MEASURES = ["novelty@{k}", "novelty(variant=replay)@{k}", "popularity@{k}", "tail@{k}", "mean_pop_rank@{k}",
            "diversity@{k}", "category_diversity@{k}", "unexpectedness@{k}", "serendipity@{k}",
            "serendipity(variant=recommenders)@{k}", "pauc@{k}", "pap@{k}", "rbp_norm@{k}"]
CATALOG = ["coverage@{k}", "gini@{k}", "entropy@{k}", "entropy(variant=recbole)@{k}", "personalization@{k}"]


def make_log(queries: int, candidates: int, seed: int = 0, n_items: int = 50_000):
    rng = np.random.default_rng(seed)
    base = (rng.zipf(1.3, queries) - 1) % n_items
    step = rng.integers(1, 50, queries)
    items = (base[:, None] + np.arange(candidates)[None, :] * step[:, None]) % n_items  # distinct within a query
    n = queries * candidates
    log = pd.DataFrame({"query": np.repeat(np.arange(queries), candidates), "item": items.ravel(),
                        "relevance": (rng.random(n) < 0.1).astype(np.int8),
                        "model": rng.random(n), "base": rng.random(n)})
    hist = pd.DataFrame({"query": np.repeat(np.arange(queries), 5),
                         "item": (rng.zipf(1.3, queries * 5) - 1) % n_items})
    features = pd.DataFrame(rng.normal(size=(n_items, 32)), index=pd.RangeIndex(n_items))
    categories = pd.Series(rng.integers(0, 50, n_items), index=pd.RangeIndex(n_items))
    return log, hist, features, categories


def needs(name: str, inputs: dict) -> dict:
    """The inputs a measure reads (each given input is checked, so a measure is timed with its own)."""
    wanted = {"diversity": ["features"], "category_diversity": ["categories"], "unexpectedness": ["baseline"],
              "novelty(variant=replay)": ["history"], "serendipity(variant=recommenders)": ["history", "features"]}
    return {key: inputs[key] for key in wanted.get(name.split("@")[0], [])}


def best(fn, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def old_module(rev: str):
    """The former analysis/beyond.py from git, loaded as topkeval.analysis._former_beyond."""
    source = subprocess.check_output(["git", "-C", str(ROOT), "show", f"{rev}:src/topkeval/analysis/beyond.py"])
    spec = importlib.util.spec_from_loader("topkeval.analysis._former_beyond", loader=None)
    module = importlib.util.module_from_spec(spec)
    module.__package__ = "topkeval.analysis"
    sys.modules[spec.name] = module
    exec(compile(source, "former_beyond.py", "exec"), module.__dict__)
    return module


class FormerBackend:
    """The CPU backend with the method the former beyond_accuracy read its lists with (removed with it):
    each row of a model's top k, ``query`` (its position in the log), ``item``, ``p``, ``g``, ``e``, ``L``."""

    def __init__(self, backend):
        self.backend = backend

    def exposure(self, log, R, conv, model: str, k: int) -> pd.DataFrame:
        from topkeval.engine.rules import comparable_scores, threshold, tie_rule
        from topkeval.kernels import cpu

        rel = log.relevant(conv)
        R = log.per_query_sum(rel) if R is None else R
        keep = R > 0 if conv.empty_queries == "skip" else np.ones(log.n_queries, bool)
        scores = comparable_scores(log.scores[model], conv)
        tie, items = tie_rule(log, conv, scores)
        thr = threshold(conv)
        p, g, e = cpu.exposure(log.offsets, scores, rel, log.grades.astype(np.float64), items, thr, tie,
                               np.full(log.n_queries, k, np.int64))
        q_of_row = np.repeat(np.arange(log.n_queries), np.diff(log.offsets))
        n_kept = log.per_query_sum(scores >= thr)
        rows = np.flatnonzero((p > 0) & keep[q_of_row])
        return pd.DataFrame({"query": q_of_row[rows], "item": pd.Series(log.item_ids(log.items[rows]), dtype=object),
                             "p": p[rows], "g": g[rows], "e": e[rows], "L": np.minimum(k, n_kept[q_of_row[rows]])})


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--queries", type=int, default=1_000_000)
    p.add_argument("--candidates", type=int, default=20)
    p.add_argument("--k", type=int, default=20)
    p.add_argument("--repeat", type=int, default=2)
    p.add_argument("--old", default=None, help="a git revision holding the former analysis/beyond.py")
    p.add_argument("--old-queries", type=int, default=1_000_000)
    p.add_argument("--peers", action="store_true", help="the peers installed in this interpreter")
    p.add_argument("--peer-python", default=None, help="an interpreter where the peers are installed (they pin "
                                                       "older numpy and pandas): its values and times, compared")
    p.add_argument("--peers-json", action="store_true", help=argparse.SUPPRESS)  # the peer interpreter's side
    p.add_argument("--peer-data", default=None, help=argparse.SUPPRESS)
    p.add_argument("--peer-queries", type=int, default=100_000)
    args = p.parse_args()
    k = args.k
    if args.peers_json:
        import json

        print(json.dumps(peers(args, k)))
        return
    ours(args, k)
    if args.peers or args.peer_python:
        if args.peer_python:
            import json
            import tempfile

            with tempfile.TemporaryDirectory() as folder:
                path = str(Path(folder) / "log.npz")
                save_log(path, *make_log(args.peer_queries, args.candidates))
                command = [args.peer_python, __file__, "--peers-json", "--k", str(k), "--peer-data", path]
                found = json.loads(subprocess.check_output(command).decode().strip().splitlines()[-1])
        else:
            found = peers(args, k)
        compare_with_peers(args, k, found)


def ours(args, k: int) -> None:
    import topkeval as tk

    log, hist, features, categories = make_log(args.queries, args.candidates)
    users = hist["query"].nunique()
    pop = pd.Series(1.0 / users, index=features.index)  # every item a share (the former code needs one)
    pop.update(hist.drop_duplicates()["item"].value_counts() / users)
    inputs = dict(features=features, categories=categories, history=hist, baseline="base")
    print(f"{args.queries:,} queries x {args.candidates} candidates ({len(log):,} rows), k = {k}")
    res = tk.evaluate(log, [f"recall@{k}"], score=["model", "base"], item="item")
    res.with_beyond([f"novelty@{k}"])  # warm-up: compile (or load) the kernels
    t = best(lambda: tk.evaluate(log, [f"recall@{k}"], score=["model", "base"], item="item"), args.repeat)
    print(f"\n| measure (its inputs only) | seconds (2 models) |\n|---|---:|\n| evaluate(recall@{k}) | {t:.2f} |")
    for name in [m.format(k=k) for m in MEASURES]:
        mine = needs(name, inputs)
        t = best(lambda name=name, mine=mine: res.with_beyond([name], **mine), args.repeat)
        print(f"| {name} | {t:.2f} |", flush=True)
    for name in [m.format(k=k) for m in CATALOG]:
        t = best(lambda name=name: res.beyond_accuracy(metrics=[name]), args.repeat)
        print(f"| {name} (beyond_accuracy) | {t:.2f} |", flush=True)
    every = [m.format(k=k) for m in MEASURES]
    t = best(lambda: res.with_beyond(every, **inputs), args.repeat)
    print(f"| all {len(every)} per-query measures, one call | {t:.2f} |")
    t = best(lambda: res.beyond_accuracy(k=k, popularity=pop.to_dict(), features=features), args.repeat)
    print(f"| beyond_accuracy(k={k}, features=) (the former five columns) | {t:.2f} |")
    if args.old:
        former = old_module(args.old)
        small = log[log["query"] < args.old_queries]
        res_small = tk.evaluate(small, [f"recall@{k}"], score=["model", "base"], item="item")
        n = small["query"].nunique()
        print(f"\nformer beyond_accuracy ({args.old}) on {n:,} queries, and the new one on the same:")
        print("| call | former s | new s |\n|---|---:|---:|")
        from dataclasses import replace

        ev = replace(res_small.evaluation, backend=FormerBackend(res_small.evaluation.backend))
        popd = pop.to_dict()
        t_old = best(lambda: former.beyond_accuracy(ev, k, popd, None, None, None), 1)
        t_new = best(lambda: res_small.beyond_accuracy(k=k, popularity=popd), args.repeat)
        print(f"| coverage, novelty, popularity, gini | {t_old:.2f} | {t_new:.2f} |", flush=True)
        t_old = best(lambda: former.beyond_accuracy(ev, k, popd, features, None, None), 1)
        t_new = best(lambda: res_small.beyond_accuracy(k=k, popularity=popd, features=features), args.repeat)
        print(f"| the same and diversity (32-dim features) | {t_old:.2f} | {t_new:.2f} |")


#: measure -> (topkeval's name, how its per-query value compares with the peer's: a factor)
PEER_MEASURES = {
    "RecTools MeanInvUserFreq": "novelty@{k}",
    "RecTools AvgRecPopularity": "popularity@{k}",  # interactions: times the users of the history
    "RecTools IntraListDiversity (cosine distance)": "diversity@{k}",
    "RecTools Serendipity": "serendipity@{k}",
    "RecTools PartialAUC": "pauc@{k}",
    "RecTools PAP": "pap@{k}",
    "RecTools CatalogCoverage(normalize=True)": "coverage@{k}",
    "RePlay Novelty": "novelty(variant=replay)@{k}",
    "RePlay Unexpectedness": "unexpectedness@{k}",
    "RePlay CategoricalDiversity": "category_diversity@{k}",
    "Evidently PersonalizationMetric": "personalization@{k}",
    "Evidently NoveltyMetric": "novelty@{k}",
}


def save_log(path: str, log, hist, features, categories) -> None:
    """The log in a file for the peers' interpreter (numpy 1 and 2 draw different zipf samples)."""
    np.savez(path, **{f"log_{c}": log[c].to_numpy() for c in log.columns},
             **{f"hist_{c}": hist[c].to_numpy() for c in hist.columns},
             features=features.to_numpy(), categories=categories.to_numpy())


def load_log(path: str):
    data = np.load(path)
    log = pd.DataFrame({c[4:]: data[c] for c in data.files if c.startswith("log_")})
    hist = pd.DataFrame({c[5:]: data[c] for c in data.files if c.startswith("hist_")})
    return log, hist, pd.DataFrame(data["features"]), pd.Series(data["categories"])


def peers(args, k: int) -> dict:
    """Each installed peer's time and values (per user, or one number) on the ``--peer-queries`` log."""
    log, hist, features, categories = (load_log(args.peer_data) if args.peer_data else
                                       make_log(args.peer_queries, args.candidates))
    log = log.sort_values(["query", "model"], ascending=[True, False])
    log["rank"] = log.groupby("query").cumcount() + 1
    reco = log[log["rank"] <= k]
    truth = log[log["relevance"] > 0]
    hist = hist.drop_duplicates()
    out: dict = {}

    def timed(name, call):
        t0 = time.perf_counter()
        value = call()
        took = time.perf_counter() - t0
        if isinstance(value, pd.Series):
            value = {str(u): (None if pd.isna(v) else float(v)) for u, v in value.items()}
        elif isinstance(value, dict):
            value = {str(u): (None if pd.isna(v) else float(v)) for u, v in value.items()}
        else:
            value = float(value)
        out[name] = {"seconds": took, "value": value}

    try:
        from rectools import Columns
        from rectools.metrics import (
            PAP,
            AvgRecPopularity,
            CatalogCoverage,
            IntraListDiversity,
            MeanInvUserFreq,
            PairwiseDistanceCalculator,
            PartialAUC,
            Serendipity,
        )
    except ImportError:
        out["RecTools"] = None
    else:
        cols = {"query": Columns.User, "item": Columns.Item, "rank": Columns.Rank}
        r = reco.rename(columns=cols)[[Columns.User, Columns.Item, Columns.Rank]]
        full = log.rename(columns=cols)[[Columns.User, Columns.Item, Columns.Rank]]
        t = truth.rename(columns=cols)[[Columns.User, Columns.Item]]
        h = hist.rename(columns=cols)[[Columns.User, Columns.Item]]
        unit = features.to_numpy() / np.linalg.norm(features.to_numpy(), axis=1)[:, None]

        class Cosine(PairwiseDistanceCalculator):
            def _get_distances_for_item_pairs(self, items_0, items_1):
                return 1.0 - np.einsum("ij,ij->i", unit[np.asarray(items_0)], unit[np.asarray(items_1)])

        timed("RecTools MeanInvUserFreq", lambda: MeanInvUserFreq(k).calc_per_user(r, h))
        timed("RecTools AvgRecPopularity", lambda: AvgRecPopularity(k).calc_per_user(r, h))
        timed("RecTools IntraListDiversity (cosine distance)",
              lambda: IntraListDiversity(k, Cosine()).calc_per_user(r))
        timed("RecTools Serendipity", lambda: Serendipity(k).calc_per_user(r, t, h, np.arange(50_000)))
        timed("RecTools PartialAUC", lambda: PartialAUC(k).calc_per_user(full, t))
        timed("RecTools PAP", lambda: PAP(k).calc_per_user(full, t))
        timed("RecTools CatalogCoverage(normalize=True)", lambda: CatalogCoverage(k, normalize=True).calc(
            r, np.arange(50_000)))
    try:
        from replay.metrics import CategoricalDiversity, Novelty, PerUser, Unexpectedness
    except ImportError:
        out["RePlay"] = None
    else:
        rp = reco.rename(columns={"query": "query_id", "item": "item_id", "model": "rating"})
        rp = rp[["query_id", "item_id", "rating"]]
        train = hist.rename(columns={"query": "query_id", "item": "item_id"})
        base = log.sort_values(["query", "base"], ascending=[True, False]).groupby("query").head(k)
        base = base.rename(columns={"query": "query_id", "item": "item_id", "base": "rating"})
        cats = rp.assign(category_id=categories.to_numpy()[rp["item_id"].to_numpy()])
        timed("RePlay Novelty", lambda: Novelty(k, mode=PerUser())(rp, train)[f"Novelty-PerUser@{k}"])
        timed("RePlay Unexpectedness", lambda: Unexpectedness(k, mode=PerUser())(
            rp, base[["query_id", "item_id", "rating"]])[f"Unexpectedness-PerUser@{k}"])
        timed("RePlay CategoricalDiversity", lambda: CategoricalDiversity(k, mode=PerUser())(
            cats[["query_id", "category_id", "rating"]])[f"CategoricalDiversity-PerUser@{k}"])
    try:
        from evidently.legacy.metrics import NoveltyMetric, PersonalizationMetric
        from evidently.legacy.pipeline.column_mapping import RecomType
    except ImportError:
        out["Evidently"] = None
    else:
        ev = reco[["query", "item", "rank"]]
        timed("Evidently PersonalizationMetric", lambda: PersonalizationMetric(k).get_diversity(
            ev, "query", "item", "rank", k, RecomType.RANK)[0])
        users = hist.groupby("item")["query"].nunique() / hist["query"].nunique()
        timed("Evidently NoveltyMetric", lambda: NoveltyMetric(k).get_miuf(
            ev, k, RecomType.RANK, "query", "item", "rank", users)[0])
    return out


def compare_with_peers(args, k: int, found: dict) -> None:
    """Our values on the peers' log beside theirs: the largest difference over the users both have."""
    import topkeval as tk

    log, hist, features, categories = make_log(args.peer_queries, args.candidates)
    hist = hist.drop_duplicates()
    res = tk.evaluate(log, [f"recall@{k}"], score=["model", "base"], item="item", empty_queries="keep")
    names = sorted({v.format(k=k) for v in PEER_MEASURES.values()})
    per_query = [n for n in names if tk.parse_metric(n).info.beyond == "query"]
    catalog = [n for n in names if n not in per_query]
    inputs = dict(history=hist, features=features, categories=categories, baseline="base", catalog=50_000)
    ours = res.with_beyond(per_query, **inputs).per_query
    ours = ours[ours["model"] == "model"].set_index("query")
    table = res.beyond_accuracy(metrics=catalog, history=hist, catalog=50_000)
    R = log.groupby("query")["relevance"].sum()
    n_hist = hist["query"].nunique()
    print(f"\nagreement with the peers on {args.peer_queries:,} queries (k = {k}):")
    print("| peer measure | topkeval | peer s | users compared | largest difference |\n|---|---|---:|---:|---:|")
    for peer, name in PEER_MEASURES.items():
        got = found.get(peer)
        name = name.format(k=k)
        if got is None:
            library = peer.split()[0]
            if library in found and found[library] is None:
                print(f"| {peer} | {name} | not installed | | |")
            continue
        theirs = got["value"]
        if not isinstance(theirs, dict):
            mine = float(table.loc["model", name])
            print(f"| {peer} | {name} | {got['seconds']:.2f} | all | {abs(mine - theirs):.2g} |")
            continue
        users = [u for u, v in theirs.items() if v is not None]
        mine = ours[name].reindex([int(u) for u in users]).to_numpy()
        want = np.array([theirs[u] for u in users])
        if name.startswith("popularity"):
            want = want / n_hist  # RecTools counts interactions
        if name.startswith(("pauc", "pap")):
            keep = R.reindex([int(u) for u in users]).to_numpy() > 0  # RecTools: test users only
            mine, want = mine[keep], want[keep]
        if peer.startswith("Evidently Novelty"):  # Evidently leaves out an item without history: lists without one
            top = log.sort_values(["query", "model"], ascending=[True, False]).groupby("query").head(k)
            cold = top.assign(cold=~top["item"].isin(hist["item"])).groupby("query")["cold"].any()
            keep = ~cold.reindex([int(u) for u in users]).to_numpy()
            mine, want = mine[keep], want[keep]
        both = ~np.isnan(mine)
        diff = float(np.max(np.abs(mine[both] - want[both]))) if both.any() else float("nan")
        print(f"| {peer} | {name} | {got['seconds']:.2f} | {int(both.sum()):,} | {diff:.2g} |")


if __name__ == "__main__":
    sys.exit(main())
