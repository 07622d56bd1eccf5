// Fuzz target: the initiator's login state machine (initiator/src/login.hpp; RFC 7143 §6.3,
// §11.13, §13, §12.1.3) fed arbitrary Login Responses, which reach the text codec, operational
// negotiation, redirects (TargetAddress) and the CHAP client (initiator/src/chap_client).
// Input: one configuration byte (bit 0: start in the security stage, bit 1: CHAP, bit 2: mutual
// CHAP, bit 3: discovery session, bit 4: iSER login), then responses, each a flags byte (bit 0:
// patch ITT and ISID to the ones the machine uses, so inputs need not guess them), 48 BHS bytes
// and a record (16-bit length + text data segment).
// Invariants: every request the machine asks to send carries our ISID, ITT and a text that
// encodes and decodes unchanged; a redirect names a host; with mutual CHAP the login never
// completes (the target would need our random challenge to answer it); a completed login has
// FirstBurstLength ≤ MaxBurstLength.
#include <algorithm>

#include "fuzz_support.hpp"
#include "iserkit/iscsi/pdu.hpp"
#include "iserkit/iscsi/text.hpp"
#include "login.hpp"

using namespace iserkit;
using namespace iserkit::initiator;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  fuzz::Reader in(data, size);
  const std::uint8_t config_bits = in.u8();
  const std::array<std::byte, 6> isid{std::byte{0x80}, std::byte{1}, std::byte{2}, std::byte{3}, std::byte{0},
                                      std::byte{1}};
  LoginConfig config;
  config.initiator_name = "iqn.2026-11.org.iserkit:fuzz";
  config.discovery = (config_bits & 8) != 0;
  if (!config.discovery) config.target_name = "iqn.2026-11.org.example:vol1";
  config.isid = isid;
  config.itt = iscsi::Itt{7};
  config.cmd_sn = SerialNumber(1);
  config.options.security_stage = (config_bits & 1) != 0 || (config_bits & 2) != 0;
  if ((config_bits & 2) != 0) {
    config.options.chap.user = "alice";
    config.options.chap.secret = "alice-secret-123";
    if ((config_bits & 4) != 0) config.options.chap.target_secret = "target-secret-456";
  }
  config.rdma = (config_bits & 16) != 0;
  const bool mutual = config.options.chap.mutual();

  LoginMachine machine(config);
  LoginSend next = machine.start();
  while (!in.empty()) {
    FUZZ_CHECK(next.request.isid == isid);
    FUZZ_CHECK(iscsi::decode_text(iscsi::encode_text(next.text)) == next.text);
    const std::uint8_t flags = in.u8();
    iscsi::Bhs bhs{};
    const auto head = in.bytes(iscsi::bhs_size);
    std::copy(head.begin(), head.end(), bhs.begin());
    bhs[0] = std::byte{0x23};  // Login Response: the session routes other opcodes elsewhere
    auto response = iscsi::decode_bhs_as<iscsi::LoginResponse>(bhs);
    FUZZ_CHECK(response.has_value());  // every Login Response BHS decodes
    if ((flags & 1) != 0) {
      response->itt = next.request.itt;
      response->isid = isid;
    }
    auto text = iscsi::decode_text(in.record());
    if (!text) return 0;  // the session fails the login on a malformed data segment
    auto step = machine.on_response(*response, *text);
    if (!step) return 0;
    if (auto* done = std::get_if<LoginDone>(&*step)) {
      FUZZ_CHECK(!mutual);
      FUZZ_CHECK(done->parameters.first_burst_length <= done->parameters.max_burst_length);
      return 0;
    }
    if (auto* redirect = std::get_if<LoginRedirect>(&*step)) {
      FUZZ_CHECK(!redirect->host.empty());
      return 0;
    }
    next = std::get<LoginSend>(std::move(*step));
  }
  return 0;
}
