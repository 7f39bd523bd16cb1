# Test fixtures: small TorchScript models for the exporter's edge cases, saved with inputs.
#   make_small_model.py OUT_DIR unmatched|chained|rms_norm|computed_shape
# unmatched (scripted): the softmax takes its `dim` computed at run time. The capture records
#   the call with dim=1, but no node of the graph has that dim as a constant, so a kernel for
#   the target is proven for no node: the export must say so, never stay silent.
# chained (traced): two softmax(dim=-1) of the same shape, the second on the first's output:
#   both nodes are rewritten, and the second must take the first's rewritten result.
# rms_norm (traced): an RMSNorm written out, `x * rsqrt(x.pow(2).mean(-1, keepdim=True) + eps)
#   * weight`: a chain that reads x twice, one input of its target and of its kforge::run.
# computed_shape (traced): repeat_kv as the Qwen3 example writes it, x[:, :, None]
#   .expand(b, h, 2, s, d).reshape(b, h * 2, s, d): the reshape's sizes are computed in the
#   graph from x's, so its kforge::run compares them with the captured ones on every call.
import os
import sys

import torch


class Unmatched(torch.nn.Module):
    def forward(self, x):
        return torch.softmax(x, dim=x.dim() - 1) * 2.0


class Chained(torch.nn.Module):
    def forward(self, x):
        return torch.softmax(torch.softmax(x, dim=-1), dim=-1) * 2.0


class RmsNorm(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("weight", torch.rand(512) + 0.5)

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * self.weight


class ComputedShape(torch.nn.Module):
    def forward(self, x):
        b, h, s, d = x.shape
        return x[:, :, None, :, :].expand(b, h, 2, s, d).reshape(b, h * 2, s, d)


def main():
    out, name = sys.argv[1], sys.argv[2]
    os.makedirs(out, exist_ok=True)
    torch.manual_seed(0)
    x = torch.randn(64, 512)
    if name == "unmatched":
        model = torch.jit.script(Unmatched().eval())
    elif name in ("chained", "rms_norm"):
        with torch.no_grad():
            model = torch.jit.trace((Chained() if name == "chained" else RmsNorm()).eval(), (x,))
    elif name == "computed_shape":
        x = torch.randn(2, 4, 64, 32)
        with torch.no_grad():
            model = torch.jit.trace(ComputedShape().eval(), (x,))
    else:
        raise SystemExit(f"unknown model {name}")
    model.save(os.path.join(out, "model.pt"))
    torch.save((x,), os.path.join(out, "inputs.pt"))


if __name__ == "__main__":
    main()
