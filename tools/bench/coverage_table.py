#!/usr/bin/env python3
"""What kforge covers of each model: one row per `kforge optimize` run directory, from its
report.json — the targets it searched (their share of the forward, and each one's speedup over
eager where a GPU measured it), how many candidates compiled, and the hottest ops it skipped
with the reason. For models it was not tuned on
(examples/zoo.py), on any machine: without a GPU a run stops after compilation, which is all
this table reads.

    coverage_table.py RUN_DIR... [--skipped N] [--out FILE.md]
"""
import argparse
import json
import os
import sys


def ops_of(signature_or_op):
    """'aten::pow -> aten::mean' -> 'pow -> mean'."""
    return signature_or_op.replace("aten::", "")


def short_reason(reason):
    for cut in ("; use an LLM proposer", " (families:", " (an LLM proposer"):
        reason = reason.split(cut)[0]
    return (reason.replace("synth family ", "")
            .replace("no synthesizer family covers ", "no family: "))


def row(run_dir, skipped_n):
    with open(os.path.join(run_dir, "report.json")) as f:
        report = json.load(f)
    targets = report.get("targets", [])
    searched = []
    compiled = ok = 0
    for t in targets:
        speedup = t.get("speedup", 0)
        searched.append(f"{ops_of(t.get('op', '?'))} {100 * t.get('share', 0):.1f}%" +
                        (f" ({speedup:.2f}x eager)" if speedup > 0 else ""))
        for c in t.get("compiled_candidates", []):
            compiled += 1
            ok += c.get("compile_status") == "COMPILE_OK"
    covered = sum(t.get("share", 0) for t in targets)
    skipped = sorted(report.get("skipped", []), key=lambda s: -s.get("share", 0))[:skipped_n]
    skipped_text = "; ".join(
        f"{ops_of(s['op'])} {100 * s.get('share', 0):.1f}%: {short_reason(s.get('reason', ''))}"
        for s in skipped)
    return (f"| {report.get('model', {}).get('name', os.path.basename(run_dir))} "
            f"| {report.get('capture_device', '')} | {report.get('status', '')} "
            f"| {len(targets)}, {100 * covered:.1f}% | {'; '.join(searched)} | {ok} of {compiled} "
            f"| {skipped_text} |")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("runs", nargs="+", help="kforge optimize --out directories")
    parser.add_argument("--skipped", type=int, default=3, help="hottest skipped ops per model")
    parser.add_argument("--out", help="also write the table to this file")
    args = parser.parse_args()
    lines = ["| model | device | status | targets, share | searched | compiled | hottest skipped |",
             "|---|---|---|--:|---|--:|---|"]
    for run in args.runs:
        try:
            lines.append(row(run, args.skipped))
        except (OSError, ValueError, KeyError) as e:
            lines.append(f"| {os.path.basename(run.rstrip('/'))} | | no report: {e} | | | | |")
    text = "\n".join(lines) + "\n"
    sys.stdout.write(text)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text)


if __name__ == "__main__":
    main()
