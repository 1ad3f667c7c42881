"""Serialized GlobalIds as real exports write them (schema note §4.1).

Bit 48 is set (observed value 1 in bits 48-55 in every real file), the PID sits in
bits 24..47 and the TID in bits 0..23; ``globalPid`` is the same with TID 0.
"""

from __future__ import annotations

VM_BIT = 1 << 48
MASK24 = 0xFFFFFF


def global_pid(pid: int) -> int:
    return VM_BIT | (pid & MASK24) << 24


def global_tid(pid: int, tid: int) -> int:
    return global_pid(pid) | (tid & MASK24)


def decode(global_id: int) -> tuple[int, int]:
    """Return (pid, tid) of a globalTid (tid is 0 for a globalPid)."""
    return (global_id >> 24) & MASK24, global_id & MASK24
