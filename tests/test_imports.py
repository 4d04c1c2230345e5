"""`import topkeval` stays light: no polars, mlflow, torch, torchmetrics, lightning, pyspark, matplotlib, nor the compiler."""

import subprocess
import sys


def test_import_is_light():
    code = ("import sys, topkeval; print(','.join(m for m in ('polars', 'mlflow', 'torch', 'torchmetrics', "
            "'lightning', 'pyspark', 'grpc', 'matplotlib', 'numba', 'scipy', 'rich', 'topkeval.integrations') "
            "if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert out == "", f"import topkeval imported {out}"


def test_evaluate_pandas_does_not_import_polars_or_torch():
    code = ("import sys, topkeval as tk; tk.evaluate({'query': [1, 1], 'relevance': [1, 0], 'score': [0.1, 0.2]}, "
            "metrics=['recall@1']); print(','.join(m for m in ('polars', 'torch', 'pyspark', 'matplotlib') "
            "if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert out == ""


def test_rich_is_imported_by_the_command_line_only():
    """rich draws the CLI's tables; the library never imports it."""
    code = ("import sys, topkeval as tk; res = tk.evaluate({'query': [1, 1], 'relevance': [1, 0], 'score': [0.1, 0.2]}, "
            "metrics=['recall@1']); res.to_dict(per_query=True); print('rich' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert out == "False"


def test_the_optional_extras_are_imported_only_by_what_needs_them():
    """polars by to_polars, mlflow by log_mlflow: never by import topkeval, evaluate, the other tables out,
    nor by the integrations package itself (each bridge imports its tool when called)."""
    code = ("import sys, topkeval as tk, topkeval.integrations, topkeval.integrations.mlflow\n"
            "print(','.join(m for m in ('polars', 'mlflow') if m in sys.modules))\n"
            "res = tk.evaluate({'query': [1, 1], 'relevance': [1, 0], 'score': [0.1, 0.2]}, metrics=['recall@1'])\n"
            "res.to_arrow(); res.to_pandas('summary')\n"
            "print(','.join(m for m in ('polars', 'mlflow') if m in sys.modules))\n"
            "res.to_polars()\n"
            "print(','.join(m for m in ('polars', 'mlflow') if m in sys.modules))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.splitlines() == ["", "", "polars"]


def test_the_integrations_package_imports_nothing_heavy():
    """``topkeval.integrations`` (the bridges to torchmetrics, Lightning, ...) is imported on demand;
    the package itself loads no extra."""
    code = ("import sys, topkeval.integrations; print(','.join(m for m in ('torch', 'torchmetrics', 'lightning', "
            "'pyspark') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert out == ""
