"""What every benchmark says about the machine it ran on, and where it writes.

A timing is only as good as the machine was quiet: each benchmark reads the load average
(the number of processes running or waiting for a core, averaged over 1, 5 and 15 minutes)
when it starts and when it ends, prints it, stores it with its results, and says plainly
when the run cannot be trusted: a 1-minute load above BUSY_PER_CORE per core at either end
means other work took a share of the cores while the clock was running.

    record = load_record(start, load_average())   # {"start", "end", "cores", "limit", "trusted"}
    print(load_line(record))
"""
from __future__ import annotations

import argparse
import os
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "results"  # the committed results, quoted by the README
BUSY_PER_CORE = 0.5  # above half a waiting process per core, timings drift by more than their spread


def load_average() -> list[float]:  # -> [1 min, 5 min, 15 min]
    return [round(x, 2) for x in os.getloadavg()]


def load_record(start, end, cores: int | None = None) -> dict:
    """The load averages at both ends of a run and whether its timings can be trusted."""
    cores = cores or os.cpu_count() or 1
    limit = BUSY_PER_CORE * cores
    return {"start": list(start), "end": list(end), "cores": cores, "limit": limit,
            "trusted": max(start[0], end[0]) <= limit}


def load_line(record: dict) -> str:
    """One sentence for the report: the load averages and, when busy, that the timings cannot be trusted."""
    s, e, cores, limit = record["start"], record["end"], record["cores"], record["limit"]
    head = (f"Load average (1/5/15 min) at start {s[0]:.2f}/{s[1]:.2f}/{s[2]:.2f}, at end "
            f"{e[0]:.2f}/{e[1]:.2f}/{e[2]:.2f}, on {cores} cores")
    if record["trusted"]:
        return head + f": at most {limit:.1f} ({BUSY_PER_CORE} per core), a quiet machine."
    return (head + f": above {limit:.1f} ({BUSY_PER_CORE} per core), so the machine was busy and THESE TIMINGS "
            "CANNOT BE TRUSTED; rerun on an idle machine.")


def start_line(start, cores: int | None = None) -> str:
    """What a benchmark prints before it begins: the load now, and a warning if it is already too high."""
    cores = cores or os.cpu_count() or 1
    line = f"Load average (1/5/15 min) now {start[0]:.2f}/{start[1]:.2f}/{start[2]:.2f} on {cores} cores"
    if start[0] > BUSY_PER_CORE * cores:
        return line + f": above {BUSY_PER_CORE * cores:.1f}, busy: the timings of this run cannot be trusted."
    return line + "."


def add_out_argument(ap: argparse.ArgumentParser) -> None:
    ap.add_argument("--out", type=Path, default=RESULTS, metavar="DIR",
                    help="folder for the results files (default benchmarks/results/, the committed ones)")
