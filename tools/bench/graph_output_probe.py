#!/usr/bin/env python3
"""Two questions about the CUDA-graph times of launch-bound ops (torch_compile_times.py's
method: 20 calls captured in one graph, the graph replayed with the L2 flushed before every
replay, interleaved; per-call medians):
- whether it matters where the output goes: (a) one preallocated output (`out=`, as the
  worker's evaluator launches a candidate) or (b) a tensor allocated per call (as a model,
  eager, torch.compile and the kforge runtime do);
- whether the times drift within a process: the first shape is timed again at the end (in
  session 38's runs every function's graph time after the first graph-timed target was
  ~0.33 us a kernel higher than the worker's, eager's included). With --empty-cache the
  caching allocator hands its memory back to the driver after each shape, as
  torch_compile_times.py does after each row, so later shapes run in memory cudaMalloc'd anew.
Usage: graph_output_probe.py [--reps N] [--empty-cache]."""
import argparse
import statistics

import torch

LAUNCHES = 20


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--reps", type=int, default=200)
    ap.add_argument("--empty-cache", action="store_true",
                    help="torch.cuda.empty_cache() after each shape")
    args = ap.parse_args()
    flush = torch.empty(2 * torch.cuda.get_device_properties(0).L2_cache_size, dtype=torch.uint8,
                        device="cuda")
    shapes = [(1, 256, 14, 14), (1, 2048, 512), (32, 512, 28, 28), (1, 256, 14, 14)]
    print(f"device: {torch.cuda.get_device_name(0)}, torch {torch.__version__}"
          + (", empty_cache() after each shape" if args.empty_cache else ""))
    print("| input | out= µs | allocated µs | allocated / out= | distinct outputs in graph |")
    print("|---|--:|--:|--:|--:|")
    for k, shape in enumerate(shapes):
        x = torch.randn(shape, device="cuda")
        y = torch.empty_like(x)
        ptrs = []

        def into_out():
            torch.mul(x, 2.0, out=y)

        def allocated():
            r = torch.mul(x, 2.0)
            ptrs.append(r.data_ptr())

        graphs = {}
        for name, f in (("out", into_out), ("alloc", allocated)):
            f()
            torch.cuda.synchronize()
            ptrs.clear()
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g):
                for _ in range(LAUNCHES):
                    f()
            graphs[name] = g
        distinct = len(set(ptrs))
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
        again = " (again)" if shape in shapes[:k] else ""
        print(f"| f32{list(shape)}{again} | {med['out']:.2f} | {med['alloc']:.2f} | "
              f"{med['alloc'] / med['out']:.3f} | {distinct} |")
        del graphs, x, y
        if args.empty_cache:
            torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
