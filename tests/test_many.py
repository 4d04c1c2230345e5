"""Many models at once (Results.anova, compare_all, queries_needed): against direct computations
written here, statsmodels' AnovaRM, the studentized-range formula, enumeration, and simulations
under the null and under alternatives."""

import itertools
import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats

import topkeval as tk
from topkeval.errors import ParameterError


def sweep(X: np.ndarray, metric: str = "ap") -> tk.Results:
    """Results of a (queries x models) matrix of per-query values."""
    n, m = X.shape
    frame = pd.DataFrame({"model": np.repeat([f"m{j}" for j in range(m)], n), "query": np.tile(np.arange(n), m),
                          metric: X.T.ravel()})
    return tk.Results.from_per_query(frame)


def simulated(n=100, m=5, effects=None, seed=0):
    """Per-query values of m models: a query effect, a model effect and noise (Sakai's sweep)."""
    rng = np.random.default_rng(seed)
    effects = np.zeros(m) if effects is None else np.asarray(effects, float)
    return rng.normal(0.4, 0.15, (n, 1)) + effects[None, :] + rng.normal(0, 0.1, (n, m))


def direct_anova(X):
    n, m = X.shape
    grand = sum(X[i, j] for i in range(n) for j in range(m)) / (n * m)
    model_means = [sum(X[i, j] for i in range(n)) / n for j in range(m)]
    query_means = [sum(X[i, j] for j in range(m)) / m for i in range(n)]
    ss_m = n * sum((mu - grand) ** 2 for mu in model_means)
    ss_q = m * sum((mu - grand) ** 2 for mu in query_means)
    ss_e = sum((X[i, j] - model_means[j] - query_means[i] + grand) ** 2 for i in range(n) for j in range(m))
    df_e = (m - 1) * (n - 1)
    return ss_m, ss_q, ss_e, (ss_m / (m - 1)) / (ss_e / df_e), df_e


def test_anova_equals_the_direct_computation_and_statsmodels():
    X = simulated(seed=1, effects=[0, 0.02, 0.04, 0.0, -0.03])
    table = sweep(X).anova("ap").set_index("source")
    ss_m, ss_q, ss_e, F, df_e = direct_anova(X)
    assert table.loc["models", "sum_sq"] == pytest.approx(ss_m, rel=1e-10)
    assert table.loc["queries", "sum_sq"] == pytest.approx(ss_q, rel=1e-10)
    assert table.loc["residual", "sum_sq"] == pytest.approx(ss_e, rel=1e-9)
    assert table.loc["models", "F"] == pytest.approx(F, rel=1e-9)
    assert table.loc["models", "p_value"] == pytest.approx(stats.f.sf(F, 4, df_e), rel=1e-9)
    assert table.loc["residual", "df"] == df_e == 396
    statsmodels = pytest.importorskip("statsmodels.stats.anova", reason="statsmodels is a test extra")
    long = pd.DataFrame({"query": np.repeat(np.arange(100), 5), "model": np.tile(np.arange(5), 100),
                         "ap": X.ravel()})
    peer = statsmodels.AnovaRM(long, "ap", "query", within=["model"]).fit().anova_table
    assert table.loc["models", "F"] == pytest.approx(peer.loc["model", "F Value"], rel=1e-9)
    assert table.loc["models", "p_value"] == pytest.approx(peer.loc["model", "Pr > F"], rel=1e-7)


def test_tukey_p_values_and_intervals_are_the_studentized_range_formula():
    X = simulated(seed=2, effects=[0, 0.01, 0.03, 0.05, 0.05])
    table = sweep(X).compare_all(test="tukey", confidence=0.95)
    n, m = X.shape
    *_, ss_e, _, df_e = direct_anova(X)
    se = math.sqrt(ss_e / df_e / n)
    q95 = stats.studentized_range.ppf(0.95, m, df_e)
    assert len(table) == 10
    for row in table.itertuples():
        a, b = int(row.model_a[1:]), int(row.model_b[1:])
        d = X[:, a].mean() - X[:, b].mean()
        assert row.delta == pytest.approx(d, abs=1e-12)
        assert row.p_value == pytest.approx(stats.studentized_range.sf(abs(d) / se, m, df_e), rel=1e-6, abs=1e-12)
        assert (row.ci_low, row.ci_high) == pytest.approx((d - q95 * se, d + q95 * se), abs=1e-10)
        assert row.es_e == pytest.approx(d / math.sqrt(ss_e / df_e), rel=1e-9)  # Sakai's ES_E
        assert row.significant == (row.p_value < 0.05)


def test_randomized_tukey_enumerates_small_cases_exactly():
    X = np.array([[0.1, 0.5, 0.3], [0.2, 0.6, 0.1], [0.0, 0.4, 0.4]])  # 3 models, 3 queries: 6**3 = 216 orders
    table = sweep(X).compare_all(test="randomized_tukey", n_resamples=1000)
    Xc = X - X.mean(axis=1, keepdims=True)
    ranges = []
    for perms in itertools.product(itertools.permutations(range(3)), repeat=3):
        means = sum(Xc[i, list(p)] for i, p in enumerate(perms)) / 3
        ranges.append(means.max() - means.min())
    ranges = np.array(ranges)
    for row in table.itertuples():
        d = abs(row.mean_a - row.mean_b)
        assert row.p_value == pytest.approx(np.mean(ranges >= d - 1e-12))


def test_randomized_tukey_by_resampling_is_close_to_tukey_on_normal_data():
    X = simulated(n=60, m=4, seed=3, effects=[0, 0.02, 0.05, 0.06])
    res = sweep(X)
    tukey = res.compare_all(test="tukey")
    randomized = res.compare_all(test="randomized_tukey", n_resamples=20_000, seed=1)
    assert np.abs(tukey["p_value"] - randomized["p_value"]).max() < 0.03
    again = res.compare_all(test="randomized_tukey", n_resamples=20_000, seed=1)
    pd.testing.assert_frame_equal(randomized, again)  # a seed gives the same numbers, whatever the threads


def test_letters_by_hand():
    from topkeval.analysis.many import letter_display

    models, means = ["a", "b", "c", "d"], np.array([0.9, 0.8, 0.5, 0.4])
    # a and b differ from d; c only from a: a b share, b c d share except b-d
    letters = letter_display(models, means, {(0, 3), (1, 3), (0, 2)})
    assert letters == {"a": "a", "b": "ab", "c": "bc", "d": "c"}
    assert letter_display(models, means, set()) == dict.fromkeys(models, "a")
    every = {p for p in itertools.combinations(range(4), 2)}
    assert letter_display(models, means, every) == {"a": "a", "b": "b", "c": "c", "d": "d"}


def test_segments_bad_input_and_weights():
    X = simulated(n=40, m=3, seed=4)
    frame = pd.DataFrame({"model": np.repeat(["x", "y", "z"], 40), "query": np.tile(np.arange(40), 3),
                          "ap": X.T.ravel()})
    one = tk.Results.from_per_query(frame[frame["model"] == "x"])
    with pytest.raises(ParameterError, match="1 model"):
        one.compare_all()
    with pytest.raises(ParameterError, match="at least 2 queries"):
        tk.Results.from_per_query(frame[frame["query"] == 0]).anova("ap")
    flat = tk.Results.from_per_query(frame.assign(ap=np.tile(np.arange(40) / 40, 3)))  # the models agree everywhere
    same = flat.compare_all(test="tukey")
    assert (same["p_value"] == 1).all() and not same["significant"].any()
    assert np.abs(same[["delta", "ci_low", "ci_high"]].to_numpy()).max() < 1e-15
    assert flat.anova("ap").set_index("source").loc["models", ["F", "p_value"]].tolist() == [0.0, 1.0]
    with pytest.raises(ParameterError, match="variance 0"):
        flat.queries_needed("ap", delta=0.1)
    # z is x shifted by 0.125 on every query: the difference is exact, without residual
    shifted = tk.Results.from_per_query(frame.assign(ap=np.concatenate([np.arange(40) / 40, np.arange(40) / 40 + 0.125,
                                                                        np.arange(40) / 40])))
    exact = shifted.compare_all(test="tukey").set_index(["model_a", "model_b"])
    assert exact.loc[("x", "y"), "p_value"] == 0.0 and exact.loc[("x", "z"), "p_value"] == 1.0
    assert shifted.anova("ap").set_index("source").loc["models", "F"] == math.inf
    with pytest.raises(ParameterError, match="delta"):
        sweep(X).queries_needed("ap", delta=0.0)
    with pytest.raises(ParameterError, match="three or more"):
        sweep(X[:, :2]).queries_needed("ap", delta=0.1, test="anova")
    log = {"query": np.repeat(np.arange(30), 4), "relevance": np.tile([1, 0, 1, 0], 30),
           "seg": np.repeat(np.arange(30) % 2, 4), "w": np.ones(120),
           "a": np.random.default_rng(0).random(120), "b": np.random.default_rng(1).random(120),
           "c": np.random.default_rng(2).random(120)}
    res = tk.evaluate(log, ["precision@2"], score=["a", "b", "c"], by="seg")
    table = res.compare_all()
    assert sorted(map(str, table["seg"].unique())) == ["(all)", "0", "1"] and len(table) == 9
    # a segment of one query: its rows say nothing (NaN), the others stand; over every query it is an error
    rare = tk.evaluate({**log, "seg": np.repeat(np.where(np.arange(30) == 0, "rare", "common"), 4)}, ["precision@2"],
                       score=["a", "b", "c"], by="seg")
    table = rare.compare_all().set_index("seg")
    assert table.loc["rare", "p_value"].isna().all() and table.loc["common", "p_value"].notna().all()
    assert rare.anova("precision@2").set_index("seg").loc["rare", "F"].isna().all()
    with pytest.raises(ParameterError, match="at least 2 queries"):
        _raise_for_one_query()
    assert set(res.anova("precision@2")["seg"].astype(str)) == {"(all)", "0", "1"}
    weighted = tk.evaluate(log, ["precision@2"], score=["a", "b", "c"], weight="w")
    with pytest.raises(ParameterError, match="no weighted form"):
        weighted.anova("precision@2")
    # found by the hostile review: the paired t-test's sizing was refused with the ANOVA's reason
    with pytest.raises(ParameterError, match=r"queries_needed has no weighted form \(its t-test and ANOVA count"):
        weighted.queries_needed("precision@2", 0.1)


def _raise_for_one_query():
    """The whole log with one complete query: an error that says so."""
    one = tk.Results.from_per_query(pd.DataFrame({"model": ["x", "y"], "query": [1, 1], "ap": [0.1, 0.2]}))
    one.compare_all()


def test_queries_needed_by_hand():
    X = simulated(n=80, m=2, seed=5, effects=[0, 0.02])
    res = sweep(X)
    row = res.queries_needed("ap", delta=0.03).iloc[0]
    sd = np.std(X[:, 1] - X[:, 0], ddof=1)

    def power(n):
        crit = stats.t.ppf(0.975, n - 1)
        nc = math.sqrt(n) * 0.03 / sd
        return stats.nct.sf(crit, n - 1, nc) + stats.nct.cdf(-crit, n - 1, nc)

    n = row["queries_needed"]
    assert power(n) >= 0.8 > power(n - 1)
    assert row["variance"] == pytest.approx(sd ** 2)
    assert row["queries_now"] == 80 and row["power_now"] == pytest.approx(power(80))
    crit = stats.t.ppf(0.975, 79)
    d = row["detectable_delta"]
    nc = math.sqrt(80) * d / sd
    assert stats.nct.sf(crit, 79, nc) + stats.nct.cdf(-crit, 79, nc) == pytest.approx(0.8, abs=1e-6)


def test_the_issue_sweep_of_5_models_over_100_queries():
    X = simulated(n=100, m=5, seed=6, effects=[0, 0.0, 0.02, 0.05, 0.08])
    res = sweep(X)
    table = res.anova("ap").set_index("source")
    assert table.loc["models", "F"] == pytest.approx(direct_anova(X)[3], rel=1e-9)
    pairs = res.compare_all(test="tukey")
    assert pairs.loc[(pairs.model_a == "m0") & (pairs.model_b == "m4"), "significant"].item()
    assert not pairs.loc[(pairs.model_a == "m0") & (pairs.model_b == "m1"), "significant"].item()


@pytest.mark.slow
@pytest.mark.parametrize("test", ["tukey", "randomized_tukey"])
def test_family_wise_error_under_the_null(test):
    """Five models drawn alike: a test rejects some pair in about 5% of the sweeps."""
    sims = 200
    rejected = 0
    for s in range(sims):
        table = sweep(simulated(n=100, m=5, seed=1000 + s)).compare_all(test=test, n_resamples=1000, seed=s)
        rejected += table["significant"].any()
    assert 0.02 <= rejected / sims <= 0.09, rejected / sims


@pytest.mark.slow
def test_a_paired_test_at_queries_needed_has_the_promised_power():
    """A pilot whose variance is the true one (20,000 queries) sizes a study; fresh studies of that
    size reject at the promised rate (80%, within 0.05), and the size is the noncentral t's."""
    rng = np.random.default_rng(7)
    delta, sd = 0.02, 0.08
    pilot = np.column_stack([np.zeros(20_000), rng.normal(delta, sd, 20_000)])
    need = sweep(pilot).queries_needed("ap", delta=delta, power=0.8).iloc[0]["queries_needed"]
    assert abs(need - _needed(delta, sd ** 2)) <= 2
    sims = 1000
    hits = sum(stats.ttest_1samp(rng.normal(delta, sd, need), 0).pvalue < 0.05 for _ in range(sims))
    assert abs(hits / sims - 0.8) < 0.05


def _needed(delta, variance):
    n = 2
    while True:
        crit = stats.t.ppf(0.975, n - 1)
        nc = math.sqrt(n) * delta / math.sqrt(variance)
        if stats.nct.sf(crit, n - 1, nc) + stats.nct.cdf(-crit, n - 1, nc) >= 0.8:
            return n
        n += 1


def test_the_command_line_compares_every_pair(tmp_path, capsys):
    from topkeval.cli import main

    X = simulated(n=60, m=3, seed=8, effects=[0, 0.0, 0.08])
    rng = np.random.default_rng(8)
    rel = rng.random((60, 6)) < 0.4
    frame = pd.DataFrame({"query": np.repeat(np.arange(60), 6), "relevance": rel.ravel().astype(int),
                          **{f"s{j}": (rel * (0.5 + X[:, [j]]) + rng.normal(size=(60, 6))).ravel() for j in range(3)}})
    path = tmp_path / "log.csv"
    frame.to_csv(path, index=False)
    assert main(["compare", str(path), "--all", "--score", "s0", "--score", "s1", "--score", "s2", "-m", "ndcg@5",
                 "--format", "json"]) == 0
    import json

    pairs = json.loads(capsys.readouterr().out)["pairs"]
    res = tk.evaluate(frame, ["ndcg@5"], score=["s0", "s1", "s2"]).compare_all()
    assert [p["p_value"] for p in pairs] == pytest.approx(res["p_value"].tolist())
    assert main(["compare", str(path), "--all", "--score", "s0", "--baseline", "s1"]) == 2
    assert main(["compare", str(path), "--score", "s0", "--score", "s1", "--test", "tukey", "--baseline", "s0"]) == 2
    assert main(["compare", str(path), "--score", "s0", "--score", "s1"]) == 2
    assert "--baseline" in capsys.readouterr().err


def test_the_report_shows_every_pair_when_there_are_more_than_two_models(tmp_path):
    X = simulated(n=50, m=3, seed=9, effects=[0, 0.0, 0.1])
    res = sweep(X)
    res.report(tmp_path / "r.html", n_resamples=200, curves=False)
    page = (tmp_path / "r.html").read_text(encoding="utf-8")
    section = page[page.index('<section id="pairs">'):]
    section = section[:section.index("</section>")]
    pairs = res.compare_all()
    for row in pairs.itertuples():
        assert f"{row.delta:+.4f}" in section and f"{-row.delta:+.4f}" in section
    letters = dict(zip(pairs["model_a"], pairs["letters_a"])) | dict(zip(pairs["model_b"], pairs["letters_b"]))
    assert letters["m2"] == "a" and letters["m0"] == letters["m1"] == "b"
    two = sweep(X[:, :2])
    two.report(tmp_path / "two.html", n_resamples=200, curves=False)
    assert 'id="pairs"' not in (tmp_path / "two.html").read_text(encoding="utf-8")


@pytest.mark.parametrize("k", [600, 1000])
def test_huge_values_are_compared_as_their_scaled_down_selves(k):
    """Values of 1e180 to 1e301: the sums of squares would overflow (RuntimeWarnings, then NaN): F, p
    and effect sizes are those of the values divided by 2**k, the means and differences scaled back."""
    rng = np.random.default_rng(4)
    n = 30
    base = np.round(rng.random((3, n)), 2)
    frames = [pd.DataFrame({"model": np.repeat(["a", "b", "c"], n), "query": np.tile(np.arange(n), 3),
                            "dcg@10": np.ldexp(base.ravel(), e)}) for e in (0, k)]
    small, huge = (tk.Results.from_per_query(f) for f in frames)
    for test in ("tukey", "randomized_tukey"):
        want, got = small.compare_all(test=test, n_resamples=200), huge.compare_all(test=test, n_resamples=200)
        located = ["mean_a", "mean_b", "delta", "ci_low", "ci_high"]
        want[located] = np.ldexp(want[located].to_numpy(), k)
        pd.testing.assert_frame_equal(got, want, rtol=1e-13)
    want, got = small.anova("dcg@10"), huge.anova("dcg@10")
    assert got[["F", "p_value", "df"]].equals(want[["F", "p_value", "df"]])
    squares = np.ldexp(want[["sum_sq", "mean_sq"]].to_numpy(), 2 * k) if 2 * k < 1024 else np.inf
    assert np.array_equal(got[["sum_sq", "mean_sq"]].to_numpy(), squares * np.ones((4, 2)))


def test_queries_needed_detectable_beyond_the_range():
    """Three queries of wide differences: the detectable difference of ap (a metric in [0, 1]) would
    exceed 1, so none is (inf); dcg, unbounded, keeps the t-test's number."""
    frame = pd.DataFrame({"model": np.repeat(["a", "b"], 3), "query": np.tile(np.arange(3), 2),
                          "ap": [0.0, 0.5, 0.25, 1.0, 0.0, 0.25], "dcg": [0.0, 0.5, 0.25, 1.0, 0.0, 0.25]})
    res = tk.Results.from_per_query(frame)
    assert res.queries_needed("ap", delta=0.1).iloc[0]["detectable_delta"] == math.inf
    dcg = res.queries_needed("dcg", delta=0.1).iloc[0]["detectable_delta"]
    crit = stats.t.ppf(0.975, 2)
    nc = math.sqrt(3) * dcg / np.std([1.0, -0.5, 0.0], ddof=1)
    assert dcg > 1 and stats.nct.sf(crit, 2, nc) == pytest.approx(0.8, abs=1e-6)  # the lower tail is below 1e-9


def test_tukey_equals_statsmodels_tukeyhsd_for_the_block_design():
    """statsmodels' tukeyhsd given the block design's residual variance V_E, n queries per mean and
    (m - 1)(n - 1) degrees of freedom: the same differences, simultaneous intervals, p-values and
    rejections as compare_all."""
    multicomp = pytest.importorskip("statsmodels.stats.multicomp", reason="statsmodels is a test extra")
    for seed, effects in ((3, [0, 0.02, 0.04, 0.1]), (4, [0, 0, 0, 0, 0.05, 0.2])):
        X = simulated(n=40, m=len(effects), seed=seed, effects=effects)
        n, m = X.shape
        *_, ss_e, _, df_e = direct_anova(X)
        for confidence in (0.95, 0.9):
            table = sweep(X).compare_all(test="tukey", confidence=confidence)
            (ia, ib), reject, diffs, _, confint, _, df_total, _, pvalues = multicomp.tukeyhsd(
                X.mean(axis=0), n, ss_e / df_e, df=df_e / m, alpha=1 - confidence)
            assert df_total == pytest.approx(df_e)
            got = {(int(r.model_a[1:]), int(r.model_b[1:])): r for r in table.itertuples()}
            assert len(got) == len(ia) == m * (m - 1) // 2
            for a, b, d, (lo, hi), p, rej in zip(ia, ib, diffs, confint, pvalues, reject):
                row = got[(a, b)]  # statsmodels' difference is b - a
                assert row.delta == pytest.approx(-d, abs=1e-12)
                assert (row.ci_low, row.ci_high) == pytest.approx((-hi, -lo), abs=1e-9)
                assert row.p_value == pytest.approx(max(p, 1e-12), rel=1e-6, abs=1e-12)
                assert row.significant == bool(rej)


def test_tukey_p_values_beyond_the_integrals_accuracy_are_a_bound_printed_as_such(tmp_path, capsys):
    """scipy's studentized range gives 6.72e-13 however far in the tail (m = 3, 1884 df): such a p is
    given as 1e-12, an upper bound (the Bonferroni bound over the pairs, from Student's t, shows the
    true p is smaller still), printed '< 1e-12' in the table, markdown, CSV and the report; JSON keeps
    the number, said to be a bound (p_value_is_upper_bound, p_floor). A p above the floor is printed
    as a number, never as the floor."""
    import json

    from topkeval.analysis.many import P_FLOOR
    from topkeval.cli import main

    assert stats.studentized_range.sf(13.0, 3, 1884) == pytest.approx(6.72e-13, rel=0.01)  # the artefact
    rng = np.random.default_rng(5)
    n = 943
    X = rng.normal(0.4, 0.1, (n, 1)) + np.array([0.0, 0.004, 0.05]) + rng.normal(0, 0.05, (n, 3))
    table = sweep(X).compare_all()
    *_, ss_e, _, df_e = direct_anova(X)
    assert df_e == 1884 and table.attrs["p_floor"] == P_FLOOR == 1e-12
    for row in table.itertuples():
        q = abs(row.delta) / math.sqrt(ss_e / df_e / n)
        bound = 3 * 2 * stats.t.sf(q / math.sqrt(2), df_e)  # P(range > q) <= sum over pairs of P(|diff| > q)
        if bound < 1e-12:
            assert row.p_value == 1e-12  # the bound given: never the artefact, never 0
        else:
            assert row.p_value == pytest.approx(stats.studentized_range.sf(q, 3, df_e), rel=1e-6)
    floored = table[table["p_value"] == 1e-12]
    assert len(floored) == 2 and (table["p_value"] > 1e-12).sum() == 1
    # the command line reads a log: per query a relevant candidate scored X and another at 0.4 (rr 1 or 1/2)
    path = tmp_path / "log.csv"
    log = pd.DataFrame({"query": np.repeat(np.arange(n), 2), "relevance": np.tile([1, 0], n),
                        **{f"m{j}": np.ravel(np.column_stack([X[:, j], np.full(n, 0.4)])) for j in range(3)}})
    log.to_csv(path, index=False)
    argv = ["compare", str(path), "--all", "--score", "m0", "--score", "m1", "--score", "m2", "-m", "rr"]
    want = tk.evaluate(log, ["rr"], score=["m0", "m1", "m2"]).compare_all()
    assert (want["p_value"] == 1e-12).any()
    for fmt in ("table", "markdown", "csv", "json"):
        assert main(argv + ["--format", fmt]) == 0
        out = capsys.readouterr().out
        if fmt == "json":
            payload = json.loads(out)
            assert [p["p_value"] for p in payload["pairs"]] == want["p_value"].tolist()
            # which is a bound is said (the Bonferroni bound above tells which are), and the floor
            assert [p["p_value_is_upper_bound"] for p in payload["pairs"]] == [p == 1e-12 for p in want["p_value"]]
            assert payload["p_floor"] == 1e-12 and sum(p["p_value_is_upper_bound"] for p in payload["pairs"]) == 2
            continue
        assert "< 1e-12" in out and "6.7" not in out, (fmt, out)
        if fmt == "csv":
            got = pd.read_csv(__import__("io").StringIO(out))["p_value"].tolist()
            assert got == ["< 1e-12" if p == 1e-12 else p for p in want["p_value"]] or \
                [str(g) for g in got] == ["< 1e-12" if p == 1e-12 else str(p) for p in want["p_value"]]
    res = tk.evaluate(log, ["rr"], score=["m0", "m1", "m2"])
    res.report(tmp_path / "r.html", n_resamples=200, curves=False)
    page = (tmp_path / "r.html").read_text(encoding="utf-8")
    section = page[page.index('<section id="pairs">'):]
    assert "p &lt; 1e-12" in section[:section.index("</section>")]


# ---------------------------------------------------------------------------------------------
# every number of anova, compare_all and queries_needed against an independent computation


def test_every_row_of_the_anova_table_equals_statsmodels_ols():
    """The whole table (models, queries, residual, total: sum of squares, degrees of freedom, mean
    square, F, p) of 11 queries x 4 models (n != m) against statsmodels' least-squares two-way ANOVA
    (anova_lm of v ~ C(model) + C(query)); the total row against numpy's variance (n m - 1 in its
    denominator); a query one model lacks is left out of every row, and out of the count."""
    smf = pytest.importorskip("statsmodels.formula.api", reason="statsmodels is a test extra")
    import statsmodels.api as sm

    rng = np.random.default_rng(21)
    X = simulated(n=11, m=4, seed=21, effects=[0, 0.05, -0.02, 0.1])
    frame = pd.DataFrame({"model": np.repeat([f"m{j}" for j in range(4)], 12), "query": np.tile(np.arange(12), 4),
                          "ap": np.concatenate([np.append(X[:, j], rng.random()) for j in range(4)])})
    frame = frame.drop(index=frame.index[(frame["model"] == "m2") & (frame["query"] == 11)])  # query 11 incomplete
    table = tk.Results.from_per_query(frame).anova("ap").set_index("source")
    long = pd.DataFrame({"query": np.repeat(np.arange(11), 4), "model": np.tile(np.arange(4), 11), "v": X.ravel()})
    peer = sm.stats.anova_lm(smf.ols("v ~ C(model) + C(query)", data=long).fit(), typ=2)
    for ours, theirs in (("models", "C(model)"), ("queries", "C(query)"), ("residual", "Residual")):
        assert table.loc[ours, "sum_sq"] == pytest.approx(peer.loc[theirs, "sum_sq"], rel=1e-10)
        assert table.loc[ours, "df"] == peer.loc[theirs, "df"]
        assert table.loc[ours, "mean_sq"] == pytest.approx(peer.loc[theirs, "sum_sq"] / peer.loc[theirs, "df"],
                                                           rel=1e-10)
    for ours, theirs in (("models", "C(model)"), ("queries", "C(query)")):
        assert table.loc[ours, "F"] == pytest.approx(peer.loc[theirs, "F"], rel=1e-9)
        assert table.loc[ours, "p_value"] == pytest.approx(peer.loc[theirs, "PR(>F)"], rel=1e-8)
    assert table.loc["total", "df"] == 43
    assert table.loc["total", "sum_sq"] == pytest.approx(np.var(X, ddof=0) * 44, rel=1e-12)
    assert table.loc["total", "mean_sq"] == pytest.approx(np.var(X, ddof=1), rel=1e-12)
    assert (table["queries"] == 11).all()


def test_randomized_tukey_p_values_and_intervals_by_enumeration_with_fewer_queries_than_models():
    """3 models over 2 queries (6**2 = 36 orders, every one enumerated): each pair's p-value is the
    share of the orders whose largest difference of model means (each query's values permuted, the
    sums over 2 queries) reaches the pair's, and its simultaneous interval is the difference +- the
    confidence quantile of those largest differences."""
    X = np.array([[0.1, 0.7, 0.4], [0.3, 0.8, 0.2]])
    table = sweep(X).compare_all(test="randomized_tukey", confidence=0.8, n_resamples=1000)
    Xc = X - X.mean(axis=1, keepdims=True)
    ranges = []
    for perms in itertools.product(itertools.permutations(range(3)), repeat=2):
        means = sum(Xc[i, list(p)] for i, p in enumerate(perms)) / 2
        ranges.append(means.max() - means.min())
    ranges = np.array(ranges)
    half = np.quantile(ranges, 0.8)
    for row in table.itertuples():
        d = row.mean_a - row.mean_b
        assert row.p_value == pytest.approx(np.mean(ranges >= abs(d) - 1e-12))
        assert (row.ci_low, row.ci_high) == pytest.approx((d - half, d + half), abs=1e-12)


def test_a_p_value_equal_to_alpha_is_not_significant():
    """Significant means p < 1 - confidence, strictly: 2 models, 2 queries, differences 1 and 3: of
    the 4 orders, 2 reach the observed range 2, so p = 0.5 exactly; at confidence 0.5 the pair is not
    significantly different (one letter)."""
    X = np.array([[0.0, 1.0], [0.0, 3.0]])
    row = sweep(X).compare_all(test="randomized_tukey", confidence=0.5).iloc[0]
    assert row.p_value == 0.5 and not row.significant and row.letters_a == row.letters_b == "a"


def test_letters_run_from_the_best_mean_by_the_best_member_of_each_group():
    """Groups ordered by their best member: b (0.9) and a (0.1) share a letter, c (0.5) differs from
    both; the group {a, b} holds the best model, so it is 'a', even though it also holds the worst."""
    from topkeval.analysis.many import letter_display

    assert letter_display(["a", "b", "c"], np.array([0.1, 0.9, 0.5]), {(0, 2), (1, 2)}) == {"a": "a", "b": "a",
                                                                                             "c": "b"}


def test_queries_needed_for_a_paired_t_test_equals_statsmodels():
    """queries_needed's paired t-test sizing against statsmodels' TTestPower (the one-sample t-test of
    the differences): two models use the variance of their differences; more than two Sakai's 2 V_E,
    V_E the residual mean square (from statsmodels' ANOVA); power now and the size needed."""
    smf = pytest.importorskip("statsmodels.formula.api", reason="statsmodels is a test extra")
    import statsmodels.api as sm
    from statsmodels.stats.power import TTestPower

    for m in (2, 4):
        X = simulated(n=40, m=m, seed=30 + m, effects=np.linspace(0, 0.03, m))
        row = sweep(X).queries_needed("ap", delta=0.03, power=0.8, alpha=0.05).iloc[0]
        if m == 2:
            variance = np.var(X[:, 1] - X[:, 0], ddof=1)
        else:
            long = pd.DataFrame({"q": np.repeat(np.arange(40), m), "j": np.tile(np.arange(m), 40), "v": X.ravel()})
            peer = sm.stats.anova_lm(smf.ols("v ~ C(j) + C(q)", data=long).fit(), typ=2)
            variance = 2 * peer.loc["Residual", "sum_sq"] / peer.loc["Residual", "df"]
        assert row["variance"] == pytest.approx(variance, rel=1e-10)
        effect = 0.03 / math.sqrt(variance)
        power = TTestPower()
        assert row["queries_needed"] == math.ceil(power.solve_power(effect_size=effect, alpha=0.05, power=0.8))
        assert row["power_now"] == pytest.approx(power.power(effect_size=effect, nobs=40, alpha=0.05), abs=1e-9)
        assert power.power(effect_size=row["detectable_delta"] / math.sqrt(variance), nobs=40,
                           alpha=0.05) == pytest.approx(0.8, abs=1e-6)


def test_queries_needed_for_the_anova_by_hand():
    """Sakai's ANOVA-based sizing, written here from his definition: the F-test of m models over n
    queries (m - 1 and (m - 1)(n - 1) degrees of freedom, level alpha) detects a range delta between
    the best and the worst model with noncentrality lambda = n delta^2 / (2 V_E); the size needed is
    the smallest n reaching the power, and the detectable range the delta where the power now is it."""
    X = simulated(n=30, m=4, seed=41, effects=[0, 0.01, 0.02, 0.04])
    row = sweep(X).queries_needed("ap", delta=0.05, test="anova", alpha=0.05, power=0.8).iloc[0]
    *_, ss_e, _, df_e = direct_anova(X)
    v_e = ss_e / df_e
    assert row["variance"] == pytest.approx(v_e, rel=1e-10)

    def power(n, delta):
        crit = stats.f.ppf(0.95, 3, 3 * (n - 1))
        return stats.ncf.sf(crit, 3, 3 * (n - 1), n * delta**2 / (2 * v_e))

    n = int(row["queries_needed"])
    assert power(n, 0.05) >= 0.8 > power(n - 1, 0.05)
    assert row["power_now"] == pytest.approx(power(30, 0.05), abs=1e-9)
    assert power(30, row["detectable_delta"]) == pytest.approx(0.8, abs=1e-6)


@pytest.mark.slow
def test_an_anova_of_queries_needed_queries_has_the_promised_power():
    """Simulated studies of the size queries_needed gives (Sakai's least favourable case: two models
    delta apart, the others halfway; normal residuals of the pilot's variance): their F-test rejects
    in about 80% of 400 studies (the size rounds up: at least 80% - 3.5 standard errors, and not far
    above)."""
    rng = np.random.default_rng(8)
    delta, sd, m = 0.05, 0.06, 4
    pilot = np.column_stack([rng.normal(0, sd, 20_000) for _ in range(m)])
    n = int(sweep(pilot).queries_needed("ap", delta=delta, test="anova").iloc[0]["queries_needed"])
    effects = np.array([-delta / 2, delta / 2, 0.0, 0.0])
    hits = 0
    for _ in range(400):
        Y = rng.normal(0.3, 0.1, (n, 1)) + effects[None, :] + rng.normal(0, sd, (n, m))
        *_, F, df_e = direct_anova(Y)
        hits += stats.f.sf(F, m - 1, df_e) < 0.05
    se = math.sqrt(0.8 * 0.2 / 400)
    assert 0.8 - 3.5 * se <= hits / 400 <= 0.8 + 3.5 * se + 0.05, (n, hits / 400)


def test_randomized_tukey_intervals_by_resampling_are_the_permutation_quantile():
    """Beyond enumeration (4 models, 10 queries: 24**10 orders), the simultaneous interval's
    half-width is the confidence quantile of the largest difference of model means over random
    permutations of each query's values: against permutations drawn here, within Monte Carlo error."""
    X = simulated(n=10, m=4, seed=13, effects=[0, 0.05, 0.1, 0.0])
    table = sweep(X).compare_all(test="randomized_tukey", confidence=0.9, n_resamples=20_000, seed=2)
    rng = np.random.default_rng(7)
    Xc = X - X.mean(axis=1, keepdims=True)
    perms = np.argsort(rng.random((20_000, 10, 4)), axis=2)
    means = np.take_along_axis(np.broadcast_to(Xc, perms.shape), perms, axis=2).mean(axis=1)
    half = np.quantile(means.max(axis=1) - means.min(axis=1), 0.9)
    for row in table.itertuples():
        d = row.mean_a - row.mean_b
        assert (row.ci_high - row.ci_low) / 2 == pytest.approx(half, rel=0.03)
        assert (row.ci_low + row.ci_high) / 2 == pytest.approx(d, abs=1e-12)
