// LoginMachine: the target side of the iSCSI login phase of one connection (RFC 7143 §6.3 login
// phase and stages, §6.1/§6.2 text and multi-PDU text (C bit), §11.12 Login Request, §11.13 Login
// Response and status codes §11.13.5, §13 keys). Sans-I/O: it takes the raw BHS and data segment
// of each PDU received during login and returns the Login Response to send and what to do next.
// Security stage (RFC 7143 §6.3.1, §12.1.3): AuthMethod=None, or CHAP (one-way or mutual, through
// ChapAuthenticator) when the target node — or, for discovery sessions, the registry's discovery
// authentication — has CHAP users; per-node ACLs of initiator names (status 0x0202).
// Repeated keys (RFC 7143 §6.2: a key is declared or negotiated at most once per login; the target
// answers an attempt with Login reject, initiator error 0x0200): a key twice in one Login Request
// (also across the C-bit PDUs that carry it) is refused, and so is a key of an earlier request sent
// again, with one tolerance for interoperability: a declarative key (InitiatorName, TargetName,
// SessionType, InitiatorAlias, MaxRecvDataSegmentLength, …) re-sent with the byte-identical value
// is ignored — libiscsi repeats InitiatorName, TargetName and SessionType in its operational-stage
// request. A changed value is refused, so the name the ACL checked is the name the session uses.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "iserkit/common/bytes.hpp"
#include "iserkit/iscsi/negotiation.hpp"
#include "iserkit/iscsi/pdu.hpp"
#include "chap_authenticator.hpp"
#include "target_node.hpp"

namespace iserkit::target {

/// Login status class and detail as one number (RFC 7143 §11.13.5: class << 8 | detail).
enum class LoginStatus : std::uint16_t {
  success = 0x0000,
  initiator_error = 0x0200,
  authentication_failure = 0x0201,
  authorization_failure = 0x0202,
  not_found = 0x0203,
  target_removed = 0x0204,
  unsupported_version = 0x0205,
  too_many_connections = 0x0206,
  missing_parameter = 0x0207,
  cant_include_in_session = 0x0208,
  session_type_not_supported = 0x0209,
  session_does_not_exist = 0x020a,
  invalid_during_login = 0x020b,
  target_error = 0x0300,
  service_unavailable = 0x0301,
  out_of_resources = 0x0302,
};

/// The values the target offers or accepts in operational negotiation (bytes unless noted).
struct TargetLoginOptions {
  std::uint32_t max_recv_data_segment_length = 262144;  ///< declared by the target
  std::uint32_t max_burst_length = 4u << 20;
  std::uint32_t first_burst_length = 262144;
  std::uint32_t max_outstanding_r2t = 8;  ///< count
  std::uint32_t cmd_window_depth = 128;   ///< commands: ExpCmdSN..MaxCmdSN window size
  /// The connection is iSER (RFC 7145): RDMAExtensions=Yes is required, TargetRecvDataSegmentLength
  /// is declared instead of MaxRecvDataSegmentLength, InitialR2T is Yes and digests are None.
  bool rdma = false;
  std::uint32_t rdma_recv_data_segment_length = 8192;  ///< TargetRecvDataSegmentLength we declare
  std::uint32_t max_outstanding_unexpected_pdus = 0;   ///< our answer to that key (0 = no limit)
  std::uint16_t portal_group_tag = 1;  ///< the TargetPortalGroupTag of the portal the connection came in on
  /// The tenant of the portal the connection came in on (empty: none). Only targets of that
  /// tenant (TargetNode::tenant) can be logged in to; others get 0x0203 as unknown names do.
  std::string tenant;
};

/// What the connection does after a login PDU.
enum class LoginAction : std::uint8_t {
  send,                  ///< send the reply and wait for the next Login Request
  send_then_full_feature,///< send the reply; login succeeded, the full-feature phase starts
  send_then_close,       ///< send the reply (an error status) and close the connection
  close,                 ///< close the connection without a reply
};

/// The reply to one login PDU.
struct LoginStep {
  LoginAction action = LoginAction::send;
  iscsi::LoginResponse response;      ///< valid unless action == close
  std::vector<std::byte> text;        ///< the response's data segment (key=value pairs)
  /// Why the login is refused (send_then_close/close), for the log: "what: key=value", peer
  /// strings already escaped. Empty when there is nothing more to say than the status.
  std::string reason;
};

/// Result of a successful login.
struct LoginResult {
  iscsi::OperationalParameters parameters;  ///< negotiated values
  bool discovery = false;                   ///< SessionType=Discovery
  std::shared_ptr<TargetNode> target;       ///< the node (normal sessions), else null
  std::array<std::byte, 6> isid{};
  std::uint16_t tsih = 0;
  std::uint16_t cid = 0;
  SerialNumber exp_cmd_sn;  ///< ExpCmdSN at the start of the full-feature phase
  SerialNumber stat_sn;     ///< the next StatSN to use on this connection
  std::string chap_user;    ///< the CHAP_N the initiator authenticated as; empty without CHAP
  /// The InitiatorName the ACL checked; parameters.initiator_name is the same string (a login
  /// that tries to change it is refused), so the session, its I_T nexus and the logs use it.
  std::string initiator_name;
};

/// The login state machine of one connection. Not thread-safe.
class LoginMachine {
 public:
  /// `registry` must outlive the machine.
  LoginMachine(const TargetRegistry& registry, TargetLoginOptions options);

  /// Handles one PDU received during the login phase: `bhs` and its data segment `data`.
  /// `pdu_error` is the datamover's per-PDU error (errc::pdu_too_large), if any.
  LoginStep on_pdu(const iscsi::Bhs& bhs, ConstByteSpan data, std::error_code pdu_error = {});

  /// Makes the next Login Request get `status` and a close, whatever it carries — e.g. 0x0301
  /// for a source address the LoginThrottle blocks. `reason` is for the log.
  void refuse_login(LoginStatus status, std::string reason);

  /// Turns `success`, the step that returned send_then_full_feature, into a refusal with `status`
  /// (e.g. 0x0301 when the session it reinstates could not be ended in time): the same Login
  /// Response (ITT, ISID, CSG, StatSN) without the T bit, keys or TSIH, then a close (RFC 7143
  /// §11.13.5: the initiator may retry a Target Error later). `reason` is for the log.
  LoginStep refuse_final(const LoginStep& success, LoginStatus status, std::string reason) const;

  /// The outcome once a step returned send_then_full_feature.
  [[nodiscard]] const LoginResult& result() const noexcept { return result_; }

 private:
  LoginStep reject(LoginStatus status, std::string reason = {});
  std::optional<LoginStep> check_repeats(iscsi::TextPairs& pairs);
  LoginStep process(const iscsi::LoginRequest& request, const iscsi::TextPairs& pairs);
  std::optional<LoginStatus> check_names(const iscsi::TextPairs& pairs);
  std::optional<LoginStatus> security(const iscsi::TextPairs& keys, iscsi::TextPairs& answers);
  iscsi::LoginResponse base_response() const;

  const TargetRegistry& registry_;
  TargetLoginOptions options_;
  iscsi::Negotiation negotiation_;
  bool started_ = false;
  bool declared_mrdsl_ = false;
  iscsi::LoginStage stage_ = iscsi::LoginStage::security_negotiation;
  iscsi::LoginRequest first_;         // the leading Login Request of this connection
  iscsi::Itt itt_{0};                 // ITT of the current request
  std::vector<std::byte> pending_text_;  // text of a C=1 sequence
  // Every key the initiator sent in this login, with its value (RFC 7143 §6.2: no key twice).
  std::unordered_map<std::string, std::string> received_;
  bool names_checked_ = false;
  enum class Auth { undecided, none, chap } auth_ = Auth::undecided;
  const AuthConfig* auth_config_ = nullptr;  // the node's or the discovery authentication
  std::optional<ChapAuthenticator> chap_;
  LoginResult result_;
  SerialNumber stat_sn_;
  std::string reason_;  // set where a status is chosen, for LoginStep::reason
  std::optional<LoginStatus> refusal_;  // refuse_login()
};

}  // namespace iserkit::target
