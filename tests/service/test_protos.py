"""The package's gRPC messages match protos/ (the serialized descriptor the
package loads is what protoc makes of protos/resound/v1/replay.proto today)."""

from __future__ import annotations

import sys

from google.protobuf import descriptor_pb2

from resound import _proto
from resound._proto.descriptor import SERIALIZED

from helpers.paths import REPO_ROOT

sys.path.insert(0, str(REPO_ROOT / "tools"))

import generate_protos  # noqa: E402


def test_the_descriptor_is_current_with_protos():
    compiled = descriptor_pb2.FileDescriptorProto.FromString(generate_protos.compile_descriptor())
    loaded = descriptor_pb2.FileDescriptorProto.FromString(SERIALIZED)
    assert compiled == loaded, "protos/ changed: run python tools/generate_protos.py"


def test_messages_round_trip_payload_bytes_untouched():
    payload = bytes(range(256)) * 3
    request = _proto.InsertRequest(
        chunks=_proto.ChunkBatch(
            layouts=[_proto.ChunkLayout(dtype="<f4", shape=[3])],
            keys=[2**64 - 1],
            layout_indices=[0],
            num_steps=[64],
            data_sizes=[len(payload)],
        ),
        chunk_data=payload,
        items=_proto.ItemBatch(
            tables=["t"],
            table_indices=[0],
            keys=[7],
            priorities=[0.5],
            trajectories=_proto.Trajectories(
                num_columns=[1],
                num_slices=[1],
                squeeze=[False],
                chunk_keys=[2**64 - 1],
                offsets=[0],
                lengths=[2],
            ),  # fmt: skip
        ),
    )
    decoded = _proto.InsertRequest.FromString(request.SerializeToString())
    assert decoded.chunk_data == payload and list(decoded.chunks.keys) == [2**64 - 1]
    assert list(decoded.items.trajectories.lengths) == [2]
    assert _proto.SERVICE == "resound.v1.Replay"


def test_chunk_payloads_are_read_back_in_place():
    from resound._wire import message_codec

    payload = bytes(range(200))
    message = _proto.InsertRequest(chunk_data=payload, release_chunk_keys=[4, 5])
    decoded, view = message_codec.decode(_proto.InsertRequest, message.SerializeToString())
    assert bytes(view) == payload and decoded.chunk_data == b""
    assert list(decoded.release_chunk_keys) == [4, 5]
    # chunk_data anywhere in the message (as another encoder may put it).
    field = _proto.InsertRequest(chunk_data=payload).SerializeToString()
    rest = _proto.InsertRequest(release_chunk_keys=[4, 5]).SerializeToString()
    decoded, view = message_codec.decode(_proto.InsertRequest, field + rest)
    assert bytes(view) == payload and list(decoded.release_chunk_keys) == [4, 5]


def test_malformed_messages_are_refused_by_decode():
    import pytest

    from resound._wire import message_codec

    raw = _proto.InsertRequest(chunk_data=b"x" * 50, release_chunk_keys=[3]).SerializeToString()
    for bad in (raw[:-10], raw[:1], b"\xff" * 11, b"\x0b\x00"):  # cut, cut, bad varint, group
        with pytest.raises(ValueError):
            message_codec.decode(_proto.InsertRequest, bad)
