// Shared by the target_iscsi unit tests: a TargetNode to put in a TargetRegistry, named and with a
// dispatcher of its own (the fields every registry, login and SendTargets test needs; a test sets
// the alias, ACL, CHAP users or tenant it is about on the node it gets back).
#pragma once

#include <memory>
#include <string>

#include "iserkit/target/scsi_dispatcher.hpp"
#include "target_node.hpp"

namespace iserkit::target::test {

inline std::shared_ptr<TargetNode> make_node(std::string name) {
  auto node = std::make_shared<TargetNode>();
  node->name = std::move(name);
  node->dispatcher = std::make_shared<ScsiDispatcher>();
  return node;
}

}  // namespace iserkit::target::test
