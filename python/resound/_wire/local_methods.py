"""The same-host transport's calls by number (docs/local-transport.md), as
``ReplayMethod`` in cpp/resound/local/replay_local_service.h numbers them:
the frame's method field, on both the client's and the server's side."""

from __future__ import annotations

__all__ = ["LOCAL_METHODS"]

LOCAL_METHODS = {
    "Insert": 1,
    "Sample": 2,
    "SampleStream": 3,
    "MutatePriorities": 4,
    "Reset": 5,
    "ServerInfo": 6,
    "WhyBlocked": 7,
    "Checkpoint": 8,
    "SampleGathered": 9,
}
