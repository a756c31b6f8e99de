#include "kiln/io/proto_wire.h"

#include <cstdint>
#include <cstring>
#include <string>

#include "kiln/core/error.h"

namespace kiln::io {

void ProtoReader::fail(std::string_view problem) const {
  throw Error("{}: malformed protobuf: {}", what_, problem);
}

uint64_t ProtoReader::read_varint() {
  uint64_t value = 0;
  for (int shift = 0; shift < 64; shift += 7) {
    if (rest_.empty()) fail("truncated varint");
    const auto byte = uint8_t(rest_.front());
    rest_.remove_prefix(1);
    value |= uint64_t(byte & 0x7f) << shift;
    if (!(byte & 0x80)) return value;
  }
  fail("varint longer than 10 bytes");
}

bool ProtoReader::next() {
  if (rest_.empty()) return false;
  const uint64_t key = read_varint();
  // Protobuf field numbers end at 2^29 - 1; a larger one would alias a small one once narrowed.
  if (key >> 3 > kMaxFieldNumber) fail("field number " + std::to_string(key >> 3) + " is past 2^29 - 1");
  field_ = uint32_t(key >> 3);
  wire_type_ = uint32_t(key & 7);
  if (field_ == 0) fail("field number 0");
  return true;
}

void ProtoReader::expect(uint32_t wire_type) const {
  if (wire_type_ != wire_type)
    fail("field " + std::to_string(field_) + " has wire type " + std::to_string(wire_type_) + ", expected " +
         std::to_string(wire_type));
}

uint64_t ProtoReader::varint() {
  expect(kVarint);
  return read_varint();
}

int ProtoReader::int32_field(std::string_view name) {
  const uint64_t value = varint();
  if (value > uint64_t(INT32_MAX))
    throw Error("{}: {} is {}, expected 0 to {}", what_, name, value, INT32_MAX);
  return int(value);
}

uint32_t ProtoReader::fixed32() {
  expect(kFixed32);
  if (rest_.size() < 4) fail("truncated fixed32");
  uint32_t value;
  std::memcpy(&value, rest_.data(), 4);  // little-endian on every target kiln builds for
  rest_.remove_prefix(4);
  return value;
}

std::string_view ProtoReader::bytes() {
  expect(kBytes);
  const uint64_t size = read_varint();
  if (size > rest_.size()) fail("length-delimited field " + std::to_string(field_) + " runs past the end");
  const std::string_view value = rest_.substr(0, size);
  rest_.remove_prefix(size);
  return value;
}

void ProtoReader::skip() {
  switch (wire_type_) {
    case kVarint: read_varint(); return;
    case kBytes: bytes(); return;
    case kFixed32: fixed32(); return;
    case kFixed64:
      if (rest_.size() < 8) fail("truncated fixed64");
      rest_.remove_prefix(8);
      return;
    default: fail("unsupported wire type " + std::to_string(wire_type_));
  }
}

}  // namespace kiln::io
