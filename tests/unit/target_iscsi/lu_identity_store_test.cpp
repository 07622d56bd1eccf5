// Where a LUN's UUID comes from (target/src/lu_identity_store.hpp, docs/lu-identity.md), on real
// files: created once in the user xattr and read back after (a restart), a different one for
// another file, the same for every process that races to create it (gateways on shared storage),
// kept across a rename, a clear error for a damaged xattr, the host/inode fallback when the file
// cannot keep an xattr (an immutable file), a block device, an RBD image's storage name.
#include "lu_identity_store.hpp"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <vector>

#include "iserkit/common/errors.hpp"

namespace iserkit::target {
namespace {

class LuUuidOfFile : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() / ("iserkit-lu-uuid-" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override {
    for (const auto& f : immutable_) (void)std::system(("chattr -i '" + f.string() + "' 2>/dev/null").c_str());
    std::filesystem::remove_all(dir_);
  }
  std::filesystem::path file(const std::string& name) {
    const auto p = dir_ / name;
    std::ofstream(p) << "data";
    return p;
  }
  std::filesystem::path dir_;
  std::vector<std::filesystem::path> immutable_;
};

std::string xattr_of(const std::filesystem::path& p) {
  char value[128] = {};
  const ssize_t n = ::getxattr(p.c_str(), lu_uuid_xattr, value, sizeof value);
  return n < 0 ? std::string() : std::string(value, static_cast<std::size_t>(n));
}

TEST_F(LuUuidOfFile, CreatedOnceInTheXattrAndReadBackAfter) {
  const auto a = file("a.img");
  auto first = lu_uuid_of_file(a, "host-1");
  ASSERT_TRUE(first) << first.error().message();
  if (first->origin == LuUuidOrigin::host_file) GTEST_SKIP() << "no user xattrs here: " << first->detail;
  EXPECT_EQ(first->origin, LuUuidOrigin::xattr_created);
  EXPECT_EQ(xattr_of(a), to_string(first->uuid));
  EXPECT_EQ(first->uuid.bytes[6] >> 4, 4);
  // A restart (another call; another host id changes nothing): the same UUID, found.
  auto again = lu_uuid_of_file(a, "host-2");
  ASSERT_TRUE(again);
  EXPECT_EQ(again->origin, LuUuidOrigin::xattr_found);
  EXPECT_EQ(again->uuid, first->uuid);
  // Moved (renamed) and reached through another name: still the same.
  std::filesystem::rename(a, dir_ / "moved.img");
  std::filesystem::create_symlink(dir_ / "moved.img", dir_ / "link.img");
  auto moved = lu_uuid_of_file(dir_ / "link.img", "host-1");
  ASSERT_TRUE(moved);
  EXPECT_EQ(moved->uuid, first->uuid);
  // Another file: another UUID.
  auto other = lu_uuid_of_file(file("b.img"), "host-1");
  ASSERT_TRUE(other);
  EXPECT_NE(other->uuid, first->uuid);
}

TEST_F(LuUuidOfFile, ProcessesRacingOnOneFileAllGetTheSameUuid) {
  const auto shared = file("shared.img");
  if (auto probe = lu_uuid_of_file(file("probe.img"), "h"); !probe || probe->origin == LuUuidOrigin::host_file)
    GTEST_SKIP() << "no user xattrs here";
  // Eight processes (as gateways would be) start at once on a file without the xattr; each
  // writes what it got to a file of its own.
  std::vector<pid_t> children;
  for (int i = 0; i < 8; ++i) {
    const pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      auto u = lu_uuid_of_file(shared, "h");
      std::ofstream(dir_ / ("got-" + std::to_string(i))) << (u ? to_string(u->uuid) : "error");
      ::_exit(u ? 0 : 1);
    }
    children.push_back(pid);
  }
  for (auto pid : children) {
    int status = 0;
    ASSERT_EQ(::waitpid(pid, &status, 0), pid);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  }
  const std::string kept = xattr_of(shared);
  ASSERT_TRUE(parse_uuid(kept));
  for (int i = 0; i < 8; ++i) {
    std::string got;
    std::ifstream(dir_ / ("got-" + std::to_string(i))) >> got;
    EXPECT_EQ(got, kept) << "process " << i;
  }
}

TEST_F(LuUuidOfFile, ADamagedXattrIsAnErrorNotANewIdentity) {
  const auto a = file("a.img");
  if (::setxattr(a.c_str(), lu_uuid_xattr, "garbage", 7, 0) != 0) GTEST_SKIP() << "no user xattrs here";
  auto u = lu_uuid_of_file(a, "h");
  ASSERT_FALSE(u);
  EXPECT_EQ(u.error(), make_error_code(errc::invalid_argument));
  EXPECT_EQ(xattr_of(a), "garbage");  // left for the operator to look at
}

TEST_F(LuUuidOfFile, GivenUuidInTheXattrIsUsed) {
  const auto a = file("a.img");
  const std::string text = "9bf074cc-cb20-4476-afe9-95d0ab4e2176";
  if (::setxattr(a.c_str(), lu_uuid_xattr, text.data(), text.size(), 0) != 0) GTEST_SKIP() << "no user xattrs here";
  auto u = lu_uuid_of_file(a, "h");
  ASSERT_TRUE(u);
  EXPECT_EQ(u->origin, LuUuidOrigin::xattr_found);
  EXPECT_EQ(to_string(u->uuid), text);
}

TEST_F(LuUuidOfFile, WithoutAnXattrTheHostAndInodeNameTheFile) {
  // An immutable file refuses new xattrs (EPERM) — a file system without user xattrs takes the
  // same path (ENOTSUP). Needs CAP_LINUX_IMMUTABLE and chattr.
  const auto a = file("a.img");
  const auto b = file("b.img");
  for (const auto& f : {a, b}) {
    if (std::system(("chattr +i '" + f.string() + "' 2>/dev/null").c_str()) != 0)
      GTEST_SKIP() << "chattr +i not possible here (not root, or no such attribute on this file system)";
    immutable_.push_back(f);
  }
  auto ua = lu_uuid_of_file(a, "host-1");
  ASSERT_TRUE(ua) << ua.error().message();
  EXPECT_EQ(ua->origin, LuUuidOrigin::host_file);
  EXPECT_NE(ua->detail.find("not permitted"), std::string::npos) << ua->detail;
  EXPECT_EQ(xattr_of(a), "");
  auto ua_again = lu_uuid_of_file(a, "host-1");
  ASSERT_TRUE(ua_again);
  EXPECT_EQ(ua_again->uuid, ua->uuid);  // stable across restarts on this host
  auto ub = lu_uuid_of_file(b, "host-1");
  ASSERT_TRUE(ub);
  EXPECT_NE(ub->uuid, ua->uuid);  // another file, another name
  auto other_host = lu_uuid_of_file(a, "host-2");
  ASSERT_TRUE(other_host);
  EXPECT_NE(other_host->uuid, ua->uuid);  // documented limit: another host derives another
}

TEST_F(LuUuidOfFile, TmpfsKeepsTheXattrToo) {
  const std::filesystem::path shm = "/dev/shm";
  if (!std::filesystem::is_directory(shm)) GTEST_SKIP() << "no /dev/shm";
  const auto p = shm / ("iserkit-lu-uuid-" + std::to_string(::getpid()));
  std::ofstream(p) << "data";
  auto u = lu_uuid_of_file(p, "h");
  auto again = lu_uuid_of_file(p, "h");
  std::filesystem::remove(p);
  ASSERT_TRUE(u);
  ASSERT_TRUE(again);
  if (u->origin == LuUuidOrigin::host_file) GTEST_SKIP() << "this kernel's tmpfs has no user xattrs: " << u->detail;
  EXPECT_EQ(u->origin, LuUuidOrigin::xattr_created);
  EXPECT_EQ(again->origin, LuUuidOrigin::xattr_found);
  EXPECT_EQ(again->uuid, u->uuid);
}

TEST_F(LuUuidOfFile, ABlockDeviceIsNamedByItsOwnIdentityOrItsNumber) {
  std::filesystem::path device;
  for (const char* d : {"/dev/loop0", "/dev/vda", "/dev/sda", "/dev/nvme0n1"})
    if (std::filesystem::is_block_file(d)) device = d;
  if (device.empty()) GTEST_SKIP() << "no block device node to look at";
  auto u = lu_uuid_of_file(device, "host-1");
  ASSERT_TRUE(u) << u.error().message();
  EXPECT_TRUE(u->origin == LuUuidOrigin::device_id || u->origin == LuUuidOrigin::host_file) << to_string(u->origin);
  auto again = lu_uuid_of_file(device, "host-1");
  ASSERT_TRUE(again);
  EXPECT_EQ(again->uuid, u->uuid);
  EXPECT_FALSE(u->detail.empty());
}

TEST_F(LuUuidOfFile, NeitherFileNorBlockDeviceIsRefused) {
  EXPECT_EQ(lu_uuid_of_file(dir_, "h").error(), std::make_error_code(std::errc::no_such_device));
  EXPECT_EQ(lu_uuid_of_file("/dev/null", "h").error(), std::make_error_code(std::errc::no_such_device));
  EXPECT_EQ(lu_uuid_of_file(dir_ / "missing.img", "h").error(), std::make_error_code(std::errc::no_such_file_or_directory));
}

TEST(LuUuidOfStorage, AnRbdImageHasTheSameUuidEverywhere) {
  const auto a = lu_uuid_of_storage("rbd:x/1/abc");
  EXPECT_EQ(a.origin, LuUuidOrigin::storage_name);
  // uuid5(iserkit namespace, "storage:rbd:x/1/abc"), computed with Python.
  EXPECT_EQ(to_string(a.uuid), "712a721f-3a19-5c76-a6b4-3ab255887806");
  EXPECT_NE(lu_uuid_of_storage("rbd:x/1/abd").uuid, a.uuid);
}

TEST(HostId, IsNeverEmpty) { EXPECT_FALSE(host_id().empty()); }

}  // namespace
}  // namespace iserkit::target
