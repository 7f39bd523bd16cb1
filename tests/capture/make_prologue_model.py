# Test model for chains a family cannot write: an elementwise prologue, x * 2.0 + 1.0, before
# nearest-neighbour upsampling, whose family (layout) writes single ops only. Traced and saved
# with its inputs:
#   make_prologue_model.py OUT_DIR
import os
import sys

import torch


class PrologueModel(torch.nn.Module):
    def forward(self, x):
        return torch.nn.functional.interpolate(x * 2.0 + 1.0, scale_factor=2.0, mode="nearest")


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    torch.manual_seed(0)
    inputs = (torch.randn(1, 4, 8, 8),)
    with torch.no_grad():
        traced = torch.jit.trace(PrologueModel().eval(), inputs)
    traced.save(os.path.join(out, "model.pt"))
    torch.save(inputs, os.path.join(out, "inputs.pt"))


if __name__ == "__main__":
    main()
