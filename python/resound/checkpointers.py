"""Checkpointers (Reverb's ``reverb.checkpointers``): where a server writes
checkpoints of its tables, and which one it restores when it starts.

A checkpoint is a directory, ``<path>/checkpoint-<UTC time>/``, holding
table files, ``tables-<k>.rsnd``, and their manifest, ``checkpoint.rsnd``.
The tables hold every table's configuration, items, their chunks (each
once), priorities, times sampled, rate limiter counters and the selectors'
order, so that Fifo, Lifo and heap tables sample in the same order after a
restore; tables that share chunks (items of one writer in two tables) are
in one file, others each in a file of their own, so that a periodic
checkpoint (``Server.checkpoint(skip_unchanged=True)``) links the files of
tables that did not change from the previous checkpoint instead of writing
them again. ``Client.checkpoint()`` returns the directory, as Reverb's
does. The file format is resound's own (docs/checkpoint-format.md):
versioned, checksummed per record, written under a temporary name, synced
and only then given its name; the manifest is written last, so a directory
counts as a checkpoint only once all of it is there. Saving takes only
references under each table's lock; inserts and samples go on while the
files are written. Checkpoints of the earlier layouts (a directory holding
one file ``checkpoint.rsnd`` of every table, or a file
``<path>/checkpoint-<UTC time>.rsnd``) are still found and restored.

Restoring into a server whose tables are configured differently, the
checkpoint's configuration wins, as in Reverb: each restored table takes the
saved sampler, remover, max_size, max_times_sampled, rate limiter (and its
counters) and signature, and one warning per changed setting goes to the
``resound`` logger. ``max_bytes`` (which Reverb does not have, and the file
does not hold) stays as the server configures it. A server table that the
checkpoint lacks stays as configured, and empty; a checkpoint table that the
server lacks makes the restore fail with ValueError naming it (as Reverb's
restore fails).

A checkpointer keeps the newest ``keep_latest`` of its checkpoints and
deletes older ones; it never deletes a directory or file whose name it would
not have written, nor a directory holding anything besides its checkpoint.

A save opens its manifest as ``checkpoint.rsnd.<pid>.tmp`` first and
writes each table file as ``tables-<k>.rsnd.<pid>.tmp`` before giving it
its name. A process killed mid-save leaves those temporaries (as large as
the checkpoint; a crash loop would fill the disk): when a server starts and
after each successful save, the checkpointer removes the temporaries of
processes that no longer run (and of earlier processes that had this one's
pid), the table files of a directory that has no manifest, and then the
directory if nothing else is in it.

Example:
    >>> import os, tempfile, numpy as np, resound
    >>> directory = tempfile.mkdtemp()
    >>> def tables():
    ...     return [resound.Table.queue('q', 10)]
    >>> server = resound.Server(tables(), listen=False,
    ...                         checkpointer=resound.checkpointers.DefaultCheckpointer(directory))
    >>> client = server.in_process_client()
    >>> client.insert({'x': np.arange(3)}, priorities={'q': 1.0})
    >>> path = client.checkpoint()
    >>> sorted(os.listdir(path))
    ['checkpoint.rsnd', 'tables-0.rsnd']
    >>> server.stop()
    >>> restored = resound.Server(tables(), listen=False,
    ...                           checkpointer=resound.checkpointers.DefaultCheckpointer(directory))
    >>> restored.table('q').info.current_size
    1
"""

from __future__ import annotations

import atexit
import contextlib
import itertools
import logging
import os
import re
import shutil
import stat
import tempfile
import threading
import time
from collections.abc import Collection, Sequence
from typing import TYPE_CHECKING, Any

from resound import _checkpoint_tables, _core

if TYPE_CHECKING:
    from resound.table import Table

__all__ = [
    "FILE_NAME",
    "CheckpointerBase",
    "DefaultCheckpointer",
    "ServerTempCheckpointer",
    "TempDirCheckpointer",
    "checkpoint_file",
    "default_checkpointer",
    "inspect",
    "process_temp_directory",
    "restore",
]

# The names a checkpointer writes (and the only ones it ever deletes): a
# directory holding FILE_NAME, or (the earlier layout) a file of its own.
_NAME = re.compile(r"checkpoint-(\d{8}T\d{6}\.\d{9}Z)(?:-(\d+))?")
_LEGACY_SUFFIX = ".rsnd"
# The checkpoint file inside a checkpoint directory: the manifest of its
# table files (or, in the earlier layout, the one file of every table).
FILE_NAME = "checkpoint.rsnd"
# A checkpoint directory's table files (CheckpointManifest::TableFileName).
_TABLE_FILE = r"tables-(?:0|[1-9][0-9]{0,8})\.rsnd"
_TABLE_FILE_NAME = re.compile(_TABLE_FILE)
# The temporaries a save writes those as, holding the saving process's pid
# (CheckpointFileWriter::TemporaryPathOf).
_TEMPORARY = re.compile(
    "(?:" + re.escape(FILE_NAME) + "|" + _TABLE_FILE + r")\.([1-9][0-9]{0,9})\.tmp"
)
# The checkpoint files this process is saving now: a temporary holding this
# process's pid is stale unless its file is among them (an earlier process
# had the pid: containers restart servers under the same pid).
_saving: set[str] = set()
_saving_lock = threading.Lock()

_LOGGER = logging.getLogger("resound")


def checkpoint_file(path: str | os.PathLike[str]) -> str:
    """The checkpoint file of ``path``: the file inside a checkpoint
    directory, or ``path`` itself if it is a file."""
    path = os.fspath(path)
    if os.path.isdir(path):
        return os.path.join(path, FILE_NAME)
    return path


def inspect(path: str | os.PathLike[str]) -> dict[str, Any]:
    """What the checkpoint at ``path`` (a checkpoint directory, or its file)
    holds, after checking all of it: ``tables`` (name, selectors, max_size,
    rate limiter, counters, num_items), ``files`` (a directory's table
    files: name, tables, bytes), ``num_chunks``, ``chunk_bytes`` and
    ``file_bytes`` (all files together). CheckpointError if a file is
    damaged or not a checkpoint."""
    return _core.inspect_checkpoint(checkpoint_file(path))


def restore(path: str | os.PathLike[str], tables: Sequence[Table]) -> None:
    """Restores the checkpoint at ``path`` (a directory or its file) into
    ``tables`` (empty, matched by name), the checkpoint's configuration
    winning (see the module doc). All or nothing: if it fails, every table
    is as it was."""
    file = checkpoint_file(path)
    saved = _core.read_checkpoint_tables(file)["tables"]
    by_name = {table.name: table for table in tables}
    replacements: dict[str, Table] = {}
    changes: list[tuple[str, str, str, str]] = []
    for config in saved:
        table = by_name.get(config["name"])
        if table is None:
            continue  # the load below refuses it, naming it and the server's tables
        changed = _checkpoint_tables.changed_settings(table, config)
        if changed:
            replacements[table.name] = _checkpoint_tables.configured_as_saved(table, config)
            changes += [(table.name, *change) for change in changed]
    _core.load_checkpoint(file, [replacements.get(t.name, t)._core for t in tables])
    for name, replacement in replacements.items():
        by_name[name]._adopt_configuration(replacement)
    for name, setting, old, new in changes:
        _LOGGER.warning(
            "restoring checkpoint %s: table %r: %s was %s, is now %s (the checkpoint's)",
            file,
            name,
            setting,
            old,
            new,
        )


class CheckpointerBase:
    """What a Server needs of a checkpointer: ``save`` and ``load_latest``."""

    def save(self, tables: Sequence[Table]) -> str:
        """Writes a checkpoint of ``tables``; returns its path (a directory)."""
        raise NotImplementedError

    def load_latest(self, tables: Sequence[Table]) -> str | None:
        """Restores the newest checkpoint into ``tables``; returns its path,
        or None if there is none."""
        raise NotImplementedError


class DefaultCheckpointer(CheckpointerBase):
    """Checkpoints in the directory ``path`` (created when first needed).

    Args:
      path: the directory of the checkpoints.
      group: Reverb's group; must be empty, as in Reverb's open-source build.
      fallback_checkpoint_path: a checkpoint (directory, or its file)
        restored when ``path`` holds none.
      keep_latest: how many of its checkpoints to keep (>= 1); older ones
        are deleted after each save.
    """

    def __init__(
        self,
        path: str,
        group: str = "",
        fallback_checkpoint_path: str | None = None,
        *,
        keep_latest: int = 1,
    ) -> None:
        path = os.fspath(path) if isinstance(path, os.PathLike) else path
        if not isinstance(path, str) or not path:
            raise ValueError(f"path must be a nonempty directory path, got {path!r}")
        if group:
            raise ValueError(f"group must be empty ('' or None), got {group!r}")
        if fallback_checkpoint_path is not None and not isinstance(
            fallback_checkpoint_path, (str, os.PathLike)
        ):
            raise ValueError(
                "fallback_checkpoint_path must be the path of a checkpoint (directory or file) "
                "or None, "
                f"got {fallback_checkpoint_path!r}"
            )
        if isinstance(keep_latest, bool) or not isinstance(keep_latest, int) or keep_latest < 1:
            raise ValueError(f"keep_latest must be an int >= 1, got {keep_latest!r}")
        self._path = os.path.abspath(path)
        self._fallback = (
            None if fallback_checkpoint_path is None else os.fspath(fallback_checkpoint_path)
        )
        self._keep_latest = keep_latest
        self._lock = threading.Lock()
        # The summary of the newest save (see save): what it wrote and linked.
        self.last_save: dict[str, Any] | None = None

    @property
    def path(self) -> str:
        return self._path

    def checkpoints(self) -> list[str]:
        """This checkpointer's complete checkpoints in ``path``, oldest first:
        directories holding their file (and files of the earlier layout)."""
        return [path for _, path in self._checkpoints()]

    def _checkpoints(self, irregular: bool = False) -> list[tuple[tuple[str, int], str]]:
        """((time, suffix), path) of the checkpoints, oldest first. With
        ``irregular``, also those whose file is not a regular file (a FIFO,
        a device): no checkpoint, but load_latest refuses it (naming it)
        rather than restore an older checkpoint or hang reading it."""
        try:
            names = os.listdir(self._path)
        except FileNotFoundError:
            return []
        ours = []
        for name in names:
            legacy = name.endswith(_LEGACY_SUFFIX)
            match = _NAME.fullmatch(name[: -len(_LEGACY_SUFFIX)] if legacy else name)
            if match is None:
                continue
            path = os.path.join(self._path, name)
            try:
                mode = os.stat(path if legacy else os.path.join(path, FILE_NAME)).st_mode
            except OSError:
                continue  # being written, or not a checkpoint
            if not stat.S_ISREG(mode) and (not irregular or stat.S_ISDIR(mode)):
                continue
            ours.append(((match.group(1), int(match.group(2) or 0)), path))
        return sorted(ours)

    def save(
        self,
        tables: Sequence[Table],
        *,
        previous: str | None = None,
        unchanged: Collection[str] = (),
    ) -> str:
        """Writes a new checkpoint directory; returns its path.

        Args:
          tables: the tables to write.
          previous: an earlier checkpoint directory; the table files in it
            whose tables are all in ``unchanged`` (and are grouped the same
            way now) are hard-linked into the new directory rather than
            written again (written after all where linking fails, e.g.
            across file systems). ``last_save`` tells which were.
          unchanged: names of tables that have not changed since
            ``previous`` was written (the caller knows: Server counts each
            table's changes).
        """
        if isinstance(unchanged, str):
            raise TypeError("unchanged must be a collection of table names, not a str")
        with self._lock:
            os.makedirs(self._path, exist_ok=True)
            now = time.time_ns()
            stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime(now // 1_000_000_000))
            stamp = f"{stamp}.{now % 1_000_000_000:09d}Z"
            suffix = 0
            existing = self._checkpoints()
            if existing:
                # Names order the checkpoints: after a clock step back, count
                # on from the newest instead of writing an "older" one.
                newest_stamp, newest_suffix = existing[-1][0]
                if stamp <= newest_stamp:
                    stamp, suffix = newest_stamp, newest_suffix + 1
            while True:
                name = f"checkpoint-{stamp}" + (f"-{suffix}" if suffix else "")
                directory = os.path.join(self._path, name)
                try:
                    os.mkdir(directory)  # fails if a save of the same instant made it
                    break
                except FileExistsError:
                    suffix += 1
            file = os.path.join(directory, FILE_NAME)
            with _saving_lock:
                _saving.add(file)
            try:
                self.last_save = _core.save_checkpoint_directory(
                    [table._core for table in tables],
                    directory,
                    "" if previous is None else os.fspath(previous),
                    sorted(unchanged) if previous is not None else [],
                )
            except BaseException:
                with contextlib.suppress(OSError):
                    os.rmdir(directory)  # empty: the save removes its files when it fails
                raise
            finally:
                with _saving_lock:
                    _saving.discard(file)
            for _, old in self._checkpoints()[: -self._keep_latest]:
                _remove_checkpoint(old)
            self.remove_stale_temporaries()
            return directory

    def remove_stale_temporaries(self) -> list[str]:
        """Deletes the temporary files that saves of processes no longer
        running left in ``path`` (see the module doc), and then their
        checkpoint directories if nothing else is in them; returns the
        temporaries deleted. Saves in progress, and files whose names it
        would not have written, are left alone. (Run when a server starts and
        after each save.)"""
        try:
            names = os.listdir(self._path)
        except (FileNotFoundError, NotADirectoryError):
            return []
        removed: list[str] = []
        for name in sorted(names):
            directory = os.path.join(self._path, name)
            if _NAME.fullmatch(name) is None or not os.path.isdir(directory):
                continue
            try:
                entries = os.listdir(directory)
            except OSError:
                continue  # gone meanwhile, or unreadable: not ours to judge
            before = len(removed)
            for entry in entries:
                match = _TEMPORARY.fullmatch(entry)
                if match is None or not _left_by_a_gone_process(directory, int(match.group(1))):
                    continue
                path = os.path.join(directory, entry)
                with contextlib.suppress(FileNotFoundError):
                    size = os.path.getsize(path)
                    os.remove(path)
                    removed.append(path)
                    _LOGGER.warning(
                        "removed %s (%d bytes): a checkpoint save by process %s, which no "
                        "longer runs, left it unfinished",
                        path,
                        size,
                        match.group(1),
                    )
            if len(removed) > before and not os.path.exists(os.path.join(directory, FILE_NAME)):
                # No manifest: the table files of the save it killed are no
                # checkpoint (linked ones would keep older files alive).
                for entry in entries:
                    if _TABLE_FILE_NAME.fullmatch(entry):
                        with contextlib.suppress(FileNotFoundError):
                            os.remove(os.path.join(directory, entry))
                with contextlib.suppress(OSError):  # someone else's files in it: left alone
                    os.rmdir(directory)
        return removed

    def latest(self) -> str | None:
        """What ``load_latest`` restores: the newest checkpoint in ``path``
        (also one whose file is not a regular file, which it refuses naming
        it, rather than restore an older one), else the fallback, else None."""
        existing = self._checkpoints(irregular=True)
        return existing[-1][1] if existing else self._fallback

    def load_latest(self, tables: Sequence[Table]) -> str | None:
        self.remove_stale_temporaries()  # a server starts: after a crash, perhaps
        path = self.latest()
        if path is not None:
            restore(path, tables)
        return path

    def __repr__(self) -> str:
        return f"DefaultCheckpointer(path={self._path!r}, keep_latest={self._keep_latest})"


class TempDirCheckpointer(DefaultCheckpointer):
    """A DefaultCheckpointer in a new temporary directory."""

    def __init__(self, *, keep_latest: int = 1) -> None:
        super().__init__(tempfile.mkdtemp(prefix="resound-checkpoints-"), keep_latest=keep_latest)


# Where a Server without a checkpointer writes the checkpoints it is asked
# for: one directory per process (by pid), one subdirectory per server.
_PROCESS_TEMP_PREFIX = "resound-checkpoints-pid"
_server_temp_numbers = itertools.count(1)
_process_temp_lock = threading.Lock()
_process_temp_registered = False


def process_temp_directory() -> str:
    """``<tempfile.gettempdir()>/resound-checkpoints-pid<pid>``: where the
    servers of this process that have no checkpointer write checkpoints
    (see ``ServerTempCheckpointer``); removed when the process exits."""
    return os.path.join(tempfile.gettempdir(), f"{_PROCESS_TEMP_PREFIX}{os.getpid()}")


class ServerTempCheckpointer(DefaultCheckpointer):
    """The checkpointer of a Server given none, for ``Client.checkpoint()``.

    Writes into ``<process_temp_directory()>/server-<n>`` (n counts the
    servers of the process), keeps only the newest checkpoint there, and
    ``remove()`` (which the server calls when it stops) deletes the
    directory; the process directory goes when the process exits. Folders a
    process killed before it could remove them are removed by the next
    process that creates one of these, once no process has that pid.

    Example:
        >>> import os, resound
        >>> server = resound.Server([resound.Table.queue('q', 10)], listen=False)
        >>> path = server.in_process_client().checkpoint()
        >>> path.startswith(process_temp_directory())
        True
        >>> server.stop()
        >>> os.path.exists(path)
        False
    """

    def __init__(self) -> None:
        global _process_temp_registered
        with _process_temp_lock:
            if not _process_temp_registered:
                _process_temp_registered = True
                _remove_temp_directories_of_gone_processes()
                atexit.register(_remove_process_temp_directory, os.getpid())
        super().__init__(
            os.path.join(process_temp_directory(), f"server-{next(_server_temp_numbers)}"),
            keep_latest=1,
        )

    def remove(self) -> None:
        """Deletes this server's directory and every checkpoint in it."""
        with self._lock:
            shutil.rmtree(self._path, ignore_errors=True)
        with contextlib.suppress(OSError):  # other servers' directories are in it
            os.rmdir(os.path.dirname(self._path))


def _remove_process_temp_directory(pid: int) -> None:
    if pid == os.getpid():  # not in a forked child, whose parent still runs
        shutil.rmtree(process_temp_directory(), ignore_errors=True)


def _remove_temp_directories_of_gone_processes() -> None:
    root = tempfile.gettempdir()
    with contextlib.suppress(OSError):
        for name in os.listdir(root):
            digits = name[len(_PROCESS_TEMP_PREFIX) :]
            if not name.startswith(_PROCESS_TEMP_PREFIX) or not digits.isdigit():
                continue
            pid = int(digits)
            if pid == os.getpid() or not _process_is_gone(pid):
                continue
            path = os.path.join(root, name)
            if (
                os.path.isdir(path)
                and not os.path.islink(path)
                and os.stat(path).st_uid == os.getuid()
            ):
                shutil.rmtree(path, ignore_errors=True)
                _LOGGER.info(
                    "removed %s: checkpoints of process %d, which no longer runs", path, pid
                )


def _process_is_gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)  # signal 0: only whether the process exists
    except ProcessLookupError:
        return True
    except (PermissionError, OverflowError):
        return False
    return False


def default_checkpointer(group: str | None = None) -> CheckpointerBase:
    """A TempDirCheckpointer (Reverb's default; ``group`` is ignored)."""
    del group
    return TempDirCheckpointer()


def _left_by_a_gone_process(directory: str, pid: int) -> bool:
    """Whether the temporary of a save by ``pid`` in checkpoint ``directory``
    is stale: ``pid`` runs no process, or is this process's and it is not
    saving that checkpoint (a process that had the pid before)."""
    if pid == os.getpid():
        with _saving_lock:
            return os.path.join(directory, FILE_NAME) not in _saving
    try:
        os.kill(pid, 0)  # signal 0: only whether the process exists
    except ProcessLookupError:
        return True
    except (PermissionError, OverflowError):
        return False  # another user's process (or no pid of this system): left alone
    return False


def _remove_checkpoint(path: str) -> None:
    """Deletes one of the checkpointer's own checkpoints: a legacy file, or
    a directory's manifest, table files (a table file linked into a newer
    checkpoint lives on there) and leftover temporary files (the checkpoint
    is complete, so no save is writing them), and then the directory if
    nothing else is in it."""
    if path.endswith(_LEGACY_SUFFIX) and not os.path.isdir(path):
        with contextlib.suppress(FileNotFoundError):  # removed by someone else
            os.remove(path)
        return
    names = [FILE_NAME, FILE_NAME + ".tmp"]  # (the latter: from earlier versions)
    with contextlib.suppress(OSError):
        names += [
            name
            for name in os.listdir(path)
            if _TEMPORARY.fullmatch(name) or _TABLE_FILE_NAME.fullmatch(name)
        ]
    for name in names:
        with contextlib.suppress(FileNotFoundError):
            os.remove(os.path.join(path, name))
    with contextlib.suppress(OSError):  # someone else's files in it: left alone
        os.rmdir(path)
