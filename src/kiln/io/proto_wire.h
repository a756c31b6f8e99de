// io/proto_wire.h — a reader of the protobuf wire format, enough for the few small messages kiln
// reads (TensorFlow's BundleHeaderProto / BundleEntryProto): varints, fixed32/64 and
// length-delimited fields; unknown fields are skipped. `what` names the message in errors.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>

namespace kiln::io {

class ProtoReader {
 public:
  enum WireType : uint32_t { kVarint = 0, kFixed64 = 1, kBytes = 2, kFixed32 = 5 };
  static constexpr uint64_t kMaxFieldNumber = (uint64_t(1) << 29) - 1;

  ProtoReader(std::string_view bytes, std::string what) : rest_(bytes), what_(std::move(what)) {}

  // Reads the next field's key; false at the end of the message. A field number of 0 or past
  // kMaxFieldNumber is an error.
  bool next();
  uint32_t field() const { return field_; }
  uint32_t wire_type() const { return wire_type_; }

  // The current field's value; each throws kiln::Error when the wire type does not match.
  uint64_t varint();
  // A varint that must lie in [0, 2^31 - 1] (an int32 or enum field); `name` names it in errors.
  int int32_field(std::string_view name);
  uint32_t fixed32();
  std::string_view bytes();
  void skip();

 private:
  uint64_t read_varint();
  void expect(uint32_t wire_type) const;
  [[noreturn]] void fail(std::string_view problem) const;

  std::string_view rest_;
  std::string what_;
  uint32_t field_ = 0, wire_type_ = 0;
};

}  // namespace kiln::io
