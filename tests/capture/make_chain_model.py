# Test model for chain targets (CaptureOptions::fuse), traced and saved with its inputs and its
# outputs:
#   softmax(x * 0.125 + mask)        a chain: elementwise prologue into a row-wise op
#   relu_(bn(img)) + 1.0             a chain: a batch norm with an elementwise epilogue
#   s = sigmoid(u); s * s            not one: sigmoid's output has two uses
#   w.relu_() * 3.0                  not one: relu_ writes the model's input w
#   make_chain_model.py OUT_DIR
import os
import sys

import torch


class ChainModel(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.bn = torch.nn.BatchNorm2d(8)
        with torch.no_grad():
            self.bn.running_mean.uniform_(-0.5, 0.5)
            self.bn.running_var.uniform_(0.5, 2.0)
            self.bn.weight.uniform_(0.5, 1.5)
            self.bn.bias.uniform_(-0.5, 0.5)

    def forward(self, x, mask, img, u, w):
        a = torch.softmax(x * 0.125 + mask, dim=-1)
        b = torch.relu_(self.bn(img)) + 1.0
        s = torch.sigmoid(u)
        c = s * s
        d = w.relu_() * 3.0
        return a, b, c, d


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    torch.manual_seed(0)
    model = ChainModel().eval()
    inputs = (torch.randn(2, 4, 64, 64), torch.randn(1, 1, 64, 64), torch.randn(2, 8, 16, 16),
              torch.randn(64, 64), torch.randn(32, 32))
    with torch.no_grad():
        traced = torch.jit.trace(model, tuple(t.clone() for t in inputs))
        outputs = traced(*[t.clone() for t in inputs])
    traced.save(os.path.join(out, "model.pt"))
    torch.save(inputs, os.path.join(out, "inputs.pt"))
    torch.save(outputs, os.path.join(out, "outputs.pt"))


if __name__ == "__main__":
    main()
