// Writes tokenizer.json files in the layouts the Llama-family checkpoints ship, and the ids Hugging
// Face tokenizers (the npm binding, the reference) gives for them:
//   models/llama3-style-tokenizer/tokenizer.json   Llama 3's layout: Split with its pattern (digits
//                                                  in groups of 1-3, case-insensitive contractions)
//                                                  then ByteLevel, ignore_merges, BOS template
//   models/qwen2-style-tokenizer/tokenizer.json    Qwen2's: NFC, single digits, ChatML specials, no BOS
//   models/sentencepiece-style-tokenizer/tokenizer.json
//                                                  Llama 2 / Mistral / TinyLlama's: Prepend("▁") and
//                                                  Replace(" ", "▁") normalizers, byte_fallback,
//                                                  <unk>, BOS template
//   models/metaspace-style-tokenizer/tokenizer.json
//                                                  the same vocabulary behind a Metaspace pre-tokenizer
//                                                  (prepend_scheme "first"), as newer conversions write it
//   tests/fixtures/llama-tokenizers-reference.json the strings and each file's ids
// The real files cannot be downloaded here: each is built from the published structure with a
// vocabulary trained below on the shipped texts (data/kjv-fit.txt, data/jargon-eval.txt) and the
// recorded strings. The trainer only has to be deterministic; the ids come from the binding
// loading the written file.
// Run from this folder: npm ci && node generate_llama_tokenizers.mjs. Nothing in the C++ build or
// its tests runs this; the outputs are committed.
import { createRequire } from "node:module";
import fs from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";

const require = createRequire(import.meta.url);
const here = path.dirname(fileURLToPath(import.meta.url));
const root = path.resolve(here, "../..");
const hf = require("tokenizers");
const version = JSON.parse(fs.readFileSync(path.join(here, "node_modules/tokenizers/package.json"), "utf8")).version;

// The two patterns differ only in the digits: groups of 1-3 (Llama 3) or one at a time (Qwen2).
const splitPattern = (digits) =>
  "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|" + digits +
  "| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
const LLAMA3_PATTERN = splitPattern("\\p{N}{1,3}");
const QWEN2_PATTERN = splitPattern("\\p{N}");
const BYTE_LEVEL_MERGES = 3000;
const SENTENCEPIECE_MERGES = 2000;
// The strings the ids are recorded for (below) join the training text three times over, so that
// merges exist across the pieces the pre-tokenizers must keep apart (digit groups, contractions,
// scripts other than Latin): a wrong split then shows in the ids.
const gpt2Cases = JSON.parse(fs.readFileSync(path.join(root, "tests/fixtures/tokenizer-reference.json"), "utf8")).cases;

const addedToken = (id, content, special, normalized = false) => ({
  id, content, single_word: false, lstrip: false, rstrip: false, normalized, special,
});

// Byte-pair merges over words given as arrays of symbols with counts: each step merges the most
// frequent adjacent pair (ties: the pair whose joined string sorts first), as SentencePiece's and
// HF's BPE trainers do up to their tie-breaking. Returns the merges in order.
function trainMerges(wordCounts, count) {
  const words = [...wordCounts.entries()].map(([symbols, n]) => ({ symbols: symbols.split("\u0000"), n }));
  const merges = [];
  while (merges.length < count) {
    const pairs = new Map();
    for (const { symbols, n } of words)
      for (let i = 0; i + 1 < symbols.length; ++i) {
        const key = symbols[i] + "\u0000" + symbols[i + 1];
        pairs.set(key, (pairs.get(key) ?? 0) + n);
      }
    let best = null, bestCount = 0;
    for (const [key, n] of pairs)
      if (n > bestCount || (n === bestCount && key.replace("\u0000", "") < best.replace("\u0000", ""))) {
        best = key;
        bestCount = n;
      }
    if (best === null || bestCount < 2) break;
    const [a, b] = best.split("\u0000");
    merges.push([a, b]);
    for (const w of words) {
      const out = [];
      for (let i = 0; i < w.symbols.length; ++i) {
        if (i + 1 < w.symbols.length && w.symbols[i] === a && w.symbols[i + 1] === b) {
          out.push(a + b);
          ++i;
        } else out.push(w.symbols[i]);
      }
      w.symbols = out;
    }
  }
  return merges;
}

function countWords(pieces) {
  const counts = new Map();
  for (const p of pieces) counts.set(p, (counts.get(p) ?? 0) + 1);
  return counts;
}

// ---------------------------------------------------------------------------------------------
// Byte-level BPE (Llama 3, Qwen2): the words are the pre-tokenizer's pieces of the training text
// in GPT-2's byte-to-character alphabet; ids 0..255 are the single bytes in byte order.
function byteLevelTokenizer({ pattern, normalizer, ignoreMerges, specials, bos }) {
  const split = { type: "Split", pattern: { Regex: pattern }, behavior: "Isolated", invert: false };
  const byteLevel = { type: "ByteLevel", add_prefix_space: false, trim_offsets: true, use_regex: false };
  const preTokenizer = { type: "Sequence", pretokenizers: [split, byteLevel] };
  const probe = hf.Tokenizer.fromString(JSON.stringify({
    version: "1.0", truncation: null, padding: null, added_tokens: [], normalizer,
    pre_tokenizer: preTokenizer, post_processor: null, decoder: null,
    model: { type: "BPE", dropout: null, unk_token: null, continuing_subword_prefix: null,
             end_of_word_suffix: null, fuse_unk: false, byte_fallback: false, vocab: {}, merges: [] },
  }));
  const pieces = probe.getPreTokenizer().preTokenizeString(training).map(([piece]) => piece);
  // GPT-2's byte-to-character mapping: printable Latin-1 bytes stand for themselves, the others
  // take U+0100, U+0101, ... in byte order. Checked against the binding's own alphabet.
  const printable = (b) => (b >= 0x21 && b <= 0x7e) || (b >= 0xa1 && b <= 0xac) || (b >= 0xae && b <= 0xff);
  const byteChar = [];
  let shifted = 256;
  for (let b = 0; b < 256; ++b) byteChar.push(String.fromCodePoint(printable(b) ? b : shifted++));
  const alphabet = new Set(hf.byteLevelAlphabet());
  if (alphabet.size !== 256 || !byteChar.every((c) => alphabet.has(c)))
    throw new Error("byte-level alphabet differs from the binding's");
  const vocab = {};
  byteChar.forEach((c, b) => (vocab[c] = b));
  const words = countWords(pieces.map((p) => [...p].join("\u0000")));
  const merges = trainMerges(words, BYTE_LEVEL_MERGES);
  for (const [a, b] of merges) if (!(a + b in vocab)) vocab[a + b] = Object.keys(vocab).length;
  const size = Object.keys(vocab).length;
  const added = specials.map((content, i) => addedToken(size + i, content, true));
  const template = bos
    ? { type: "TemplateProcessing",
        single: [{ SpecialToken: { id: bos, type_id: 0 } }, { Sequence: { id: "A", type_id: 0 } }],
        pair: [{ SpecialToken: { id: bos, type_id: 0 } }, { Sequence: { id: "A", type_id: 0 } },
               { SpecialToken: { id: bos, type_id: 1 } }, { Sequence: { id: "B", type_id: 1 } }],
        special_tokens: { [bos]: { id: bos, ids: [size + specials.indexOf(bos)], tokens: [bos] } } }
    : null;
  const byteLevelProcessor = { type: "ByteLevel", add_prefix_space: true, trim_offsets: false, use_regex: true };
  return {
    version: "1.0", truncation: null, padding: null, added_tokens: added, normalizer,
    pre_tokenizer: preTokenizer,
    post_processor: template ? { type: "Sequence", processors: [byteLevelProcessor, template] } : byteLevelProcessor,
    decoder: { type: "ByteLevel", add_prefix_space: true, trim_offsets: true, use_regex: true },
    model: { type: "BPE", dropout: null, unk_token: null, continuing_subword_prefix: null,
             end_of_word_suffix: null, fuse_unk: false, byte_fallback: false, ignore_merges: ignoreMerges,
             vocab, merges },
  };
}

// ---------------------------------------------------------------------------------------------
// SentencePiece-style BPE (Llama 2, Mistral, TinyLlama): "▁" for spaces and in front of the text,
// pieces never cross a "▁" boundary (SentencePiece's split_by_whitespace), characters outside the
// vocabulary as <0xXX> byte tokens. Ids: <unk> 0, <s> 1, </s> 2, the 256 byte tokens, the
// characters of the training text, then the merges.
function sentencePieceVocabulary() {
  const text = "▁" + training.replace(/ /g, "▁");
  const pieces = text.split(/(?=▁)/u);
  const words = countWords(pieces.map((p) => [...p].join("\u0000")));
  const vocab = { "<unk>": 0, "<s>": 1, "</s>": 2 };
  for (let b = 0; b < 256; ++b) vocab[`<0x${b.toString(16).toUpperCase().padStart(2, "0")}>`] = 3 + b;
  // The characters of the shipped texts only (ASCII): every other character is written as its
  // UTF-8 bytes, as SentencePiece does for characters outside its coverage.
  const characters = [...new Set([..."▁" + shipped.replace(/ /g, "▁")])].sort();
  for (const c of characters) if (!(c in vocab)) vocab[c] = Object.keys(vocab).length;
  const covered = new Set(characters);
  for (const key of [...words.keys()])
    if (![...key.replaceAll("\u0000", "")].every((c) => covered.has(c))) words.delete(key);
  const merges = trainMerges(words, SENTENCEPIECE_MERGES);
  for (const [a, b] of merges) if (!(a + b in vocab)) vocab[a + b] = Object.keys(vocab).length;
  return { vocab, merges };
}

function sentencePieceTokenizer({ vocab, merges }, metaspace) {
  const special = [addedToken(0, "<unk>", true), addedToken(1, "<s>", true), addedToken(2, "</s>", true)];
  const bos = { type: "TemplateProcessing",
                single: [{ SpecialToken: { id: "<s>", type_id: 0 } }, { Sequence: { id: "A", type_id: 0 } }],
                pair: [{ SpecialToken: { id: "<s>", type_id: 0 } }, { Sequence: { id: "A", type_id: 0 } },
                       { SpecialToken: { id: "<s>", type_id: 1 } }, { Sequence: { id: "B", type_id: 1 } }],
                special_tokens: { "<s>": { id: "<s>", ids: [1], tokens: ["<s>"] } } };
  // Both layouts decode alike: "▁" to spaces, byte tokens to bytes, the first space dropped.
  const decoder = { type: "Sequence", decoders: [{ type: "Replace", pattern: { String: "▁" }, content: " " },
                                                 { type: "ByteFallback" }, { type: "Fuse" },
                                                 { type: "Strip", content: " ", start: 1, stop: 0 }] };
  const model = { type: "BPE", dropout: null, unk_token: "<unk>", continuing_subword_prefix: null,
                  end_of_word_suffix: null, fuse_unk: true, byte_fallback: true, ignore_merges: false,
                  vocab, merges };
  if (metaspace)
    return { version: "1.0", truncation: null, padding: null, added_tokens: special, normalizer: null,
             pre_tokenizer: { type: "Metaspace", replacement: "▁", prepend_scheme: "first", split: false },
             post_processor: bos, decoder, model };
  return {
    version: "1.0", truncation: null, padding: null, added_tokens: special,
    normalizer: { type: "Sequence", normalizers: [{ type: "Prepend", prepend: "▁" },
                                                  { type: "Replace", pattern: { String: " " }, content: "▁" }] },
    pre_tokenizer: null, post_processor: bos, decoder, model,
  };
}

// The strings: the GPT-2 fixture's (white space runs, digits, CJK, emoji, code, NFD, ...) and
// cases for these tokenizers' own rules.
const own = [
  ["digits_groups", "1 12 123 1234 12345 123456 1234567 3.14159 2026-12-07 0x1F 1,000,000"],
  ["contractions_upper", "DON'T YOU'LL WE'VE I'M SHE'D THEY'RE IT'S"],
  ["contractions_mixed", "Don'T you'Ll we'vE i'M"],
  ["special_in_text", "<|begin_of_text|>Hello<|eot_id|> <|im_start|>user\nhi<|im_end|> <s>x</s> <unk>"],
  ["chat_template", "<|start_header_id|>user<|end_header_id|>\n\nWhat is 2+2?<|eot_id|>"],
  ["leading_spaces", "   three leading spaces"],
  ["only_newlines", "\n\n\n"],
  ["crlf", "line one\r\nline two\r\n"],
  ["tabs_and_spaces", "\t indented\t\ttext  \t"],
  ["byte_fallback_cjk", "漢字とカタカナ"],
  ["byte_fallback_emoji", "emoji 🎉🚀 and 👩‍👩‍👧"],
  ["accents_nfd", "cafe\u0301 nai\u0308ve"],
  ["accents_nfc", "café naïve"],
  ["long_word", "antidisestablishmentarianism"],
  ["underscores", "snake_case_name __init__ a_b"],
  ["unicode_digits", "٣٤٥ ३४५ 三四五"],
  ["mixed_scripts", "Hello мир 世界 مرحبا"],
];
const cases = [
  ...gpt2Cases.map((c) => ({ name: c.name, text: c.text })),
  ...own.map(([name, text]) => ({ name, text })),
];
const caseText = cases.map((c) => c.text).join("\n");
const shipped = ["data/kjv-fit.txt", "data/jargon-eval.txt"]
  .map((f) => fs.readFileSync(path.join(root, f), "utf8"))
  .join("\n");
const training = [shipped, caseText, caseText, caseText].join("\n");

// ---------------------------------------------------------------------------------------------
const sentencePiece = sentencePieceVocabulary();
const files = {
  "llama3-style": byteLevelTokenizer({
    pattern: LLAMA3_PATTERN, normalizer: null, ignoreMerges: true, bos: "<|begin_of_text|>",
    specials: ["<|begin_of_text|>", "<|end_of_text|>", "<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>"],
  }),
  "qwen2-style": byteLevelTokenizer({
    pattern: QWEN2_PATTERN, normalizer: { type: "NFC" }, ignoreMerges: false, bos: null,
    specials: ["<|endoftext|>", "<|im_start|>", "<|im_end|>"],
  }),
  "sentencepiece-style": sentencePieceTokenizer(sentencePiece, false),
  "metaspace-style": sentencePieceTokenizer(sentencePiece, true),
};

const out = { generator: "tools/node/generate_llama_tokenizers.mjs", reference: `tokenizers ${version}`,
              files: {}, cases: [] };
const loaded = {};
for (const [name, json] of Object.entries(files)) {
  const dir = path.join(root, "models", `${name}-tokenizer`);
  fs.mkdirSync(dir, { recursive: true });
  const file = path.join(dir, "tokenizer.json");
  fs.writeFileSync(file, JSON.stringify(json) + "\n");
  loaded[name] = hf.Tokenizer.fromFile(file); // the reference reads the file as written
  out.files[name] = path.relative(root, file);
}
for (const c of cases) {
  const entry = { name: c.name, text: c.text };
  for (const [name, tok] of Object.entries(loaded)) {
    const plain = (await tok.encode(c.text, null, { addSpecialTokens: false })).getIds();
    const withSpecials = (await tok.encode(c.text, null, { addSpecialTokens: true })).getIds();
    entry[name] = { ids: plain, ids_with_specials: withSpecials, decoded: await tok.decode(plain, false) };
  }
  out.cases.push(entry);
}
// Decoding ids that do not form valid UTF-8: a lone continuation byte, a truncated 3-byte
// sequence, an invalid byte between valid tokens.
out.decode_cases = {};
const theWord = files["sentencepiece-style"].model.vocab["▁the"];
if (theWord === undefined) throw new Error("sentencepiece-style: no token ▁the");
const byteToken = (b) => 3 + b; // the byte tokens <0x00> … <0xFF> follow <unk>, <s>, </s>
const pieceSequences = [[byteToken(0x80)], [byteToken(0xe6), byteToken(0xbc)],
                        [theWord, byteToken(0xff), byteToken(0x41)]];
const invalidUtf8 = {
  "sentencepiece-style": pieceSequences,
  "metaspace-style": pieceSequences,
  // ids 0..255 are the bytes themselves in the byte-level files
  "llama3-style": [[0x80], [0xe6, 0xbc], [0x41, 0xff, 0x42]],
  "qwen2-style": [[0x80], [0xe6, 0xbc], [0x41, 0xff, 0x42]],
};
for (const [name, sequences] of Object.entries(invalidUtf8)) {
  out.decode_cases[name] = [];
  for (const ids of sequences) out.decode_cases[name].push({ ids, decoded: await loaded[name].decode(ids, false) });
}
fs.writeFileSync(path.join(root, "tests/fixtures/llama-tokenizers-reference.json"), JSON.stringify(out) + "\n");
const sizes = Object.fromEntries(Object.entries(files).map(([n, j]) => [n, Object.keys(j.model.vocab).length]));
console.log(`${cases.length} strings; vocabularies ${JSON.stringify(sizes)}`);
