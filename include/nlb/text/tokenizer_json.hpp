// load_tokenizer_json: a Hugging Face tokenizer.json with a BPE model, as GPT-2, GPT-NeoX /
// Pythia, Llama 3, Qwen2 and Llama 2 / Mistral / TinyLlama ship it. The components nlbudget
// implements, and nothing else:
//   normalizer      null, or NFC, Prepend {"prepend"}, Replace {"pattern": {"String"},
//                   "content"}, or a Sequence {"normalizers": [...]} of them
//   pre_tokenizer   ByteLevel {"add_prefix_space": false, "use_regex": any (true: GPT-2's
//                   split), "trim_offsets": any}; Split {"pattern": {"Regex"} of GPT-2, Llama 3
//                   or Qwen2 (detail/tokenizer_json_components.hpp has them verbatim),
//                   "behavior": "Isolated", "invert": false}; Metaspace {"replacement": one
//                   character, "prepend_scheme": "first", "always" or "never", "split",
//                   legacy "add_prefix_space"}; a Sequence {"pretokenizers": [...]} of them
//                   (ByteLevel last); or null (one piece per segment)
//   post_processor  null, ByteLevel (offsets only), TemplateProcessing {"single", "pair",
//                   "special_tokens"} (what with_special_tokens adds), or a Sequence
//                   {"processors": [...]} of them
//   decoder         null, ByteLevel, or for character vocabularies Replace {"pattern":
//                   {"String"}, "content"}, ByteFallback, Fuse, Strip {"content", "start",
//                   "stop"}, Metaspace, or a Sequence {"decoders": [...]} of them
//   model           {"type": "BPE", "vocab": {...}, "merges": ["a b", ...] or [["a", "b"], ...],
//                    "dropout": null, "continuing_subword_prefix" and "end_of_word_suffix": null
//                    or "", "ignore_merges": any, "byte_fallback", "unk_token", "fuse_unk"}
//   added_tokens    [{"id", "content", "special", "normalized", "single_word": false,
//                    "lstrip": false, "rstrip": false}, ...]
//   truncation, padding: null
// The vocabulary is byte-level (written in GPT-2's byte-to-character alphabet, every byte a
// token) when the pre-tokenizer has a ByteLevel step; then byte_fallback must be false and the
// decoder null or ByteLevel. Otherwise its tokens are text and BPE starts from characters
// (bpe_model.hpp), with "<0xNN>" tokens for each of the 256 bytes when byte_fallback is true and
// unk_token, when given, a token of the vocabulary.
// Any other type, option value or key is a FormatError that names it, so a file whose ids would
// differ from HF tokenizers' is refused rather than encoded differently.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <initializer_list>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "nlb/text/bpe_model.hpp"
#include "nlb/text/decoding.hpp"
#include "nlb/text/detail/bpe_builder.hpp"
#include "nlb/text/detail/json_object.hpp"
#include "nlb/text/detail/messages.hpp"
#include "nlb/text/detail/tokenizer_json_components.hpp"
#include "nlb/text/gpt2_files.hpp"
#include "nlb/text/normalization.hpp"
#include "nlb/text/pre_tokenization.hpp"
#include "nlb/text/tokenizer.hpp"
#include "nlb/text/tokenizer_options.hpp"

namespace nlb::text {

namespace detail {

inline std::vector<MergeText> read_json_merges(const TextFileErrors& errors,
                                               const nlohmann::json& merges) {
  if (!merges.is_array())
    errors.fail("model", "merges", "an array", describe_json(merges));
  std::vector<MergeText> out;
  out.reserve(merges.size());
  for (std::size_t i = 0; i < merges.size(); ++i) {
    const nlohmann::json& m = merges[i];
    const std::string entry = "model.merges[" + std::to_string(i) + "]";
    if (m.is_string()) {
      const auto& text = m.get_ref<const std::string&>();
      const std::size_t space = text.find(' ');
      if (space == 0 || space == std::string::npos || space + 1 == text.size() ||
          text.find(' ', space + 1) != std::string::npos)
        errors.fail(entry, "merge", "two tokens separated by one space", io::quote_text(text));
      out.push_back({text.substr(0, space), text.substr(space + 1), entry});
    } else if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string()) {
      out.push_back({m[0].get<std::string>(), m[1].get<std::string>(), entry});
    } else {
      errors.fail(entry, "merge", "a string \"a b\" or an array of two strings", describe_json(m));
    }
  }
  return out;
}

/// The name of the byte-fallback token of `byte`, as HF's BPE writes it: "<0x0A>".
inline std::string byte_fallback_name(unsigned byte) {
  std::array<char, 8> name{};
  std::snprintf(name.data(), name.size(), "<0x%02X>", byte);
  return name.data();
}

/// The ids of the 256 byte-fallback tokens; FormatError naming the first missing one, and for a
/// token that the ByteFallback decoder reads as a byte but byte fallback never writes ("<0x0a>":
/// lower-case hex), which would decode to a byte it does not encode.
inline std::array<std::int32_t, 256> byte_fallback_ids(const TextFileErrors& errors,
                                                       const VocabTable& vocab) {
  std::array<std::int32_t, 256> ids{};
  for (unsigned byte = 0; byte < 256; ++byte) {
    const std::string name = byte_fallback_name(byte);
    const auto it = vocab.ids.find(name);
    if (it == vocab.ids.end())
      errors.fail("model.vocab", "byte-fallback tokens",
                  "a token \"<0xNN>\" for each of the 256 bytes (byte_fallback is true)",
                  "none for byte " + std::to_string(byte) + " (" + quote_text(name) + ")");
    ids[byte] = it->second;
  }
  for (const std::string& text : vocab.texts) {
    const int byte = Decoding::fallback_byte(text);
    if (byte >= 0 && text != byte_fallback_name(static_cast<unsigned>(byte)))
      errors.fail("model.vocab token " + quote_text(text), "byte-fallback token",
                  quote_text(byte_fallback_name(static_cast<unsigned>(byte))) +
                      " (two upper-case hex digits, as byte fallback writes it)",
                  quote_text(text));
  }
  return ids;
}

}  // namespace detail

/// The tokenizer of the tokenizer.json at `path` (see the list of components above). eos_id()
/// is the id of "<|endoftext|>", else "<|end_of_text|>", else "</s>" (an added token, else a
/// model token) when there is one. Ids of the model's vocabulary number its tokens 0..M-1; an
/// added token either repeats a model token (same id, content equal to the token) or takes the
/// next id, M, M+1, ... The template's special tokens must name ids of the vocabulary with
/// their tokens. FormatError naming the file, the entry, what was expected and what was found
/// for anything else, and for more ids than `options.embedding_size`. O(vocabulary + merges).
inline Tokenizer load_tokenizer_json(const std::filesystem::path& path,
                                     const TokenizerOptions& options = {}) {
  const detail::TextFileErrors errors(path.string());
  const nlohmann::json root = detail::parse_json(errors, detail::read_text_file(path.string()));
  const detail::JsonObject top(errors, "", root,
                               {"version", "truncation", "padding", "added_tokens", "normalizer",
                                "pre_tokenizer", "post_processor", "decoder", "model"});
  if (const nlohmann::json* version = top.find("version"); version && !version->is_string())
    top.fail("version", "a string", *version);
  for (const char* key : {"truncation", "padding"}) {
    if (const nlohmann::json* value = top.find(key); value && !value->is_null())
      top.fail(key, "null (nlbudget neither truncates nor pads)", *value);
  }

  TokenizerPipeline pipeline;
  {
    std::vector<NormalizerStep> steps;
    if (const nlohmann::json* value = top.find("normalizer"); value && !value->is_null())
      detail::read_normalizer(errors, "normalizer", *value, steps);
    pipeline.normalization = Normalization(std::move(steps));
  }
  detail::PreTokenizerFacts facts;
  const nlohmann::json* pre = top.find("pre_tokenizer");
  {
    std::vector<PreTokenizerStep> steps;
    if (pre && !pre->is_null())
      detail::read_pre_tokenizer(errors, "pre_tokenizer", *pre, steps, facts);
    pipeline.pre_tokenization = PreTokenization(std::move(steps));
  }
  const bool byte_level = facts.byte_level;
  {
    std::vector<DecoderStep> steps;
    if (const nlohmann::json* value = top.find("decoder"); value && !value->is_null())
      detail::read_decoder(errors, "decoder", *value, steps);
    pipeline.decoding = Decoding(std::move(steps));
    const auto& decoder_steps = pipeline.decoding.steps();
    const bool decodes_bytes = std::any_of(
        decoder_steps.begin(), decoder_steps.end(),
        [](const DecoderStep& step) { return step.kind == DecoderStep::Kind::byte_level; });
    // A ByteLevel decoder reads the byte-level alphabet, which only a ByteLevel pre-tokenizer
    // writes; and a byte-level vocabulary's tokens are bytes, which only ByteLevel decodes.
    if (decodes_bytes && !byte_level)
      errors.fail("pre_tokenizer", "type",
                  "\"ByteLevel\" or a Sequence with it (the decoder is ByteLevel)",
                  pre ? detail::describe_json(*pre) : "null");
    if (byte_level && !pipeline.decoding.empty() && !pipeline.decoding.is_byte_level())
      errors.fail("decoder", "type",
                  "null or \"ByteLevel\" (the pre-tokenizer is ByteLevel: the tokens are bytes)",
                  detail::describe_json(*top.find("decoder")));
  }
  detail::TemplateText template_text;
  if (const nlohmann::json* value = top.find("post_processor"); value && !value->is_null())
    detail::read_post_processor(errors, "post_processor", *value, template_text);

  const nlohmann::json& model_json = top.at("model");
  detail::component_type(errors, "model", model_json, {"BPE"});
  const detail::JsonObject model(
      errors, "model", model_json,
      {"type", "dropout", "unk_token", "continuing_subword_prefix", "end_of_word_suffix",
       "fuse_unk", "byte_fallback", "ignore_merges", "vocab", "merges"});
  if (const nlohmann::json* dropout = model.find("dropout"); dropout && !dropout->is_null())
    model.fail("dropout", "null (nlbudget's BPE is deterministic)", *dropout);
  const nlohmann::json* unk = model.find("unk_token");
  if (unk && !unk->is_null() && !unk->is_string())
    model.fail("unk_token", "null or a string", *unk);
  model.require_null_or("continuing_subword_prefix", {""});
  model.require_null_or("end_of_word_suffix", {""});
  BpeOptions bpe;
  bpe.byte_level = byte_level;
  // The character spaces become, where the pipeline makes one: BPE may then encode word by
  // word (BpeOptions::boundary says when that gives the same ids).
  for (const NormalizerStep& step : pipeline.normalization.steps())
    if (step.kind == NormalizerStep::Kind::replace && step.pattern == " ")
      bpe.boundary = step.content;
  for (const PreTokenizerStep& step : pipeline.pre_tokenization.steps())
    if (step.kind == PreTokenizerStep::Kind::metaspace)
      bpe.boundary = step.replacement;
  bpe.fuse_unk = model.boolean("fuse_unk", false);
  bpe.ignore_merges = model.boolean("ignore_merges", false);
  if (byte_level)
    model.require_boolean("byte_fallback", false, false);
  bpe.byte_fallback = model.boolean("byte_fallback", false);
  detail::VocabTable vocab =
      detail::read_vocab(errors, model.at("vocab"), "model.vocab", byte_level);
  const std::vector<BpeMerge> merges = detail::resolve_merges(
      errors, vocab, detail::read_json_merges(errors, model.at("merges")), "model.vocab");
  const auto model_size = static_cast<std::int64_t>(vocab.texts.size());
  if (bpe.byte_fallback)
    bpe.byte_fallback_ids = detail::byte_fallback_ids(errors, vocab);
  // A byte-level vocabulary never needs the unknown token (every byte is a token), so it is
  // not looked up there, as before; a character vocabulary uses it for what it lacks.
  if (!byte_level && unk && unk->is_string()) {
    const auto it = vocab.ids.find(unk->get<std::string>());
    if (it == vocab.ids.end())
      errors.fail("model", "unk_token", "a token of model.vocab",
                  io::quote_text(unk->get<std::string>()) + ", which is not");
    bpe.unk_id = it->second;
  }

  std::vector<AddedToken> added;
  std::vector<std::pair<std::int64_t, std::size_t>> new_ids;  // (id, index) past the model
  if (const nlohmann::json* list = top.find("added_tokens"); list && !list->is_null()) {
    if (!list->is_array())
      top.fail("added_tokens", "an array", *list);
    for (std::size_t i = 0; i < list->size(); ++i) {
      const std::string entry = "added_tokens[" + std::to_string(i) + "]";
      const detail::JsonObject token(
          errors, entry, (*list)[i],
          {"id", "content", "single_word", "lstrip", "rstrip", "normalized", "special"});
      const nlohmann::json& id_json = token.at("id");
      if (!id_json.is_number_integer() || id_json.get<std::int64_t>() < 0)
        token.fail("id", "a non-negative integer", id_json);
      const auto id = id_json.get<std::int64_t>();
      const std::string content = token.string("content");
      if (content.empty())
        token.fail("content", "a non-empty string", token.at("content"));
      const bool special = token.boolean("special", false);
      const bool normalized = token.boolean("normalized", !special);
      for (const char* key : {"single_word", "lstrip", "rstrip"})
        token.require_boolean(key, false, false);
      for (std::size_t j = 0; j < added.size(); ++j) {
        if (added[j].content == content)
          token.fail("content",
                     "each content once (it is also added_tokens[" + std::to_string(j) + "])",
                     token.at("content"));
        if (added[j].id == id)
          token.fail("id", "each id once (it is also added_tokens[" + std::to_string(j) + "])",
                     id_json);
      }
      if (id < model_size) {
        const std::string& text = vocab.texts[static_cast<std::size_t>(id)];
        if (text != content) {
          errors.fail(
              entry, "id " + std::to_string(id),
              "an id of " + std::to_string(model_size) +
                  " or more, or the id of the model token equal to its content",
              "model token " + io::quote_text(text) + " for content " + io::quote_text(content));
        }
      } else {
        new_ids.emplace_back(id, i);
      }
      added.push_back({content, static_cast<std::int32_t>(id), special, normalized});
    }
  }
  std::sort(new_ids.begin(), new_ids.end());
  for (std::size_t k = 0; k < new_ids.size(); ++k) {
    const std::int64_t expected = model_size + static_cast<std::int64_t>(k);
    if (new_ids[k].first != expected) {
      errors.fail("added_tokens[" + std::to_string(new_ids[k].second) + "]", "id",
                  std::to_string(expected) + " (ids contiguous after the model's " +
                      std::to_string(model_size) + " tokens)",
                  std::to_string(new_ids[k].first));
    }
  }
  const std::int64_t total = model_size + static_cast<std::int64_t>(new_ids.size());
  // The token an id stands for, as the template's tables write it: an added token's content,
  // else the model token as the file writes it.
  const auto token_text = [&](std::int64_t id) -> std::string {
    for (const AddedToken& token : added)
      if (token.id == id)
        return token.content;
    return vocab.texts[static_cast<std::size_t>(id)];
  };
  const auto template_ids = [&](const std::vector<std::string>& names) {
    std::vector<std::int32_t> ids;
    for (const std::string& name : names) {
      const detail::TemplateText::Special& special = template_text.specials.at(name);
      for (std::size_t k = 0; k < special.ids.size(); ++k) {
        const std::int64_t id = special.ids[k];
        const std::string entry = "post_processor special_tokens." + name;
        if (id >= total)
          errors.fail(entry, "ids[" + std::to_string(k) + "]",
                      "an id of the vocabulary, 0.." + std::to_string(total - 1),
                      std::to_string(id));
        if (token_text(id) != special.tokens[k])
          errors.fail(
              entry, "tokens[" + std::to_string(k) + "]",
              io::quote_text(token_text(id)) + " (the token of id " + std::to_string(id) + ")",
              io::quote_text(special.tokens[k]));
        ids.push_back(static_cast<std::int32_t>(id));
      }
    }
    return ids;
  };
  for (const auto& [name, special] : template_text.specials)
    template_ids({name});  // every table entry checked, used or not
  pipeline.before = template_ids(template_text.before);
  pipeline.after = template_ids(template_text.after);

  // The end token: an added token first (a trained vocabulary may have "<|endoftext|>" as an
  // ordinary token, as the SentencePiece-style test file does, while "</s>" is the added one).
  std::optional<std::int32_t> eos;
  const auto end_names = {"<|endoftext|>", "<|end_of_text|>", "</s>"};
  for (const char* name : end_names)
    for (const AddedToken& token : added)
      if (!eos && token.content == name)
        eos = token.id;
  for (const char* name : end_names) {
    if (const auto it = vocab.ids.find(name); !eos && it != vocab.ids.end())
      eos = it->second;
  }
  detail::check_embedding_size(errors, total, options);
  return Tokenizer(BpeModel(std::move(vocab.bytes), merges, bpe), std::move(added),
                   std::move(pipeline), eos);
}

}  // namespace nlb::text
