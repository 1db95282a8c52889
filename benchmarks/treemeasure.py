#!/usr/bin/env python3
"""Run one command and print, as one JSON line, what it cost, counting every process it starts.

``cudaship`` reads large wheels on worker processes (a fork server and its workers), which a plain
``getrusage(RUSAGE_CHILDREN)`` misses (the workers are the fork server's children, and the fork server is
never waited for by the command). So this script makes itself a child subreaper (Linux ``prctl``): every
descendant that outlives its parent is re-parented here and waited for, and ``RUSAGE_CHILDREN`` then holds
the CPU time of the whole tree. Memory is sampled every 5 ms from ``/proc/PID/smaps_rollup``: the peak of the
*sum* of the proportional set sizes (PSS) of all live processes of the tree, anonymous and file-backed pages
separately (a page shared by several processes, such as the fork server's pages its workers inherit, counts
once, split among them: the sum is the memory the command holds), the peak of the plain RSS sum (which counts
shared pages once per process), and the largest single process's peak (``ru_maxrss``).

Sampling memory disturbs what it measures: reading ``smaps_rollup`` walks a process's page tables under its
memory-map lock, which the workers' page faults then wait for, and listing ``/proc`` every 5 ms costs a good
part of a core on a 2-core machine (measured: the torch wheel's audit took 3.8-4.2 s under sampling and
2.6-2.8 s without). So memory is sampled only with ``--memory``; benchmarks time runs without it and measure
memory in a run of its own. Without ``--memory`` the memory fields are 0 except the largest single process.

Usage: python benchmarks/treemeasure.py [--memory] [--shell] COMMAND [ARG...]
Prints: {"wall_s", "cpu_s", "rc", "peak_mib" (PSS sum), "anon_mib", "file_mib", "largest_process_mib",
"rss_sum_mib", "processes", "stderr"}. Used by audit.py, scaling.py and inspect.py.
"""

from __future__ import annotations

import os
import sys

# Run as a script, this directory is sys.path[0]: benchmarks/inspect.py would shadow the standard ``inspect``.
_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.curdir) != _HERE]

import ctypes  # noqa: E402
import json  # noqa: E402
import resource  # noqa: E402
import subprocess  # noqa: E402
import threading  # noqa: E402
import time  # noqa: E402

_PR_SET_CHILD_SUBREAPER = 36


def _subreaper() -> None:
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    except (OSError, AttributeError):  # not Linux: the direct children are still counted
        pass


def _descendants(root: int) -> list[int]:
    """``root`` and every process below it (from /proc/*/stat parent links)."""
    parents: dict[int, int] = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as f:
                stat = f.read()
        except OSError:
            continue
        fields = stat[stat.rfind(b")") + 2 :].split()
        parents[int(name)] = int(fields[1])
    me = os.getpid()
    tree = {root}
    grew = True
    while grew:
        grew = False
        for pid, parent in parents.items():
            if pid not in tree and (parent in tree or (parent == me and pid != root)):
                tree.add(pid)
                grew = True
    return sorted(tree)


def _pss(pid: int) -> tuple[int, int, int]:
    """Proportional set size of ``pid`` in KiB: anonymous, file-backed (with shared memory), and plain RSS.
    A page shared by several processes (the fork server's, copied on write) counts once in all, split."""
    anon = file = rss = 0
    try:
        with open(f"/proc/{pid}/smaps_rollup") as f:
            for line in f:
                key, _, value = line.partition(":")
                if key == "Pss_Anon":
                    anon = int(value.split()[0])
                elif key in ("Pss_File", "Pss_Shmem"):
                    file += int(value.split()[0])
                elif key == "Rss":
                    rss = int(value.split()[0])
    except (OSError, ValueError, IndexError):
        pass
    return anon, file, rss


def main(argv: list[str]) -> None:
    memory = shell = False
    while argv[:1] in (["--memory"], ["--shell"]):
        memory |= argv[0] == "--memory"
        shell |= argv[0] == "--shell"
        argv = argv[1:]
    command = argv
    _subreaper()
    start = time.perf_counter()
    child = subprocess.Popen(
        " ".join(command) if shell else command,
        shell=shell,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    peak = {"total": 0, "anon": 0, "file": 0, "processes": 1}
    stop = threading.Event()

    def sample() -> None:
        while not stop.is_set():
            pids = _descendants(child.pid)
            anon = file = rss = 0
            for pid in pids:
                a, f, r = _pss(pid)
                anon += a
                file += f
                rss += r
            if anon + file > peak["total"]:
                peak.update(total=anon + file, anon=anon, file=file)
            peak["rss_sum"] = max(peak.get("rss_sum", 0), rss)
            peak["processes"] = max(peak["processes"], len(pids))
            stop.wait(0.005)

    sampler = threading.Thread(target=sample, daemon=True)
    if memory:
        sampler.start()
    _, stderr = child.communicate()
    wall = time.perf_counter() - start
    stop.set()
    if memory:
        sampler.join()
    while True:  # re-parented descendants (a fork server and its workers): wait for them too
        try:
            os.wait()
        except ChildProcessError:
            break
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    print(
        json.dumps(
            {
                "wall_s": wall,
                "cpu_s": usage.ru_utime + usage.ru_stime,
                "rc": child.returncode,
                "peak_mib": peak["total"] / 1024,
                "anon_mib": peak["anon"] / 1024,
                "file_mib": peak["file"] / 1024,
                "largest_process_mib": usage.ru_maxrss / 1024,
                "rss_sum_mib": peak.get("rss_sum", 0) / 1024,
                "processes": peak["processes"],
                "stderr": stderr.decode(errors="replace")[-300:],
            }
        )
    )


if __name__ == "__main__":
    main(sys.argv[1:])
