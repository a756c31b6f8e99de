// The download scripts against hostile content from a loopback server: archives whose members
// would land outside their folder (`../evil`, an absolute name, a symbolic or hard link) or in a
// verified file's place (vocab.txt), and md5 and label lists whose lines would become such paths.
// Each is refused with one line naming the file and the member or line, before anything moves
// into place (scripts/archive_lib.sh).
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <functional>

#include "kiln/core/file_util.h"
#include "tests/testing/loopback_server.h"
#include "tests/testing/run_command.h"
#include "tests/testing/temp_dir.h"

namespace kiln {
namespace {
namespace fs = std::filesystem;

const std::string kScripts = std::string(KILN_SOURCE_DIR) + "/scripts/";
const char* const kVocab = "[PAD]\nthe\n";

std::string quoted(const fs::path& p) { return "'" + p.string() + "'"; }

void write(const fs::path& path, const std::string& text) {
  fs::create_directories(path.parent_path());
  std::ofstream(path) << text;
}

// `tar ARGS` run in `dir`; the test stops if tar fails.
void tar(const fs::path& dir, const std::string& args) {
  const auto [rc, out] = testing::run_command("cd " + quoted(dir) + " && tar " + args);
  ASSERT_EQ(rc, 0) << args << "\n" << out;
}

// A served vocab.txt (verified by its md5), results_text.tar.gz and its md5 list, downloaded
// with download_bert_data.sh --with-text.
struct BertText {
  fs::path dir = testing::unique_temp_dir("download_hostile_bert");
  fs::path served = dir / "served", work = dir / "work", out = dir / "out";
  BertText() {
    write(served / "vocab.txt", kVocab);
    write(work / "results4/part-00000-of-00001", "one sentence.\n\nanother.\n");
    write(work / "results4/eval.txt", "eval sentence.\n");
    md5_list(testing::md5_of(work / "results4/part-00000-of-00001") + "  ./part-00000-of-00001\n" +
             testing::md5_of(work / "results4/eval.txt") + "  ./eval.txt\n");
  }
  void md5_list(const std::string& text) { write(served / "bert_reference_results_text_md5.txt", text); }
  // served/results_text.tar.gz from work/: `tar -czf ... ARGS`.
  void pack(const std::string& args) { tar(work, "-czf " + quoted(served / "results_text.tar.gz") + " " + args); }
  std::pair<int, std::string> download() {
    const testing::LoopbackServer server(served, "");
    const fs::path manifest = dir / "manifest.txt";
    std::ofstream(manifest) << "md5 " << testing::md5_of(served / "vocab.txt") << " vocab.txt " << server.url()
                            << "/vocab.txt\nmd5 - bert_reference_results_text_md5.txt " << server.url()
                            << "/bert_reference_results_text_md5.txt\nmd5 - results_text.tar.gz " << server.url()
                            << "/results_text.tar.gz\n";
    return testing::run_command(kScripts + "download_bert_data.sh --with-text --allow-unverified --dir " +
                                quoted(out) + " --manifest " + quoted(manifest));
  }
  // Nothing of the text is in place, the verified vocab.txt is untouched, nothing was left behind.
  void expect_nothing_moved(const std::string& output) const {
    EXPECT_FALSE(fs::exists(out / "results4")) << output;
    EXPECT_FALSE(fs::exists(out / ".results_text.staging")) << output;
    EXPECT_EQ(read_file(out / "vocab.txt"), kVocab) << output;
    EXPECT_FALSE(fs::exists(dir / "evil")) << output;
    EXPECT_FALSE(fs::exists(out / "evil")) << output;
  }
};

TEST(DownloadHostile, ArchiveMembersOutsideTheirFolderOrOverVerifiedFilesAreRefusedBeforeUnpacking) {
  struct Case {
    std::string name;
    std::function<void(BertText&)> make;
    std::string error;  // the line the script must print
  };
  const std::vector<Case> cases = {
      {"dot-dot",
       [](BertText& t) {
         write(t.work / "evil", "x");
         t.pack("-P --transform 's,^evil$,../evil,' results4 evil");
       },
       "results_text.tar.gz: member \"../evil\": \"..\" leaves the folder; nothing unpacked"},
      {"absolute",
       [](BertText& t) {
         write(t.work / "evil", "x");
         t.pack("-P --transform 's,^evil$," + (t.dir / "evil").string() + ",' results4 evil");
       },
       "/evil\": absolute path; nothing unpacked"},
      {"symlink",
       [](BertText& t) {
         fs::create_symlink("../../vocab.txt", t.work / "results4/link");
         t.pack("results4");
       },
       "results_text.tar.gz: member \"results4/link\": a symbolic link to ../../vocab.txt; nothing unpacked"},
      {"hard link",
       [](BertText& t) {
         fs::create_hard_link(t.work / "results4/eval.txt", t.work / "results4/zz");
         t.pack("results4/eval.txt results4/zz");
       },
       "results_text.tar.gz: member \"results4/zz\": a hard link to results4/eval.txt; nothing unpacked"},
      {"vocab.txt", [](BertText& t) { write(t.work / "vocab.txt", "evil\n"); t.pack("results4 vocab.txt"); },
       "results_text.tar.gz: member \"vocab.txt\": would overwrite the verified vocab.txt; nothing unpacked"},
      {"./vocab.txt", [](BertText& t) { write(t.work / "vocab.txt", "evil\n"); t.pack("."); },
       "results_text.tar.gz: member \"./vocab.txt\": would overwrite the verified vocab.txt; nothing unpacked"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    BertText t;
    c.make(t);
    const auto [rc, output] = t.download();
    EXPECT_EQ(rc, 1) << output;
    EXPECT_NE(output.find(c.error), std::string::npos) << output;
    t.expect_nothing_moved(output);
  }
}

TEST(DownloadHostile, TextThatDiffersFromItsMd5ListIsNotMovedIntoPlace) {
  {
    BertText t;
    write(t.work / "results4/extra.txt", "not listed\n");
    t.pack("results4");
    const auto [rc, output] = t.download();
    EXPECT_EQ(rc, 1) << output;
    EXPECT_NE(output.find("results4/extra.txt: not in bert_reference_results_text_md5.txt"), std::string::npos)
        << output;
    EXPECT_NE(output.find("nothing moved into place"), std::string::npos) << output;
    t.expect_nothing_moved(output);
  }
  {
    BertText t;
    write(t.work / "results4/eval.txt", "changed\n");
    t.pack("results4");
    const auto [rc, output] = t.download();
    EXPECT_EQ(rc, 1) << output;
    EXPECT_NE(output.find("results4/eval.txt: md5 mismatch"), std::string::npos) << output;
    t.expect_nothing_moved(output);
  }
  {
    BertText t;  // the same text, laid out: it moves into place
    t.pack("results4");
    const auto [rc, output] = t.download();
    ASSERT_EQ(rc, 0) << output;
    EXPECT_EQ(read_file(t.out / "results4/eval.txt"), "eval sentence.\n");
    EXPECT_FALSE(fs::exists(t.out / ".results_text.staging"));
  }
}

TEST(DownloadHostile, Md5ListLinesThatWouldBecomePathsOutsideAreRefusedNamingTheLine) {
  const std::string hash = "0123456789abcdef0123456789abcdef";
  const std::vector<std::pair<std::string, std::string>> lists = {
      {hash + "  ./eval.txt\n" + hash + "  ../../evil\n",
       "line 2: \"" + hash + "  ../../evil\": \"..\" leaves the folder"},
      {hash + "  /etc/passwd\n", "line 1: \"" + hash + "  /etc/passwd\": absolute path"},
      {hash + "  a b\n", "line 1: \"" + hash + "  a b\": not \"MD5 NAME\""},
  };
  for (const auto& [list, error] : lists) {
    BertText t;
    t.pack("results4");
    t.md5_list(list);
    const auto [rc, output] = t.download();
    EXPECT_EQ(rc, 1) << output;
    EXPECT_NE(output.find("download_bert_data.sh: bert_reference_results_text_md5.txt: " + error), std::string::npos)
        << output;
    t.expect_nothing_moved(output);
  }
}

// ImageNet served as tarballs: classes n01 and n02 (one image each) and three validation images
// labelled by `labels`; `hostile` changes work/ (or packs a served tarball itself) before the
// served tarballs are packed.
struct ImageNet {
  fs::path dir = testing::unique_temp_dir("download_hostile_imagenet");
  fs::path served = dir / "served", work = dir / "work", out = dir / "out";
  std::pair<int, std::string> download(const std::string& labels,
                                       const std::function<void(ImageNet&)>& hostile = {}) {
    for (const char* wnid : {"n01", "n02"}) write(work / wnid / (std::string(wnid) + "_1.JPEG"), wnid);
    for (int i = 1; i <= 3; ++i) write(work / "val" / fmt::format("ILSVRC2012_val_{:08}.JPEG", i), std::to_string(i));
    write(served / "imagenet_2012_validation_synset_labels.txt", labels);
    for (const char* wnid : {"n01", "n02"}) tar(work / wnid, "-cf ../" + std::string(wnid) + ".tar .");
    if (hostile) hostile(*this);
    if (!fs::exists(served / "ILSVRC2012_img_train.tar"))
      tar(work, "-cf ../served/ILSVRC2012_img_train.tar n01.tar n02.tar");
    if (!fs::exists(served / "ILSVRC2012_img_val.tar")) tar(work / "val", "-cf ../../served/ILSVRC2012_img_val.tar .");
    const testing::LoopbackServer server(served, "");
    const fs::path manifest = dir / "manifest.txt";
    std::ofstream m(manifest);
    for (const char* name :
         {"ILSVRC2012_img_train.tar", "ILSVRC2012_img_val.tar", "imagenet_2012_validation_synset_labels.txt"})
      m << "md5 " << testing::md5_of(served / name) << " " << name << " " << server.url() << "/" << name << "\n";
    m.close();
    return testing::run_command(kScripts + "download_imagenet.sh --dir " + quoted(out) + " --manifest " +
                                quoted(manifest));
  }
  // No val/ (nor its staging folder) and no image outside --dir.
  void expect_no_val(const std::string& output) const {
    EXPECT_FALSE(fs::exists(out / "val")) << output;
    EXPECT_FALSE(fs::exists(out / "val.part")) << output;
    EXPECT_FALSE(fs::exists(dir / "x")) << output;
    EXPECT_FALSE(fs::exists(out / "x")) << output;
  }
};

TEST(DownloadHostile, LabelLinesThatWouldBecomePathsAreRefusedNamingTheLine) {
  const std::string file = "download_imagenet.sh: imagenet_2012_validation_synset_labels.txt: ";
  const std::vector<std::pair<std::string, std::string>> labels = {
      {"n02\n../../x\nn02\n", "line 2: \"../../x\": \"..\" leaves the folder"},
      {"n02\n/tmp/x\nn02\n", "line 2: \"/tmp/x\": absolute path"},
      {"n02\nn01/x\nn02\n", "line 2: \"n01/x\": not a single name (\"/\")"},
      {"n02\nn01\n..\n", "line 3: \"..\": \"..\" leaves the folder"},
      {"n02\n.x\nn01\n", "line 2: \".x\": starts with \".\""},
      {"n02\nn03\nn01\n", "line 2: \"n03\" is not one of the train/ classes"},
      {"n02\n\nn01\nn01\n", "line 2: \"\" is not one of the train/ classes"},
  };
  for (const auto& [list, error] : labels) {
    SCOPED_TRACE(list);
    ImageNet net;
    const auto [rc, output] = net.download(list);
    EXPECT_EQ(rc, 1) << output;
    EXPECT_NE(output.find(file + error), std::string::npos) << output;
    net.expect_no_val(output);
  }
}

TEST(DownloadHostile, ImageNetArchivesWithMembersOutsideTheirFolderAreRefused) {
  {
    ImageNet net;  // a class tar named "...tar" would be the class "..": train/.. is --dir itself
    const auto [rc, output] = net.download("n02\nn01\nn02\n", [](ImageNet& n) {
      tar(n.work / "n01", "-cf ../...tar .");
      tar(n.work, "-cf ../served/ILSVRC2012_img_train.tar n01.tar n02.tar ...tar");
    });
    EXPECT_EQ(rc, 1) << output;
    EXPECT_NE(output.find("ILSVRC2012_img_train.tar: member ...tar: \"..\" is no class name: \"..\" leaves the folder"),
              std::string::npos)
        << output;
    EXPECT_TRUE(fs::exists(net.out / "imagenet_2012_validation_synset_labels.txt")) << output;
    EXPECT_FALSE(fs::exists(net.out / "train/.done")) << output;
  }
  {
    ImageNet net;  // a validation image that is a link out
    const auto [rc, output] = net.download("n02\nn01\nn02\n", [](ImageNet& n) {
      fs::remove(n.work / "val/ILSVRC2012_val_00000003.JPEG");
      fs::create_symlink("/etc/passwd", n.work / "val/ILSVRC2012_val_00000003.JPEG");
    });
    EXPECT_EQ(rc, 1) << output;
    EXPECT_NE(output.find("ILSVRC2012_img_val.tar: member \"./ILSVRC2012_val_00000003.JPEG\": a symbolic link to "
                          "/etc/passwd; nothing unpacked"),
              std::string::npos)
        << output;
    net.expect_no_val(output);
  }
  {
    ImageNet net;  // a validation "image" in a class folder of its own
    const auto [rc, output] = net.download("n02\nn01\nn02\n", [](ImageNet& n) {
      write(n.work / "val/n01/extra.JPEG", "x");
    });
    EXPECT_EQ(rc, 1) << output;
    EXPECT_NE(output.find("ILSVRC2012_img_val.tar: member n01 is not a flat validation image (*.JPEG)"),
              std::string::npos)
        << output;
    net.expect_no_val(output);
  }
}

}  // namespace
}  // namespace kiln
