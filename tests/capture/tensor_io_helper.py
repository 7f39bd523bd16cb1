"""Python side of the tensor_io round-trip test.

    tensor_io_helper.py write DIR   writes tuple.pt, list.pt, dict.pt, bare.pt, nested.pt
    tensor_io_helper.py read FILE   prints {name: {sizes, strides, dtype, values}} as JSON
"""
import json
import os
import sys

import torch


def write(out):
    a = torch.arange(6, dtype=torch.float32).reshape(2, 3)
    b = torch.arange(4, dtype=torch.int64)
    c = torch.arange(8, dtype=torch.float16).reshape(2, 4).t()  # non-contiguous
    torch.save((a, b), os.path.join(out, "tuple.pt"))
    torch.save([a, b, c], os.path.join(out, "list.pt"))
    torch.save({"x": a, "mask": b.bool()}, os.path.join(out, "dict.pt"))
    torch.save(b, os.path.join(out, "bare.pt"))
    torch.save((a, (b, c)), os.path.join(out, "nested.pt"))


def flatten(value, prefix, out):
    if isinstance(value, torch.Tensor):
        out[prefix] = value
    elif isinstance(value, (tuple, list)):
        for i, v in enumerate(value):
            flatten(v, f"{prefix}.{i}" if prefix else str(i), out)
    elif isinstance(value, dict):
        for k, v in value.items():
            flatten(v, f"{prefix}.{k}" if prefix else str(k), out)
    else:
        raise TypeError(type(value))


def read(path):
    value = torch.load(path, map_location="cpu")  # weights_only=True by default
    tensors = {}
    flatten(value, "", tensors)
    print(json.dumps({
        "container": type(value).__name__,
        "tensors": {
            name: {"sizes": list(t.shape), "strides": list(t.stride()),
                   "dtype": str(t.dtype).replace("torch.", ""),
                   "values": t.double().flatten().tolist()}
            for name, t in tensors.items()
        }}))


if __name__ == "__main__":
    {"write": write, "read": read}[sys.argv[1]](sys.argv[2])
