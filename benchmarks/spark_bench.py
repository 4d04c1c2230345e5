"""topkeval on Spark side by side with what Spark users write, in one Spark session, as ratios.

    python benchmarks/spark_bench.py --rows 1000000 10000000 [--master local[2]] [--repeat 3]

Workload: the log of ``benchmarks/run.py`` (queries of 20 to 200 candidates, about 5% relevant,
distinct scores, 2 models) with text query and item ids, as a Parquet file read by Spark; from the
file to the means of recall and precision at 5, 10, 20 and R-precision for both models.

* ``topkeval``: ``tk.evaluate(spark.read.parquet(path), ...)`` (every metric in one pass; the
  per-query values stay on the cluster);
* ``sql_window``: the Spark SQL one writes by hand: ``row_number()`` over each query by score,
  the hits at each cutoff summed per query, then averaged (both models in one query);
* ``ranking_evaluator``: ``pyspark.ml.evaluation.RankingEvaluator`` (Spark's ``RankingMetrics``):
  the text item ids hashed to numbers (it takes no text), each query's items sorted into an array,
  the relevant ones into another, then one ``evaluate`` per metric and cutoff (it has no
  R-precision);
* ``local``: the same evaluation without Spark, on this machine (the overhead of Spark);
* ``shuffle_floor``: reading the columns and repartitioning them by query, nothing computed: the
  part of every tool's time that is Spark moving rows.

Each tool runs once to warm the JVM, then ``--repeat`` times; the table gives medians and ratios
to topkeval, and whether the means agree (max difference over the metrics both compute).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
os.environ.setdefault("TOPKEVAL_BENCH_IDS", "str")

import run as bench  # noqa: E402  (the log generator and its parquet files)

CUTOFFS = bench.CUTOFFS
MODELS = bench.MODELS
METRICS = [f"{m}@{k}" for k in CUTOFFS for m in ("recall", "precision")] + ["r_precision"]


def run_topkeval(spark, path):
    import topkeval as tk

    res = tk.evaluate(spark.read.parquet(str(path)), METRICS, query="query", relevance="relevance",
                      score=list(MODELS), item="item")
    return res.summary.loc["model_a"].to_dict()


def run_local(spark, path):
    """The same call without Spark: the parquet file read and evaluated on this machine."""
    import topkeval as tk

    res = tk.evaluate(str(path), METRICS, query="query", relevance="relevance", score=list(MODELS), item="item")
    return res.summary.loc["model_a"].to_dict()


def run_sql_window(spark, path):
    spark.read.parquet(str(path)).createOrReplaceTempView("log")
    ranks = ", ".join(f"row_number() OVER (PARTITION BY query ORDER BY {m} DESC) AS rk_{m}" for m in MODELS)
    sums = ", ".join(f"sum(CASE WHEN rk_{m} <= {k} THEN relevance ELSE 0 END) AS h_{m}_{k}"
                     for m in MODELS for k in CUTOFFS)
    sums_r = ", ".join(f"sum(CASE WHEN rk_{m} <= R THEN relevance ELSE 0 END) AS hR_{m}" for m in MODELS)
    means = ", ".join(f"avg(h_{m}_{k} / R) AS recall_{m}_{k}, avg(h_{m}_{k} / {k}) AS precision_{m}_{k}"
                      for m in MODELS for k in CUTOFFS)
    row = spark.sql(f"""
        WITH r AS (SELECT query, relevance, {ranks}, sum(relevance) OVER (PARTITION BY query) AS R FROM log),
             q AS (SELECT query, first(R) AS R, {sums}, {sums_r} FROM r GROUP BY query)
        SELECT {means}, {", ".join(f"avg(hR_{m} / R) AS rprec_{m}" for m in MODELS)} FROM q
    """).collect()[0].asDict()
    out = {f"{name}@{k}": row[f"{name}_model_a_{k}"] for k in CUTOFFS for name in ("recall", "precision")}
    out["r_precision"] = row["rprec_model_a"]
    return out


def run_ranking_evaluator(spark, path):
    from pyspark.ml.evaluation import RankingEvaluator
    from pyspark.sql import functions as F

    # RankingEvaluator takes numeric item ids only: text ids hashed to doubles (below 2**52, exact)
    log = spark.read.parquet(str(path)).withColumn("item", (F.xxhash64("item") % (1 << 52)).cast("double"))
    k_max = max(CUTOFFS)
    out = {}
    for m in MODELS:
        # the usual preparation: each query's items by descending score, and its relevant items
        arrays = log.groupBy("query").agg(
            F.slice(F.sort_array(F.collect_list(F.struct(F.col(m).cast("double").alias("s"), F.col("item"))),
                                 asc=False), 1, k_max).getField("item").alias("prediction"),
            F.collect_list(F.when(F.col("relevance") > 0, F.col("item"))).alias("label")).cache()
        for k in CUTOFFS:
            for name, metric in (("recall", "recallAtK"), ("precision", "precisionAtK")):
                value = RankingEvaluator(metricName=metric, k=k, predictionCol="prediction",
                                         labelCol="label").evaluate(arrays)
                if m == "model_a":
                    out[f"{name}@{k}"] = value
        arrays.unpersist()
    return out


def run_shuffle_floor(spark, path):
    cols = ["query", "item", "relevance", *MODELS]
    log = spark.read.parquet(str(path)).select(*cols)
    n = max(log.rdd.getNumPartitions(), spark.sparkContext.defaultParallelism)
    log.repartition(n, "query").write.format("noop").mode("overwrite").save()
    return {}


TOOLS = {"topkeval": run_topkeval, "local": run_local, "sql_window": run_sql_window, "ranking_evaluator": run_ranking_evaluator,
         "shuffle_floor": run_shuffle_floor}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, nargs="+", default=[1_000_000])
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--tools", default=",".join(TOOLS))
    args = parser.parse_args()
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)  # the executors run this Python (topkeval)
    from pyspark.sql import SparkSession
    from rich.console import Console
    from rich.table import Table

    spark = (SparkSession.builder.master(args.master).appName("topkeval-bench")
             .config("spark.driver.memory", "8g").config("spark.ui.showConsoleProgress", "false")
             .config("spark.sql.shuffle.partitions", str(max(2, os.cpu_count() or 2))).getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    console = Console()
    tools = args.tools.split(",")
    for rows in args.rows:
        path = bench.data_path(rows)
        times, means = {}, {}
        for tool in tools:
            TOOLS[tool](spark, path)  # warm-up: JVM code, Python workers, file cache
            runs = []
            for _ in range(args.repeat):
                start = time.perf_counter()
                means[tool] = TOOLS[tool](spark, path)
                runs.append(time.perf_counter() - start)
            times[tool] = statistics.median(runs)
            console.print(f"{rows:,} rows  {tool:<18} {times[tool]:8.2f} s")
        table = Table(title=f"{rows:,} rows, Spark {spark.version} {args.master}, text ids, 2 models: "
                            "recall/precision @5,10,20 + R-precision, from the parquet file to the means")
        for col in ("tool", "median s", "tool / topkeval", "agrees with topkeval"):
            table.add_column(col, justify="right" if col != "tool" else "left")
        base = times.get("topkeval")
        for tool in tools:
            agree = "-"
            if tool != "topkeval" and means.get(tool) and means.get("topkeval"):
                shared = [k for k in means[tool] if k in means["topkeval"]]
                diff = max(abs(means[tool][k] - means["topkeval"][k]) for k in shared)
                agree = f"{'yes' if diff < 1e-9 else 'NO'} ({len(shared)} means, max diff {diff:.1e})"
            ratio = f"{times[tool] / base:.2f}x" if base else "-"
            table.add_row(tool, f"{times[tool]:.2f}", ratio, agree)
        console.print(table)
    spark.stop()


if __name__ == "__main__":
    main()
