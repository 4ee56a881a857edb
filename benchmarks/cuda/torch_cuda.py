#!/usr/bin/env python3
"""PyTorch's side of the CUDA benchmarks (docs/benchmarks.md, "CUDA").

Hugging Face GPT2LMHeadModel, eager, fp32 (TF32 off), on the GPU, with the weights of the model
directory that bench_cuda measures (its model.safetensors, loaded into the model built from the
same config): prefill tokens/s at T = 128, 1024 and a batch of 8 windows of 1024; greedy decoding
with the KV cache (prompt 16, 128 new tokens) at batch 1 and 16. Medians of several timed runs
after a warm-up, each ended by torch.cuda.synchronize(). Prints one JSON object.

usage: torch_cuda.py MODEL_DIR [--repeats N]
"""
import argparse
import json
import statistics
import sys
import time


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model_dir")
    parser.add_argument("--repeats", type=int, default=10)
    args = parser.parse_args()

    import torch
    from safetensors.torch import load_file
    from transformers import GPT2Config, GPT2LMHeadModel

    if not torch.cuda.is_available():
        print("torch_cuda.py: no CUDA device", file=sys.stderr)
        return 77
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    with open(f"{args.model_dir}/config.json") as f:
        raw = json.load(f)
    config = GPT2Config(
        n_embd=raw["n_embd"], n_layer=raw["n_layer"], n_head=raw["n_head"],
        n_positions=raw["n_positions"], vocab_size=raw["vocab_size"],
        layer_norm_epsilon=raw.get("layer_norm_epsilon", 1e-5),
        activation_function=raw.get("activation_function", "gelu_new"))
    model = GPT2LMHeadModel(config)
    state = load_file(f"{args.model_dir}/model.safetensors")
    missing, unexpected = model.load_state_dict(state, strict=False)
    # The unembedding is tied to wte; the causal-mask buffers are not weights.
    missing = [m for m in missing if m != "lm_head.weight" and not m.endswith(".attn.bias")
               and not m.endswith(".attn.masked_bias")]
    if missing or unexpected:
        print(f"torch_cuda.py: weights do not match: missing {missing}, unexpected {unexpected}",
              file=sys.stderr)
        return 1
    model.tie_weights()
    device = torch.device("cuda")
    model = model.to(device).eval()
    vocab = config.vocab_size
    gen = torch.Generator().manual_seed(0)

    def timed(fn):
        fn()  # warm-up
        torch.cuda.synchronize()
        times = []
        for _ in range(args.repeats):
            start = time.perf_counter()
            fn()
            torch.cuda.synchronize()
            times.append(time.perf_counter() - start)
        return statistics.median(times)

    out = {"torch": torch.__version__, "gpu": torch.cuda.get_device_name(0), "forward": [],
           "decode": []}
    with torch.no_grad():
        for batch, length in ((1, 128), (1, 1024), (8, 1024)):
            ids = torch.randint(0, vocab, (batch, length), generator=gen).to(device)
            seconds = timed(lambda: model(ids, use_cache=False))
            out["forward"].append({"batch": batch, "T": length,
                                   "tokens_per_s": batch * length / seconds})
        for batch in (1, 16):
            prompt = torch.randint(0, vocab, (batch, 16), generator=gen).to(device)
            steps = 128

            def decode():
                result = model(prompt, use_cache=True)
                past = result.past_key_values
                token = result.logits[:, -1].argmax(-1, keepdim=True)
                for _ in range(steps):
                    result = model(token, past_key_values=past, use_cache=True)
                    past = result.past_key_values
                    token = result.logits[:, -1].argmax(-1, keepdim=True)
                return token

            seconds = timed(decode)
            out["decode"].append({"batch": batch, "new_tokens": steps,
                                  "tokens_per_s": batch * steps / seconds,
                                  "note": "prompt prefill included in the time"})
    print(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
