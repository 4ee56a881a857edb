// Encode throughput of tiktoken (WASM, gpt2 encoding) and HF tokenizers (native addon) on the
// texts benchmarks/bench_tokenizer.cpp uses, one thread, MB/s of input text (median of 9 runs
// after 2 warm-up runs). Usage: node bench_tiktoken.mjs
import { createRequire } from "node:module";
import fs from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";

const require = createRequire(import.meta.url);
const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");
const tiktoken = require("tiktoken");
const enc = tiktoken.get_encoding("gpt2");

const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
for (const file of ["kjv-eval.txt", "jargon-eval.txt"]) {
  const text = fs.readFileSync(path.join(root, "data", file), "utf8");
  const bytes = Buffer.byteLength(text);
  const times = [];
  let tokens = 0;
  for (let run = 0; run < 11; ++run) {
    const start = process.hrtime.bigint();
    tokens = enc.encode_ordinary(text).length;
    const seconds = Number(process.hrtime.bigint() - start) / 1e9;
    if (run >= 2) times.push(seconds);
  }
  const t = median(times);
  console.log(`tiktoken ${file}: ${bytes} bytes, ${tokens} tokens, ${(t * 1e3).toFixed(2)} ms, ` +
              `${(bytes / t / 1e6).toFixed(2)} MB/s`);
}
enc.free();
