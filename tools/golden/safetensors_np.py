"""Minimal safetensors writer/reader on numpy (the safetensors package is not in Debian).

Format: 8-byte little-endian header length N, N bytes of JSON (padded with spaces to a multiple
of 8), then the raw little-endian tensor bytes back to back. bfloat16 has no numpy dtype: pass
a uint16 array of bf16 bit patterns wrapped as Bf16(bits).
"""
import json
import os
import struct

import numpy as np

_DTYPES = {
    np.dtype("float32"): "F32", np.dtype("float16"): "F16", np.dtype("int32"): "I32",
    np.dtype("int64"): "I64", np.dtype("uint16"): "U16", np.dtype("uint8"): "U8",
}
_NUMPY = {v: k for k, v in _DTYPES.items()}
_NUMPY["BF16"] = np.dtype("uint16")


class Bf16:
    """bf16 bit patterns (uint16) to be stored with dtype BF16."""

    def __init__(self, bits):
        self.bits = np.array(bits, dtype=np.uint16)


def f32_to_bf16_bits(x):
    """Round float32 to bf16 (nearest even), returning the uint16 bit patterns."""
    u = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32).astype(np.uint64)
    u = (u + 0x7FFF + ((u >> 16) & 1)) >> 16
    return u.astype(np.uint16)


def save(path, tensors, metadata=None):
    """tensors: dict name -> numpy array (or Bf16). Written in order of decreasing element size
    then name, like the safetensors package, so every tensor is aligned."""
    items = []
    for name, arr in tensors.items():
        if isinstance(arr, Bf16):
            items.append((name, "BF16", arr.bits))
        else:
            arr = np.asarray(arr)  # not ascontiguousarray: it turns a 0-d array into 1-d
            if not arr.flags.c_contiguous:
                arr = arr.copy()
            items.append((name, _DTYPES[arr.dtype], arr))
    items.sort(key=lambda it: (-it[2].dtype.itemsize, it[0]))
    header, offset = {}, 0
    for name, dt, arr in items:
        nbytes = arr.size * arr.dtype.itemsize
        header[name] = {"dtype": dt, "shape": list(arr.shape),
                        "data_offsets": [offset, offset + nbytes]}
        offset += nbytes
    if metadata:
        header["__metadata__"] = {str(k): str(v) for k, v in metadata.items()}
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * ((8 - len(text) % 8) % 8)
    tmp = f"{path}.tmp.{os.getpid()}"
    with open(tmp, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for _, _, arr in items:
            f.write(arr.astype(arr.dtype.newbyteorder("<"), copy=False).tobytes())
    os.replace(tmp, path)


def load(path):
    """Returns (dict name -> numpy array, metadata). BF16 comes back as uint16 bit patterns."""
    with open(path, "rb") as f:
        raw = f.read()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + n])
    meta = header.pop("__metadata__", {})
    data = raw[8 + n:]
    out = {}
    for name, e in header.items():
        b, end = e["data_offsets"]
        dt = _NUMPY[e["dtype"]].newbyteorder("<")
        out[name] = np.frombuffer(data[b:end], dtype=dt).reshape(e["shape"])
    return out, meta
