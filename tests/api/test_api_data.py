"""Data in and out (docs/compatibility.md items 1-3, docs/semantics.md §1.3,
§2.10, §6.2-§6.4): numpy dtypes, strings, Python scalars and shapes round
trip through Client.insert + sample and sample_batch; nested data and
signatures; the TensorSpec class, signature encoding and resound.nest
(dm-tree order)."""

from __future__ import annotations

import collections
import dataclasses
import pickle
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

import resound
from resound import nest, rate_limiters, selectors, specs

Point = collections.namedtuple("Point", ["y", "x"])  # fields deliberately not sorted


@dataclasses.dataclass
class ShapeDtype:
    """A spec-like object (as jax.ShapeDtypeStruct): .shape and .dtype."""

    shape: tuple[int | None, ...]
    dtype: Any


def fifo_table(name: str, signature: Any = None) -> resound.Table:
    return resound.Table(
        name,
        selectors.Fifo(),
        selectors.Fifo(),
        100,
        rate_limiters.MinSize(1),
        signature=signature,
    )


@pytest.fixture(scope="module")
def server() -> Iterator[resound.Server]:
    with resound.Server([fifo_table("t")], listen=False) as server:
        yield server


@pytest.fixture
def client(server: resound.Server) -> Iterator[resound.Client]:
    client = server.in_process_client()
    client.reset("t")
    yield client
    client.reset("t")


def round_trip(client: resound.Client, value: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(whole item, the one timestep, a batch of 2) of a one-leaf insert."""
    client.insert(value, priorities={"t": 1.0})
    (whole,) = client.sample("t", emit_timesteps=False)
    ((step,),) = client.sample("t")
    batch = client.sample_batch("t", 2)
    assert len(whole.data) == len(step.data) == len(batch.data) == 1
    return whole.data[0], step.data[0], batch.data[0]


def extremes(dtype: np.dtype) -> np.ndarray:
    if dtype == np.bool_:
        return np.array([[True, False, True], [False, False, True]])
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        return np.array([[info.min, 0, info.max], [1, info.max - 1, info.min + 1]], dtype)
    if dtype.kind == "f":
        finfo = np.finfo(dtype)
        return np.array([[finfo.min, -0.0, finfo.max], [finfo.tiny, np.nan, -np.inf]], dtype)
    assert dtype.kind == "c"
    return np.array([[1 + 2j, -0.5j, np.inf], [complex(np.nan, 1), 0, 3]], dtype)


NUMERIC_DTYPES = [
    np.bool_,
    np.int8,
    np.int16,
    np.int32,
    np.int64,
    np.uint8,
    np.uint16,
    np.uint32,
    np.uint64,
    np.float16,
    np.float32,
    np.float64,
    np.complex64,
    np.complex128,
]


@pytest.mark.parametrize("dtype", NUMERIC_DTYPES, ids=lambda d: np.dtype(d).name)
def test_numeric_dtypes_round_trip(client: resound.Client, dtype: type) -> None:
    value = extremes(np.dtype(dtype))
    whole, step, batch = round_trip(client, value)
    assert whole.dtype == step.dtype == batch.dtype == value.dtype
    assert whole.shape == (1, 2, 3)
    assert step.shape == (2, 3)
    assert batch.shape == (2, 1, 2, 3)
    np.testing.assert_array_equal(whole[0], value)
    np.testing.assert_array_equal(step, value)
    np.testing.assert_array_equal(batch[0, 0], value)
    np.testing.assert_array_equal(batch[1, 0], value)
    assert whole.tobytes() == value.tobytes()  # bit for bit (-0.0, NaN payloads)


def test_inserted_and_sampled_arrays_are_independent_copies(client: resound.Client) -> None:
    value = np.arange(6.0)
    client.insert(value, priorities={"t": 1.0})
    value[:] = -1  # the caller reuses its buffer
    (first,) = client.sample("t", emit_timesteps=False)
    np.testing.assert_array_equal(first.data[0], [np.arange(6.0)])
    first.data[0][:] = 100  # a consumer scribbles on its sample
    batch = client.sample_batch("t", 1)
    np.testing.assert_array_equal(batch.data[0], [[np.arange(6.0)]])
    batch.data[0][:] = 7
    np.testing.assert_array_equal(client.sample_batch("t", 1).data[0], [[np.arange(6.0)]])


@pytest.mark.parametrize(
    "value",
    [
        np.array([b"a", b"bc\x00d", b""], dtype="S"),
        np.array([["x", "\u00fcber"], ["\u6f22\u5b57", ""]]),
        np.array(b"single"),
        np.array("\u00e9t\u00e9"),
    ],
    ids=["bytes", "unicode-2d", "bytes-0d", "unicode-0d"],
)
def test_string_arrays_round_trip(client: resound.Client, value: np.ndarray) -> None:
    # Strings come back as Reverb returns them: object arrays of bytes (str as
    # UTF-8; test_strings.py has more).
    expected = value if value.dtype.kind == "S" else np.char.encode(value, "utf-8")
    whole, step, batch = round_trip(client, value)
    assert whole.dtype == step.dtype == batch.dtype == object
    assert step.shape == value.shape
    assert step.tolist() == expected.tolist()
    assert whole[0, ...].tolist() == expected.tolist()
    assert batch[1, 0, ...].tolist() == expected.tolist()


def test_numpy_drops_trailing_nul_bytes_of_fixed_width_strings(client: resound.Client) -> None:
    # numpy itself does this (np.array([b'ab\x00']) == [b'ab']); resound keeps the rest.
    value = np.array([b"ab\x00", b"\x00c"])
    _, step, _ = round_trip(client, value)
    assert step.tolist() == [b"ab", b"\x00c"]
    assert step.tolist() == value.tolist()


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (b"raw", np.array(b"raw")),
        ("text", np.array(b"text")),
        (np.array([b"a", b"bb"], dtype=object), np.array([b"a", b"bb"])),
        (np.array(["a", "\u00fc"], dtype=object), np.array([b"a", "\u00fc".encode()])),
    ],
    ids=["bytes", "str", "object-bytes", "object-str"],
)
def test_python_strings_and_object_string_arrays(
    client: resound.Client, value: Any, expected: np.ndarray
) -> None:
    _, step, _ = round_trip(client, value)
    assert step.dtype == object  # of bytes, as Reverb's string tensors
    assert step.shape == expected.shape
    assert step.tolist() == expected.tolist()


@pytest.mark.parametrize(
    ("value", "dtype"),
    [
        (7, np.int64),
        (-(2**62), np.int64),
        (2.5, np.float64),
        (True, np.bool_),
        (1 + 2j, np.complex128),
        (np.float32(1.5), np.float32),
        (np.uint16(65535), np.uint16),
    ],
)
def test_scalars_become_0d_arrays(client: resound.Client, value: Any, dtype: type) -> None:
    whole, step, batch = round_trip(client, value)
    assert step.dtype == np.dtype(dtype)
    assert step.shape == ()
    assert step == value
    assert whole.shape == (1,)
    assert batch.shape == (2, 1)
    assert batch.dtype == np.dtype(dtype)


@pytest.mark.parametrize("shape", [(), (1,), (5,), (2, 3), (2, 3, 4), (1, 1, 1, 2), (0,), (2, 0)])
def test_shapes_round_trip(client: resound.Client, shape: tuple[int, ...]) -> None:
    value = np.arange(int(np.prod(shape)), dtype=np.int32).reshape(shape)
    whole, step, batch = round_trip(client, value)
    assert step.shape == shape
    assert whole.shape == (1, *shape)
    assert batch.shape == (2, 1, *shape)
    np.testing.assert_array_equal(step, value)


@pytest.mark.parametrize(
    "make",
    [
        lambda: np.arange(24, dtype=np.int32).reshape(4, 6)[:, ::2],
        lambda: np.asfortranarray(np.arange(12.0).reshape(3, 4)),
        lambda: np.arange(10, dtype=np.int16)[::-1],
        lambda: np.arange(24.0).reshape(2, 3, 4).transpose(2, 0, 1),
    ],
    ids=["strided", "fortran", "reversed", "transposed"],
)
def test_non_contiguous_input_arrays(client: resound.Client, make: Any) -> None:
    value = make()
    assert not value.flags.c_contiguous
    whole, step, batch = round_trip(client, value)
    np.testing.assert_array_equal(step, value)
    np.testing.assert_array_equal(whole[0], value)
    np.testing.assert_array_equal(batch[0, 0], value)


@pytest.mark.parametrize(
    "value",
    [np.datetime64("2020-01-01"), np.array([1, "a"], dtype=object), object(), {"k": {1, 2}}],
    ids=["datetime", "mixed-object", "object", "set"],
)
def test_unsupported_values_raise_value_error(client: resound.Client, value: Any) -> None:
    with pytest.raises(ValueError):
        client.insert(value, priorities={"t": 1.0})
    assert client.server_info()["t"].current_size == 0


# --- nested data


NESTED = {
    "z": Point(y=np.float32(1.0), x=np.array([2, 3], np.int8)),
    "a": [np.arange(2.0), (b"tag", 4)],
}
# dm-tree order: sorted dict keys, then list/tuple order, namedtuples in field order.
NESTED_FLAT = [np.arange(2.0), b"tag", 4, np.float32(1.0), np.array([2, 3], np.int8)]
NESTED_SIGNATURE = {
    "z": Point(y=resound.TensorSpec((), np.float32), x=resound.TensorSpec((2,), np.int8)),
    "a": [
        resound.TensorSpec((2,), np.float64),
        (resound.TensorSpec((), bytes), ShapeDtype((), "int64")),
    ],
}


def assert_leaves_equal(actual: list[Any], expected: list[Any]) -> None:
    assert len(actual) == len(expected)
    for got, want in zip(actual, expected, strict=True):
        np.testing.assert_array_equal(got, want)


def test_nested_data_without_signature_comes_back_flat(client: resound.Client) -> None:
    client.insert(NESTED, priorities={"t": 1.0})
    ((step,),) = client.sample("t", unpack_as_table_signature=True)
    assert isinstance(step.data, list)
    assert_leaves_equal(step.data, NESTED_FLAT)
    assert step.data[4].dtype == np.int8


def test_nested_data_with_signature_keeps_its_structure() -> None:
    with resound.Server([fifo_table("n", NESTED_SIGNATURE)], listen=False) as server:
        client = server.in_process_client()
        client.insert(NESTED, priorities={"n": 1.0})
        ((step,),) = client.sample("n", unpack_as_table_signature=True)
        data = step.data
        assert list(data) == ["z", "a"]  # the signature's key order
        assert type(data["z"]) is Point
        assert type(data["a"]) is list
        assert type(data["a"][1]) is tuple
        nest.assert_same_structure(data, NESTED)
        assert_leaves_equal(nest.flatten(data), NESTED_FLAT)
        batch = client.sample_batch("n", 3, unpack_as_table_signature=True)
        assert type(batch.data["z"]) is Point
        assert batch.data["z"].x.shape == (3, 1, 2)
        assert batch.data["a"][1][0].tolist() == [[b"tag"]] * 3


@pytest.mark.parametrize(
    "data",
    [
        {"z": Point(y=np.float64(1.0), x=np.array([2, 3], np.int8)), "a": NESTED["a"]},
        {"z": Point(y=np.float32(1.0), x=np.array([2, 3, 4], np.int8)), "a": NESTED["a"]},
        {"z": NESTED["z"]},
        {**NESTED, "extra": 1},
    ],
    ids=["dtype", "shape", "too-few", "too-many"],
)
def test_insert_not_matching_the_signature_raises(data: Any) -> None:
    with resound.Server([fifo_table("n", NESTED_SIGNATURE)], listen=False) as server:
        client = server.in_process_client()
        with pytest.raises(ValueError, match="signature"):
            client.insert(data, priorities={"n": 1.0})
        assert server.table("n").info.current_size == 0


def test_signature_with_unknown_dims_and_any_string_width() -> None:
    signature = {"obs": resound.TensorSpec((None, 2), np.float32), "s": resound.TensorSpec((), str)}
    with resound.Server([fifo_table("n", signature)], listen=False) as server:
        client = server.in_process_client()
        client.insert({"obs": np.zeros((1, 2), np.float32), "s": "a"}, priorities={"n": 1.0})
        client.insert({"obs": np.zeros((5, 2), np.float32), "s": "longer"}, priorities={"n": 1.0})
        with pytest.raises(ValueError):
            client.insert({"obs": np.zeros((5, 3), np.float32), "s": "x"}, priorities={"n": 1.0})
        with pytest.raises(ValueError):
            client.insert({"obs": np.zeros((5, 2), np.float32), "s": 1.0}, priorities={"n": 1.0})
        # str and bytes are both strings (str is stored as UTF-8 bytes).
        client.insert({"obs": np.zeros((5, 2), np.float32), "s": b"x"}, priorities={"n": 1.0})
        assert server.table("n").info.current_size == 3


def test_signature_may_include_the_time_dimension_of_one_step() -> None:
    # An insert is an item of length 1, so [1, ...] specs describe it too.
    signature = resound.TensorSpec((1, 3), np.int64)
    with resound.Server([fifo_table("n", signature)], listen=False) as server:
        client = server.in_process_client()
        client.insert(np.arange(3), priorities={"n": 1.0})
        assert server.table("n").info.current_size == 1


# --- TensorSpec


def test_tensor_spec_properties_equality_and_pickling() -> None:
    spec = resound.TensorSpec([None, 3], "float32", name="obs")
    assert spec.shape == (None, 3)
    assert spec.dtype == np.dtype(np.float32)
    assert spec.name == "obs"
    assert spec == resound.TensorSpec((None, 3), np.float32, "obs")
    assert spec != resound.TensorSpec((None, 3), np.float32)
    assert spec != resound.TensorSpec((None, 3), np.float64, "obs")
    assert spec != resound.TensorSpec((2, 3), np.float32, "obs")
    assert hash(spec) == hash(resound.TensorSpec((None, 3), np.float32, "obs"))
    assert pickle.loads(pickle.dumps(spec)) == spec
    assert repr(spec) == "TensorSpec(shape=(None, 3), dtype=float32, name='obs')"
    assert resound.TensorSpec(5, np.int8).shape == (5,)
    assert resound.TensorSpec(None, np.int8).shape is None
    assert resound.TensorSpec((-1,), np.int8).shape == (None,)
    assert resound.TensorSpec.from_value(np.zeros((2, 1), np.uint8)) == resound.TensorSpec(
        (2, 1), np.uint8
    )


@pytest.mark.parametrize(
    ("shape", "dtype"),
    [((2,), "not-a-dtype"), ((1.5,), np.int8), (1.5, np.int8), ("ab", np.int8), ((True,), "i1")],
)
def test_tensor_spec_rejects_bad_arguments(shape: Any, dtype: Any) -> None:
    with pytest.raises(ValueError, match="shape|dtype"):
        resound.TensorSpec(shape, dtype)


def test_tensor_spec_rejects_a_bad_name() -> None:
    with pytest.raises(ValueError, match="name"):
        resound.TensorSpec((), np.int8, name=3)  # type: ignore[arg-type]


def test_is_compatible_with_arrays_and_spec_like_objects() -> None:
    spec = resound.TensorSpec((None, 3), np.float32)
    assert spec.is_compatible_with(np.zeros((7, 3), np.float32))
    assert spec.is_compatible_with(np.zeros((0, 3), np.float32))
    assert not spec.is_compatible_with(np.zeros((7, 4), np.float32))
    assert not spec.is_compatible_with(np.zeros((7, 3), np.float64))
    assert not spec.is_compatible_with(np.zeros(3, np.float32))
    assert spec.is_compatible_with(ShapeDtype((2, 3), np.float32))
    assert spec.is_compatible_with(ShapeDtype((None, 3), "float32"))
    assert not spec.is_compatible_with(ShapeDtype((2, 3), np.int32))
    assert spec.is_compatible_with(resound.TensorSpec((4, None), np.float32))
    assert resound.TensorSpec(None, np.int64).is_compatible_with(np.zeros((1, 2, 3), np.int64))
    assert resound.TensorSpec((2,), np.int64).is_compatible_with([1, 2])
    assert not resound.TensorSpec((2,), np.int64).is_compatible_with([1.0, 2.0])
    assert resound.TensorSpec((), bytes).is_compatible_with(np.array(b"long bytes"))
    assert resound.TensorSpec((), bytes).is_compatible_with(np.array("text"))  # stored as bytes
    assert not resound.TensorSpec((), bytes).is_compatible_with(np.array(1.0))
    assert not spec.is_compatible_with(ShapeDtype((2, 3), "no-such-dtype"))


def test_signature_encoding_round_trip() -> None:
    signature = {
        "b": [resound.TensorSpec((None, 3), np.float32, "obs"), resound.TensorSpec(None, str)],
        "a": Point(y=resound.TensorSpec((), np.int64), x=(resound.TensorSpec((2,), bytes),)),
        7: ShapeDtype((4,), np.dtype(np.uint16)),
    }
    encoded = specs.encode_signature(signature)
    assert isinstance(encoded, bytes)
    decoded = specs.decode_signature(encoded)
    assert decoded == {
        "b": [resound.TensorSpec((None, 3), np.float32, "obs"), resound.TensorSpec(None, str)],
        "a": Point(y=resound.TensorSpec((), np.int64), x=(resound.TensorSpec((2,), bytes),)),
        7: resound.TensorSpec((4,), np.uint16),
    }
    assert type(decoded["a"]) is Point
    assert type(decoded["b"]) is list
    assert type(decoded["a"].x) is tuple
    assert specs.encode_signature(decoded) == encoded
    assert specs.encode_signature(None) == b""
    assert specs.decode_signature(b"") is None


def test_signature_encoding_of_a_namedtuple_that_cannot_be_imported() -> None:
    local = collections.namedtuple("Local", ["b", "a"])
    decoded = specs.decode_signature(
        specs.encode_signature(local(resound.TensorSpec((), np.int8), resound.TensorSpec((), bool)))
    )
    assert type(decoded).__name__ == "Local"
    assert type(decoded)._fields == ("b", "a")
    assert decoded.b == resound.TensorSpec((), np.int8)
    assert decoded.a == resound.TensorSpec((), np.bool_)


@pytest.mark.parametrize("data", [b"not json", b'{"format": "other/1", "tree": {}}', b"{}"])
def test_decode_signature_rejects_malformed_data(data: bytes) -> None:
    with pytest.raises(ValueError):
        specs.decode_signature(data)


def test_encode_signature_rejects_unencodable_keys() -> None:
    with pytest.raises(ValueError, match="keys"):
        specs.encode_signature({(1, 2): resound.TensorSpec((), np.int8)})


def test_flat_signature_names_leaves_by_path() -> None:
    flat = specs.flat_signature(NESTED_SIGNATURE)
    assert [s.name for s in flat] == ["a/0", "a/1/0", "a/1/1", "z/y", "z/x"]
    assert [s.dtype for s in flat] == [np.dtype(d) for d in ("f8", "S", "i8", "f4", "i1")]


# --- resound.nest


def test_flatten_follows_dm_tree_order() -> None:
    assert nest.flatten({"b": 1, "a": 2, "c": {"e": 3, "d": 4}}) == [2, 1, 4, 3]
    assert nest.flatten(Point(y=1, x=2)) == [1, 2]  # field order, not sorted
    assert nest.flatten([3, (4, [5])]) == [3, 4, 5]
    assert nest.flatten(7) == [7]
    assert nest.flatten(None) == [None]
    assert nest.flatten({"a": None}) == [None]
    assert nest.flatten({}) == []
    assert nest.flatten({"only": [1, 2]}) == [1, 2]
    array = np.arange(3)
    assert nest.flatten({"x": array})[0] is array  # arrays are leaves


def test_flatten_with_path_uses_keys_indices_and_field_names() -> None:
    assert nest.flatten_with_path({"b": Point(y=1, x=[2]), "a": 3}) == [
        (("a",), 3),
        (("b", "y"), 1),
        (("b", "x", 0), 2),
    ]
    assert nest.flatten_with_path(5) == [((), 5)]


def test_unflatten_as_restores_types_and_key_order() -> None:
    ordered = collections.OrderedDict([("b", 0), ("a", 0)])
    structure = {"y": Point(y=0, x=0), "x": [ordered, (0,)]}
    packed = nest.unflatten_as(structure, [1, 2, 3, 4, 5])
    assert packed == {"y": Point(y=4, x=5), "x": [collections.OrderedDict(b=2, a=1), (3,)]}
    assert list(packed) == ["y", "x"]
    assert type(packed["x"][0]) is collections.OrderedDict
    assert list(packed["x"][0]) == ["b", "a"]
    assert nest.unflatten_as(structure, nest.flatten(structure)) == structure
    with pytest.raises(ValueError):
        nest.unflatten_as(structure, [1, 2, 3, 4])
    with pytest.raises(ValueError):
        nest.unflatten_as(structure, [1, 2, 3, 4, 5, 6])


def test_map_structure_and_assert_same_structure() -> None:
    assert nest.map_structure(lambda a, b: a + b, {"a": [1, 2]}, {"a": [10, 20]}) == {"a": [11, 22]}
    with pytest.raises(ValueError, match=r"\('a',\)"):
        nest.assert_same_structure({"a": [1, 2]}, {"a": [1]})
    with pytest.raises(ValueError):
        nest.assert_same_structure({"a": 1}, {"b": 1})
    with pytest.raises(ValueError):
        nest.assert_same_structure(Point(1, 2), (1, 2))
    nest.assert_same_structure({"a": (1, [2])}, {"a": ("x", ["y"])})
    with pytest.raises(ValueError):
        nest.map_structure(lambda a, b: a, [1], [1, 2])


def test_is_nested_and_unsortable_keys() -> None:
    assert (
        nest.is_nested({})
        and nest.is_nested([])
        and nest.is_nested(())
        and nest.is_nested(Point(1, 2))
    )
    assert not nest.is_nested(np.zeros(3))
    assert not nest.is_nested("text")
    assert not nest.is_nested(None)
    with pytest.raises(TypeError, match="sortable"):
        nest.flatten({1: "a", "b": 2})


def test_one_sample_at_a_time_matches_samples_of_a_batch(serve: Any) -> None:
    """sample(num_samples=1) takes a path of its own (a batch of one, no
    iterators): its info (Python numbers), data (structure, dtypes,
    shapes, strings as bytes objects) and errors are those of the samples
    of a larger batch, over every transport."""
    signature = {
        "obs": specs.TensorSpec([2, 3], np.float32),
        "label": specs.TensorSpec([], np.str_),
        "step": specs.TensorSpec([], np.int64),
    }
    _, client = serve(fifo_table("one", signature), fifo_table("many", signature))
    for table in ("one", "many"):
        for i in range(3):
            data = {
                "obs": np.full((2, 3), i, np.float32),
                "label": np.array(f"item {i}"),
                "step": np.int64(i),
            }
            client.insert(data, priorities={table: 1.5})

    singles = []
    for _ in range(3):
        (sample,) = client.sample(
            "one", num_samples=1, emit_timesteps=False, unpack_as_table_signature=True
        )
        singles.append(sample)
    batch = list(
        client.sample("many", num_samples=3, emit_timesteps=False, unpack_as_table_signature=True)
    )
    assert len(batch) == 3
    for single, other in zip(singles, batch, strict=True):
        for field in ("probability", "table_size", "priority", "times_sampled"):
            value, expected = getattr(single.info, field), getattr(other.info, field)
            assert value == expected and type(value) is type(expected), field
        assert type(single.info.key) is int
        assert set(single.data) == set(other.data)
        for name in single.data:
            got, want = single.data[name], other.data[name]
            assert got.dtype == want.dtype and got.shape == want.shape, name
            np.testing.assert_array_equal(got, want)
    # Fifo: every sample is the oldest item, sampled once more each time.
    assert [s.info.times_sampled for s in singles] == [1, 2, 3]
    assert [s.data["step"].item() for s in singles] == [0, 0, 0]
    assert singles[1].data["label"].item() == b"item 0"
    assert singles[2].data["obs"].dtype == np.float32 and not singles[2].data["obs"].any()

    # Without a signature: the flat list of columns, as for larger batches.
    (flat,) = client.sample("one", num_samples=1, emit_timesteps=False)
    assert isinstance(flat.data, list) and len(flat.data) == 3

    # A timeout says why, as for larger batches.
    client.reset("one")
    with pytest.raises(resound.errors.DeadlineExceededError, match=r"MinSize\(1\) needs 1"):
        next(iter(client.sample("one", num_samples=1, emit_timesteps=False, timeout=0.05)))
