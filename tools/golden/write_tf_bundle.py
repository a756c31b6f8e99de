"""A writer of TensorFlow's TensorBundle checkpoint format (tf.train.Saver V2) on numpy, for
kiln's tests: written from the format's description, independently of kiln's C++ reader.

    PREFIX.index                 a LevelDB table: key b"" -> BundleHeaderProto, each variable
                                 name -> BundleEntryProto
    PREFIX.data-SSSSS-of-NNNNN   the tensors' bytes

Table layout: data blocks, a metaindex block (empty), an index block (one entry per data block:
its last key -> varint offset + varint size of the block), a 48-byte footer (the two block
handles padded to 40 bytes, then magic 0xdb4775248b80fb57 little-endian). A block is a run of
entries (varint shared key bytes, varint unshared bytes, varint value size, key suffix, value),
uint32 restart offsets and their uint32 count; each block is followed by a type byte (0: not
compressed) and the masked CRC-32C of block + type byte.

Usage: write_tf_bundle.py SAFETENSORS PREFIX [--shards N] [--block-size B] [--restart-interval R]
copies every tensor of a safetensors file (names used verbatim) into a bundle; prints the number
of data blocks in the index.
"""
import argparse
import json
import struct

import numpy as np

import safetensors_np

DT_FLOAT, DT_INT32, DT_INT64, DT_BFLOAT16, DT_HALF = 1, 3, 9, 14, 19
_TF_DTYPE = {"F32": DT_FLOAT, "F16": DT_HALF, "BF16": DT_BFLOAT16, "I32": DT_INT32, "I64": DT_INT64}


def _crc_table():
    table = []
    for n in range(256):
        c = n
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
        table.append(c)
    return table


_CRC_TABLE = _crc_table()


def crc32c(data):
    crc = 0xFFFFFFFF
    for byte in data:
        crc = _CRC_TABLE[(crc ^ byte) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


def masked(crc):
    return ((((crc >> 15) | (crc << 17)) & 0xFFFFFFFF) + 0xA282EAD8) & 0xFFFFFFFF


def varint(n):
    out = bytearray()
    while True:
        low = n & 0x7F
        n >>= 7
        if n:
            out.append(low | 0x80)
        else:
            out.append(low)
            return bytes(out)


def _field(number, wire_type):
    return varint(number << 3 | wire_type)


def _varint_field(number, value):
    return _field(number, 0) + varint(value) if value else b""  # proto3 omits zeros


def _message_field(number, payload):
    return _field(number, 2) + varint(len(payload)) + payload


def header_proto(num_shards):
    version = _varint_field(1, 1)  # VersionDef.producer
    return _varint_field(1, num_shards) + _message_field(3, version)  # endianness LITTLE = 0


def entry_proto(dtype, shape, shard, offset, size, crc):
    dims = b"".join(_message_field(2, _varint_field(1, d)) for d in shape)
    return (_varint_field(1, dtype) + _message_field(2, dims) + _varint_field(3, shard) +
            _varint_field(4, offset) + _varint_field(5, size) + _field(6, 5) + struct.pack("<I", crc))


def _block(entries, restart_interval):
    out, restarts, previous = bytearray(), [], b""
    for i, (key, value) in enumerate(entries):
        shared = 0
        if i % restart_interval == 0:
            restarts.append(len(out))
        else:
            while shared < min(len(key), len(previous)) and key[shared] == previous[shared]:
                shared += 1
        out += varint(shared) + varint(len(key) - shared) + varint(len(value)) + key[shared:] + value
        previous = key
    restarts = restarts or [0]
    out += b"".join(struct.pack("<I", r) for r in restarts) + struct.pack("<I", len(restarts))
    return bytes(out)


def _append_block(f, contents):
    offset = f.tell()
    f.write(contents + b"\x00" + struct.pack("<I", masked(crc32c(contents + b"\x00"))))
    return varint(offset) + varint(len(contents))


def write_table(path, items, block_size=4096, restart_interval=16):
    """items: (bytes key, bytes value) in increasing key order. Returns the data block count."""
    groups, current, size = [], [], 0
    for key, value in items:
        current.append((key, value))
        size += len(key) + len(value) + 8
        if size >= block_size:
            groups.append(current)
            current, size = [], 0
    if current:
        groups.append(current)
    with open(path, "wb") as f:
        index = [(group[-1][0], _append_block(f, _block(group, restart_interval))) for group in groups]
        metaindex_handle = _append_block(f, _block([], 1))
        index_handle = _append_block(f, _block(index, 1))
        footer = (metaindex_handle + index_handle).ljust(40, b"\x00")
        f.write(footer + struct.pack("<Q", 0xDB4775248B80FB57))
    return len(groups)


def write_bundle(prefix, tensors, shards=1, block_size=4096, restart_interval=16):
    """tensors: dict name -> (TF dtype number, numpy array). Tensors go to the shards in turn.
    Returns the number of data blocks in the index."""
    files = [open(f"{prefix}.data-{s:05d}-of-{shards:05d}", "wb") for s in range(shards)]
    items = [(b"", header_proto(shards))]
    for i, name in enumerate(sorted(tensors, key=lambda n: n.encode())):
        dtype, array = tensors[name]
        raw = np.ascontiguousarray(array).tobytes()
        shard = i % shards
        offset = files[shard].tell()
        files[shard].write(raw)
        items.append((name.encode(), entry_proto(dtype, array.shape, shard, offset, len(raw), masked(crc32c(raw)))))
    for f in files:
        f.close()
    return write_table(f"{prefix}.index", items, block_size, restart_interval)


def safetensors_dtypes(path):
    with open(path, "rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(n))
    return {name: e["dtype"] for name, e in header.items() if name != "__metadata__"}


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("safetensors")
    p.add_argument("prefix")
    p.add_argument("--shards", type=int, default=1)
    p.add_argument("--block-size", type=int, default=4096)
    p.add_argument("--restart-interval", type=int, default=16)
    a = p.parse_args()
    arrays, _ = safetensors_np.load(a.safetensors)
    dtypes = safetensors_dtypes(a.safetensors)
    tensors = {name: (_TF_DTYPE[dtypes[name]], arr) for name, arr in arrays.items()}
    blocks = write_bundle(a.prefix, tensors, a.shards, a.block_size, a.restart_interval)
    print(f"data blocks: {blocks}")


if __name__ == "__main__":
    main()
