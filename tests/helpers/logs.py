"""Waiting for a warning on the ``resound`` logger from another thread (the
client's connection threads); tests that read their own thread's log lines
use pytest's ``caplog``."""

from __future__ import annotations

import logging
import threading


class Warnings(logging.Handler):
    """The ``resound`` logger's warnings that contain ``text``; ``seen`` is
    set by the first."""

    def __init__(self, text: str) -> None:
        super().__init__(logging.WARNING)
        self.text = text
        self.messages: list[str] = []
        self.seen = threading.Event()

    def emit(self, record: logging.LogRecord) -> None:
        message = record.getMessage()
        if self.text in message:
            self.messages.append(message)
            self.seen.set()

    def wait(self, timeout: float) -> bool:
        return self.seen.wait(timeout)
