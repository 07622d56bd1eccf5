// Shared by the target's login unit tests (target_iscsi, iser): a TargetNode to put in a
// TargetRegistry, named and with a dispatcher of its own (the fields every registry, login and
// SendTargets test needs; a test sets the alias, ACL, CHAP users or tenant it is about on the node
// it gets back), and a one-PDU login of a test initiator.
#pragma once

#include <memory>
#include <string>

#include "iserkit/iscsi/pdu.hpp"
#include "iserkit/iscsi/text.hpp"
#include "iserkit/target/scsi_dispatcher.hpp"
#include "login.hpp"
#include "target_node.hpp"

namespace iserkit::target::test {

inline std::shared_ptr<TargetNode> make_node(std::string name) {
  auto node = std::make_shared<TargetNode>();
  node->name = std::move(name);
  node->dispatcher = std::make_shared<ScsiDispatcher>();
  return node;
}

/// `machine`'s answer to a Login Request from stage `csg` straight to the full feature phase
/// (T set; ISID 80 01 02 03 04 05, ITT 7, CmdSN 1, ExpStatSN 0) carrying `pairs`.
inline LoginStep login_to_full_feature(LoginMachine& machine, iscsi::LoginStage csg, const iscsi::TextPairs& pairs) {
  const iscsi::LoginRequest r{
      .transit = true, .csg = csg, .nsg = iscsi::LoginStage::full_feature_phase,
      .isid = {std::byte{0x80}, std::byte{1}, std::byte{2}, std::byte{3}, std::byte{4}, std::byte{5}},
      .itt = iscsi::Itt{7}, .cmd_sn = SerialNumber(1), .exp_stat_sn = SerialNumber(0)};
  const auto text = iscsi::encode_text(pairs);
  return machine.on_pdu(iscsi::encode_bhs(r), text);
}

}  // namespace iserkit::target::test
