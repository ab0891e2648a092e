"""Reverb's API beyond the writers: errors for unknown tables, TableInfo's
options messages, and the names of Reverb's ``pybind`` module; each against
both transports where a server is involved."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import resound
from resound import errors, rate_limiters, selectors

# --- unknown tables


def _queue_table() -> resound.Table:
    return resound.Table.queue("known", max_size=10)


def _unknown_table_calls(client: resound.Client) -> dict[str, Callable[[], Any]]:
    """Each client call that names a table, on a table the server lacks."""
    return {
        "insert": lambda: client.insert(np.ones(2), priorities={"missing": 1.0}),
        "sample": lambda: next(client.sample("missing", 1)),
        "sample_batch": lambda: client.sample_batch("missing", 2),
        "mutate_priorities": lambda: client.mutate_priorities("missing", updates={1: 1.0}),
        "update_priorities": lambda: client.update_priorities("missing", {1: 1.0}),
        "reset": lambda: client.reset("missing"),
    }


@pytest.mark.parametrize("caught", [ValueError, RuntimeError, KeyError])
@pytest.mark.parametrize(
    "call",
    ["insert", "sample", "sample_batch", "mutate_priorities", "update_priorities", "reset"],
)
def test_an_unknown_table_is_caught_by_each_of_reverbs_except_clauses(
    serve: Any, call: str, caught: type[Exception]
) -> None:
    _, client = serve(_queue_table())
    with pytest.raises(caught) as raised:
        _unknown_table_calls(client)[call]()
    assert isinstance(raised.value, errors.NotFoundError)
    assert "missing" in str(raised.value) and "known" in str(raised.value)


def test_not_found_error_is_a_value_runtime_and_key_error() -> None:
    assert issubclass(errors.NotFoundError, ValueError)
    assert issubclass(errors.NotFoundError, RuntimeError)
    assert issubclass(errors.NotFoundError, KeyError)
    assert issubclass(errors.NotFoundError, errors.ReverbError)
    # KeyError quotes its message; this error does not.
    assert str(errors.NotFoundError("Priority table t was not found.")) == (
        "Priority table t was not found."
    )


def test_create_item_for_an_unknown_table_raises_value_error(serve: Any) -> None:
    _, client = serve(_queue_table())
    with client.trajectory_writer(1) as writer:
        writer.append({"x": np.ones(2)})
        with pytest.raises(ValueError, match="missing"):
            writer.create_item("missing", 1.0, {"x": writer.history["x"][-1:]})
        # The writer is still usable for a table that exists.
        writer.create_item("known", 1.0, {"x": writer.history["x"][-1:]})
    assert client.server_info()["known"].current_size == 1


def test_unknown_tables_across_several_servers() -> None:
    servers = [resound.Server([_queue_table()]) for _ in range(2)]
    try:
        client = resound.Client([f"127.0.0.1:{server.port}" for server in servers])
        for call in _unknown_table_calls(client).values():
            with pytest.raises(errors.NotFoundError, match="missing"):
                call()
    finally:
        for server in servers:
            server.stop()
