"""torchvision ResNet-50 with random weights (no download), for capture.

    .venv/bin/python tools/kforge-export examples/resnet50.py:make --out out/resnet50 [--batch 32]
"""
import torch


def make(batch=1, device="cpu", dtype="float32"):
    import torchvision

    torch.manual_seed(0)
    model = torchvision.models.resnet50(weights=None)
    model = model.to(device=device, dtype=getattr(torch, dtype)).eval()
    images = torch.randn(batch, 3, 224, 224, device=device, dtype=getattr(torch, dtype))
    return model, (images,)
