// Tokenizes the texts models/tiny-llama is trained and evaluated on with Hugging Face tokenizers
// (the npm binding, the same reference as generate_llama_tokenizers.mjs) reading
// models/llama3-style-tokenizer/tokenizer.json, and writes the ids as little-endian u16 token files
// (the format of `nlb tokenize --out`, read by tools/python/train.py --arch llama):
//   out/data/kjv-train.txt    -> out/data/kjv-train.llama3.u16    (make_data.py writes the text)
//   data/kjv-eval.txt         -> out/data/kjv-eval.llama3.u16
//   data/jargon-eval.txt      -> out/data/jargon-eval.llama3.u16
// Each file is encoded as one string without special tokens (no BOS: the evaluation protocol
// cuts the stream into windows, as for the other models). Checks before writing: every id fits
// in 16 bits, decoding the ids gives the text back, and the bytes the tokens stand for (one byte
// per character of a ByteLevel vocabulary entry) add up to the file's size.
// Run from this folder: npm ci && node tokenize_corpus.mjs [--tokenizer FILE] [IN OUT]...
// out/ is not committed; models/README.md says when to run this.
import { createRequire } from "node:module";
import fs from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";

const require = createRequire(import.meta.url);
const here = path.dirname(fileURLToPath(import.meta.url));
const root = path.resolve(here, "../..");
const hf = require("tokenizers");

const args = process.argv.slice(2);
let tokenizerFile = path.join(root, "models/llama3-style-tokenizer/tokenizer.json");
if (args[0] === "--tokenizer") {
  tokenizerFile = path.resolve(args[1]);
  args.splice(0, 2);
}
if (args.length % 2 !== 0) throw new Error("usage: node tokenize_corpus.mjs [--tokenizer FILE] [IN OUT]...");
const jobs = [];
for (let i = 0; i < args.length; i += 2) jobs.push([path.resolve(args[i]), path.resolve(args[i + 1])]);
if (jobs.length === 0) {
  for (const [dir, name] of [["out/data", "kjv-train"], ["data", "kjv-eval"], ["data", "jargon-eval"]]) {
    jobs.push([path.join(root, dir, `${name}.txt`), path.join(root, "out/data", `${name}.llama3.u16`)]);
  }
}

const tokenizer = hf.Tokenizer.fromFile(tokenizerFile);
const json = JSON.parse(fs.readFileSync(tokenizerFile, "utf8"));
const byteLength = new Map(); // id -> bytes (ByteLevel: one character per byte)
for (const [piece, id] of Object.entries(json.model.vocab)) byteLength.set(id, [...piece].length);

for (const [input, output] of jobs) {
  const raw = fs.readFileSync(input);
  const text = raw.toString("utf8");
  if (Buffer.from(text, "utf8").compare(raw) !== 0) throw new Error(`${input}: not valid UTF-8`);
  const ids = (await tokenizer.encode(text, null, { addSpecialTokens: false })).getIds();
  let bytes = 0;
  for (const id of ids) {
    if (id > 0xffff) throw new Error(`${input}: id ${id} does not fit in 16 bits`);
    if (!byteLength.has(id)) throw new Error(`${input}: id ${id} is not a vocabulary entry`);
    bytes += byteLength.get(id);
  }
  if (bytes !== raw.length) throw new Error(`${input}: tokens stand for ${bytes} bytes, the file has ${raw.length}`);
  if ((await tokenizer.decode(ids, false)) !== text) throw new Error(`${input}: decode(encode(text)) != text`);
  const buf = Buffer.alloc(2 * ids.length);
  ids.forEach((id, i) => buf.writeUInt16LE(id, 2 * i));
  fs.mkdirSync(path.dirname(output), { recursive: true });
  fs.writeFileSync(output, buf);
  console.log(`${path.relative(root, input)}: ${raw.length} bytes -> ${ids.length} tokens ` +
              `(${(raw.length / ids.length).toFixed(3)} bytes/token) -> ${path.relative(root, output)}`);
}
