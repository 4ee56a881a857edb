"""Plain-PyTorch GPT-2 and GPT-NeoX (Pythia) language models.

Written from the published architecture descriptions and checked against
Hugging Face's modeling code (see tools/python/README.md, "Conventions"), so
that `state_dict()` yields exactly the tensor names, shapes and layouts that
`GPT2LMHeadModel.save_pretrained` / `GPTNeoXForCausalLM.save_pretrained` write
to model.safetensors:

  GPT-2 (sequential residual, learned positions, tied head):
    transformer.wte.weight [V, d]            transformer.wpe.weight [P, d]
    transformer.h.{i}.ln_1.{weight,bias} [d]
    transformer.h.{i}.attn.c_attn.{weight [d, 3d], bias [3d]}   (Conv1D: y = x W + b)
    transformer.h.{i}.attn.c_proj.{weight [d, d], bias [d]}
    transformer.h.{i}.ln_2.{weight,bias} [d]
    transformer.h.{i}.mlp.c_fc.{weight [d, I], bias [I]}
    transformer.h.{i}.mlp.c_proj.{weight [I, d], bias [d]}
    transformer.ln_f.{weight,bias} [d]
    (lm_head.weight is wte.weight; HF does not write it to safetensors.)

  GPT-NeoX (parallel or sequential residual, partial rotary, untied head):
    gpt_neox.embed_in.weight [V, d]
    gpt_neox.layers.{i}.input_layernorm.{weight,bias} [d]
    gpt_neox.layers.{i}.post_attention_layernorm.{weight,bias} [d]
    gpt_neox.layers.{i}.attention.query_key_value.{weight [3d, d], bias [3d]}  (nn.Linear: y = x W^T + b)
    gpt_neox.layers.{i}.attention.dense.{weight [d, d], bias [d]}
    gpt_neox.layers.{i}.mlp.dense_h_to_4h.{weight [I, d], bias [I]}
    gpt_neox.layers.{i}.mlp.dense_4h_to_h.{weight [d, I], bias [d]}
    gpt_neox.final_layer_norm.{weight,bias} [d]
    embed_out.weight [V, d]

Both forwards accept a `taps` dict; when given, it receives detached copies of
  "embedding"            token (+ position) embedding           [B, T, d]
  "{i}.block_input"      input of block i                       [B, T, d]
  "{i}.attn_output"      attention after its output projection,  [B, T, d]
                         before the residual add
  "{i}.mlp_input"        MLP input, after its LayerNorm          [B, T, d]
  "{i}.mlp_output"       MLP output, before the residual add     [B, T, d]
  "{i}.block_output"     output of block i                       [B, T, d]
"""

import dataclasses
import math
from dataclasses import dataclass

import torch
from torch import nn


# ---------------------------------------------------------------- activations


def gelu_tanh(x: torch.Tensor) -> torch.Tensor:
    """GPT-2's "gelu_new": 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))."""
    return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * torch.pow(x, 3.0))))


def gelu_erf(x: torch.Tensor) -> torch.Tensor:
    """Exact GELU ("gelu" in HF configs): 0.5 x (1 + erf(x / sqrt 2))."""
    return 0.5 * x * (1.0 + torch.erf(x / math.sqrt(2.0)))


ACTIVATIONS = {"gelu_new": gelu_tanh, "gelu": gelu_erf}


def causal_softmax_attention(q, k, v, scale: float):
    """softmax(q k^T * scale + causal mask) v for q, k, v [B, H, T, hd].

    Masked scores are set to the dtype's lowest finite value (as HF does), so
    a fully masked row cannot arise: position 0 always sees itself.
    """
    t = q.shape[-2]
    scores = torch.matmul(q, k.transpose(-1, -2)) * scale  # [B, H, T, T]
    allowed = torch.ones(t, t, dtype=torch.bool, device=q.device).tril()
    scores = scores.masked_fill(~allowed, torch.finfo(scores.dtype).min)
    return torch.matmul(torch.softmax(scores, dim=-1), v)


def _record(taps, name, value):
    if taps is not None:
        taps[name] = value.detach().clone()


def _mlp_with_taps(mlp, m_in, taps, prefix):
    """mlp(m_in), recording its input and output as "{prefix}mlp_input" and "{prefix}mlp_output"."""
    _record(taps, prefix + "mlp_input", m_in)
    m = mlp(m_in)
    _record(taps, prefix + "mlp_output", m)
    return m


def residual_block(x, attend, ln_2, mlp, taps, prefix, parallel=False):
    """One pre-norm transformer block with its taps: a = attend(x) (the
    attention of the normalised input, the block's choice), then
    sequential: h = x + a, out = h + mlp(ln_2(h))  (GPT-2, Llama, NeoX's option);
    parallel:   out = mlp(ln_2(x)) + a + x          (GPT-NeoX's default)."""
    _record(taps, prefix + "block_input", x)
    a = attend(x)
    _record(taps, prefix + "attn_output", a)
    if parallel:
        # both branches read the block input
        out = _mlp_with_taps(mlp, ln_2(x), taps, prefix) + a + x
    else:
        h = x + a
        out = h + _mlp_with_taps(mlp, ln_2(h), taps, prefix)
    _record(taps, prefix + "block_output", out)
    return out


def init_gpt2_style(model, generator, n_layer, gains, residual_projections, constants=None):
    """GPT-2's initialization, shared by every model here: N(0, initializer_range)
    for the matrices, residual output projections scaled by 1/sqrt(2 n_layer),
    zero biases, unit LayerNorm gains. `gains` and `residual_projections` are
    parameter name suffixes; `constants` maps a suffix to a value its parameters
    are filled with instead (the S–D filter θ). Draws from `generator` in
    parameter order."""
    std = model.config.initializer_range
    constants = constants or {}
    with torch.no_grad():
        for name, p in model.named_parameters():
            constant = next((v for suffix, v in constants.items() if name.endswith(suffix)), None)
            if constant is not None:
                p.fill_(constant)
            elif name.endswith(gains):
                p.fill_(1.0)
            elif p.dim() == 1:
                p.zero_()
            elif name.endswith(residual_projections):
                p.normal_(0.0, std / math.sqrt(2 * n_layer), generator=generator)
            else:
                p.normal_(0.0, std, generator=generator)


# ------------------------------------------------------------ config.json


def check_hf_options(cfg: dict, model_type: str, family: str, supported: dict) -> None:
    """Raises unless config.json `cfg` is of `model_type` and each option of
    `supported` (one this implementation does not model) has the one value
    supported, or is absent."""
    if cfg.get("model_type") != model_type:
        raise ValueError(f"expected model_type {model_type!r}, found {cfg.get('model_type')!r}")
    for key, value in supported.items():
        if cfg.get(key, value) != value:
            raise ValueError(f"unsupported {family} option {key}={cfg[key]!r}")


def hf_fields(config_class, cfg: dict, required, optional) -> dict:
    """Keyword arguments of the dataclass `config_class` read from the
    config.json keys of the same names: the `required` keys must be present,
    an absent `optional` one takes the field's default."""
    defaults = {f.name: f.default for f in dataclasses.fields(config_class)}
    return {**{key: cfg[key] for key in required}, **{key: cfg.get(key, defaults[key]) for key in optional}}


# ---------------------------------------------------------------------- GPT-2


@dataclass
class Gpt2Sizes:
    """The sizes of a model in GPT-2's layout, under their config.json names
    (required there). Gpt2Config and sd_model.SDConfig begin with them."""

    vocab_size: int = 256
    n_positions: int = 128
    n_embd: int = 128
    n_layer: int = 4
    n_head: int = 4

    @staticmethod
    def size_keys() -> tuple:
        """The config.json keys of the sizes (not of a subclass's other fields)."""
        return tuple(f.name for f in dataclasses.fields(Gpt2Sizes))


@dataclass
class Gpt2Config(Gpt2Sizes):
    n_inner: int | None = None
    layer_norm_epsilon: float = 1e-5
    activation_function: str = "gelu_new"
    initializer_range: float = 0.02
    # GPT-2's <|endoftext|> (50256) in a BPE vocabulary; None for byte-level models.
    eos_token_id: int | None = None

    @property
    def inner_size(self) -> int:
        return self.n_inner if self.n_inner is not None else 4 * self.n_embd

    def to_hf(self, torch_dtype: str = "float32") -> dict:
        """config.json content as GPT2Config.save_pretrained writes it.

        Dropouts are 0 because the shipped models were trained without
        dropout; bos/eos are null for a byte-level vocabulary (it has none)
        and <|endoftext|> for GPT-2's BPE vocabulary, as in HF's gpt2 config.
        """
        return {
            "activation_function": self.activation_function,
            "architectures": ["GPT2LMHeadModel"],
            "attn_pdrop": 0.0,
            "bos_token_id": self.eos_token_id,
            "embd_pdrop": 0.0,
            "eos_token_id": self.eos_token_id,
            "initializer_range": self.initializer_range,
            "layer_norm_epsilon": self.layer_norm_epsilon,
            "model_type": "gpt2",
            "n_ctx": self.n_positions,
            "n_embd": self.n_embd,
            "n_head": self.n_head,
            "n_inner": self.n_inner,
            "n_layer": self.n_layer,
            "n_positions": self.n_positions,
            "reorder_and_upcast_attn": False,
            "resid_pdrop": 0.0,
            "scale_attn_by_inverse_layer_idx": False,
            "scale_attn_weights": True,
            "summary_activation": None,
            "summary_first_dropout": 0.1,
            "summary_proj_to_labels": True,
            "summary_type": "cls_index",
            "summary_use_proj": True,
            "torch_dtype": torch_dtype,
            "use_cache": True,
            "vocab_size": self.vocab_size,
        }

    @classmethod
    def from_hf(cls, cfg: dict) -> "Gpt2Config":
        check_hf_options(
            cfg,
            "gpt2",
            "GPT-2",
            {
                "scale_attn_weights": True,
                "scale_attn_by_inverse_layer_idx": False,
                "reorder_and_upcast_attn": False,
                "add_cross_attention": False,
            },
        )
        return cls(
            **hf_fields(
                cls,
                cfg,
                required=cls.size_keys(),
                optional=("n_inner", "layer_norm_epsilon", "activation_function", "initializer_range", "eos_token_id"),
            )
        )


class Conv1D(nn.Module):
    """GPT-2's "Conv1D": a dense layer stored as weight [in, out], y = x W + b."""

    def __init__(self, n_in: int, n_out: int):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(n_in, n_out))
        self.bias = nn.Parameter(torch.zeros(n_out))

    def forward(self, x):
        return torch.matmul(x, self.weight) + self.bias


class Gpt2Attention(nn.Module):
    def __init__(self, config: Gpt2Config):
        super().__init__()
        if config.n_embd % config.n_head != 0:
            raise ValueError("n_embd must be a multiple of n_head")
        self.n_head = config.n_head
        self.head_dim = config.n_embd // config.n_head
        self.c_attn = Conv1D(config.n_embd, 3 * config.n_embd)
        self.c_proj = Conv1D(config.n_embd, config.n_embd)

    def forward(self, x):  # x [B, T, d]
        b, t, d = x.shape
        # c_attn's output columns are q | k | v, each d wide; within each, head
        # h owns columns [h*hd, (h+1)*hd).
        q, k, v = self.c_attn(x).split(d, dim=-1)

        def heads(z):  # [B, T, d] -> [B, H, T, hd]
            return z.view(b, t, self.n_head, self.head_dim).transpose(1, 2)

        y = causal_softmax_attention(heads(q), heads(k), heads(v), 1.0 / math.sqrt(self.head_dim))
        return self.c_proj(y.transpose(1, 2).reshape(b, t, d))


class Gpt2Mlp(nn.Module):
    def __init__(self, config: Gpt2Config):
        super().__init__()
        self.c_fc = Conv1D(config.n_embd, config.inner_size)
        self.c_proj = Conv1D(config.inner_size, config.n_embd)
        self.act = ACTIVATIONS[config.activation_function]

    def forward(self, x):
        return self.c_proj(self.act(self.c_fc(x)))


class Gpt2Block(nn.Module):
    """Sequential residual: h = x + attn(ln_1(x)), out = h + mlp(ln_2(h)).

    `attn` replaces GPT-2's attention (sd_model.py passes S–D attention); with
    `attn_layer_norm` false there is no ln_1 and the attention reads x itself.
    """

    def __init__(self, config: Gpt2Config, attn: nn.Module | None = None, attn_layer_norm: bool = True):
        super().__init__()
        self.ln_1 = nn.LayerNorm(config.n_embd, eps=config.layer_norm_epsilon) if attn_layer_norm else None
        self.attn = attn if attn is not None else Gpt2Attention(config)
        self.ln_2 = nn.LayerNorm(config.n_embd, eps=config.layer_norm_epsilon)
        self.mlp = Gpt2Mlp(config)

    def forward(self, x, taps=None, prefix=""):
        def attend(x):
            return self.attn(self.ln_1(x) if self.ln_1 is not None else x)

        return residual_block(x, attend, self.ln_2, self.mlp, taps, prefix)


class Gpt2Body(nn.Module):
    """HF's GPT2Model: embeddings, blocks (`make_block(layer)`, GPT-2's by
    default), final LayerNorm."""

    def __init__(self, config: Gpt2Config, make_block=None):
        super().__init__()
        make_block = make_block or (lambda layer: Gpt2Block(config))
        self.wte = nn.Embedding(config.vocab_size, config.n_embd)
        self.wpe = nn.Embedding(config.n_positions, config.n_embd)
        self.h = nn.ModuleList(make_block(i) for i in range(config.n_layer))
        self.ln_f = nn.LayerNorm(config.n_embd, eps=config.layer_norm_epsilon)


class Gpt2LMHeadModel(nn.Module):
    def __init__(self, config: Gpt2Config, make_block=None):
        super().__init__()
        self.config = config
        self.transformer = Gpt2Body(config, make_block)

    def forward(self, tokens, taps=None):
        """tokens [B, T] (int64, T <= n_positions) -> logits [B, T, V]."""
        t = tokens.shape[1]
        if t > self.config.n_positions:
            raise ValueError(f"sequence of {t} tokens exceeds n_positions {self.config.n_positions}")
        body = self.transformer
        positions = torch.arange(t, device=tokens.device)
        x = body.wte(tokens) + body.wpe(positions)[None]
        _record(taps, "embedding", x)
        for i, block in enumerate(body.h):
            x = block(x, taps, f"{i}.")
        # Tied head: logits = ln_f(x) wte^T.
        return torch.matmul(body.ln_f(x), body.wte.weight.t())

    def init_weights(self, generator: torch.Generator):
        """GPT-2's scheme (init_gpt2_style); the residual output projections are
        attn.c_proj and mlp.c_proj, and init_constants() says which parameters
        start at a constant instead."""
        init_gpt2_style(
            self,
            generator,
            self.config.n_layer,
            gains=("ln_1.weight", "ln_2.weight", "ln_f.weight"),
            residual_projections=("c_proj.weight",),
            constants=self.init_constants(),
        )

    def init_constants(self) -> dict:
        """Parameter name suffix -> the constant init_weights fills it with: none
        in GPT-2 (a subclass that adds parameters names them here)."""
        return {}


# ------------------------------------------------------------------- GPT-NeoX


@dataclass
class NeoXConfig:
    vocab_size: int = 256
    max_position_embeddings: int = 128
    hidden_size: int = 128
    num_hidden_layers: int = 4
    num_attention_heads: int = 4
    intermediate_size: int = 512
    rotary_pct: float = 0.25
    rotary_emb_base: int = 10000
    use_parallel_residual: bool = True
    hidden_act: str = "gelu"
    layer_norm_eps: float = 1e-5
    initializer_range: float = 0.02

    @property
    def head_size(self) -> int:
        return self.hidden_size // self.num_attention_heads

    @property
    def rotary_ndims(self) -> int:
        # HF: int(head_size * rotary_pct), truncation toward zero.
        return int(self.head_size * self.rotary_pct)

    def to_hf(self, torch_dtype: str = "float32") -> dict:
        """config.json content as GPTNeoXConfig.save_pretrained writes it."""
        return {
            "architectures": ["GPTNeoXForCausalLM"],
            "attention_bias": True,
            "attention_dropout": 0.0,
            "bos_token_id": None,
            "classifier_dropout": 0.1,
            "eos_token_id": None,
            "hidden_act": self.hidden_act,
            "hidden_dropout": 0.0,
            "hidden_size": self.hidden_size,
            "initializer_range": self.initializer_range,
            "intermediate_size": self.intermediate_size,
            "layer_norm_eps": self.layer_norm_eps,
            "max_position_embeddings": self.max_position_embeddings,
            "model_type": "gpt_neox",
            "num_attention_heads": self.num_attention_heads,
            "num_hidden_layers": self.num_hidden_layers,
            "rope_scaling": None,
            "rotary_emb_base": self.rotary_emb_base,
            "rotary_pct": self.rotary_pct,
            "tie_word_embeddings": False,
            "torch_dtype": torch_dtype,
            "use_cache": True,
            "use_parallel_residual": self.use_parallel_residual,
            "vocab_size": self.vocab_size,
        }

    @classmethod
    def from_hf(cls, cfg: dict) -> "NeoXConfig":
        check_hf_options(
            cfg, "gpt_neox", "GPT-NeoX", {"rope_scaling": None, "attention_bias": True, "tie_word_embeddings": False}
        )
        return cls(
            **hf_fields(
                cls,
                cfg,
                required=(
                    "vocab_size",
                    "max_position_embeddings",
                    "hidden_size",
                    "num_hidden_layers",
                    "num_attention_heads",
                    "intermediate_size",
                ),
                optional=(
                    "rotary_pct",
                    "rotary_emb_base",
                    "use_parallel_residual",
                    "hidden_act",
                    "layer_norm_eps",
                    "initializer_range",
                ),
            )
        )


def rotary_cos_sin(t: int, rotary_ndims: int, base: float, dtype, device=None):
    """cos, sin tables [T, rotary_ndims] in HF's layout.

    inv_freq[j] = base^(-2j / rotary_ndims), j < rotary_ndims / 2, and the
    angle table is cat(freqs, freqs): dimension j and j + rotary_ndims/2 share
    a frequency (the "rotate_half" pairing, not interleaved pairs). Computed in
    float64 and rounded once to `dtype` (HF computes the angles in float32).
    """
    inv_freq = 1.0 / (base ** (torch.arange(0, rotary_ndims, 2, dtype=torch.float64) / rotary_ndims))
    freqs = torch.arange(t, dtype=torch.float64)[:, None] * inv_freq[None, :]  # [T, rot/2]
    angles = torch.cat([freqs, freqs], dim=-1)  # [T, rot]
    return angles.cos().to(dtype=dtype, device=device), angles.sin().to(dtype=dtype, device=device)


def rotate_half(x):
    """HF's rotate_half: (x1, x2) -> (-x2, x1) with x1, x2 the two halves of the last dim."""
    half = x.shape[-1] // 2
    return torch.cat([-x[..., half:], x[..., :half]], dim=-1)


class NeoXAttention(nn.Module):
    def __init__(self, config: NeoXConfig):
        super().__init__()
        if config.hidden_size % config.num_attention_heads != 0:
            raise ValueError("hidden_size must be a multiple of num_attention_heads")
        self.n_head = config.num_attention_heads
        self.head_size = config.head_size
        self.rotary_ndims = config.rotary_ndims
        self.rotary_base = config.rotary_emb_base
        self.query_key_value = nn.Linear(config.hidden_size, 3 * config.hidden_size)
        self.dense = nn.Linear(config.hidden_size, config.hidden_size)

    def forward(self, x):  # x [B, T, d]
        b, t, d = x.shape
        # The fused output is viewed as [B, T, H, 3 hd]: head h owns rows
        # [3 hd h, 3 hd (h+1)) of the weight, as q_h | k_h | v_h.
        qkv = self.query_key_value(x).view(b, t, self.n_head, 3 * self.head_size)
        q = qkv[..., : self.head_size].transpose(1, 2)  # [B, H, T, hd]
        k = qkv[..., self.head_size : 2 * self.head_size].transpose(1, 2)
        v = qkv[..., 2 * self.head_size :].transpose(1, 2)
        r = self.rotary_ndims
        if r > 0:
            cos, sin = rotary_cos_sin(t, r, self.rotary_base, x.dtype, x.device)
            q = torch.cat([q[..., :r] * cos + rotate_half(q[..., :r]) * sin, q[..., r:]], dim=-1)
            k = torch.cat([k[..., :r] * cos + rotate_half(k[..., :r]) * sin, k[..., r:]], dim=-1)
        y = causal_softmax_attention(q, k, v, self.head_size**-0.5)
        return self.dense(y.transpose(1, 2).reshape(b, t, d))


class NeoXMlp(nn.Module):
    def __init__(self, config: NeoXConfig):
        super().__init__()
        self.dense_h_to_4h = nn.Linear(config.hidden_size, config.intermediate_size)
        self.dense_4h_to_h = nn.Linear(config.intermediate_size, config.hidden_size)
        self.act = ACTIVATIONS[config.hidden_act]

    def forward(self, x):
        return self.dense_4h_to_h(self.act(self.dense_h_to_4h(x)))


class NeoXLayer(nn.Module):
    def __init__(self, config: NeoXConfig):
        super().__init__()
        self.parallel = config.use_parallel_residual
        self.input_layernorm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        self.post_attention_layernorm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        self.attention = NeoXAttention(config)
        self.mlp = NeoXMlp(config)

    def forward(self, x, taps=None, prefix=""):
        return residual_block(
            x,
            lambda x: self.attention(self.input_layernorm(x)),
            self.post_attention_layernorm,
            self.mlp,
            taps,
            prefix,
            parallel=self.parallel,
        )


class NeoXBody(nn.Module):
    """HF's GPTNeoXModel: input embedding, layers, final LayerNorm."""

    def __init__(self, config: NeoXConfig):
        super().__init__()
        self.embed_in = nn.Embedding(config.vocab_size, config.hidden_size)
        self.layers = nn.ModuleList(NeoXLayer(config) for _ in range(config.num_hidden_layers))
        self.final_layer_norm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)


class NeoXForCausalLM(nn.Module):
    def __init__(self, config: NeoXConfig):
        super().__init__()
        self.config = config
        self.gpt_neox = NeoXBody(config)
        self.embed_out = nn.Linear(config.hidden_size, config.vocab_size, bias=False)

    def forward(self, tokens, taps=None):
        """tokens [B, T] (int64) -> logits [B, T, V]."""
        body = self.gpt_neox
        x = body.embed_in(tokens)
        _record(taps, "embedding", x)
        for i, layer in enumerate(body.layers):
            x = layer(x, taps, f"{i}.")
        return self.embed_out(body.final_layer_norm(x))

    def init_weights(self, generator: torch.Generator):
        """GPT-2's scheme (init_gpt2_style); the residual output projections are
        attention.dense and mlp.dense_4h_to_h."""
        init_gpt2_style(
            self,
            generator,
            self.config.num_hidden_layers,
            gains=("layernorm.weight", "final_layer_norm.weight"),
            residual_projections=("attention.dense.weight", "dense_4h_to_h.weight"),
        )


# -------------------------------------------------------------------- helpers


def config_from_hf(cfg: dict):
    """Gpt2Config, NeoXConfig or LlamaConfig (llama.py) from a parsed config.json."""
    from . import llama  # llama.py imports this module

    kind = cfg.get("model_type")
    if kind == "gpt2":
        return Gpt2Config.from_hf(cfg)
    if kind == "gpt_neox":
        return NeoXConfig.from_hf(cfg)
    if kind in llama.MODEL_TYPES:
        return llama.LlamaConfig.from_hf(cfg)
    raise ValueError(f"unknown model_type {kind!r} (expected 'gpt2', 'gpt_neox' or one of {llama.MODEL_TYPES})")


def build_model(config):
    from . import llama

    if isinstance(config, Gpt2Config):
        return Gpt2LMHeadModel(config)
    if isinstance(config, NeoXConfig):
        return NeoXForCausalLM(config)
    if isinstance(config, llama.LlamaConfig):
        return llama.LlamaForCausalLM(config)
    raise TypeError(f"unknown config type {type(config).__name__}")


def context_length(config) -> int:
    return config.n_positions if isinstance(config, Gpt2Config) else config.max_position_embeddings
