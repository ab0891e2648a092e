"""``TrajectoryWriter``: writes steps into per-column chunks and creates items
over any of the steps it still keeps (Reverb's modern writer).

Each leaf path of the appended structure is a *column*. A column's values are
gathered into chunks of up to ``max_chunk_length`` steps; an item is a
priority plus, per column, a list of references to cells of those chunks, so
overlapping items share the same stored data. References older than
``num_keep_alive_refs`` steps of their column expire (unless an item still
waiting to be inserted uses them).

``create_item`` never blocks: items wait in the writer until their chunks are
complete and the table's rate limiter lets them in. ``flush`` waits until at
most ``block_until_num_items`` items wait; ``end_episode`` flushes everything
and starts a new episode.

Example:
    >>> import resound
    >>> server = resound.Server([resound.Table.queue('q', 10)], listen=False)
    >>> client = server.in_process_client()
    >>> with client.trajectory_writer(num_keep_alive_refs=2) as writer:
    ...     first = writer.append({'obs': 1.0})
    ...     second = writer.append({'obs': 2.0})
    ...     writer.create_item('q', priority=1.0, trajectory={'obs': writer.history['obs'][-2:]})
    >>> next(client.sample('q', emit_timesteps=False)).data
    [array([1., 2.])]
"""

from resound.trajectory_writer._references import CellRef, TrajectoryColumn
from resound.trajectory_writer._validation import (
    DEFAULT_MAX_CHUNK_LENGTH as DEFAULT_MAX_CHUNK_LENGTH,
)
from resound.trajectory_writer._values import _as_array as _as_array
from resound.trajectory_writer._writer import TrajectoryWriter
from resound.trajectory_writer._writer import _random_source as _random_source

__all__ = ["CellRef", "TrajectoryColumn", "TrajectoryWriter"]

# The public classes print and pickle under this package's name.
for _public in (CellRef, TrajectoryColumn, TrajectoryWriter):
    _public.__module__ = __name__
del _public
