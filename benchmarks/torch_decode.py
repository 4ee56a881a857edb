#!/usr/bin/env python3
"""The PyTorch side of bench_decode: batch-1 generation with a KV cache, tokens/s.

Usage: /usr/bin/python3 benchmarks/torch_decode.py --threads N [--repeats N]

The same GPT-2-small shapes as bench_decode (random weights), the project's plain PyTorch GPT-2
(tools/python/nlb_reference), float32, inference mode, written the way a PyTorch user writes a
KV-cache decode loop (Hugging Face's past_key_values): each step runs the new token through every
block, concatenates its keys and values to the layer's cache, attends over the cache and computes
the logits. For each (prompt, new) of bench_decode: the prompt is prefilled (not timed), then
`new` single-token steps are timed. OPENBLAS_NUM_THREADS and OMP_NUM_THREADS are set to --threads
before torch is imported. Prints one JSON line per configuration.
"""
import argparse
import json
import math
import os
import statistics
import sys
import time


import torch_threads  # noqa: F401  (before torch: pins the BLAS threads)
import torch  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tools", "python"))
from nlb_reference import models  # noqa: E402


def step(model, tokens, cache):
    """Logits [1, T, V] of `tokens` [1, T] following the cached positions; extends `cache`
    (a list of (keys, values) [1, H, S, hd] per layer, or None entries)."""
    body = model.transformer
    past = 0 if cache[0] is None else cache[0][0].shape[2]
    t = tokens.shape[1]
    x = body.wte(tokens) + body.wpe(torch.arange(past, past + t))[None]
    for i, block in enumerate(body.h):
        attn = block.attn
        b, _, d = x.shape
        q, k, v = attn.c_attn(block.ln_1(x)).split(d, dim=-1)

        def heads(z):
            return z.view(b, t, attn.n_head, attn.head_dim).transpose(1, 2)

        q, k, v = heads(q), heads(k), heads(v)
        if cache[i] is not None:
            k = torch.cat((cache[i][0], k), dim=2)
            v = torch.cat((cache[i][1], v), dim=2)
        cache[i] = (k, v)
        scores = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(attn.head_dim)  # [1, H, T, S]
        if t > 1:
            allowed = torch.ones(t, past + t, dtype=torch.bool).tril(past)
            scores = scores.masked_fill(~allowed, torch.finfo(scores.dtype).min)
        y = torch.matmul(torch.softmax(scores, dim=-1), v)
        x = x + attn.c_proj(y.transpose(1, 2).reshape(b, t, d))
        x = x + block.mlp(block.ln_2(x))
    return torch.matmul(body.ln_f(x), body.wte.weight.t())


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    torch.manual_seed(1)
    config = models.Gpt2Config(vocab_size=50257, n_positions=1024, n_embd=768, n_layer=12, n_head=12)
    model = models.Gpt2LMHeadModel(config).float().eval()
    torch.set_num_threads(args.threads)
    for prompt, new in ((16, 128), (896, 128)):
        tokens = torch.randint(0, config.vocab_size, (1, prompt + new))
        times = []
        with torch.inference_mode():
            # Checks the loop against the whole-sequence forward once (same logits).
            cache = [None] * config.n_layer
            step(model, tokens[:, :prompt], cache)
            last = step(model, tokens[:, prompt:prompt + 1], cache)
            whole = model(tokens[:, :prompt + 1])
            assert torch.allclose(last[0, -1], whole[0, -1], atol=1e-4, rtol=1e-4)
            for _ in range(args.repeats):
                cache = [None] * config.n_layer
                step(model, tokens[:, :prompt], cache)
                start = time.perf_counter()
                for j in range(prompt, prompt + new):
                    step(model, tokens[:, j:j + 1], cache)
                times.append(time.perf_counter() - start)
        median = statistics.median(times)
        print(json.dumps({"prompt": prompt, "new": new, "threads": args.threads,
                          "seconds": median, "tokens_per_s": new / median,
                          "torch": torch.__version__,
                          "blas": os.path.realpath("/usr/lib/x86_64-linux-gnu/libblas.so.3")}))


if __name__ == "__main__":
    main()
