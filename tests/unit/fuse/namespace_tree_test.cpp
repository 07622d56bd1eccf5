// NamespaceTree: targets from SendTargets and LUN files from REPORT LUNS as directory entries,
// stable inode numbers across rescans, absent names, invalid names.
#include "fuse_fs/namespace_tree.hpp"

#include <gtest/gtest.h>

#include <set>

namespace iserkit::fuse_fs {
namespace {

std::vector<std::string> names(const NamespaceTree& t, Ino dir) {
  std::vector<std::string> out;
  for (const Node* n : t.list(dir)) out.push_back(n->name);
  return out;
}

TEST(NamespaceTree, FreshTreeHasRootAndRescanFile) {
  NamespaceTree t;
  ASSERT_NE(t.get(root_ino), nullptr);
  EXPECT_EQ(t.get(root_ino)->kind, NodeKind::root);
  EXPECT_EQ(names(t, root_ino), std::vector<std::string>{".rescan"});
  const Node* r = t.lookup(root_ino, ".rescan");
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(r->kind, NodeKind::rescan);
  EXPECT_EQ(t.get(999), nullptr);
}

TEST(NamespaceTree, TargetsBecomeDirectoriesWithInfoFile) {
  NamespaceTree t;
  auto diff = t.set_targets({"iqn.2026-11.org.x:a", "iqn.2026-11.org.x:b"});
  EXPECT_EQ(diff.added, (std::vector<std::string>{"iqn.2026-11.org.x:a", "iqn.2026-11.org.x:b"}));
  EXPECT_TRUE(diff.removed.empty());
  EXPECT_EQ(names(t, root_ino), (std::vector<std::string>{".rescan", "iqn.2026-11.org.x:a", "iqn.2026-11.org.x:b"}));
  const Node* a = t.lookup(root_ino, "iqn.2026-11.org.x:a");
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(a->kind, NodeKind::target);
  EXPECT_EQ(a->target, "iqn.2026-11.org.x:a");
  EXPECT_EQ(t.target_dir("iqn.2026-11.org.x:a"), a->ino);
  const Node* info = t.lookup(a->ino, "info");
  ASSERT_NE(info, nullptr);
  EXPECT_EQ(info->kind, NodeKind::info);
  EXPECT_EQ(info->parent, a->ino);
  EXPECT_EQ(info->target, "iqn.2026-11.org.x:a");
}

TEST(NamespaceTree, VanishedTargetIsAbsentAndComesBackWithItsInode) {
  NamespaceTree t;
  t.set_targets({"iqn.x:a", "iqn.x:b"});
  const Ino a = t.target_dir("iqn.x:a");
  const Ino b = t.target_dir("iqn.x:b");
  auto diff = t.set_targets({"iqn.x:b", "iqn.x:c"});
  EXPECT_EQ(diff.removed, std::vector<std::string>{"iqn.x:a"});
  EXPECT_EQ(diff.added, std::vector<std::string>{"iqn.x:c"});
  EXPECT_EQ(t.lookup(root_ino, "iqn.x:a"), nullptr);
  ASSERT_NE(t.get(a), nullptr);  // the inode stays known (the kernel may still hold it)
  EXPECT_FALSE(t.get(a)->present);
  EXPECT_EQ(t.target_dir("iqn.x:b"), b);
  diff = t.set_targets({"iqn.x:a", "iqn.x:b", "iqn.x:c"});
  EXPECT_EQ(diff.added, std::vector<std::string>{"iqn.x:a"});
  EXPECT_EQ(t.target_dir("iqn.x:a"), a);
  EXPECT_TRUE(t.get(a)->present);
  // First-seen order is kept: a was listed first.
  EXPECT_EQ(names(t, root_ino), (std::vector<std::string>{".rescan", "iqn.x:a", "iqn.x:b", "iqn.x:c"}));
}

TEST(NamespaceTree, InvalidAndDuplicateNamesAreSkipped) {
  NamespaceTree t;
  auto diff = t.set_targets({"", ".", "..", ".rescan", "a/b", std::string("nul\0x", 5), std::string(256, 'x'),
                             "iqn.x:ok", "iqn.x:ok"});
  EXPECT_EQ(diff.added, std::vector<std::string>{"iqn.x:ok"});
  EXPECT_EQ(diff.skipped.size(), 7u);
  EXPECT_EQ(names(t, root_ino), (std::vector<std::string>{".rescan", "iqn.x:ok"}));
  EXPECT_TRUE(NamespaceTree::valid_name(std::string(255, 'x')));
}

TEST(NamespaceTree, LunFilesFollowReportLunsWithSizes) {
  NamespaceTree t;
  t.set_targets({"iqn.x:a"});
  const Ino dir = t.target_dir("iqn.x:a");
  auto diff = t.set_luns(dir, {{.index = 2, .size_bytes = 4096}, {.index = 0, .size_bytes = 1 << 20}});
  EXPECT_EQ(diff.added, (std::vector<std::string>{"lun2", "lun0"}));
  EXPECT_EQ(names(t, dir), (std::vector<std::string>{"info", "lun0", "lun2"}));  // info, then by index
  const Node* l0 = t.lookup(dir, "lun0");
  ASSERT_NE(l0, nullptr);
  EXPECT_EQ(l0->kind, NodeKind::lun);
  EXPECT_EQ(l0->lun_index, 0);
  EXPECT_EQ(l0->size_bytes, 1u << 20);
  EXPECT_EQ(l0->target, "iqn.x:a");
  const Ino ino0 = l0->ino;
  // LUN 2 goes away, LUN 0 grows, LUN 16383 appears.
  diff = t.set_luns(dir, {{.index = 0, .size_bytes = 2 << 20}, {.index = 16383, .size_bytes = 512}});
  EXPECT_EQ(diff.removed, std::vector<std::string>{"lun2"});
  EXPECT_EQ(diff.added, std::vector<std::string>{"lun16383"});
  EXPECT_EQ(t.lookup(dir, "lun2"), nullptr);
  EXPECT_EQ(t.lookup(dir, "lun0")->ino, ino0);
  EXPECT_EQ(t.lookup(dir, "lun0")->size_bytes, 2u << 20);
  EXPECT_EQ(names(t, dir), (std::vector<std::string>{"info", "lun0", "lun16383"}));
}

TEST(NamespaceTree, SetLunsOnNonTargetIsIgnored) {
  NamespaceTree t;
  EXPECT_TRUE(t.set_luns(root_ino, {{.index = 0, .size_bytes = 1}}).added.empty());
  EXPECT_TRUE(t.set_luns(12345, {{.index = 0, .size_bytes = 1}}).added.empty());
  EXPECT_EQ(names(t, root_ino), std::vector<std::string>{".rescan"});
}

TEST(NamespaceTree, AbsentDirectoryHidesItsChildren) {
  NamespaceTree t;
  t.set_targets({"iqn.x:a"});
  const Ino dir = t.target_dir("iqn.x:a");
  t.set_luns(dir, {{.index = 0, .size_bytes = 512}});
  t.set_targets({});
  EXPECT_EQ(t.lookup(dir, "lun0"), nullptr);
  EXPECT_TRUE(t.list(dir).empty());
}

TEST(NamespaceTree, InodesAreNeverReused) {
  NamespaceTree t;
  std::set<Ino> seen;
  for (int round = 0; round < 3; ++round) {
    t.set_targets({"iqn.x:a" + std::to_string(round)});
    const Ino d = t.target_dir("iqn.x:a" + std::to_string(round));
    t.set_luns(d, {{.index = 0, .size_bytes = 512}});
    for (const Node* n : t.list(d)) EXPECT_TRUE(seen.insert(n->ino).second);
    EXPECT_TRUE(seen.insert(d).second);
  }
}

}  // namespace
}  // namespace iserkit::fuse_fs
