"""nlbudget's independent PyTorch reference: GPT-2 and GPT-NeoX modules with
Hugging Face tensor layouts, a safetensors reader/writer, the byte-level
corpora and the evaluation protocol. See tools/python/README.md."""
