"""StructuredWriter: items built from static patterns over the recent steps.

A *pattern* names, for every leaf of the items to insert, which field of the
appended steps it reads and which of the most recent steps it takes
(``x[-1]`` the newest value, ``x[-3:]`` the last three, ``x[-5::2]`` every
second of the last five). A :class:`Config` pairs a pattern with a table, a
priority and *conditions* on when to insert (every step, every ``period``
steps, at the end of the episode, when a flag in the data is set, ...). A
:class:`StructuredWriter` appends steps, evaluates every config after each
append and inserts an item for each config whose conditions hold. This is the
writer behind Acme's structured adders (n-step transitions, sequences,
episodes).

Configs are plain dataclasses standing in for Reverb's
``StructuredWriterConfig`` protocol buffer (see :class:`Config`); build them
with :func:`create_reference_step` / :func:`pattern_from_transform`,
:class:`Condition` and :func:`create_config`.

Example:
    >>> from resound import structured_writer as sw
    >>> step = {'obs': None, 'reward': None}
    >>> ref = sw.create_reference_step(step)
    >>> config = sw.create_config(
    ...     pattern={'obs': ref['obs'][-2:], 'reward': ref['reward'][-2]},
    ...     table='transitions',
    ...     conditions=[sw.Condition.step_index() % 2 == 1],
    ... )
    >>> config.flat
    [PatternNode(flat_source_index=0, start=-2, stop=None, step=None), \
PatternNode(flat_source_index=1, start=None, stop=-2, step=None)]
    >>> [config] = sw.prepare_configs([config])  # adds `buffer_length >= 2`
    >>> config.conditions[-1]
    ConditionProto(left='buffer_length', cmp='ge', ge=2)
    >>> sw.required_keep_alive_refs([config])
    2

With a client (``client.structured_writer(configs)``) the writer is used as::

    with client.structured_writer([config]) as writer:
        for t in range(10):
            writer.append({'obs': np.float32(t), 'reward': np.float32(-t)})
        writer.end_episode()
"""

from resound.structured_writer._conditions import Condition
from resound.structured_writer._config import (
    NO_STRUCTURE,
    ConditionProto,
    Config,
    ConstantPriorityFn,
    Pattern,
    PatternNode,
    Priority,
    TDError,
)
from resound.structured_writer._config import (
    ReferenceStep as ReferenceStep,
)
from resound.structured_writer._config import (
    StructuredWriterConfig as StructuredWriterConfig,
)
from resound.structured_writer._patterns import (
    constant_priority_fn,
    create_config,
    create_reference_step,
    pattern_from_transform,
    td_error,
    unpack_pattern,
)
from resound.structured_writer._signature import infer_signature
from resound.structured_writer._validation import (
    add_buffer_length_condition,
    prepare_configs,
    required_keep_alive_refs,
    validate_config,
    validate_configs,
)
from resound.structured_writer._writer import StructuredWriter

__all__ = [
    "NO_STRUCTURE",
    "Condition",
    "ConditionProto",
    "Config",
    "ConstantPriorityFn",
    "Pattern",
    "PatternNode",
    "Priority",
    "StructuredWriter",
    "TDError",
    "add_buffer_length_condition",
    "constant_priority_fn",
    "create_config",
    "create_reference_step",
    "infer_signature",
    "pattern_from_transform",
    "prepare_configs",
    "required_keep_alive_refs",
    "td_error",
    "unpack_pattern",
    "validate_config",
    "validate_configs",
]

# The public classes print and pickle under this package's name.
for _public in (
    Condition,
    ConditionProto,
    Config,
    ConstantPriorityFn,
    PatternNode,
    Priority,
    StructuredWriter,
    TDError,
    type(NO_STRUCTURE),
):
    _public.__module__ = __name__
del _public
