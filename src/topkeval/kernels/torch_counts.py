"""The counts of the CPU kernel, made with torch ops on the device of a score matrix (a GPU).

For each judged cell (user u, item c, score s) of a batch of rows, the CPU kernel needs ``g`` (cells
of the row scored above s), ``e`` (cells scored s: its tie group), ``r`` (relevant cells in that
group) and ``b`` (group members the tie rule puts before it); see :mod:`topkeval.kernels.cpu`.
Here they are computed where the scores live, and only these few integers per relevant cell leave
the device, never the scores:

* the T-th largest score ``v`` of each row and the top T values, sorted (``torch.topk``), with T
  the deepest rank the metrics look at; a cell scoring below ``v`` is beyond every cutoff and is
  dropped (it contributes nothing);
* ``g`` and ``e`` by binary search of s in its row's top T (a batched ``torch.searchsorted``),
  except in the tie group at the boundary (s == v), which may run past T: there ``e`` (and the
  item order's ``b``) come from a pass over those rows only;
* ``r`` and the ``b`` of ``optimistic`` / ``pessimistic`` from the judged cells alone, grouped by
  (row, score) with stable sorts: every other cell of a group is unjudged (grade 0, not relevant),
  and is counted as ``e`` minus the judged members;
* the ``b`` of ``first`` / ``item_asc`` / ``item_desc`` (columns ascending or descending) by binary
  search of (group start, column) in the row's top T ordered by (score descending, column).

Exact for every tie rule: the tests compare these counts' statistics with the CPU kernel's on the
long format, on CPU tensors (the same ops run on CUDA).
"""

from __future__ import annotations

import math

import numpy as np

from .cpu import TIE_EXPECTED, TIE_FIRST, TIE_ITEM_ASC, TIE_ITEM_DESC, TIE_OPTIMISTIC, TIE_PESSIMISTIC

#: Cells of the boundary rows compared at once (bounds the extra memory of that pass).
BOUNDARY_CELLS = 1 << 24


def counts(S, depth: int, rows: np.ndarray, cols: np.ndarray, grades: np.ndarray, rel: np.ndarray,
           gain: np.ndarray, tie: int, positive_hits: bool = False) -> dict:
    """The kernel's counts for the judged cells of a batch of rows that can reach the top ``depth``.

    Parameters
    ----------
    S : torch.Tensor, shape (B, I)
        Scores, float32 or float64, with -inf in cells that are not candidates (excluded, below
        ``score_threshold``).
    depth : int
        The deepest rank any metric looks at (:meth:`topkeval.engine.Plan.depth`).
    rows, cols, grades : ndarray
        The judged cells (non-zero grades), in row-major order (a CSR's order).
    rel, gain : ndarray of bool
        Per judged cell: relevant by its grade; some discounted gain of it is positive.
    tie : int
        A ``TIE_*`` code of :mod:`topkeval.kernels.cpu`.
    positive_hits : bool
        A relevant cell scoring 0 or less counts as not relevant (``nonpositive_scores="miss"``).

    Returns
    -------
    dict of ndarray
        For the active cells (relevant, or with a positive gain) at or above their row's T-th
        score, in row-major order: ``cell`` (index into the judged cells), ``row``, ``g``, ``e``,
        ``r``, ``b`` (int64) and ``rel`` (bool, after ``positive_hits``).
    """
    import torch

    dev = S.device
    B, I = S.shape
    T = max(1, min(int(depth), I))
    r_rows = torch.as_tensor(rows, device=dev)
    r_cols = torch.as_tensor(cols, device=dev)
    s = S[r_rows, r_cols]
    vals, idx = torch.topk(S, T, dim=1, sorted=True)  # descending
    v = vals[:, -1]
    relt = torch.as_tensor(rel, device=dev)
    if positive_hits:
        relt = relt & (s > 0)
    inside = (s >= v[r_rows]) & (s > -math.inf)
    sel = torch.nonzero(inside).squeeze(1)  # row-major order kept
    cr, cc, cs = r_rows[sel], r_cols[sel], s[sel]
    crel = relt[sel]
    cgr = torch.as_tensor(grades, device=dev)[sel]
    cact = crel | torch.as_tensor(gain, device=dev)[sel]
    A = int(sel.shape[0])
    empty = np.zeros(0, np.int64)
    if A == 0:
        return {"cell": empty, "row": empty, "g": empty, "e": empty, "r": empty, "b": empty,
                "rel": np.zeros(0, bool)}
    # each cell's place in a (B, M) table of its row's cells, for batched binary searches
    per_row = torch.bincount(cr, minlength=B)
    pos = torch.arange(A, device=dev) - (torch.cumsum(per_row, 0) - per_row)[cr]
    M = int(per_row.max())
    neg = (-vals).contiguous()  # ascending
    table = torch.full((B, M), math.inf, dtype=S.dtype, device=dev)
    table[cr, pos] = -cs
    g = torch.searchsorted(neg, table, right=False)[cr, pos]  # top-T values > s
    e = torch.searchsorted(neg, table, right=True)[cr, pos] - g  # top-T values == s
    item_rule = tie in (TIE_FIRST, TIE_ITEM_ASC, TIE_ITEM_DESC)
    b_asc = _column_order(vals, idx, cr, cc, g, pos, B, M, I) if item_rule else None
    # the tie group at the boundary may run past the top T: count it over the whole row
    at = torch.nonzero(cs == v[cr]).squeeze(1)
    if len(at):
        brows = torch.unique(cr[at])
        which = torch.searchsorted(brows, cr[at])
        step = max(1, BOUNDARY_CELLS // I)
        e_at = torch.empty(len(brows), dtype=torch.int64, device=dev)
        before = torch.empty(len(at), dtype=torch.int64, device=dev) if item_rule else None
        for lo in range(0, len(brows), step):
            chunk = brows[lo:lo + step]
            eq = S[chunk] == v[chunk, None]
            if item_rule:
                cum = torch.cumsum(eq, dim=1, dtype=torch.int32)
                e_at[lo:lo + step] = cum[:, -1]
                mine = (which >= lo) & (which < lo + len(chunk))
                before[mine] = cum[which[mine] - lo, cc[at[mine]]].long() - 1  # type: ignore[index]
            else:
                e_at[lo:lo + step] = eq.sum(1)
        e[at] = e_at[which]
        if item_rule:
            b_asc[at] = before  # type: ignore[index]
    r, b = _group_counts(cr, cs, crel, cgr, e, tie, b_asc)
    keep = torch.nonzero(cact).squeeze(1)
    out = {"cell": sel[keep], "row": cr[keep], "g": g[keep], "e": e[keep], "r": r[keep], "b": b[keep]}
    host = {k: t.long().cpu().numpy() for k, t in out.items()}
    host["rel"] = crel[keep].cpu().numpy()
    return host


def _column_order(vals, idx, cr, cc, g, pos, B: int, M: int, I: int):
    """Per cell: members of its tie group with a smaller column, searched in its row's top T
    ordered by (score descending, column ascending) under the key ``group start * (I + 1) + column``
    (strictly increasing along each row). Exact for groups inside the top T."""
    import torch

    by_col = torch.argsort(idx, dim=1)
    v1, i1 = vals.gather(1, by_col), idx.gather(1, by_col)
    by_score = torch.argsort(-v1, dim=1, stable=True)
    v2, i2 = v1.gather(1, by_score), i1.gather(1, by_score)
    neg2 = (-v2).contiguous()
    start = torch.searchsorted(neg2, neg2, right=False)  # the group start of each entry
    key = (start * (I + 1) + i2).contiguous()
    table = torch.full((B, M), torch.iinfo(torch.int64).max, dtype=torch.int64, device=vals.device)
    table[cr, pos] = g * (I + 1) + cc
    return torch.searchsorted(key, table, right=False)[cr, pos] - g


def _group_counts(cr, cs, crel, cgr, e, tie: int, b_asc):
    """``r`` (relevant judged cells of each cell's tie group) and ``b`` under the tie rule."""
    import torch

    A = len(cr)
    dev = cr.device
    order = torch.arange(A, device=dev)
    if tie in (TIE_OPTIMISTIC, TIE_PESSIMISTIC):  # within a group: relevance, then grade, then column
        sign = -1.0 if tie == TIE_OPTIMISTIC else 1.0
        order = order[torch.argsort(sign * cgr.double()[order], stable=True)]
        rank_rel = (~crel if tie == TIE_OPTIMISTIC else crel).to(torch.int8)
        order = order[torch.argsort(rank_rel[order], stable=True)]
    order = order[torch.argsort(-cs[order], stable=True)]
    order = order[torch.argsort(cr[order], stable=True)]
    sr, ss = cr[order], cs[order]
    new = torch.ones(A, dtype=torch.bool, device=dev)
    new[1:] = (sr[1:] != sr[:-1]) | (ss[1:] != ss[:-1])
    gid = torch.cumsum(new, 0) - 1
    firsts = torch.nonzero(new).squeeze(1)
    r_group = torch.zeros(len(firsts), dtype=torch.int64, device=dev).index_add_(0, gid, crel[order].long())
    judged = torch.bincount(gid, minlength=len(firsts))
    r = torch.empty(A, dtype=torch.int64, device=dev)
    r[order] = r_group[gid]
    if tie == TIE_EXPECTED:
        return r, torch.zeros(A, dtype=torch.int64, device=dev)
    if b_asc is not None:
        return r, (e - 1 - b_asc) if tie == TIE_ITEM_DESC else b_asc
    place = torch.empty(A, dtype=torch.int64, device=dev)
    place[order] = torch.arange(A, device=dev) - firsts[gid]
    unjudged = torch.empty(A, dtype=torch.int64, device=dev)
    unjudged[order] = judged[gid]
    unjudged = e - unjudged  # the group's cells without a grade: grade 0, not relevant
    if tie == TIE_OPTIMISTIC:  # they come before a cell only if it is not relevant and graded below 0
        return r, place + unjudged * (~crel & (cgr < 0))
    return r, place + unjudged * (crel | (cgr > 0))  # pessimistic: before the relevant and those graded above 0
