#!/usr/bin/env python3
"""Two questions about the CUDA-graph times of launch-bound ops (torch_compile_times.py's
method: 20 calls captured in one graph, the graph replayed with the L2 flushed before every
replay, interleaved; per-call medians):
- whether it matters where the output goes: (a) one preallocated output (`out=`, as the
  worker's evaluator launches a candidate) or (b) a tensor allocated per call (as a model,
  eager, torch.compile and the kforge runtime do);
- whether the times drift within a process: the first shape is timed again after each other
  shape and after 3 s with the GPU idle, with the SM clock (nvidia-smi) before and after each;
  with --empty-cache the caching allocator hands its memory back after each shape, as
  torch_compile_times.py does after each row. --drift times one graph in steps that tell apart
  what each repetition changes. Found (H100, docs/benchmarks/2026-12-05-session39.md): from a
  process's fourth graph capture on, every graph replays ~0.36 us a kernel slower for good;
  neither empty_cache, clocks, events nor allocations move it.
Usage: graph_output_probe.py [--reps N] [--empty-cache] [--drift]."""
import argparse
import statistics
import subprocess
import time

import torch

LAUNCHES = 20


def sm_clock_mhz():
    """The SM clock now, by nvidia-smi (torch.cuda.clock_rate needs pynvml)."""
    try:
        return subprocess.run(["nvidia-smi", "--query-gpu=clocks.sm", "--format=csv,noheader,nounits",
                               "-i", "0"], capture_output=True, text=True, timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "?"


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--reps", type=int, default=200)
    ap.add_argument("--empty-cache", action="store_true",
                    help="torch.cuda.empty_cache() after each shape")
    ap.add_argument("--drift", action="store_true",
                    help="only the drift: one op's graph timed again and again, telling apart "
                         "what each repetition changes (events, new captures)")
    args = ap.parse_args()
    flush = torch.empty(2 * torch.cuda.get_device_properties(0).L2_cache_size, dtype=torch.uint8,
                        device="cuda")
    if args.drift:
        return drift(args.reps, flush)
    first = (1, 256, 14, 14)
    shapes = [first, (1, 2048, 512), first, (32, 512, 28, 28), first, "idle", first]
    print(f"device: {torch.cuda.get_device_name(0)}, torch {torch.__version__}"
          + (", empty_cache() after each shape" if args.empty_cache else ""))
    print("| input | out= µs | allocated µs | allocated / out= | distinct outputs in graph "
          "| SM clock MHz before, after |")
    print("|---|--:|--:|--:|--:|--:|")
    for k, shape in enumerate(shapes):
        if shape == "idle":  # the GPU left idle a while: do the times come back?
            time.sleep(3.0)
            continue
        clock_before = sm_clock_mhz()
        x = torch.randn(shape, device="cuda")
        y = torch.empty_like(x)
        ptrs = []

        def into_out():
            torch.mul(x, 2.0, out=y)

        def allocated():
            r = torch.mul(x, 2.0)
            ptrs.append(r.data_ptr())

        graphs = {"out": capture(into_out), "alloc": capture(allocated)}
        distinct = len(set(ptrs[-LAUNCHES:]))  # the captured calls' outputs, not the warm-up's
        times = {n: [] for n in graphs}
        for i in range(args.reps):
            order = list(graphs) if i % 2 == 0 else list(reversed(graphs))
            for n in order:
                flush.fill_(i & 0xFF)
                s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                s.record()
                graphs[n].replay()
                e.record()
                times[n].append((s, e))
        torch.cuda.synchronize()
        med = {n: statistics.median(s.elapsed_time(e) for s, e in v) * 1e3 / LAUNCHES
               for n, v in times.items()}
        again = " (again" + (", after 3 s idle)" if "idle" in shapes[:k] else ")")
        again = again if shape in shapes[:k] else ""
        print(f"| f32{list(shape)}{again} | {med['out']:.2f} | {med['alloc']:.2f} | "
              f"{med['alloc'] / med['out']:.3f} | {distinct} | "
              f"{clock_before}, {sm_clock_mhz()} |")
        del graphs, x, y
        if args.empty_cache:
            torch.cuda.empty_cache()


def capture(f):
    """A CUDA graph of LAUNCHES calls of f, warmed up first (nothing to load in the capture)."""
    f()
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        for _ in range(LAUNCHES):
            f()
    return g


def replay_times(graph, reps, flush, events=None):
    """Median µs per call of `reps` flushed replays; `events` (pairs) are reused if given."""
    pairs = events or [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
                       for _ in range(reps)]
    for i, (s, e) in enumerate(pairs):
        flush.fill_(i & 0xFF)
        s.record()
        graph.replay()
        e.record()
    torch.cuda.synchronize()
    return statistics.median(s.elapsed_time(e) for s, e in pairs) * 1e3 / LAUNCHES, pairs


def drift(reps, flush):
    """One op (a mul of f32[1,256,14,14]) timed in steps; each row says what changed."""
    x = torch.randn(1, 256, 14, 14, device="cuda")
    y = torch.empty_like(x)
    op = lambda: torch.mul(x, 2.0, out=y)  # noqa: E731
    print(f"device: {torch.cuda.get_device_name(0)}, torch {torch.__version__}; drift steps")
    print("| step | µs per call |")
    print("|---|--:|")
    z = torch.empty_like(x)
    g_other = capture(lambda: torch.sigmoid(x, out=z))
    print(f"| 0. graph D (another kernel: sigmoid) captured, timed | "
          f"{replay_times(g_other, reps, flush)[0]:.2f} |")
    g1 = capture(op)
    t, events = replay_times(g1, reps, flush)
    print(f"| 1. graph A captured, timed | {t:.2f} |")
    print(f"| 2. graph A again, new events | {replay_times(g1, reps, flush)[0]:.2f} |")
    print(f"| 3. graph A again, step 1's events | {replay_times(g1, reps, flush, events)[0]:.2f} |")
    g2 = capture(op)
    print(f"| 4. graph B (the same op) captured, timed | {replay_times(g2, reps, flush)[0]:.2f} |")
    print(f"| 5. graph A again | {replay_times(g1, reps, flush)[0]:.2f} |")
    del g2
    torch.cuda.synchronize()
    print(f"| 6. graph A again, graph B destroyed | {replay_times(g1, reps, flush)[0]:.2f} |")
    for name, n in (("100", 100), ("1000", 1000)):
        for _ in range(n):
            op()
        torch.cuda.synchronize()
        print(f"| 7. graph A after {name} eager calls | {replay_times(g1, reps, flush)[0]:.2f} |")
    big = torch.randn(1, 2048, 512, device="cuda")
    big.mul_(2.0)
    torch.cuda.synchronize()
    print(f"| 8. graph A after a 4 MB tensor's allocation and mul | "
          f"{replay_times(g1, reps, flush)[0]:.2f} |")
    g_big = capture(lambda: big.mul_(1.0))
    replay_times(g_big, reps, flush)
    print(f"| 9. graph A after a 4 MB mul's graph timed | {replay_times(g1, reps, flush)[0]:.2f} |")
    x2 = torch.randn(1, 256, 14, 14, device="cuda")
    y2 = torch.empty_like(x2)
    torch.cuda.synchronize()
    print(f"| 10a. graph A after two new small tensors | {replay_times(g1, reps, flush)[0]:.2f} |")
    torch.mul(x2, 2.0, out=y2)
    torch.cuda.synchronize()
    print(f"| 10b. graph A after an eager mul of them | {replay_times(g1, reps, flush)[0]:.2f} |")
    g3 = capture(lambda: torch.mul(x2, 2.0, out=y2))
    print(f"| 10. graph C: the op on new tensors, captured, timed | "
          f"{replay_times(g3, reps, flush)[0]:.2f} |")
    print(f"| 11. graph A again | {replay_times(g1, reps, flush)[0]:.2f} |")
    del g3
    torch.cuda.synchronize()
    print(f"| 12. graph A again, graph C destroyed | {replay_times(g1, reps, flush)[0]:.2f} |")
    print(f"| 12b. graph D again | {replay_times(g_other, reps, flush)[0]:.2f} |")
    x3 = torch.randn(1, 256, 14, 14, device="cuda")
    torch.mul(x3, 2.0, out=y2)
    torch.cuda.synchronize()
    print(f"| 13. graph A after an eager mul into new tensors | "
          f"{replay_times(g1, reps, flush)[0]:.2f} |")


if __name__ == "__main__":
    main()
