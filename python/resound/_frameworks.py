"""Imports a learning framework on first use, with a clear error if it is missing.

resound never depends on TensorFlow, PyTorch or JAX: each adapter in
``resound.datasets`` calls one of these when it is used, not when it is
imported.
"""

from __future__ import annotations

import importlib
from types import ModuleType

__all__ = ["import_jax", "import_tensorflow", "import_torch"]


def _import(module: str, package: str, used_by: str) -> ModuleType:
    try:
        return importlib.import_module(module)
    except ImportError as error:
        raise ImportError(
            f"{used_by} needs {module}, which is not installed: pip install {package}"
        ) from error


def import_tensorflow(used_by: str = "resound's TensorFlow datasets") -> ModuleType:
    """``tensorflow``, or ImportError saying ``pip install tensorflow``."""
    return _import("tensorflow", "tensorflow", used_by)


def import_torch(used_by: str = "resound.datasets.torch") -> ModuleType:
    """``torch``, or ImportError saying ``pip install torch``."""
    return _import("torch", "torch", used_by)


def import_jax(used_by: str = "resound.datasets.jax") -> ModuleType:
    """``jax``, or ImportError saying ``pip install jax``."""
    return _import("jax", "jax", used_by)
