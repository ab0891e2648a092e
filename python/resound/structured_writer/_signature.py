"""Table signatures of the items configs insert (``infer_signature``)."""

from __future__ import annotations

import importlib
from collections.abc import Sequence
from typing import Any

from resound import nest
from resound.specs import TensorSpec
from resound.structured_writer._config import NO_STRUCTURE, Config, PatternNode
from resound.structured_writer._patterns import unpack_pattern
from resound.structured_writer._validation import _validate_node


def _same_structure(a: Any, b: Any) -> bool:
    if a is NO_STRUCTURE or b is NO_STRUCTURE:
        return a is b
    try:
        nest.assert_same_structure(a, b)
    except (ValueError, TypeError):
        return False
    return len(nest.flatten(a)) == len(nest.flatten(b))


def _node_length(node: PatternNode) -> int:
    """Rows a node with ``start`` set reads."""
    assert node.start is not None
    stop = node.stop if node.stop is not None else 0
    step = node.step if node.step is not None else 1
    return -(-(stop - node.start) // step)  # ceil


def _leaf_spec(leaf: Any, index: int, path: Any) -> TensorSpec:
    if hasattr(leaf, "shape") and hasattr(leaf, "dtype"):
        return TensorSpec(leaf.shape, leaf.dtype)
    if leaf is None:
        raise ValueError(
            f"step_spec has no shape and dtype for field {index} (path {path!r}) but a config "
            "reads it."
        )
    return TensorSpec.from_value(leaf)


def _is_tensorflow(leaf: Any) -> bool:
    """True for TensorFlow objects (tf.TensorSpec, tf.Tensor), found without
    importing TensorFlow."""
    return type(leaf).__module__.partition(".")[0] == "tensorflow"


def _tensorflow_spec(spec: TensorSpec, source: Any) -> Any:
    """``spec`` as a tf.TensorSpec, with the dtype of ``source`` (the step
    field it reads) when that is a TensorFlow object."""
    tf = importlib.import_module("tensorflow")  # already imported: a leaf is TF's
    if _is_tensorflow(source):
        dtype = tf.as_dtype(source.dtype)
    elif spec.dtype.kind in "SUO":
        dtype = tf.string
    else:
        dtype = tf.as_dtype(spec.dtype)
    return tf.TensorSpec(shape=spec.shape, dtype=dtype, name=spec.name)


def infer_signature(configs: Sequence[Config], step_spec: Any) -> Any:
    """The table signature (a nest of TensorSpec) of the items ``configs`` insert.

    ``step_spec`` is a step-shaped nest whose leaves have ``.shape`` and
    ``.dtype`` (resound or TF TensorSpecs, numpy arrays). All configs must
    share ``pattern_structure`` and ``table``; per leaf they must agree on the
    dtype and on the shape apart from the leading dimension, which becomes
    ``None`` where they differ. Spec names are the leaf paths joined by ``/``.

    The specs are ``tf.TensorSpec`` if any leaf of ``step_spec`` is a
    TensorFlow object (as Reverb's are), and ``resound.TensorSpec``
    otherwise; TensorFlow is never imported for other specs.

    Example:
        >>> import numpy as np
        >>> from resound.structured_writer import create_config, create_reference_step
        >>> ref = create_reference_step({'x': None})
        >>> config = create_config({'last4': ref['x'][-4:], 'odd': ref['x'][-5::2]}, 't')
        >>> infer_signature([config], {'x': np.zeros([3], np.float32)})
        {'last4': TensorSpec(shape=(4, 3), dtype=float32, name='last4'), \
'odd': TensorSpec(shape=(3, 3), dtype=float32, name='odd')}
    """
    configs = list(configs)
    if not configs:
        raise ValueError("At least one config must be provided.")
    first = configs[0]
    if any(
        not _same_structure(c.pattern_structure, first.pattern_structure)
        or len(c.flat) != len(first.flat)
        for c in configs[1:]
    ):
        raise ValueError("All configs must have exactly the same pattern_structure.")
    tables = sorted({c.table for c in configs})
    if len(tables) > 1:
        raise ValueError(
            f"All configs must target the same table but provided configs included "
            f"{', '.join(tables)}."
        )
    for config in configs:
        for node in config.flat:
            _validate_node(node)

    flat_step = nest.flatten_with_path(step_spec)
    leaf_specs: dict[int, TensorSpec] = {}

    def source_spec(index: int) -> TensorSpec:
        if index not in leaf_specs:
            if index >= len(flat_step):
                raise ValueError(
                    f"A config reads field {index} of the step but step_spec has only "
                    f"{len(flat_step)} leaves."
                )
            path, leaf = flat_step[index]
            leaf_specs[index] = _leaf_spec(leaf, index, path)
        return leaf_specs[index]

    paths = [path for path, _ in nest.flatten_with_path(unpack_pattern(first))]
    specs = []
    for position, path in enumerate(paths):
        nodes = [c.flat[position] for c in configs]
        sources = [source_spec(node.flat_source_index) for node in nodes]
        dtypes = [s.dtype for s in sources]
        if any(d != dtypes[0] for d in dtypes):
            raise ValueError(
                f"Configs produce trajectories with multiple dtypes at {path!r}. "
                f"Got {[d.name for d in dtypes]}."
            )
        shapes: list[tuple[int | None, ...] | None] = []
        for node, source in zip(nodes, sources, strict=True):
            if source.shape is None:
                shapes.append(None)
            elif node.start is not None:
                shapes.append((_node_length(node), *source.shape))
            else:
                shapes.append(source.shape)
        known = [s for s in shapes if s is not None]
        if len(known) < len(shapes):
            merged = None  # an unknown rank stays unknown
        else:
            rank = len(known[0])
            if any(len(s) != rank for s in known) or (
                rank > 1 and any(s[1:] != known[0][1:] for s in known)
            ):
                raise ValueError(
                    f"Configs produce trajectories with incompatible shapes at {path!r}. "
                    f"Got {[list(s) for s in known]}."
                )
            same = all(s == known[0] for s in known)
            merged = known[0] if same else (None, *known[0][1:])
        specs.append(TensorSpec(merged, dtypes[0], "/".join(str(p) for p in path)))
    if any(_is_tensorflow(leaf) for _, leaf in flat_step):
        specs = [
            _tensorflow_spec(spec, flat_step[first.flat[position].flat_source_index][1])
            for position, spec in enumerate(specs)
        ]
    return nest.unflatten_as(unpack_pattern(first), specs)
