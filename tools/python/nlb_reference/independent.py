"""A second, deliberately different formulation of the models (GPT-2, GPT-NeoX
and the Llama family), for checking.

Pure numpy in float64 with explicit loops over heads and positions: it reads
the weights by their Hugging Face names from a plain dict of arrays (not from
the torch modules), normalises with an explicit mean/variance, evaluates GELU
with math.tanh / math.erf, applies rotary embeddings as 2x2 rotations of the
pairs (j, j + r/2), and sums attention only over the positions s <= t instead
of masking. It is slow (O(T^2 H hd) Python loop iterations) and meant for
short inputs only.
"""

import math

import numpy as np

_erf = np.vectorize(math.erf)
_tanh = np.vectorize(math.tanh)


def layer_norm(x, weight, bias, eps):
    mean = x.mean(axis=-1, keepdims=True)
    var = ((x - mean) ** 2).mean(axis=-1, keepdims=True)
    return (x - mean) / np.sqrt(var + eps) * weight + bias


def gelu_tanh(x):
    return 0.5 * x * (1.0 + _tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x * x * x)))


def gelu_erf(x):
    return 0.5 * x * (1.0 + _erf(x / math.sqrt(2.0)))


def attend(q, k, v):
    """Causal attention of one head by explicit loops; q, k, v [T, hd]."""
    t_len, hd = q.shape
    out = np.zeros_like(q)
    for t in range(t_len):
        scores = np.array([sum(q[t, c] * k[s, c] for c in range(hd)) / math.sqrt(hd) for s in range(t + 1)])
        weights = np.exp(scores - scores.max())
        weights /= weights.sum()
        for s in range(t + 1):
            out[t] += weights[s] * v[s]
    return out


def gpt2_forward(w, cfg, tokens):
    """w: HF-name -> float64 array; cfg: parsed config.json; tokens [T].
    Returns (logits [T, V], taps dict like the torch modules, without batch)."""
    d, n_head, eps = cfg["n_embd"], cfg["n_head"], cfg["layer_norm_epsilon"]
    hd = d // n_head
    act = gelu_tanh if cfg["activation_function"] == "gelu_new" else gelu_erf
    p = "transformer."
    x = w[p + "wte.weight"][tokens] + w[p + "wpe.weight"][np.arange(len(tokens))]
    taps = {"embedding": x}
    for i in range(cfg["n_layer"]):
        b = f"{p}h.{i}."
        taps[f"{i}.block_input"] = x
        h = layer_norm(x, w[b + "ln_1.weight"], w[b + "ln_1.bias"], eps)
        qkv = h @ w[b + "attn.c_attn.weight"] + w[b + "attn.c_attn.bias"]  # [T, 3d], Conv1D: x W + b
        heads = []
        for hh in range(n_head):
            cols = slice(hh * hd, (hh + 1) * hd)
            q = qkv[:, :d][:, cols]
            k = qkv[:, d : 2 * d][:, cols]
            v = qkv[:, 2 * d :][:, cols]
            heads.append(attend(q, k, v))
        a = np.concatenate(heads, axis=1) @ w[b + "attn.c_proj.weight"] + w[b + "attn.c_proj.bias"]
        taps[f"{i}.attn_output"] = a
        x = x + a
        m_in = layer_norm(x, w[b + "ln_2.weight"], w[b + "ln_2.bias"], eps)
        taps[f"{i}.mlp_input"] = m_in
        m = act(m_in @ w[b + "mlp.c_fc.weight"] + w[b + "mlp.c_fc.bias"]) @ w[b + "mlp.c_proj.weight"]
        m = m + w[b + "mlp.c_proj.bias"]
        taps[f"{i}.mlp_output"] = m
        x = x + m
        taps[f"{i}.block_output"] = x
    x = layer_norm(x, w[p + "ln_f.weight"], w[p + "ln_f.bias"], eps)
    return x @ w[p + "wte.weight"].T, taps


def rotate_pairs(x, position, rotary_ndims, base):
    """Rotates the pairs (x[j], x[j + r/2]), j < r/2, of one head vector by the
    angle position * base^(-2j / r); dimensions >= r pass through."""
    out = x.copy()
    half = rotary_ndims // 2
    for j in range(half):
        theta = position * base ** (-2.0 * j / rotary_ndims)
        c, s = math.cos(theta), math.sin(theta)
        out[j] = c * x[j] - s * x[j + half]
        out[j + half] = s * x[j] + c * x[j + half]
    return out


def neox_forward(w, cfg, tokens):
    """As gpt2_forward, for a GPT-NeoX config and weights."""
    d, n_head, eps = cfg["hidden_size"], cfg["num_attention_heads"], cfg["layer_norm_eps"]
    hd = d // n_head
    rot = int(hd * cfg["rotary_pct"])
    base = float(cfg["rotary_emb_base"])
    act = gelu_erf if cfg["hidden_act"] == "gelu" else gelu_tanh
    t_len = len(tokens)
    p = "gpt_neox."
    x = w[p + "embed_in.weight"][tokens]
    taps = {"embedding": x}
    for i in range(cfg["num_hidden_layers"]):
        b = f"{p}layers.{i}."
        taps[f"{i}.block_input"] = x
        h = layer_norm(x, w[b + "input_layernorm.weight"], w[b + "input_layernorm.bias"], eps)
        qkv = h @ w[b + "attention.query_key_value.weight"].T + w[b + "attention.query_key_value.bias"]
        heads = []
        for hh in range(n_head):
            block = qkv[:, hh * 3 * hd : (hh + 1) * 3 * hd]  # q_h | k_h | v_h, interleaved per head
            q = np.stack([rotate_pairs(block[t, :hd], t, rot, base) for t in range(t_len)])
            k = np.stack([rotate_pairs(block[t, hd : 2 * hd], t, rot, base) for t in range(t_len)])
            heads.append(attend(q, k, block[:, 2 * hd :]))
        a = np.concatenate(heads, axis=1) @ w[b + "attention.dense.weight"].T + w[b + "attention.dense.bias"]
        taps[f"{i}.attn_output"] = a
        ln2_in = x if cfg["use_parallel_residual"] else x + a
        m_in = layer_norm(ln2_in, w[b + "post_attention_layernorm.weight"], w[b + "post_attention_layernorm.bias"], eps)
        taps[f"{i}.mlp_input"] = m_in
        m = act(m_in @ w[b + "mlp.dense_h_to_4h.weight"].T + w[b + "mlp.dense_h_to_4h.bias"])
        m = m @ w[b + "mlp.dense_4h_to_h.weight"].T + w[b + "mlp.dense_4h_to_h.bias"]
        taps[f"{i}.mlp_output"] = m
        x = x + a + m
        taps[f"{i}.block_output"] = x
    x = layer_norm(x, w[p + "final_layer_norm.weight"], w[p + "final_layer_norm.bias"], eps)
    return x @ w["embed_out.weight"].T, taps


def llama_frequencies(cfg):
    """The rotary frequency of each pair j < head_dim/2 of a Llama-family
    config.json, one scalar at a time: theta^(-2j/hd), then the rope_scaling
    rule applied by cases on the pair's wavelength (llama3) or as a division
    (linear)."""
    hd = cfg.get("head_dim") or cfg["hidden_size"] // cfg["num_attention_heads"]
    scaling = cfg.get("rope_scaling") or {}
    kind = scaling.get("rope_type", scaling.get("type", "default"))
    out = []
    for j in range(hd // 2):
        f = float(cfg["rope_theta"]) ** (-2.0 * j / hd)
        if kind == "linear":
            f = f / scaling["factor"]
        elif kind == "llama3":
            wavelength = 2.0 * math.pi / f
            short = scaling["original_max_position_embeddings"] / scaling["high_freq_factor"]
            long = scaling["original_max_position_embeddings"] / scaling["low_freq_factor"]
            if wavelength > long:
                f = f / scaling["factor"]
            elif wavelength >= short:
                # linear in original / wavelength between the two bounds
                t = (scaling["original_max_position_embeddings"] / wavelength - scaling["low_freq_factor"]) / (
                    scaling["high_freq_factor"] - scaling["low_freq_factor"]
                )
                f = t * f + (1.0 - t) * f / scaling["factor"]
        out.append(f)
    return out


def llama_forward(w, cfg, tokens):
    """As gpt2_forward, for a Llama-family (llama, qwen2, mistral) config and
    weights: RMSNorm by an explicit sum of squares, SiLU with math.exp, query
    head h reading key/value head h // (heads / kv_heads), rotary pairs
    (j, j + hd/2) rotated as 2x2 matrices by position * llama_frequencies[j]."""
    d, heads, eps = cfg["hidden_size"], cfg["num_attention_heads"], cfg["rms_norm_eps"]
    kv_heads = cfg.get("num_key_value_heads") or heads
    hd = cfg.get("head_dim") or d // heads
    group = heads // kv_heads
    freq = llama_frequencies(cfg)
    silu = np.vectorize(lambda v: v / (1.0 + math.exp(-v)))

    def rms(x, weight):
        return np.stack([row / math.sqrt(sum(v * v for v in row) / len(row) + eps) for row in x]) * weight

    def rotate(x, position):
        out = x.copy()
        for j in range(hd // 2):
            c, s = math.cos(position * freq[j]), math.sin(position * freq[j])
            out[j] = c * x[j] - s * x[j + hd // 2]
            out[j + hd // 2] = s * x[j] + c * x[j + hd // 2]
        return out

    def linear(x, name):
        y = x @ w[name + ".weight"].T
        return y + w[name + ".bias"] if name + ".bias" in w else y

    t_len = len(tokens)
    x = w["model.embed_tokens.weight"][tokens]
    taps = {"embedding": x}
    for i in range(cfg["num_hidden_layers"]):
        b = f"model.layers.{i}."
        taps[f"{i}.block_input"] = x
        h = rms(x, w[b + "input_layernorm.weight"])
        q, k, v = (linear(h, b + f"self_attn.{n}_proj") for n in "qkv")
        outputs = []
        for hh in range(heads):
            g = hh // group
            qh = np.stack([rotate(q[t, hh * hd : (hh + 1) * hd], t) for t in range(t_len)])
            kh = np.stack([rotate(k[t, g * hd : (g + 1) * hd], t) for t in range(t_len)])
            outputs.append(attend(qh, kh, v[:, g * hd : (g + 1) * hd]))
        a = np.concatenate(outputs, axis=1) @ w[b + "self_attn.o_proj.weight"].T
        taps[f"{i}.attn_output"] = a
        x = x + a
        m_in = rms(x, w[b + "post_attention_layernorm.weight"])
        taps[f"{i}.mlp_input"] = m_in
        gated = silu(m_in @ w[b + "mlp.gate_proj.weight"].T) * (m_in @ w[b + "mlp.up_proj.weight"].T)
        m = gated @ w[b + "mlp.down_proj.weight"].T
        taps[f"{i}.mlp_output"] = m
        x = x + m
        taps[f"{i}.block_output"] = x
    unembedding = w.get("lm_head.weight", w["model.embed_tokens.weight"])
    return rms(x, w["model.norm.weight"]) @ unembedding.T, taps


def expected_names(cfg):
    """The tensor names and shapes HF writes, listed from the specification
    (independently of the torch modules)."""
    if cfg["model_type"] == "gpt2":
        d, v, n_pos = cfg["n_embd"], cfg["vocab_size"], cfg["n_positions"]
        inner = cfg.get("n_inner") or 4 * d
        names = {"transformer.wte.weight": [v, d], "transformer.wpe.weight": [n_pos, d]}
        for i in range(cfg["n_layer"]):
            b = f"transformer.h.{i}."
            names.update({
                b + "ln_1.weight": [d], b + "ln_1.bias": [d],
                b + "attn.c_attn.weight": [d, 3 * d], b + "attn.c_attn.bias": [3 * d],
                b + "attn.c_proj.weight": [d, d], b + "attn.c_proj.bias": [d],
                b + "ln_2.weight": [d], b + "ln_2.bias": [d],
                b + "mlp.c_fc.weight": [d, inner], b + "mlp.c_fc.bias": [inner],
                b + "mlp.c_proj.weight": [inner, d], b + "mlp.c_proj.bias": [d],
            })
        names.update({"transformer.ln_f.weight": [d], "transformer.ln_f.bias": [d]})
        return names
    if cfg["model_type"] in ("llama", "qwen2", "mistral"):
        d, v, inner, heads = cfg["hidden_size"], cfg["vocab_size"], cfg["intermediate_size"], cfg["num_attention_heads"]
        kv = cfg.get("num_key_value_heads") or heads
        hd = cfg.get("head_dim") or d // heads
        bias = cfg["model_type"] == "qwen2" or cfg.get("attention_bias", False)
        names = {"model.embed_tokens.weight": [v, d], "model.norm.weight": [d]}
        if not cfg.get("tie_word_embeddings", True):
            names["lm_head.weight"] = [v, d]
        for i in range(cfg["num_hidden_layers"]):
            b = f"model.layers.{i}."
            names.update({
                b + "input_layernorm.weight": [d], b + "post_attention_layernorm.weight": [d],
                b + "self_attn.q_proj.weight": [heads * hd, d], b + "self_attn.k_proj.weight": [kv * hd, d],
                b + "self_attn.v_proj.weight": [kv * hd, d], b + "self_attn.o_proj.weight": [d, heads * hd],
                b + "mlp.gate_proj.weight": [inner, d], b + "mlp.up_proj.weight": [inner, d],
                b + "mlp.down_proj.weight": [d, inner],
            })
            if bias:
                names.update({b + "self_attn.q_proj.bias": [heads * hd], b + "self_attn.k_proj.bias": [kv * hd],
                              b + "self_attn.v_proj.bias": [kv * hd]})
        return names
    d, v, inner = cfg["hidden_size"], cfg["vocab_size"], cfg["intermediate_size"]
    names = {"gpt_neox.embed_in.weight": [v, d], "embed_out.weight": [v, d]}
    for i in range(cfg["num_hidden_layers"]):
        b = f"gpt_neox.layers.{i}."
        names.update({
            b + "input_layernorm.weight": [d], b + "input_layernorm.bias": [d],
            b + "post_attention_layernorm.weight": [d], b + "post_attention_layernorm.bias": [d],
            b + "attention.query_key_value.weight": [3 * d, d], b + "attention.query_key_value.bias": [3 * d],
            b + "attention.dense.weight": [d, d], b + "attention.dense.bias": [d],
            b + "mlp.dense_h_to_4h.weight": [inner, d], b + "mlp.dense_h_to_4h.bias": [inner],
            b + "mlp.dense_4h_to_h.weight": [d, inner], b + "mlp.dense_4h_to_h.bias": [d],
        })
    names.update({"gpt_neox.final_layer_norm.weight": [d], "gpt_neox.final_layer_norm.bias": [d]})
    return names
