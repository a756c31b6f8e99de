#include "kiln/log/tensorboard.h"

#include <unistd.h>

#include <bit>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <ctime>

#include "kiln/core/error.h"
#include "kiln/core/file_util.h"
#include "kiln/log/crc32c.h"

namespace kiln::log {
namespace {

// Protobuf wire types.
constexpr uint32_t kVarint = 0, kFixed64 = 1, kLengthDelimited = 2, kFixed32 = 5;

void put_varint(std::string& out, uint64_t v) {
  while (v >= 0x80) {
    out.push_back(char((v & 0x7F) | 0x80));
    v >>= 7;
  }
  out.push_back(char(v));
}

void put_tag(std::string& out, uint32_t field, uint32_t wire_type) {
  put_varint(out, (uint64_t(field) << 3) | wire_type);
}

template <typename T>
void put_little_endian(std::string& out, T value) {
  static_assert(std::endian::native == std::endian::little, "event files are little-endian");
  char bytes[sizeof(T)];
  std::memcpy(bytes, &value, sizeof(T));
  out.append(bytes, sizeof(T));
}

void put_bytes(std::string& out, uint32_t field, std::string_view bytes) {
  put_tag(out, field, kLengthDelimited);
  put_varint(out, bytes.size());
  out.append(bytes);
}

void put_wall_time(std::string& event, double wall_time) {
  put_tag(event, 1, kFixed64);
  put_little_endian(event, wall_time);
}

double now_seconds() {
  using namespace std::chrono;
  return duration<double>(system_clock::now().time_since_epoch()).count();
}

std::string host_name() {
  char buf[256] = {};
  if (::gethostname(buf, sizeof(buf) - 1) != 0 || buf[0] == '\0') return "localhost";
  return buf;
}

}  // namespace

std::string encode_scalar_event(double wall_time, int64_t step, std::string_view tag, float value) {
  std::string v;  // Summary.Value
  put_bytes(v, 1, tag);
  put_tag(v, 2, kFixed32);
  put_little_endian(v, value);
  std::string summary;
  put_bytes(summary, 1, v);
  std::string event;
  put_wall_time(event, wall_time);
  put_tag(event, 2, kVarint);
  put_varint(event, uint64_t(step));  // int64: negatives take ten bytes, as protobuf does
  put_bytes(event, 5, summary);
  return event;
}

std::string encode_file_version_event(double wall_time) {
  std::string event;
  put_wall_time(event, wall_time);
  put_bytes(event, 3, "brain.Event:2");
  return event;
}

std::string tfrecord_frame(std::string_view data) {
  std::string out;
  out.reserve(data.size() + 16);
  std::string length;
  put_little_endian(length, uint64_t(data.size()));
  out += length;
  put_little_endian(out, masked_crc32c(crc32c(length)));
  out.append(data);
  put_little_endian(out, masked_crc32c(crc32c(data)));
  return out;
}

TensorBoardWriter::TensorBoardWriter(const std::filesystem::path& dir) {
  try {
    ensure_writable_dir(dir);
  } catch (const Error& e) {
    throw Error("tensorboard dir {}", e.what());
  }
  const double wall_time = now_seconds();
  path_ = dir / ("events.out.tfevents." + std::to_string(int64_t(wall_time)) + "." + host_name());
  file_ = std::fopen(path_.c_str(), "ab");
  if (!file_) throw Error("{}: cannot open TensorBoard event file: {}", path_.string(), std::strerror(errno));
  write_record(encode_file_version_event(wall_time));
}

TensorBoardWriter::~TensorBoardWriter() {
  if (file_) std::fclose(file_);
}

void TensorBoardWriter::add_scalar(std::string_view tag, double value, int64_t step) {
  write_record(encode_scalar_event(now_seconds(), step, tag, float(value)));
}

void TensorBoardWriter::write_record(std::string_view data) {
  const std::string record = tfrecord_frame(data);
  if (std::fwrite(record.data(), 1, record.size(), file_) != record.size() || std::fflush(file_) != 0)
    throw Error("{}: TensorBoard write failed: {}", path_.string(), std::strerror(errno));
}

void TensorBoardWriter::flush() {
  if (std::fflush(file_) != 0 || ::fsync(::fileno(file_)) != 0)
    throw Error("{}: TensorBoard flush failed: {}", path_.string(), std::strerror(errno));
}

}  // namespace kiln::log
