// The FUSE view's inode tree (see namespace_tree.hpp): targets from SendTargets, LUN files from
// REPORT LUNS, stable inode numbers.
#include "fuse_fs/namespace_tree.hpp"

#include <algorithm>
#include <set>

namespace iserkit::fuse_fs {

NamespaceTree::NamespaceTree() {
  auto root = std::make_unique<Node>();
  root->ino = root_ino;
  root->kind = NodeKind::root;
  root->parent = root_ino;
  nodes_.emplace(root_ino, std::move(root));
  add(root_ino, NodeKind::rescan, std::string(rescan_name));
}

Node& NamespaceTree::add(Ino parent, NodeKind kind, std::string name) {
  auto n = std::make_unique<Node>();
  n->ino = ++next_ino_;
  n->kind = kind;
  n->parent = parent;
  n->name = name;
  Node& p = node(parent);
  n->target = p.kind == NodeKind::target ? p.target : std::string();
  p.children.push_back(n->ino);
  p.by_name.emplace(std::move(name), n->ino);
  Node& ref = *n;
  nodes_.emplace(ref.ino, std::move(n));
  return ref;
}

const Node* NamespaceTree::get(Ino ino) const {
  auto it = nodes_.find(ino);
  return it == nodes_.end() ? nullptr : it->second.get();
}

const Node* NamespaceTree::lookup(Ino parent, std::string_view name) const {
  const Node* p = get(parent);
  if (p == nullptr || !p->present) return nullptr;
  auto it = p->by_name.find(name);
  if (it == p->by_name.end()) return nullptr;
  const Node* c = get(it->second);
  return c != nullptr && c->present ? c : nullptr;
}

std::vector<const Node*> NamespaceTree::list(Ino dir) const {
  std::vector<const Node*> out;
  const Node* d = get(dir);
  if (d == nullptr || !d->present) return out;
  for (Ino i : d->children) {
    const Node* c = get(i);
    if (c != nullptr && c->present) out.push_back(c);
  }
  if (d->kind == NodeKind::target) {
    // "info" first, then LUNs by index (REPORT LUNS order is not guaranteed, SPC-5 §6.33).
    std::stable_sort(out.begin(), out.end(), [](const Node* a, const Node* b) {
      if ((a->kind == NodeKind::info) != (b->kind == NodeKind::info)) return a->kind == NodeKind::info;
      return a->lun_index < b->lun_index;
    });
  }
  return out;
}

Ino NamespaceTree::target_dir(std::string_view iqn) const {
  const Node& r = *nodes_.at(root_ino);
  auto it = r.by_name.find(iqn);
  return it == r.by_name.end() ? 0 : it->second;
}

bool NamespaceTree::valid_name(std::string_view name) {
  if (name.empty() || name.size() > 255 || name == "." || name == ".." || name == rescan_name) return false;
  return name.find('/') == std::string_view::npos && name.find('\0') == std::string_view::npos;
}

std::string NamespaceTree::lun_file_name(std::uint16_t index) { return "lun" + std::to_string(index); }

TreeDiff NamespaceTree::set_targets(const std::vector<std::string>& names) {
  TreeDiff diff;
  std::set<std::string, std::less<>> wanted;
  for (const auto& name : names) {
    if (!valid_name(name)) {
      diff.skipped.push_back(name);
      continue;
    }
    if (!wanted.insert(name).second) continue;
    if (Ino i = target_dir(name); i != 0) {
      Node& t = node(i);
      if (!t.present) {
        t.present = true;
        diff.added.push_back(name);
      }
      continue;
    }
    Node& t = add(root_ino, NodeKind::target, name);
    t.target = name;
    add(t.ino, NodeKind::info, std::string(info_name));
    diff.added.push_back(name);
  }
  for (Ino i : node(root_ino).children) {
    Node& t = node(i);
    if (t.kind != NodeKind::target || !t.present || wanted.contains(t.name)) continue;
    t.present = false;
    diff.removed.push_back(t.name);
  }
  return diff;
}

TreeDiff NamespaceTree::set_luns(Ino dir, const std::vector<LunEntry>& luns) {
  TreeDiff diff;
  auto it = nodes_.find(dir);
  if (it == nodes_.end() || it->second->kind != NodeKind::target) return diff;
  Node& t = *it->second;
  std::set<std::string, std::less<>> wanted;
  for (const auto& l : luns) {
    std::string name = lun_file_name(l.index);
    if (!wanted.insert(name).second) continue;
    Node* n = nullptr;
    if (auto c = t.by_name.find(name); c != t.by_name.end()) {
      n = &node(c->second);
      if (!n->present) diff.added.push_back(name);
      n->present = true;
    } else {
      n = &add(t.ino, NodeKind::lun, name);
      diff.added.push_back(name);
    }
    n->lun_index = l.index;
    n->size_bytes = l.size_bytes;
  }
  for (Ino i : t.children) {
    Node& c = node(i);
    if (c.kind != NodeKind::lun || !c.present || wanted.contains(c.name)) continue;
    c.present = false;
    diff.removed.push_back(c.name);
  }
  return diff;
}

}  // namespace iserkit::fuse_fs
