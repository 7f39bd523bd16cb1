"""A small Qwen3 causal LM with random weights (transformers Qwen3Config), for capture.

    .venv/bin/python tools/kforge-export examples/qwen3.py:make --out out/qwen3 [--seq 2048]

make returns (model, (input_ids,)); the model returns the logits tensor only.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _lm  # noqa: E402


def make(batch=1, seq=128, device="cpu", dtype="float32", layers=4):
    from transformers import Qwen3Config, Qwen3ForCausalLM

    config = Qwen3Config(
        vocab_size=4096,
        hidden_size=512,
        intermediate_size=1536,
        num_hidden_layers=layers,
        num_attention_heads=8,
        num_key_value_heads=4,
        head_dim=64,
        max_position_embeddings=max(4096, seq),
        tie_word_embeddings=False,
    )
    return _lm.build(Qwen3ForCausalLM, config, batch, seq, device, dtype)
