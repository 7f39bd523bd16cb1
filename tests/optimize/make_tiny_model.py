# Test fixture: a tiny TorchScript model whose forward is softmax -> layer_norm -> relu (ops
# the built-in synthesizer covers), traced and saved with its inputs.
#   make_tiny_model.py OUT_DIR [cpu|cuda]
import os
import sys

import torch


class Tiny(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.norm = torch.nn.LayerNorm(512)

    def forward(self, x):
        return torch.relu(self.norm(torch.softmax(x, dim=-1)))


def main():
    out = sys.argv[1]
    device = sys.argv[2] if len(sys.argv) > 2 else "cpu"
    os.makedirs(out, exist_ok=True)
    torch.manual_seed(0)
    model = Tiny().eval().to(device)
    x = torch.randn(256, 512, device=device)
    with torch.no_grad():
        traced = torch.jit.trace(model, (x,))
    traced.save(os.path.join(out, "model.pt"))
    torch.save((x,), os.path.join(out, "inputs.pt"))


if __name__ == "__main__":
    main()
