"""Tables check every insert against their signature in the core, so a
writer that skips client-side validation still cannot store mismatched data."""

from __future__ import annotations

import re

import numpy as np
import pytest

import resound


def _server(signature: object) -> resound.Server:
    table = resound.Table(
        "t",
        resound.selectors.Fifo(),
        resound.selectors.Fifo(),
        100,
        resound.rate_limiters.MinSize(1),
        signature=signature,
    )
    return resound.Server([table], listen=False)


SIGNATURE = {
    "obs": resound.TensorSpec([None, 3], np.float32),
    "id": resound.TensorSpec([], np.int64),
}


def test_core_table_holds_the_flattened_signature() -> None:
    server = _server(SIGNATURE)
    assert server.table("t")._core.column_specs == [("<i8", ()), ("<f4", (None, 3))]


def test_unvalidated_writer_items_that_match_are_stored() -> None:
    server = _server(SIGNATURE)
    client = server.in_process_client()
    writer = client.trajectory_writer(2, validate_items=False)
    for step in range(2):
        writer.append({"obs": np.full(3, step, np.float32), "id": np.int64(step)})
    writer.create_item(
        "t", 1.0, {"obs": writer.history["obs"][-2:], "id": writer.history["id"][-1]}
    )
    writer.flush()
    sample = next(client.sample("t", emit_timesteps=False, unpack_as_table_signature=True))
    np.testing.assert_array_equal(sample.data["obs"], [[0, 0, 0], [1, 1, 1]])
    assert sample.data["id"] == 1


OBS = "table 't': field ('obs',) is "


@pytest.mark.parametrize(
    ("obs", "message"),
    [
        # The core's own check (the writer's is off): table, field, numpy names.
        (np.zeros(3, np.float64), re.escape(OBS + "float64 [2, 3] but the signature expects")),
        (np.zeros(4, np.float32), re.escape(OBS + "float32 [2, 4]")),  # wrong shape
    ],
)
def test_unvalidated_writer_items_that_do_not_match_are_refused(
    obs: np.ndarray, message: str
) -> None:
    server = _server(SIGNATURE)
    client = server.in_process_client()
    writer = client.trajectory_writer(2, validate_items=False)
    for step in range(2):
        writer.append({"obs": obs, "id": np.int64(step)})
    # The core refuses the item when it is inserted: at create_item (items
    # over complete chunks go in at once) or at the latest at flush.
    with pytest.raises(ValueError, match=message):
        writer.create_item(
            "t", 1.0, {"obs": writer.history["obs"][-2:], "id": writer.history["id"][-1]}
        )
        writer.flush()
    assert server.table("t").info.current_size == 0
    # The writer reports the same error from then on, like Reverb's.
    with pytest.raises(ValueError, match=message):
        writer.flush()
    # The table keeps serving good data.
    client.insert({"obs": np.zeros((2, 3), np.float32), "id": np.int64(7)}, priorities={"t": 1.0})
    assert server.table("t").info.current_size == 1


def test_column_count_must_match() -> None:
    server = _server(SIGNATURE)
    writer = server.in_process_client().trajectory_writer(1, validate_items=False)
    writer.append({"obs": np.zeros(3, np.float32)})
    with pytest.raises(ValueError, match="table 't': the item has 1 fields but the signature has"):
        writer.create_item("t", 1.0, {"obs": writer.history["obs"][-1:]})
        writer.flush()


def test_single_step_inserts_may_match_the_step_shape() -> None:
    # As Reverb's Client.insert: a one-row column matches either [1, *shape]
    # or the step's own shape.
    server = _server({"x": resound.TensorSpec([3], np.int32)})
    client = server.in_process_client()
    client.insert({"x": np.arange(3, dtype=np.int32)}, priorities={"t": 1.0})
    assert server.table("t").info.current_size == 1


def test_string_columns_match_by_kind_across_chunk_widths() -> None:
    server = _server({"s": resound.TensorSpec([2], str)})
    client = server.in_process_client()
    writer = client.trajectory_writer(2, max_chunk_length=1, validate_items=False)
    writer.append({"s": "a"})
    writer.append({"s": "longer"})  # a wider chunk than the first
    writer.create_item("t", 1.0, {"s": writer.history["s"][-2:]})
    writer.flush()
    sample = next(client.sample("t", emit_timesteps=False))
    assert sample.data[0].tolist() == [b"a", b"longer"]


def test_malformed_column_specs_are_rejected_by_the_core() -> None:
    core = resound._core
    args = (
        "t",
        core.make_selector("fifo"),
        core.make_selector("fifo"),
        10,
        core.RateLimiter.min_size(1),
        0,
        b"",
        None,
    )
    with pytest.raises(ValueError, match="dtype must be a numpy type string"):
        core.Table(*args, [("float", (3,))])
    with pytest.raises(ValueError, match="must be a pair"):
        core.Table(*args, ["<f4"])
    with pytest.raises(ValueError, match="dimensions must be >= 0 or -1"):
        core.Table(*args, [("<f4", (-2,))])
