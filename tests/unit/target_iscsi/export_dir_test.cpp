// --export-dir scanning on a temporary tree: symlinks (files and folders) never followed, only
// regular files and block devices exported, folder names that are not valid iSCSI name parts
// skipped with a warning, and a swap after the scan cannot redirect the LUN's open.
#include "export_dir.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <fstream>

#include <gtest/gtest.h>

namespace iserkit::target {
namespace {

namespace fs = std::filesystem;
constexpr const char* base = "iqn.2026-11.org.example";

struct ExportDir : ::testing::Test {
  ExportDir() {
    char pattern[] = "/tmp/iserkit-export-test.XXXXXX";
    root = ::mkdtemp(pattern);
    exported = root / "export";
    fs::create_directories(exported);
    outside = root / "outside.img";
    write(outside, "SECRET-OUTSIDE");
  }
  ~ExportDir() override {
    std::error_code ec;
    fs::remove_all(root, ec);
  }
  static void write(const fs::path& p, const std::string& content) {
    std::ofstream(p) << content;
  }
  fs::path folder(const std::string& name) {
    fs::create_directories(exported / name);
    write(exported / name / "disk.img", "data of " + name);
    return exported / name;
  }
  static bool mentions(const ExportScan& s, std::string_view text) {
    for (const auto& w : s.warnings)
      if (w.find(text) != std::string::npos) return true;
    return false;
  }
  static std::vector<std::string> names(const ExportScan& s) {
    std::vector<std::string> out;
    for (const auto& t : s.targets) out.push_back(t.name);
    return out;
  }
  fs::path root, exported, outside;
};

TEST_F(ExportDir, SymlinksAreNeverFollowed) {
  auto good = folder("good");
  fs::create_symlink(outside, good / "link-to-outside.img");
  fs::create_symlink("disk.img", good / "link-inside.img");
  fs::create_directories(root / "outside-folder");
  write(root / "outside-folder" / "x.img", "outside folder");
  fs::create_symlink(root / "outside-folder", exported / "linked-folder");
  fs::create_symlink(good, exported / "alias-of-good");
  auto scan = scan_export_dir(exported, base);
  ASSERT_TRUE(scan) << scan.error().message();
  EXPECT_EQ(names(*scan), std::vector<std::string>{"iqn.2026-11.org.example:good"});
  ASSERT_EQ(scan->targets[0].luns.size(), 1u);
  EXPECT_EQ(scan->targets[0].luns[0].path.filename(), "disk.img");
  EXPECT_TRUE(mentions(*scan, "good/link-to-outside.img is a symlink"));
  EXPECT_TRUE(mentions(*scan, "good/link-inside.img is a symlink"));
  EXPECT_TRUE(mentions(*scan, "linked-folder is a symlink"));
  EXPECT_TRUE(mentions(*scan, "alias-of-good is a symlink"));
}

TEST_F(ExportDir, OnlyRegularFilesAndBlockDevices) {
  auto dir = folder("mixed");
  ASSERT_EQ(::mkfifo((dir / "fifo").c_str(), 0600), 0);
  fs::create_directories(dir / "subfolder");
  // A device node with /dev/null's numbers (root only): a character device, skipped.
  const bool have_char = ::mknod((dir / "null-dev").c_str(), S_IFCHR | 0600, makedev(1, 3)) == 0;
  // A block device node (never opened here): exported.
  const bool have_block = ::mknod((dir / "block-dev").c_str(), S_IFBLK | 0600, makedev(7, 0)) == 0;
  auto scan = scan_export_dir(exported, base);
  ASSERT_TRUE(scan) << scan.error().message();
  ASSERT_EQ(scan->targets.size(), 1u);
  std::vector<std::string> luns;
  for (const auto& l : scan->targets[0].luns) luns.push_back(l.path.filename().string());
  EXPECT_EQ(luns, have_block ? (std::vector<std::string>{"block-dev", "disk.img"}) : std::vector<std::string>{"disk.img"});
  EXPECT_TRUE(mentions(*scan, "mixed/fifo is not a regular file or block device (a FIFO)"));
  EXPECT_TRUE(mentions(*scan, "mixed/subfolder is not a regular file or block device (a folder)"));
  if (have_char) {
    EXPECT_TRUE(mentions(*scan, "mixed/null-dev is not a regular file or block device (a character device)"));
  }
}

TEST_F(ExportDir, FolderNamesMustMakeValidIscsiNames) {
  folder("vol-1.a:b");
  folder("Upper");
  folder("with space");
  folder("a=b");
  folder("a,b");
  folder("new\nline");
  folder("under_score");
  folder(std::string(200, 'x'));  // base (23 bytes) + ':' + 200 > 223
  folder(std::string(223 - 24, 'y'));  // exactly 223 bytes
  auto scan = scan_export_dir(exported, base);
  ASSERT_TRUE(scan) << scan.error().message();
  EXPECT_EQ(names(*scan), (std::vector<std::string>{"iqn.2026-11.org.example:upper", "iqn.2026-11.org.example:vol-1.a:b",
                                                    std::string(base) + ":" + std::string(199, 'y')}));
  for (const auto& t : scan->targets) EXPECT_TRUE(is_valid_iscsi_name(t.name)) << t.name;
  EXPECT_EQ(scan->targets[0].alias, "Upper");
  EXPECT_TRUE(mentions(*scan, "folder with space has characters"));
  EXPECT_TRUE(mentions(*scan, "folder a=b has characters"));
  EXPECT_TRUE(mentions(*scan, "folder a,b has characters"));
  EXPECT_TRUE(mentions(*scan, "folder under_score has characters"));
  EXPECT_TRUE(mentions(*scan, "folder new\\x0aline has characters"));  // escaped in the warning
  EXPECT_TRUE(mentions(*scan, "makes a target name of 224 bytes"));
  for (const auto& w : scan->warnings) EXPECT_EQ(w.find('\n'), std::string::npos) << w;
}

TEST_F(ExportDir, FoldersFoldingToOneNameKeepTheFirst) {
  folder("Disk");
  folder("disk");
  auto scan = scan_export_dir(exported, base);
  ASSERT_TRUE(scan);
  EXPECT_EQ(names(*scan), std::vector<std::string>{"iqn.2026-11.org.example:disk"});
  EXPECT_EQ(scan->targets[0].alias, "Disk");  // "Disk" sorts first
  EXPECT_TRUE(mentions(*scan, "folds to the name"));
}

TEST_F(ExportDir, AnInvalidBaseNameExportsNothing) {
  folder("good");
  auto scan = scan_export_dir(exported, "not-an-iqn");
  ASSERT_TRUE(scan);
  EXPECT_TRUE(scan->targets.empty());
  EXPECT_TRUE(mentions(*scan, "not a valid iSCSI name"));
}

TEST_F(ExportDir, SwappingTheFileAfterTheScanDoesNotRedirectTheOpen) {
  auto good = folder("good");
  auto scan = scan_export_dir(exported, base);
  ASSERT_TRUE(scan);
  ASSERT_EQ(scan->targets.at(0).luns.size(), 1u);
  const LunSource& lun = scan->targets[0].luns[0];
  // The attacker swaps the checked file for a symlink to a file outside.
  fs::remove(good / "disk.img");
  fs::create_symlink(outside, good / "disk.img");
  EXPECT_NE(lun.open_path(), lun.path);
  const int fd = ::open(lun.open_path().c_str(), O_RDONLY | O_CLOEXEC);
  ASSERT_GE(fd, 0);
  char buf[64] = {};
  const auto n = ::read(fd, buf, sizeof buf);
  ::close(fd);
  EXPECT_EQ(std::string(buf, static_cast<std::size_t>(std::max<ssize_t>(n, 0))), "data of good");
}

TEST_F(ExportDir, AMissingFolderIsAnError) { EXPECT_FALSE(scan_export_dir(root / "nope", base)); }

}  // namespace
}  // namespace iserkit::target
