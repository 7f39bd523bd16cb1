#!/usr/bin/env python3
"""One markdown table of the kernels in Nsight Compute text reports (`ncu` with the
SpeedOfLight, Occupancy, MemoryWorkloadAnalysis, LaunchStats and WarpStateStats sections, as
tools/gpu-steps/profile.sh runs it): per profiled launch its file, the config or NVTX range it
ran under, kernel, grid x block, duration, DRAM throughput, registers, achieved occupancy and
warp cycles per issued instruction — the numbers a profile is read for, side by side.

  ncu_summary.py FILE [FILE ...]
      FILE: a report profile.sh wrote (its first line `== CONFIG` names the config) or any
      `ncu` text output. A report with no profiled kernel (ncu or the program failed) is
      named under the table and makes the exit status 1; the others are still summarized.
"""
import argparse
import os
import re
import sys

# "  name (gx, gy, gz)x(bx, by, bz), Context 1, Stream 7, Device 0, CC 9.0"
KERNEL = re.compile(r"^  (\S.*?) \((\d+), (\d+), (\d+)\)x\((\d+), (\d+), (\d+)\), Context \d+")
METRIC = re.compile(r"^    (\S.*?)\s{2,}(\S+)\s+([\d.,]+)$")
NVTX_RANGE = re.compile(r"^\s+<([^>]*)>$")
TIME_UNITS = {"ns": 1e-3, "us": 1.0, "usecond": 1.0, "ms": 1e3, "msecond": 1e3}


def number(text):
    return float(text.replace(",", ""))


def parse(path):
    """The profiled launches of one report, in order: dicts of what the table shows."""
    with open(path, encoding="utf-8", errors="replace") as f:
        lines = f.read().splitlines()
    config = lines[0][3:].strip() if lines and lines[0].startswith("== ") else ""
    launches = []
    for line in lines:
        kernel = KERNEL.match(line)
        if kernel:
            grid = "x".join(g for g in kernel.group(2, 3, 4) if g != "1") or "1"
            block = "x".join(b for b in kernel.group(5, 6, 7) if b != "1") or "1"
            launches.append({"kernel": kernel.group(1), "grid": grid, "block": block,
                             "ranges": [], "metrics": {}})
            continue
        if not launches:
            continue
        launch = launches[-1]
        nvtx = NVTX_RANGE.match(line)
        if nvtx and not launch["metrics"]:
            if nvtx.group(1) != "default domain":
                launch["ranges"].append(nvtx.group(1))
            continue
        found = METRIC.match(line)
        if found:
            name, unit, value = found.groups()
            # The first of a name wins: Memory Throughput comes as % and then as bytes/s.
            key = (name, "bytes" if unit.endswith("byte/s") else unit)
            launch["metrics"].setdefault(key, (unit, number(value)))
    for launch in launches:
        launch["under"] = config or " / ".join(r.split(",", 1)[-1] for r in launch["ranges"])
    return launches


def metric(launch, name, unit):
    found = launch["metrics"].get((name, unit))
    return found[1] if found else None


def duration_us(launch):
    for (name, _), (unit, value) in launch["metrics"].items():
        if name == "Duration" and unit in TIME_UNITS:
            return value * TIME_UNITS[unit]
    return None


def cell(value, fmt):
    return "—" if value is None else fmt.format(value)


def short(name, width=48):
    return name if len(name) <= width else name[:width - 1] + "…"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("reports", nargs="+", help="ncu text reports")
    args = ap.parse_args(argv)
    rows, empty = [], []
    for path in args.reports:
        launches = parse(path)
        if not launches:
            empty.append(path)
        for launch in launches:
            rows.append((os.path.basename(path), launch))
    print("| report | config or NVTX range | kernel | grid x block | µs | DRAM % | regs | "
          "occupancy % | cycles per issue |")
    print("| --- | --- | --- | --- | ---: | ---: | ---: | ---: | ---: |")
    for report, launch in rows:
        print(f"| {report} | `{launch['under']}` | `{short(launch['kernel'])}` | "
              f"{launch['grid']} x {launch['block']} | {cell(duration_us(launch), '{:.2f}')} | "
              f"{cell(metric(launch, 'DRAM Throughput', '%'), '{:.1f}')} | "
              f"{cell(metric(launch, 'Registers Per Thread', 'register/thread'), '{:.0f}')} | "
              f"{cell(metric(launch, 'Achieved Occupancy', '%'), '{:.1f}')} | "
              f"{cell(metric(launch, 'Warp Cycles Per Issued Instruction', 'cycle'), '{:.1f}')} |")
    for path in empty:
        print(f"\nncu_summary: no profiled kernel in {path}: read its end for what ncu or the "
              "profiled program said")
    return 1 if empty else 0


if __name__ == "__main__":
    sys.exit(main())
