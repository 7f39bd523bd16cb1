#!/usr/bin/env python3
"""Eager and torch.compile times of single aten ops: sweep anchor rows, optimize targets.

Reads rows (aten op, schema arguments, input shapes, dtypes and fills) written by
`kforge-synth-sweep --emit-rows FILE` or `kforge report RUN --torch-rows FILE` (common/
torch_rows.h), calls each op through torch.ops.aten exactly as the worker's reference does
(arguments matched to the op's schema by name, ScalarType codes as dtypes), and times eager
and torch.compile (mode default, then max-autotune-no-cudagraphs while the time budget
lasts). A row with "inputs_file" (`kforge report --torch-inputs`) is timed on the target's
captured inputs (a torch.save'd dict by input name); the others on random inputs drawn by
their fills. Writes JSON: {"rows": {ID: {"eager_s", "compiled_s": {MODE: s},
"compile_wall_s": {MODE: s}, "kforge_s": {MODE: s}, "inputs", "note"}}, ...} that
`kforge-synth-sweep --torch-times` and tools/bench/target_table.py join into their tables.

With --kforge-bundle (an exported bundle: `kforge export`, or RUN/export of `kforge optimize`)
and --kforge-lib (libkforge_runtime.so), a row whose target has a kernel in the bundle also
times that kernel, called as the optimized model calls it (torch.ops.kforge.run), in the same
interleaved loop as eager and each torch.compile mode: "kforge_s" is then a time measured side
by side with them, by one method in one process. The runtime's counters prove each timed call
launched the kernel; a row whose kernel falls back (its guards refuse the inputs) gets no
kforge time and a note with the reason, never the fallback's time.

Timing method (the worker's, see DESIGN.md): CUDA events around one call, the L2 flushed
before every rep, eager and compiled interleaved (alternating order), 10 estimate reps then
enough for about a second (30..200), median. One addition makes the events honest for ops of
a few microseconds: a rep's start event sits right after its L2 flush, so if the GPU finishes
the flush before the CPU has launched the op (the compiled function's Python wrapper and
guards take tens of microseconds), the idle gap lands inside start..end and is counted as the
op's time. So the GPU is made to run behind the CPU: each batch of reps (at most
--batch-reps per function) starts with torch.cuda._sleep(cycles), a spin kernel long enough
to cover the CPU's enqueueing of the whole batch — cycles = 2 x (measured CPU seconds per
rep, all functions) x batch + 200 us, converted with the spin kernel's measured cycles per
second. While the GPU spins the CPU queues every flush, event and call of the batch, so each
rep's events bracket only GPU work. After queueing, an event recorded behind the spin must
still be pending; if it is not, the spin was too short: the batch is discarded and retried
with twice the cycles (up to 3 times; a batch that stays uncovered is kept and counted in the
row's "uncovered_batches").

Launch-bound rows (the faster function under 20 us) are also timed in the worker's second
mode (DESIGN.md, services/worker/evaluator_cuda_backend.cc): each function's 20 calls captured
in one CUDA graph, the graph replayed with the L2 flushed before every replay, time per call
= replay time / 20, every function alike, interleaved. One launch of a kernel of a few
microseconds is mostly launch latency and cold code; in a model the op runs among others,
which is what the replays measure. They go to "graph_eager_s", "graph_compiled_s": {MODE: s}
and "graph_kforge_s": {MODE: s}; a function that cannot be captured leaves a note instead.

  torch_compile_times.py --rows-json ROWS --out TIMES [--rows ID,...] [--modes M,...]
                         [--time-budget-s S] [--batch-reps N] [--check | --profile]
                         [--kforge-bundle DIR --kforge-lib LIB]

--check needs no GPU: it builds every row's call on the meta device and runs it there (rows
with captured inputs load them and check their shapes and dtypes first), which proves the rows
file and the argument mapping without timing anything; with --kforge-bundle it also names
each row's kernel and calls it once on the CPU, where the runtime must fall back (cpu_tensor).

--profile times nothing: it is for Nsight Compute (`ncu --profile-from-start off --nvtx`, as
tools/gpu-steps/profile.sh runs it), to see what torch.compile's kernels do that kforge's do not.
Per row and mode every function (eager and the bundle's kernel in the first mode only) is
compiled and warmed up outside the profiler's range (torch.compile's autotuning benchmarks stay
out of it), then called once inside a cudaProfilerStart/Stop range under an NVTX range named
ROW/FUNCTION[/MODE].
"""

import argparse
import json
import os
import statistics
import sys
import time

MODES = ("default", "max-autotune-no-cudagraphs")
LAUNCH_BOUND_S = 20e-6  # the worker's kLaunchBoundSeconds: below it, CUDA-graph replays too
GRAPH_LAUNCHES = 20     # calls per captured graph (the worker's kGraphLaunches)
FILLS = ("normal", "weight", "bias")
# c10::ScalarType codes as the capture records a dtype argument (an int).
SCALAR_TYPES = {0: "uint8", 1: "int8", 2: "int16", 3: "int32", 4: "int64", 5: "float16",
                6: "float32", 7: "float64", 9: "complex64", 10: "complex128", 11: "bool",
                15: "bfloat16"}


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rows-json", required=True,
                   help="rows written by kforge-synth-sweep --emit-rows or kforge report "
                        "--torch-rows")
    p.add_argument("--out", help="where to write the times (JSON); required unless --check")
    p.add_argument("--rows", default="", help="comma-separated row ids (default: all)")
    p.add_argument("--modes", default=",".join(MODES),
                   help="torch.compile modes, in order of priority (default: %(default)s)")
    p.add_argument("--time-budget-s", type=float, default=150.0,
                   help="start no new compile after this many seconds; 0: no limit "
                        "(default: %(default)s)")
    p.add_argument("--min-reps", type=int, default=30)
    p.add_argument("--max-reps", type=int, default=200)
    p.add_argument("--batch-reps", type=int, default=25,
                   help="reps per function queued behind one GPU spin (bounds the launch "
                        "queue; default: %(default)s)")
    p.add_argument("--seed", type=int, default=1234)
    p.add_argument("--check", action="store_true",
                   help="build and run every row on the meta device (no GPU) and exit")
    p.add_argument("--profile", action="store_true",
                   help="call each function once inside a profiler range (for ncu "
                        "--profile-from-start off) after warming it up outside, and exit")
    p.add_argument("--kforge-bundle", metavar="DIR",
                   help="an exported kforge bundle: rows whose target has a kernel in it time "
                        "that kernel beside eager and torch.compile (needs --kforge-lib)")
    p.add_argument("--kforge-lib", metavar="LIB", help="libkforge_runtime.so, for --kforge-bundle")
    args = p.parse_args(argv)
    if bool(args.kforge_bundle) != bool(args.kforge_lib):
        p.error("--kforge-bundle and --kforge-lib go together: the bundle's kernels run "
                "through the runtime library")
    if args.kforge_bundle and not os.path.isfile(os.path.join(args.kforge_bundle, "manifest.json")):
        p.error(f"--kforge-bundle {args.kforge_bundle} has no manifest.json; pass the --out "
                "directory of kforge export (or RUN/export of kforge optimize)")
    if args.kforge_lib and not os.path.isfile(args.kforge_lib):
        p.error(f"--kforge-lib {args.kforge_lib} does not exist; build the kforge_runtime "
                "target (build/lib/libkforge_runtime.so)")
    args.modes = [m for m in args.modes.split(",") if m]
    for m in args.modes:
        if m not in MODES:
            p.error(f"--modes: unknown mode {m!r}; choose from {', '.join(MODES)}")
    if args.check and args.profile:
        p.error("--check and --profile exclude each other: --check needs no GPU, --profile "
                "runs the rows on one")
    if not args.check and not args.profile and not args.out:
        p.error("--out is required (or pass --check or --profile)")
    if args.min_reps < 1 or args.max_reps < args.min_reps:
        p.error("--min-reps must be >= 1 and --max-reps >= --min-reps")
    if args.batch_reps < 1:
        p.error("--batch-reps must be >= 1")
    return args


def load_rows(path, wanted):
    try:
        with open(path) as f:
            rows = json.load(f)
    except (OSError, json.JSONDecodeError) as e:
        sys.exit(f"--rows-json {path}: cannot read it ({e}); write it with "
                 "kforge-synth-sweep --emit-rows or kforge report RUN --torch-rows")
    if not isinstance(rows, list):
        sys.exit(f"--rows-json {path}: expected a JSON list of rows")
    for r in rows:
        for key in ("id", "op", "inputs") + (() if "chain" in r else ("overload", "args")):
            if key not in r:
                sys.exit(f"--rows-json {path}: row {r.get('id', '?')} lacks {key!r}")
        for n, node in enumerate(r.get("chain", [])):
            for key in ("op", "overload", "args"):
                if key not in node:
                    sys.exit(f"--rows-json {path}: row {r['id']} chain node {n} lacks {key!r}")
        for i, t in enumerate(r["inputs"]):
            if t.get("fill") not in FILLS:
                sys.exit(f"--rows-json {path}: row {r['id']} input {i} has fill "
                         f"{t.get('fill')!r}; expected one of {FILLS}")
        if "inputs_file" in r:
            if not os.path.isfile(r["inputs_file"]):
                sys.exit(f"--rows-json {path}: row {r['id']} names inputs_file "
                         f"{r['inputs_file']}, which does not exist; re-run kforge report "
                         "--torch-inputs, or drop inputs_file to time on random inputs")
            if len(r.get("input_names", [])) != len(r["inputs"]):
                sys.exit(f"--rows-json {path}: row {r['id']} has inputs_file but "
                         f"{len(r.get('input_names', []))} input_names for "
                         f"{len(r['inputs'])} inputs")
    if wanted:
        ids = [w for w in wanted.split(",") if w]
        known = {r["id"] for r in rows}
        unknown = [w for w in ids if w not in known]
        if unknown:
            sys.exit(f"--rows: unknown row(s) {', '.join(unknown)}; the file has "
                     f"{', '.join(sorted(known))}")
        rows = [r for r in rows if r["id"] in ids]
    return rows


def aten_op(torch, row_id, node):
    if not node["op"].startswith("aten::"):
        raise ValueError(f"row {row_id}: op {node['op']} is not an aten op")
    packet = getattr(torch.ops.aten, node["op"][len("aten::"):])
    return getattr(packet, node["overload"] or "default")


def dtype_of(torch, name):
    table = {"FLOAT32": torch.float32, "FLOAT16": torch.float16, "BFLOAT16": torch.bfloat16,
             "FLOAT64": torch.float64, "INT64": torch.int64, "INT32": torch.int32,
             "INT16": torch.int16, "INT8": torch.int8, "UINT8": torch.uint8, "BOOL": torch.bool}
    if name not in table:
        raise ValueError(f"dtype {name} is not handled")
    return table[name]


def dense_strides(sizes):
    strides, step = [], 1
    for n in reversed(sizes):
        strides.insert(0, step)
        step *= max(n, 1)
    return strides


def captured_inputs(torch, row, device):
    """The row's captured tensors in input order, checked against its signature."""
    data = torch.load(row["inputs_file"], map_location="cpu" if device == "meta" else device,
                      weights_only=True)
    if isinstance(data, torch.Tensor):
        data = [data]
    if isinstance(data, dict):
        missing = [n for n in row["input_names"] if n not in data]
        if missing:
            raise ValueError(f"row {row['id']}: {row['inputs_file']} lacks input(s) "
                             f"{', '.join(missing)} (it holds {', '.join(map(str, data))})")
        tensors = [data[n] for n in row["input_names"]]
    else:
        tensors = list(data)
        if len(tensors) != len(row["inputs"]):
            raise ValueError(f"row {row['id']}: {row['inputs_file']} holds {len(tensors)} "
                             f"tensors for {len(row['inputs'])} inputs")
    out = []
    for i, (t, spec) in enumerate(zip(tensors, row["inputs"])):
        dtype = dtype_of(torch, spec["dtype"])
        if list(t.shape) != list(spec["sizes"]) or t.dtype != dtype:
            raise ValueError(f"row {row['id']}: captured input {i} is {list(t.shape)} {t.dtype}, "
                             f"the row says {spec['sizes']} {dtype}; re-run kforge report")
        if device == "meta":
            t = torch.empty_strided(t.shape, t.stride(), dtype=t.dtype, device="meta")
        out.append(t)
    return out


def make_inputs(torch, row, device, generator=None):
    if "inputs_file" in row:
        return captured_inputs(torch, row, device)
    tensors = []
    for spec in row["inputs"]:
        dtype = dtype_of(torch, spec["dtype"])
        sizes = spec["sizes"]
        strides = spec.get("strides") or dense_strides(sizes)
        if device == "meta":
            tensors.append(torch.empty_strided(sizes, strides, dtype=dtype, device="meta"))
            continue
        if dtype.is_floating_point:
            t = torch.randn(sizes, device=device, generator=generator)
            if spec["fill"] == "weight":
                t = t * 0.1 + 1
            elif spec["fill"] == "bias":
                t = t * 0.1
        else:  # indices and masks: small non-negative values valid for most index arguments
            t = torch.randint(0, 2, sizes, device=device, generator=generator)
        t = t.to(dtype)
        if list(strides) != dense_strides(sizes):  # the signature's layout, values copied in
            t = torch.empty_strided(sizes, strides, dtype=dtype, device=device).copy_(t)
        tensors.append(t)
    return tensors


def make_call(torch, row):
    """fn(*inputs) calling the row's aten op — or, for a chain, each op in turn on the row's
    inputs and the earlier ops' outputs — with its arguments matched to the op's schema."""
    calls = [node_call(torch, row["id"], node) for node in row.get("chain", [row])]

    def call(*inputs):
        outputs = []
        for c in calls:
            outputs.append(c(inputs, outputs))
        return outputs[-1]

    return call


def node_call(torch, row_id, node):
    """fn(inputs, outputs) calling one aten op of a row: arguments from the row's inputs, the
    outputs of the nodes before it, or values."""
    op = aten_op(torch, row_id, node)
    given = {a["name"]: a for a in node["args"]}
    formal = op._schema.arguments
    unknown = sorted(set(given) - {a.name for a in formal})
    if unknown:
        raise ValueError(f"row {row_id}: argument(s) {', '.join(unknown)} are not in the "
                         f"schema {op._schema}")
    plan, keyword = [], False  # (keyword name or None, (kind, index or value))
    for a in formal:
        if a.name not in given:
            if not a.has_default_value():
                raise ValueError(f"row {row_id}: required argument {a.name!r} of "
                                 f"{op._schema} is missing")
            keyword = True  # later arguments go by name past the defaulted one
            continue
        g = given[a.name]
        if "input" in g:
            entry = ("input", g["input"])
        elif "node" in g:
            entry = ("node", g["node"])
        else:
            v = g.get("value")
            if isinstance(v, int) and not isinstance(v, bool) and "ScalarType" in str(a.type):
                if v not in SCALAR_TYPES:
                    raise ValueError(f"row {row_id}: argument {a.name!r} is ScalarType "
                                     f"code {v}, which this script does not map")
                v = getattr(torch, SCALAR_TYPES[v])
            entry = ("value", v)
        plan.append((a.name if keyword or a.kwarg_only else None, entry))

    def call(inputs, outputs):
        args, kwargs = [], {}
        for name, (kind, v) in plan:
            value = inputs[v] if kind == "input" else outputs[v] if kind == "node" else v
            if name is None:
                args.append(value)
            else:
                kwargs[name] = value
        return op(*args, **kwargs)

    return call


class Timer:
    """The worker's timing method (L2 flush, CUDA events around one call, interleaving) with
    the GPU held behind the CPU by a spin kernel per batch (see the module docstring)."""

    def __init__(self, torch, min_reps, max_reps, batch_reps):
        self.torch = torch
        props = torch.cuda.get_device_properties(0)
        l2 = getattr(props, "L2_cache_size", 0) or (60 << 20)
        self.flush_buf = torch.empty(max(2 * l2, 8 << 20), dtype=torch.uint8, device="cuda")
        # The worker's flush (services/worker/l2_flush.h): a write of twice L2, then a read of
        # another buffer of twice L2, so that the timed call writes none of the flush's lines back.
        self.clean_buf = torch.ones(self.flush_buf.numel() // 4, device="cuda")
        self.clean_sum = torch.empty((), device="cuda")
        self.min_reps, self.max_reps, self.batch_reps = min_reps, max_reps, batch_reps
        self.flushes = 0
        self.cycles_per_s = self._calibrate_sleep()

    def _calibrate_sleep(self):
        """Cycles per second of torch.cuda._sleep (the SM clock it spins on)."""
        torch = self.torch
        cycles = 20_000_000
        torch.cuda._sleep(1000)  # load the kernel
        best = None
        for _ in range(3):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            torch.cuda._sleep(cycles)
            end.record()
            end.synchronize()
            s = start.elapsed_time(end) * 1e-3
            best = s if best is None else min(best, s)
        return cycles / max(best, 1e-6)

    def flush(self):
        self.flushes += 1
        self.flush_buf.fill_(self.flushes & 0xFF)
        self.torch.sum(self.clean_buf, dim=0, out=self.clean_sum)

    def _enqueue(self, fns, names, inputs, first, count, events):
        for i in range(first, first + count):
            order = names[i % len(names):] + names[:i % len(names)]
            for n in order:
                self.flush()
                start, end = events[n][i]
                start.record()
                fns[n](*inputs)
                end.record()

    def _reps(self, fns, inputs, reps, cpu_per_rep):
        torch = self.torch
        names = list(fns)
        events = {n: [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
                      for _ in range(reps)] for n in names}
        done = 0
        while done < reps:
            count = min(self.batch_reps, reps - done)
            covered = False
            for attempt in range(3):
                cycles = int((2.0 * cpu_per_rep * count * (2 ** attempt) + 200e-6)
                             * self.cycles_per_s)
                torch.cuda.synchronize()
                spun = torch.cuda.Event()
                torch.cuda._sleep(cycles)
                spun.record()
                t0 = time.perf_counter()
                self._enqueue(fns, names, inputs, done, count, events)
                queued_s = time.perf_counter() - t0
                covered = not spun.query()  # the GPU still spins: every rep was queued first
                cpu_per_rep = max(cpu_per_rep, queued_s / count)
                if covered:
                    break
            if not covered:
                self.uncovered_batches += 1
            done += count
        torch.cuda.synchronize()
        return {n: [s.elapsed_time(e) * 1e-3 for s, e in events[n]] for n in names}, cpu_per_rep

    def time_graphs(self, fns, inputs, launches=GRAPH_LAUNCHES):
        """({name: median seconds per call}, uncovered batches) of CUDA-graph replays: each
        function's `launches` calls captured in one graph, the L2 flushed before each replay."""
        torch = self.torch
        graphs = {}
        for name, f in fns.items():
            f(*inputs)  # warm: nothing to compile or load inside the capture
            torch.cuda.synchronize()
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph):
                for _ in range(launches):
                    f(*inputs)
            graphs[name] = graph
        times, uncovered = self.time({n: g.replay for n, g in graphs.items()}, ())
        return {n: t / launches for n, t in times.items()}, uncovered

    def time(self, fns, inputs):
        """{name: median seconds}, and how many batches the spin failed to cover."""
        torch = self.torch
        self.uncovered_batches = 0
        for _ in range(3):
            for f in fns.values():
                f(*inputs)
        torch.cuda.synchronize()
        # The CPU's cost of queueing one rep of every function, with the GPU not in the way.
        t0 = time.perf_counter()
        for _ in range(5):
            for f in fns.values():
                self.flush()
                f(*inputs)
        cpu_per_rep = (time.perf_counter() - t0) / 5
        torch.cuda.synchronize()
        first, cpu_per_rep = self._reps(fns, inputs, 10, cpu_per_rep)
        estimate = sum(statistics.median(v) for v in first.values())
        reps = int(min(max(1.0 / max(estimate, 1e-7), self.min_reps), self.max_reps))
        times, _ = self._reps(fns, inputs, reps, cpu_per_rep)
        return {n: statistics.median(v) for n, v in times.items()}, self.uncovered_batches


class KforgeKernels:
    """The bundle's kernels, called as the optimized model calls them, with the runtime's
    counters telling a launch from a fallback."""

    def __init__(self, torch, bundle, lib):
        self.torch = torch
        torch.ops.load_library(os.path.abspath(lib))
        self.bundle = os.path.abspath(bundle)
        self.bundle_id = torch.ops.kforge.load_bundle(self.bundle)
        with open(os.path.join(self.bundle, "manifest.json")) as f:
            kernels = json.load(f).get("kernels", [])
        self.by_target = {k["target_id"]: k["id"] for k in kernels}

    def call(self, row):
        """fn(*inputs) running the row's kernel, or None when the bundle has none for it."""
        kernel_id = self.by_target.get(row["id"])
        if kernel_id is None:
            return None
        run = self.torch.ops.kforge.run

        def call(*inputs):
            return run(self.bundle_id, self.bundle, [kernel_id], list(inputs))

        call.kernel_id = kernel_id
        return call

    def counts(self, kernel_id):
        """(launches, {reason: fallbacks}) of one kernel so far."""
        ops = self.torch.ops.kforge
        launches = dict(ops.launch_counts()).get(kernel_id, 0)
        prefix = kernel_id + ":"
        fallbacks = {k[len(prefix):]: v for k, v in dict(ops.fallback_counts()).items()
                     if k.startswith(prefix)}
        return launches, fallbacks

    def launched(self, fn, calls):
        """(calls()'s result, None) when every call of `fn` in it launched its kernel, else
        (result, why not: the fallback reasons counted)."""
        before, fell_before = self.counts(fn.kernel_id)
        result = calls()
        after, fell_after = self.counts(fn.kernel_id)
        fell = {r: n - fell_before.get(r, 0) for r, n in fell_after.items()
                if n > fell_before.get(r, 0)}
        if fell:
            return result, "kforge kernel %s fell back (%s)" % (
                fn.kernel_id, ", ".join(f"{r} x{n}" for r, n in sorted(fell.items())))
        if after == before:
            return result, f"kforge kernel {fn.kernel_id} never launched"
        return result, None


def compile_call(torch, row, mode):
    """torch.compile of the row's call in `mode`, with a fresh dynamo cache and static shapes:
    one specialized graph per row and mode, as a model would get (no recompile limit, no
    automatic dynamic shapes)."""
    torch._dynamo.reset()
    return torch.compile(make_call(torch, row), mode=None if mode == "default" else mode,
                         dynamic=False, fullgraph=True)


def check(rows, args):
    import torch
    kforge = (KforgeKernels(torch, args.kforge_bundle, args.kforge_lib) if args.kforge_bundle
              else None)
    for row in rows:
        out = make_call(torch, row)(*make_inputs(torch, row, "meta"))
        shapes = [tuple(o.shape) for o in (out if isinstance(out, (tuple, list)) else [out])]
        source = "captured inputs" if "inputs_file" in row else "random inputs"
        name = row["op"] if "chain" in row else f"{row['op']}.{row['overload'] or 'default'}"
        print(f"{row['id']}: {name} -> {shapes} ({source})")
        fn = kforge.call(row) if kforge else None
        if fn is not None:
            inputs = make_inputs(torch, row, "cpu")
            _, why = kforge.launched(fn, lambda: fn(*inputs))
            print(f"{row['id']}: " + (why or f"kforge kernel {fn.kernel_id} launched")
                  + " on the CPU")
    print(f"{len(rows)} rows build and run on the meta device (torch {torch.__version__})")


def time_graph_mode(timer, kforge, fns, inputs, note):
    """Timer.time_graphs of `fns`, leaving out (with a note) a function whose calls cannot be
    captured or whose kforge kernel fell back while captured (replays run what was captured)."""
    kernel = fns.get("kforge")
    try:
        if kernel is None:
            return timer.time_graphs(fns, inputs)
        (times, uncovered), why = kforge.launched(kernel, lambda: timer.time_graphs(fns, inputs))
    except Exception as e:
        note(f"no CUDA-graph times: {type(e).__name__}: {(str(e).splitlines() or [''])[0][:200]}")
        return {}, 0
    if why:
        note(why + " while captured in a CUDA graph: its graph time is left out")
        times.pop("kforge")
    return times, uncovered


def measure(rows, args):
    import torch
    if not torch.cuda.is_available():
        sys.exit("torch_compile_times.py times on a CUDA GPU and this machine has none "
                 "(torch.cuda.is_available() is False); --check runs without one")
    begin = time.monotonic()
    timer = Timer(torch, args.min_reps, args.max_reps, args.batch_reps)
    kforge = (KforgeKernels(torch, args.kforge_bundle, args.kforge_lib) if args.kforge_bundle
              else None)
    out = {"torch": torch.__version__, "gpu": torch.cuda.get_device_name(0),
           "method": "CUDA events, L2 flushed before every rep, eager, compiled and (with "
                     "--kforge-bundle) the kforge kernel interleaved, "
                     "each batch of reps queued behind a GPU spin so the events bracket only "
                     "GPU work, median; rows under 20 us also as CUDA-graph replays of 20 calls "
                     "(graph_*_s, per call)",
           "sleep_cycles_per_s": timer.cycles_per_s, "rows": {}}
    for row in rows:
        out["rows"][row["id"]] = {"label": row.get("label", ""), "eager_s": 0.0,
                                  "compiled_s": {}, "compile_wall_s": {}, "kforge_s": {},
                                  "inputs": "captured" if "inputs_file" in row else "random",
                                  "uncovered_batches": 0, "note": ""}

    def over_budget():
        return args.time_budget_s > 0 and time.monotonic() - begin > args.time_budget_s

    def add_note(rec, text):
        if text not in rec["note"]:
            rec["note"] = (rec["note"] + " " if rec["note"] else "") + text

    # Every row in the first mode before any row in the next: the budget cuts the extras.
    for mode in args.modes:
        for row in rows:
            rec = out["rows"][row["id"]]
            if over_budget():
                add_note(rec, f"{mode} skipped: --time-budget-s {args.time_budget_s:g} spent")
                continue
            inputs = None
            try:
                gen = torch.Generator(device="cuda").manual_seed(args.seed)
                inputs = make_inputs(torch, row, "cuda", gen)
                eager = make_call(torch, row)
                compiled = compile_call(torch, row, mode)
                t0 = time.monotonic()
                compiled(*inputs)
                torch.cuda.synchronize()
                rec["compile_wall_s"][mode] = round(time.monotonic() - t0, 2)
                fns = {"eager": eager, "compiled": compiled}
                kernel = kforge.call(row) if kforge else None
                if kernel is not None:
                    _, why = kforge.launched(kernel, lambda: kernel(*inputs))
                    if why:
                        add_note(rec, why + ": no kforge time")
                    else:
                        fns["kforge"] = kernel
                if "kforge" in fns:
                    (times, uncovered), why = kforge.launched(kernel,
                                                              lambda: timer.time(fns, inputs))
                    if why:
                        add_note(rec, why + " while timed: its time is left out")
                        times.pop("kforge")
                else:
                    times, uncovered = timer.time(fns, inputs)
                graph_times = {}
                if min(times.values()) < LAUNCH_BOUND_S:
                    graph_times, graph_uncovered = time_graph_mode(
                        timer, kforge, {n: fns[n] for n in times}, inputs,
                        lambda text: add_note(rec, f"{mode}: {text}"))
                    uncovered += graph_uncovered
            except Exception as e:  # a failure is a result, not the end of the run
                add_note(rec, f"{mode} failed: {type(e).__name__}: "
                              f"{(str(e).splitlines() or [''])[0][:200]}")
                continue
            finally:
                del inputs
            if not rec["eager_s"]:
                rec["eager_s"] = times["eager"]
            rec["compiled_s"][mode] = times["compiled"]
            if "kforge" in times:
                rec["kforge_s"][mode] = times["kforge"]
            if "eager" in graph_times and not rec.get("graph_eager_s"):
                rec["graph_eager_s"] = graph_times["eager"]
            for name in ("compiled", "kforge"):
                if name in graph_times:
                    rec.setdefault(f"graph_{name}_s", {})[mode] = graph_times[name]
            rec["uncovered_batches"] += uncovered
            print(f"{row['id']}: eager {times['eager'] * 1e6:.1f} us, torch.compile {mode} "
                  f"{times['compiled'] * 1e6:.1f} us (compiled in "
                  f"{rec['compile_wall_s'][mode]:.1f} s)"
                  + (f", kforge {times['kforge'] * 1e6:.1f} us" if "kforge" in times else "")
                  + ("; graph replays: " + ", ".join(f"{n} {t * 1e6:.2f} us"
                                                    for n, t in graph_times.items())
                     if graph_times else "")
                  + (f"; {uncovered} batches not covered by the spin" if uncovered else ""),
                  flush=True)
            torch.cuda.empty_cache()
    out["wall_s"] = round(time.monotonic() - begin, 1)
    with open(args.out, "w") as f:
        json.dump(out, f, indent=2)
        f.write("\n")
    print(f"wrote {args.out} in {out['wall_s']} s")


def profile(rows, args):
    import torch
    if not torch.cuda.is_available():
        sys.exit("torch_compile_times.py --profile runs the rows on a CUDA GPU and this machine "
                 "has none (torch.cuda.is_available() is False)")
    kforge = (KforgeKernels(torch, args.kforge_bundle, args.kforge_lib) if args.kforge_bundle
              else None)
    cudart = torch.cuda.cudart()
    for n, mode in enumerate(args.modes):
        for row in rows:
            gen = torch.Generator(device="cuda").manual_seed(args.seed)
            inputs = make_inputs(torch, row, "cuda", gen)
            fns = {f"compiled/{mode}": compile_call(torch, row, mode)}
            if n == 0:
                fns["eager"] = make_call(torch, row)
                kernel = kforge.call(row) if kforge else None
                if kernel is not None:
                    fns["kforge"] = kernel
            for name, fn in fns.items():
                for _ in range(3):  # compile (and autotune), then warm
                    fn(*inputs)
                torch.cuda.synchronize()
                label = f"{row['id']}/{name}"
                torch.cuda.nvtx.range_push(label)
                cudart.cudaProfilerStart()
                if name == "kforge":
                    _, why = kforge.launched(fn, lambda: fn(*inputs))
                else:
                    why = None
                    fn(*inputs)
                torch.cuda.synchronize()
                cudart.cudaProfilerStop()
                torch.cuda.nvtx.range_pop()
                print(f"profiled {label}" + (f" ({why}: PyTorch's fallback ran)" if why else ""),
                      flush=True)
            del inputs
            torch.cuda.empty_cache()


def main(argv=None):
    args = parse_args(sys.argv[1:] if argv is None else argv)
    rows = load_rows(args.rows_json, args.rows)
    if args.check:
        try:
            check(rows, args)
        except (ValueError, RuntimeError, AttributeError) as e:
            sys.exit(f"--check: {e}")
    elif args.profile:
        profile(rows, args)
    else:
        measure(rows, args)


if __name__ == "__main__":
    main()
