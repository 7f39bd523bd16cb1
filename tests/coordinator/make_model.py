# Test fixture for the coordinator tests: a small TorchScript model whose forward is
# matmul -> softmax -> layer_norm -> relu. The built-in synthesizer covers the last three;
# the matmul is the target no proposer family supports. Traced and saved with its inputs.
#   make_model.py OUT_DIR
import os
import sys

import torch


class Small(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.randn(512, 512) / 22.0)
        self.norm = torch.nn.LayerNorm(512)

    def forward(self, x):
        return torch.relu(self.norm(torch.softmax(torch.matmul(x, self.weight), dim=-1)))


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    torch.manual_seed(0)
    model = Small().eval()
    x = torch.randn(256, 512)
    with torch.no_grad():
        traced = torch.jit.trace(model, (x,))
    traced.save(os.path.join(out, "model.pt"))
    torch.save((x,), os.path.join(out, "inputs.pt"))


if __name__ == "__main__":
    main()
