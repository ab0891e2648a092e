"""Choosing the transports a test built on the ``serve`` fixture (conftest.py)
runs over."""

from __future__ import annotations

import pytest

# For tests of what only the in-process transport promises: an item is in
# its table when create_item returns (if its chunks are complete and the rate
# limiter admits it), and rate-limited items wait in the writer itself. Over
# gRPC items are confirmed asynchronously (flush waits for them), as in Reverb.
in_process_only = pytest.mark.parametrize("serve", ["embedded"], indirect=True)
