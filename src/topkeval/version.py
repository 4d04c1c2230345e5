"""The installed version of topkeval (``topkeval.__version__``), for what prints or writes it."""

import importlib.metadata as _metadata

try:
    __version__ = _metadata.version("topkeval")
except _metadata.PackageNotFoundError:  # pragma: no cover - a source tree that was never installed
    __version__ = "0+unknown"
