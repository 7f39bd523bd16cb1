#!/usr/bin/env python3
"""A model whose forward is N softmax(dim=-1) calls on a small tensor, one after another: host
time is all it measures (each call is a few microseconds of GPU work), so the per-call cost of
guarded dispatch shows undiluted. With --fusible each softmax is followed by `* 0.5 + 0.25`,
which TorchScript's executor fuses on a GPU: whether the rewrite keeps those fusions. Saved
traced, with its inputs.

  softmax_chain_model.py OUT_DIR [--calls N] [--fusible]
"""
import argparse
import os

import torch


class SoftmaxChain(torch.nn.Module):
    def __init__(self, calls, fusible):
        super().__init__()
        self.calls = calls
        self.fusible = fusible

    def forward(self, x):
        for _ in range(self.calls):
            x = torch.softmax(x, dim=-1)
            if self.fusible:
                x = x * 0.5 + 0.25
        return x


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out")
    parser.add_argument("--calls", type=int, default=64)
    parser.add_argument("--fusible", action="store_true")
    args = parser.parse_args()
    os.makedirs(args.out, exist_ok=True)
    torch.manual_seed(0)
    x = torch.randn(64, 512)
    with torch.no_grad():
        traced = torch.jit.trace(SoftmaxChain(args.calls, args.fusible).eval(), (x,))
    traced.save(os.path.join(args.out, "model.pt"))
    torch.save((x,), os.path.join(args.out, "inputs.pt"))


if __name__ == "__main__":
    main()
