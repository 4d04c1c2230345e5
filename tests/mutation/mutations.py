"""The curated mutations of the mutation check (run by ``tests/mutation/run.py``).

Each mutation replaces one exact snippet of a file under ``src/topkeval/`` (found exactly once
there) with a wrong one, and names the tests that must then fail: pytest node ids or files,
separated by spaces. Choose snippets central to the number (a formula,
a comparison, a constant), which survive refactors of the code around them, and the smallest
selection of fast tests that catches the mutation, preferably a test whose expected values are
computed apart from the code (by hand, by enumeration, by a peer, by the brute-force reference).
A mutation caught only by a hypothesis test can survive once the strategies change (a new
convention in ``tests/strategies.py`` shifts every derandomized draw): a hand-computed test that
hits the case directly keeps it caught.

``equivalent="why"`` marks a mutation known to change no number (counted, not run; ``run.py
--equivalent`` runs those, and each must survive); ``jit=True``
runs the kernels compiled (tests on inputs too large for the interpreted kernels); ``examples`` sets
hypothesis' number of examples for that mutation; ``timeout`` its seconds.

Adding a metric, an estimator or an output format: add a few mutations of its formula, its
denominator, its undefined case or its formatting below, with the tests that catch them, and run
``python tests/mutation/run.py --only <file>``.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Mutation:
    file: str  # relative to src/topkeval
    original: str  # an exact snippet, found once in the file
    replacement: str
    tests: str  # test files or node ids, separated by spaces
    equivalent: str | None = None  # why this mutation changes no number (then it is not run)
    jit: bool = False  # run the kernels compiled (numba) for this mutation's tests
    examples: int | None = None  # hypothesis examples (default: run.py's --examples)
    timeout: float | None = None  # seconds (default: run.py's --timeout)
    id: str = field(default="", compare=False)

    def selection(self) -> list[str]:
        return shlex.split(self.tests)


# test selections used by many mutations
REF = "tests/test_reference.py::test_every_family_equals_reference"  # every family against the brute-force reference
APART = "tests/test_reference.py::test_judgments_apart_equal_reference"  # judgments kept apart (qrels)
SELECTION = " ".join(f"tests/test_reference.py::test_sort_path_selection_equals_counting[{s}]" for s in (0, 1, 3))
HAND = "tests/test_numbers.py"  # the reported numbers by hand (issue 28)
SEEDS = "tests/test_seeds.py"  # the worked examples of the design documents
MANY = "tests/test_many.py"  # many models: ANOVA, Tukey HSD, letters, sizing
UNB = "tests/test_unbiased.py"  # click logs: IPS against a brute-force definition, hand computations
MATRIX = "tests/test_matrix.py::test_matrix_equals_long_format"
IN_PLACE = "tests/test_matrix.py::test_rows_counted_in_place_equal_the_long_format"
DEVICE = ("tests/test_matrix.py::test_device_counts_equal_the_long_format "
          "tests/test_matrix.py::test_device_counts_boundary_groups_and_large_depths")
BEYOND = "tests/test_beyond.py"
COMPARE = "tests/test_compare.py"
TREC = "tests/test_trec.py"
GAIN_MAPS = "tests/test_reference.py::test_gain_maps_on_a_score_matrix"  # grade-0 cells of a matrix in the ideal DCG
IRM = "tests/test_ir_measures.py"  # ir_measures' measures: its own test cases, and random runs against it
SPELL = "tests/test_spellings.py"  # other tools' names, against the tools
LAYERS = "tests/test_layers.py"  # the parameter layer, the safe writer, the CLI's lines, result column names
OUTPUTS = "tests/test_outputs.py"  # the safe writer
OWNED = ("tests/test_hostile_data.py::test_results_do_not_see_the_input_changed_in_place "
         "tests/test_hostile_data.py::test_results_of_runs_and_judgments_do_not_see_them_changed")
CLI_LINES = (f"{LAYERS}::test_each_warning_is_one_line_once_in_the_command_lines_words "
             f"{LAYERS}::test_an_error_is_the_only_line_one_line_exit_2")


def M(file: str, original: str, replacement: str, tests: str, **options) -> Mutation:
    return Mutation(file, original, replacement, tests, **options)


_LIST: list[Mutation] = [
    # --- kernels/cpu.py: the counts, h(k), hits, RR, AP, DCG, the tie flag -----------------------
    M("kernels/cpu.py", "(k < g[t] + e[t]) & (e[t] > r[t])", "(k < g[t] + e[t]) & (e[t] >= r[t])",
      f"{HAND}::test_ties_at_cutoff_counts_mixed_ties_only"),
    M("kernels/cpu.py", "straddle |= (f[t] > 0.0) & (g[t] < k)", "straddle |= (f[t] > 0.0) & (g[t] <= k)",
      f"{HAND}::test_ties_at_cutoff_counts_mixed_ties_only"),
    M("kernels/cpu.py", "total += f[t] * min(max((k - g[t]) / e[t], 0.0), 1.0)",
      "total += f[t] * min(max((k - g[t] + 1) / e[t], 0.0), 1.0)", REF),
    M("kernels/cpu.py", "total += f[t] * (g[t] + b[t] + 1 <= k)", "total += f[t] * (g[t] + b[t] + 1 < k)", REF),
    M("kernels/cpu.py", "none *= (e0 - r0 - x) / (e0 - x)", "none *= (e0 - r0 - x) / (e0 - x + 1)",
      "tests/test_reference.py::test_expected_ties_formula_by_hand"),
    M("kernels/cpu.py", "    if e0 - r0 < slots:\n        return 1.0", "    if e0 - r0 <= slots:\n        return 1.0",
      f"{HAND}::test_hit_rate_of_a_tie_by_hand"),
    M("kernels/cpu.py", "p = r0 / e0  # x = 1", "p = r0 / (e0 + 1)  # x = 1", REF),
    M("kernels/cpu.py", "total += p / (g0 + x)", "total += p / (g0 + x + 1)", REF),
    M("kernels/cpu.py", "mates = (rr - 1) * (p - 1) / (ee - 1) if ee > 1 else 0.0",
      "mates = (rr - 1) * p / (ee - 1) if ee > 1 else 0.0", REF),
    M("kernels/cpu.py", "return rr * total / ee", "return total / ee", REF),
    M("kernels/cpu.py", "apsum += (i + 1) / rank", "apsum += i / rank", REF),
    M("kernels/cpu.py", "out.rr[q, c] = 1.0 / first if first <= k else 0.0",
      "out.rr[q, c] = 1.0 / first if first < k else 0.0", REF),
    M("kernels/cpu.py", "top = min(g[t] + e[t], k)", "top = min(g[t] + e[t] - 1, k)", REF),
    M("kernels/cpu.py", "share = disc[rank] if rank <= k else 0.0", "share = disc[rank - 1] if rank <= k else 0.0", REF),
    M("kernels/cpu.py", "if best < 0 or g[t] < g[best]:", "if best < 0 or g[t] <= g[best]:", REF,
      equivalent="candidates with the same g belong to one tie group, whose (g, e, r) every member shares"),
    M("kernels/cpu.py", "first_rank = min(first_rank, g[t] + b[t] + 1)", "first_rank = min(first_rank, g[t] + b[t])",
      REF),
    M("kernels/cpu.py", "nrel += kept & rl[j]", "nrel += rl[j]", REF),
    M("kernels/cpu.py", "kept = sc[j] >= thr", "kept = sc[j] > thr", REF),
    M("kernels/cpu.py", "        if want_r and R[q] > limit:\n            limit = R[q]",
      "        if want_r and R[q] > limit + 1:\n            limit = R[q]", f"{HAND}::test_r_precision_looks_past_the_largest_cutoff"),
    M("kernels/cpu.py", "                gi += sj > si\n                ei += sj == si\n        else:",
      "                gi += sj >= si\n                ei += sj == si\n        else:", REF),
    M("kernels/cpu.py", "if tie == TIE_FIRST:\n                        bi += j < i",
      "if tie == TIE_FIRST:\n                        bi += j <= i", f"{HAND}::test_first_ties_keep_the_input_order_by_hand"),
    M("kernels/cpu.py", "bi += gr[j] > gr[i]", "bi += gr[j] < gr[i]", f"{HAND}::test_optimistic_and_pessimistic_ties_order_grades_by_hand"),
    M("kernels/cpu.py", "bi += gr[j] < gr[i]", "bi += gr[j] > gr[i]", f"{HAND}::test_optimistic_and_pessimistic_ties_order_grades_by_hand"),
    M("kernels/cpu.py", "bi += it[j] > it[i] or (it[j] == it[i] and j < i)",
      "bi += it[j] < it[i] or (it[j] == it[i] and j < i)", REF),
    M("kernels/cpu.py", "sign = -1.0 if tie == TIE_OPTIMISTIC else 1.0", "sign = 1.0 if tie == TIE_OPTIMISTIC else -1.0",
      f"{HAND}::test_optimistic_and_pessimistic_ties_order_grades_by_hand"),
    M("kernels/cpu.py", "if neg[p] <= cut:", "if neg[p] < cut:", SELECTION),
    M("kernels/cpu.py", "for p in range(min(above, k)):", "for p in range(min(above, k + 1)):", REF),
    M("kernels/cpu.py", "keep = (v >= thr) & (v > _NOT_CANDIDATE)", "keep = (v > thr) & (v > _NOT_CANDIDATE)", IN_PLACE),
    M("kernels/cpu.py", "kept -= sc[x] > _NOT_CANDIDATE", "kept -= 1",
      f"{HAND}::test_matrix_counted_in_place_counts_an_excluded_cell_below_the_threshold_once"),
    M("kernels/cpu.py", "out[w[t]] = 1.0 if x >= 1.0 else (x if x > 0.0 else 0.0)",
      "out[w[t]] = 1.0 if x > 0.0 else 0.0", "tests/test_report.py::test_side_by_side_tied_ranks_and_other_rank"),
    M("kernels/cpu.py", "p[w[t]] = 1.0 if x >= 1.0 else (x if x > 0.0 else 0.0)", "p[w[t]] = 1.0 if x >= 1.0 else 0.0",
      f"{BEYOND}::test_hand_computed_values_under_expected_ties"),
    M("kernels/cpu.py", "            if rank <= depth:\n                out[w[t]] = rank",
      "            if rank < depth:\n                out[w[t]] = rank", f"{TREC}::test_depth_equals_cutting_the_run"),
    M("kernels/cpu.py", "b[t] = ba[lo + t]", "b[t] = 0", DEVICE),
    M("kernels/cpu.py", "total += zero_gain * (cum[min(above + extra, k)] - cum[above])",
      "total += zero_gain * (cum[min(above + extra - 1, k)] - cum[above])", GAIN_MAPS),
    M("kernels/cpu.py", "rank = p + extra + 1", "rank = p + 1", GAIN_MAPS),

    # --- kernels/ranked.py: judged, bpref, AUC, iprec, ERR, infAP --------------------------------
    M("kernels/ranked.py", "pooled = rel_above + jnr_above + unj_above", "pooled = rel_above + jnr_above",
      "tests/test_reference.py::test_infap_with_sampled_pools_equals_reference"),
    M("kernels/ranked.py", "(above / rank) * (pooled / above)", "(pooled / rank)", REF,
      equivalent="algebraically the same product: above / rank * pooled / above = pooled / rank"),
    M("kernels/ranked.py", "(rel_above + jnr_above + 2 * INFAP_EPSILON)", "(rel_above + jnr_above + INFAP_EPSILON)",
      "tests/test_reference.py::test_infap_by_hand tests/test_reference.py::test_infap_with_sampled_pools_equals_reference"),
    M("kernels/ranked.py", "return int(f) + (1 if x - f >= 0.5 else 0)", "return int(f) + (1 if x - f > 0.5 else 0)",
      REF),
    M("kernels/ranked.py", "    if den == 0:\n        return 1.0", "    if den == 0:\n        return 0.0", REF),
    M("kernels/ranked.py", "den = float(min(cols.NJ[q], R))", "den = float(cols.NJ[q])", REF),
    M("kernels/ranked.py", "asum += nr * (below + 0.5 * (e[t] - r[t]))", "asum += nr * (below + (e[t] - r[t]))", REF),
    M("kernels/ranked.py", "asum += N - (g[t] + b[t] - rel_above)", "asum += N - (g[t] + b[t] + rel_above)", REF),
    M("kernels/ranked.py", "best[j - 1] = max(best[j], j / relrank[j - 1])", "best[j - 1] = j / relrank[j - 1]", REF),
    M("kernels/ranked.py", "if c <= rel_above:", "if c < rel_above:", REF),
    M("kernels/ranked.py", "total += 1.0 if g[t] + b[t] + 1 <= k else 0.0", "total += 1.0 if g[t] + b[t] + 1 < k else 0.0",
      REF),
    M("kernels/ranked.py", "decay *= 1.0 - rv", "decay *= rv", REF),
    M("kernels/ranked.py", "out.err[v, q, c] += decay * rv * term / size", "out.err[v, q, c] += decay * rv * term", REF),
    M("kernels/ranked.py", "mean[s] = ((m + 1 - s) * mean[s] + s * v * mean[s - 1]) / (m + 1)",
      "mean[s] = ((m + 1 - s) * mean[s] + s * v * mean[s - 1]) / (m + 2)", REF),

    # --- kernels/select.py: each row's top T of a score matrix -------------------------------------
    M("kernels/select.py", "if v >= t and v > -np.inf:", "if v > t and v > -np.inf:",
      "tests/test_matrix.py::test_threshold_selection_equals_a_partition"),
    M("kernels/select.py", "c += (v >= t) & (v > -np.inf)", "c += (v > t) & (v > -np.inf)",
      "tests/test_matrix.py::test_threshold_selection_equals_a_partition"),
    M("kernels/select.py", "if row[cand[i]] >= k:", "if row[cand[i]] > k:",
      "tests/test_matrix.py::test_threshold_selection_equals_a_partition"),
    M("kernels/select.py", "if child + 1 < size and heap[child + 1] < heap[child]:",
      "if child + 1 < size and heap[child + 1] > heap[child]:",
      "tests/test_matrix.py::test_threshold_selection_equals_a_partition"),
    M("kernels/select.py", "        nb += v < thr\n    return ok, nb", "        nb += v <= thr\n    return ok, nb",
      f"{HAND}::test_matrix_score_threshold_keeps_a_score_equal_to_it"),
    M("kernels/select.py", "                nb += v < thr\n        if not hit:", "                nb += v <= thr\n        if not hit:",
      f"{HAND}::test_matrix_score_threshold_keeps_a_score_equal_to_it"),
    M("kernels/select.py", "return p, p < ex.shape[0] and ex[p] == x", "return p, p < ex.shape[0] and ex[p] <= x",
      MATRIX, equivalent="after the loop ex[p] >= x, so ex[p] <= x holds exactly when ex[p] == x"),

    # --- kernels/grouping.py: R per query, grouping rows, duplicates, judgments -------------------
    M("kernels/grouping.py", "            c += seg[j]\n        out[q] = c", "            c += 1\n        out[q] = c", REF),
    M("kernels/grouping.py", "self.cursors = starts[:-1] + np.cumsum(per_thread, axis=0) - per_thread",
      "self.cursors = starts[:-1] + np.cumsum(per_thread, axis=0) - per_thread + 1",
      "tests/test_grouping.py::test_group_rows_equals_a_stable_sort"),
    M("kernels/grouping.py", "            p = cursor[c]\n            cursor[c] = p + 1\n            out[p] = buffer[i]",
      "            p = cursor[c]\n            cursor[c] = p\n            out[p] = buffer[i]",
      "tests/test_grouping.py::test_group_rows_equals_a_stable_sort"),
    M("kernels/grouping.py", "while j < haystack.shape[0] and haystack[j] < x:", "while j < haystack.shape[0] and haystack[j] <= x:",
      MATRIX),
    M("kernels/grouping.py", "grades[i] = j_grades[where[slot]]", "grades[i] = 1.0", APART),
    M("kernels/grouping.py", "                        count += 1\n                        if first < 0:\n"
      "                            first = lo + i\n                        break",
      "                        count += 1\n                        if first < 0:\n                            first = lo + i",
      "tests/test_grouping.py::test_duplicate_count_by_hand"),

    # --- kernels/torch_counts.py: the counts made with torch ops (CPU tensors in the tests) -------
    M("kernels/torch_counts.py", "inside = (s >= v[r_rows]) & (s > -math.inf)", "inside = (s > v[r_rows]) & (s > -math.inf)",
      DEVICE),
    M("kernels/torch_counts.py", "g = torch.searchsorted(neg, table, right=False)[cr, pos]",
      "g = torch.searchsorted(neg, table, right=True)[cr, pos]", DEVICE),
    M("kernels/torch_counts.py", "return r, (e - 1 - b_asc) if tie == TIE_ITEM_DESC else b_asc",
      "return r, (e - b_asc) if tie == TIE_ITEM_DESC else b_asc", DEVICE),
    M("kernels/torch_counts.py", "return r, place + unjudged * (crel | (cgr > 0))", "return r, place + unjudged * crel",
      f"{HAND}::test_device_counts_pessimistic_ties_put_unjudged_cells_before_graded_ones"),

    # --- kernels/resample.py: bootstrap counts and random signs ----------------------------------
    M("kernels/resample.py", "out[r, m >> uint64(32)] += 1.0", "out[r, (m >> uint64(32)) // uint64(2)] += 1.0",
      f"{COMPARE}::test_bootstrap_interval_matches_a_direct_loop_in_distribution"),
    M("kernels/resample.py", "out[r, i + j] = 1.0 if (bits >> uint64(j)) & uint64(1) else -1.0",
      "out[r, i + j] = 1.0 if (bits >> uint64(j)) & uint64(1) else 1.0",
      f"{COMPARE}::test_monte_carlo_permutation_close_to_exact"),

    # --- kernels/stats.py: the statistics' accessors --------------------------------------------
    M("kernels/stats.py", "return int(np.searchsorted(self.cutoffs, NO_CUTOFF if k is None else k))",
      "return int(np.searchsorted(self.cutoffs, NO_CUTOFF if k is None else k)) - 1", REF),
    M("kernels/stats.py", "return self.n - self.rel_ret", "return self.n - self.R", REF),
    M("kernels/stats.py", "return np.ldexp(values, shift)", "return np.ldexp(values, shift - 1)",
      "tests/test_hostile.py::test_ndcg_of_huge_linear_grades_is_exact"),

    # --- metrics/setbased.py ------------------------------------------------------------------------
    M("metrics/setbased.py", "out[np.broadcast_to(zero, out.shape)] = undefined",
      "out[np.broadcast_to(zero, out.shape)] = 0.0", REF),
    M("metrics/setbased.py", "return np.minimum(float(m.k), st.n)", "return np.maximum(float(m.k), st.n)", REF),
    M("metrics/setbased.py", 'return _kk(st, m) if conv.short_lists == "shrink" else float(m.k)',
      'return float(m.k) if conv.short_lists == "shrink" else _kk(st, m)', REF),
    M("metrics/setbased.py", "inv = 1.0 / (beta * beta)", "inv = 1.0 / beta", REF),
    M("metrics/setbased.py", "return ratio((1.0 + b2) * np.asarray(hits, np.float64)",
      "return ratio((1.0 + beta) * np.asarray(hits, np.float64)", REF),
    M("metrics/setbased.py", "return ratio(_h(st, m), st.Rw, conv.undefined)", "return ratio(_h(st, m), st.n, conv.undefined)",
      REF),
    M("metrics/setbased.py", "return ratio(_h(st, m), np.minimum(st.R, float(m.k)), conv.undefined)",
      "return ratio(_h(st, m), np.maximum(st.R, float(m.k)), conv.undefined)", REF),
    M("metrics/setbased.py", "return ratio(st.N - (_kk(st, m) - _h(st, m)), st.N, conv.undefined)",
      "return ratio(st.N - (_kk(st, m) - _h(st, m)), st.n, conv.undefined)", REF),
    M("metrics/setbased.py", "return ratio(_kk(st, m) - _h(st, m), st.N, conv.undefined)",
      "return ratio(float(m.k) - _h(st, m), st.N, conv.undefined)", REF),
    M("metrics/setbased.py", 'den = np.minimum(st.R, st.n) if conv.short_lists == "shrink" else st.R', "den = st.R",
      f"{HAND}::test_r_precision_of_a_list_shorter_than_r"),
    M("metrics/setbased.py", "return st.hit[:, st.column(m.k)].copy()",
      "return (st.h[:, st.column(m.k)] > 0).astype(np.float64)", f"{HAND}::test_hit_rate_of_a_tie_by_hand"),
    M("metrics/setbased.py", "return st.R - _h(st, m)", "return st.R - _kk(st, m)", REF),
    M("metrics/setbased.py", "    return st.N - (_kk(st, m) - _h(st, m))", "    return st.N - _kk(st, m)", REF),
    M("metrics/setbased.py", "return ratio(st.rel_ret, np.minimum(st.n, st.R), conv.undefined)",
      "return ratio(st.rel_ret, st.R, conv.undefined)", REF),
    M("metrics/setbased.py", 'return f_measure(st.rel_ret, st.R, st.n, m.param("beta"), conv.undefined)',
      'return f_measure(st.rel_ret, st.n, st.R, m.param("beta"), conv.undefined)', REF),
    M("metrics/setbased.py", "return st.n.astype(np.float64)", "return st.rel_ret.astype(np.float64)", REF),
    M("metrics/setbased.py", "return ratio(st.rel_ret, st.n, conv.undefined)", "return ratio(st.rel_ret, st.R, conv.undefined)",
      REF),

    # --- metrics/rankbased.py -------------------------------------------------------------------
    M("metrics/rankbased.py", "return ratio(st.ap_sum[:, st.column(m.k)], st.Rw, conv.undefined)",
      "return ratio(st.ap_sum[:, st.column(m.k)], st.rel_ret, conv.undefined)", REF),
    M("metrics/rankbased.py", "return ratio(st.ap_sum[:, st.column(m.k)], np.minimum(st.R, float(m.k)), conv.undefined)",
      "return ratio(st.ap_sum[:, st.column(m.k)], st.R, conv.undefined)", REF),
    M("metrics/rankbased.py", 'return DcgSpec(m.param("gain"), conv.discount, conv.negative_grades == "gain")',
      'return DcgSpec(m.param("gain"), "log2", conv.negative_grades == "gain")',
      REF),
    M("metrics/rankbased.py", 'return (1.0 - m.param("p")) * st.dcg_at(_rbp(m, conv), m.k)',
      "return st.dcg_at(_rbp(m, conv), m.k)", REF),
    M("metrics/rankbased.py", "+ p ** depth", "+ p ** (depth + 1)", "tests/test_reference.py::test_rbp_residual_by_hand"),
    M("metrics/rankbased.py", "np.minimum(st.n, m.k).astype(np.float64)", "np.maximum(st.n, m.k).astype(np.float64)",
      "tests/test_reference.py::test_rbp_residual_by_hand"),

    # --- metrics/judged.py ------------------------------------------------------------------------
    M("metrics/judged.py", 'den = np.minimum(float(m.k), st.n) if conv.short_lists == "shrink" else float(m.k)\n'
      "    return ratio(st.judged", "den = float(m.k)\n    return ratio(st.judged", REF),
    M("metrics/judged.py", "out[st.R == 0] = conv.undefined", "out[st.R == 0] = 0.0", REF),
    M("metrics/judged.py", "return _per_r(total / len(ELEVEN_POINTS), st, conv, st.n == 0)",
      "return _per_r(total / 10, st, conv, st.n == 0)",
      REF),
    M("metrics/judged.py", "st.rel_ret.astype(np.float64) * st.N", "st.R.astype(np.float64) * st.N", REF),
    M("metrics/judged.py", "ELEVEN_POINTS = (0.0, 0.1,", "ELEVEN_POINTS = (0.1,", REF),
    M("metrics/judged.py", "return ratio(st.bpref_sum, st.R, conv.undefined)", "return ratio(st.bpref_sum, st.rel_ret, conv.undefined)",
      REF),
    M("metrics/judged.py", "return ratio(st.infap_sum, st.R, conv.undefined)", "return ratio(st.infap_sum, st.n, conv.undefined)",
      REF),

    # --- conventions.py: the presets and the relevance rule -------------------------------------
    M("conventions.py", 'undefined="nan", short_lists="shrink", discount="lenskit"',
      'undefined=0.0, short_lists="shrink", discount="lenskit"',
      f"{HAND}::test_lenskit_preset_scores_an_empty_list_nan_and_leaves_it_out"),
    M("conventions.py", 'threshold=1.0, item_order="text"),', 'threshold=1.0, item_order="typed"),',
      f"{HAND}::test_trec_eval_presets_break_ties_by_item_ids_as_text"),
    M("conventions.py", 'item_order="text", score_precision="float32"),',
      'item_order="text", score_precision="exact"),',
      "tests/test_peers.py::test_pytrec_eval_compares_float32_scores_and_docnos_as_text"),
    M("conventions.py", '"ranx": dict(ties="ranx", empty_queries="keep"', '"ranx": dict(ties="ranx", empty_queries="skip"',
      "tests/test_presets.py::test_ranx_preset"),
    M("conventions.py", '"sklearn": dict(ties="expected"', '"sklearn": dict(ties="first"',
      "tests/test_presets.py::test_sklearn_preset_ndcg_with_ties"),
    M("conventions.py", 'nonpositive_scores="miss", score_precision="float32", negative_grades="gain"),',
      'nonpositive_scores="count", score_precision="float32", negative_grades="gain"),', "tests/test_presets.py::test_torchmetrics_preset"),
    M("conventions.py", '"evidently": dict(ties="first", empty_queries="skip", undefined=0.0, short_lists="shrink")',
      '"evidently": dict(ties="first", empty_queries="skip", undefined=0.0, short_lists="pad")',
      "tests/test_presets.py::test_evidently_preset_against_its_code"),
    M("conventions.py", "threshold=3.5, score_threshold=3.5),", "threshold=3.5, score_threshold=None),",
      f"{SEEDS}::test_seed003_surprise_recipe"),
    M("conventions.py", "return grades > 0 if self.threshold is None else grades >= self.threshold",
      "return grades > 0 if self.threshold is None else grades > self.threshold", REF),
    M("conventions.py", '    if isinstance(value, str) and value.lower() == "nan":\n        return math.nan',
      '    if isinstance(value, str) and value.lower() == "nan":\n        return 0.0',
      f"{HAND}::test_lenskit_preset_scores_an_empty_list_nan_and_leaves_it_out"),
    M("conventions.py", "    undefined: float = 0.0\n", "    undefined: float = 1.0\n",
      "tests/test_errors.py::test_empty_query_single_function_values"),

    # --- compare.py: p-values, intervals, effect sizes, corrections ------------------------------
    M("analysis/compare.py", "return float((1 + np.sum(np.abs(perm_stats) >= observed - tol)) / (1 + n_resamples))",
      "return float(np.sum(np.abs(perm_stats) >= observed - tol) / n_resamples)",
      f"{HAND}::test_monte_carlo_p_value_floor_is_one_over_one_plus_n"),
    M("analysis/compare.py", "return _exact_sign_flip_p(wd)", "return _exact_sign_flip_p(d)",
      f"{HAND}::test_weighted_exact_sign_flips_equal_enumeration"),
    M("analysis/compare.py", 'flips = (_resampled(W * D, n_resamples, rng, "signs")', 'flips = (_resampled(D, n_resamples, rng, "signs")',
      f"{HAND}::test_weighted_monte_carlo_sign_flips_near_enumeration"),
    M("analysis/compare.py", '"relative_delta": delta / base_mean if base_mean else math.nan',
      '"relative_delta": delta / value if value else math.nan', f"{HAND}::test_exact_permutation_p_value_by_hand"),
    M("analysis/compare.py", "        return delta / sd\n", "        return delta / sd**2\n",
      f"{HAND}::test_exact_permutation_p_value_by_hand"),
    M("analysis/compare.py", "    if len(d) < 2:\n        return math.nan", "    if len(d) < 2:\n        return 1.0",
      f"{HAND}::test_one_shared_query_gives_no_p_value"),
    M("analysis/compare.py", "shifted = np.abs(boot_stats - mean)", "shifted = boot_stats - mean",
      f"{HAND}::test_bootstrap_p_value_is_two_sided"),
    M("analysis/compare.py", "stepped = np.maximum.accumulate((m - np.arange(m)) * q[order])",
      "stepped = (m - np.arange(m)) * q[order]", f"{COMPARE}::test_corrections_equal_textbook"),
    M("analysis/compare.py", "adj = np.minimum(1.0, q * m)", "adj = np.minimum(1.0, q * (m - 1))",
      f"{COMPARE}::test_corrections_equal_textbook"),
    M("analysis/compare.py", '"losses": int(np.sum(d < -eps))', '"losses": int(np.sum(d < eps))',
      f"{HAND}::test_exact_permutation_p_value_by_hand"),
    M("analysis/compare.py", "sd = float(d.std(ddof=1)) if len(d) > 1 else math.nan",
      "sd = float(d.std(ddof=0)) if len(d) > 1 else math.nan", f"{HAND}::test_exact_permutation_p_value_by_hand"),
    M("analysis/compare.py", "sd = math.sqrt(float((w * (d - mean_d) ** 2).sum() / total) * n / (n - 1)) if n > 1 else math.nan",
      "sd = math.sqrt(float((w * (d - mean_d) ** 2).sum() / total)) if n > 1 else math.nan",
      f"{HAND}::test_weighted_exact_sign_flips_equal_enumeration"),
    M("analysis/compare.py", "means = both[:, :len(idxs)] / both[:, len(idxs):]", "means = both[:, :len(idxs)] / n",
      "tests/test_segments.py::test_weights_of_one_change_nothing_and_integer_weights_repeat_queries"),
    M("analysis/compare.py", "lo, hi = np.nanquantile(boot, [alpha / 2, 1 - alpha / 2])",
      "lo, hi = np.nanquantile(boot, [alpha, 1 - alpha])",
      f"{COMPARE}::test_bootstrap_interval_matches_a_direct_loop_in_distribution"),
    M("analysis/compare.py", "bounds = np.nanquantile(means, [alpha / 2, 1 - alpha / 2], axis=0)",
      "bounds = np.nanquantile(means, [alpha, 1 - alpha], axis=0)", f"{COMPARE}::test_summary_ci"),
    M("analysis/compare.py", "out[a:b] = weights @ diffs / n", "out[a:b] = weights @ diffs / (n + 1)",
      f"{HAND}::test_bootstrap_intervals_by_hand"),
    M("analysis/compare.py", "return float(np.mean(stats >= observed - 1e-12 * max(1.0, observed)))",
      "return float(np.mean(stats > observed + 1e-12 * max(1.0, observed)))",
      f"{COMPARE}::test_exact_permutation_equals_enumeration"),
    M("analysis/compare.py", "    if np.all(wd == 0):\n        return 1.0", "    if np.all(wd == 0):\n        return math.nan",
      f"{COMPARE}::test_identical_models_p_one"),
    M("analysis/compare.py", "a.loc[~a_has, :] = 0.0", "a.loc[~a_has, :] = 1.0", f"{COMPARE}::test_missing_queries_intersect_or_zero"),
    M("analysis/compare.py", '    if row.significant and row.delta > 0:\n        return "better"',
      '    if row.significant and row.delta < 0:\n        return "better"',
      f"{HAND}::test_verdict_follows_the_sign_of_a_significant_delta"),

    # --- segments.py: weighted means, breakdowns ---------------------------------------------------
    M("engine/aggregate.py", "        w = scaled_weights(weights[ok])\n        total = w.sum()",
      "        w = scaled_weights(weights)\n        total = w.sum()\n        w = w[ok]",
      f"{HAND}::test_weighted_mean_leaves_out_undefined_values_and_their_weight"),
    M("analysis/segments.py", "mine = mine[mine[weight] > 0]", "mine = mine[mine[weight] >= 0]",
      "tests/test_segments.py::test_a_weight_column_called_weight_and_zero_weights"),
    M("engine/results.py", '"total": total_weight(attrs[weight])', '"total": float(attrs[weight].max())',
      "tests/test_segments.py::test_weighted_means_equal_queries_repeated_by_their_weight"),
    M("analysis/segments.py", "out.append(({name: ALL for name in by}, pq))", "out.append(({name: ALL for name in by}, pq.iloc[1:]))",
      "tests/test_segments.py::test_compare_by_segment_equals_compare_of_each_segment_and_one_correction"),

    # --- ids.py: item and query order ---------------------------------------------------------------
    M("inputs/ids.py", "    if labels is None:\n        return codes\n", "    if labels is None:\n        return -codes\n", REF),
    M("inputs/ids.py", "        text = np.array([str(v) for v in labels], dtype=object)", "        text = labels", REF),
    M("inputs/ids.py", "    return rank[codes], labels[order]", "    return codes, labels[order]", REF),

    # --- log.py: relevance, judgments, ascending scores --------------------------------------------
    M("inputs/grouped.py", "return Judgments(self.per_query_sum(self.relevant(conv)), self.offsets, self.grades)",
      "return Judgments(self.per_query_sum(self.grades > 0), self.offsets, self.grades)", REF),
    M("inputs/grouped.py", "return count_per_group(self.offsets, (grades >= 0) & ~conv.is_relevant(grades))",
      "return count_per_group(self.offsets, (grades > 0) & ~conv.is_relevant(grades))",
      f"tests/test_reference.py::test_infap_with_sampled_pools_equals_reference {REF}"),
    M("inputs/grouped.py", "scores = {m: np.negative(v) for m, v in scores.items()}", "scores = dict(scores)",
      f"{HAND}::test_ascending_scores_put_the_lowest_first"),

    # --- io/trec.py: reading and writing TREC files -------------------------------------------------
    M("inputs/trec.py", "if len(f) != 4:", "if len(f) < 4:", f"{HAND}::test_qrels_line_without_four_fields_is_refused"),
    M("inputs/trec.py", 'ranks = order.groupby(["t", "q"], sort=False).cumcount().to_numpy() + 1',
      'ranks = order.groupby(["t", "q"], sort=False).cumcount().to_numpy()',
      f"{HAND}::test_write_run_ranks_from_one_per_query_and_run"),
    M("inputs/trec.py", "if len(f) < 6:", "if len(f) < 5:", f"{TREC}::test_malformed_lines"),
    M("inputs/trec.py", "        sc.append(s)\n", "        sc.append(-s)\n",
      "tests/test_hostile.py::test_slow_reader_on_irregular_whitespace_and_comments"),
    M("inputs/trec.py", "(np.abs(grade) < 2**53).all() and (grade == np.floor(grade)).all()", "(np.abs(grade) < 2**53).all()",
      "tests/test_hostile.py::test_qrels_grades_are_integers"),
    M("inputs/trec.py", 'ascending=[True, True, False], kind="stable"', 'ascending=[True, True, True], kind="stable"',
      f"{HAND}::test_write_run_ranks_from_one_per_query_and_run"),
    M("inputs/trec.py", "{float(scores[row])!r} {tags[row]}", "{float(scores[row]):.4f} {tags[row]}",
      f"{HAND}::test_write_run_keeps_every_digit_of_the_scores"),

    # --- report.py: numbers in tables, p-values, trec_eval lines, csv, LaTeX ---------------------
    M("outputs/text.py", '        return f"{value:.{digits}f}"\n', '        return f"{value:.{digits - 1}f}"\n',
      "tests/test_cli.py::test_table_csv_markdown"),
    M("outputs/text.py", "floor = 1.0 / (1 + n_resamples) if n_resamples else 0.0", "floor = 1.0 / n_resamples if n_resamples else 0.0",
      f"{HAND}::test_p_value_text_at_and_above_the_floor",
      equivalent="no p-value of compare lies in (1 / (1 + N), 1 / N]: Monte-Carlo ones are (1 + b) / (1 + N), "
                 "exact ones multiples of 2 / 2**n with 2**n <= N, t and Wilcoxon have no floor"),
    M("outputs/text.py", "if p <= floor * (1 + 1e-9) or p < 10.0 ** -digits:", "if p < floor * (1 - 1e-9) or p < 10.0 ** -digits:",
      f"{HAND}::test_p_value_text_at_and_above_the_floor"),
    M("outputs/text.py", "value = part[metric].sum() if part is not None and len(part) == count else value * count",
      "value = part[metric].mean() if part is not None and len(part) == count else value * count",
      "tests/test_cli.py::test_trec_format_matches_trec_eval_lines"),
    M("outputs/text.py", 'str(int(round(value))) if integer else f"{value:.4f}"', 'str(int(round(value))) if integer else f"{value:.3f}"',
      "tests/test_cli.py::test_trec_format_matches_trec_eval_lines"),
    M("outputs/text.py", "frame.to_csv(buf, index=any(n is not None for n in frame.index.names))", "frame.to_csv(buf, index=False)",
      "tests/test_cli.py::test_table_csv_markdown"),
    M("outputs/text.py", "top = col.max() if higher_is_better(metric) else col.min()",
      "top = col.min() if higher_is_better(metric) else col.max()",
      "tests/test_report.py::test_latex_bold_best_and_marks_follow_summary_and_compare"),
    M("outputs/text.py", "return bool(row.significant) and (row.delta > 0) == higher_is_better(row.metric) and row.delta != 0",
      "return bool(row.significant) and (row.delta < 0) == higher_is_better(row.metric) and row.delta != 0",
      "tests/test_report.py::test_latex_bold_best_and_marks_follow_summary_and_compare"),

    M("outputs/text.py", 'rows = ["| " + " | ".join(_markdown_cell(v, digits) for v in row)',
      'rows = ["| " + " | ".join(_markdown_cell(v, 2) for v in row)', "tests/test_cli.py::test_table_csv_markdown"),
    M("outputs/text.py", "Text(formats[c](v) if c in formats else fmt(v, digits))", "Text(formats[c](v) if c in formats else fmt(v, 2))",
      "tests/test_cli.py::test_table_csv_markdown"),
    M("outputs/text.py", "text = fmt(summary.loc[model, metric], digits)", "text = fmt(summary.loc[model, metric], 2)",
      "tests/test_report.py::test_latex_bold_best_and_marks_follow_summary_and_compare"),
    M("outputs/text.py", "    if isinstance(v, float) and math.isnan(v) or v is pd.NA or v is pd.NaT:\n        return None",
      "    if isinstance(v, float) and math.isnan(v) or v is pd.NA or v is pd.NaT:\n        return 0.0", f"{HAND}::test_json_writes_an_undefined_value_as_null"),

    # --- html.py: the report's numbers ------------------------------------------------------------
    M("outputs/html.py", 'exact = "nan" if value is None or (isinstance(value, float) and math.isnan(value)) else repr(float(value))',
      'exact = "nan" if value is None or (isinstance(value, float) and math.isnan(value)) else repr(round(float(value), 3))',
      "tests/test_report.py::test_report_numbers_are_the_api_numbers"),
    M("outputs/html.py", 'lo, hi = ci.loc[(m, metric_name), ["ci_low", "ci_high"]]', 'hi, lo = ci.loc[(m, metric_name), ["ci_low", "ci_high"]]',
      "tests/test_report.py::test_report_numbers_are_the_api_numbers"),
    M("outputs/html.py", 'worst_rows = d[d["delta"] < -TIE].head(o.worst)', 'worst_rows = d[d["delta"] <= 0].head(o.worst)',
      f"{HAND}::test_report_lists_only_the_queries_that_got_worse"),

    M("outputs/html.py", "data-value=\"nan\">{NOT_RETRIEVED}</td>", "data-value=\"nan\"></td>",
      "tests/test_report.py::test_side_by_side_html_says_not_retrieved_and_leaves_empty_positions_blank"),
    M("outputs/html.py", """return f'<td class="num" data-value="{int(value)}">{int(value):,}</td>'""",
      """return f'<td class="num" data-value="{int(value) + 1}">{int(value):,}</td>'""",
      "tests/test_report.py::test_report_numbers_are_the_api_numbers"),

    # --- views.py: curves and side by side ------------------------------------------------------------
    M("analysis/views.py", "ks = range(1, top + 1) if top <= 50 else", "ks = range(1, top) if top <= 50 else",
      "tests/test_report.py::test_curves_equal_each_cutoff_evaluated_alone"),
    M("analysis/views.py", 'tied.append(f"{ranks.min()}-{ranks.max()}"', 'tied.append(f"{ranks.min()}-{ranks.max() + 1}"',
      "tests/test_report.py::test_side_by_side_tied_ranks_and_other_rank"),
    M("analysis/views.py", 'if name == model and mine > theirs + 1e-12:', 'if name == model and mine >= theirs:',
      "tests/test_report.py::test_side_by_side_tied_ranks_and_other_rank"),

    # --- matrix.py and accumulator.py: score matrices, MatrixEvaluator --------------------------
    M("backends/matrix.py", "st.n, st.rel_ret = n, rel_ret", "st.rel_ret = rel_ret", f"{HAND}::test_matrix_metrics_of_the_top_still_count_the_whole_row"),
    M("backends/matrix.py", "removed = below + (0 if batch.exclude is None else np.diff(batch.exclude.indptr))", "removed = below",
      MATRIX),
    M("backends/matrix.py", "rel_ret = np.bincount(r_users[is_rel & (r_scores >= thr)], minlength=users) if thr > -np.inf else judgments.R",
      "rel_ret = np.bincount(r_users[is_rel & (r_scores > thr)], minlength=users) if thr > -np.inf else judgments.R",
      f"{HAND}::test_matrix_score_threshold_keeps_a_score_equal_to_it"),
    M("backends/matrix.py", "nonrelevant=self.n_items - excluded - R - negative", "nonrelevant=self.n_items - R - negative", MATRIX),
    M("evaluator.py", '"skipped_empty": len(all_ids) - len(evaluated_ids)', '"skipped_empty": len(evaluated_ids)',
      "tests/test_accumulator.py::test_batches_equal_the_whole_matrix_and_the_long_format"),
    M("evaluator.py", "self._next[m] = self._next.get(m, 0) + U", "self._next[m] = self._next.get(m, 0) + U - 1",
      "tests/test_accumulator.py::test_batches_equal_the_whole_matrix_and_the_long_format"),

    # --- engine: plan, backends, evaluation, aggregation --------------------------------------------
    M("engine/plan.py", "deepest = max(deepest, R_max)", "deepest = max(deepest, R_max - 1)",
      f"{HAND}::test_matrix_metrics_of_the_top_still_count_the_whole_row"),
    M("engine/plan.py", '            elif fam.depth == "list":\n                return n_max',
      '            elif fam.depth == "list":\n                return min(deepest, n_max)', MATRIX),
    M("engine/rules.py", "gains -= 1.0  # 2**0 - 1 = 0 for the grades <= 0", "gains -= 0.5  # 2**0 - 1 = 0 for the grades <= 0",
      REF),
    M("engine/rules.py", "gains[grades == grade] = gain", "gains[grades >= grade] = gain", REF),
    M("engine/rules.py", "d = 1.0 / np.log2(np.maximum(ranks, 2.0))", "d = 1.0 / np.log2(np.maximum(ranks + 1.0, 2.0))",
      REF),
    M("engine/rules.py", "d = spec.discount[1] ** (ranks - 1.0)", "d = spec.discount[1] ** ranks", REF),
    M("engine/rules.py", "d = 1.0 / np.log2(ranks + 1.0)", "d = 1.0 / np.log2(ranks + 2.0)", REF),
    M("engine/rules.py", "return max(0, int(math.ceil(log_bound - 996)))", "return max(0, int(math.ceil(log_bound - 1100)))",
      f"{HAND}::test_ndcg_of_grades_whose_dcg_overflows_is_exact"),
    M("engine/rules.py", "return (np.exp2(grades) - 1.0) / 2.0**max_grade", "return (np.exp2(grades) - 1.0) / 2.0**(max_grade + 1)",
      REF),
    M("backends/cpu.py", "kept = rel if conv.score_threshold is None else rel & (scores >= conv.score_threshold)",
      "kept = rel if conv.score_threshold is None else rel & (scores > conv.score_threshold)", REF,
      equivalent="it feeds rel_ret (so N) of the plan of the families that count what they find under "
                 "nonpositive_scores='miss' (precision, recall, F, tp, fn, rr, ap): none of them reads rel_ret or N"),
    M("backends/cpu.py", "rel = rel & (scores > 0)", "rel = rel & (scores >= 0)", REF),
    M("engine/rules.py", "return scores.astype(np.float32).astype(np.float64)", "return scores.astype(np.float64)", REF),
    M("backends/cpu.py", "jnr = judged & (grades >= 0) & ~rel", "jnr = judged & (grades > 0) & ~rel", REF),
    M("engine/evaluate.py", 'keep = ~empty if conv.empty_queries == "skip" else np.ones(len(R), bool)',
      "keep = np.ones(len(R), bool)", REF),
    M("engine/evaluate.py", "short = st.n < need", "short = st.n <= need",
      f"{HAND}::test_short_lists_error_refuses_only_lists_shorter_than_k"),
    M("engine/evaluate.py", "return log.with_scores({model: log.scores[model]}).keep_rows(rank > 0)",
      "return log.with_scores({model: log.scores[model]}).keep_rows(rank > 1)", f"{TREC}::test_depth_equals_cutting_the_run"),
    M("engine/evaluate.py", "sums = {name: (float(np.nansum(v)), int(np.isfinite(v).sum()))",
      "sums = {name: (float(np.nansum(v)), len(v))", "tests/test_stream.py::test_stream_without_per_query_rows"),
    M("engine/aggregate.py", "    ok = ~np.isnan(values)\n    if not ok.any():", "    ok = np.ones(len(values), bool)\n    if not ok.any():",
      f"{HAND}::test_lenskit_preset_scores_an_empty_list_nan_and_leaves_it_out"),
    M("engine/results.py", "summary[model][name] = sum(t for t, _ in sums) / count if count else math.nan",
      "summary[model][name] = sum(t for t, _ in sums) / (count + 1) if count else math.nan",
      "tests/test_stream.py::test_stream_without_per_query_rows"),

    # --- qrels.py: judgments kept apart from the runs ---------------------------------------------
    M("inputs/judgments.py", "R = csum[j_offsets[1:]] - csum[j_offsets[:-1]]", "R = csum[j_offsets[1:]]", APART),
    M("inputs/judgments.py", "return log.keep_rows(found & (grades >= 0))", "return log.keep_rows(found)",
      "tests/test_peers.py::test_judged_only_and_set_measures_equal_pytrec_eval"),

    # --- beyond.py: coverage, novelty, popularity, Gini, diversity ------------------------------
    M("analysis/beyond.py", "return float(((2 * i - size - 1) * x).sum() / (float(size) * total))",
      "return float(((2 * i - size - 1) * x).sum() / (float(size - 1) * total))",
      f"{BEYOND}::test_hand_computed_values_under_expected_ties"),
    M("analysis/beyond.py", "return float((1.0 - missed).sum() / size)", "return float((1.0 - missed).sum() / len(missed))",
      f"{BEYOND}::test_hand_computed_values_under_a_deterministic_rule"),
    M("analysis/beyond.py", '-np.log2(s["item"].map(pop).fillna(cold)', '-np.log(s["item"].map(pop).fillna(cold)',
      f"{BEYOND}::test_hand_computed_values_under_expected_ties"),
    M("analysis/beyond.py", "    return float(np.mean(per / L))", "    return float(np.mean(per))",
      f"{BEYOND}::test_hand_computed_values_under_expected_ties"),
    M("analysis/beyond.py", "both = slots * (slots - 1) / (e[a] * (e[a] - 1))", "both = p[a] * p[b]", BEYOND),
    M("analysis/beyond.py", "within = filled * (filled - 1) / np.where(e > 1, e * (e - 1), 1)",
      "within = filled * filled / np.where(e > 1, e * (e - 1), 1)", BEYOND),
    M("backends/cpu.py", '"L": np.minimum(k, n_kept[q_of_row[rows]])', '"L": np.full(len(rows), k)',
      f"{BEYOND}::test_score_threshold_and_empty_queries"),
    # === what the merges brought (issue 28, second pass) ==========================================
    # --- params.py: the declarative parameter layer (bounds, normalised values, lone strings) -----
    M("params.py", "return _is_int(value) and self.low <= int(value) and", "return _is_int(value) and self.low < int(value) and",
      f"{LAYERS}::test_int_bounds_are_inclusive"),
    M("params.py", "(self.high is None or int(value) <= self.high)", "(self.high is None or int(value) < self.high)",
      f"{LAYERS}::test_int_bounds_are_inclusive"),
    M("params.py", "if _is_int(value) and self.high is not None and int(value) > self.high:",
      "if _is_int(value) and self.high is not None and int(value) >= self.high:", f"{LAYERS}::test_int_bounds_are_inclusive"),
    M("params.py", "    def normalise(self, value):\n        return int(value)\n", "    def normalise(self, value):\n        return value\n",
      f"{LAYERS}::test_numpy_scalars_become_python_values"),
    M("params.py", "(v > self.low if self.low_open else v >= self.low)", "(v >= self.low if self.low_open else v >= self.low)",
      f"{LAYERS}::test_real_bounds_are_inclusive_unless_open"),
    M("params.py", "(v > self.low if self.low_open else v >= self.low)", "(v > self.low if self.low_open else v > self.low)",
      f"{LAYERS}::test_real_bounds_are_inclusive_unless_open"),
    M("params.py", "(v < self.high if self.high_open else v <= self.high)", "(v <= self.high if self.high_open else v <= self.high)",
      f"{LAYERS}::test_real_bounds_are_inclusive_unless_open"),
    M("params.py", "or isinstance(value, bool) or not math.isfinite(value):\n            return False\n        v = float(value)",
      "or isinstance(value, bool):\n            return False\n        v = float(value)",
      f"{LAYERS}::test_real_bounds_are_inclusive_unless_open"),
    M("params.py", "        return float(value)\n\n\nclass Bool", "        return value\n\n\nclass Bool",
      f"{LAYERS}::test_numpy_scalars_become_python_values"),
    M("params.py", "        return bool(value)\n", "        return value\n", f"{LAYERS}::test_numpy_scalars_become_python_values"),
    M("params.py", "return isinstance(value, str) and value in self.values",
      "return isinstance(value, str) and value.lower() in self.values",
      f"{LAYERS}::test_options_are_compared_exactly_and_none_is_no_correction"),
    M("params.py", 'return None if value == "none" else value', "return value",
      f"{LAYERS}::test_options_are_compared_exactly_and_none_is_no_correction"),
    M("params.py", 'if isinstance(value, (str, bytes, Mapping)) or not hasattr(value, "__iter__") or hasattr(value, "__next__"):\n'
      '            return False\n        if getattr(value, "ndim", 1) != 1:\n            return False\n        if getattr(getattr',
      'if isinstance(value, (bytes, Mapping)) or not hasattr(value, "__iter__") or hasattr(value, "__next__"):\n'
      '            return False\n        if getattr(value, "ndim", 1) != 1:\n            return False\n        if getattr(getattr',
      f"{LAYERS}::test_lists_of_ids_and_of_ints_refuse_a_lone_value"),
    M("params.py", 'if isinstance(value, (str, bytes, Mapping)) or not hasattr(value, "__iter__") or hasattr(value, "__next__"):\n'
      '            return False\n        if getattr(value, "ndim", 1) != 1:\n            return False\n        if self.max_length',
      'if isinstance(value, (str, Mapping)) or not hasattr(value, "__iter__") or hasattr(value, "__next__"):\n'
      '            return False\n        if getattr(value, "ndim", 1) != 1:\n            return False\n        if self.max_length',
      f"{LAYERS}::test_lists_of_ids_and_of_ints_refuse_a_lone_value"),
    M("params.py", 'if isinstance(value, (str, bytes, Mapping)) or not hasattr(value, "__iter__") or hasattr(value, "__next__"):\n'
      '            return False\n        if getattr(value, "ndim", 1) != 1:\n            return False\n        if self.max_length',
      'if isinstance(value, (str, bytes, Mapping)) or not hasattr(value, "__iter__"):\n'
      '            return False\n        if getattr(value, "ndim", 1) != 1:\n            return False\n        if self.max_length',
      f"{LAYERS}::test_lists_of_ids_and_of_ints_refuse_a_lone_value"),
    M("params.py", "bound.arguments[name] = check.check(value, name, owner)", "check.check(value, name, owner)",
      f"{LAYERS}::test_numpy_scalars_become_python_values"),
    M("params.py", 'return item() if item is not None and type(value).__module__ == "numpy" else value', "return value",
      "tests/test_params.py::test_constraints_accept_and_refuse"),
    M("params.py", "return str(int(value)) if _is_int(value) else value", "return value",
      "tests/test_params.py::test_constraints_accept_and_refuse"),

    # --- io/write.py: the safe writer --------------------------------------------------------------
    M("files.py", "    if stat.S_ISREG(mode):\n        return None", "    if not stat.S_ISDIR(mode):\n        return None",
      f"{OUTPUTS}::test_only_regular_files_are_ever_replaced[write_text]"),
    M("files.py", "    if not overwrite:\n        raise OutputFileError", "    if False:\n        raise OutputFileError",
      f"{OUTPUTS}::test_an_existing_file_is_replaced_only_with_overwrite[write_text]"),
    M("files.py", '    folder = os.path.dirname(target) or "."\n    tmp = None\n',
      '    folder = os.path.dirname(target) or "."\n    tmp = None\n    if overwrite and os.path.isfile(target):\n'
      '        open(target, "w").close()  # not atomic: the old file is gone before the new one is whole\n',
      f"{OUTPUTS}::test_a_full_disk_is_an_error_and_keeps_the_old_file[write_text] "
      f"{OUTPUTS}::test_an_error_while_writing_removes_the_temporary_file"),
    M("files.py", "            with contextlib.suppress(OSError):\n                os.unlink(tmp)",
      "            with contextlib.suppress(OSError):\n                pass",
      f"{OUTPUTS}::test_an_error_while_writing_removes_the_temporary_file"),
    M("files.py", "        return\n    os.unlink(tmp)\n", "        return\n",
      f"{LAYERS}::test_a_new_file_is_whole_and_leaves_no_temporary_file"),
    M("files.py", "        _refuse_existing(target, st, overwrite)  # checked again",
      "        None  # not checked again", f"{OUTPUTS}::test_a_device_or_link_that_appears_while_writing_is_not_replaced"),
    M("files.py", "        os.chmod(tmp, stat.S_IMODE(st.st_mode))  # a replaced file keeps its permissions",
      "        pass  # a replaced file takes the new file's permissions",
      f"{OUTPUTS}::test_an_existing_file_is_replaced_only_with_overwrite[write_text]"),
    M("files.py", "        if st is not None:\n            _refuse_existing(text, st, overwrite)\n",
      "        if st is not None and not stat.S_ISREG(st.st_mode):\n            _refuse_existing(text, st, overwrite)\n",
      "tests/test_cli.py::test_report_refuses_devices_links_and_folders_before_evaluating"),

    # --- kernels/sort.py: numba's quicksort order (ties="ranx") -----------------------------------
    M("kernels/sort.py", "_QUICKSORT_SMALL = 15", "_QUICKSORT_SMALL = 16", "tests/test_presets.py::test_quicksort_argsort_is_numbas"),
    M("kernels/sort.py", "while i < high and keys[order[i]] < pivot:", "while i < high and keys[order[i]] <= pivot:",
      "tests/test_presets.py::test_quicksort_argsort_is_numbas"),
    M("kernels/sort.py", "while j > low and kx < keys[order[j - 1]]:", "while j > low and kx <= keys[order[j - 1]]:",
      "tests/test_presets.py::test_quicksort_argsort_is_numbas"),
    M("kernels/sort.py", "keys[n] = -scores[j]", "keys[n] = scores[j]",
      f"{HAND}::test_ranx_ties_keep_the_row_order_of_a_short_list_and_numbas_order_of_a_long_one"),

    # --- engine/backends.py: the tie rule, gains of unjudged candidates, negative grades --------
    M("engine/rules.py", "return cpu.TIE_ITEM_ASC, quicksort_positions(", "return cpu.TIE_ITEM_DESC, quicksort_positions(",
      f"{HAND}::test_ranx_ties_keep_the_row_order_of_a_short_list_and_numbas_order_of_a_long_one"),
    M("engine/rules.py", "                row_gains[unjudged] = 0.0", "                pass",
      f"{HAND}::test_a_candidate_without_a_judgment_gains_nothing_even_where_grade_0_gains"),
    M("engine/rules.py", "                row_gains |= np.asarray(grades) < 0", "                pass",
      f"{HAND}::test_unj_and_rbp_resid_count_unjudged_and_negative_grades_by_hand"),
    M("engine/rules.py", "(zero_gain > 0 or spec.signed)", "(zero_gain > 0)",
      f"{HAND}::test_matrix_ideal_dcg_under_negative_grades_ranks_the_grade_0_cells_before_the_negative_one"),
    M("backends/cpu.py", "active = rel | (gains != 0).any(axis=0) if G else rel", "active = rel | (gains > 0).any(axis=0) if G else rel",
      f"{HAND}::test_negative_grades_gain_their_value_as_in_scikit_learn"),
    M("engine/rules.py", "gains = grades.copy() if spec.signed else np.maximum(grades, 0.0)", "gains = np.maximum(grades, 0.0)",
      f"{HAND}::test_negative_grades_gain_their_value_as_in_scikit_learn"),

    # --- metrics: trec_eval's rbp_resid and unj@k ---------------------------------------------------
    M("metrics/rankbased.py", "return np.where(st.dcg_at(count, None) > 0, residual, 0.0)", "return residual",
      f"{HAND}::test_unj_and_rbp_resid_count_unjudged_and_negative_grades_by_hand"),
    M("metrics/rankbased.py", "+ p ** st.n.astype(np.float64)", "+ p ** (st.n.astype(np.float64) + 1)",
      f"{HAND}::test_unj_and_rbp_resid_count_unjudged_and_negative_grades_by_hand"),
    M("metrics/rankbased.py", 'return DcgSpec("unknown", ("rbp", m.param("p"))), DcgSpec("unknown", ("rbp", 1.0))',
      'return DcgSpec("unjudged", ("rbp", m.param("p"))), DcgSpec("unknown", ("rbp", 1.0))',
      f"{HAND}::test_unj_and_rbp_resid_count_unjudged_and_negative_grades_by_hand"),
    M("metrics/judged.py", 'den = np.minimum(float(m.k), st.n) if conv.short_lists == "shrink" else float(m.k)\n'
      "    return ratio(st.dcg_at(_unknown_count", "den = float(m.k)\n    return ratio(st.dcg_at(_unknown_count",
      f"{HAND}::test_unj_and_rbp_resid_count_unjudged_and_negative_grades_by_hand"),
    M("metrics/judged.py", 'return DcgSpec("unknown", ("rbp", 1.0))', 'return DcgSpec("unknown", ("rbp", 0.9))',
      f"{HAND}::test_unj_and_rbp_resid_count_unjudged_and_negative_grades_by_hand"),

    # --- segments.py: extreme weights, the names of result columns; compare's weighted statistics ----
    M("engine/aggregate.py", "    return np.ldexp(weights, -math.frexp(top)[1])", "    return weights",
      "tests/test_hostile_data.py::test_weighted_means_are_exact_for_any_finite_weights"),
    M("engine/aggregate.py", "shift = math.ceil(math.log2(top)) if math.isfinite(top) and top > 1e300 else 0", "shift = 0",
      f"{HAND}::test_weighted_mean_of_values_whose_sum_overflows"),
    M("engine/aggregate.py", "w = scaled_weights(weights[ok])", "w = weights[ok]",
      "tests/test_hostile_data.py::test_the_issue_case_of_equal_tiny_or_huge_weights"),
    M("engine/results.py", "clash = (query in QUERY_TAKEN or query in metric_names", "clash = (query in metric_names",
      f"{LAYERS}::test_a_query_column_named_like_a_result_column_is_refused"),
    M("engine/results.py", "taken = sorted({n for n in by if n in RESERVED or n in metric_names or _metric_name(n)}",
      "taken = sorted({n for n in by if n in metric_names or _metric_name(n)}",
      "tests/test_hostile_data.py::test_segment_and_weight_columns_named_like_a_result_column_are_refused"),
    M("engine/results.py", '(weight == "model" or weight in metric_names', "(weight in metric_names",
      "tests/test_hostile_data.py::test_segment_and_weight_columns_named_like_a_result_column_are_refused"),
    M("engine/results.py", "        return str(parse_metric(name)) == name\n", "        return False\n",
      "tests/test_hostile_data.py::test_segment_and_weight_columns_named_like_a_result_column_are_refused"),
    M("analysis/compare.py", "w=None if w_all is None else scaled_weights(w_all[ok]),", "w=None if w_all is None else w_all[ok],",
      "tests/test_hostile_data.py::test_the_issue_case_of_equal_tiny_or_huge_weights"),
    M("analysis/compare.py", "total=None if w_all is None else total_weight(w_all[ok])", "total=None if w_all is None else float(w_all[ok].max())",
      "tests/test_segments.py::test_weights_of_one_change_nothing_and_integer_weights_repeat_queries"),
    M("analysis/compare.py", "w = scaled_weights(np.asarray(weights[idxs[0]], dtype=np.float64)[ok])[:, None]",
      "w = np.asarray(weights[idxs[0]], dtype=np.float64)[ok][:, None]",
      "tests/test_hostile_data.py::test_weighted_means_are_exact_for_any_finite_weights"),

    # --- results.py: Results.label, the one lookup of a metric's column ---------------------------
    M("engine/results.py", '        raise ParameterError(f"metric {metric!r} was not evaluated; these results have '
      "{', '.join(labels)}.\")", "        return labels[0]",
      "tests/test_names.py::test_every_lookup_by_metric_name_accepts_the_label_and_every_other_name"),
    M("engine/results.py", "            return label_of(metric)\n", "            return metric\n",
      "tests/test_names.py::test_every_lookup_by_metric_name_accepts_the_label_and_every_other_name"),

    # --- matrix.py: users without candidates, negative gains in place; log.py / qrels.py: owned rows --
    M("backends/matrix.py", "empty = np.diff(exc.indptr) >= I", "empty = np.diff(exc.indptr) > I",
      "tests/test_hostile_data.py::test_users_with_every_item_excluded_are_no_queries"),
    M("backends/matrix.py", "run.absent = np.asarray(users)[empty]", "run.absent = np.asarray(users)[~empty]",
      "tests/test_hostile_data.py::test_users_with_every_item_excluded_are_no_queries"),
    M("backends/matrix.py", "batch = MatrixBatch(models, users[part], rel[part]", "batch = MatrixBatch(models, users[u0:u1], rel[part]",
      "tests/test_hostile_data.py::test_users_with_every_item_excluded_are_no_queries"),
    M("backends/matrix.py", "active = is_rel | (gains != 0).any(axis=0) if len(plan.dcg_specs) else is_rel",
      "active = is_rel | (gains > 0).any(axis=0) if len(plan.dcg_specs) else is_rel",
      f"{HAND}::test_matrix_ideal_dcg_under_negative_grades_ranks_the_grade_0_cells_before_the_negative_one"),
    M("inputs/grouped.py", "        return values.copy()\n    return values", "        return values\n    return values", OWNED),
    M("api.py", "ascending=r.ascending,\n                    borrowed=cols.borrowed, rows=rows)",
      "ascending=r.ascending,\n                    borrowed=False, rows=rows)",
      OWNED),
    M("inputs/tables.py", "return values is given or not values.flags.owndata", "return values is given", OWNED),
    M("inputs/judgments.py", "r_scores = logmod.owned(r_scores, borrowed)", "r_scores = logmod.owned(r_scores, ())",
      "tests/test_hostile_data.py::test_results_of_runs_and_judgments_do_not_see_them_changed"),

    # --- cli.py: the warnings policy and one-line errors ------------------------------------------
    M("cli.py", '                warnings.simplefilter("ignore", category)', '                warnings.simplefilter("default", category)',
      CLI_LINES),
    M("cli.py", "for line in dict.fromkeys(lines):", "for line in lines:", CLI_LINES),
    M("cli.py", "    if code == 0:  # caught is complete", "    if True:  # caught is complete", CLI_LINES),
    M("cli.py", '        message = " ".join(str(exc).split())', "        message = str(exc)", CLI_LINES),
    M("cli.py", '    text = " ".join(str(message).split())', "    text = str(message)", CLI_LINES),
    M("cli.py", '        return f"topkeval: warning: {cli_words(text)}"', '        return f"topkeval: warning: {text}"', CLI_LINES),
    M("cli.py", "{cli_words(message) if isinstance(exc, TopkevalError) else message}",
      "{message if isinstance(exc, TopkevalError) else message}", CLI_LINES),
    M("cli.py", ' else message}")\n        return 2', ' else message}")\n        return 1', CLI_LINES),
    M("cli.py", '. Check the path and its permissions.")\n        return 2', '. Check the path and its permissions.")\n        return 1',
      "tests/test_cli.py::test_any_os_error_is_one_line"),

    # --- report.py: the side-by-side view as text and values, the best mean of a column -----------
    M("outputs/text.py", "                cells.append(NOT_RETRIEVED)", '                cells.append("")',
      "tests/test_report.py::test_side_by_side_frame_for_each_output"),
    M("outputs/text.py", '[not missing(v) for v in view[(model, "item")]]', "[True] * len(values)",
      f"{LAYERS}::test_side_by_side_frame_cells"),
    M("outputs/text.py", "[None if v != v else int(v) for v in flat[name]]", "[None if v != v else v for v in flat[name]]",
      f"{LAYERS}::test_side_by_side_frame_cells"),
    M("outputs/text.py", "near = np.isclose(col.to_numpy(), top, rtol=1e-12, atol=1e-12)", "near = col.to_numpy() == top",
      f"{HAND}::test_best_rows_count_means_equal_up_to_rounding_as_ties"),
    # many models at once (issue 27): the ANOVA, Tukey's HSD, the randomized one, the letters, the sizing
    M("analysis/many.py", "ss_models = n * float(((model_means - grand) ** 2).sum())",
      "ss_models = m * float(((model_means - grand) ** 2).sum())",
      f"{MANY}::test_anova_equals_the_direct_computation_and_statsmodels"),
    M("analysis/many.py", "df_m, df_q, df_e = m - 1, n - 1, (m - 1) * (n - 1)", "df_m, df_q, df_e = m - 1, n - 1, m * (n - 1)",
      f"{MANY}::test_anova_equals_the_direct_computation_and_statsmodels"),
    M("analysis/many.py", "se = math.sqrt(v_e / n)", "se = math.sqrt(v_e / (n - 1))",
      f"{MANY}::test_tukey_p_values_and_intervals_are_the_studentized_range_formula"),
    M("analysis/many.py", "p = _studentized_sf(np.abs(diffs) / se, m, (m - 1) * (n - 1))",
      "p = _studentized_sf(np.abs(diffs) / se, m - 1, (m - 1) * (n - 1))",
      f"{MANY}::test_tukey_p_values_and_intervals_are_the_studentized_range_formula"),
    M("analysis/many.py", "count = len(ranges) - np.searchsorted(ranges, observed - 1e-12, side=\"left\")\n        return count / total",
      "count = len(ranges) - np.searchsorted(ranges, observed + 1e-12, side=\"right\")\n        return count / total",
      f"{MANY}::test_randomized_tukey_enumerates_small_cases_exactly"),
    M("analysis/many.py", "Xc = X - X.mean(axis=1, keepdims=True)  # a query's level",
      "Xc = X - X.mean(axis=0, keepdims=True)  # a query's level",
      f"{MANY}::test_randomized_tukey_enumerates_small_cases_exactly"),
    M("analysis/many.py", "split += [col - {a}, col - {b}]", "split += [col - {a}]", f"{MANY}::test_letters_by_hand"),
    M("analysis/many.py", "ss_resid = float(((X - query_means[:, None] - model_means[None, :] + grand) ** 2).sum())",
      "ss_resid = float(((X - query_means[:, None] - model_means[None, :]) ** 2).sum())",
      f"{MANY}::test_anova_equals_the_direct_computation_and_statsmodels"),
    M("analysis/many.py", "return (math.inf, 0.0) if ss > 0 else (0.0, 1.0)", "return (0.0, 1.0)",
      f"{MANY}::test_segments_bad_input_and_weights"),
    M("analysis/many.py", "return _t_power(n - 1, math.sqrt(n) * delta / math.sqrt(variance), alpha)",
      "return _t_power(n - 1, n * delta / math.sqrt(variance), alpha)",
      f"{MANY}::test_queries_needed_by_hand"),
    M("analysis/many.py", "return detectable_nc(n - 1, float(alpha), float(power)) * sd / math.sqrt(n)",
      "return detectable_nc(n - 1, float(alpha), float(power)) * sd / n", "tests/test_compare.py::test_detectable_delta"),
    # clicks are not relevance (issue 23): inverse propensity weights, the position bias, the bounds
    M("kernels/cpu.py", "f[t] = (rw[w[t]] if weighted else 1.0) if isrel else 0.0",
      "f[t] = 1.0 if isrel else 0.0", f"{UNB}::test_hand_computed_log"),
    M("kernels/cpu.py", "apsum += wi * (wsum + 1.0) / rank", "apsum += wi * (wsum + wi) / rank",
      f"{UNB}::test_ips_equals_the_brute_force_definition"),
    M("kernels/cpu.py", "total += (wabove + 1.0 + mates) / (gg + p)", "total += (wabove + wi + mates) / (gg + p)",
      f"{UNB}::test_ips_equals_the_brute_force_definition"),
    M("kernels/cpu.py", "mates = (group_w - wi) * (p - 1) / (ee - 1) if ee > 1 else 0.0",
      "mates = group_w * (p - 1) / (ee - 1) if ee > 1 else 0.0",
      f"{UNB}::test_ips_equals_the_brute_force_definition"),
    M("engine/rules.py", "row_gains, judged_gains = row_gains * weights, judged_gains * weights",
      "row_gains, judged_gains = row_gains, judged_gains * weights", f"{UNB}::test_hand_computed_log"),
    M("engine/rules.py", "weighted_ideal_dcg(judgments.offsets, unweighted_judged, weights, plan.cutoffs, spec)",
      "weighted_ideal_dcg(judgments.offsets, unweighted_judged, np.ones_like(weights), plan.cutoffs, spec)",
      f"{UNB}::test_ips_equals_the_brute_force_definition"),
    M("engine/rules.py", "return cum[whole] + part * (cum[nxt] - cum[whole])", "return cum[whole]",
      f"{UNB}::test_ips_equals_the_brute_force_definition"),
    M("backends/cpu.py", "weights=rw[rows]", "weights=np.ones(len(rows))",
      f"{UNB}::test_hand_computed_log"),
    M("metrics/setbased.py", "def recall(st, m, conv):\n    return ratio(_h(st, m), st.Rw, conv.undefined)",
      "def recall(st, m, conv):\n    return ratio(_h(st, m), st.R, conv.undefined)", f"{UNB}::test_hand_computed_log"),
    M("engine/unbiased.py", "w = np.minimum(w, clip)", "w = np.maximum(w, clip)", f"{UNB}::test_clip_caps_the_weights"),
    M("engine/unbiased.py", "ess = float(w.sum() ** 2 / (w * w).sum())", "ess = float(w.sum() / (w * w).sum())",
      f"{UNB}::test_hand_computed_log"),
    M("analysis/bias.py", "theta = np.log(ctr.to_numpy() / ctr.loc[1])", "theta = ctr.to_numpy() / ctr.loc[1]",
      f"{UNB}::test_position_bias_from_a_randomisation_experiment"),
    M("analysis/bias.py", "rho = np.log(eq[\"rj\"].to_numpy() / eq[\"rk\"].to_numpy())",
      "rho = np.log(eq[\"rk\"].to_numpy() / eq[\"rj\"].to_numpy())",
      f"{UNB}::test_position_bias_hand_computed_and_bad_logs"),
    M("analysis/bias.py", "exponent = (gamma + 1) / 2", "exponent = gamma", f"{UNB}::test_popularity_propensity_by_hand_and_fitted"),
    M("analysis/clicks.py", "for sign, out, pick in ((1.0, low, np.fmin), (-1.0, high, np.fmax)):",
      "for sign, out, pick in ((1.0, low, np.fmin), (1.0, high, np.fmax)):", f"{UNB}::test_bounds_by_hand"),
    M("analysis/clicks.py", "ratio = (num0[qs] + num_gain * within) / (den0[qs] + den_gain * size)",
      "ratio = (num0[qs] + num_gain * within) / (den0[qs] + den_gain)", f"{UNB}::test_bounds_by_hand"),
    M("analysis/clicks.py", "row[\"lower\"], row[\"upper\"] = (lo, hi) if family in _TOP_UP else (hi, lo)",
      "row[\"lower\"], row[\"upper\"] = (lo, hi)", f"{UNB}::test_bounds_contain_the_truth"),
    # --- ir_measures' SetAP, Compat, Accuracy; cwl_eval's C/W/L measures (kernels/sequence.py, metrics/sequence.py)
    M("metrics/setbased.py", "return ratio(st.rel_ret.astype(np.float64) ** 2, st.n.astype(np.float64) * st.R,",
      "return ratio(st.rel_ret.astype(np.float64), st.n.astype(np.float64) * st.R,", f"{IRM}::test_set_ap_test_case"),
    M("engine/rules.py", "return (np.clip(np.maximum(grades, 0.0), low, high) - low) / (high - low)",
      "return (np.clip(grades, low, high) - low) / (high - low)", f"{IRM}::test_cwl_measures_equal_cwl_eval[0]"),
    M("engine/rules.py", "d[CWL_DEPTH:] = 0.0", "d[CWL_DEPTH + 1:] = 0.0", f"{IRM}::test_cwl_measures_equal_cwl_eval[0]"),
    M("engine/rules.py", "d = 1.0 / (ranks + 2.0 * spec.discount[2] - 1.0) ** 2 if",
      "d = 1.0 / (ranks + 2.0 * spec.discount[2]) ** 2 if", f"{IRM}::test_cwl_by_hand"),
    M("metrics/sequence.py", "return float((1.0 / (i + 2.0 * T - 1.0) ** 2).sum())",
      "return float((1.0 / (i + 2.0 * T) ** 2).sum())", f"{IRM}::test_cwl_by_hand"),
    M("metrics/sequence.py", "np.arange(2, min(k, CWL_DEPTH) + 2, dtype=np.float64)",
      "np.arange(2, min(k, CWL_DEPTH) + 1, dtype=np.float64)", f"{IRM}::test_cwl_by_hand"),
    M("kernels/sequence.py", "c = ((np.cumsum(g, axis=1) < param) & (i < k)).astype(np.float64)",
      "c = ((np.cumsum(g, axis=1) <= param) & (i < k)).astype(np.float64)", f"{IRM}::test_cwl_by_hand"),
    M("kernels/sequence.py", "c = ((i + param + t_i - 1.0) / (i + param + t_i)) ** 2",
      "c = ((i + param + t_i - 1.0) / (i + param + t_i))", f"{IRM}::test_cwl_eval_test_case"),
    M("kernels/sequence.py", "c = np.where(i < k, 1.0 - g, 0.0)", "c = np.where(i < k - 1, 1.0 - g, 0.0)",
      f"{IRM}::test_cwl_measures_equal_cwl_eval[0]"),
    M("kernels/sequence.py", "c = np.where(i < k, i / (i + 1.0) * (1.0 - g), 0.0)",
      "c = np.where(i < k, (1.0 - g), 0.0)", f"{IRM}::test_cwl_eval_test_case"),
    M("kernels/sequence.py", "c = param * (1.0 - g)", "c = param * (1.0 - g) + (1.0 - param) * g",
      f"{IRM}::test_cwl_eval_test_case"),
    M("kernels/sequence.py", "c = ((i + 2.0 * param - 1.0) / (i + 2.0 * param)) ** 2 * (1.0 - g)",
      "c = ((i + 2.0 * param - 1.0) / (i + 2.0 * param)) ** 2", f"{IRM}::test_cwl_eval_test_case"),
    M("kernels/sequence.py", "np.cumprod(c[:, :-1], axis=1, out=reach[:, 1:])", "np.cumprod(c[:, 1:], axis=1, out=reach[:, 1:])",
      f"{IRM}::test_cwl_eval_test_case"),
    M("kernels/sequence.py", "both = np.maximum(place, r)", "both = np.minimum(place, r)",
      f"{IRM}::test_compat_test_case"),
    M("kernels/sequence.py", "order = np.lexsort((kind, -gs, qs))", "order = np.lexsort((-kind, -gs, qs))",
      f"{IRM}::test_compat_equals_ir_measures[0]"),
    M("kernels/sequence.py", "best = R * head[D] - cum_head[R]", "best = R * head[D] - cum_head[R - 1]",
      f"{IRM}::test_compat_test_case"),
    M("kernels/sequence.py", "D = np.maximum(n, R)", "D = n", f"{IRM}::test_compat_equals_ir_measures[0]"),
    M("kernels/sequence.py", "wrong = np.bincount(rq, weights=rpos - rel_above, minlength=Q)",
      "wrong = np.bincount(rq, weights=rpos, minlength=Q)", f"{IRM}::test_accuracy_test_case"),
    M("kernels/sequence.py", "pairs = r * (n - r)", "pairs = r * n", f"{IRM}::test_accuracy_test_case"),
    # --- other tools' spellings: a metric's own rel= and judged_only, ap_found, graded rbp, tool prefixes
    M("engine/plan.py", "return conv if rel is None or rel == conv.threshold else replace(conv, threshold=float(rel))",
      "return conv", f"{SPELL}::test_rel_leaves_the_empty_queries_to_the_evaluation"),
    M("engine/evaluate.py", "else batch.judgments(part.conv) if own else judgments.under(part.conv) for part in parts]",
      "else batch.judgments(part.conv) if own else judgments for part in parts]",
      f"{SPELL}::test_rel_equals_the_evaluation_at_that_threshold[runs]"),
    M("inputs/grouped.py", "return Judgments(count_per_group(self.offsets, conv.is_relevant(np.asarray(self.grades))), self.offsets,",
      "return Judgments(count_per_group(self.offsets, np.asarray(self.grades) > 0), self.offsets,",
      f"{SPELL}::test_rel_equals_the_evaluation_at_that_threshold[runs]"),
    M("backends/matrix.py", "key = (model, plan.conv.threshold)", "key = model",
      f"{SPELL}::test_rel_equals_the_evaluation_at_that_threshold[matrix]"),
    M("backends/local.py", "parts = [engine.evaluate_log(run.judged_only(log), plan.select(own), backend=backend,",
      "parts = [engine.evaluate_log(log, plan.select(own), backend=backend,",
      f"{SPELL}::test_judged_only_per_metric_equals_the_evaluation_with_judged_only"),
    M("metrics/rankbased.py", "return ratio(st.ap_sum[:, st.column(m.k)], st.h[:, st.column(m.k)], conv.undefined)",
      "return ratio(st.ap_sum[:, st.column(m.k)], st.R, conv.undefined)", f"{SPELL}::test_torchmetrics_spellings_equal_torchmetrics"),
    M("metrics/rankbased.py", 'return DcgSpec(gain, ("rbp", m.param("p")), gain != "binary" and conv.negative_grades == "gain")',
      'return DcgSpec("binary", ("rbp", m.param("p")))', f"{SPELL}::test_ir_measures_rbp_object_is_graded_without_rel"),
    M("metrics/names.py", 'preset = ",".join((["p=0.8"] if "p" not in given else []) + (["gain=linear"] if "rel" not in given else []))',
      'preset = ",".join((["p=0.8"] if "p" not in given else []))', f"{SPELL}::test_ir_measures_rbp_object_is_graded_without_rel"),
    M("metrics/names.py", 'rest.append("gain=" + ("exp" if value.lower() == "exp-log2" else "linear"))',
      'rest.append("gain=" + ("linear" if value.lower() == "exp-log2" else "exp"))',
      f"{SPELL}::test_ir_measures_objects_through_every_provider"),
    M("metrics/names.py", 'fam = FAMILIES["num_rel_ret"]  # ir_measures\' NumRet(rel=r)', 'fam = FAMILIES["num_ret"]  # ir_measures\' NumRet(rel=r)',
      f"{SPELL}::test_ir_measures_strings_and_objects_equal_pytrec_eval[0]"),
    M("metrics/names.py", '"recbole": {"map": ("ap_capped", ""), "ndcg": ("ndcg", "gain=binary")},',
      '"recbole": {"map": ("ap", ""), "ndcg": ("ndcg", "gain=binary")},', f"{SPELL}::test_recbole_and_replay_spellings_by_their_formulas"),
    M("metrics/names.py", "if value in (\"binary\", \"bin\"):", "if value in (\"bin\",):",
      f"{SPELL}::test_recbole_and_replay_spellings_by_their_formulas"),
]


def _numbered(mutations: list[Mutation]) -> list[Mutation]:
    """Ids ``<module>.<n>``: the file's stem (``cpu``, ``compare``) and a running number within it."""
    seen: dict[str, int] = {}
    out = []
    for m in mutations:
        stem = m.file.rsplit("/", 1)[-1].removesuffix(".py")
        seen[stem] = seen.get(stem, 0) + 1
        out.append(Mutation(m.file, m.original, m.replacement, m.tests, m.equivalent, m.jit, m.examples, m.timeout,
                            id=f"{stem}.{seen[stem]}"))
    return out


MUTATIONS: list[Mutation] = _numbered(_LIST)
