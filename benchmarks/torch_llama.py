#!/usr/bin/env python3
"""The PyTorch side of bench_load's BM_Prefill: one forward of 128 tokens with logits, tokens/s.

Usage: /usr/bin/python3 benchmarks/torch_llama.py --threads N [--repeats N]

The Llama-3.2-1B and Qwen2.5-0.5B shapes of bench_load (random weights, tied embeddings) in the
project's plain PyTorch Llama (tools/python/nlb_reference/llama.py: RMSNorm, rotary with the
llama3 scaling, grouped-query attention by repeat_interleave, SwiGLU), float32, inference mode:
the forward a PyTorch user writes. OPENBLAS_NUM_THREADS and OMP_NUM_THREADS are set to --threads
before torch is imported (torch_threads). One warm-up forward, then the median of --repeats.
Prints one JSON line per shape.
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
from nlb_reference.llama import LlamaConfig, LlamaForCausalLM  # noqa: E402

SHAPES = {
    "llama-3.2-1b": dict(model_type="llama", vocab_size=128256, hidden_size=2048, num_hidden_layers=16,
                         num_attention_heads=32, num_key_value_heads=8, intermediate_size=8192,
                         rope_theta=500000.0, tie_word_embeddings=True, max_position_embeddings=4096,
                         rope_scaling={"rope_type": "llama3", "factor": 32.0, "low_freq_factor": 1.0,
                                       "high_freq_factor": 4.0, "original_max_position_embeddings": 8192}),
    "qwen2.5-0.5b": dict(model_type="qwen2", vocab_size=151936, hidden_size=896, num_hidden_layers=24,
                         num_attention_heads=14, num_key_value_heads=2, intermediate_size=4864,
                         rope_theta=1000000.0, tie_word_embeddings=True, max_position_embeddings=4096),
}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--tokens", type=int, default=128)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(1)
    for name, shape in SHAPES.items():
        config = LlamaConfig(**shape)
        model = LlamaForCausalLM(config).float().eval()  # nn.Linear's random initialisation
        tokens = torch.randint(0, config.vocab_size, (1, args.tokens))
        times = []
        with torch.inference_mode():
            model(tokens)  # warm-up
            for _ in range(args.repeats):
                start = time.perf_counter()
                logits = model(tokens)
                times.append(time.perf_counter() - start)
        assert logits.shape == (1, args.tokens, config.vocab_size)
        median = statistics.median(times)
        print(json.dumps({"shape": name, "tokens": args.tokens, "threads": args.threads, "seconds": median,
                          "tokens_per_s": args.tokens / median, "torch": torch.__version__,
                          "blas": os.path.realpath("/usr/lib/x86_64-linux-gnu/libblas.so.3")}), flush=True)
        del model


if __name__ == "__main__":
    main()
