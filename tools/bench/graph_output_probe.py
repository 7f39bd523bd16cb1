#!/usr/bin/env python3
"""Whether a launch-bound op's CUDA-graph time depends on where its output goes: each op
captured 20 times in one graph, writing (a) into one preallocated output (`out=`, as the
worker's evaluator launches a candidate) or (b) into a tensor allocated per call (as a model,
eager, torch.compile and the kforge runtime do), the graph replayed with the L2 flushed before
every replay, interleaved; per-call medians. Usage: graph_output_probe.py [--reps N]."""
import argparse
import statistics

import torch

LAUNCHES = 20


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--reps", type=int, default=200)
    args = ap.parse_args()
    flush = torch.empty(2 * torch.cuda.get_device_properties(0).L2_cache_size, dtype=torch.uint8,
                        device="cuda")
    shapes = [(1, 256, 14, 14), (1, 2048, 512), (32, 512, 28, 28)]
    print(f"device: {torch.cuda.get_device_name(0)}, torch {torch.__version__}")
    print("| input | out= µs | allocated µs | allocated / out= | distinct outputs in graph |")
    print("|---|--:|--:|--:|--:|")
    for shape in shapes:
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
        print(f"| f32{list(shape)} | {med['out']:.2f} | {med['alloc']:.2f} | "
              f"{med['alloc'] / med['out']:.3f} | {distinct} |")


if __name__ == "__main__":
    main()
