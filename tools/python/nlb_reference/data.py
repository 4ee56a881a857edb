"""Byte-level corpora from two public-domain texts shipped by Debian.

KJV Bible (packages bible-kjv + bible-kjv-text): the `bible` program prints
every verse as "<Book><chapter>:<verse> <text>". Cleaning: drop the reference,
collapse runs of spaces to one, one verse per line ("\n"-terminated). The text
is already 7-bit ASCII; this is checked.

Split (deterministic, by chapter, so no verse is shared between files):
  - the held-out pool is every chapter whose index (0-based, canonical order,
    1189 chapters) is congruent to 5 mod 10;
  - pool chapters are dealt in turn to eval, label, fit, eval, label, fit, ...;
    each of those files takes its chapters' verses in order and stops at the
    last whole verse within its byte budget (the rest of the pool is unused);
  - every other chapter forms the training split (never committed).

Jargon File 4.4.7 (package jargon-text): the lexicon body (from the first
entry ":(TM):" to the end of the last entry), re-flowed one paragraph per
line. Paragraphs that are neither an entry header (starting with ':') nor at
least 8 words long are dropped (they are the per-letter headword indexes);
so are paragraphs holding box-drawing table characters. Typographic
characters are mapped to ASCII (curly quotes to straight ones, dashes to
'-'/'--', no-break space to space, middle dot to '.', ...), accented letters
lose their accents (NFKD), and anything still non-ASCII is dropped. The eval
file is the first whole paragraphs within its byte budget, less a trailing
entry header whose definition did not fit.
"""

import gzip
import re
import subprocess
import unicodedata

KJV_EXPECTED_VERSES = 31102
KJV_EXPECTED_CHAPTERS = 1189
JARGON_PATH = "/usr/share/doc/jargon-text/jargon.txt.gz"

BUDGETS = {"fit": 60_000, "label": 120_000, "eval": 120_000}
JARGON_BUDGET = 120_000

_VERSE = re.compile(r"^([1-3]?[A-Za-z]+)(\d+):(\d+) (.*)$")


def kjv_chapters():
    """List of chapters, each a list of cleaned verse strings (no newline)."""
    # -f: one reference-prefixed verse per line; -l with a huge width so that
    # no verse is wrapped.
    out = subprocess.run(
        ["bible", "-f", "-l1000000", "gen1:1-rev22:21"], check=True, capture_output=True
    ).stdout
    text = out.decode("ascii")  # raises if the text is not 7-bit ASCII
    chapters = []
    last_key = None
    verses = 0
    for line in text.splitlines():
        m = _VERSE.match(line)
        if m is None:
            raise ValueError(f"unexpected line from `bible`: {line[:80]!r}")
        key = (m.group(1), m.group(2))
        if key != last_key:
            chapters.append([])
            last_key = key
        chapters[-1].append(re.sub(r" {2,}", " ", m.group(4).strip()))
        verses += 1
    if verses != KJV_EXPECTED_VERSES or len(chapters) != KJV_EXPECTED_CHAPTERS:
        raise ValueError(f"expected {KJV_EXPECTED_VERSES} verses in {KJV_EXPECTED_CHAPTERS} chapters, "
                         f"found {verses} in {len(chapters)}")
    return chapters


def split_kjv(chapters):
    """-> dict with 'train', 'fit', 'label', 'eval' strings (see module doc)."""
    pool = [c for i, c in enumerate(chapters) if i % 10 == 5]
    train = [c for i, c in enumerate(chapters) if i % 10 != 5]
    dealt = {"eval": [], "label": [], "fit": []}
    order = ["eval", "label", "fit"]
    for j, chapter in enumerate(pool):
        dealt[order[j % 3]].append(chapter)
    out = {"train": "".join(v + "\n" for c in train for v in c)}
    for name, chs in dealt.items():
        text = ""
        for verse in (v for c in chs for v in c):
            line = verse + "\n"
            if len(text) + len(line) > BUDGETS[name]:
                break
            text += line
        out[name] = text
    return out


_ASCII_MAP = {
    "\u201c": '"', "\u201d": '"', "\u2018": "'", "\u2019": "'", "\u00b4": "'",
    "\u2014": "--", "\u2013": "-", "\u2212": "-", "\u00a0": " ", "\u00b7": ".",
    "\u2022": "*", "\u2192": "->", "\u2190": "<-", "\u00d7": "x", "\u00a9": "(C)",
    "\u2122": "(TM)", "\u00ae": "(R)", "\u00b1": "+/-", "\u00a3": "L", "\u00b5": "u",
    "\u00df": "ss", "\u00e6": "ae", "\u00d8": "O", "\u2026": "...",
}


def to_ascii(s: str) -> str:
    s = "".join(_ASCII_MAP.get(ch, ch) for ch in s)
    s = unicodedata.normalize("NFKD", s)
    return s.encode("ascii", "ignore").decode("ascii")


def jargon_paragraphs():
    text = gzip.open(JARGON_PATH, "rt", encoding="utf-8").read()
    lines = text.splitlines()
    start = next(i for i, l in enumerate(lines) if l.startswith("   :(TM):"))
    # The lexicon ends where the appendices begin: an unindented heading
    # "Appendix A." whose spaces are no-break spaces, hence \s.
    end = next(i for i in range(start, len(lines)) if re.match(r"Appendix\sA\.", lines[i]))
    paragraphs = []
    current = []
    for line in lines[start:end] + [""]:
        if line.strip():
            current.append(line.strip())
        elif current:
            paragraphs.append(current)
            current = []
    kept = []
    for para in paragraphs:
        if any("\u2500" <= ch <= "\u257f" for l in para for ch in l):
            continue  # box-drawing table
        joined = re.sub(r"\s+", " ", to_ascii(" ".join(para))).strip()
        if joined.startswith(":") or len(joined.split()) >= 8:
            kept.append(joined)
    return kept


def jargon_eval():
    kept = []
    size = 0
    for para in jargon_paragraphs():
        if size + len(para) + 1 > JARGON_BUDGET:
            break
        kept.append(para)
        size += len(para) + 1
    # Do not end on an entry header whose definition was cut off.
    while kept and kept[-1].startswith(":"):
        kept.pop()
    return "".join(p + "\n" for p in kept)


def read_tokens(path):
    """The bytes of a file as a list of token ids (0..255)."""
    with open(path, "rb") as f:
        return list(f.read())
