"""Full-catalogue evaluation of a score matrix: topkeval vs torch.topk + gather vs torchmetrics.

    python benchmarks/matrix_bench.py [--users 20000] [--items 50000] [--device cpu|cuda] [--profile]

Also timed: one read of the matrix (``torch.aminmax``, the floor) and evaluate_matrix's other path
(on a CPU the GPU's algorithm, counts made with torch ops; on a GPU the selection copied to the
CPU kernel), with a check that both give the same per-user values; on a CPU, ap, rr and ndcg over
the whole list, counted on each row in place and selected out.

``--profile`` shows where evaluate_matrix spends its time instead (cProfile, top entries) and, on
a GPU, its device part against one read of the matrix (the bandwidth floor).

Metrics: precision and recall at 10, 20, 50 and R-precision. The topk + gather baseline is seed
002's method (top max(R), widened here to max(R, k): seed 002 itself is wrong for k > max R), gather, mask) and ignores ties; torchmetrics loops over users in Python,
so it runs on the first --tm-users users and its time is scaled to all users. Values are checked
against each other (scores are continuous: no ties).
"""

from __future__ import annotations

import os

os.environ.setdefault("TOPKEVAL_JIT", "1")  # warm-ups are small: load the compiled kernels there

import argparse
import cProfile
import pstats
import time


def main() -> None:
    import torch

    import topkeval as tk

    p = argparse.ArgumentParser()
    p.add_argument("--users", type=int, default=20_000)
    p.add_argument("--items", type=int, default=50_000)
    p.add_argument("--device", default="cpu")
    p.add_argument("--tm-users", type=int, default=500)
    p.add_argument("--profile", action="store_true", help="where evaluate_matrix spends its time")
    p.add_argument("--repeat", type=int, default=1, help="time each call this many times, keep the fastest")
    args = p.parse_args()
    gen = torch.Generator(device="cpu").manual_seed(0)
    U, I = args.users, args.items
    scores = torch.rand(U, I, generator=gen).to(args.device)
    n_rel = torch.randint(1, 30, (U,), generator=gen)
    users = torch.repeat_interleave(torch.arange(U), n_rel)
    items = torch.randint(0, I, (len(users),), generator=gen)
    edges = torch.unique(torch.stack([users, items]), dim=1)
    truth = torch.zeros(U, I, dtype=torch.bool, device=args.device)
    truth[edges[0], edges[1]] = True
    ks = (10, 20, 50)
    metrics = [f"{m}@{k}" for m in ("precision", "recall") for k in ks] + ["r_precision"]
    if args.device == "cuda":
        torch.cuda.synchronize()

    def timed_once(fn):
        t = time.perf_counter()
        out = fn()
        if args.device == "cuda":
            torch.cuda.synchronize()
        return time.perf_counter() - t, out

    def timed(fn):
        """The fastest of --repeat runs, and its result."""
        return min((timed_once(fn) for _ in range(max(1, args.repeat))), key=lambda x: x[0])

    tk.evaluate_matrix(scores[:100], tuple(edges[:, edges[0] < 100].numpy()), metrics=metrics)  # compile / warm
    if args.profile:
        profile(tk, scores, tuple(edges.numpy()), metrics, args, timed)
        return
    from topkeval.backends import matrix

    t_tk, res = timed(lambda: tk.evaluate_matrix(scores, tuple(edges.numpy()), metrics=metrics))
    t_read = min(timed(lambda: torch.aminmax(scores))[0] for _ in range(3))  # one read: the floor
    other = args.device == "cpu"  # on a CPU, the GPU's algorithm (torch ops) too; on a GPU, the CPU's selection
    matrix.DEVICE_COUNTS = True if other else False
    t_other, res_other = timed(lambda: tk.evaluate_matrix(scores, tuple(edges.numpy()), metrics=metrics))
    matrix.DEVICE_COUNTS = None
    t_np = timed(lambda: tk.evaluate_matrix(scores.numpy(), tuple(edges.numpy()), metrics=metrics))[0] if other else None

    def baseline():
        R = truth.sum(1).float()
        top = torch.topk(scores, max(int(R.max()), max(ks)), dim=1, sorted=True).indices
        hits = truth.gather(1, top).float()
        out = {}
        for k in ks:
            out[f"precision@{k}"] = float((hits[:, :k].sum(1) / k).mean())
            out[f"recall@{k}"] = float((hits[:, :k].sum(1) / R).mean())
        mask = torch.arange(1, hits.shape[1] + 1, device=hits.device) > R[:, None]
        out["r_precision"] = float((hits.masked_fill(mask, 0).sum(1) / R).mean())
        return out

    t_base, base = timed(baseline)
    print(f"{U:,} users x {I:,} items on {args.device} (fastest of {max(1, args.repeat)}); scores {scores.element_size() * U * I / 2**30:.1f} GiB")
    print(f"one read of the matrix     {t_read:8.2f} s   (torch.aminmax: the floor)")
    print(f"topkeval.evaluate_matrix   {t_tk:8.2f} s   ({t_tk / t_read:.1f}x one read)")
    print(f"  {'counted with torch ops' if other else 'selection, then the CPU kernel'}"
          f"{t_other:10.2f} s   ({t_other / t_read:.1f}x one read; the other path, same numbers: "
          f"{res_other.per_query.equals(res.per_query)})")
    if t_np is not None:
        print(f"  the same as a numpy array {t_np:8.2f} s   ({t_np / t_read:.1f}x one read)")
    if other:  # the whole list: ap, rr, ndcg without a cutoff, counted in place or selected out
        deep = ["ap", "rr", "ndcg"]
        t_deep, deep_res = timed(lambda: tk.evaluate_matrix(scores, tuple(edges.numpy()), metrics=deep))
        matrix.IN_PLACE_DEPTH = 0
        t_sel, sel_res = timed(lambda: tk.evaluate_matrix(scores, tuple(edges.numpy()), metrics=deep))
        matrix.IN_PLACE_DEPTH = 4
        same = bool(((deep_res.per_query[deep] - sel_res.per_query[deep]).abs() < 1e-12).all().all())
        print(f"ap, rr, ndcg (whole list)  {t_deep:8.2f} s   counted in place; {t_sel:.2f} s selected out "
              f"(same numbers: {same})")
    print(f"torch.topk + gather        {t_base:8.2f} s   ({t_base / t_tk:.2f}x topkeval)")
    worst = max(abs(base[m] - res.summary.iloc[0][m]) for m in metrics)
    print(f"  max |diff| of the means = {worst:.1e}; users with a tie across a cutoff (which the baseline "
          f"breaks arbitrarily): {res.info['ties_at_cutoff']['scores']:,}")
    try:
        from torchmetrics.functional.retrieval import retrieval_precision, retrieval_r_precision, retrieval_recall
    except ImportError:
        print("torchmetrics: not installed")
        return
    n = min(args.tm_users, U)

    def tm():
        for u in range(n):
            s, t = scores[u], truth[u]
            for k in ks:
                retrieval_precision(s, t, top_k=k)
                retrieval_recall(s, t, top_k=k)
            retrieval_r_precision(s, t)

    t_tm, _ = timed(tm)
    print(f"torchmetrics (scaled)      {t_tm * U / n:8.2f} s   ({t_tm * U / n / t_tk:.1f}x topkeval; "
          f"{n} users measured)")


def profile(tk, scores, edges, metrics, args, timed) -> None:
    """cProfile of one evaluate_matrix; on a GPU, its phases against one read of the matrix."""
    prof = cProfile.Profile()
    prof.enable()
    timed(lambda: tk.evaluate_matrix(scores, edges, metrics=metrics))
    prof.disable()
    pstats.Stats(prof).sort_stats("tottime").print_stats(15)
    if args.device != "cuda":
        return
    import numpy as np
    import torch

    from topkeval.backends.matrix import _select_torch
    from topkeval.kernels import torch_counts

    batch = max(1, (1 << 27) // args.items)
    users, items = (np.asarray(x) for x in edges)
    read = min(timed(lambda: float(scores.sum()))[0] for _ in range(3))
    topk = min(timed(lambda: [torch.topk(scores[u:u + batch], 50, dim=1) for u in range(0, args.users, batch)])[0]
               for _ in range(2))
    select = min(timed(lambda: [_select_torch(scores[u:u + batch], 50) for u in range(0, args.users, batch)])[0]
                 for _ in range(2))

    def counted():
        for u in range(0, args.users, batch):
            mine = (users >= u) & (users < u + batch)
            ones = np.ones(int(mine.sum()), bool)
            torch_counts.counts(scores[u:u + batch], 50, users[mine] - u, items[mine], ones.astype(float), ones,
                                ~ones, 0)

    counts = min(timed(counted)[0] for _ in range(2))
    total = min(timed(lambda: tk.evaluate_matrix(scores, edges, metrics=metrics))[0] for _ in range(2))
    gib = scores.element_size() * scores.numel() / 2**30
    print(f"one read of the matrix: {read:.3f} s ({gib / read:.0f} GiB/s); torch.topk(50) alone: {topk:.3f} s; "
          f"counts on the device and copy back: {counts:.3f} s; (the selection path's selection and copy: "
          f"{select:.3f} s); evaluate_matrix: {total:.3f} s ({total / read:.1f}x one read)")


if __name__ == "__main__":
    main()
