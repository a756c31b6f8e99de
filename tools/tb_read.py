#!/usr/bin/env python3
"""Reads TensorBoard event files and prints their scalars, one `tag step value` line each.

Written from the format description alone (no TensorFlow, no kiln code), so that it can check
kiln's writer independently. Standard library only.

Format: a TFRecord stream of records
    uint64 length (LE) | uint32 masked CRC-32C of the 8 length bytes | data | uint32 masked CRC of data
with masked(c) = ((c >> 15) | (c << 17)) + 0xa282ead8 (mod 2^32), and data = a tensorflow.Event:
    Event   { double wall_time = 1; int64 step = 2; string file_version = 3; Summary summary = 5; }
    Summary { repeated Value value = 1; }
    Value   { string tag = 1; float simple_value = 2; ... }

Output lines are `tag step value`; a tag may contain spaces (Megatron's "lm loss"), so step and
value are the last two fields. Values print as repr() of the float32 widened to a Python float.
Every CRC is verified; a bad CRC, a truncated record or malformed protobuf is an error (exit 1)
naming the file and byte offset. Usage: tb_read.py PATH...   (a directory means every events.out.tfevents.* file in it)
"""
import os
import struct
import sys


def _crc32c_table():
    table = []
    for i in range(256):
        c = i
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
        table.append(c)
    return table


_TABLE = _crc32c_table()


def crc32c(data):
    crc = 0xFFFFFFFF
    for b in data:
        crc = _TABLE[(crc ^ b) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


def masked(crc):
    return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


class FormatError(Exception):
    pass


def read_varint(buf, pos):
    result, shift = 0, 0
    while True:
        if pos >= len(buf):
            raise FormatError("truncated varint")
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result, pos
        shift += 7
        if shift > 63:
            raise FormatError("varint longer than 10 bytes")


def fields(buf):
    """Yields (field number, wire type, value) of one protobuf message."""
    pos = 0
    while pos < len(buf):
        key, pos = read_varint(buf, pos)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, pos = read_varint(buf, pos)
        elif wire == 1:
            if pos + 8 > len(buf):
                raise FormatError("truncated fixed64")
            value, pos = buf[pos:pos + 8], pos + 8
        elif wire == 2:
            n, pos = read_varint(buf, pos)
            if pos + n > len(buf):
                raise FormatError("truncated length-delimited field %d" % number)
            value, pos = buf[pos:pos + n], pos + n
        elif wire == 5:
            if pos + 4 > len(buf):
                raise FormatError("truncated fixed32")
            value, pos = buf[pos:pos + 4], pos + 4
        else:
            raise FormatError("unsupported wire type %d" % wire)
        yield number, wire, value


def records(data):
    """Yields (offset, payload) of each TFRecord, verifying both CRCs."""
    pos = 0
    while pos < len(data):
        if pos + 12 > len(data):
            raise FormatError("truncated record header at byte %d" % pos)
        header = data[pos:pos + 8]
        (length,) = struct.unpack("<Q", header)
        (length_crc,) = struct.unpack("<I", data[pos + 8:pos + 12])
        if masked(crc32c(header)) != length_crc:
            raise FormatError("bad length CRC at byte %d" % pos)
        start = pos + 12
        if start + length + 4 > len(data):
            raise FormatError("truncated record at byte %d" % pos)
        payload = data[start:start + length]
        (data_crc,) = struct.unpack("<I", data[start + length:start + length + 4])
        if masked(crc32c(payload)) != data_crc:
            raise FormatError("bad data CRC at byte %d" % pos)
        yield pos, payload
        pos = start + length + 4


def scalars(event):
    """Yields (tag, step, value) for each simple_value in one Event."""
    step, summaries = 0, []
    for number, wire, value in fields(event):
        if number == 2 and wire == 0:
            step = value - (1 << 64) if value >= 1 << 63 else value
        elif number == 5 and wire == 2:
            summaries.append(value)
    for summary in summaries:
        for number, wire, value in fields(summary):
            if number != 1 or wire != 2:
                continue
            tag, simple = None, None
            for vn, vw, vv in fields(value):
                if vn == 1 and vw == 2:
                    tag = vv.decode("utf-8")
                elif vn == 2 and vw == 5:
                    (simple,) = struct.unpack("<f", vv)
            if tag is not None and simple is not None:
                yield tag, step, simple


def read_file(path):
    with open(path, "rb") as f:
        data = f.read()
    out, saw_version = [], False
    for offset, payload in records(data):
        try:
            for number, wire, value in fields(payload):
                if number == 3 and wire == 2 and value == b"brain.Event:2":
                    saw_version = True
            out.extend(scalars(payload))
        except FormatError as e:
            raise FormatError("record at byte %d: %s" % (offset, e))
    if not saw_version:
        raise FormatError("no file_version 'brain.Event:2' record")
    return out


def event_files(arg):
    if os.path.isdir(arg):
        return sorted(os.path.join(arg, n) for n in os.listdir(arg)
                      if n.startswith("events.out.tfevents."))
    return [arg]


def main(argv):
    if len(argv) < 2:
        print("usage: tb_read.py PATH...", file=sys.stderr)
        return 2
    for arg in argv[1:]:
        for path in event_files(arg):
            try:
                rows = read_file(path)
            except (FormatError, UnicodeDecodeError, OSError) as e:
                print("%s: %s" % (path, e), file=sys.stderr)
                return 1
            for tag, step, value in rows:
                print("%s %d %r" % (tag, step, value))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
