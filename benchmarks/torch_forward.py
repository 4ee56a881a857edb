#!/usr/bin/env python3
"""The PyTorch side of bench_transformer: the same GPT-2-small forward, tokens/s.

Usage: /usr/bin/python3 benchmarks/torch_forward.py [--repeats N]

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

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tools", "python"))
from nlb_reference import models  # noqa: E402


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    torch.manual_seed(1)
    config = models.Gpt2Config(vocab_size=50257, n_positions=1024, n_embd=768, n_layer=12, n_head=12)
    model = models.Gpt2LMHeadModel(config).float().eval()
    for t, threads in ((128, 1), (128, 2), (1024, 1), (1024, 2)):
        torch.set_num_threads(threads)
        tokens = torch.randint(0, 50257, (1, t))
        with torch.inference_mode():
            model(tokens)  # warm-up
            times = []
            for _ in range(args.repeats):
                start = time.perf_counter()
                model(tokens)
                times.append(time.perf_counter() - start)
        median = statistics.median(times)
        print(json.dumps({"T": t, "threads": threads, "seconds": median, "tokens_per_s": t / median,
                          "torch": torch.__version__}))


if __name__ == "__main__":
    main()
