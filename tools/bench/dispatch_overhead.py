#!/usr/bin/env python3
"""What guarded dispatch costs the host per forward: the original TorchScript model and its
kforge rewrite (`kforge export`) called back to back, wall clock per forward (median of
rounds), and the difference divided by the rewritten calls one forward makes (the runtime's
launch and fallback counters). On a CPU-bound forward (ResNet-50 b1 on an H200: some 170 ops
in 2 ms) that difference is what the rewrite adds to each op's host time, which the search,
timing GPU work only, does not see.

  dispatch_overhead.py BUNDLE --lib libkforge_runtime.so --original MODEL.pt --inputs INPUTS.pt
                       [--device cpu|cuda] [--calls N] [--rounds R]

On the CPU every rewritten call falls back (cpu_tensor): the figure is the graph's added nodes
and the guards. On CUDA it is the kernel's launch path against aten's.
"""
import argparse
import os
import statistics
import time

import torch


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("bundle")
    parser.add_argument("--lib", required=True)
    parser.add_argument("--original", required=True)
    parser.add_argument("--inputs", required=True)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--calls", type=int, default=2000, help="forwards per round")
    parser.add_argument("--rounds", type=int, default=15)
    args = parser.parse_args()

    torch.ops.load_library(os.path.abspath(args.lib))
    torch.ops.kforge.load_bundle(os.path.abspath(args.bundle))  # wherever it was exported
    device = torch.device(args.device)
    original = torch.jit.load(args.original, map_location=device).eval()
    rewritten = torch.jit.load(os.path.join(args.bundle, "model.pt"), map_location=device).eval()
    inputs = torch.load(args.inputs)
    inputs = tuple(t.to(device) if isinstance(t, torch.Tensor) else t for t in inputs)
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)

    def one_round(model):
        t0 = time.perf_counter()
        for _ in range(args.calls):
            model(*inputs)
        sync()
        return (time.perf_counter() - t0) / args.calls

    # Rounds alternate between the two models, so drift (clocks, other processes) hits both.
    rounds = {"original": [], "rewritten": []}
    fused = {}
    with torch.no_grad():
        for name, model in (("original", original), ("rewritten", rewritten)):
            for _ in range(min(args.calls, 200)):
                model(*inputs)
            fused[name] = fusion_groups(torch.jit.last_executed_optimized_graph())
        sync()
        for _ in range(args.rounds):
            rounds["original"].append(one_round(original))
            rounds["rewritten"].append(one_round(rewritten))

    ops = torch.ops.kforge
    ops.reset_counts()  # then one forward: how many calls it rewrote
    with torch.no_grad():
        rewritten(*inputs)
    sync()
    calls = sum(dict(ops.launch_counts()).values())
    calls += sum(n for k, n in dict(ops.fallback_counts()).items() if ":" not in k)
    a, b = statistics.median(rounds["original"]), statistics.median(rounds["rewritten"])
    print(f"device {device}: original {a * 1e6:.2f} us, rewritten {b * 1e6:.2f} us per forward; "
          f"{calls} rewritten calls a forward"
          + (f", {(b - a) / calls * 1e6:.2f} us more a call" if calls else "")
          + f"; fusion groups the executor made: original {fused['original']}, "
          f"rewritten {fused['rewritten']}")


def fusion_groups(graph):
    """The fused kernels TorchScript's profiling executor made in a graph it ran (a rewrite
    that costs the model its fusions costs GPU time the search never saw)."""
    count = 0
    for node in graph.nodes():
        if "Fusion" in node.kind() or "TensorExprGroup" in node.kind():
            count += 1
        for block in node.blocks():
            count += fusion_groups(block)
    return count


if __name__ == "__main__":
    main()
