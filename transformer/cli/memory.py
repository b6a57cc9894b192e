"""The memory the system has left: what `generate` checks a request against before any work."""
from __future__ import annotations


def available_bytes() -> int | None:
    """The memory the system reports available (Linux: MemAvailable), or None where unknown."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024  # kB
    except (OSError, ValueError, IndexError):
        pass
    return None
