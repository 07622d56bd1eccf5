// Fuzz target: the target's login state machine (target/src/login.hpp; RFC 7143 §6.3, §11.12,
// §11.13, §12.1.3) fed arbitrary PDUs, which reach the text codec, operational negotiation, the
// ACL, SendTargets-less discovery logins and the CHAP authenticator (target/src/chap_authenticator).
// Input: one configuration byte (bit 0: the node requires CHAP, bit 1: mutual CHAP credential,
// bit 2: iSER login, bit 3: discovery requires CHAP, bit 4: an initiator ACL), then PDUs, each a
// flags byte (bit 0: force the Login Request opcode, bit 1: the datamover reported
// pdu_too_large), 48 BHS bytes and a record (16-bit length + data segment).
// Invariants: every reply's text decodes; a closing step ends the login; a login never reaches
// the full-feature phase without passing CHAP where CHAP is required (the challenge is random, so
// no input can know the right CHAP_R); a normal session names its node, a discovery session none.
#include <algorithm>
#include <memory>

#include "fuzz_support.hpp"
#include "iserkit/common/errors.hpp"
#include "iserkit/iscsi/text.hpp"
#include "iserkit/target/scsi_dispatcher.hpp"
#include "login.hpp"

using namespace iserkit;
using namespace iserkit::target;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  fuzz::Reader in(data, size);
  const std::uint8_t config = in.u8();
  const bool node_chap = (config & 1) != 0;
  const bool discovery_chap = (config & 8) != 0;

  TargetRegistry registry;
  auto node = std::make_shared<TargetNode>();
  node->name = "iqn.2026-11.org.iserkit:fuzz";
  node->alias = "fuzz";
  node->dispatcher = std::make_shared<ScsiDispatcher>();
  if (node_chap) node->auth.users = {{"alice", "alice-secret-123"}};
  if ((config & 2) != 0) node->auth.mutual = ChapCredential{"target", "target-secret-456"};
  if ((config & 16) != 0) node->allowed_initiators = {"iqn.2026-11.org.test:init"};
  FUZZ_CHECK(registry.add(node).has_value());
  if (discovery_chap) {
    AuthConfig d;
    d.users = {{"bob", "bob-secret-7890"}};
    registry.set_discovery_auth(d);
  }
  TargetLoginOptions options;
  options.rdma = (config & 4) != 0;
  LoginMachine machine(registry, options);

  while (!in.empty()) {
    const std::uint8_t flags = in.u8();
    iscsi::Bhs bhs{};
    const auto head = in.bytes(iscsi::bhs_size);
    std::copy(head.begin(), head.end(), bhs.begin());
    if ((flags & 1) != 0) bhs[0] = std::byte{0x43};  // Login Request, I bit
    const auto segment = in.record();
    const std::error_code pdu_error = (flags & 2) != 0 ? make_error_code(errc::pdu_too_large) : std::error_code{};
    const LoginStep step = machine.on_pdu(bhs, segment, pdu_error);
    if (step.action == LoginAction::close) return 0;
    FUZZ_CHECK(iscsi::decode_text(step.text).has_value());
    if (step.action == LoginAction::send_then_close) {
      FUZZ_CHECK(step.response.status_class != 0);
      return 0;
    }
    if (step.action == LoginAction::send_then_full_feature) {
      FUZZ_CHECK(step.response.status_class == 0);
      const LoginResult& r = machine.result();
      if (r.discovery) {
        FUZZ_CHECK(r.target == nullptr);
        FUZZ_CHECK(!discovery_chap);
      } else {
        FUZZ_CHECK(r.target == node);
        FUZZ_CHECK(!node_chap);
      }
      return 0;
    }
  }
  return 0;
}
