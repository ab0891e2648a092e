"""Checkpoint files record by record, to read them and to make ones no server
writes (damaged, foreign, hand-edited)."""

from __future__ import annotations

import struct


def _crc32c_table() -> list[int]:
    table = []
    for byte in range(256):
        crc = byte
        for _ in range(8):
            crc = (crc >> 1) ^ 0x82F63B78 if crc & 1 else crc >> 1
        table.append(crc)
    return table


_CRC_TABLE = _crc32c_table()


def crc32c(data: bytes) -> int:
    """CRC-32C (Castagnoli), as checkpoint records are checksummed."""
    crc = 0xFFFFFFFF
    for byte in data:
        crc = _CRC_TABLE[(crc ^ byte) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


def records_of(data: bytes) -> list[tuple[int, bytes]]:
    """The (type, payload) records of a checkpoint, end record excluded."""
    records, offset = [], 16
    while True:
        kind, length = struct.unpack_from("<IQ", data, offset)
        payload = data[offset + 12 : offset + 12 + length]
        offset += 12 + length + 4
        if kind == 0xFFFFFFFF:
            return records
        records.append((kind, payload))


def file_of(header: bytes, records: list[tuple[int, bytes]]) -> bytes:
    """A checkpoint of ``records`` with every checksum and the count right."""
    parts = [header]
    for kind, payload in [*records, (0xFFFFFFFF, struct.pack("<Q", len(records)))]:
        head = struct.pack("<IQ", kind, len(payload))
        parts += [head, payload, struct.pack("<I", crc32c(head + payload))]
    return b"".join(parts)


def table_file(directory: str, index: int = 0) -> str:
    """The ``index``-th table file of a checkpoint directory: a whole
    checkpoint file by itself (of the one-file layout) of its tables."""
    import os

    path = os.path.join(directory, f"tables-{index}.rsnd")
    assert os.path.isfile(path), sorted(os.listdir(directory))
    return path
