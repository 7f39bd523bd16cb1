#!/usr/bin/env python3
"""Markdown benchmark tables of kforge optimize runs: per target and per model (issue #6).

    target_table.py RUN [RUN...] [--torch-times TIMES.json ...] [--out TABLE.md]

For every RUN (the --out directory of `kforge optimize`) it reads:
  RUN/report.json         the targets: share, kforge's eager time and the winner's time (both
                          from the worker's interleaved timing, the winner re-timed in a fresh
                          process), the floor, iterations and verdict counts;
  torch times             eager and torch.compile of each target's single aten op on its exact
                          signature (tools/bench/torch_compile_times.py on the rows of
                          `kforge report RUN --torch-rows`), joined by target id: the files
                          given with --torch-times, else RUN/torch-times.json when present;
  RUN/check.json          the end-to-end check (tools/check-optimized --json-out): eager,
                          torch.compile, TorchScript and kforge latency, outputs, fallbacks;
  RUN/export/manifest.json  which targets the optimized model runs a kernel for: a winner that
                          `kforge export` left out (not faster than eager, not re-confirmed)
                          leaves the model on PyTorch's op there, and the table says so.
After the runs, one summary against issue 6's targets: on how many of the targets kforge
optimizes (exports a kernel for) it is at least as fast as torch.compile's faster mode, and
which targets whose largest tensor exceeds 64 MB reach 70% of the floor.
What a run lacks shows as "not timed" (a run without a GPU stops before timing), "no winner"
or "not checked", with a note saying why. A missing RUN, report.json or --torch-times file is
an error (exit 2) naming it.

The two eager columns come from different processes and methods (kforge's worker; the torch
script). When the torch script also timed kforge's kernel (torch_compile_times.py
--kforge-bundle: the exported kernel through the runtime, in the same interleaved loop as
eager and torch.compile), "kforge µs beside" holds that time and "vs torch.compile" is the
ratio of the two, measured side by side; otherwise it divides the script's torch.compile time
by the worker's re-confirmed time, and a note says so. For a launch-bound row (under 20 µs)
the script also times CUDA-graph replays (torch_compile_times.py), as the worker times such
targets: the torch.compile and beside cells add them ("graph"), and "vs torch.compile" is their
ratio, the single launches' ratio in its note.
"""

import argparse
import json
import os
import re
import sys

# Element sizes of the signature's dtype names (target_selection.cc's DtypeShort).
DTYPE_BYTES = {"f32": 4, "f16": 2, "bf16": 2, "f64": 8, "i64": 8, "i32": 4, "i16": 2, "i8": 1,
               "u8": 1, "b8": 1}
FLOOR_TENSOR_BYTES = 64e6  # issue 6: 70% of the floor for tensors above 64 MB
# Ratios within 1% of even are ties the side-by-side loop cannot order: one exported kernel's
# and torch.compile's default-mode times, re-measured in three fresh processes, spread by up
# to 0.7% (H100, docs/benchmarks/2026-12-05-session39.md), and such verdicts flipped between
# them. The strict count stays the headline; the summary says how many verdicts are that close.
TIE_BAND = 0.01


def fail(message):
    print(f"target_table.py: error: {message}", file=sys.stderr)
    sys.exit(2)


def read_json(path, what, fix):
    try:
        with open(path) as f:
            return json.load(f)
    except FileNotFoundError:
        fail(f"{what} {path} does not exist; {fix}")
    except (OSError, json.JSONDecodeError) as e:
        fail(f"{what} {path} is not readable JSON ({e}); {fix}")


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("runs", nargs="+", metavar="RUN", help="kforge optimize --out directories")
    p.add_argument("--torch-times", action="append", default=[], metavar="TIMES.json",
                   help="torch_compile_times.py output (repeatable; rows joined by target id). "
                        "Default: RUN/torch-times.json of each run, when present")
    p.add_argument("--out", help="write the markdown here (default: stdout)")
    return p.parse_args(argv)


def load_times(paths):
    rows = {}
    for path in paths:
        data = read_json(path, "--torch-times", "write it with tools/bench/torch_compile_times.py")
        if not isinstance(data, dict) or not isinstance(data.get("rows"), dict):
            fail(f"--torch-times {path} has no \"rows\" object; it is not "
                 "torch_compile_times.py output")
        for rid, rec in data["rows"].items():
            rows[rid] = dict(rec, gpu=data.get("gpu", ""))
    return rows


def us(seconds):
    return f"{seconds * 1e6:.1f}" if seconds and seconds > 0 else None


def ratio(a, b):
    return f"{a / b:.2f}x" if a and b and a > 0 and b > 0 else "-"


class Notes:
    """Footnotes of one table: each distinct text once, numbered."""

    def __init__(self, prefix):
        self.prefix = prefix  # footnote names are global in a markdown file
        self.texts = []

    def mark(self, text):
        if text not in self.texts:
            self.texts.append(text)
        return f"[^{self.prefix}-{self.texts.index(text) + 1}]"

    def render(self):
        return "".join(f"[^{self.prefix}-{i + 1}]: {t}\n" for i, t in enumerate(self.texts))


def cell(value, missing, notes):
    return value if value is not None else f"{missing[0]}{notes.mark(missing[1])}"


def torch_compile_best(rec):
    compiled = {m: s for m, s in (rec.get("compiled_s") or {}).items() if s and s > 0}
    if not compiled:
        return None, None
    mode = min(compiled, key=compiled.get)
    return compiled[mode], mode


def graph_times(rec):
    """(torch.compile s, kforge s, mode) per call of the CUDA-graph replays the torch script
    times launch-bound rows with, torch.compile's faster mode; None when it has none."""
    compiled = {m: s for m, s in (rec.get("graph_compiled_s") or {}).items() if s and s > 0}
    kforge = rec.get("graph_kforge_s") or {}
    modes = [m for m in compiled if kforge.get(m)]
    if not modes:
        return None
    mode = min(modes, key=compiled.get)
    return compiled[mode], kforge[mode], mode


def largest_tensor_bytes(signature):
    """Bytes of the largest tensor a target signature names ("bf16[1,8,2048,2048] ...")."""
    largest = 0
    for dtype, sizes in re.findall(r"\b([a-z]+[0-9]+)\[([0-9,]*)\]", signature or ""):
        n = DTYPE_BYTES.get(dtype, 0)
        for d in filter(None, sizes.split(",")):
            n *= int(d)
        largest = max(largest, n)
    return largest


def exported_targets(run):
    """Target ids the run's bundle has a kernel for; None when the run has no bundle."""
    path = os.path.join(run, "export", "manifest.json")
    if not os.path.isfile(path):
        return None
    manifest = read_json(path, "bundle manifest", "re-export it with kforge export RUN")
    return {k.get("target_id") for k in manifest.get("kernels") or []}


def not_exported_reason(t):
    eager_s, best_s = t.get("eager_s"), t.get("best_s")
    if eager_s and best_s and best_s >= eager_s:
        return (f"not exported: the winner is not faster than eager ({eager_s / best_s:.2f}x), "
                "so the optimized model runs PyTorch's op here")
    return ("not exported: RUN/export/manifest.json has no kernel for this target (kforge "
            "export's summary at the end of the run's log says why); the optimized model runs "
            "PyTorch's op here")


def target_table(run, report, times, have_times, notes, facts):
    """The run's per-target table lines; appends each timed target's comparison to `facts`."""
    timed = report.get("status") == "complete"
    exported = exported_targets(run)
    why_untimed = (f"the run's status is {report.get('status')!r} "
                   f"({report.get('message') or 'no message'}); kforge times targets only on "
                   "a CUDA GPU")
    lines = [
        "| target | op / signature | share | eager µs (kforge) | eager µs (torch) "
        "| torch.compile µs | kforge best µs | kforge µs beside | floor µs | vs eager "
        "| vs torch.compile | % of floor | iterations | verdicts |",
        "|---|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|---|",
    ]
    for t in report.get("targets", []):
        tid = t["target_id"]
        rec = times.get(tid)
        graph = None
        eager_k = us(t.get("eager_s")) if timed else None
        best = us(t.get("best_s")) if timed else None
        floor = us(t.get("floor_s"))
        if not timed:
            eager_k_cell = cell(None, ("not timed", why_untimed), notes)
            best_cell = cell(None, ("not timed", why_untimed), notes)
        else:
            eager_k_cell = cell(eager_k, ("-", "kforge recorded no eager time"), notes)
            why = t.get("error") or f"no candidate beat eager (stop: {t.get('stop_reason')})"
            best_cell = cell(best, ("no winner", why), notes)
            if best is not None and t.get("best_proposer"):
                params = " ".join(f"{k}={v}" for k, v in sorted((t.get("best_params") or {}).items()))
                winner = f"winner by {t['best_proposer']}" + (f": {params}" if params else "")
                best_cell += f" {notes.mark(winner)}"
        if rec is None:
            why = ("no torch-times row for this target: run kforge report RUN --torch-rows, "
                   "then torch_compile_times.py" if have_times else
                   "no --torch-times given and RUN/torch-times.json is absent")
            eager_t_cell = compile_cell = beside_cell = cell(None, ("not timed", why), notes)
            compiled_s = beside_s = None
        else:
            eager_t_cell = cell(us(rec.get("eager_s")),
                                ("failed", rec.get("note") or "the script timed nothing"), notes)
            compiled_s, mode = torch_compile_best(rec)
            compile_cell = cell(f"{compiled_s * 1e6:.1f} ({mode})" if compiled_s else None,
                                ("failed", rec.get("note") or "no torch.compile time"), notes)
            graph = graph_times(rec) if compiled_s else None
            if graph:
                compile_cell += f"; graph {graph[0] * 1e6:.2f} ({graph[2]})"
            if rec.get("inputs"):
                compile_cell += f" {notes.mark('torch times on ' + rec['inputs'] + ' inputs')}"
            beside_s = (rec.get("kforge_s") or {}).get(mode) if compiled_s else None
            beside_cell = cell(us(beside_s),
                               ("-", rec.get("note") or "the torch script did not time kforge's "
                                "kernel (torch_compile_times.py --kforge-bundle RUN/export)"),
                               notes)
            if graph:
                beside_cell += f"; graph {graph[1] * 1e6:.2f}"
        shipped = exported is None or tid in exported
        if timed and t.get("best_s") and not shipped:
            beside_cell = f"not exported{notes.mark(not_exported_reason(t))}"
        floor_cell = cell(floor, ("-", f"no floor: captured on {report.get('capture_device')}; "
                                       "a floor needs the GPU's measured bandwidth or peak and "
                                       "an op whose bytes or FLOPs are known"), notes)
        best_s = t.get("best_s") if timed else 0
        pct_floor = (f"{100 * t['floor_s'] / best_s:.0f}%"
                     if best_s and t.get("floor_s") else "-")
        verdicts = ", ".join(f"{k} {v}" for k, v in sorted((t.get("verdict_counts") or {}).items()))
        if timed and best_s:
            facts.append({"run": os.path.basename(os.path.normpath(run)), "target": tid[:12],
                          "op": t.get("op", ""), "signature": t.get("signature", ""),
                          "vs_compile": (graph[0] / graph[1] if graph else
                                         compiled_s / (beside_s or best_s) if compiled_s
                                         else None),
                          "exported": shipped,
                          "side_by_side": bool(beside_s and compiled_s),
                          "pct_floor": 100 * t["floor_s"] / best_s if t.get("floor_s") else None,
                          "bytes": largest_tensor_bytes(t.get("signature", ""))})
        if not timed or not compiled_s:
            vs_compile = "-"
        elif graph:
            vs_compile = ratio(graph[0], graph[1]) + notes.mark(
                "launch-bound (under 20 µs): CUDA-graph replays of 20 calls, the L2 flushed "
                "before every replay (the worker's timing of such targets), torch.compile and "
                "kforge's kernel alike, side by side; one launch each: "
                + (ratio(compiled_s, beside_s) if beside_s else "not timed"))
        elif beside_s:
            vs_compile = ratio(compiled_s, beside_s) + notes.mark(
                "side by side: torch.compile and kforge's kernel timed in one interleaved loop")
        else:
            vs_compile = ratio(compiled_s, best_s) + (notes.mark(
                "torch.compile (torch script) against kforge's worker time: two processes")
                if best_s else "")
        lines.append(
            f"| `{tid[:12]}` | {t.get('op', '')} {t.get('signature', '')} "
            f"| {100 * t.get('share', 0):.1f}% | {eager_k_cell} | {eager_t_cell} | {compile_cell} "
            f"| {best_cell} | {beside_cell} | {floor_cell} "
            f"| {ratio(t.get('eager_s'), best_s) if timed else '-'} "
            f"| {vs_compile} | {pct_floor} "
            f"| {t.get('iterations', 0)} | {verdicts or '-'} |")
    return lines


def end_to_end_table(run, notes):
    path = os.path.join(run, "check.json")
    if not os.path.isfile(path):
        why = ("check.txt is there but check.json is not: re-run tools/check-optimized with "
               "--json-out RUN/check.json" if os.path.isfile(os.path.join(run, "check.txt"))
               else "no RUN/check.json: tools/check-optimized RUN/export --json-out "
                    "RUN/check.json writes it (it needs an exported bundle)")
        return [f"End to end: not checked{notes.mark(why)}"]
    check = read_json(path, "check", "re-run tools/check-optimized --json-out")
    lat = check.get("latency") or {}

    def ms(key):
        v = lat.get(key)
        return f"{v:.3f}" if isinstance(v, (int, float)) and v > 0 else "-"

    fallbacks = check.get("unexpected_fallbacks") or {}
    lines = [
        f"End to end on {check.get('device', '?')}, median of {check.get('runs', '?')} runs:",
        "",
        "| eager ms | torch.compile ms | TorchScript ms | kforge ms | vs eager "
        "| vs torch.compile | outputs | unexpected fallbacks | check |",
        "|--:|--:|--:|--:|--:|--:|---|---|---|",
        f"| {ms('eager_ms')} | {ms('torch_compile_ms')} | {ms('torchscript_ms')} "
        f"| {ms('kforge_ms')} | {ratio(lat.get('eager_ms'), lat.get('kforge_ms'))} "
        f"| {ratio(lat.get('torch_compile_ms'), lat.get('kforge_ms'))} "
        f"| {'match' if check.get('outputs_match') else 'DIFFER'} "
        f"| {', '.join(f'{k} {v}' for k, v in fallbacks.items()) or 'none'} "
        f"| {'PASS' if check.get('passed') else 'FAIL'} |",
    ]
    if any(k in lat for k in ("kforge_graph_ms", "torchscript_graph_ms", "torch_compile_graph_ms")):
        lines += [
            "",
            "Each forward captured once as a CUDA graph and replayed (the host's per-op cost gone):",
            "",
            "| torch.compile ms | TorchScript ms | kforge ms | vs TorchScript | vs torch.compile |",
            "|--:|--:|--:|--:|--:|",
            f"| {ms('torch_compile_graph_ms')} | {ms('torchscript_graph_ms')} "
            f"| {ms('kforge_graph_ms')} "
            f"| {ratio(lat.get('torchscript_graph_ms'), lat.get('kforge_graph_ms'))} "
            f"| {ratio(lat.get('torch_compile_graph_ms'), lat.get('kforge_graph_ms'))} |",
        ]
    for n in check.get("notes") or []:
        lines.append(f"\nnote: {n}")
    return lines


def summary(facts):
    """Issue 6's two per-target targets, counted over every run's timed targets that the
    optimized model runs a kernel for."""
    lines = ["## Against issue 6's targets", ""]
    compared = [f for f in facts if f["vs_compile"] and f["exported"]]
    if compared:
        wins = [f for f in compared if f["vs_compile"] >= 1.0]
        side = sum(f["side_by_side"] for f in compared)
        lines.append(f"At least as fast as torch.compile (its faster mode): **{len(wins)} of "
                     f"{len(compared)}** targets ({100 * len(wins) / len(compared):.0f}%; the "
                     f"target is 80%), {side} of them compared side by side in one loop.")
        def tie(f):
            return abs(f["vs_compile"] - 1.0) < TIE_BAND

        close = [f for f in compared if tie(f)]
        if close:
            close_wins = sum(f["vs_compile"] >= 1.0 for f in close)
            lines.append(f"Within {100 * TIE_BAND:.0f}% of torch.compile, a tie the loop cannot "
                         f"order (a repeat's spread): {len(close)} of them, {close_wins} counted "
                         f"as at least as fast and {len(close) - close_wins} as behind.")
        for f in compared:
            if f["vs_compile"] < 1.0:
                within = f" (within {100 * TIE_BAND:.0f}%)" if tie(f) else ""
                lines.append(f"- behind{within}: {f['run']} `{f['target']}` {f['op']} "
                             f"{f['signature']}: {f['vs_compile']:.3f}x")
    else:
        lines.append("No exported target has both a kforge winner and a torch.compile time.")
    for f in facts:
        if not f["exported"]:
            lines.append(f"- not counted, left to PyTorch (no kernel exported): {f['run']} "
                         f"`{f['target']}` {f['op']} {f['signature']}")
    big = [f for f in facts
           if f["bytes"] > FLOOR_TENSOR_BYTES and f["pct_floor"] and f["exported"]]
    if big:
        reached = [f for f in big if f["pct_floor"] >= 70]
        lines += ["", f"Targets with a tensor over 64 MB at 70% of the floor or more: "
                      f"**{len(reached)} of {len(big)}**."]
        for f in big:
            lines.append(f"- {f['run']} `{f['target']}` {f['op']} {f['signature']} "
                         f"({f['bytes'] / 1e6:.0f} MB): {f['pct_floor']:.0f}%")
    return lines


def main(argv=None):
    args = parse_args(sys.argv[1:] if argv is None else argv)
    shared_times = load_times(args.torch_times)
    out = ["# kforge optimize: per-target and end-to-end times", ""]
    facts = []
    for k, run in enumerate(args.runs):
        if not os.path.isdir(run):
            fail(f"RUN {run} is not a directory; pass the --out directory of kforge optimize")
        report = read_json(os.path.join(run, "report.json"), "report",
                           "the run has not finished its capture: run kforge optimize on it")
        times, have_times = shared_times, bool(args.torch_times)
        own = os.path.join(run, "torch-times.json")
        if not args.torch_times and os.path.isfile(own):
            times, have_times = load_times([own]), True
        notes = Notes(f"m{k + 1}")
        model = report.get("model") or {}
        out += [f"## {model.get('name') or 'model'} (`{os.path.basename(os.path.normpath(run))}`)",
                "",
                f"Run `{run}`: status {report.get('status')}, GPU {report.get('gpu') or 'none'}, "
                f"proposer {report.get('proposer')}, "
                f"{report.get('iterations_per_target')} iterations per target, "
                f"estimated forward speedup {report.get('estimated_forward_speedup', 1):.3f}x "
                "(from the capture's time shares).", ""]
        out += target_table(run, report, times, have_times, notes, facts)
        out += [""]
        out += end_to_end_table(run, notes)
        out += ["", notes.render()]
    out += summary(facts)
    text = "\n".join(out).rstrip() + "\n"
    if args.out:
        try:
            with open(args.out, "w") as f:
                f.write(text)
        except OSError as e:
            fail(f"--out {args.out}: cannot write it ({e})")
        print(f"wrote {args.out} ({len(args.runs)} models)")
    else:
        sys.stdout.write(text)


if __name__ == "__main__":
    main()
