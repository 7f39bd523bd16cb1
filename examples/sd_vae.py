"""The decoder of a Stable Diffusion VAE (diffusers AutoencoderKL, SD 1.x/2.x config, random
weights: no download), for capture. Its time is dominated by group_norm and 3x3 convolutions
at up to 512x512.

    .venv/bin/python tools/kforge-export examples/sd_vae.py:make --out out/sd_vae [--batch 1] \\
        [--kw size=512]

make returns (decoder, (latents,)): latents are [batch, 4, size/8, size/8]; the module returns
the decoded image tensor [batch, 3, size, size].
"""
import torch


class _Decode(torch.nn.Module):
    """post_quant_conv + decoder, returning a tensor (AutoencoderKL.decode returns a dataclass)."""

    def __init__(self, vae):
        super().__init__()
        self.vae = vae

    def forward(self, latents):
        return self.vae.decode(latents, return_dict=False)[0]


def make(batch=1, size=512, device="cpu", dtype="float32"):
    from diffusers import AutoencoderKL

    torch.manual_seed(0)
    vae = AutoencoderKL(
        in_channels=3,
        out_channels=3,
        down_block_types=("DownEncoderBlock2D",) * 4,
        up_block_types=("UpDecoderBlock2D",) * 4,
        block_out_channels=(128, 256, 512, 512),
        layers_per_block=2,
        latent_channels=4,
        norm_num_groups=32,
        sample_size=size,
    )
    model = _Decode(vae).to(device=device, dtype=getattr(torch, dtype)).eval()
    latents = torch.randn(batch, 4, size // 8, size // 8, device=device, dtype=getattr(torch, dtype))
    return model, (latents,)
