"""kforge-synth-sweep --details TSVs as the bench scripts read them (prior_ranking.py,
compare_sweeps.py): one file per row (ROW.tsv, or ROW.shard-I-of-N.tsv per shard), a line per
config with its quick-pass verdict and µs."""
import csv
import glob
import os
import re
import sys


def params(config):
    """{name: value} of a config string "a=1;b=2"."""
    return dict(p.split("=", 1) for p in config.split(";") if p)


def read_quick_times(directory, tool):
    """{row: {config: quick µs}} of the configs whose quick pass passed, a row's shards read
    together. Exits, naming `tool` and the directory or file, when the directory holds no .tsv
    or a .tsv is not a details file."""
    files = sorted(glob.glob(os.path.join(directory, "*.tsv")))
    if not files:
        sys.exit(f"{tool}: {directory}: no --details TSVs (no .tsv files in {directory}; pass the "
                 "synth-sweep-details/ directory of a kforge-synth-sweep run)")
    rows = {}
    for path in files:
        row = re.sub(r"(\.shard-\d+-of-\d+)?\.tsv$", "", os.path.basename(path))
        times = rows.setdefault(row, {})
        with open(path, newline="") as f:
            reader = csv.DictReader(f, delimiter="\t")
            missing = {"config", "quick_verdict", "quick_us"} - set(reader.fieldnames or [])
            if missing:
                sys.exit(f"{tool}: {path} is not a kforge-synth-sweep --details file "
                         f"(no {', '.join(sorted(missing))} column)")
            for line in reader:
                us = float(line["quick_us"] or 0)
                if line["quick_verdict"] == "PASS" and us > 0:
                    times[line["config"]] = us
    return rows
