"""The gRPC messages of protos/resound/v1/replay.proto, built at import time
from the serialized descriptor (see tools/generate_protos.py) in a private
descriptor pool, so they neither clash with a user's own protos nor tie the
package to one protobuf runtime version.

Example:
    >>> from resound import _proto
    >>> _proto.Slice(chunk_key=7, offset=0, length=3).length
    3
"""

from __future__ import annotations

from typing import Any

from google.protobuf import descriptor_pool, message_factory

from resound._proto.descriptor import SERIALIZED

__all__ = [
    "SERVICE",
    "CheckpointRequest",
    "CheckpointResponse",
    "Chunk",
    "Column",
    "InsertRequest",
    "InsertResponse",
    "Item",
    "MutatePrioritiesRequest",
    "MutatePrioritiesResponse",
    "ResetRequest",
    "ResetResponse",
    "SampleRequest",
    "SampleResponse",
    "SampledItem",
    "SelectorInfo",
    "ServerInfoRequest",
    "ServerInfoResponse",
    "Slice",
    "TableInfo",
]

_PACKAGE = "resound.v1"
# The full gRPC service name: methods are f"/{SERVICE}/{name}".
SERVICE = f"{_PACKAGE}.Replay"

_POOL = descriptor_pool.DescriptorPool()
_POOL.AddSerializedFile(SERIALIZED)


def _message(name: str) -> Any:
    return message_factory.GetMessageClass(_POOL.FindMessageTypeByName(f"{_PACKAGE}.{name}"))


Chunk = _message("Chunk")
Slice = _message("Slice")
Column = _message("Column")
Item = _message("Item")
InsertRequest = _message("InsertRequest")
InsertResponse = _message("InsertResponse")
SampleRequest = _message("SampleRequest")
SampledItem = _message("SampledItem")
SampleResponse = _message("SampleResponse")
MutatePrioritiesRequest = _message("MutatePrioritiesRequest")
MutatePrioritiesResponse = _message("MutatePrioritiesResponse")
ResetRequest = _message("ResetRequest")
ResetResponse = _message("ResetResponse")
ServerInfoRequest = _message("ServerInfoRequest")
SelectorInfo = _message("SelectorInfo")
TableInfo = _message("TableInfo")
ServerInfoResponse = _message("ServerInfoResponse")
CheckpointRequest = _message("CheckpointRequest")
CheckpointResponse = _message("CheckpointResponse")
