// Umbrella for nlb/text: BPE tokenizers (GPT-2's vocab.json + merges.txt, Hugging Face
// tokenizer.json as GPT-NeoX / Pythia, Llama 3, Qwen2 and Llama 2 / Mistral / TinyLlama ship
// it). Needs utf8proc (docs/dependencies.md). See docs/text.md.
#pragma once

#include "nlb/text/bpe_model.hpp"
#include "nlb/text/decoding.hpp"
#include "nlb/text/gpt2_files.hpp"
#include "nlb/text/llama_pre_tokenizer.hpp"
#include "nlb/text/load_tokenizer.hpp"
#include "nlb/text/normalization.hpp"
#include "nlb/text/pre_tokenization.hpp"
#include "nlb/text/pre_tokenizer.hpp"
#include "nlb/text/tokenizer.hpp"
#include "nlb/text/tokenizer_json.hpp"
#include "nlb/text/tokenizer_options.hpp"
