"""The Llama family (model_type llama, qwen2, mistral) as a PyTorch reference,
written from the published architecture with Hugging Face tensor names:

  x = embed_tokens[tokens]
  per layer:  h = x + o_proj(attention(rms_norm(x)))
              x = h + down_proj(silu(gate_proj(m)) * up_proj(m)),  m = rms_norm(h)
  logits = lm_head(rms_norm(x))          (lm_head = embed_tokens when tied)

rms_norm(x) = x / sqrt(mean(x^2) + eps) * weight. Attention: q_proj gives
num_attention_heads heads of head_dim, k_proj and v_proj num_key_value_heads
heads (grouped-query attention: query head h reads key/value head
h // (num_attention_heads / num_key_value_heads)); rotary embeddings over the
whole head with the rotate_half pairing (j, j + head_dim/2) and
inv_freq[j] = rope_theta^(-2j / head_dim), rescaled by `rope_scaling`
(rope_inv_freq below); scale head_dim^-0.5, causal softmax. Qwen2 adds biases
to q, k and v. Taps as for GPT-2 and GPT-NeoX (models.py): "embedding", then
per layer "{i}.block_input", "attn_output", "mlp_input", "mlp_output",
"block_output".

Sliding-window attention (Mistral's sliding_window, Qwen2's
use_sliding_window) is refused where it would change the result: when the
window is shorter than the context the model is used at.
"""

import math
from dataclasses import dataclass
from typing import Optional

import torch
import torch.nn as nn

from .models import (
    _record,
    causal_softmax_attention,
    check_hf_options,
    hf_fields,
    init_gpt2_style,
    residual_block,
    rotate_half,
)

MODEL_TYPES = ("llama", "qwen2", "mistral")


@dataclass
class LlamaConfig:
    model_type: str = "llama"
    vocab_size: int = 256
    max_position_embeddings: int = 128
    hidden_size: int = 128
    intermediate_size: int = 352
    num_hidden_layers: int = 4
    num_attention_heads: int = 4
    num_key_value_heads: int = 2
    head_dim: Optional[int] = None  # hidden_size / num_attention_heads when absent
    rms_norm_eps: float = 1e-5
    rope_theta: float = 10000.0
    rope_scaling: Optional[dict] = None
    attention_bias: bool = False  # q, k, v biases; always true for qwen2
    tie_word_embeddings: bool = False
    sliding_window: Optional[int] = None
    initializer_range: float = 0.02
    bos_token_id: Optional[int] = None  # written to and read from config.json; not used by the forward
    eos_token_id: Optional[int] = None

    def __post_init__(self):
        if self.model_type not in MODEL_TYPES:
            raise ValueError(f"model_type {self.model_type!r}: expected one of {MODEL_TYPES}")
        if self.head_dim is None:
            if self.hidden_size % self.num_attention_heads != 0:
                raise ValueError("hidden_size must be a multiple of num_attention_heads when head_dim is absent")
            self.head_dim = self.hidden_size // self.num_attention_heads
        if self.head_dim % 2 != 0:
            raise ValueError(f"head_dim {self.head_dim}: rotary embeddings need an even head_dim")
        if self.num_key_value_heads < 1 or self.num_attention_heads % self.num_key_value_heads != 0:
            raise ValueError(
                f"num_key_value_heads {self.num_key_value_heads} must divide "
                f"num_attention_heads {self.num_attention_heads}"
            )
        if self.model_type == "qwen2":
            self.attention_bias = True
        rope_inv_freq(self)  # rejects an unknown or incomplete rope_scaling now

    @property
    def group_size(self) -> int:
        """Query heads per key/value head."""
        return self.num_attention_heads // self.num_key_value_heads

    def check_context(self, context: int) -> None:
        """Raises when sliding-window attention would change the result over `context` positions."""
        if self.sliding_window is not None and self.sliding_window < context:
            raise ValueError(
                f"sliding_window {self.sliding_window} is shorter than the context {context}: "
                "this reference attends over every earlier position"
            )

    @classmethod
    def from_hf(cls, cfg: dict) -> "LlamaConfig":
        kind = cfg.get("model_type")
        if kind not in MODEL_TYPES:
            raise ValueError(f"expected model_type one of {MODEL_TYPES}, found {kind!r}")
        check_hf_options(cfg, kind, kind, {"hidden_act": "silu", "mlp_bias": False, "pretraining_tp": 1})
        window = cfg.get("sliding_window")
        if kind == "qwen2" and not cfg.get("use_sliding_window", False):
            window = None  # Qwen2 ships the field but attends over everything unless this is set
        return cls(
            model_type=kind,
            **hf_fields(
                cls,
                cfg,
                required=(
                    "vocab_size",
                    "max_position_embeddings",
                    "hidden_size",
                    "intermediate_size",
                    "num_hidden_layers",
                    "num_attention_heads",
                ),
                optional=("head_dim", "rms_norm_eps", "rope_theta", "rope_scaling", "tie_word_embeddings",
                          "initializer_range", "bos_token_id", "eos_token_id"),
            ),
            # HF's rule: absent means one key/value head per query head (plain multi-head attention)
            num_key_value_heads=cfg.get("num_key_value_heads") or cfg["num_attention_heads"],
            attention_bias=cfg.get("attention_bias", kind == "qwen2"),
            sliding_window=window,
        )

    def to_hf(self, torch_dtype: str = "float32") -> dict:
        """config.json content with the keys the Hub's checkpoints of the family carry."""
        architectures = {"llama": "LlamaForCausalLM", "qwen2": "Qwen2ForCausalLM", "mistral": "MistralForCausalLM"}
        cfg = {
            "architectures": [architectures[self.model_type]],
            "attention_dropout": 0.0,
            "bos_token_id": self.bos_token_id,
            "eos_token_id": self.eos_token_id,
            "head_dim": self.head_dim,
            "hidden_act": "silu",
            "hidden_size": self.hidden_size,
            "initializer_range": self.initializer_range,
            "intermediate_size": self.intermediate_size,
            "max_position_embeddings": self.max_position_embeddings,
            "model_type": self.model_type,
            "num_attention_heads": self.num_attention_heads,
            "num_hidden_layers": self.num_hidden_layers,
            "num_key_value_heads": self.num_key_value_heads,
            "rms_norm_eps": self.rms_norm_eps,
            "rope_scaling": self.rope_scaling,
            "rope_theta": self.rope_theta,
            "tie_word_embeddings": self.tie_word_embeddings,
            "torch_dtype": torch_dtype,
            "use_cache": True,
            "vocab_size": self.vocab_size,
        }
        if self.model_type == "llama":
            cfg.update(attention_bias=self.attention_bias, mlp_bias=False, pretraining_tp=1)
        elif self.model_type == "mistral":
            cfg["sliding_window"] = self.sliding_window
        else:
            cfg.update(sliding_window=self.sliding_window, use_sliding_window=self.sliding_window is not None)
        return cfg


def rope_inv_freq(config: LlamaConfig) -> torch.Tensor:
    """inv_freq [head_dim / 2] in float64: rope_theta^(-2j / head_dim), then
    rescaled by config.rope_scaling:
      None                   unchanged;
      {"rope_type": "linear", "factor": f}
                             every frequency divided by f (positions / f);
      {"rope_type": "llama3", "factor": f, "low_freq_factor": lo,
       "high_freq_factor": hi, "original_max_position_embeddings": L}
                             with wavelength w = 2 pi / inv_freq: kept where
                             w < L / hi, divided by f where w > L / lo, and in
                             between the mix (1 - s) inv_freq / f + s inv_freq
                             with s = (L / w - lo) / (hi - lo).
    The kind is read from "rope_type" (or the older "type"); any other kind,
    or a missing parameter, raises ValueError naming it."""
    hd = config.head_dim
    inv_freq = 1.0 / (config.rope_theta ** (torch.arange(0, hd, 2, dtype=torch.float64) / hd))
    scaling = config.rope_scaling
    if scaling is None:
        return inv_freq
    kind = scaling.get("rope_type", scaling.get("type"))

    def parameter(name):
        if name not in scaling:
            raise ValueError(f"rope_scaling of type {kind!r} needs {name!r}")
        return float(scaling[name])

    if kind == "default":
        return inv_freq
    if kind == "linear":
        return inv_freq / parameter("factor")
    if kind == "llama3":
        factor, low, high = parameter("factor"), parameter("low_freq_factor"), parameter("high_freq_factor")
        original = parameter("original_max_position_embeddings")
        wavelength = 2 * math.pi / inv_freq
        smooth = (original / wavelength - low) / (high - low)
        mixed = (1 - smooth) * inv_freq / factor + smooth * inv_freq
        return torch.where(
            wavelength < original / high, inv_freq, torch.where(wavelength > original / low, inv_freq / factor, mixed)
        )
    raise ValueError(f"rope_scaling type {kind!r}: expected none, 'linear' or 'llama3'")


def rms_norm(x, weight, eps):
    return x * torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + eps) * weight


class RMSNorm(nn.Module):
    def __init__(self, size: int, eps: float):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(size))
        self.eps = eps

    def forward(self, x):
        return rms_norm(x, self.weight, self.eps)


class LlamaAttention(nn.Module):
    def __init__(self, config: LlamaConfig):
        super().__init__()
        self.config = config
        hd, bias = config.head_dim, config.attention_bias
        self.q_proj = nn.Linear(config.hidden_size, config.num_attention_heads * hd, bias=bias)
        self.k_proj = nn.Linear(config.hidden_size, config.num_key_value_heads * hd, bias=bias)
        self.v_proj = nn.Linear(config.hidden_size, config.num_key_value_heads * hd, bias=bias)
        self.o_proj = nn.Linear(config.num_attention_heads * hd, config.hidden_size, bias=False)

    def forward(self, x):  # x [B, T, d]
        c = self.config
        b, t, _ = x.shape
        hd = c.head_dim
        q = self.q_proj(x).view(b, t, c.num_attention_heads, hd).transpose(1, 2)  # [B, H, T, hd]
        k = self.k_proj(x).view(b, t, c.num_key_value_heads, hd).transpose(1, 2)  # [B, KV, T, hd]
        v = self.v_proj(x).view(b, t, c.num_key_value_heads, hd).transpose(1, 2)
        angles = torch.arange(t, dtype=torch.float64)[:, None] * rope_inv_freq(c)[None, :]  # [T, hd/2]
        angles = torch.cat([angles, angles], dim=-1)  # [T, hd]
        cos, sin = angles.cos().to(x.dtype), angles.sin().to(x.dtype)
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        # Each key/value head serves group_size consecutive query heads.
        k = k.repeat_interleave(c.group_size, dim=1)
        v = v.repeat_interleave(c.group_size, dim=1)
        y = causal_softmax_attention(q, k, v, hd**-0.5)  # [B, H, T, hd]
        return self.o_proj(y.transpose(1, 2).reshape(b, t, c.num_attention_heads * hd))


class SwiGluMlp(nn.Module):
    """down(silu(x W_gate) * (x W_up)): the gated MLP of the family (no biases)."""

    def __init__(self, config: LlamaConfig):
        super().__init__()
        self.gate_proj = nn.Linear(config.hidden_size, config.intermediate_size, bias=False)
        self.up_proj = nn.Linear(config.hidden_size, config.intermediate_size, bias=False)
        self.down_proj = nn.Linear(config.intermediate_size, config.hidden_size, bias=False)

    def forward(self, x):
        return self.down_proj(nn.functional.silu(self.gate_proj(x)) * self.up_proj(x))


class LlamaLayer(nn.Module):
    def __init__(self, config: LlamaConfig):
        super().__init__()
        self.input_layernorm = RMSNorm(config.hidden_size, config.rms_norm_eps)
        self.self_attn = LlamaAttention(config)
        self.post_attention_layernorm = RMSNorm(config.hidden_size, config.rms_norm_eps)
        self.mlp = SwiGluMlp(config)

    def forward(self, x, taps=None, prefix=""):
        return residual_block(
            x, lambda x: self.self_attn(self.input_layernorm(x)), self.post_attention_layernorm, self.mlp, taps, prefix
        )


class LlamaBody(nn.Module):
    """HF's LlamaModel: token embedding, layers, final RMSNorm."""

    def __init__(self, config: LlamaConfig):
        super().__init__()
        self.embed_tokens = nn.Embedding(config.vocab_size, config.hidden_size)
        self.layers = nn.ModuleList(LlamaLayer(config) for _ in range(config.num_hidden_layers))
        self.norm = RMSNorm(config.hidden_size, config.rms_norm_eps)


class LlamaForCausalLM(nn.Module):
    def __init__(self, config: LlamaConfig):
        super().__init__()
        self.config = config
        self.model = LlamaBody(config)
        untied = not config.tie_word_embeddings
        self.lm_head = nn.Linear(config.hidden_size, config.vocab_size, bias=False) if untied else None

    def unembedding(self) -> torch.Tensor:
        """[V, d]: lm_head's weight, or the token embedding when tied."""
        return self.model.embed_tokens.weight if self.lm_head is None else self.lm_head.weight

    def forward(self, tokens, taps=None):
        """tokens [B, T] (int64) -> logits [B, T, V]."""
        self.config.check_context(tokens.shape[-1])
        x = self.model.embed_tokens(tokens)
        _record(taps, "embedding", x)
        for i, layer in enumerate(self.model.layers):
            x = layer(x, taps, f"{i}.")
        return self.model.norm(x) @ self.unembedding().T

    def init_weights(self, generator: torch.Generator):
        """init_gpt2_style without the residual scaling (HF's Llama
        initialisation): N(0, initializer_range) for every matrix, zero biases,
        unit RMSNorm gains."""
        init_gpt2_style(
            self, generator, self.config.num_hidden_layers, gains=("norm.weight",), residual_projections=()
        )
