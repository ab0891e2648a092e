"""Replay service requests built field by field, for tests that speak the
gRPC service directly (tests/service/test_grpc_service.py)."""

from __future__ import annotations

import numpy as np

from resound import _proto

P = _proto

_random = np.random.default_rng()


def fresh_key() -> int:
    """A chunk key no other test uses: the chunk store is process-wide."""
    return int(_random.integers(1, 2**63))


def chunks(key: int, values: list[float], **overrides) -> dict:
    """The InsertRequest fields (chunks, chunk_data) of one float32 chunk
    holding ``values``; ``overrides`` replace fields (layout fields and
    ``data``, the payload, included)."""
    data = np.asarray(values, np.float32)
    layout = dict(dtype="<f4", shape=[], compression="none")
    fields = dict(
        keys=[key], layout_indices=[0], num_steps=[len(values)], episode_ids=[1],
        start_steps=[0], end_steps=[len(values) - 1], data_sizes=[data.nbytes],
        data=data.tobytes(),
    )  # fmt: skip
    for name in list(overrides):
        if name in layout:
            layout[name] = overrides.pop(name)
    fields.update(overrides)
    data = fields.pop("data")
    return dict(chunks=P.ChunkBatch(layouts=[P.ChunkLayout(**layout)], **fields), chunk_data=data)


def items(*specs: dict) -> object:
    """An ItemBatch of items given as dicts (key, chunk_key, and optionally
    offset, length, table, priority, columns: False for none)."""
    tables: list[str] = []
    batch = P.ItemBatch()
    for spec in specs:
        table = spec.get("table", "t")
        if table not in tables:
            tables.append(table)
        batch.table_indices.append(tables.index(table))
        batch.keys.append(spec["key"])
        batch.priorities.append(spec.get("priority", 1.0))
        trajectories = batch.trajectories
        if spec.get("columns", True):
            trajectories.num_columns.append(1)
            trajectories.num_slices.append(1)
            trajectories.squeeze.append(False)
            trajectories.chunk_keys.append(spec["chunk_key"])
            trajectories.offsets.append(spec.get("offset", 0))
            trajectories.lengths.append(spec.get("length", 1))
        else:
            trajectories.num_columns.append(0)
    batch.tables.extend(tables)
    return batch


def item(key: int, chunk_key: int, offset: int = 0, length: int = 1, **overrides) -> dict:
    return dict(key=key, chunk_key=chunk_key, offset=offset, length=length, **overrides)
