"""Models beyond the issue's examples, random weights and small configs (no download), to check
that kforge handles what it has not been tuned on: capture, targets, proposals, export and
fallbacks. One factory each, every one returning (model, example_inputs):

    .venv/bin/python tools/kforge-export examples/zoo.py:mobilenet_v3 --out out/zoo/mobilenet_v3

On the GPU, tools/gpu-steps/optimize.sh runs them (KFORGE_GPU_MODELS=zoo); on a machine
without one, docs/benchmarks/2026-12-05-cpu-model-zoo.md says how far a run goes and how.
"""
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _lm  # noqa: E402


def _torchvision(name, doc):
    """A factory of torchvision's `name` at 224x224, returning (model, (images,))."""

    def make(batch=1, device="cpu", dtype="float32"):
        import torchvision

        torch.manual_seed(0)
        model = getattr(torchvision.models, name)(weights=None)
        model = model.to(device=device, dtype=_lm.dtype_of(dtype)).eval()
        images = torch.randn(batch, 3, 224, 224, device=device, dtype=_lm.dtype_of(dtype))
        return model, (images,)

    make.__doc__ = doc
    return make


mobilenet_v3 = _torchvision(
    "mobilenet_v3_small",
    "hardswish, hardsigmoid, squeeze-excitation (adaptive_avg_pool2d + mul), depthwise convs.")
efficientnet = _torchvision("efficientnet_b0",
                            "silu, sigmoid gates, batch norms after depthwise convs.")
convnext = _torchvision("convnext_tiny",
                        "channels-last layer norms (permutes around them), gelu, layer scale.")
vit = _torchvision("vit_b_16", "A vision transformer: layer norms, gelu MLPs, MultiheadAttention.")
swin = _torchvision(
    "swin_t", "Shifted-window attention: rolls, window partitions, relative position bias.")
densenet = _torchvision("densenet121",
                        "Concatenations, batch_norm -> relu before every conv, avg_pool2d.")


class _HiddenOnly(torch.nn.Module):
    """An encoder called on input_ids with an all-ones mask, returning its last hidden state."""

    def __init__(self, encoder):
        super().__init__()
        self.encoder = encoder

    def forward(self, input_ids):
        out = self.encoder(input_ids=input_ids, attention_mask=torch.ones_like(input_ids))
        return out[0]


def _encoder(model_class, config, batch, seq, device, dtype):
    config.torchscript = True
    config._attn_implementation = "eager"
    torch.manual_seed(0)
    model = _HiddenOnly(model_class(config)).to(device=device, dtype=_lm.dtype_of(dtype)).eval()
    input_ids = torch.randint(0, config.vocab_size, (batch, seq), device=device)
    return model, (input_ids,)


def bert(batch=1, seq=128, device="cpu", dtype="float32"):
    """An encoder: post-norm layer norms, gelu, a padding-mask softmax."""
    from transformers import BertConfig, BertModel

    config = BertConfig(vocab_size=8192, hidden_size=512, num_hidden_layers=4,
                        num_attention_heads=8, intermediate_size=2048,
                        max_position_embeddings=max(512, seq))
    return _encoder(BertModel, config, batch, seq, device, dtype)


def t5_encoder(batch=1, seq=128, device="cpu", dtype="float32"):
    """T5's RMS norm written out (pow, mean, rsqrt, mul), relative position bias, relu MLPs."""
    from transformers import T5Config, T5EncoderModel

    config = T5Config(vocab_size=8192, d_model=512, d_kv=64, d_ff=2048, num_layers=4,
                      num_heads=8)
    return _encoder(T5EncoderModel, config, batch, seq, device, dtype)


def gpt2(batch=1, seq=128, device="cpu", dtype="float32"):
    """A decoder with learned positions, gelu_new (tanh approximation written out), Conv1D."""
    from transformers import GPT2Config, GPT2LMHeadModel

    config = GPT2Config(vocab_size=8192, n_embd=512, n_layer=4, n_head=8,
                        n_positions=max(1024, seq))
    return _lm.build(GPT2LMHeadModel, config, batch, seq, device, dtype)


def llama(batch=1, seq=128, device="cpu", dtype="float32"):
    """A Llama decoder: rotary embeddings, grouped-query attention, SiLU-gated MLPs."""
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(vocab_size=8192, hidden_size=512, intermediate_size=1408,
                         num_hidden_layers=4, num_attention_heads=8, num_key_value_heads=2,
                         max_position_embeddings=max(4096, seq))
    return _lm.build(LlamaForCausalLM, config, batch, seq, device, dtype)


def phi(batch=1, seq=128, device="cpu", dtype="float32"):
    """Phi: parallel attention and MLP on one layer norm, partial rotary, gelu_new."""
    from transformers import PhiConfig, PhiForCausalLM

    config = PhiConfig(vocab_size=8192, hidden_size=512, intermediate_size=2048,
                       num_hidden_layers=4, num_attention_heads=8,
                       max_position_embeddings=max(2048, seq))
    return _lm.build(PhiForCausalLM, config, batch, seq, device, dtype)


def unet(batch=1, size=32, device="cpu", dtype="float32"):
    """A diffusers UNet2DModel: group norms with silu, attention blocks, time embeddings."""
    from diffusers import UNet2DModel

    class _Sample(torch.nn.Module):
        def __init__(self, net):
            super().__init__()
            self.net = net

        def forward(self, sample, timestep):
            return self.net(sample, timestep, return_dict=False)[0]

    torch.manual_seed(0)
    net = UNet2DModel(sample_size=size, in_channels=3, out_channels=3, layers_per_block=1,
                      block_out_channels=(64, 128, 128),
                      down_block_types=("DownBlock2D", "AttnDownBlock2D", "DownBlock2D"),
                      up_block_types=("UpBlock2D", "AttnUpBlock2D", "UpBlock2D"))
    model = _Sample(net).to(device=device, dtype=_lm.dtype_of(dtype)).eval()
    sample = torch.randn(batch, 3, size, size, device=device, dtype=_lm.dtype_of(dtype))
    timestep = torch.tensor([10], device=device)
    return model, (sample, timestep)
