#!/usr/bin/env python3
"""The PyTorch side of bench_transformer and bench_attention: the same GPT-2-small forward (or
its attention block alone, --part attention), tokens/s.

Usage: /usr/bin/python3 benchmarks/torch_forward.py --threads N [--repeats N] [--part model|attention]

The BLAS's own thread pool must match too: this script sets OPENBLAS_NUM_THREADS and
OMP_NUM_THREADS to --threads before torch is imported (otherwise OpenBLAS uses every core
even when torch.set_num_threads(1), and the "1 thread" figure is really 2).

Uses the project's own plain-PyTorch GPT-2 (tools/python/nlb_reference), random weights with the
same shapes, float32, torch.set_num_threads matching each configuration, inference mode.
Prints one JSON line per (T, threads): median seconds and tokens/s.
"""
import argparse
import json
import os
import statistics
import sys
import time

import torch_threads  # noqa: F401  (before torch: pins the BLAS threads)
import torch  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tools", "python"))
from nlb_reference import models  # noqa: E402


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--part", choices=("model", "attention"), default="model")
    args = parser.parse_args()
    torch.manual_seed(1)
    config = models.Gpt2Config(vocab_size=50257, n_positions=1024, n_embd=768, n_layer=12, n_head=12)
    if args.part == "model":
        model = models.Gpt2LMHeadModel(config).float().eval()
        lengths = (128, 1024)
    else:  # one block's attention on a [1, T, 768] input, as BM_attention_block
        model = models.Gpt2Attention(config).float().eval()
        for p in model.parameters():
            torch.nn.init.normal_(p, std=0.02)
        lengths = (128, 1024, 2048)
    threads = args.threads
    torch.set_num_threads(threads)
    for t in lengths:
        if args.part == "model":
            tokens = torch.randint(0, 50257, (1, t))
        else:
            tokens = torch.randn(1, t, config.n_embd)
        with torch.inference_mode():
            model(tokens)  # warm-up
            times = []
            for _ in range(args.repeats):
                start = time.perf_counter()
                model(tokens)
                times.append(time.perf_counter() - start)
        median = statistics.median(times)
        print(json.dumps({"part": args.part, "T": t, "threads": threads, "seconds": median, "tokens_per_s": t / median,
                          "torch": torch.__version__,
                          "blas": os.path.realpath("/usr/lib/x86_64-linux-gnu/libblas.so.3")}))


if __name__ == "__main__":
    main()
