#!/usr/bin/env python3
"""Where a GPU run's time goes, kernel by kernel, from Nsight Compute's CSV of one metric.

tools/gpu/check.sh's profile steps write the CSV (`ncu --csv --metrics gpu__time_duration.sum`, one row per launch,
in launch order, of a program that repeats one step at its end, as `lm_bench --steps 2` does); this finds the
step (the shortest run of at least MIN launches that repeats the run before it, kernel for kernel) and prints its kernels grouped
by name, the longest first, with their launch counts and shares of the step's summed kernel time.

    python3 tools/gpu/kernel_times.py FILE.csv [--top 25] [--min 100]
"""
import argparse
import collections
import csv
import re

UNITS = {"nsecond": 1e-9, "ns": 1e-9, "usecond": 1e-6, "us": 1e-6, "msecond": 1e-3, "ms": 1e-3, "second": 1.0, "s": 1.0}


def launches(path):
    """(kernel name, seconds) per launch, in launch order; ncu's log lines before the CSV are skipped."""
    with open(path, newline="") as f:
        lines = [line for line in f if line.startswith('"')]
    rows = []
    for row in csv.DictReader(lines):
        if row.get("Metric Name") != "gpu__time_duration.sum":
            continue
        value = float(row["Metric Value"].replace(",", ""))
        rows.append((int(row["ID"]), row["Kernel Name"], value * UNITS[row["Metric Unit"]]))
    rows.sort()
    return [(name, seconds) for _, name, seconds in rows]


def short(name):
    """A kernel's name without its return type, argument list and namespaces; its template arguments kept."""
    name = name.removeprefix("void ")
    if name.endswith(")"):  # drop the argument list: the last balanced parentheses
        depth = 0
        for i in range(len(name) - 1, -1, -1):
            depth += {")": 1, "(": -1}.get(name[i], 0)
            if depth == 0:
                name = name[:i]
                break
    return re.sub(r"stepformer::[A-Za-z_0-9]*::|\(anonymous namespace\)::|<unnamed>::", "", name)[:90]


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("csv")
    parser.add_argument("--top", type=int, default=25)
    parser.add_argument("--min", type=int, default=100, help="the fewest launches a step can have (a shorter repeat "
                        "is a few alike kernels in a row, not a step)")
    args = parser.parse_args()
    every = launches(args.csv)
    names = [name for name, _ in every]
    period = next((p for p in range(args.min, len(names) // 2 + 1) if names[-p:] == names[-2 * p : -p]), None)
    if period is None:
        raise SystemExit(f"{args.csv}: no repeated step at the end of {len(names)} launches")
    chosen = every[-period:]
    total = sum(seconds for _, seconds in chosen)
    by_kernel = collections.defaultdict(lambda: [0, 0.0])
    for name, seconds in chosen:
        by_kernel[short(name)][0] += 1
        by_kernel[short(name)][1] += seconds
    print(f"one step: {len(chosen)} of {len(every)} launches, {total * 1e3:.3f} ms of kernel time (launch gaps not counted)")
    print(f"{'kernel':90} {'launches':>8} {'ms':>8} {'share':>6}")
    for name, (count, seconds) in sorted(by_kernel.items(), key=lambda kv: -kv[1][1])[: args.top]:
        print(f"{name:90} {count:8d} {seconds * 1e3:8.3f} {100 * seconds / total:5.1f}%")


if __name__ == "__main__":
    main()
