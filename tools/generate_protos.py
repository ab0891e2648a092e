"""Writes python/resound/_proto/descriptor.py from protos/ (run after editing a .proto).

The package loads its gRPC messages from the serialized descriptor at run time
instead of protoc-generated modules, so it works with any protobuf runtime
from 4.21 on (generated modules pin the runtime to their protoc's version).
tests/service/test_protos.py checks that the descriptor matches protos/.

Usage: python tools/generate_protos.py   (needs grpcio-tools, a test dependency)
"""

from __future__ import annotations

import pathlib
import sys
import tempfile

ROOT = pathlib.Path(__file__).resolve().parent.parent
PROTO = "resound/v1/replay.proto"
OUTPUT = ROOT / "python" / "resound" / "_proto" / "descriptor.py"


def compile_descriptor() -> bytes:
    """The serialized FileDescriptorProto of protos/resound/v1/replay.proto."""
    from google.protobuf import descriptor_pb2
    from grpc_tools import protoc

    with tempfile.TemporaryDirectory() as tmp:
        out = pathlib.Path(tmp) / "set.binpb"
        status = protoc.main(
            ["protoc", f"--proto_path={ROOT / 'protos'}", f"--descriptor_set_out={out}", PROTO]
        )
        if status != 0:
            raise RuntimeError(f"protoc failed with status {status}")
        files = descriptor_pb2.FileDescriptorSet.FromString(out.read_bytes()).file
    (file,) = files
    return file.SerializeToString(deterministic=True)


def render(serialized: bytes) -> str:
    lines = [
        '"""The serialized descriptor of protos/resound/v1/replay.proto.',
        "",
        "Written by tools/generate_protos.py; do not edit.",
        '"""',
        "",
        "SERIALIZED = (",
    ]
    start = 0
    while start < len(serialized):
        # As many bytes as fit a line (escapes make their width vary).
        end = start + 1
        while end < len(serialized) and len(repr(serialized[start : end + 1])) <= 92:
            end += 1
        lines.append(f"    {serialized[start:end]!r}")
        start = end
    lines.append(")")
    return "\n".join(lines) + "\n"


def main() -> int:
    OUTPUT.write_text(render(compile_descriptor()))
    print(f"wrote {OUTPUT.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
