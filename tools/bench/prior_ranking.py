#!/usr/bin/env python3
"""How well the synthesizer's cost-model prior ranks configs against measured times.

Reads the priors `kforge-synth-sweep --rows ... --compile-only --priors FILE` writes (row,
config, prior µs) and the --details TSVs of a GPU sweep of the same rows (quick-pass µs), and
prints per row: Spearman's rank correlation of prior and measured time over the configs that
passed, how far the prior's first and best-of-five picks are from the fastest measured config,
the prior rank of that fastest config, and per kind of config (split mode, row cache) the
median of measured / prior: a kind far above the others is one the prior overrates.

A sweep recorded before a family gained a switch (a parameter one of whose values keeps the
kernel as it was: "0" for the elementwise `keep`, "1" for the ordered split's `lag_scale`)
names its configs without it: such a config takes the prior of the config that adds the new
switches at that value.

  prior_ranking.py PRIORS.tsv DETAILS_DIR
"""
import csv
import re
import statistics
import sys

from sweep_details import params, read_quick_times


def kind(config):
    m = re.search(r"split=(\d+);split_mode=(\w+)", config)
    mode = "nosplit" if not m or m.group(1) == "1" else m.group(2)
    cache = re.search(r"cache=(regs|smem)", config)
    return mode + ("+" + cache.group(1) if cache else "")


# The value of a later switch that keeps the kernel as it was; "0" for the others.
UNCHANGED = {"lag_scale": "1"}


def prior_of(row_priors, config):
    """The prior of `config`, or of the config that adds switches as they were (see the
    docstring)."""
    if config in row_priors:
        return row_priors[config]
    want = params(config)
    for c, us in row_priors.items():
        have = params(c)
        if all(have.get(k) == v for k, v in want.items()) and \
                all(v == UNCHANGED.get(k, "0") for k, v in have.items() if k not in want):
            return us
    return None


def ranks(xs):
    order = sorted(range(len(xs)), key=lambda i: xs[i])
    r = [0] * len(xs)
    for k, i in enumerate(order):
        r[i] = k
    return r


def main(argv):
    if len(argv) != 3:
        sys.exit(__doc__)
    priors = {}
    with open(argv[1]) as f:
        for row, config, us in csv.reader(f, delimiter="\t"):
            priors.setdefault(row, {})[config] = float(us)
    for row, measured_by_config in sorted(read_quick_times(argv[2], "prior_ranking").items()):
        points = []
        for config, measured in measured_by_config.items():
            prior = prior_of(priors.get(row, {}), config)
            if prior is not None:
                points.append((prior, measured, kind(config)))
        if len(points) < 5:
            print(f"{row}: {len(points)} configs with a prior and a quick pass; too few to rank")
            continue
        n = len(points)
        rp, rm = ranks([p for p, _, _ in points]), ranks([m for _, m, _ in points])
        rho = 1 - 6 * sum((a - b) ** 2 for a, b in zip(rp, rm)) / (n * (n * n - 1))
        best = min(m for _, m, _ in points)
        by_prior = sorted(points)
        top1 = by_prior[0][1] / best
        top5 = min(m for _, m, _ in by_prior[:5]) / best
        rank_of_best = next(i for i, (_, m, _) in enumerate(by_prior) if m == best)
        ratios = {}
        for p, m, k in points:
            ratios.setdefault(k, []).append(m / p)
        kinds = "  ".join(f"{k} {statistics.median(v):.2f} (n={len(v)})"
                          for k, v in sorted(ratios.items()))
        print(f"{row}: n={n} spearman={rho:.2f} fastest={best:.1f} µs; prior's first "
              f"{top1:.2f}x, best of its five {top5:.2f}x; fastest at prior rank {rank_of_best}; "
              f"measured/prior: {kinds}")


if __name__ == "__main__":
    main(sys.argv)
