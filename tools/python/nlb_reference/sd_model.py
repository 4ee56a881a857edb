"""A byte-level GPT-2 whose attention is S–D attention (PAPERS §B2), trained
as such from the start ("tiny-sd", issue 5 §3).

Layout: the tiny GPT-2 of models.py (learned positions, sequential residual,
GELU-tanh MLP behind ln_2, final ln_f, head tied to wte) with each block's
attention replaced by S–D attention (see docs/attention.md and
nlb_reference/sd_attention.py for the math):

  logits_ij = x_i (S_h − D_h) x_jᵀ / √d_h (causal),  S_h = U_h V_hᵀ − V_h U_hᵀ,
  D_h = diag(softplus θ_h) ("diagonal") or softplus(θ_h) I ("scalar"),
  V = x W_v + b_v, head h reads V's columns [h·d_h, (h+1)·d_h), y = C W_o + b_o,

where x is ln_1 of the residual stream, or the raw residual stream when the
model has no pre-attention LayerNorm (`attn_layer_norm` false; the paper
trains S–D models without LayerNorm, PAPERS §B2). Ranks are per layer:
layer i's S_h has rank `ranks[i]` (even), so U_h, V_h are [d, ranks[i] / 2].

Tensor names in model.safetensors (the GPT-2 names for everything that is
GPT-2; d = n_embd, H = n_head, r_i = ranks[i] / 2, I = 4d):

  transformer.wte.weight                      [V, d]
  transformer.wpe.weight                      [n_positions, d]
  transformer.h.{i}.ln_1.weight, .bias        [d]        (only if attn_layer_norm)
  transformer.h.{i}.attn.routing.u            [H, d, r_i]
  transformer.h.{i}.attn.routing.v            [H, d, r_i]
  transformer.h.{i}.attn.filter.theta         [H, d] (diagonal) or [H] (scalar)
  transformer.h.{i}.attn.c_v.weight           [d, d]     (x W layout, like Conv1D)
  transformer.h.{i}.attn.c_v.bias             [d]
  transformer.h.{i}.attn.c_proj.weight        [d, d]
  transformer.h.{i}.attn.c_proj.bias          [d]
  transformer.h.{i}.ln_2.weight, .bias        [d]
  transformer.h.{i}.mlp.c_fc.weight           [d, I]
  transformer.h.{i}.mlp.c_fc.bias             [I]
  transformer.h.{i}.mlp.c_proj.weight         [I, d]
  transformer.h.{i}.mlp.c_proj.bias           [d]
  transformer.ln_f.weight, .bias              [d]

config.json: the GPT-2 keys that apply plus "model_type": "nlb-sd",
"architectures": ["NlbSDLMHeadModel"], "sd_ranks" (list, one even rank per
layer), "sd_filter" ("diagonal" or "scalar"), "sd_attn_layer_norm" (bool).

Taps are those of models.py ("embedding", "{i}.block_input",
"{i}.attn_output", "{i}.mlp_input", "{i}.mlp_output", "{i}.block_output").
"""

import json
import os
from dataclasses import dataclass, field

import torch

from . import hf_layout, safetensors_io
from .models import Gpt2Block, Gpt2LMHeadModel, Gpt2Sizes, check_hf_options, hf_fields
from .sd_attention import SDAttention

FILTER_KINDS = ("diagonal", "scalar")


@dataclass
class SDConfig(Gpt2Sizes):
    ranks: list = field(default_factory=lambda: [16, 16, 16, 16])
    filter_kind: str = "diagonal"
    attn_layer_norm: bool = False
    layer_norm_epsilon: float = 1e-5
    activation_function: str = "gelu_new"
    initializer_range: float = 0.02
    theta_init: float = -3.0  # softplus(-3) = 0.049: a weak filter at the start

    n_inner = None  # like Gpt2Config: 4 n_embd

    def __post_init__(self):
        if len(self.ranks) != self.n_layer:
            raise ValueError(f"ranks has {len(self.ranks)} entries, expected n_layer = {self.n_layer}")
        for i, r in enumerate(self.ranks):
            if r <= 0 or r % 2 != 0:
                raise ValueError(f"ranks[{i}] = {r}: a skew-symmetric rank must be even and positive")
        if self.filter_kind not in FILTER_KINDS:
            raise ValueError(f"filter_kind {self.filter_kind!r}: expected one of {FILTER_KINDS}")
        if self.n_embd % self.n_head != 0:
            raise ValueError("n_embd must be a multiple of n_head")

    @property
    def inner_size(self) -> int:
        return 4 * self.n_embd

    def to_hf(self, torch_dtype: str = "float32") -> dict:
        return {
            "activation_function": self.activation_function,
            "architectures": ["NlbSDLMHeadModel"],
            "bos_token_id": None,
            "eos_token_id": None,
            "initializer_range": self.initializer_range,
            "layer_norm_epsilon": self.layer_norm_epsilon,
            "model_type": "nlb-sd",
            "n_ctx": self.n_positions,
            "n_embd": self.n_embd,
            "n_head": self.n_head,
            "n_inner": None,
            "n_layer": self.n_layer,
            "n_positions": self.n_positions,
            "sd_attn_layer_norm": self.attn_layer_norm,
            "sd_filter": self.filter_kind,
            "sd_ranks": list(self.ranks),
            "tie_word_embeddings": True,
            "torch_dtype": torch_dtype,
            "vocab_size": self.vocab_size,
        }

    @classmethod
    def from_hf(cls, cfg: dict) -> "SDConfig":
        check_hf_options(cfg, "nlb-sd", "nlb-sd", {})
        if cfg.get("n_inner") is not None:
            raise ValueError("nlb-sd: n_inner must be null (4 n_embd)")
        return cls(
            **hf_fields(
                cls,
                cfg,
                required=cls.size_keys(),
                optional=("layer_norm_epsilon", "activation_function", "initializer_range"),
            ),
            ranks=list(cfg["sd_ranks"]),
            filter_kind=cfg["sd_filter"],
            attn_layer_norm=bool(cfg["sd_attn_layer_norm"]),
        )


def sd_block(config: SDConfig, layer: int) -> Gpt2Block:
    """GPT-2's block with layer `layer`'s S–D attention, behind ln_1 only when
    config.attn_layer_norm."""
    attn = SDAttention(config.n_embd, config.n_head, config.ranks[layer], filter=config.filter_kind)
    return Gpt2Block(config, attn, attn_layer_norm=config.attn_layer_norm)


# Module parameter names (H1's SDAttention: u, v, theta, c_v, c_proj) -> file
# names, which group the routing and filter parameters like the C++ components.
_ATTN_RENAMES = {
    "attn.u": "attn.routing.u",
    "attn.v": "attn.routing.v",
    "attn.theta": "attn.filter.theta",
}


def _to_file_name(name: str) -> str:
    for old, new in _ATTN_RENAMES.items():
        if name.endswith("." + old):
            return name[: -len(old)] + new
    return name


def _to_module_name(name: str) -> str:
    for old, new in _ATTN_RENAMES.items():
        if name.endswith("." + new):
            return name[: -len(new)] + old
    return name


class SDLMHeadModel(Gpt2LMHeadModel):
    """GPT-2's LM head model (forward, taps, tied head) with sd_block blocks."""

    def __init__(self, config: SDConfig):
        super().__init__(config, make_block=lambda layer: sd_block(config, layer))

    def init_constants(self) -> dict:
        """init_weights is GPT-2's (routing U, V ~ N(0, 0.02) like any matrix),
        but the filter θ starts at theta_init."""
        return {"attn.theta": self.config.theta_init}

    def parameter_groups(self, weight_decay: float):
        """AdamW groups: decay on matrices, embeddings and U, V; none on biases,
        LayerNorm gains and the filter θ (a gain, like LayerNorm's)."""
        decay, no_decay = [], []
        for name, p in self.named_parameters():
            (decay if p.dim() >= 2 and not name.endswith("attn.theta") else no_decay).append(p)
        return [{"params": decay, "weight_decay": weight_decay}, {"params": no_decay, "weight_decay": 0.0}]

    def file_state_dict(self) -> dict:
        """state_dict() under the file's tensor names."""
        return {_to_file_name(k): v for k, v in self.state_dict().items()}


def save_model_dir(model: SDLMHeadModel, directory, dtype=torch.float32) -> dict:
    os.makedirs(directory, exist_ok=True)
    tensors = {name: t.detach().to(dtype) for name, t in model.file_state_dict().items()}
    safetensors_io.write(os.path.join(directory, "model.safetensors"), tensors, {"format": "pt"})
    hf_layout.write_config(os.path.join(directory, "config.json"), model.config.to_hf(hf_layout.DTYPE_NAMES[dtype]))
    return tensors


def load_model_dir(directory, dtype=torch.float64):
    """Strict: every tensor present with its shape, nothing extra."""
    with open(os.path.join(directory, "config.json"), encoding="utf-8") as f:
        config = SDConfig.from_hf(json.load(f))
    tensors, _ = safetensors_io.read(os.path.join(directory, "model.safetensors"))
    model = SDLMHeadModel(config)
    hf_layout.check_tensors(directory, tensors, model.file_state_dict())
    model = hf_layout.load_weights(model, {_to_module_name(k): v for k, v in tensors.items()}, dtype)
    return model, config
