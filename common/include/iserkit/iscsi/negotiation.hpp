// Operational text negotiation (RFC 7143 §6.2, keys in §13; RDMA keys RFC 7145 §6), sans-I/O.
// One constexpr table lists every key with its kind (the result function: list, And, Or, Min, Max,
// declarative), default and range; the Negotiation class applies it for either role.
#pragma once

#include <array>
#include <cstdint>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "iserkit/common/result.hpp"
#include "iserkit/iscsi/text.hpp"

namespace iserkit::iscsi {

/// Which end of the connection this side is.
enum class Role { initiator, target };

/// Negotiated (or defaulted) values of the operational keys. Lengths are in bytes.
struct OperationalParameters {
  bool header_digest_crc32c = false;  ///< HeaderDigest=CRC32C (per connection)
  bool data_digest_crc32c = false;    ///< DataDigest=CRC32C (per connection)
  std::uint32_t max_connections = 1;
  bool initial_r2t = true;
  bool immediate_data = true;
  std::uint32_t max_burst_length = 262144;
  std::uint32_t first_burst_length = 65536;
  std::uint32_t default_time2wait = 2;    ///< seconds
  std::uint32_t default_time2retain = 20; ///< seconds
  std::uint32_t max_outstanding_r2t = 1;
  bool data_pdu_in_order = true;
  bool data_sequence_in_order = true;
  std::uint32_t error_recovery_level = 0;
  /// MaxRecvDataSegmentLength declared by the initiator: the most the target may send in one PDU.
  std::uint32_t initiator_max_recv_data_segment_length = 8192;
  /// MaxRecvDataSegmentLength declared by the target: the most the initiator may send in one PDU.
  std::uint32_t target_max_recv_data_segment_length = 8192;
  bool rdma_extensions = false;                           ///< RDMAExtensions, RFC 7145 §6.3
  /// InitiatorRecvDataSegmentLength (RFC 7145 §6.5): the largest control-type PDU data segment the
  /// initiator receives. Only the initiator's own declaration counts.
  std::uint32_t initiator_recv_data_segment_length = 8192;
  /// TargetRecvDataSegmentLength (RFC 7145 §6.4): the largest control-type PDU data segment the
  /// target receives. Only the target's own declaration counts.
  std::uint32_t target_recv_data_segment_length = 8192;
  /// MaxOutstandingUnexpectedPDUs (RFC 5046 §6.7, implemented by tgt and illumos, not by Linux):
  /// unexpected control-type PDUs a side may have outstanding; 0 = no limit.
  std::uint32_t max_outstanding_unexpected_pdus = 0;
  std::uint32_t protocol_level = 0;                         ///< iSCSIProtocolLevel, RFC 7143 §13.24
  std::string session_type = "Normal";                      ///< "Normal" or "Discovery"
  std::string initiator_name;
  std::string target_name;
  std::string initiator_alias;
  std::string target_alias;
  std::uint16_t target_portal_group_tag = 0;

  /// The most bytes `me` may put in one data segment it sends (the peer's declared limit).
  [[nodiscard]] std::uint32_t max_send_segment(Role me) const noexcept {
    return me == Role::initiator ? target_max_recv_data_segment_length : initiator_max_recv_data_segment_length;
  }
  /// The most bytes `me` declared it will receive in one data segment.
  [[nodiscard]] std::uint32_t max_recv_segment(Role me) const noexcept {
    return me == Role::initiator ? initiator_max_recv_data_segment_length : target_max_recv_data_segment_length;
  }
  /// FirstBurstLength in effect: 0 when neither immediate nor unsolicited data is allowed.
  [[nodiscard]] std::uint32_t unsolicited_limit() const noexcept {
    return (initial_r2t && !immediate_data) ? 0 : first_burst_length;
  }
};

/// What this side wants: its value for every key it may offer or answer with.
struct NegotiationPolicy {
  OperationalParameters wanted;  ///< proposed values; the MaxRecvDataSegmentLength of this side's role is declared
  std::vector<std::string> header_digests{"None"};  ///< acceptable HeaderDigest values, most preferred first
  std::vector<std::string> data_digests{"None"};    ///< acceptable DataDigest values, most preferred first
  /// Answer InitiatorRecvDataSegmentLength / TargetRecvDataSegmentLength when the peer sends one
  /// this side has not declared itself. RFC 7145 §6.4, §6.5 make both lengths declarations, but
  /// LIO's iscsi_target_parameters.c proposes them as negotiated numbers over iSER and withholds
  /// the Login Response's T bit ("No response for proposed key") until each is answered. The
  /// answer is the length's owner's value: the peer's, echoed, for the peer's own buffers; ours
  /// otherwise. Declarations need no answer, so answering one is harmless to every other peer.
  bool answer_rdma_lengths = false;
};

/// The result function of a key (RFC 7143 §6.2.1, §6.2.2).
enum class KeyKind {
  list,             ///< value lists: the responder picks the first of the originator's it supports
  boolean_and,      ///< Yes/No, result = And
  boolean_or,       ///< Yes/No, result = Or
  numeric_min,      ///< result = smaller of the two
  numeric_max,      ///< result = larger of the two
  numeric_min_or_zero,  ///< result = smaller of the two, where 0 means "no limit" (tgt's min_or_zero)
  declarative,      ///< each side states its own value; no response
};

/// Where a key may appear (RFC 7143 §13 "Use").
enum class KeyUse { login_only, leading_only, all, full_feature_only };

/// One row of the key table.
struct KeyDefinition {
  std::string_view name;
  KeyKind kind;
  KeyUse use;
  std::uint32_t min = 0;  ///< numeric keys: smallest valid value
  std::uint32_t max = 0;  ///< numeric keys: largest valid value
  /// Stores a value (already validated against kind and range) into the parameters; `from` is
  /// the side that declared it (matters for MaxRecvDataSegmentLength and the RDMA lengths).
  void (*apply)(OperationalParameters&, std::string_view value, Role from) = nullptr;
  /// This side's value for the key, as text ("CRC32C,None", "262144", "Yes").
  std::string (*local)(const NegotiationPolicy&, Role me) = nullptr;
};

/// The key table (RFC 7143 §13, RFC 7145 §6). AuthMethod and CHAP keys belong to the security
/// stage and are handled by the login state machines; SendTargets by the text handlers.
const std::vector<KeyDefinition>& key_table();
/// The row for `name`, or nullptr for a key this implementation does not know.
const KeyDefinition* find_key(std::string_view name) noexcept;

/// A text negotiation in progress for one side. Feed it every key=value pair the peer sends;
/// it answers the peer's offers, checks the peer's answers to ours, and keeps the results.
class Negotiation {
 public:
  Negotiation(Role me, NegotiationPolicy policy);

  /// Builds offers for `keys` (names from the table) and remembers them as outstanding. Keys the
  /// peer already offered in this negotiation are skipped (it is the responder's turn there).
  TextPairs offer(std::initializer_list<std::string_view> keys);

  /// Processes pairs from the peer. Pairs answering one of our outstanding offers are checked and
  /// applied; any other pair is a peer offer, applied and answered in the returned list.
  /// Unknown keys are answered NotUnderstood; out-of-range values Reject (RFC 7143 §6.2).
  /// Returns errc::negotiation_failed when the peer's answer breaks the rules (e.g. a Min key
  /// answered with a larger value, a list answer we did not offer) or repeats a key.
  Result<TextPairs> receive(const TextPairs& from_peer);

  /// Resolves offers that got no answer (RFC 7143 §6.2.1: an And offer of No or an Or offer of Yes
  /// needs none; for others the default stays) and enforces FirstBurstLength ≤ MaxBurstLength.
  /// With RDMAExtensions=Yes (RFC 7145 §6.2, §6.1): MaxRecvDataSegmentLength is not used — the
  /// per-role limits become InitiatorRecvDataSegmentLength / TargetRecvDataSegmentLength whatever
  /// MaxRecvDataSegmentLength was declared — and digests are off (iSER has none).
  void finish();

  /// True when every offer of ours has been answered.
  [[nodiscard]] bool all_answered() const noexcept { return outstanding_.empty(); }
  /// The values negotiated so far (defaults for keys not negotiated).
  [[nodiscard]] const OperationalParameters& parameters() const noexcept { return params_; }
  [[nodiscard]] OperationalParameters& parameters() noexcept { return params_; }

 private:
  Result<void> handle_answer(const KeyDefinition& key, const std::string& offered, std::string_view answer);
  std::string respond(const KeyDefinition& key, std::string_view offered);

  Role me_;
  NegotiationPolicy policy_;
  OperationalParameters params_;
  std::vector<TextPair> outstanding_;  // our offers not yet answered
  std::set<std::string, std::less<>> seen_;  // keys already negotiated (no renegotiation in one login)
  std::set<std::string, std::less<>> declared_;  // declarative keys this side has stated or answered
};

}  // namespace iserkit::iscsi
