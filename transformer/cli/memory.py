"""The memory the system has left: what `generate` checks a request against before any work."""
from __future__ import annotations

from ..backend import available_bytes  # noqa: F401 - the commands read it from here, with in_units


def in_units(n_bytes: float) -> str:
    """A byte count in the unit that shows it best (decimal, as --max-memory's GB): no '0.00 GB'.

    >>> in_units(100_000), in_units(1_234_567), in_units(2.5e9), in_units(512)
    ('100.0 KB', '1.2 MB', '2.50 GB', '512 B')
    """
    for unit, scale, digits in (("GB", 1e9, 2), ("MB", 1e6, 1), ("KB", 1e3, 1)):
        if n_bytes >= scale:
            return f"{n_bytes / scale:.{digits}f} {unit}"
    return f"{n_bytes:.0f} B"
