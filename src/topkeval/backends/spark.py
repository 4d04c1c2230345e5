"""topkeval on Apache Spark: the same engine in every partition, one Spark job for the means.

``tk.evaluate(spark_df, ...)`` (and ``tk.evaluate(run_sdf, qrels=qrels_sdf, ...)``) repartitions the
rows by query, so that a query is never split, and evaluates each partition with ``mapInArrow``:
the partition's Arrow batches become a grouped log (:mod:`topkeval.inputs.grouped`), the engine computes the
same per-query values as on one machine (:mod:`topkeval.engine`, the CPU kernel), and each
partition returns one row per (model, query) and one row of counts: its queries, rows, ties and,
per model and metric, the sum and the number of defined values (NaN, ``undefined="nan"``, left out
as locally). Only the rows of counts travel to the driver, which adds them up into ``summary``
and ``info``. A query's rows always reach one task, however many they are: its values are exact
whatever the partitioning; only the order of the floating-point additions of the means differs
from one machine (relative differences of about 1e-16). With ``ties="first"`` the rows keep the
order Spark read them in (a Parquet file's order), carried through the shuffle.

:class:`SparkResults` keeps the per-query values as a Spark DataFrame (``res.per_query``, lazy:
each Spark action on it evaluates again, so ``cache()`` it to use it often; ``res.to_pandas()``
collects it once). Nothing is cached behind the user's back: a changed input gives new numbers. ``compare``, ``summary_ci`` and ``diff`` collect the per-query
values (one number per query and metric, far smaller than the log) and refuse beyond
:data:`MAX_COLLECT` rows.

Spark Connect (``SparkSession.builder.remote(...)``: shared and serverless clusters) takes the
same path: nothing here uses the RDD API, the SparkContext or the JVM, which a Connect client does
not have. There the rows are repartitioned by query into Spark's own number of shuffle partitions
(``spark.sql.shuffle.partitions``), which adaptive query execution (on by default) coalesces to the
size of the data.

pyspark is the ``[spark]`` extra; ``import topkeval`` never imports it. On a cluster, the executors
need topkeval installed too (``pip install`` of its checkout or wheel on every node, or a packed environment shipped
with ``spark-submit --archives``; not ``--py-files``, as numba caches its compiled kernels beside
the installed package): see the docs, docs/how-to/spark.md.
"""

from __future__ import annotations

import json
import warnings
from functools import partial

import numpy as np
import pandas as pd

from .. import engine
from ..errors import DataError, TopkevalError, TopkevalWarning, warn
from ..metrics.define import ensure, shipped
from ..metrics.names import Metric
from .cpu import CPU, items_changed
from .plugins import BackendPlugin

#: Most per-query rows (models x queries) that compare / summary_ci / diff collect to the driver.
MAX_COLLECT = 50_000_000

_KIND, _COUNTS, _ROW = "_topkeval_kind", "_topkeval_counts", "_topkeval_row"


def read_parquet(path, master: str):
    """A parquet file or directory as a Spark DataFrame, in the active session or a new one on ``master``."""
    import os

    from ..errors import InputFileError

    try:
        from pyspark.sql import SparkSession
    except ImportError:
        raise InputFileError("--spark needs pyspark: pip install pyspark (or pip install '.[spark]' in topkeval's checkout), and Java 17.") from None
    if "://" not in str(path):  # a local path (Spark reads s3a://, hdfs://... itself)
        from ..inputs import input_path
        from ..inputs.formats import PARQUET, format_of

        path = input_path(path, "the parquet data")
        if format_of(str(path).rstrip("/")) is not PARQUET and not os.path.isdir(path):
            raise InputFileError(f"--spark reads parquet (a file or a directory of them); got '{path}'.")
    session = SparkSession.getActiveSession()
    if session is None:
        session = start_session(master)
    return _run(lambda: session.read.parquet(str(path)))


def java_problem() -> str | None:
    """Why Spark could not find Java, or None: ``JAVA_HOME`` naming a folder without ``bin/java``, or
    no ``JAVA_HOME`` and no ``java`` on the PATH (what Spark's launcher looks at, in that order)."""
    import os
    import shutil

    home = os.environ.get("JAVA_HOME")
    if home:
        java = os.path.join(home, "bin", "java")
        if not (os.path.isfile(java) and os.access(java, os.X_OK)):
            return (f"JAVA_HOME is '{home}', which has no bin/java: point JAVA_HOME at a Java 17 (or later) "
                    "installation, or unset it to use the java on the PATH")
        return None
    if shutil.which("java") is None:
        return ("Java is not installed (no JAVA_HOME, no java on the PATH): Spark needs Java 17 or later "
                "(Debian / Ubuntu: apt-get install openjdk-17-jre-headless; or conda install openjdk=17)")
    return None


def start_session(master: str):
    """A new Spark session on ``master``, or a TopkevalError saying why Spark could not start
    (Java missing, most often) instead of py4j's traceback.

    Examples
    --------
    >>> import os
    >>> saved = os.environ.get("JAVA_HOME")
    >>> os.environ["JAVA_HOME"] = "/nonexistent"
    >>> try:
    ...     start_session("local[1]")
    ... except TopkevalError as exc:
    ...     print(exc)
    ... finally:
    ...     _ = os.environ.pop("JAVA_HOME") if saved is None else os.environ.update(JAVA_HOME=saved)
    Spark could not start: JAVA_HOME is '/nonexistent', which has no bin/java: point JAVA_HOME at a Java 17 (or later) installation, or unset it to use the java on the PATH.
    """
    problem = java_problem()
    if problem is not None:
        raise TopkevalError(f"Spark could not start: {problem}.")
    from pyspark.sql import SparkSession

    try:
        session = (SparkSession.builder.master(master).appName("topkeval")
                   .config("spark.ui.showConsoleProgress", "false").getOrCreate())
    except Exception as exc:  # py4j and pyspark wrap the launcher's failure; say it in one sentence
        first = next((line.strip() for line in str(exc).splitlines() if line.strip()), type(exc).__name__)
        raise TopkevalError(f"Spark could not start on master {master!r}: {first} Check the master URL and that "
                            "Java 17 or later is installed (JAVA_HOME, or java on the PATH); the lines above, "
                            "from Spark, may say more.") from None
    session.sparkContext.setLogLevel("FATAL")
    return session


def is_spark(data, plan=None) -> bool:
    """A pyspark DataFrame (classic or Spark Connect), recognised without importing pyspark."""
    return type(data).__module__.startswith("pyspark.") and hasattr(data, "mapInArrow")


def evaluate_request(r) -> engine.Evaluation:
    """A checked request (:class:`topkeval.request.Request`) of a Spark DataFrame: evaluated on the
    cluster; with segments or weights, the per-query values and each query's attributes are
    collected (as compare does)."""
    from dataclasses import replace

    evaluation = evaluate_spark(r.data, r.plan, query=r.query, relevance=r.relevance, scores=r.scores, item=r.item,
                                depth=r.depth, ascending=r.ascending, qrels=r.qrels, model=r.model,
                                missing_queries=r.missing_queries, judged_only=r.judged_only)
    if not r.attributes:
        return evaluation
    attrs = query_attributes(r.data, r.query, r.by, r.weight)
    return engine.attach(replace(evaluation, backend=None), attrs, r.by, r.weight)


def evaluate_spark(df, plan: engine.Plan, *, query: str, relevance: str | None, scores: list[str], item: str | None,
                   depth: int | None, ascending: bool, qrels=None, model: str | None = None,
                   missing_queries: str = "skip", judged_only: bool = False, partitions: int | None = None):
    """Evaluate a Spark DataFrame (see the module docstring)."""
    from pyspark.sql import functions as F

    _check_columns(df, [query, *scores] + ([item] if item else []) + ([model] if model else [])
                   + ([relevance] if qrels is None else []), "the Spark DataFrame",
                   {s: "score" for s in scores} | {query: "query", relevance: "relevance"}
                   | ({item: "item"} if item else {}) | ({model: "model"} if model else {}))
    if qrels is not None:
        if not is_spark(qrels):
            raise DataError("With a Spark DataFrame as the run, the judgments must be a Spark DataFrame too: "
                            "spark.createDataFrame(...) or spark.read.parquet(...).")
        if item is None:
            from ..errors import ParameterError

            raise ParameterError("Judgments are matched to the run by item id: pass item='<column>' with qrels=.")
        runs = df.select(query, item, *scores, *([model] if model else []))
        if relevance is None:  # a table of the relevant pairs: grade 1 each, a pair listed twice once
            from ..inputs.judgments import all_relevant_column

            _check_columns(qrels, [query, item], "the judgments (qrels=)", {query: "query", item: "item"})
            relevance = all_relevant_column(query, item, *scores, model)  # a column of no other role
            judged = qrels.select(query, item).dropDuplicates().withColumn(relevance, F.lit(1))
        else:
            _check_columns(qrels, [query, item, relevance], "the judgments (qrels=)",
                           {query: "query", item: "item", relevance: "relevance"})
            judged = qrels.select(query, item, relevance)
        # one table: the run's rows and the judgments' rows, told apart by a marker, partitioned
        # together by query
        both = runs.withColumn(_KIND, F.lit("run")).unionByName(judged.withColumn(_KIND, F.lit("qrels")),
                                                                allowMissingColumns=True)
        query_type = _common_type(df, qrels, query)
        _common_type(df, qrels, item)
    else:
        both = df.select(query, relevance, *scores, *([item] if item else []))
        query_type = df.schema[query].dataType
    all_runs = None
    if model is not None and qrels is not None:
        # every partition is told every run's name (a run may have no row in one), in the order
        # the runs first appear, as a local evaluation reports them
        first = df.select(model).withColumn("_at", F.monotonically_increasing_id()).groupBy(model).agg(
            F.min("_at").alias("_at"))
        all_runs = [str(r[0]) for r in _run(lambda: first.orderBy("_at").select(model).collect())]
    if plan.conv.ties in ("first", "ranx"):
        # the order of the input breaks ties: the order Spark reads the rows in (a file's order;
        # a DataFrame shuffled by Spark has no order to keep), carried through the shuffle
        both = both.withColumn(_ROW, F.monotonically_increasing_id())
    n = partitions or _partitions(df)
    parts = both.repartition(n, query) if n else both.repartition(query)
    names = plan.names
    fields = [f"m{i}" for i in range(len(names))]  # Spark column names without "." or "@"
    schema = _output_schema(query, query_type, fields)
    fn = partial(_partition, plan=plan, query=query, relevance=relevance, scores=scores, item=item, depth=depth,
                 ascending=ascending, judged=qrels is not None, model=model, missing_queries=missing_queries,
                 judged_only=judged_only, all_runs=all_runs, fields=fields, arrow_schema=_arrow_schema(schema),
                 defined=shipped({m.family for m in plan.metrics}))  # metrics of the user's, defined again there
    out = _run(lambda: parts.mapInArrow(fn, schema))
    # one job: every partition evaluated, only its row of counts and sums shipped to the driver
    counts = [json.loads(r[0]) for r in _run(lambda: out.where(F.col(_KIND) == "counts").select(_COUNTS).collect())]
    if not counts:
        raise DataError("The table is empty: there is nothing to evaluate.")
    order = list(dict.fromkeys(m for c in counts for m in c["models"]))
    extra = _info(counts, order, plan, qrels is not None)
    per_query = out.where(F.col(_KIND) == "query").select(
        "model", query, *[F.col(f).alias(name) for f, name in zip(fields, names)])
    rows = SparkRows(per_query, parts, fn, query, order, sum(sum(c["evaluated"].values()) for c in counts))
    return engine.build_results([_batch(c) for c in counts], plan, query_name=query, info=extra, per_query=rows.collect,
                                backend=rows, own_rows=model is not None)  # a wide table: one set of rows, every score ranks it


def _batch(counts: dict) -> engine.Evaluated:
    """One partition's counts and sums as the engine's batch of sums (the per-query values stay on
    the cluster), for the one results builder."""
    models = [engine.ModelValues(m, np.empty(0, dtype=object), {}, counts["ties"][m], counts["rows"][m],
                                 counts["evaluated"][m], {name: (float(t), int(n)) for name, (t, n)
                                                          in counts["sums"][m].items()})
              for m in counts["models"]]
    return engine.Evaluated(models, counts.get("queries", 0), counts.get("skipped_empty", 0),
                            counts.get("relevant", 0))


def _partitions(df) -> int | None:
    """As many partitions as the input has, and at least one per core of the cluster; None where Spark
    cannot say (Spark Connect, which has neither the RDD nor the SparkContext; a cluster that refuses
    them): then the rows are repartitioned by query alone, into ``spark.sql.shuffle.partitions``
    (200 by default), which adaptive query execution coalesces to the size of the data. A fixed
    count there would be 200 tasks whatever the data: 27 to 45 s for 300 rows on ``local[2]`` (2
    cores), against 1 to 4 s coalesced."""
    if is_connect(df):
        return None
    try:
        return max(df.rdd.getNumPartitions(), df.sparkSession.sparkContext.defaultParallelism)
    except Exception:  # a shared cluster may refuse the RDD API: Spark decides, as on Connect
        return None


def is_connect(df) -> bool:
    """A Spark Connect DataFrame (``pyspark.sql.connect``), recognised without importing pyspark."""
    return type(df).__module__.startswith("pyspark.sql.connect.")


def _check_columns(df, wanted, where: str, roles: dict) -> None:
    from ..inputs.tables import _check_columns as check

    check([c for c in wanted if c is not None], df.columns, where, roles)


def _common_type(run, qrels, query: str):
    a, b = run.schema[query].dataType, qrels.schema[query].dataType
    if a != b:
        raise DataError(f"The {query!r} ids of the run ({a.simpleString()}) and of the judgments "
                        f"({b.simpleString()}) have different Spark types: cast one (for example "
                        f"qrels.withColumn({query!r}, F.col({query!r}).cast('{a.simpleString()}'))).")
    return a


def _output_schema(query: str, query_type, fields: list[str]):
    from pyspark.sql.types import DoubleType, StringType, StructField, StructType

    return StructType([StructField(_KIND, StringType()), StructField("model", StringType()),
                       StructField(query, query_type), *[StructField(f, DoubleType()) for f in fields],
                       StructField(_COUNTS, StringType())])


def _arrow_schema(schema):
    try:
        from pyspark.sql.pandas.types import to_arrow_schema
    except ImportError:  # pragma: no cover - older pyspark
        import pyarrow as pa
        from pyspark.sql.pandas.types import to_arrow_type

        return pa.schema([pa.field(f.name, to_arrow_type(f.dataType)) for f in schema.fields])
    return to_arrow_schema(schema)


def _run(job):
    """Run a Spark call; a topkeval error raised in a task comes back as itself, with its message.

    pyspark 4 warns that it "does not yet fully support pandas >= 3.0.0" (a FutureWarning) when its
    Arrow functions are set up (``mapInArrow``): that warning is about pyspark's pandas conversions,
    which topkeval does not use (it exchanges Arrow batches), so it is silenced here, for topkeval's
    own Spark calls only (the user's ``createDataFrame`` still warns as pyspark decides).
    """
    from ..progress import step

    try:
        with warnings.catch_warnings(), step("Spark job"):
            warnings.filterwarnings("ignore", message="PySpark does not yet fully support pandas",
                                    category=FutureWarning, module=r"pyspark(\.|$)")
            return job()
    except Exception as exc:  # py4j / PythonException wrappers: find our error in the text
        raise _unwrap(exc) from None


def _unwrap(exc: Exception) -> Exception:
    from .. import errors

    text = str(exc)
    for line in reversed(text.splitlines()):
        line = line.strip()
        if line.startswith("topkeval.errors."):
            name, _, message = line[len("topkeval.errors."):].partition(": ")
            cls = getattr(errors, name, None)
            if isinstance(cls, type) and issubclass(cls, TopkevalError):
                return cls(message)
    if "No module named 'topkeval'" in text:
        return errors.TopkevalError(
            "topkeval is not installed in the Python of the Spark executors: install it there "
            "(pip install its checkout or wheel on every node, or ship an environment with spark.archives), or point "
            "PYSPARK_PYTHON at a Python that has it")
    return exc


def _evaluate_table(table, *, plan, query, relevance, scores, item, depth, ascending, judged, model, missing_queries,
                    judged_only, all_runs):
    """The engine's batches of one partition (every row of its queries), their ``(log, R)`` pairs,
    and the partition's counts; None when it holds nothing to evaluate."""
    import pyarrow.compute as pc

    if _ROW in table.column_names:
        table = table.sort_by(_ROW)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", TopkevalWarning)  # decided on the whole, by the driver
        if judged:
            from .local import run_batches

            is_run = pc.equal(table.column(_KIND), "run")
            run, qrels = table.filter(is_run), table.filter(pc.invert(is_run))
            # either side may be empty here: judged queries that no run retrieved still count (and
            # score 0 with missing_queries="zero"), as do a run's queries without judgments
            return run_batches(run, qrels, plan, query=query, relevance=relevance, scores=scores, item=item,
                               model=model, missing_queries=missing_queries, depth=depth, judged_only=judged_only,
                               threads=1, ascending=ascending, warn=False, all_runs=all_runs, backend=CPU)
        from ..inputs import read_columns
        from ..inputs.grouped import build_log

        cols = read_columns(table, [query, relevance, *scores] + ([item] if item else []),
                            id_columns=[query] + ([item] if item else []))
        log = build_log(cols[query], cols[relevance], {s: cols[s] for s in scores}, cols[item] if item else None,
                        names=dict(query=query, relevance=relevance, item=item or "item"), ascending=ascending,
                        borrowed=False)  # the partition's rows: ours, never the caller's
        batch, logs = engine.evaluate_grouped(log, plan, backend=CPU, depth=depth, threads=1)
        sizes = np.diff(log.offsets)
        return [batch], logs, {"min_size": int(sizes.min()), "max_size": int(sizes.max())}


def _table(batches):
    """A partition's rows as one Arrow table; None when it has none (an empty partition sends no batch)."""
    import pyarrow as pa

    batches = [b for b in batches if b.num_rows]
    return pa.Table.from_batches(batches) if batches else None


def _partition(batches, *, fields, arrow_schema, **options):
    """Evaluate one partition with the engine; yield a row per (model, query) and one of counts."""
    import pyarrow as pa

    ensure(options.pop("defined"))
    table = _table(batches)
    found = _evaluate_table(table, **options) if table is not None else None
    if found is None:
        return
    batches_out, _, extra = found
    plan, query, judged = options["plan"], options["query"], options["judged"]
    query_type = arrow_schema.field(query).type
    for batch in batches_out:
        for mv in batch.models:
            columns = {_KIND: pa.array(["query"] * len(mv.queries)), "model": pa.array([mv.model] * len(mv.queries)),
                       query: _ids(mv.queries, query_type)}
            for name, f in zip(plan.names, fields):
                v = mv.values[name]
                columns[f] = pa.array(v, pa.float64(), mask=np.isnan(v))  # undefined: null (Spark's avg skips it)
            columns[_COUNTS] = pa.nulls(len(mv.queries), pa.string())
            yield pa.RecordBatch.from_pydict(columns, schema=arrow_schema)
    models = [mv for b in batches_out for mv in b.models]
    counts = {"models": [mv.model for mv in models],
              "sums": {mv.model: mv.reduce().sums for mv in models},
              "evaluated": {mv.model: mv.evaluated for mv in models},
              "ties": {mv.model: mv.ties for mv in models},
              "rows": {mv.model: mv.rows for mv in models},
              **extra}
    if not judged:  # with judgments apart, the counts of the judged queries are in extra already
        counts.update(queries=sum(b.queries for b in batches_out),
                      skipped_empty=sum(b.skipped_empty for b in batches_out),
                      relevant=sum(b.relevant for b in batches_out))
    yield _counts_batch(arrow_schema, counts)


def _plain(value):
    """A query id as JSON can carry it (numpy scalars unwrapped)."""
    return value.item() if hasattr(value, "item") else value


def _diff_partition(batches, *, evaluate, baseline, model, metric, arrow_schema):
    """The relevant items each query's top k gained and lost from ``baseline`` to ``model``."""
    import pyarrow as pa

    options = {k: v for k, v in evaluate.keywords.items() if k not in ("fields", "arrow_schema", "defined")}
    ensure(evaluate.keywords["defined"])
    table = _table(batches)
    found = _evaluate_table(table, **options) if table is not None else None
    changed = items_changed(lambda: found[1], options["plan"].conv, baseline, model, metric) if found else None
    if not changed:
        return
    gained, lost = changed
    queries = list(dict.fromkeys([*gained, *lost]))
    yield pa.RecordBatch.from_pydict({
        "q": [json.dumps(_plain(q)) for q in queries],
        "gained": [json.dumps([_plain(i) for i in gained.get(q, [])]) for q in queries],
        "lost": [json.dumps([_plain(i) for i in lost.get(q, [])]) for q in queries]}, schema=arrow_schema)


def _ids(values: np.ndarray, arrow_type):
    import pyarrow as pa

    if pa.types.is_string(arrow_type) or pa.types.is_large_string(arrow_type):
        return pa.array([str(v) for v in values], arrow_type)
    return pa.array(values, arrow_type)


def _counts_batch(schema, counts: dict):
    import pyarrow as pa

    columns = {f.name: pa.nulls(1, f.type) for f in schema}
    columns[_KIND] = pa.array(["counts"])
    columns[_COUNTS] = pa.array([json.dumps(counts, default=int)])
    return pa.RecordBatch.from_pydict(columns, schema=schema)


def _info(counts: list[dict], models: list[str], plan: engine.Plan, judged: bool) -> dict:
    """What the counts of every partition add to the results builder's (judged queries, partitions);
    the warnings decided on the whole."""

    def total(key):
        return {m: sum(c.get(key, {}).get(m, 0) for c in counts) for m in models}

    info: dict = {"spark": {"partitions": len(counts)}}
    queries = sum(c.get("queries", 0) for c in counts)
    if judged:
        info["judged_queries"] = queries
        info["run_queries_without_judgments"] = total("run_queries_without_judgments")
        info["missing_from_run"] = total("missing_from_run")
        if sum(c.get("shared_queries", 0) for c in counts) == 0:
            raise DataError("The judgments and the run share no query: check the query columns (text '1' and the "
                            "number 1 match; '007' and 7 do not).")
        if sum(c.get("judged_hits", 0) for c in counts) == 0:
            warn("No retrieved item has a judgment: check that the item ids of the run and of the "
                          "judgments are written the same way.")
    else:
        sizes = [(c["min_size"], c["max_size"]) for c in counts if "min_size" in c]
        if sizes:
            engine.warn_if_truncated(plan, queries, min(s[0] for s in sizes), max(s[1] for s in sizes))
    engine.warn_if_nothing_relevant(plan.conv, sum(c.get("relevant", 0) for c in counts))
    return info


class SparkRows:
    """What an evaluation on Spark keeps on the cluster: the per-query values (a lazy Spark
    DataFrame: ``Results.per_query``), collected on demand (``Results.to_pandas``, compare,
    summary_ci, diff; refused beyond :data:`MAX_COLLECT` rows), and the partitioned rows, which one
    more Spark job reads again for the items :meth:`~topkeval.Results.diff` lists."""

    def __init__(self, per_query, parts, evaluate, query_name: str, models: list[str], total: int):
        self.lazy_per_query = per_query
        self._parts, self._evaluate = parts, evaluate
        self._query_name, self._models, self._total = query_name, models, total

    def collect(self) -> pd.DataFrame:
        """The per-query values collected to the driver, model by model, each model's queries in order."""
        if self._total > MAX_COLLECT:
            raise DataError(f"The per-query values have {self._total:,} rows, more than topkeval collects to the "
                            f"driver ({MAX_COLLECT:,}): compare, summary_ci and diff need them all. Filter the queries "
                            "or the models first, or raise topkeval.backends.spark.MAX_COLLECT if the driver has the "
                            "memory.")
        sdf = self.lazy_per_query
        frame = _run(lambda: sdf.toArrow().to_pandas())
        frame["model"] = pd.Categorical(frame["model"], categories=self._models)
        frame = frame.sort_values(["model", self._query_name], kind="stable").reset_index(drop=True)
        frame["model"] = frame["model"].astype(object)
        return frame

    def items_changed(self, evaluation, baseline: str, model: str, metric: Metric):
        """Per query, the relevant items that entered and left ``model``'s top k against
        ``baseline``'s (one Spark job over the partitioned rows); None without item ids."""
        if self._evaluate.keywords["item"] is None:
            return None
        from pyspark.sql.types import StringType, StructField, StructType

        schema = StructType([StructField("q", StringType()), StructField("gained", StringType()),
                             StructField("lost", StringType())])
        job = partial(_diff_partition, evaluate=self._evaluate, baseline=baseline, model=model,
                      metric=metric, arrow_schema=_arrow_schema(schema))
        parts = self._parts
        found = _run(lambda: parts.mapInArrow(job, schema).collect())
        key = {json.dumps(_plain(q)): q for q in evaluation.per_query[self._query_name]}
        gained = {key[r["q"]]: json.loads(r["gained"]) for r in found if r["q"] in key}
        lost = {key[r["q"]]: json.loads(r["lost"]) for r in found if r["q"] in key}
        return gained, lost


def query_attributes(df, query: str, by: list[str], weight: str | None):
    """The segment columns and the weight of each query of a Spark DataFrame, collected (one row per
    query): refused when one varies within a query, as on a local table."""
    from pyspark.sql import functions as F

    from ..errors import DataError
    from ..inputs.segments import attributes_by_code

    names = list(by) + ([weight] if weight else [])
    missing = [c for c in names if c not in df.columns]
    if missing:
        from ..errors import ColumnError, did_you_mean

        raise ColumnError(f"Column {missing[0]!r} ({'weight' if missing[0] == weight else 'by'}=) not found in the "
                          f"Spark DataFrame.{did_you_mean(missing[0], df.columns)} Available: "
                          f"{', '.join(map(repr, df.columns))}.")
    aggs = []
    for i, c in enumerate(names):
        aggs += [F.countDistinct(F.col(c)).alias(f"d{i}"), F.max(F.col(c).isNull().cast("int")).alias(f"n{i}"),
                 F.first(F.col(c), ignorenulls=True).alias(f"v{i}")]
    rows = _run(lambda: df.groupBy(query).agg(*aggs).collect())
    for i, c in enumerate(names):
        varies = [r for r in rows if r[f"d{i}"] > 1]
        if varies:
            role = "weight" if c == weight else "segment"
            raise DataError(f"The {role} column {c!r} must be the same on every row of a query, but query "
                            f"{varies[0][query]!r} has more than one value ({len(varies):,} queries do).")
    labels = np.array([r[query] for r in rows], dtype=object)
    columns = {}
    for i, c in enumerate(names):
        values = [r[f"v{i}"] if not r[f"n{i}"] else None for r in rows]
        columns[c] = np.array([np.nan if v is None else v for v in values], dtype=np.float64) if c == weight \
            else pd.array(values, dtype=object)
    return attributes_by_code(np.arange(len(rows)), labels, columns, list(by), weight, query)


#: The Spark backend as the dispatcher sees it (registered in :mod:`topkeval.backends`).
PLUGIN = BackendPlugin(
    "spark", "a Spark DataFrame", is_spark, frozenset({"rows", "judgments", "segments"}),
    hints={"streaming": "a Spark DataFrame is evaluated partition by partition already: drop chunk_rows",
           "stacked": "a stacked Spark table with a relevance column is not supported: evaluate each model's rows, "
                      "or pass qrels= (judgments apart)",
           "clicks": "a click log is read as one table in memory: read it into a table first (toPandas(), or "
                     "write it to parquet)",
           "matrices": "evaluate_matrix takes numpy or torch matrices",
           "lists": "it reads each model's top k again, row by row: read the rows into a table in memory "
                    "(toPandas()) and evaluate it with item='<column>'"},
    evaluate=evaluate_request)
