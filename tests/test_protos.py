"""The package's gRPC messages match protos/ (the serialized descriptor the
package loads is what protoc makes of protos/resound/v1/replay.proto today)."""

from __future__ import annotations

import pathlib
import sys

from google.protobuf import descriptor_pb2

from resound import _proto
from resound._proto.descriptor import SERIALIZED

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))

import generate_protos  # noqa: E402


def test_the_descriptor_is_current_with_protos():
    compiled = descriptor_pb2.FileDescriptorProto.FromString(generate_protos.compile_descriptor())
    loaded = descriptor_pb2.FileDescriptorProto.FromString(SERIALIZED)
    assert compiled == loaded, "protos/ changed: run python tools/generate_protos.py"


def test_messages_round_trip_payload_bytes_untouched():
    payload = bytes(range(256)) * 3
    request = _proto.InsertRequest(
        chunks=[_proto.Chunk(key=2**64 - 1, dtype="<f4", shape=[3], num_steps=64, data=payload)],
        items=[
            _proto.Item(
                key=7,
                table="t",
                priority=0.5,
                columns=[_proto.Column(slices=[_proto.Slice(chunk_key=2**64 - 1, length=2)])],
            )
        ],
    )
    decoded = _proto.InsertRequest.FromString(request.SerializeToString())
    assert decoded.chunks[0].data == payload and decoded.chunks[0].key == 2**64 - 1
    assert decoded.items[0].columns[0].slices[0].length == 2
    assert _proto.SERVICE == "resound.v1.Replay"
