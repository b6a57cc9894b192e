"""What every benchmark says about the machine it ran on, and where it writes.

A timing is only as good as the machine was quiet: each benchmark reads the load average
(the number of processes running or waiting for a core, averaged over 1, 5 and 15 minutes)
when it starts and when it ends, prints it, stores it with its results, and says plainly
when the run cannot be trusted: a 1-minute load above BUSY_PER_CORE per core at the start, or
at the end above that plus the benchmark's own threads (a run that kept 2 threads busy for a
minute leaves a load of about 2 by itself), means other work took a share of the cores while
the clock was running.

    record = load_record(start, load_average(), own=2)   # {"start", "end", "cores", "limit", "own", "trusted"}
    print(load_line(record))

The load average lags by minutes; what other programs used while the clock ran is read directly
from the kernel's CPU counters (Linux /proc/stat) against this process's own CPU time:

    cpu0 = cpu_snapshot(); …; use = others_cpu(cpu0, cpu_snapshot())   # {"others_cores", "limit_cores", "quiet"}
    print(trust_line(record, use))                                      # "Trustworthy: no (…)"
"""
from __future__ import annotations

import argparse
import os
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "results"  # the committed results, quoted by the README
BUSY_PER_CORE = 0.5  # above half a waiting process per core, timings drift by more than their spread
OTHERS_MAX_CORES = 0.1  # other programs' CPU use while a benchmark runs, in cores on average; an idle
# machine's background (kernel threads, the shell) is ~0.01, and a BLAS thread sharing its core with
# another program waits for it at every synchronisation


def load_average() -> list[float]:  # -> [1 min, 5 min, 15 min]
    return [round(x, 2) for x in os.getloadavg()]


def load_record(start, end, cores: int | None = None, own: float = 0.0) -> dict:
    """The load averages at both ends of a run and whether its timings can be trusted.
    own: the threads the benchmark itself kept busy, which the 1-minute load at its end includes."""
    cores = cores or os.cpu_count() or 1
    limit = BUSY_PER_CORE * cores
    return {"start": list(start), "end": list(end), "cores": cores, "limit": limit, "own": own,
            "trusted": start[0] <= limit and end[0] <= limit + own}


def wait_for_quiet(cores: int | None = None, timeout_s: float = 600, poll_s: float = 10) -> list[float]:
    """Sleep until the 1-minute load is at most the limit (an earlier run's own load decays over
    minutes), or timeout_s passes; -> the load average then."""
    import time
    limit = BUSY_PER_CORE * (cores or os.cpu_count() or 1)
    deadline = time.monotonic() + timeout_s
    while load_average()[0] > limit and time.monotonic() < deadline:
        time.sleep(poll_s)
    return load_average()


def load_line(record: dict) -> str:
    """One sentence for the report: the load averages and, when busy, that the timings cannot be trusted."""
    s, e, cores, limit = record["start"], record["end"], record["cores"], record["limit"]
    own = record.get("own", 0.0)
    head = (f"Load average (1/5/15 min) at start {s[0]:.2f}/{s[1]:.2f}/{s[2]:.2f}, at end "
            f"{e[0]:.2f}/{e[1]:.2f}/{e[2]:.2f}, on {cores} cores")
    bound = f"at most {limit:.1f} ({BUSY_PER_CORE} per core) at the start and {limit + own:.1f} at the end " \
            f"(its own {own:g} threads included)"
    if record["trusted"]:
        return head + f": {bound}, a quiet machine."
    return (head + f": not {bound}, so the machine was busy and THESE TIMINGS "
            "CANNOT BE TRUSTED; rerun on an idle machine.")


def start_line(start, cores: int | None = None) -> str:
    """What a benchmark prints before it begins: the load now, and a warning if it is already too high."""
    cores = cores or os.cpu_count() or 1
    line = f"Load average (1/5/15 min) now {start[0]:.2f}/{start[1]:.2f}/{start[2]:.2f} on {cores} cores"
    if start[0] > BUSY_PER_CORE * cores:
        return line + f": above {BUSY_PER_CORE * cores:.1f}, busy: the timings of this run cannot be trusted."
    return line + "."


def cpu_snapshot() -> dict | None:
    """The machine's busy CPU seconds (all cores, from /proc/stat) and this process's own (all its
    threads), now; None where /proc/stat is missing (not Linux)."""
    try:
        with open("/proc/stat") as f:
            fields = [int(x) for x in f.readline().split()[1:]]
    except (OSError, ValueError):
        return None
    user, nice, system, idle, iowait, irq, softirq, steal = (fields + [0] * 8)[:8]  # guest time is inside user
    t = os.times()
    return {"busy_s": (user + nice + system + irq + softirq + steal) / os.sysconf("SC_CLK_TCK"),
            "own_s": t.user + t.system + t.children_user + t.children_system, "clock_s": t.elapsed}


def others_cpu(start: dict | None, end: dict | None) -> dict | None:
    """Cores that other programs (and the hypervisor's steal) kept busy on average between two
    snapshots: (machine busy − this process's CPU time) / wall time; quiet when at most OTHERS_MAX_CORES."""
    if start is None or end is None:
        return None
    wall = max(end["clock_s"] - start["clock_s"], 1e-9)
    others = max((end["busy_s"] - start["busy_s"]) - (end["own_s"] - start["own_s"]), 0.0) / wall
    return {"others_cores": round(others, 3), "limit_cores": OTHERS_MAX_CORES, "wall_s": round(wall, 1),
            "quiet": others <= OTHERS_MAX_CORES}


def trust_line(load: dict, use: dict | None) -> str:
    """One plain line: can these timings be trusted, and if not, why."""
    why = []
    if load["start"][0] > load["limit"]:
        why.append(f"the 1-minute load average was {load['start'][0]:.2f} at the start, above {load['limit']:.1f}")
    if load["end"][0] > load["limit"] + load.get("own", 0.0):
        why.append(f"{load['end'][0]:.2f} at the end, above {load['limit'] + load.get('own', 0.0):.1f}")
    if use is not None and not use["quiet"]:
        why.append(f"other programs kept {use['others_cores']:.2f} cores busy on average while it ran "
                   f"(at most {use['limit_cores']} allowed)")
    if why:
        return "Trustworthy: no (" + "; ".join(why) + "): rerun on an idle machine before quoting these numbers."
    seen = "other programs' CPU use not measured here" if use is None else \
        f"other programs used {use['others_cores']:.2f} cores on average"
    return (f"Trustworthy: yes (load average {load['start'][0]:.2f} at the start, {load['end'][0]:.2f} at the end; "
            f"{seen}).")


def add_out_argument(ap: argparse.ArgumentParser) -> None:
    ap.add_argument("--out", type=Path, default=RESULTS, metavar="DIR",
                    help="folder for the results files (default benchmarks/results/, the committed ones)")
