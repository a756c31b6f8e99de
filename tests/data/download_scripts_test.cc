// scripts/download_bert_data.sh and scripts/download_imagenet.sh against a loopback HTTP server
// (tests/testing/range_http_server.py): a download verifies, one cut midway resumes, a corrupted
// file fails naming it and leaves the verified ones, ImageNet's tarballs become class folders.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <random>

#include "kiln/core/file_util.h"
#include "tests/testing/loopback_server.h"
#include "tests/testing/run_command.h"
#include "tests/testing/temp_dir.h"

namespace kiln {
namespace {
namespace fs = std::filesystem;

const std::string kScripts = std::string(KILN_SOURCE_DIR) + "/scripts/";

using Server = testing::LoopbackServer;

void write_bytes(const fs::path& path, size_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::string bytes(n, '\0');
  for (char& c : bytes) c = char(rng());
  std::ofstream(path, std::ios::binary) << bytes;
}

std::string md5(const fs::path& path) { return testing::md5_of(path); }

struct Fixture {
  fs::path dir = testing::unique_temp_dir("download_scripts");
  fs::path served = dir / "served";
  fs::path out = dir / "out";
  Fixture() { fs::create_directories(served); }
  // A manifest of `lines`, each "ALGO HASH NAME" (the URL is added).
  fs::path manifest(const std::string& url, const std::vector<std::string>& lines) {
    const fs::path path = dir / "manifest.txt";
    std::ofstream m(path);
    m << "# test manifest\n";
    for (const std::string& l : lines) m << l << " " << url << "/" << l.substr(l.rfind(' ') + 1) << "\n";
    return path;
  }
  std::pair<int, std::string> bert(const fs::path& manifest) {
    return testing::run_command(kScripts + "download_bert_data.sh --dir '" + out.string() + "' --manifest '" +
                                manifest.string() + "'");
  }
};

TEST(DownloadScripts, DownloadsVerifyAndACutConnectionResumes) {
  Fixture f;
  write_bytes(f.served / "big.bin", 300000, 1);
  std::ofstream(f.served / "vocab.txt") << "[PAD]\nthe\n";
  Server server(f.served, "big.bin");
  const std::string sha = testing::run_command("sha256sum '" + (f.served / "vocab.txt").string() + "'").second.substr(0, 64);
  const auto [rc, out] =
      f.bert(f.manifest(server.url(), {"md5 " + md5(f.served / "big.bin") + " big.bin", "sha256 " + sha + " vocab.txt"}));
  ASSERT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("big.bin: interrupted, resuming"), std::string::npos) << out;
  EXPECT_EQ(read_file(f.out / "big.bin"), read_file(f.served / "big.bin"));
  EXPECT_EQ(read_file(f.out / "vocab.txt"), "[PAD]\nthe\n");
  EXPECT_FALSE(fs::exists(f.out / "big.bin.part"));
}

TEST(DownloadScripts, ACorruptedFileFailsNamingItAndKeepsTheVerifiedOnes) {
  Fixture f;
  write_bytes(f.served / "good.bin", 5000, 2);
  write_bytes(f.served / "bad.bin", 5000, 3);
  Server server(f.served, "");
  const std::string good = "md5 " + md5(f.served / "good.bin") + " good.bin";
  ASSERT_EQ(f.bert(f.manifest(server.url(), {good})).first, 0);
  const auto [rc, out] = f.bert(f.manifest(server.url(), {good, "md5 0123456789abcdef0123456789abcdef bad.bin"}));
  EXPECT_EQ(rc, 1) << out;
  EXPECT_NE(out.find("bad.bin: md5 mismatch"), std::string::npos) << out;
  EXPECT_NE(out.find("good.bin: already here, verified"), std::string::npos) << out;
  EXPECT_EQ(read_file(f.out / "good.bin"), read_file(f.served / "good.bin"));
  EXPECT_FALSE(fs::exists(f.out / "bad.bin"));
  EXPECT_TRUE(fs::exists(f.out / "bad.bin.corrupt"));

  const auto [rc2, out2] = f.bert(f.manifest(server.url(), {good, "md5 - bad.bin"}));
  EXPECT_EQ(rc2, 1);
  EXPECT_NE(out2.find("bad.bin: no published checksum"), std::string::npos) << out2;
}

TEST(DownloadScripts, ImageNetTarballsBecomeClassFolders) {
  Fixture f;
  const fs::path work = f.dir / "work";
  for (const char* wnid : {"n01", "n02"}) {
    fs::create_directories(work / wnid);
    std::ofstream(work / wnid / (std::string(wnid) + "_1.JPEG")) << wnid;
    testing::run_command("tar -cf '" + (work / (std::string(wnid) + ".tar")).string() + "' -C '" +
                         (work / wnid).string() + "' .");
  }
  testing::run_command("tar -cf '" + (f.served / "ILSVRC2012_img_train.tar").string() + "' -C '" + work.string() +
                       "' n01.tar n02.tar");
  fs::create_directories(work / "val");
  for (int i = 1; i <= 3; ++i) std::ofstream(work / "val" / fmt::format("ILSVRC2012_val_{:08}.JPEG", i)) << i;
  testing::run_command("tar -cf '" + (f.served / "ILSVRC2012_img_val.tar").string() + "' -C '" +
                       (work / "val").string() + "' .");
  const fs::path labels = f.served / "imagenet_2012_validation_synset_labels.txt";
  std::ofstream(labels) << "n02\nn01\nn02\n";
  Server server(f.served, "ILSVRC2012_img_val.tar");
  const fs::path manifest =
      f.manifest(server.url(), {"md5 " + md5(f.served / "ILSVRC2012_img_train.tar") + " ILSVRC2012_img_train.tar",
                                "md5 " + md5(f.served / "ILSVRC2012_img_val.tar") + " ILSVRC2012_img_val.tar",
                                "md5 " + md5(labels) + " imagenet_2012_validation_synset_labels.txt"});
  const auto [rc, out] = testing::run_command(kScripts + "download_imagenet.sh --dir '" + f.out.string() +
                                              "' --manifest '" + manifest.string() + "'");
  ASSERT_EQ(rc, 0) << out;
  EXPECT_EQ(read_file(f.out / "train/n01/n01_1.JPEG"), "n01");
  EXPECT_EQ(read_file(f.out / "train/n02/n02_1.JPEG"), "n02");
  EXPECT_EQ(read_file(f.out / "val/n02/ILSVRC2012_val_00000001.JPEG"), "1");
  EXPECT_EQ(read_file(f.out / "val/n01/ILSVRC2012_val_00000002.JPEG"), "2");
  EXPECT_EQ(read_file(f.out / "val/n02/ILSVRC2012_val_00000003.JPEG"), "3");
  EXPECT_FALSE(fs::exists(f.out / "train/n01.tar"));
}

TEST(DownloadScripts, PrintTheirUsage) {
  for (const char* script : {"download_bert_data.sh", "download_imagenet.sh", "package_submission.sh"}) {
    const auto [rc, out] = testing::run_command(kScripts + script + " --help");
    EXPECT_EQ(rc, 0) << script;
    EXPECT_NE(out.find(std::string("usage: scripts/") + script), std::string::npos) << out;
  }
}

}  // namespace
}  // namespace kiln
