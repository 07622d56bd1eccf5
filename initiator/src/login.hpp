// The initiator's login state machine, sans-I/O (RFC 7143 §6: login phase; §11.12/§11.13: Login
// Request/Response; §13: operational keys). Input: decoded Login Responses and their text; output:
// the next Login Request to send, "done" with the negotiated parameters, a redirect (RFC 7143
// §11.13.5 class 1 with TargetAddress), or a typed error. The security stage runs AuthMethod=None or
// CHAP through ChapClient (RFC 7143 §12.1.3).
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <variant>

#include "chap_client.hpp"
#include "iserkit/common/result.hpp"
#include "iserkit/initiator/options.hpp"
#include "iserkit/iscsi/negotiation.hpp"
#include "iserkit/iscsi/pdu.hpp"
#include "iserkit/iscsi/text.hpp"

namespace iserkit::initiator {

/// What the login is for.
struct LoginConfig {
  std::string initiator_name;
  std::string initiator_alias;
  std::string target_name;             ///< empty for a discovery session
  bool discovery = false;              ///< SessionType=Discovery
  std::array<std::byte, 6> isid{};
  iscsi::Itt itt{0};
  SerialNumber cmd_sn{1};              ///< CmdSN of the leading login (and of the first command)
  std::uint16_t cid = 0;
  SessionOptions options;              ///< offered keys and whether to use the security stage
  /// iSER connection (RFC 7145 §6): offer RDMAExtensions=Yes and InitiatorRecvDataSegmentLength
  /// instead of MaxRecvDataSegmentLength and digests; InitialR2T=Yes and ImmediateData=No so every
  /// byte of write data is fetched by the target's RDMA Read (zero copy on our side).
  bool rdma = false;
};

/// The next request to send.
struct LoginSend {
  iscsi::LoginRequest request;
  iscsi::TextPairs text;
};
/// Login finished: the session is in full feature phase.
struct LoginDone {
  iscsi::OperationalParameters parameters;
  std::uint16_t tsih = 0;
  SerialNumber exp_stat_sn;   ///< StatSN of the final response + 1
  SerialNumber exp_cmd_sn;
  SerialNumber max_cmd_sn;
};
/// The target redirected the login (status 0x0101 temporarily / 0x0102 permanently) to another
/// portal: reconnect there and start again (RFC 7143 §11.13.5, TargetAddress §13.8).
struct LoginRedirect {
  std::string host;          ///< without brackets
  std::uint16_t port = 3260;
  bool permanent = false;    ///< 0x0102 "target moved permanently"
};
using LoginStep = std::variant<LoginSend, LoginDone, LoginRedirect>;

class LoginMachine {
 public:
  explicit LoginMachine(LoginConfig config);

  /// The first Login Request.
  LoginSend start();

  /// Processes one Login Response and its text data segment.
  /// Returns LoginRedirect for status class 1 with a TargetAddress.
  /// Errors: login_status_category() for status classes 2 and 3 (and a redirect without a valid
  /// TargetAddress); errc::negotiation_failed when the answers break §6.2, the target picks an
  /// AuthMethod we did not offer or CHAP values are malformed; errc::authentication_failed when
  /// mutual CHAP fails or the target skips it; errc::protocol_error for a response that does not
  /// fit the request (wrong ITT/ISID, stage going backwards, transit to a stage we did not ask for).
  Result<LoginStep> on_response(const iscsi::LoginResponse& response, const iscsi::TextPairs& text);

 private:
  LoginSend request(iscsi::LoginStage csg, iscsi::TextPairs text, bool transit);
  iscsi::TextPairs operational_offers();
  Result<LoginStep> security_response(const iscsi::LoginResponse& response, const iscsi::TextPairs& incoming);

  LoginConfig config_;
  iscsi::Negotiation negotiation_;
  iscsi::LoginStage stage_ = iscsi::LoginStage::security_negotiation;
  bool offered_operational_ = false;
  std::uint16_t tsih_ = 0;
  SerialNumber exp_stat_sn_{0};
  bool have_stat_sn_ = false;
  iscsi::TextPairs pending_text_;  // text accumulated across C=1 responses
  enum class Auth { offered, none, chap } auth_ = Auth::offered;
  std::optional<ChapClient> chap_;
};

/// The NegotiationPolicy the initiator uses for `options` (ErrorRecoveryLevel=0, MaxConnections=1).
iscsi::NegotiationPolicy initiator_policy(const SessionOptions& options, bool discovery, bool rdma = false);

}  // namespace iserkit::initiator
