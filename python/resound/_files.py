"""Reading the files a user names (a server's config, TLS certificates and
keys): regular files only.

Opening a FIFO waits for a writer, so a FIFO in a file's place hung the
server at start; a device such as /dev/zero is read forever. Both are
refused, without blocking, by what they are.

Example:
    >>> read_regular_file('/dev/null')
    Traceback (most recent call last):
    ...
    resound._files.NotARegularFileError: /dev/null is a character device, not a regular file
"""

from __future__ import annotations

import os
import stat

__all__ = ["NotARegularFileError", "kind_of", "read_regular_file"]


class NotARegularFileError(ValueError):
    """A path names something other than a regular file (the message names
    the path and what it is)."""


def kind_of(mode: int) -> str:
    """What a file of ``st_mode`` ``mode`` is, as a message says it."""
    kinds = [
        (stat.S_ISFIFO, "a FIFO"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISSOCK, "a socket"),
        (stat.S_ISDIR, "a directory"),
        (stat.S_ISREG, "a regular file"),
    ]
    return next((kind for test, kind in kinds if test(mode)), "a file of another kind")


def read_regular_file(path: str | os.PathLike[str]) -> bytes:
    """The contents of the regular file ``path``. NotARegularFileError if it
    is anything else; OSError if it cannot be opened or read."""
    # O_NONBLOCK: the open of a FIFO returns at once (to be refused) instead
    # of waiting for a writer; regular files ignore the flag.
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise NotARegularFileError(f"{os.fspath(path)} is {kind_of(mode)}, not a regular file")
        file = os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise
    with file:
        return file.read()
