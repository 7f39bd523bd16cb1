# The RMSNorm chain kernel computed `w * (x * rsqrt(mean(x^2) + eps))` without rounding the
# product to bfloat16 first, as eager's `.to(input_dtype)` does. Does that move Qwen3's logits
# on check-optimized's four input sets (CPU, bf16, seq 2048), and how far apart are eager's top
# two? Run from the repo root: .venv/bin/python docs/benchmarks/2026-12-05-session32/logit_margins.py
import sys, torch
sys.path.insert(0, "examples")
import qwen3
model, (ids,) = qwen3.make(seq=2048, dtype="bfloat16")
model.eval()
def fused(self, h):
    dt = h.dtype
    x = h.to(torch.float32)
    v = x.pow(2).mean(-1, keepdim=True)
    y = x * torch.rsqrt(v + self.variance_epsilon)
    return (self.weight.float() * y).to(dt)   # no rounding of y to bf16 first
import types
norms = [m for m in model.modules() if type(m).__name__.endswith("RMSNorm")]
print("norms", len(norms), type(norms[0]).__name__ if norms else None)
def set_forward(unrounded):
    for m in norms:
        if unrounded:
            m.forward = types.MethodType(fused, m)
        elif "forward" in m.__dict__:
            del m.forward
def fresh(seed):
    g = torch.Generator().manual_seed(seed)
    lo, hi = int(ids.min()), int(ids.max())
    return torch.randint(lo, hi + 1, ids.shape, generator=g).to(ids.dtype)
with torch.inference_mode():
    for name, x in [("example", ids)] + [(f"fresh {k}", fresh(1000 + k)) for k in (1, 2, 3)]:
        set_forward(False)
        a = model(x)
        a = (a[0] if isinstance(a, tuple) else getattr(a, "logits", a))[0, -1].float()
        set_forward(True)
        b = model(x)
        b = (b[0] if isinstance(b, tuple) else getattr(b, "logits", b))[0, -1].float()
        top = a.topk(2)
        print(name, "eager", int(a.argmax()), "unrounded", int(b.argmax()),
              "eager top-2 margin %.4f" % float(top.values[0] - top.values[1]),
              "max |dlogit| %.4f" % float((a - b).abs().max()))
