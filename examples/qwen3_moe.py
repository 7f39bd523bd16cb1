"""A small Qwen3-MoE causal LM with random weights (transformers Qwen3MoeConfig), for capture.

    .venv/bin/python tools/kforge-export examples/qwen3_moe.py:make --out out/qwen3_moe

Tracing records the experts the example input routes to; capture profiles that path.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _lm  # noqa: E402


def make(batch=1, seq=128, device="cpu", dtype="float32", layers=4):
    from transformers import Qwen3MoeConfig, Qwen3MoeForCausalLM

    config = Qwen3MoeConfig(
        vocab_size=4096,
        hidden_size=512,
        intermediate_size=1536,
        moe_intermediate_size=256,
        num_experts=8,
        num_experts_per_tok=2,
        decoder_sparse_step=1,
        num_hidden_layers=layers,
        num_attention_heads=8,
        num_key_value_heads=4,
        head_dim=64,
        max_position_embeddings=max(4096, seq),
        tie_word_embeddings=False,
    )
    return _lm.build(Qwen3MoeForCausalLM, config, batch, seq, device, dtype)
