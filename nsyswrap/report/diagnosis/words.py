"""The words the diagnosis writes figures and lists with: `1.23 ms`, `ranks 0, 1 and 3`,
`steps 0-9`, `rank 0 GPU 1`."""

from __future__ import annotations


def ms(ns: float, digits: int = 2) -> str:
    """A duration for people: `1.23 ms` (`1.234 ms` with 3 digits)."""
    return f"{ns / 1e6:,.{digits}f} ms"


def gb(n: float) -> str:
    """Bytes for people: `1.2 GB`, or `80.0 MB` under 0.1 GB."""
    return f"{n / 1e9:,.1f} GB" if n >= 1e8 else f"{n / 1e6:,.1f} MB"


def and_(items: list[str]) -> str:
    """`a`, `a and b`, `a, b and c`; empty for none."""
    return ", ".join(items[:-1]) + (" and " if len(items) > 1 else "") + items[-1] if items else ""


def listed(noun: str, numbers) -> str:
    """`rank 3`, `ranks 0, 1 and 3`, `steps 0-9`, `steps 0-3, 5 and 7`: runs of three or
    more as ranges."""
    numbers = sorted(numbers)
    runs: list[list[int]] = []
    for n in numbers:
        if runs and n == runs[-1][-1] + 1:
            runs[-1].append(n)
        else:
            runs.append([n])
    parts = [
        p for run in runs for p in ([f"{run[0]}-{run[-1]}"] if len(run) > 2 else map(str, run))
    ]
    words = ", ".join(parts[:-1]) + (" and " if len(parts) > 1 else "") + parts[-1]
    return f"{noun} " + words if len(numbers) == 1 else f"{noun}s " + words


def ranks(numbers: list[int], of: int | None = None) -> str:
    """`rank 3`, `ranks 0, 1 and 3`, `ranks 0-1 and 3-15`, or `the other 15 ranks` when
    they are all `of` ranks but one."""
    if of is not None and len(numbers) == of - 1 and len(numbers) > 3:
        return f"the other {len(numbers)} ranks"
    return listed("rank", numbers)


def devices(keys: list[tuple[int, int]], devices_per_rank: dict[int, int]) -> str:
    """`ranks 0 and 1` when each has one GPU, else `rank 0 GPU 0, rank 0 GPU 1`."""
    if all(devices_per_rank.get(rank, 1) == 1 for rank, _ in keys):
        return ranks([rank for rank, _ in keys])
    return ", ".join(f"rank {rank} GPU {device}" for rank, device in sorted(keys))


def capital(text: str) -> str:
    """`text` with its first letter upper case (`Ranks 0 and 1 wait`)."""
    return text[:1].upper() + text[1:]
