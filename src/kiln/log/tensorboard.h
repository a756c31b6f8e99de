// log/tensorboard.h — TensorBoard event files with scalar summaries, no TensorFlow needed.
//
// File: `<dir>/events.out.tfevents.<unix seconds>.<hostname>`, a TFRecord stream. Each record is
//   uint64 length | uint32 masked_crc32c(length bytes) | data | uint32 masked_crc32c(data)
// (little-endian). The data is a serialized tensorflow.Event protobuf:
//   Event   { double wall_time = 1; int64 step = 2; string file_version = 3; Summary summary = 5; }
//   Summary { repeated Value value = 1; }   Value { string tag = 1; float simple_value = 2; }
// The first record carries file_version "brain.Event:2"; every add_scalar is one record holding
// one Value. Records are flushed to the OS as they are written, so a crash loses at most the
// record being written. Not thread-safe: log from one thread (Megatron: the last rank).
#pragma once
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <string>
#include <string_view>

namespace kiln::log {

// The protobuf bytes of one Event, exposed for tests and tools.
std::string encode_scalar_event(double wall_time, int64_t step, std::string_view tag, float value);
std::string encode_file_version_event(double wall_time);
// One TFRecord frame around `data`.
std::string tfrecord_frame(std::string_view data);

class TensorBoardWriter {
 public:
  // Creates `dir` if needed and opens the event file for appending (a second writer started in
  // the same second on the same host appends whole records to the same file). Throws
  // kiln::Error naming the directory or file when it cannot.
  explicit TensorBoardWriter(const std::filesystem::path& dir);
  ~TensorBoardWriter();
  TensorBoardWriter(const TensorBoardWriter&) = delete;
  TensorBoardWriter& operator=(const TensorBoardWriter&) = delete;

  // Appends one scalar (stored as float, as TensorBoard's simple_value is). Throws kiln::Error
  // naming the file when the write fails (e.g. disk full).
  void add_scalar(std::string_view tag, double value, int64_t step);
  // Pushes buffered bytes to the OS and fsyncs the file.
  void flush();

  const std::filesystem::path& path() const { return path_; }

 private:
  void write_record(std::string_view data);

  std::filesystem::path path_;
  std::FILE* file_ = nullptr;
};

}  // namespace kiln::log
