"""Fuzzing every decoder of untrusted input with hypothesis: chunk metadata
into the core, the unary gRPC requests into the servicer (the insert stream
has its own fuzz test in tests/service/test_grpc_service.py), checkpoint record payloads
behind valid checksums, and server config files. Each must either accept
the input or refuse it with its documented error, leave what is stored
intact, and keep serving; never crash, hang or raise anything else.

The runs are bounded and repeatable (derandomized) in the suite. For a
longer, random search:

    RESOUND_FUZZ_EXAMPLES=20000 python3 -m pytest -q tests/system/test_fuzz.py

Any failure hypothesis finds is printed as the smallest failing input; add
it as a regression case below (``@example``).
"""

from __future__ import annotations

import contextlib
import math
import os
import struct
import sys
from pathlib import Path
from typing import Any

import grpc
import numpy as np
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

import resound
from resound import _core, _proto
from resound._wire.channel_options import CHANNEL_OPTIONS
from resound.errors import CheckpointError
from resound.server_command import ConfigError, tables_from_config

from helpers.checkpoint_files import file_of, records_of
from helpers.waiting import SAFETY

if sys.version_info >= (3, 11):
    import tomllib
else:  # a runtime dependency there (pyproject.toml)
    import tomli as tomllib

P = _proto
_EXAMPLES = int(os.environ.get("RESOUND_FUZZ_EXAMPLES", "0"))
FUZZ = settings(
    max_examples=_EXAMPLES or 300,
    deadline=None,
    derandomize=not _EXAMPLES,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
# (hypothesis' failure report imports libcst, which warns; see test_sum_tree.)
pytestmark = pytest.mark.filterwarnings(
    "ignore:mypy_extensions.TypedDict is deprecated:DeprecationWarning"
)


# --- chunk metadata, straight into the core

DTYPES = ["<f4", "<f8", "|u1", "<i8", "|b1", "<U3", "|S2", ">i4", "<c8", "|O", "<f2", "", "x"]
COMPRESSIONS = ["none", "lz4", "zstd", ""]
I64 = st.integers(-(2**63), 2**63 - 1)
SMALL = st.one_of(st.integers(-3, 40), I64)


@st.composite
def chunk_batches(draw: Any) -> tuple[Any, ...]:
    layouts = draw(
        st.lists(
            st.tuples(
                st.one_of(st.sampled_from(DTYPES), st.text(max_size=5)),
                st.lists(st.one_of(st.integers(-2, 6), I64), max_size=3),
                st.sampled_from(COMPRESSIONS),
                st.booleans(),
            ),
            max_size=3,
        )
    )
    count = draw(st.integers(0, 4))

    def column(elements: Any, dtype: Any) -> np.ndarray:
        length = draw(st.one_of(st.just(count), st.integers(0, 5)))
        return np.array(draw(st.lists(elements, min_size=length, max_size=length)), dtype)

    return (
        layouts,
        column(st.integers(0, 2**64 - 1), np.uint64),
        column(st.integers(0, 2**32 - 1), np.uint32),
        column(SMALL, np.int64),
        column(st.integers(0, 2**64 - 1), np.uint64),
        column(SMALL, np.int64),
        column(SMALL, np.int64),
        column(SMALL, np.int64),
        np.frombuffer(draw(st.binary(max_size=300)), np.uint8),
    )


@pytest.mark.slow
@FUZZ
@given(batch=chunk_batches())
def test_chunk_metadata_is_validated_by_the_core(batch: tuple[Any, ...]) -> None:
    store = _core.ChunkStore(1)
    holder = _core.ChunkHolder()
    layouts, *arrays, payloads = batch
    try:
        holder.add(store, layouts, *arrays, payloads)
    except ValueError:
        return  # refused, naming the bad chunk
    # Accepted: every chunk is complete and readable.
    for key in arrays[0].tolist():
        chunk = store.get(key)
        assert chunk is not None


# --- the unary requests into the servicer


@pytest.fixture(scope="module")
def fuzzed_server():
    """A server whose table 't' holds items, and a raw channel to it."""
    server = resound.Server(
        [
            resound.Table(
                "t",
                resound.selectors.Prioritized(1.0),
                resound.selectors.Fifo(),
                1000,
                resound.rate_limiters.MinSize(1),
            )
        ]
    )
    client = resound.Client(f"127.0.0.1:{server.port}", transport="grpc")
    channel = grpc.insecure_channel(f"127.0.0.1:{server.port}", options=CHANNEL_OPTIONS)
    yield server, client, channel
    channel.close()
    server.stop()


VALID_REQUESTS = {
    "Sample": P.SampleRequest(table="t", num_samples=3, timeout_seconds=1.0),
    "MutatePriorities": P.MutatePrioritiesRequest(
        table="t", update_keys=[1, 2], update_priorities=[0.5, 2.0], delete_keys=[3]
    ),
    "Reset": P.ResetRequest(table="nothing-here"),
    "ServerInfo": P.ServerInfoRequest(),
}
# What a bad request may get: the documented refusals (or a valid request's answer).
ALLOWED = {
    grpc.StatusCode.OK,
    grpc.StatusCode.INVALID_ARGUMENT,
    grpc.StatusCode.NOT_FOUND,
    grpc.StatusCode.DEADLINE_EXCEEDED,
}


@st.composite
def mutated(draw: Any, valid: bytes) -> bytes:
    """``valid`` with bytes changed, inserted, deleted or cut off."""
    data = bytearray(valid)
    for _ in range(draw(st.integers(1, 4))):
        position = draw(st.integers(0, max(0, len(data))))
        action = draw(st.sampled_from(["set", "insert", "delete", "cut"]))
        if action == "set" and data:
            data[position % len(data)] = draw(st.integers(0, 255))
        elif action == "insert":
            data[position:position] = draw(st.binary(min_size=1, max_size=12))
        elif action == "delete":
            del data[position : position + draw(st.integers(1, 8))]
        else:
            del data[position:]
    return bytes(data)


@st.composite
def unary_requests(draw: Any) -> tuple[str, bytes]:
    method = draw(st.sampled_from(sorted(VALID_REQUESTS)))
    valid = VALID_REQUESTS[method].SerializeToString()
    raw = draw(st.one_of(st.binary(max_size=120), mutated(valid)))
    return method, raw


@pytest.mark.slow
@FUZZ
@given(request=unary_requests())
# Found by this test: gRPC answered INTERNAL (and logged a traceback) for
# requests that do not parse; they now get INVALID_ARGUMENT.
@example(request=("MutatePriorities", b"\x00"))
def test_unary_requests_get_a_documented_answer_and_stored_items_stay(
    fuzzed_server, request: tuple[str, bytes]
) -> None:
    server, client, channel = fuzzed_server
    table = server.table("t")
    if table.info.current_size == 0:  # a fuzzed request may have been a valid reset
        client.insert([np.float32(1.0)], priorities={"t": 1.0})
    method, raw = request
    call = channel.unary_stream if method == "Sample" else channel.unary_unary
    try:
        result = call(f"/{P.SERVICE}/{method}")(raw, timeout=SAFETY)
        if method == "Sample":
            list(result)
        code = grpc.StatusCode.OK
    except grpc.RpcError as error:
        code = error.code()
        assert code in ALLOWED, (method, raw, code, error.details())
    # The server still serves the table, and its items are whole.
    batch = client.sample_batch("t", 2, timeout=SAFETY)
    assert len(batch.info.key) == 2
    assert all(math.isfinite(p) and p >= 0 for p in batch.info.priority.tolist())


# --- checkpoint records behind valid checksums


def checkpoint_tables() -> list[resound.Table]:
    return [
        resound.Table("p", resound.selectors.Prioritized(0.8), resound.selectors.Fifo(), 100,
                      resound.rate_limiters.MinSize(1)),
        resound.Table("h", resound.selectors.MinHeap(), resound.selectors.Lifo(), 100,
                      resound.rate_limiters.MinSize(1)),
    ]  # fmt: skip


@pytest.fixture(scope="module")
def checkpoint_bytes(tmp_path_factory: Any) -> bytes:
    tables = checkpoint_tables()
    server = resound.Server(tables, listen=False)
    client = server.in_process_client()
    with client.trajectory_writer(3, compression="lz4") as writer:
        for step in range(6):
            writer.append({"x": np.arange(3, dtype=np.float32) + step, "n": np.int64(step)})
            if step >= 2:
                trajectory = {"x": writer.history["x"][-3:], "n": writer.history["n"][-1]}
                writer.create_item("p", 1.0 + step, trajectory)
                writer.create_item("h", 2.0 - step, trajectory)
    path = tmp_path_factory.mktemp("checkpoint") / "good.rsnd"
    _core.save_checkpoint([t._core for t in tables], str(path))
    data = path.read_bytes()
    assert file_of(data[:16], records_of(data)) == data  # the re-checksummer is right
    return data


@st.composite
def record_mutations(draw: Any, data: bytes) -> list[tuple[int, bytes]]:
    records = records_of(data)
    for _ in range(draw(st.integers(1, 3))):
        action = draw(st.sampled_from(["payload", "payload", "payload", "drop", "repeat", "swap"]))
        index = draw(st.integers(0, len(records) - 1))
        kind, payload = records[index]
        if action == "payload":
            records[index] = (kind, draw(mutated(payload)))
        elif action == "drop" and len(records) > 1:
            del records[index]
        elif action == "repeat":
            records.insert(index, records[index])
        else:
            other = draw(st.integers(0, len(records) - 1))
            records[index], records[other] = records[other], records[index]
    return records


@pytest.mark.slow
@FUZZ
@given(data=st.data())
def test_checkpoint_records_are_validated_behind_valid_checksums(
    checkpoint_bytes: bytes, tmp_path_factory: Any, data: Any
) -> None:
    records = data.draw(record_mutations(checkpoint_bytes))
    path = tmp_path_factory.mktemp("fuzzed") / "fuzzed.rsnd"
    path.write_bytes(file_of(checkpoint_bytes[:16], records))
    with contextlib.suppress(CheckpointError):
        _core.inspect_checkpoint(str(path))
    tables = checkpoint_tables()
    try:
        _core.load_checkpoint(str(path), [t._core for t in tables])
    except ValueError:  # CheckpointError, or a table that does not match (named)
        assert all(t.info.current_size == 0 for t in tables)  # nothing half restored
        return
    # Loaded: every item can be sampled, with its data.
    for table in tables:
        size = table.info.current_size
        if size:
            table._core.sample(size, 0.0)


# Found by the test above (with RESOUND_FUZZ_EXAMPLES=3000), now refused:


def load_fresh(path: Path) -> list[resound.Table]:
    tables = checkpoint_tables()
    _core.load_checkpoint(str(path), [t._core for t in tables])
    return tables


def test_a_checkpoint_holding_a_table_twice_is_refused(checkpoint_bytes, tmp_path) -> None:
    # Before: the table was restored, then its second copy failed with a
    # RuntimeError (the restored one was reset again).
    records = records_of(checkpoint_bytes)
    path = tmp_path / "twice.rsnd"
    path.write_bytes(file_of(checkpoint_bytes[:16], [records[1], *records]))
    tables = checkpoint_tables()
    with pytest.raises(CheckpointError, match="holds table 'h' twice"):
        _core.load_checkpoint(str(path), [t._core for t in tables])
    assert all(t.info.current_size == 0 for t in tables)


def test_counters_that_contradict_the_items_are_refused(checkpoint_bytes, tmp_path) -> None:
    # Before: a delete count raised to the insert count loaded, and the
    # restored table (its limiter seeing size 0) could never sample.
    records = records_of(checkpoint_bytes)
    kind, payload = records[0]
    name_length = struct.unpack_from("<Q", payload)[0]
    # After the name and two 18-byte selectors: max_size, max_times_sampled,
    # samples_per_insert, min_size_to_sample, min_diff, max_diff, signature.
    offset = 8 + name_length + 2 * 18 + 8 + 4 + 8 + 8 + 8 + 8
    offset += 8 + struct.unpack_from("<Q", payload, offset)[0]  # the signature
    inserts, samples, deletes = struct.unpack_from("<qqq", payload, offset)
    assert inserts - deletes == 4  # the table holds 4 items
    changed = bytearray(payload)
    struct.pack_into("<q", changed, offset + 16, inserts)
    path = tmp_path / "counters.rsnd"
    path.write_bytes(file_of(checkpoint_bytes[:16], [(kind, bytes(changed)), *records[1:]]))
    with pytest.raises(CheckpointError, match="delete count .* != number of items 4"):
        load_fresh(path)
    assert all(t.info.current_size == 4 for t in load_fresh_good(checkpoint_bytes, tmp_path))


def load_fresh_good(data: bytes, directory: Path) -> list[resound.Table]:
    path = directory / "good.rsnd"
    path.write_bytes(data)
    return load_fresh(path)


# --- server config files


@FUZZ
@given(text=st.text(max_size=300))
def test_any_config_text_loads_or_is_refused_with_config_error(
    tmp_path_factory: Any, text: str
) -> None:
    path = Path(tmp_path_factory.mktemp("config")) / "server.toml"
    path.write_text(text)
    from resound.server_command import load_config

    with contextlib.suppress(ConfigError):
        tables_from_config(load_config(str(path)))


def toml_values(keys: list[str]) -> Any:
    scalars = st.one_of(
        st.integers(-(2**63), 2**63 - 1),
        st.floats(allow_nan=True),
        st.booleans(),
        st.text(max_size=8),
        st.sampled_from(
            ["uniform", "prioritized", "fifo", "lifo", "min_heap", "max_heap", "queue", "stack",
             "table", "min_size", "sample_to_insert_ratio", "float32", "int64", "uint8"]
        ),
    )  # fmt: skip
    return st.recursive(
        scalars,
        lambda inner: st.one_of(
            st.lists(inner, max_size=3),
            st.dictionaries(
                st.one_of(st.sampled_from(keys), st.text(max_size=4)), inner, max_size=4
            ),
        ),
        max_leaves=12,
    )


TABLE_KEYS = [
    "name", "kind", "sampler", "priority_exponent", "remover", "max_size", "max_times_sampled",
    "rate_limiter", "signature", "samples_per_insert", "min_size_to_sample", "error_buffer",
    "shape", "dtype",
]  # fmt: skip


@pytest.mark.slow
@FUZZ
@given(
    tables=st.lists(
        st.dictionaries(st.sampled_from(TABLE_KEYS), toml_values(TABLE_KEYS), max_size=7),
        max_size=3,
    )
)
def test_any_config_structure_builds_tables_or_is_refused_with_config_error(
    tables: list[dict[str, Any]],
) -> None:
    config = {"tables": [{"name": f"t{i}", **t} for i, t in enumerate(tables)]}
    try:
        built = tables_from_config(config)
    except ConfigError:
        return
    assert [t.name for t in built] == [t["name"] for t in config["tables"]]


def test_the_example_config_is_a_valid_one() -> None:
    from resound.server_command import EXAMPLE_CONFIG

    assert len(tables_from_config(tomllib.loads(EXAMPLE_CONFIG))) == 2
