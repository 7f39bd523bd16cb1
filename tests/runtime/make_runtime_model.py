# Test fixture: a tiny TorchScript model for the guarded-dispatch tests, traced and saved with
# its inputs. Its forward has two softmax nodes on the same tensor that differ only in `dim`
# (the exporter must rewrite only the one whose constants match the exported target), one of
# them inside a submodule (the exporter must inline submodule methods).
#   make_runtime_model.py OUT_DIR
import os
import sys

import torch


class RowSoftmax(torch.nn.Module):
    def forward(self, x):
        return torch.softmax(x, dim=-1)


class Model(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.rows = RowSoftmax()

    def forward(self, x):
        return self.rows(x) * 2.0 + torch.softmax(x, dim=0)


def make(batch=64):
    """(model, example_inputs) for tools/kforge-export and tools/check-optimized --module."""
    torch.manual_seed(0)
    return Model().eval(), (torch.randn(batch, 512),)


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    model, (x,) = make()
    with torch.no_grad():
        traced = torch.jit.trace(model, (x,))
    traced.save(os.path.join(out, "model.pt"))
    torch.save((x,), os.path.join(out, "inputs.pt"))


if __name__ == "__main__":
    main()
