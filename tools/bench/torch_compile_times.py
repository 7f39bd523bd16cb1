#!/usr/bin/env python3
"""Eager and torch.compile times of the synthesizer sweep's anchor rows, for kforge-synth-sweep.

Reads the rows that `kforge-synth-sweep --emit-rows FILE` writes (aten op, schema arguments,
input shapes, dtypes and fills), calls each op through torch.ops.aten exactly as the worker's
reference does, and times eager and torch.compile (mode default, then
max-autotune-no-cudagraphs while the time budget lasts) the way the worker times candidates:
CUDA events around one call, the L2 flushed before every rep, eager and compiled interleaved
(alternating order), 10 estimate reps then enough for about a second (30..200), median.
Writes JSON: {"rows": {ID: {"eager_s", "compiled_s": {MODE: s}, "compile_wall_s": {MODE: s},
"note"}}, ...} that `kforge-synth-sweep --torch-times` joins into its table.

  torch_compile_times.py --rows-json ROWS --out TIMES [--rows ID,...] [--modes M,...]
                         [--time-budget-s S] [--check]

--check needs no GPU: it builds every row's call on the meta device and runs it there, which
proves the rows file and the argument mapping without timing anything.
"""

import argparse
import json
import statistics
import sys
import time

MODES = ("default", "max-autotune-no-cudagraphs")
FILLS = ("normal", "weight", "bias")


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rows-json", required=True, help="rows written by kforge-synth-sweep --emit-rows")
    p.add_argument("--out", help="where to write the times (JSON); required unless --check")
    p.add_argument("--rows", default="", help="comma-separated row ids (default: all)")
    p.add_argument("--modes", default=",".join(MODES),
                   help="torch.compile modes, in order of priority (default: %(default)s)")
    p.add_argument("--time-budget-s", type=float, default=150.0,
                   help="start no new compile after this many seconds; 0: no limit "
                        "(default: %(default)s)")
    p.add_argument("--min-reps", type=int, default=30)
    p.add_argument("--max-reps", type=int, default=200)
    p.add_argument("--seed", type=int, default=1234)
    p.add_argument("--check", action="store_true",
                   help="build and run every row on the meta device (no GPU) and exit")
    args = p.parse_args(argv)
    args.modes = [m for m in args.modes.split(",") if m]
    for m in args.modes:
        if m not in MODES:
            p.error(f"--modes: unknown mode {m!r}; choose from {', '.join(MODES)}")
    if not args.check and not args.out:
        p.error("--out is required (or pass --check)")
    if args.min_reps < 1 or args.max_reps < args.min_reps:
        p.error("--min-reps must be >= 1 and --max-reps >= --min-reps")
    return args


def load_rows(path, wanted):
    try:
        with open(path) as f:
            rows = json.load(f)
    except (OSError, json.JSONDecodeError) as e:
        sys.exit(f"--rows-json {path}: cannot read it ({e}); write it with "
                 "kforge-synth-sweep --emit-rows")
    if not isinstance(rows, list):
        sys.exit(f"--rows-json {path}: expected a JSON list of rows")
    for r in rows:
        for key in ("id", "op", "overload", "inputs", "args"):
            if key not in r:
                sys.exit(f"--rows-json {path}: row {r.get('id', '?')} lacks {key!r}")
        for i, t in enumerate(r["inputs"]):
            if t.get("fill") not in FILLS:
                sys.exit(f"--rows-json {path}: row {r['id']} input {i} has fill "
                         f"{t.get('fill')!r}; expected one of {FILLS}")
    if wanted:
        ids = [w for w in wanted.split(",") if w]
        known = {r["id"] for r in rows}
        unknown = [w for w in ids if w not in known]
        if unknown:
            sys.exit(f"--rows: unknown row(s) {', '.join(unknown)}; the file has "
                     f"{', '.join(sorted(known))}")
        rows = [r for r in rows if r["id"] in ids]
    return rows


def aten_op(torch, row):
    if not row["op"].startswith("aten::"):
        raise ValueError(f"row {row['id']}: op {row['op']} is not an aten op")
    packet = getattr(torch.ops.aten, row["op"][len("aten::"):])
    return getattr(packet, row["overload"] or "default")


def dtype_of(torch, name):
    table = {"FLOAT32": torch.float32, "FLOAT16": torch.float16, "BFLOAT16": torch.bfloat16,
             "FLOAT64": torch.float64, "INT64": torch.int64, "INT32": torch.int32}
    if name not in table:
        raise ValueError(f"dtype {name} is not handled")
    return table[name]


def make_inputs(torch, row, device, generator=None):
    tensors = []
    for spec in row["inputs"]:
        dtype = dtype_of(torch, spec["dtype"])
        if device == "meta":
            tensors.append(torch.empty(spec["sizes"], dtype=dtype, device="meta"))
            continue
        t = torch.randn(spec["sizes"], device=device, generator=generator)
        if spec["fill"] == "weight":
            t = t * 0.1 + 1
        elif spec["fill"] == "bias":
            t = t * 0.1
        tensors.append(t.to(dtype))
    return tensors


def make_call(torch, row):
    """fn(*inputs) calling the row's aten op with its arguments in schema order."""
    op = aten_op(torch, row)
    plan = [("input", a["input"]) if "input" in a else ("value", a.get("value"))
            for a in row["args"]]

    def call(*inputs):
        return op(*[inputs[v] if kind == "input" else v for kind, v in plan])

    return call


class Timer:
    """The worker's timing method: L2 flush, CUDA events around one call, interleaving."""

    def __init__(self, torch, min_reps, max_reps):
        self.torch = torch
        props = torch.cuda.get_device_properties(0)
        l2 = getattr(props, "L2_cache_size", 0) or (60 << 20)
        self.flush_buf = torch.empty(max(2 * l2, 8 << 20), dtype=torch.uint8, device="cuda")
        self.min_reps, self.max_reps = min_reps, max_reps
        self.flushes = 0

    def flush(self):
        self.flushes += 1
        self.flush_buf.fill_(self.flushes & 0xFF)

    def _reps(self, fns, inputs, reps):
        torch = self.torch
        names = list(fns)
        events = {n: [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
                      for _ in range(reps)] for n in names}
        for i in range(reps):
            order = names[i % len(names):] + names[:i % len(names)]
            for n in order:
                self.flush()
                start, end = events[n][i]
                start.record()
                fns[n](*inputs)
                end.record()
        torch.cuda.synchronize()
        return {n: [s.elapsed_time(e) * 1e-3 for s, e in events[n]] for n in names}

    def time(self, fns, inputs):
        for _ in range(3):
            for f in fns.values():
                f(*inputs)
        self.torch.cuda.synchronize()
        estimate = sum(statistics.median(v) for v in self._reps(fns, inputs, 10).values())
        reps = int(min(max(1.0 / max(estimate, 1e-7), self.min_reps), self.max_reps))
        return {n: statistics.median(v) for n, v in self._reps(fns, inputs, reps).items()}


def check(rows):
    import torch
    for row in rows:
        out = make_call(torch, row)(*make_inputs(torch, row, "meta"))
        shapes = [tuple(o.shape) for o in (out if isinstance(out, (tuple, list)) else [out])]
        print(f"{row['id']}: {row['op']}.{row['overload'] or 'default'} -> {shapes}")
    print(f"{len(rows)} rows build and run on the meta device (torch {torch.__version__})")


def measure(rows, args):
    import torch
    if not torch.cuda.is_available():
        sys.exit("torch_compile_times.py times on a CUDA GPU and this machine has none "
                 "(torch.cuda.is_available() is False); --check runs without one")
    begin = time.monotonic()
    timer = Timer(torch, args.min_reps, args.max_reps)
    out = {"torch": torch.__version__, "gpu": torch.cuda.get_device_name(0),
           "method": "CUDA events, L2 flushed before every rep, eager and compiled interleaved, "
                     "median", "rows": {}}
    for row in rows:
        out["rows"][row["id"]] = {"label": row.get("label", ""), "eager_s": 0.0,
                                  "compiled_s": {}, "compile_wall_s": {}, "note": ""}

    def over_budget():
        return args.time_budget_s > 0 and time.monotonic() - begin > args.time_budget_s

    # Every row in the first mode before any row in the next: the budget cuts the extras.
    for mode in args.modes:
        for row in rows:
            rec = out["rows"][row["id"]]
            if over_budget():
                rec["note"] = (rec["note"] + " " if rec["note"] else "") + \
                    f"{mode} skipped: --time-budget-s {args.time_budget_s:g} spent"
                continue
            gen = torch.Generator(device="cuda").manual_seed(args.seed)
            inputs = make_inputs(torch, row, "cuda", gen)
            eager = make_call(torch, row)
            # A fresh dynamo cache per row and mode, static shapes: one specialized graph each,
            # as a model would get (no recompile limit, no automatic dynamic shapes).
            torch._dynamo.reset()
            compiled = torch.compile(make_call(torch, row), mode=None if mode == "default" else mode,
                                     dynamic=False, fullgraph=True)
            try:
                t0 = time.monotonic()
                compiled(*inputs)
                torch.cuda.synchronize()
                rec["compile_wall_s"][mode] = round(time.monotonic() - t0, 2)
                times = timer.time({"eager": eager, "compiled": compiled}, inputs)
            except Exception as e:  # a compile failure is a result, not the end of the run
                rec["note"] = (rec["note"] + " " if rec["note"] else "") + \
                    f"{mode} failed: {type(e).__name__}: {str(e).splitlines()[0][:200]}"
                continue
            finally:
                del inputs
            if not rec["eager_s"]:
                rec["eager_s"] = times["eager"]
            rec["compiled_s"][mode] = times["compiled"]
            print(f"{row['id']}: eager {times['eager'] * 1e6:.1f} us, torch.compile {mode} "
                  f"{times['compiled'] * 1e6:.1f} us (compiled in "
                  f"{rec['compile_wall_s'][mode]:.1f} s)", flush=True)
            torch.cuda.empty_cache()
    out["wall_s"] = round(time.monotonic() - begin, 1)
    with open(args.out, "w") as f:
        json.dump(out, f, indent=2)
        f.write("\n")
    print(f"wrote {args.out} in {out['wall_s']} s")


def main(argv=None):
    args = parse_args(sys.argv[1:] if argv is None else argv)
    rows = load_rows(args.rows_json, args.rows)
    if args.check:
        check(rows)
    else:
        measure(rows, args)


if __name__ == "__main__":
    main()
