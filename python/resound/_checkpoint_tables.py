"""A checkpoint's table configurations against a server's tables: which
settings differ, and a table configured as saved (for a restore in which
the checkpoint's configuration wins, as in Reverb; see resound.checkpointers).

``saved`` is one entry of ``_core.read_checkpoint_tables(path)['tables']``:
``name``, ``sampler`` / ``remover`` (``kind``, ``priority_exponent``,
``seed``), ``max_size``, ``max_times_sampled``, ``rate_limiter`` (text),
``rate_limiter_options`` (``samples_per_insert``, ``min_size_to_sample``,
``min_diff``, ``max_diff``) and ``signature`` (encoded).
"""

from __future__ import annotations

import types
from typing import TYPE_CHECKING, Any

from resound import item_selectors, rate_limiters, specs

if TYPE_CHECKING:
    from resound.table import Table

__all__ = ["changed_settings", "configured_as_saved"]

_LIMITER_FIELDS = ("samples_per_insert", "min_size_to_sample", "min_diff", "max_diff")


def changed_settings(table: Table, saved: dict[str, Any]) -> list[tuple[str, str, str]]:
    """(setting, the table's value, the checkpoint's value) for every
    setting of ``table`` that the checkpoint ``saved`` has otherwise."""
    info = table._core.info()
    changes = []
    for setting, current in (("sampler", info.sampler), ("remover", info.remover)):
        before = _describe_selector(current.kind, current.priority_exponent)
        after = _describe_selector(saved[setting]["kind"], saved[setting]["priority_exponent"])
        if before != after:
            changes.append((setting, before, after))
    for setting in ("max_size", "max_times_sampled"):
        if getattr(info, setting) != saved[setting]:
            changes.append((setting, str(getattr(info, setting)), str(saved[setting])))
    limiter = info.rate_limiter
    if any(limiter[field] != saved["rate_limiter_options"][field] for field in _LIMITER_FIELDS):
        before = _describe_limiter({field: limiter[field] for field in _LIMITER_FIELDS})
        changes.append(("rate_limiter", before, _describe_limiter(saved["rate_limiter_options"])))
    if specs.encode_signature(table.signature) != saved["signature"]:
        after = specs.decode_signature(saved["signature"])
        changes.append(("signature", repr(table.signature), repr(after)))
    return changes


def configured_as_saved(table: Table, saved: dict[str, Any]) -> Table:
    """A new, empty table named as ``table``, configured as ``saved``
    (``max_bytes``, which checkpoints do not hold, stays ``table``'s)."""
    from resound.table import Table

    return Table(
        name=table.name,
        sampler=_selector(saved["sampler"]),
        remover=_selector(saved["remover"]),
        max_size=saved["max_size"],
        rate_limiter=rate_limiters.RateLimiter(
            **{field: saved["rate_limiter_options"][field] for field in _LIMITER_FIELDS}
        ),
        max_times_sampled=saved["max_times_sampled"],
        signature=specs.decode_signature(saved["signature"]),
        max_bytes=table._core.info().max_bytes or None,
    )


def _selector(saved: dict[str, Any]) -> item_selectors.ItemSelector:
    return item_selectors.from_options(types.SimpleNamespace(**saved))


def _describe_selector(kind: str, priority_exponent: float) -> str:
    return f"prioritized({priority_exponent:g})" if kind == "prioritized" else kind


def _describe_limiter(options: dict[str, Any]) -> str:
    return (
        f"RateLimiter(samples_per_insert={options['samples_per_insert']:g}, "
        f"min_size_to_sample={int(options['min_size_to_sample'])}, "
        f"min_diff={options['min_diff']:g}, max_diff={options['max_diff']:g})"
    )
