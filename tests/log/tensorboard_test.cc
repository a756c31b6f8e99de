#include "kiln/log/tensorboard.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <bit>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "kiln/core/error.h"
#include "kiln/core/file_util.h"
#include "kiln/log/crc32c.h"

namespace kiln::log {
namespace {

namespace fs = std::filesystem;

fs::path fresh_dir(const std::string& name) {
  const fs::path dir =
      fs::temp_directory_path() / ("kiln_tb_test_" + std::to_string(getpid()) + "_" + name);
  fs::remove_all(dir);
  return dir;
}

// Runs tools/tb_read.py; returns its exit status and fills `out` with stdout.
int run_reader(const fs::path& target, std::string& out) {
  const fs::path out_file =
      fs::temp_directory_path() / ("kiln_tb_reader_" + std::to_string(getpid()) + ".txt");
  const std::string cmd = "python3 " + std::string(KILN_SOURCE_DIR) + "/tools/tb_read.py '" +
                          target.string() + "' > '" + out_file.string() + "' 2>/dev/null";
  const int status = std::system(cmd.c_str());
  out = fs::exists(out_file) ? read_file(out_file) : "";
  fs::remove(out_file);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

// --- an independent C++ decoder, for the C++-side round trip --------------------------------

struct Scalar {
  std::string tag;
  int64_t step;
  float value;
};

struct Cursor {
  const std::string& buf;
  size_t pos = 0;
  uint64_t varint() {
    uint64_t v = 0;
    for (int shift = 0;; shift += 7) {
      if (pos >= buf.size() || shift > 63) throw Error("bad varint");
      const uint8_t b = uint8_t(buf[pos++]);
      v |= uint64_t(b & 0x7F) << shift;
      if (!(b & 0x80)) return v;
    }
  }
  std::string take(size_t n) {
    if (pos + n > buf.size()) throw Error("truncated field");
    std::string s = buf.substr(pos, n);
    pos += n;
    return s;
  }
};

template <typename T>
T load(const std::string& bytes) {
  T v;
  std::memcpy(&v, bytes.data(), sizeof(T));
  return v;
}

struct Decoded {
  std::vector<std::string> records;
  std::string file_version;
  double first_wall_time = 0;
  std::vector<Scalar> scalars;
};

Decoded decode_event_file(const std::string& data) {
  Decoded d;
  size_t pos = 0;
  while (pos < data.size()) {
    const std::string header = data.substr(pos, 8);
    EXPECT_EQ(masked_crc32c(crc32c(header)), load<uint32_t>(data.substr(pos + 8, 4)));
    const uint64_t len = load<uint64_t>(header);
    const std::string payload = data.substr(pos + 12, len);
    EXPECT_EQ(masked_crc32c(crc32c(payload)), load<uint32_t>(data.substr(pos + 12 + len, 4)));
    pos += 12 + len + 4;
    d.records.push_back(payload);
  }
  for (const std::string& rec : d.records) {
    Cursor c{rec};
    int64_t step = 0;
    while (c.pos < rec.size()) {
      const uint64_t key = c.varint();
      const int field = int(key >> 3), wire = int(key & 7);
      if (field == 1 && wire == 1) {
        const double t = load<double>(c.take(8));
        if (d.first_wall_time == 0) d.first_wall_time = t;
      } else if (field == 2 && wire == 0) {
        step = int64_t(c.varint());
      } else if (field == 3 && wire == 2) {
        d.file_version = c.take(c.varint());
      } else if (field == 5 && wire == 2) {
        const std::string summary = c.take(c.varint());
        Cursor s{summary};
        EXPECT_EQ(s.varint(), (1u << 3) | 2u);
        const std::string value = s.take(s.varint());
        Cursor v{value};
        EXPECT_EQ(v.varint(), (1u << 3) | 2u);
        Scalar sc;
        sc.tag = v.take(v.varint());
        EXPECT_EQ(v.varint(), (2u << 3) | 5u);
        sc.value = load<float>(v.take(4));
        sc.step = step;
        d.scalars.push_back(sc);
      } else {
        ADD_FAILURE() << "unexpected field " << field << " wire " << wire;
        break;
      }
    }
  }
  return d;
}

const std::vector<Scalar> kScalars = {
    {"lm loss", 1, 10.53125f},        {"learning-rate", 1, 1e-4f},
    {"lm loss vs samples", 32, 10.5f}, {"grad-norm", 300, -0.1f},
    {"batch-size", int64_t(1) << 40, 32.0f}, {"negative step", -7, 3.25f},
    {"sop loss validation ppl", 1000, 2.0e30f}};

void write_all(TensorBoardWriter& w) {
  for (const Scalar& s : kScalars) w.add_scalar(s.tag, s.value, s.step);
}

// ---------------------------------------------------------------------------------------------

TEST(Crc32c, MatchesPublishedCheckValues) {
  EXPECT_EQ(crc32c("123456789"), 0xE3069283u);
  // RFC 3720 (iSCSI) B.4 test vectors.
  std::string zeros(32, '\0'), ones(32, '\xff'), ascending(32, '\0');
  for (int i = 0; i < 32; ++i) ascending[i] = char(i);
  EXPECT_EQ(crc32c(zeros), 0x8A9136AAu);
  EXPECT_EQ(crc32c(ones), 0x62A8AB43u);
  EXPECT_EQ(crc32c(ascending), 0x46DD794Eu);
  EXPECT_EQ(crc32c(""), 0u);
}

TEST(Crc32c, ContinuesAcrossChunks) {
  const std::string a = "12345", b = "6789";
  EXPECT_EQ(crc32c(b.data(), b.size(), crc32c(a)), 0xE3069283u);
}

TEST(Crc32c, MaskRotatesAndAddsTheTFRecordConstant) {
  EXPECT_EQ(masked_crc32c(0), 0xa282ead8u);
  EXPECT_EQ(masked_crc32c(0x8000u), 0xa282ead8u + 1u);  // bit 15 rotates to bit 0
  EXPECT_EQ(masked_crc32c(1u), 0xa282ead8u + (1u << 17));
}

TEST(TensorBoard, ScalarEventHasTheProtobufBytesOfTheSpec) {
  const std::string e = encode_scalar_event(1.0, 5, "a", 2.0f);
  const std::string expected = std::string("\x09\x00\x00\x00\x00\x00\x00\xf0\x3f", 9) +  // wall_time
                               std::string("\x10\x05", 2) +                              // step
                               std::string("\x2a\x0a\x0a\x08\x0a\x01" "a" "\x15\x00\x00\x00\x40", 12);
  EXPECT_EQ(e, expected);
  // A negative int64 step is a ten-byte varint.
  const std::string neg = encode_scalar_event(0.0, -1, "a", 0.0f);
  EXPECT_EQ(neg.substr(9, 11), std::string("\x10\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01", 11));
}

TEST(TensorBoard, FileVersionEventAndFraming) {
  const std::string e = encode_file_version_event(0.5);
  EXPECT_EQ(e.substr(9), std::string("\x1a\x0d") + "brain.Event:2");
  const std::string f = tfrecord_frame("abc");
  ASSERT_EQ(f.size(), 8u + 4u + 3u + 4u);
  EXPECT_EQ(f.substr(0, 8), std::string("\x03\0\0\0\0\0\0\0", 8));
  EXPECT_EQ(load<uint32_t>(f.substr(8, 4)), masked_crc32c(crc32c(f.substr(0, 8))));
  EXPECT_EQ(f.substr(12, 3), "abc");
  EXPECT_EQ(load<uint32_t>(f.substr(15, 4)), masked_crc32c(crc32c("abc")));
}

TEST(TensorBoard, WriterFileDecodesInCpp) {
  const fs::path dir = fresh_dir("cpp_decode");
  fs::path file;
  {
    TensorBoardWriter w(dir);
    file = w.path();
    write_all(w);
    w.flush();
  }
  EXPECT_EQ(file.parent_path(), dir);
  char host[256] = {};
  ::gethostname(host, sizeof(host) - 1);
  EXPECT_EQ(file.filename().string().rfind("events.out.tfevents.", 0), 0u);
  EXPECT_NE(file.filename().string().find(std::string(".") + host), std::string::npos);

  const Decoded d = decode_event_file(read_file(file));
  ASSERT_EQ(d.records.size(), kScalars.size() + 1);
  EXPECT_EQ(d.file_version, "brain.Event:2");
  const double now = double(std::time(nullptr));
  EXPECT_NEAR(d.first_wall_time, now, 600.0);
  ASSERT_EQ(d.scalars.size(), kScalars.size());
  for (size_t i = 0; i < kScalars.size(); ++i) {
    EXPECT_EQ(d.scalars[i].tag, kScalars[i].tag);
    EXPECT_EQ(d.scalars[i].step, kScalars[i].step);
    EXPECT_EQ(d.scalars[i].value, kScalars[i].value);
  }
  fs::remove_all(dir);
}

TEST(TensorBoard, IndependentPythonReaderVerifiesCrcsAndReadsScalars) {
  const fs::path dir = fresh_dir("python_reader");
  fs::path file;
  {
    TensorBoardWriter w(dir);
    file = w.path();
    write_all(w);  // no flush(): every record must already be on disk
    std::string out;
    ASSERT_EQ(run_reader(dir, out), 0);
    std::istringstream lines(out);
    std::string line;
    for (const Scalar& s : kScalars) {
      ASSERT_TRUE(std::getline(lines, line));
      // "tag step value"; the tag may contain spaces.
      const size_t v = line.rfind(' '), st = line.rfind(' ', v - 1);
      EXPECT_EQ(line.substr(0, st), s.tag);
      EXPECT_EQ(std::stoll(line.substr(st + 1, v - st - 1)), s.step);
      EXPECT_EQ(float(std::stod(line.substr(v + 1))), s.value) << line;
    }
    EXPECT_FALSE(std::getline(lines, line));
  }

  // A flipped bit in the last record's data, and a truncated file, are both rejected.
  std::string bytes = read_file(file);
  const fs::path bad = fresh_dir("bad_events");
  fs::create_directories(bad);
  std::string flipped = bytes;
  flipped[flipped.size() - 6] ^= 0x04;
  write_file_atomic(bad / "events.out.tfevents.1.x", [&](std::ostream& o) { o << flipped; });
  std::string out;
  EXPECT_EQ(run_reader(bad / "events.out.tfevents.1.x", out), 1);
  write_file_atomic(bad / "events.out.tfevents.1.x",
                    [&](std::ostream& o) { o << bytes.substr(0, bytes.size() - 3); });
  EXPECT_EQ(run_reader(bad / "events.out.tfevents.1.x", out), 1);
  write_file_atomic(bad / "events.out.tfevents.1.x", [&](std::ostream& o) { o << bytes; });
  EXPECT_EQ(run_reader(bad / "events.out.tfevents.1.x", out), 0);
  fs::remove_all(dir);
  fs::remove_all(bad);
}

TEST(TensorBoard, UnwritableDirIsAnErrorNamingIt) {
  const fs::path base = fresh_dir("unwritable");
  fs::create_directories(base);
  const fs::path blocker = base / "a_file";
  write_file_atomic(blocker, [](std::ostream& o) { o << "x"; });
  const fs::path dir = blocker / "tb";  // parent is a regular file
  try {
    TensorBoardWriter w(dir);
    FAIL() << "expected kiln::Error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(dir.string()), std::string::npos) << e.what();
  }
  fs::remove_all(base);
}

}  // namespace
}  // namespace kiln::log
