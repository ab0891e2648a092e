"""The gRPC messages of protos/resound/v1/replay.proto, built at import time
from the serialized descriptor (see tools/generate_protos.py) in a private
descriptor pool, so they neither clash with a user's own protos nor tie the
package to one protobuf runtime version.

Example:
    >>> from resound import _proto
    >>> list(_proto.ItemBatch(keys=[7, 8], priorities=[1.0, 0.5]).keys)
    [7, 8]
"""

from __future__ import annotations

from typing import Any

from google.protobuf import descriptor_pool, message_factory

from resound._proto.descriptor import SERIALIZED

__all__ = [
    "SERVICE",
    "CheckpointRequest",
    "CheckpointResponse",
    "ChunkBatch",
    "ChunkLayout",
    "InsertRequest",
    "InsertResponse",
    "ItemBatch",
    "KeyDistributionOptions",
    "MutatePrioritiesRequest",
    "MutatePrioritiesResponse",
    "RateLimiterCallStats",
    "RateLimiterInfo",
    "ResetRequest",
    "ResetResponse",
    "SampleRequest",
    "SampleResponse",
    "SampledItems",
    "ServerInfoRequest",
    "ServerInfoResponse",
    "TableInfo",
    "TableWorkerTime",
    "Trajectories",
    "WhyBlockedRequest",
    "WhyBlockedResponse",
]

_PACKAGE = "resound.v1"
# The full gRPC service name: methods are f"/{SERVICE}/{name}".
SERVICE = f"{_PACKAGE}.Replay"

_POOL = descriptor_pool.DescriptorPool()
_POOL.AddSerializedFile(SERIALIZED)


def _message(name: str) -> Any:
    return message_factory.GetMessageClass(_POOL.FindMessageTypeByName(f"{_PACKAGE}.{name}"))


ChunkLayout = _message("ChunkLayout")
ChunkBatch = _message("ChunkBatch")
Trajectories = _message("Trajectories")
ItemBatch = _message("ItemBatch")
InsertRequest = _message("InsertRequest")
InsertResponse = _message("InsertResponse")
SampleRequest = _message("SampleRequest")
SampledItems = _message("SampledItems")
SampleResponse = _message("SampleResponse")
MutatePrioritiesRequest = _message("MutatePrioritiesRequest")
MutatePrioritiesResponse = _message("MutatePrioritiesResponse")
ResetRequest = _message("ResetRequest")
ResetResponse = _message("ResetResponse")
ServerInfoRequest = _message("ServerInfoRequest")
KeyDistributionOptions = _message("KeyDistributionOptions")
RateLimiterCallStats = _message("RateLimiterCallStats")
RateLimiterInfo = _message("RateLimiterInfo")
TableWorkerTime = _message("TableWorkerTime")
TableInfo = _message("TableInfo")
ServerInfoResponse = _message("ServerInfoResponse")
CheckpointRequest = _message("CheckpointRequest")
CheckpointResponse = _message("CheckpointResponse")
WhyBlockedRequest = _message("WhyBlockedRequest")
WhyBlockedResponse = _message("WhyBlockedResponse")
