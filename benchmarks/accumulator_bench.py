"""A validation loop: MatrixEvaluator over batches vs one evaluate_matrix call vs torchmetrics' retrieval
modules fed the same batches.

    python benchmarks/accumulator_bench.py [--users 20000] [--items 5000] [--batch 1024] [--device cpu]
                                           [--repeat 3] [--tm-users 20000] [--threads N]

Scores are float32 (torch.rand: continuous, no ties), every user has 1 to 30 relevant items; metrics
recall@10, recall@20, ndcg@10, ndcg@20. torchmetrics: ``RetrievalRecall(top_k=k)`` and
``RetrievalNormalizedDCG(top_k=k)``, updated batch by batch with the flattened scores, targets and
user indexes (what a training loop does), then ``compute()``; they keep every score until then.
With ``--tm-users`` below ``--users`` torchmetrics runs on that many users and its time is scaled.
Means are checked against topkeval's (``conventions="torchmetrics"``: equal with these scores).
Times: best of ``--repeat`` (torchmetrics: one run when slower than 20 s), after a warm-up.
"""

from __future__ import annotations

import os

os.environ.setdefault("TOPKEVAL_JIT", "1")  # warm-ups are small: load the compiled kernels there

import argparse
import pickle
import time


def main() -> None:
    import torch

    import topkeval as tk

    p = argparse.ArgumentParser()
    p.add_argument("--users", type=int, default=20_000)
    p.add_argument("--items", type=int, default=5_000)
    p.add_argument("--batch", type=int, default=1024)
    p.add_argument("--device", default="cpu")
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--tm-users", type=int, default=None)
    p.add_argument("--threads", type=int, default=None, help="torch threads (1 avoids OpenMP spinning on a busy machine)")
    args = p.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    gen = torch.Generator(device="cpu").manual_seed(0)
    U, I, B = args.users, args.items, args.batch
    scores = torch.rand(U, I, generator=gen, dtype=torch.float32).to(args.device)
    n_rel = torch.randint(1, 31, (U,), generator=gen)
    rows = torch.repeat_interleave(torch.arange(U), n_rel)
    truth = torch.zeros(U, I, dtype=torch.bool)
    truth[rows, torch.randint(0, I, (len(rows),), generator=gen)] = True
    truth = truth.to(args.device)
    ks = (10, 20)
    metrics = [f"{m}@{k}" for m in ("recall", "ndcg") for k in ks]
    batches = [(u, min(U, u + B)) for u in range(0, U, B)]

    def sync():
        if args.device == "cuda":
            torch.cuda.synchronize()

    def best(fn, repeat):
        times, out = [], None
        for _ in range(repeat):
            sync()
            t = time.perf_counter()
            out = fn()
            sync()
            times.append(time.perf_counter() - t)
            if times[-1] > 20:
                break
        return min(times), out

    def accumulate():
        ev = tk.MatrixEvaluator(metrics, conventions="torchmetrics")
        with torch.no_grad():
            for u0, u1 in batches:
                ev.update(scores[u0:u1], truth[u0:u1])
        return ev, ev.compute()

    def whole():
        return tk.evaluate_matrix(scores, truth, metrics=metrics, conventions="torchmetrics")

    tk.evaluate_matrix(scores[:50], truth[:50], metrics=metrics)  # compile / load the kernels
    t_whole, res_whole = best(whole, args.repeat)
    t_acc, (ev, res_acc) = best(accumulate, args.repeat)
    state = len(pickle.dumps(ev._state))
    print(f"{U:,} users x {I:,} items, float32 on {args.device}, batches of {B} ({len(batches)} updates), "
          f"{', '.join(metrics)}; torch threads {torch.get_num_threads()}")
    print(f"evaluate_matrix, one call              {t_whole:8.2f} s")
    print(f"MatrixEvaluator, update per batch      {t_acc:8.2f} s   ({t_acc / t_whole:.2f}x one call); "
          f"state {state / 2**20:.1f} MiB")
    same = float((res_acc.summary - res_whole.summary).abs().to_numpy().max())
    print(f"  max |diff| of the means, accumulator vs one call = {same:.1e}")
    try:
        from torchmetrics.retrieval import RetrievalNormalizedDCG, RetrievalRecall
    except ImportError:
        print("torchmetrics: not installed")
        return
    n = min(args.tm_users or U, U)
    tm_batches = [(u0, min(u1, n)) for u0, u1 in batches if u0 < n]

    def tm():
        mods = {f"recall@{k}": RetrievalRecall(top_k=k) for k in ks}
        mods.update({f"ndcg@{k}": RetrievalNormalizedDCG(top_k=k) for k in ks})
        mods = {name: m.to(args.device) for name, m in mods.items()}
        t0 = time.perf_counter()
        with torch.no_grad():
            for u0, u1 in tm_batches:
                preds, target = scores[u0:u1], truth[u0:u1]
                index = torch.arange(u0, u1, device=preds.device)[:, None].expand(-1, I)
                for m in mods.values():
                    m.update(preds.reshape(-1), target.reshape(-1), indexes=index.reshape(-1))
        sync()
        t_update = time.perf_counter() - t0
        out = {name: float(m.compute()) for name, m in mods.items()}
        return t_update, out

    t_tm, (t_tm_update, tm_values) = best(tm, 1 if n * I > 2e7 else args.repeat)
    scale = U / n
    print(f"torchmetrics Retrieval*, same batches  {t_tm * scale:8.2f} s   ({t_tm * scale / t_acc:.1f}x the accumulator;"
          f" update {t_tm_update * scale:.2f} s, compute {(t_tm - t_tm_update) * scale:.2f} s"
          + (f"; {n:,} users measured, scaled" if n < U else "") + ")")
    want = tk.evaluate_matrix(scores[:n], truth[:n], metrics=metrics, conventions="torchmetrics").summary.iloc[0]
    worst = max(abs(tm_values[m] - float(want[m])) for m in metrics)
    print(f"  max |diff| of the means, torchmetrics vs topkeval = {worst:.1e}; torchmetrics keeps every score "
          f"until compute: {n * I * (4 + 1 + 8) * len(metrics) / 2**30:.1f} GiB for {len(metrics)} metrics")


if __name__ == "__main__":
    main()
