# torch.compile reference: GN (and GN+SiLU) median by triton do_bench (L2 flushed), beside eager.
import torch, sys, json
from triton.testing import do_bench
res = {}
for c, hw in [(128, 512), (256, 256)]:
    x = torch.randn(1, c, hw, hw, device="cuda"); w = torch.randn(c, device="cuda"); b = torch.randn(c, device="cuda")
    for name, f in [("gn", lambda x, w, b: torch.nn.functional.group_norm(x, 32, w, b, 1e-6)),
                    ("gn_silu", lambda x, w, b: torch.nn.functional.silu(torch.nn.functional.group_norm(x, 32, w, b, 1e-6)))]:
        for mode in ["default", "max-autotune-no-cudagraphs"]:
            torch._dynamo.reset()
            g = torch.compile(f, mode=mode)
            g(x, w, b); torch.cuda.synchronize()
            t = do_bench(lambda: g(x, w, b), warmup=50, rep=300, return_mode="median")
            res[f"{name} {c}x{hw} {mode}"] = t * 1e3
        res[f"{name} {c}x{hw} eager"] = do_bench(lambda: f(x, w, b), warmup=20, rep=200, return_mode="median") * 1e3
for k, v in res.items(): print(f"{k}: {v:.1f} us")
