"""topkeval: exact top-k evaluation of rankings, under explicit conventions.

>>> import topkeval as tk
>>> tk.recall_at_k([1, 1, 0, 0, 1], [0.4, 0.1, 0.2, 0.5, 0.3], k=3)
0.6666666666666666
"""

from types import MappingProxyType as _ReadOnly

from .analysis.bias import ItemPropensity, PositionBias, estimate_position_bias, popularity_propensity
from .analysis.offpolicy import PlackettLuce
from .api import (
    evaluate,
    evaluate_matrix,
    evaluate_sampled,
    f1_at_k,
    fbeta_at_k,
    off_policy,
    precision_at_k,
    r_precision,
    recall_at_k,
    specificity_at_k,
)
from .conventions import PRESETS as _PRESETS
from .conventions import Conventions
from .errors import (
    ColumnError,
    DataError,
    EmptyQueryError,
    InputFileError,
    OutputFileError,
    ParameterError,
    ShortListError,
    TopkevalError,
    TopkevalWarning,
    UnknownMetricError,
)
from .evaluator import MatrixEvaluator
from .inputs import read_qrels, read_run, read_runs, write_run
from .metrics.define import define_metric
from .metrics.names import FAMILIES as _FAMILIES
from .metrics.names import Metric, explain_metric, parse_metric
from .results import Results
from .version import __version__ as __version__

#: every metric family by name, read-only (define_metric adds one; topkeval.metrics.registry holds them)
FAMILIES = _ReadOnly(_FAMILIES)
#: the presets of conventions by name, read-only (each reproduces a peer: docs/conventions.md)
PRESETS = _ReadOnly(_PRESETS)

__all__ = [
    "FAMILIES", "PRESETS", "ColumnError", "Conventions", "DataError", "EmptyQueryError", "InputFileError", "ItemPropensity",
    "MatrixEvaluator", "PositionBias",
    "Metric", "OutputFileError", "ParameterError", "PlackettLuce", "Results", "ShortListError", "TopkevalError", "TopkevalWarning", "UnknownMetricError",
    "define_metric", "estimate_position_bias", "evaluate", "evaluate_matrix", "evaluate_sampled", "explain_metric", "f1_at_k", "fbeta_at_k", "off_policy", "parse_metric", "popularity_propensity", "precision_at_k", "r_precision",
    "read_qrels", "read_run", "read_runs", "recall_at_k", "specificity_at_k", "write_run",
]
