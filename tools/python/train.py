#!/usr/bin/python3
"""Trains a tiny byte-level GPT-2 or GPT-NeoX model (or one of the BPE models
below) on the KJV training split and writes it as a Hugging Face model
directory.

Usage:
  /usr/bin/python3 tools/python/train.py --arch gpt2 --out models/tiny-gpt2
  /usr/bin/python3 tools/python/train.py --arch neox --out models/tiny-neox
  /usr/bin/python3 tools/python/train.py --arch gpt2-bpe --out models/tiny-gpt2-bpe
  /usr/bin/python3 tools/python/train.py --arch llama --out models/tiny-llama
  /usr/bin/python3 tools/python/train.py --arch sd --out models/tiny-sd \
      [--sd-ranks 16,16,16,16] [--sd-filter diagonal|scalar] [--sd-attn-layer-norm]

--arch gpt2-bpe is GPT-2 with GPT-2's real BPE vocabulary (50 257 tokens): the
training and evaluation texts are token files (little-endian u16, as
`nlb tokenize --out` writes them; defaults out/data/*.gpt2.u16, see
models/README.md), the byte counts for the per-byte perplexity come from
--vocab, and the token embedding is stored as BF16.

--arch llama is a Llama 3-style model (model_type "llama", LlamaForCausalLM's
tensors; nlb_reference/llama.py): RMSNorm, SwiGLU MLP, grouped-query attention
(4 query heads, 2 key/value heads), rotary embeddings with "llama3"
rope_scaling, untied head, over the vocabulary of
models/llama3-style-tokenizer/tokenizer.json (3 256 BPE tokens + 5 special
tokens). Its texts are token files too (defaults out/data/*.llama3.u16,
written by tools/node/tokenize_corpus.mjs), the byte counts come from the
tokenizer.json, every tensor is stored as BF16 (torch_dtype "bfloat16", as the
Llama 3.2 checkpoints ship), and the tokenizer.json is copied into --out.

--arch sd is the GPT-2 layout with S–D attention (nlb_reference/sd_model.py):
per-layer routing ranks, a diagonal or scalar filter, and by default no
pre-attention LayerNorm (ln_1); the filter parameters θ get no weight decay.

Writes into --out: config.json, model.safetensors (F32), train_log.txt and
metrics.json (eval-protocol perplexities on data/kjv-eval.txt and
data/jargon-eval.txt, in float64, and the training settings).

Deterministic for a given machine and BLAS library: one thread, a fixed seed
for initialisation and batch sampling, deterministic algorithms. The number of
steps is fixed (no early stopping, no selection on the evaluation text; the
validation loss in the log is for information only).
"""

import argparse
import json
import math
import os
import shutil
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

from nlb_reference import hf_layout, protocol, sd_model  # noqa: E402
from nlb_reference.data import read_tokens  # noqa: E402
from nlb_reference.llama import LlamaConfig  # noqa: E402
from nlb_reference.models import Gpt2Config, NeoXConfig, build_model, context_length  # noqa: E402

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
LLAMA_TOKENIZER = os.path.join(REPO, "models", "llama3-style-tokenizer", "tokenizer.json")


def tokenizer_json_special_ids(path):
    """{content: id} of the added tokens of a tokenizer.json."""
    with open(path, encoding="utf-8") as f:
        return {t["content"]: t["id"] for t in json.load(f)["added_tokens"]}


def llama_config(args):
    """The tiny Llama 3-style model: 4 layers, d 96, 4 query heads of 24
    dimensions sharing 2 key/value heads, SwiGLU 256 (Llama's rule: 8/3 d
    rounded up to a multiple of 256), context 128 tokens. rope_scaling as
    Llama 3.1/3.2 (factor 8, low/high_freq_factor 1/4) with
    original_max_position_embeddings 48, so that at this context the rotary
    pairs fall in all three bands: with rope_theta 10000 and head_dim 24 the
    wavelengths 2 pi 10000^(2j/24) are 6.3 (j = 0: kept, < 48/4), 13.5 and
    29.2 (j = 1, 2: mixed, between 12 and 48) and 63 ... 29 000 (j = 3..11:
    divided by 8). The vocabulary is the tokenizer's: its 3 256 entries and 5
    special tokens, <|begin_of_text|> (bos) and <|end_of_text|> (eos) among
    them."""
    special = tokenizer_json_special_ids(args.vocab)
    return LlamaConfig(
        model_type="llama",
        vocab_size=max(special.values()) + 1,
        max_position_embeddings=128,
        hidden_size=96,
        intermediate_size=256,
        num_hidden_layers=4,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=24,
        rms_norm_eps=1e-5,
        rope_theta=10000.0,
        rope_scaling={
            "factor": 8.0,
            "high_freq_factor": 4.0,
            "low_freq_factor": 1.0,
            "original_max_position_embeddings": 48,
            "rope_type": "llama3",
        },
        tie_word_embeddings=False,
        bos_token_id=special["<|begin_of_text|>"],
        eos_token_id=special["<|end_of_text|>"],
    )


ARCHS = {
    # 4 layers, d 128, 4 heads, context 128, byte vocabulary.
    "gpt2": lambda args: Gpt2Config(vocab_size=256, n_positions=128, n_embd=128, n_layer=4, n_head=4),
    "neox": lambda args: NeoXConfig(
        vocab_size=256,
        max_position_embeddings=128,
        hidden_size=128,
        num_hidden_layers=4,
        num_attention_heads=4,
        intermediate_size=512,
        rotary_pct=0.25,
        rotary_emb_base=10000,
        use_parallel_residual=True,
    ),
    # GPT-2 with GPT-2's BPE vocabulary: 4 layers, d 64, 4 heads, context 128.
    "gpt2-bpe": lambda args: Gpt2Config(
        vocab_size=50257, n_positions=128, n_embd=64, n_layer=4, n_head=4, eos_token_id=50256
    ),
    # Llama 3-style (llama_config above).
    "llama": llama_config,
    # GPT-2's layout with S–D attention; ranks, filter and ln_1 from the command line.
    "sd": lambda args: sd_model.SDConfig(
        vocab_size=256,
        n_positions=128,
        n_embd=128,
        n_layer=4,
        n_head=4,
        ranks=[int(r) for r in args.sd_ranks.split(",")],
        filter_kind=args.sd_filter,
        attn_layer_norm=args.sd_attn_layer_norm,
    ),
}


def blas_library() -> str:
    """The BLAS shared object this process loaded (for the record: training
    results differ in the last bits between BLAS implementations)."""
    torch.ones(2, 2) @ torch.ones(2, 2)
    with open("/proc/self/maps") as f:
        libs = sorted({line.split()[-1] for line in f if "blas" in line.lower() and "/" in line})
    return ", ".join(libs) or "unknown"


def read_token_file(path):
    """Token ids of a little-endian u16 token file (`nlb tokenize --out`)."""
    with open(path, "rb") as f:
        raw = f.read()
    if len(raw) % 2:
        raise ValueError(f"{path}: {len(raw)} bytes is not a whole number of u16 token ids")
    return torch.frombuffer(bytearray(raw), dtype=torch.int16).to(torch.int64).bitwise_and(0xFFFF).tolist()


def token_byte_lengths(vocab_path):
    """Bytes each token id stands for. GPT-2's vocab.json spells every byte as
    one character (its byte-to-unicode bijection), so a token's byte count is
    the length of its key; special tokens (<|endoftext|>) do not occur in the
    texts measured. A ByteLevel tokenizer.json (the llama3-style one) is read
    the same way from its model.vocab; its added tokens get 0 (they do not
    occur in the texts either: tokenize_corpus.mjs encodes without them)."""
    with open(vocab_path, encoding="utf-8") as f:
        vocab = json.load(f)
    if vocab_path.endswith("tokenizer.json"):
        size = max([*vocab["model"]["vocab"].values(), *(t["id"] for t in vocab["added_tokens"])]) + 1
        vocab = vocab["model"]["vocab"]
    else:
        size = len(vocab)
    lengths = [0] * size
    for key, token_id in vocab.items():
        lengths[token_id] = len(key)
    return lengths


def with_per_byte(result, tokens, context, byte_lengths):
    """Adds the per-byte perplexity: exp(total NLL / bytes of the predicted
    tokens), the predicted tokens being every window position but the first."""
    w = protocol.windows(tokens, context)
    predicted_bytes = sum(byte_lengths[t] for t in w[:, 1:].flatten().tolist())
    total_nll = result["mean_loss"] * result["predicted_tokens"]
    return {
        **result,
        "predicted_bytes": predicted_bytes,
        "mean_loss_per_byte": total_nll / predicted_bytes,
        "ppl_per_byte": math.exp(total_nll / predicted_bytes),
    }


def rope_bands(config) -> list:
    """Per rotary pair j of a Llama config with llama3 rope_scaling: the
    unscaled wavelength 2 pi / inv_freq, the band it falls in ("kept", "mixed"
    or "scaled") and the frequency used (nlb_reference/llama.py rope_inv_freq)."""
    from nlb_reference.llama import rope_inv_freq

    s = config.rope_scaling
    base = LlamaConfig(**{**config.__dict__, "rope_scaling": None})
    plain, scaled = rope_inv_freq(base).tolist(), rope_inv_freq(config).tolist()
    short = s["original_max_position_embeddings"] / s["high_freq_factor"]
    long = s["original_max_position_embeddings"] / s["low_freq_factor"]
    bands = []
    for j, (f, g) in enumerate(zip(plain, scaled)):
        w = 2 * math.pi / f
        band = "kept" if w < short else "scaled" if w > long else "mixed"
        bands.append({"pair": j, "wavelength": round(w, 4), "band": band, "inv_freq": g, "unscaled_inv_freq": f})
    return bands


def lr_at(step: int, args) -> float:
    """Linear warm-up, then cosine decay to 10% of the peak."""
    if step < args.warmup:
        return args.lr * (step + 1) / args.warmup
    progress = (step - args.warmup) / max(1, args.steps - args.warmup)
    return args.lr * (0.1 + 0.9 * 0.5 * (1.0 + math.cos(math.pi * progress)))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--arch", choices=sorted(ARCHS), required=True)
    ap.add_argument("--out", required=True, help="model directory to write")
    ap.add_argument("--train", help="training split (default out/data/kjv-train.txt, or .gpt2.u16 / .llama3.u16)")
    ap.add_argument("--eval-text", help="evaluation text (default data/kjv-eval.txt, or out/data/....gpt2.u16)")
    ap.add_argument("--cross-text", help="cross-corpus text (default data/jargon-eval.txt, or ....gpt2.u16)")
    ap.add_argument(
        "--vocab",
        help="--arch gpt2-bpe: vocab.json for the per-byte perplexity (default models/gpt2-tokenizer/vocab.json); "
        "--arch llama: the tokenizer.json (default models/llama3-style-tokenizer/tokenizer.json)",
    )
    ap.add_argument("--steps", type=int, default=1000)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--warmup", type=int, default=50)
    ap.add_argument("--weight-decay", type=float, default=0.1)
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--log-every", type=int, default=50)
    ap.add_argument("--val-windows", type=int, default=32, help="eval windows used for the logged val loss")
    ap.add_argument("--sd-ranks", default="16,16,16,16", help="--arch sd: routing rank (even) of each layer")
    ap.add_argument("--sd-filter", choices=sd_model.FILTER_KINDS, default="diagonal", help="--arch sd: filter D")
    ap.add_argument(
        "--sd-attn-layer-norm", action="store_true", help="--arch sd: keep the pre-attention LayerNorm ln_1"
    )
    ap.add_argument("--no-metrics", action="store_true", help="write only the model (used by self_check.py)")
    args = ap.parse_args()
    token_files = args.arch in ("gpt2-bpe", "llama")
    is_llama = args.arch == "llama"
    if args.vocab is None:
        args.vocab = LLAMA_TOKENIZER if is_llama else os.path.join(REPO, "models", "gpt2-tokenizer", "vocab.json")
    suffix = ".llama3.u16" if is_llama else ".gpt2.u16" if token_files else ".txt"
    for attr, name in (("train", "kjv-train"), ("eval_text", "kjv-eval"), ("cross_text", "jargon-eval")):
        if getattr(args, attr) is None:
            folder = "data" if attr != "train" and not token_files else os.path.join("out", "data")
            setattr(args, attr, os.path.join(REPO, folder, name + suffix))
    load_tokens = read_token_file if token_files else read_tokens

    torch.set_num_threads(args.threads)
    torch.use_deterministic_algorithms(True)
    torch.manual_seed(args.seed)
    config = ARCHS[args.arch](args)
    is_sd = args.arch == "sd"
    ctx = config.n_positions if is_sd else context_length(config)
    model = sd_model.SDLMHeadModel(config) if is_sd else build_model(config)
    init_gen = torch.Generator().manual_seed(args.seed)
    model.init_weights(init_gen)

    train_tokens = torch.tensor(load_tokens(args.train), dtype=torch.int64)
    if token_files and int(train_tokens.max()) >= config.vocab_size:
        raise SystemExit(f"{args.train}: token id {int(train_tokens.max())} >= vocab_size {config.vocab_size}")
    eval_tokens = load_tokens(args.eval_text)
    val_windows = protocol.windows(eval_tokens, ctx, args.val_windows)

    # Weight decay on matrices and embeddings only, not on biases or LayerNorm
    # (nor, for --arch sd, on the filter θ).
    if is_sd:
        groups = model.parameter_groups(args.weight_decay)
    else:
        decay = [p for p in model.parameters() if p.dim() >= 2]
        no_decay = [p for p in model.parameters() if p.dim() < 2]
        groups = [{"params": decay, "weight_decay": args.weight_decay}, {"params": no_decay, "weight_decay": 0.0}]
    opt = torch.optim.AdamW(
        groups,
        lr=args.lr,
        betas=(0.9, 0.95),
        eps=1e-8,
    )
    batch_gen = torch.Generator().manual_seed(args.seed + 1)
    offsets = torch.arange(ctx + 1)

    os.makedirs(args.out, exist_ok=True)
    log_lines = [
        f"# {args.arch}: {sum(p.numel() for p in model.parameters())} parameters; "
        f"steps {args.steps}, batch {args.batch} x {ctx + 1} {'tokens' if token_files else 'bytes'}, AdamW lr {args.lr} "
        f"(warm-up {args.warmup}, cosine to 10%), betas (0.9, 0.95), weight decay {args.weight_decay}, "
        f"grad clip 1.0, seed {args.seed}, threads {args.threads}, torch {torch.__version__}"
        + (
            f"; S–D ranks {config.ranks}, filter {config.filter_kind}, ln_1 {config.attn_layer_norm}, "
            f"theta init {config.theta_init}"
            if is_sd
            else ""
        ),
        f"# train split: {os.path.relpath(args.train, REPO)} ({train_tokens.numel()} tokens); val loss: first "
        f"{val_windows.shape[0]} windows of {os.path.relpath(args.eval_text, REPO)} (float32, eval protocol)",
        "# step  train_loss  val_loss  lr  elapsed_s",
    ]
    print("\n".join(log_lines), flush=True)
    start = time.time()
    running = 0.0
    count = 0
    for step in range(args.steps):
        model.train()
        for group in opt.param_groups:
            group["lr"] = lr_at(step, args)
        starts = torch.randint(0, train_tokens.numel() - ctx - 1, (args.batch,), generator=batch_gen)
        seq = train_tokens[starts[:, None] + offsets]  # [B, ctx + 1]
        logits = model(seq[:, :-1])
        loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), seq[:, 1:].reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        running += float(loss)
        count += 1
        if (step + 1) % args.log_every == 0 or step + 1 == args.steps:
            model.eval()
            val = protocol.evaluate(model, val_windows.flatten(), ctx)["mean_loss"]
            line = (
                f"{step + 1:6d}  {running / count:.4f}  {val:.4f}  {lr_at(step, args):.2e}  "
                f"{time.time() - start:.0f}"
            )
            print(line, flush=True)
            log_lines.append(line)
            running = 0.0
            count = 0
    train_seconds = time.time() - start

    model.eval()
    if is_sd:
        sd_model.save_model_dir(model, args.out)
    else:
        # The BPE model's token embedding (50 257 x 64, 94% of its parameters)
        # is stored as BF16 to keep the shipped file small; the metrics below
        # are computed from the stored, rounded weights.
        embedding_dtypes = {"transformer.wte.weight": torch.bfloat16} if args.arch == "gpt2-bpe" else None
        # The Llama-style model is stored entirely as BF16, as the Hub's Llama 3.2
        # checkpoints are (torch_dtype "bfloat16"); round to nearest even, once.
        hf_layout.save_model_dir(model, args.out, dtype=torch.bfloat16 if is_llama else torch.float32,
                                 dtypes=embedding_dtypes)
        if is_llama:
            shutil.copyfile(args.vocab, os.path.join(args.out, "tokenizer.json"))
    if args.no_metrics:
        return
    # Metrics from the written file, in float64, so that they describe the
    # shipped weights exactly.
    shipped, _ = (sd_model if is_sd else hf_layout).load_model_dir(args.out, dtype=torch.float64)

    def measure(path):
        tokens = load_tokens(path)
        result = {"text": os.path.relpath(path, REPO), **protocol.evaluate(shipped, tokens, ctx)}
        return with_per_byte(result, tokens, ctx, token_byte_lengths(args.vocab)) if token_files else result

    metrics = {
        "arch": args.arch,
        "parameters": sum(p.numel() for p in model.parameters()),
        "protocol": f"consecutive non-overlapping windows of `context` {'tokens' if token_files else 'bytes'} "
        "(short last window dropped); every position but the first predicted; ppl = exp(mean cross-entropy)"
        + ("; ppl_per_byte = exp(total cross-entropy / bytes of the predicted tokens)" if token_files else "")
        + "; float64",
        "kjv_eval": measure(args.eval_text),
        "jargon_eval": measure(args.cross_text),
        **(
            {"llama": {"stored_dtype": "bfloat16 (every tensor; trained in float32, rounded once to nearest even)",
                       "tokenizer": os.path.relpath(args.vocab, REPO),
                       "rope_bands": rope_bands(config)}}
            if is_llama
            else {}
        ),
        **(
            {"sd": {"ranks": config.ranks, "filter": config.filter_kind, "attn_layer_norm": config.attn_layer_norm,
                    "theta_init": config.theta_init}}
            if is_sd
            else {}
        ),
        "training": {
            "steps": args.steps,
            "batch": args.batch,
            ("sequence_tokens" if token_files else "sequence_bytes"): ctx + 1,
            "tokens_seen": args.steps * args.batch * ctx,
            "lr": args.lr,
            "warmup": args.warmup,
            "weight_decay": args.weight_decay,
            "seed": args.seed,
            "threads": args.threads,
            "seconds": round(train_seconds, 1),
            "torch_version": torch.__version__,
            "blas": blas_library(),
            "command": "/usr/bin/python3 tools/python/train.py " + " ".join(sys.argv[1:]),
        },
    }
    log_lines.append(
        f"# done in {train_seconds:.0f} s; kjv-eval ppl {metrics['kjv_eval']['ppl']:.4f}, "
        f"jargon-eval ppl {metrics['jargon_eval']['ppl']:.4f} (float64, all windows)"
    )
    print(log_lines[-1])
    with open(os.path.join(args.out, "train_log.txt"), "w") as f:
        f.write("\n".join(log_lines) + "\n")
    with open(os.path.join(args.out, "metrics.json"), "w") as f:
        f.write(json.dumps(metrics, indent=2) + "\n")


if __name__ == "__main__":
    main()
