"""A small Gemma 3 text LM with random weights (transformers Gemma3TextConfig), for capture.

    .venv/bin/python tools/kforge-export examples/gemma3.py:make --out out/gemma3
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _lm  # noqa: E402


def make(batch=1, seq=128, device="cpu", dtype="float32", layers=4):
    from transformers import Gemma3ForCausalLM, Gemma3TextConfig

    config = Gemma3TextConfig(
        vocab_size=4096,
        hidden_size=512,
        intermediate_size=1536,
        num_hidden_layers=layers,
        num_attention_heads=8,
        num_key_value_heads=4,
        head_dim=64,
        sliding_window=min(512, seq),
        max_position_embeddings=max(4096, seq),
    )
    return _lm.build(Gemma3ForCausalLM, config, batch, seq, device, dtype)
