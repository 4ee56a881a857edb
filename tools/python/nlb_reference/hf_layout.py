"""Hugging Face model directories: config.json + model.safetensors."""

import json
import os

import torch

from . import safetensors_io
from .models import build_model, config_from_hf

DTYPE_NAMES = {torch.float32: "float32", torch.float16: "float16", torch.bfloat16: "bfloat16"}


def write_config(path, config_dict: dict) -> None:
    # HF writes config.json with json.dumps(indent=2, sort_keys=True) + "\n".
    with open(path, "w", encoding="utf-8") as f:
        f.write(json.dumps(config_dict, indent=2, sort_keys=True) + "\n")


def save_model_dir(
    model, directory, dtype=torch.float32, extra_metadata: dict | None = None, dtypes: dict | None = None
) -> dict:
    """Writes config.json and model.safetensors as save_pretrained would.

    The state dict holds exactly the HF tensor names (GPT-2's tied lm_head is
    not a separate tensor, matching HF's de-duplication of shared tensors).
    `dtypes` maps a tensor name to a dtype that overrides `dtype` for it (a
    BF16 embedding in an otherwise F32 file, for instance). Returns the
    tensors written.
    """
    os.makedirs(directory, exist_ok=True)
    dtypes = dtypes or {}
    tensors = {name: t.detach().to(dtypes.get(name, dtype)) for name, t in model.state_dict().items()}
    metadata = {"format": "pt"}
    if extra_metadata:
        metadata.update(extra_metadata)
    safetensors_io.write(os.path.join(directory, "model.safetensors"), tensors, metadata)
    write_config(os.path.join(directory, "config.json"), model.config.to_hf(DTYPE_NAMES[dtype]))
    return tensors


def load_model_dir(directory, dtype=torch.float64):
    """Builds the model described by a directory and loads its weights, cast
    (exactly, for every stored dtype) to `dtype`. Strict: a missing or
    unexpected tensor or a wrong shape raises."""
    with open(os.path.join(directory, "config.json"), encoding="utf-8") as f:
        config = config_from_hf(json.load(f))
    tensors, _ = safetensors_io.read(os.path.join(directory, "model.safetensors"))
    model = build_model(config)
    check_tensors(directory, tensors, model.state_dict())
    return load_weights(model, tensors, dtype), config


def check_tensors(directory, tensors: dict, expected: dict) -> None:
    """Raises unless `tensors` (read from `directory`) has exactly the names
    of `expected`, each with its shape."""
    missing = sorted(set(expected) - set(tensors))
    unexpected = sorted(set(tensors) - set(expected))
    if missing or unexpected:
        raise ValueError(f"{directory}: missing tensors {missing}, unexpected tensors {unexpected}")
    for name, t in tensors.items():
        if tuple(t.shape) != tuple(expected[name].shape):
            raise ValueError(
                f"{directory}: tensor {name} has shape {list(t.shape)}, expected {list(expected[name].shape)}"
            )


def load_weights(model, state: dict, dtype):
    """`model` with `state` loaded (strict), cast to `dtype`, in eval mode."""
    # Every stored dtype (F32, F16, BF16) is exact in float32 and float32 is
    # exact in float64, so the two casts below never round.
    model.load_state_dict({k: v.to(torch.float32) for k, v in state.items()}, strict=True)
    model = model.to(dtype)
    model.eval()
    return model
