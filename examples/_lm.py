"""Shared pieces of the language-model examples: random-weight models built from configs.

Works with transformers 4.57 and 5.x: no downloads, eager attention, and a wrapper that
returns the logits tensor alone so torch.jit.trace sees one tensor output.
"""
import torch


class LogitsOnly(torch.nn.Module):
    """Calls a causal LM on input_ids without a KV cache and returns only the logits."""

    def __init__(self, lm):
        super().__init__()
        self.lm = lm

    def forward(self, input_ids):
        # An explicit all-ones mask keeps transformers off its packed-sequence detection,
        # whose vmap-based mask fails intermittently under torch.jit.trace.
        attention_mask = torch.ones_like(input_ids)
        out = self.lm(input_ids=input_ids, attention_mask=attention_mask, use_cache=False)
        return out.logits if hasattr(out, "logits") else out[0]


def dtype_of(name):
    try:
        dtype = getattr(torch, name)
    except AttributeError:
        dtype = None
    if not isinstance(dtype, torch.dtype):
        raise ValueError(f"unknown dtype {name!r}; use float32, bfloat16 or float16")
    return dtype


def build(model_class, config, batch, seq, device, dtype):
    """Instantiates model_class(config) with random weights and makes input_ids of [batch, seq]."""
    config.torchscript = True  # transformers 4.x: tuple outputs, tied weights cloned
    config.use_cache = False
    config._attn_implementation = "eager"
    torch.manual_seed(0)
    lm = model_class(config)
    model = LogitsOnly(lm).to(device=device, dtype=dtype_of(dtype)).eval()
    input_ids = torch.randint(0, config.vocab_size, (batch, seq), device=device)
    return model, (input_ids,)
