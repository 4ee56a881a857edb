#!/usr/bin/python3
"""Writes the malformed-safetensors corpus and the fuzzing seed corpus.

    /usr/bin/python3 tools/python/make_malformed_safetensors.py

Outputs (deterministic; committed to the repository):
  tests/fixtures/malformed-safetensors/*.safetensors  one file per way a file can be
      broken; tests/io/test_safetensors.cpp lists each file with the phrase its
      FormatError must contain (see docs/safetensors.md).
  tests/fuzz/corpus/*.safetensors  valid small files (written here by hand with struct,
      independently of the C++ writer) plus a copy of some malformed files, as seeds for
      tests/fuzz/fuzz_safetensors.cpp.

Only the Python standard library is used. The files are built byte by byte, so each one
breaks exactly one rule of the format.
"""

import json
import os
import shutil
import struct
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MALFORMED_DIR = os.path.join(ROOT, "tests", "fixtures", "malformed-safetensors")
SEED_DIR = os.path.join(ROOT, "tests", "fuzz", "corpus")


def file_bytes(header, data=b"", header_length=None, pad=b" "):
    """8-byte little-endian header length, header (str or bytes, padded with `pad` to a
    multiple of 8), data. `header_length` overrides the stored length."""
    if isinstance(header, str):
        header = header.encode("utf-8")
    if pad:
        header += pad * ((-len(header)) % 8)
    n = len(header) if header_length is None else header_length
    return struct.pack("<Q", n) + header + data


def entry(dtype, shape, begin, end):
    return {"dtype": dtype, "shape": shape, "data_offsets": [begin, end]}


def header_of(entries, metadata=None):
    obj = {}
    if metadata is not None:
        obj["__metadata__"] = metadata
    obj.update(entries)
    return json.dumps(obj, separators=(",", ":"))


def f32(*values):
    return struct.pack("<%df" % len(values), *values)


# A valid file the truncation cases cut: one F32 tensor [2, 3] = 1..6.
VALID_SMALL = file_bytes(header_of({"w": entry("F32", [2, 3], 0, 24)}), f32(1, 2, 3, 4, 5, 6))
SIXTEEN = bytes(range(16))


def malformed_cases():
    """name -> bytes. The comment after each says which rule it breaks."""
    c = {}
    c["empty"] = b""  # shorter than the 8-byte length
    c["short_5_bytes"] = b"\x08\x00\x00\x00\x00"  # shorter than the 8-byte length
    c["header_length_zero"] = struct.pack("<Q", 0)  # empty header: no '{'
    c["header_length_beyond_file"] = file_bytes('{"a":1}', header_length=1000)
    c["header_length_over_limit"] = file_bytes("{}", header_length=100 * 1024 * 1024 + 1)
    c["header_length_u64_max"] = file_bytes("{}", header_length=2**64 - 1)
    c["truncated_in_header"] = VALID_SMALL[:30]  # length says more header than remains
    c["truncated_in_data"] = VALID_SMALL[:-3]  # last tensor ends past the data
    c["header_not_json"] = file_bytes("{not json}")
    c["header_trailing_garbage"] = file_bytes('{"__metadata__":{}} x')
    c["header_invalid_utf8"] = file_bytes(b'{"a\xff":{"dtype":"U8","shape":[0],"data_offsets":[0,0]}}')
    c["header_with_comment"] = file_bytes("{/* c */}")
    c["header_nul_padding"] = struct.pack("<Q", 8) + b"{}" + b"\x00" * 6
    c["header_leading_space"] = file_bytes(" {}")
    c["header_json_array"] = file_bytes("[1,2]")
    c["duplicate_tensor_name"] = file_bytes(
        '{"a":{"dtype":"U8","shape":[8],"data_offsets":[0,8]},'
        '"a":{"dtype":"U8","shape":[8],"data_offsets":[8,16]}}', SIXTEEN)
    c["metadata_not_object"] = file_bytes('{"__metadata__":"x"}')
    c["metadata_value_not_string"] = file_bytes('{"__metadata__":{"format":1}}')
    c["empty_tensor_name"] = file_bytes(header_of({"": entry("U8", [16], 0, 16)}), SIXTEEN)
    c["entry_not_object"] = file_bytes('{"a":5}')
    c["entry_missing_dtype"] = file_bytes('{"a":{"shape":[16],"data_offsets":[0,16]}}', SIXTEEN)
    c["entry_unexpected_key"] = file_bytes(
        '{"a":{"dtype":"U8","shape":[16],"data_offsets":[0,16],"extra":1}}', SIXTEEN)
    c["dtype_not_string"] = file_bytes('{"a":{"dtype":5,"shape":[16],"data_offsets":[0,16]}}', SIXTEEN)
    c["dtype_unknown"] = file_bytes(header_of({"a": entry("F8_E4M3", [16], 0, 16)}), SIXTEEN)
    c["dtype_lowercase"] = file_bytes(header_of({"a": entry("f32", [4], 0, 16)}), SIXTEEN)
    c["shape_not_array"] = file_bytes(header_of({"a": entry("U8", 16, 0, 16)}), SIXTEEN)
    c["shape_negative_dim"] = file_bytes(header_of({"a": entry("U8", [-4, -4], 0, 16)}), SIXTEEN)
    c["shape_fractional_dim"] = file_bytes('{"a":{"dtype":"U8","shape":[16.0],"data_offsets":[0,16]}}', SIXTEEN)
    c["shape_dim_too_large"] = file_bytes(header_of({"a": entry("U8", [2**63], 0, 16)}), SIXTEEN)
    c["numel_overflow"] = file_bytes(header_of({"a": entry("U8", [2**32, 2**32, 4], 0, 16)}), SIXTEEN)
    c["byte_count_overflow"] = file_bytes(header_of({"a": entry("F64", [2**62], 0, 16)}), SIXTEEN)
    c["offsets_not_array"] = file_bytes('{"a":{"dtype":"U8","shape":[16],"data_offsets":16}}', SIXTEEN)
    c["offsets_one_element"] = file_bytes('{"a":{"dtype":"U8","shape":[16],"data_offsets":[16]}}', SIXTEEN)
    c["offsets_three_elements"] = file_bytes('{"a":{"dtype":"U8","shape":[16],"data_offsets":[0,8,16]}}', SIXTEEN)
    c["offsets_not_integers"] = file_bytes('{"a":{"dtype":"U8","shape":[16],"data_offsets":["0","16"]}}', SIXTEEN)
    c["offsets_negative"] = file_bytes(header_of({"a": entry("U8", [16], -16, 0)}), SIXTEEN)
    c["begin_greater_than_end"] = file_bytes(header_of({"a": entry("U8", [4], 8, 4)}), SIXTEEN)
    c["end_beyond_data"] = file_bytes(header_of({"a": entry("F32", [100], 0, 400)}), SIXTEEN)
    c["numel_mismatch"] = file_bytes(header_of({"a": entry("F32", [2, 3], 0, 20)}), bytes(24))
    c["overlapping_tensors"] = file_bytes(
        header_of({"a": entry("F32", [4], 0, 16), "b": entry("F32", [4], 8, 24)}), bytes(24))
    c["nested_overlap"] = file_bytes(
        header_of({"a": entry("U8", [32], 0, 32), "b": entry("U8", [4], 20, 24),
                   "c": entry("U8", [4], 8, 12)}), bytes(32))
    return c


def valid_seeds():
    """Valid files written independently of the C++ writer (struct packing)."""
    s = {}
    s["valid_f32_with_metadata"] = file_bytes(
        header_of({"w": entry("F32", [2, 3], 0, 24)}, metadata={"format": "pt"}),
        f32(1, 2, 3, 4, 5, 6))
    # One tensor per dtype, packed back to back in this order, so most begin offsets are
    # odd or otherwise unaligned: u8 [3] at 0, f16 [2] at 3, bf16 [2] at 7, f32 [1] at 11,
    # i32 [1] at 15, f64 [1] at 19, i64 [1] at 27, bool [2] at 35.
    parts = [
        ("a_u8", "U8", [3], bytes([0, 127, 255])),
        ("b_f16", "F16", [2], struct.pack("<2e", 1.5, -65504.0)),
        ("c_bf16", "BF16", [2], struct.pack("<2H", 0x3FC0, 0xC2F7)),  # 1.5, -123.5
        ("d_f32", "F32", [1], f32(0.1)),
        ("e_i32", "I32", [1], struct.pack("<i", -2147483648)),
        ("f_f64", "F64", [1], struct.pack("<d", 2.0 ** -1074)),
        ("g_i64", "I64", [1], struct.pack("<q", 2**62 + 1)),
        ("h_bool", "BOOL", [2], bytes([1, 0])),
    ]
    entries, data = {}, b""
    for name, dtype, shape, raw in parts:
        entries[name] = entry(dtype, shape, len(data), len(data) + len(raw))
        data += raw
    s["valid_every_dtype_unaligned"] = file_bytes(header_of(entries), data)
    s["valid_scalar_and_empty"] = file_bytes(
        header_of({"scalar": entry("F32", [], 0, 4), "empty": entry("F16", [0, 5], 4, 4)}),
        f32(-2.5))
    s["valid_no_tensors"] = file_bytes("{}")
    return s


def write_all(directory, files):
    os.makedirs(directory, exist_ok=True)
    for old in os.listdir(directory):
        if old.endswith(".safetensors"):
            os.remove(os.path.join(directory, old))
    for name, data in sorted(files.items()):
        with open(os.path.join(directory, name + ".safetensors"), "wb") as f:
            f.write(data)


def main():
    malformed = malformed_cases()
    seeds = dict(valid_seeds())
    # A spread of malformed files as seeds: each starts the fuzzer next to one check.
    for name in ["truncated_in_data", "duplicate_tensor_name", "numel_overflow",
                 "overlapping_tensors", "nested_overlap", "metadata_value_not_string",
                 "shape_negative_dim", "end_beyond_data"]:
        seeds["malformed_" + name] = malformed[name]
    write_all(MALFORMED_DIR, malformed)
    write_all(SEED_DIR, seeds)
    print(f"wrote {len(malformed)} files to {MALFORMED_DIR} and {len(seeds)} to {SEED_DIR}",
          file=sys.stderr)


if __name__ == "__main__":
    main()
