#!/usr/bin/env python3
"""Two sweeps of the same rows side by side, or the two values of one switch within a sweep.

Reads the --details TSVs `kforge-synth-sweep` writes (one per row: config, quick-pass verdict
and µs, ...) and compares quick-pass times config by config, so that a change to a kernel
source is judged on the same configs, not on whichever the time budget reached:

  compare_sweeps.py BEFORE_DIR AFTER_DIR [--by PARAM]
      per row: the configs that passed in both, the median of after / before over them (with
      --by, per value of PARAM: a path the change did not touch is the control), the best
      time of each
  compare_sweeps.py DIR --pair PARAM=A,B
      per row: the configs that differ only in PARAM (A against B), the median of B / A over
      those pairs, the best time of each side

A row's details may be split over shards (ROW.shard-I-of-N.tsv); they are read together.
"""
import argparse
import re
import statistics
import sys

from sweep_details import params, read_quick_times


def read_details(directory):
    """{row: {config: quick µs}} of the configs whose quick pass passed; exits when none did."""
    rows = {row: times for row, times in read_quick_times(directory, "compare_sweeps").items()
            if times}
    if not rows:
        sys.exit(f"{directory}: no --details TSVs with passing quick-pass lines "
                 "(pass the synth-sweep-details/ directory of a sweep)")
    return rows


def compare(before, after, by):
    print("| row | group | configs in both | median after/before | best before µs "
          "| best after µs |")
    print("| --- | --- | ---: | ---: | ---: | ---: |")
    for row in sorted(set(before) & set(after)):
        common = sorted(set(before[row]) & set(after[row]))
        groups = {"all": common}
        if by:
            groups = {}
            for config in common:
                groups.setdefault(f"{by}={params(config).get(by, '?')}", []).append(config)
        for group, configs in sorted(groups.items()):
            if not configs:
                continue
            ratio = statistics.median(after[row][c] / before[row][c] for c in configs)
            print(f"| {row} | {group} | {len(configs)} | {ratio:.4f} | "
                  f"{min(before[row][c] for c in configs):.3f} | "
                  f"{min(after[row][c] for c in configs):.3f} |")


def pair(details, param, a, b):
    print(f"| row | pairs | median {param}={b} / {param}={a} | best {a} µs | best {b} µs |")
    print("| --- | ---: | ---: | ---: | ---: |")
    for row, times in sorted(details.items()):
        sides = {a: {}, b: {}}
        for config, us in times.items():
            p = params(config)
            if p.get(param) in sides:
                rest = tuple(sorted((k, v) for k, v in p.items() if k != param))
                sides[p[param]][rest] = us
        keys = set(sides[a]) & set(sides[b])
        if not keys:
            continue
        ratio = statistics.median(sides[b][k] / sides[a][k] for k in keys)
        print(f"| {row} | {len(keys)} | {ratio:.4f} | {min(sides[a].values()):.3f} | "
              f"{min(sides[b].values()):.3f} |")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("dirs", nargs="+", help="BEFORE_DIR AFTER_DIR, or DIR with --pair")
    parser.add_argument("--by", help="group the two-sweep comparison by this parameter")
    parser.add_argument("--pair", help="PARAM=A,B: compare the two values within one sweep")
    args = parser.parse_args()
    if args.pair:
        m = re.fullmatch(r"(\w+)=([^,]+),([^,]+)", args.pair)
        if len(args.dirs) != 1 or not m:
            parser.error("--pair takes one details directory and PARAM=A,B (e.g. stream=0,1)")
        pair(read_details(args.dirs[0]), *m.groups())
    else:
        if len(args.dirs) != 2:
            parser.error("pass BEFORE_DIR AFTER_DIR (or one DIR with --pair PARAM=A,B)")
        compare(read_details(args.dirs[0]), read_details(args.dirs[1]), args.by)


if __name__ == "__main__":
    main()
