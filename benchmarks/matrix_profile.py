"""Where evaluate_matrix spends its time on one large matrix (cProfile, top entries), and on a GPU
how its device part compares with one read of the matrix (the bandwidth floor).

    python benchmarks/matrix_profile.py --users 100000 --items 50000 --device cuda
"""

from __future__ import annotations

import os

os.environ.setdefault("TOPKEVAL_JIT", "1")  # warm-ups are small: load the compiled kernels there

import argparse
import cProfile
import pstats


def main() -> None:
    import torch

    import topkeval as tk

    p = argparse.ArgumentParser()
    p.add_argument("--users", type=int, default=20_000)
    p.add_argument("--items", type=int, default=50_000)
    p.add_argument("--device", default="cpu")
    args = p.parse_args()
    gen = torch.Generator().manual_seed(0)
    scores = torch.rand(args.users, args.items, generator=gen).to(args.device)
    n_rel = torch.randint(1, 30, (args.users,), generator=gen)
    users = torch.repeat_interleave(torch.arange(args.users), n_rel)
    edges = torch.stack([users, torch.randint(0, args.items, (len(users),), generator=gen)]).numpy()
    metrics = [f"{m}@{k}" for m in ("precision", "recall") for k in (10, 20, 50)] + ["r_precision"]
    tk.evaluate_matrix(scores[:100], edges[:, edges[0] < 100], metrics=metrics)  # compile / warm
    prof = cProfile.Profile()
    prof.enable()
    tk.evaluate_matrix(scores, edges, metrics=metrics)
    if args.device == "cuda":
        torch.cuda.synchronize()
    prof.disable()
    pstats.Stats(prof).sort_stats("tottime").print_stats(15)
    if args.device == "cuda":
        import time

        from topkeval.matrix import _select_torch

        def phase(fn):
            torch.cuda.synchronize()
            t = time.perf_counter()
            fn()
            torch.cuda.synchronize()
            return time.perf_counter() - t

        batch = max(1, (1 << 27) // args.items)
        read = min(phase(lambda: float(scores.sum())) for _ in range(3))
        select = min(phase(lambda: [_select_torch(scores[u:u + batch], 50) for u in range(0, args.users, batch)])
                     for _ in range(2))
        total = min(phase(lambda: tk.evaluate_matrix(scores, edges, metrics=metrics)) for _ in range(2))
        gib = scores.element_size() * scores.numel() / 2**30
        print(f"one read of the matrix: {read:.3f} s ({gib / read:.0f} GiB/s); selection on the device and "
              f"copy back: {select:.3f} s; evaluate_matrix: {total:.3f} s")


if __name__ == "__main__":
    main()
