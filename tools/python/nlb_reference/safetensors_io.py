"""Minimal, strict reader and writer for the safetensors format.

The format (as documented by the safetensors project):
  - 8 bytes: N, the length of the JSON header, unsigned little-endian;
  - N bytes: a UTF-8 JSON object mapping each tensor name to
    {"dtype": str, "shape": [int, ...], "data_offsets": [begin, end]} plus an
    optional "__metadata__" object whose values are all strings;
  - the data buffer: the tensors' raw little-endian bytes, row-major, with
    offsets relative to the start of the buffer (after the header).

The writer follows what Hugging Face's `save_pretrained` produces: compact JSON,
the header padded with spaces to a multiple of 8 bytes, tensors packed back to
back without holes. Tensors are laid out in name order (the Rust library sorts
by alignment first, then name; for single-dtype files the two orders agree).

No `safetensors` Python package exists on the machine this project targets,
hence this module; it depends only on numpy and torch.
"""

import json
import struct

import numpy as np
import torch

# dtype tag -> (torch dtype, bytes per element, little-endian numpy dtype or
# None where numpy has no such type and the bytes go through int16).
_DTYPES = {
    "F64": (torch.float64, 8, "<f8"),
    "F32": (torch.float32, 4, "<f4"),
    "F16": (torch.float16, 2, "<f2"),
    "BF16": (torch.bfloat16, 2, None),
    "I64": (torch.int64, 8, "<i8"),
    "I32": (torch.int32, 4, "<i4"),
    "I16": (torch.int16, 2, "<i2"),
    "U8": (torch.uint8, 1, "|u1"),
}
_TAG_OF_TORCH = {v[0]: k for k, v in _DTYPES.items()}

# A header larger than this is treated as corrupt rather than read (the same
# bound the C++ loader applies).
MAX_HEADER_BYTES = 100 * 1024 * 1024


class SafetensorsError(ValueError):
    """A file that does not follow the safetensors format."""


def _tensor_bytes(t: torch.Tensor) -> bytes:
    t = t.detach().contiguous().cpu()
    tag = _TAG_OF_TORCH.get(t.dtype)
    if tag is None:
        raise SafetensorsError(f"unsupported dtype {t.dtype}")
    if tag == "BF16":
        # numpy has no bfloat16: reinterpret the same 16 bits as int16.
        return t.view(torch.int16).numpy().astype("<i2").tobytes()
    return t.numpy().astype(_DTYPES[tag][2], copy=False).tobytes()


def _tensor_from_bytes(raw: bytes, tag: str, shape) -> torch.Tensor:
    torch_dtype, _, np_dtype = _DTYPES[tag]
    if tag == "BF16":
        arr = np.frombuffer(raw, dtype="<i2").astype(np.int16)
        return torch.from_numpy(arr.copy()).view(torch.bfloat16).reshape(shape)
    arr = np.frombuffer(raw, dtype=np_dtype)
    # astype to the native type and copy: the buffer is read-only and may be
    # unaligned; torch wants neither.
    arr = arr.astype(np.dtype(np_dtype).newbyteorder("="), copy=True)
    return torch.from_numpy(arr).reshape(shape)


def encode(tensors: dict, metadata: dict | None = None) -> bytes:
    """Serialises `tensors` (name -> torch.Tensor) and optional string metadata."""
    header = {}
    if metadata is not None:
        if not all(isinstance(k, str) and isinstance(v, str) for k, v in metadata.items()):
            raise SafetensorsError("__metadata__ must map strings to strings")
        header["__metadata__"] = dict(metadata)
    chunks = []
    offset = 0
    for name in sorted(tensors):
        if name == "__metadata__":
            raise SafetensorsError("a tensor may not be called __metadata__")
        t = tensors[name]
        raw = _tensor_bytes(t)
        header[name] = {
            "dtype": _TAG_OF_TORCH[t.dtype],
            "shape": [int(s) for s in t.shape],
            "data_offsets": [offset, offset + len(raw)],
        }
        chunks.append(raw)
        offset += len(raw)
    head = json.dumps(header, separators=(",", ":")).encode("utf-8")
    head += b" " * ((-len(head)) % 8)
    return struct.pack("<Q", len(head)) + head + b"".join(chunks)


def write(path, tensors: dict, metadata: dict | None = None) -> None:
    """Writes a safetensors file (see `encode`)."""
    data = encode(tensors, metadata)
    with open(path, "wb") as f:
        f.write(data)


def decode(data: bytes):
    """Parses and validates a safetensors byte string.

    Returns (tensors, metadata): a dict name -> torch.Tensor in file order and
    the metadata dict (empty when absent). Raises SafetensorsError on any
    violation: short file, header beyond the file, bad JSON, unknown dtype,
    numel x element size != end - begin, offsets out of bounds, overlapping
    tensors or bytes not covered by any tensor.
    """
    if len(data) < 8:
        raise SafetensorsError(f"file of {len(data)} bytes is shorter than the 8-byte header length")
    (n,) = struct.unpack("<Q", data[:8])
    if n > MAX_HEADER_BYTES:
        raise SafetensorsError(f"header length {n} exceeds {MAX_HEADER_BYTES}")
    if 8 + n > len(data):
        raise SafetensorsError(f"header length {n} runs past the end of a {len(data)}-byte file")
    try:
        header = json.loads(data[8 : 8 + n].decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise SafetensorsError(f"header is not valid UTF-8 JSON: {e}") from e
    if not isinstance(header, dict):
        raise SafetensorsError("header is not a JSON object")
    metadata = header.pop("__metadata__", {})
    if not isinstance(metadata, dict) or not all(isinstance(v, str) for v in metadata.values()):
        raise SafetensorsError("__metadata__ must map strings to strings")
    buffer = memoryview(data)[8 + n :]
    spans = []
    tensors = {}
    for name, info in header.items():
        if not isinstance(info, dict) or set(info) != {"dtype", "shape", "data_offsets"}:
            raise SafetensorsError(f"tensor {name}: entry must hold exactly dtype, shape, data_offsets")
        tag = info["dtype"]
        if tag not in _DTYPES:
            raise SafetensorsError(f"tensor {name}: unknown dtype {tag!r}")
        shape = info["shape"]
        offsets = info["data_offsets"]
        if not (isinstance(shape, list) and all(isinstance(s, int) and s >= 0 for s in shape)):
            raise SafetensorsError(f"tensor {name}: bad shape {shape!r}")
        if not (
            isinstance(offsets, list)
            and len(offsets) == 2
            and all(isinstance(o, int) for o in offsets)
            and 0 <= offsets[0] <= offsets[1] <= len(buffer)
        ):
            raise SafetensorsError(
                f"tensor {name}: data_offsets {offsets!r} outside the {len(buffer)}-byte buffer"
            )
        numel = 1
        for s in shape:
            numel *= s
        expected = numel * _DTYPES[tag][1]
        if offsets[1] - offsets[0] != expected:
            raise SafetensorsError(
                f"tensor {name}: {tag}{shape} needs {expected} bytes, offsets span {offsets[1] - offsets[0]}"
            )
        spans.append((offsets[0], offsets[1], name))
        tensors[name] = _tensor_from_bytes(bytes(buffer[offsets[0] : offsets[1]]), tag, shape)
    position = 0
    for begin, end, name in sorted(spans):
        if begin != position:
            what = "overlaps the previous tensor" if begin < position else "leaves a hole before it"
            raise SafetensorsError(f"tensor {name} at {begin} {what} (previous end {position})")
        position = end
    if position != len(buffer):
        raise SafetensorsError(f"tensors cover {position} bytes of a {len(buffer)}-byte buffer")
    return tensors, metadata


def read(path):
    """Reads and validates a safetensors file; see `decode`."""
    with open(path, "rb") as f:
        return decode(f.read())
