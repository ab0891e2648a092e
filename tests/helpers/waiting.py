"""Waiting on other threads and on state without sleeping: every wait is
bounded, by ``SAFETY`` unless the test says otherwise."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

# Bound for joins and polls that end at once when the code under test is
# correct; never used as the timeout of a blocking call being tested.
SAFETY = 20.0


def wait_until(predicate: Callable[[], bool], what: str, timeout: float = SAFETY) -> None:
    """Polls state (no sleeping) until `predicate` holds; fails after `timeout`."""
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting until {what}"


class Background:
    """Runs fn(*args, **kwargs) on a daemon thread and records the outcome."""

    def __init__(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> None:
        self.result: Any = None
        self.error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, args=(fn, args, kwargs), daemon=True)
        self._thread.start()

    def _run(self, fn: Callable[..., Any], args: tuple, kwargs: dict) -> None:
        try:
            self.result = fn(*args, **kwargs)
        except BaseException as error:  # noqa: BLE001 - re-raised in the test thread
            self.error = error

    def done(self) -> bool:
        return not self._thread.is_alive()

    def join(self, timeout: float = SAFETY) -> Background:
        self._thread.join(timeout)
        assert not self._thread.is_alive(), "background call did not finish"
        return self

    def value(self) -> Any:
        self.join()
        if self.error is not None:
            raise self.error
        return self.result

    def raised(self, expected: type[BaseException]) -> BaseException:
        self.join()
        assert isinstance(self.error, expected), f"expected {expected.__name__}, got {self.error!r}"
        return self.error
