// The key table and the Negotiation state machine (RFC 7143 §6.2, §13; RFC 7145 §6).
#include "iserkit/iscsi/negotiation.hpp"

#include <algorithm>
#include <charconv>
#include <optional>

#include "iserkit/common/errors.hpp"

namespace iserkit::iscsi {
namespace {

using P = OperationalParameters;
using Policy = NegotiationPolicy;

bool yes(std::string_view v) noexcept { return v == "Yes"; }
std::string yes_no(bool b) { return b ? "Yes" : "No"; }

std::optional<std::uint32_t> parse_number(std::string_view v) noexcept {
  // RFC 7143 §6.1: numerical values are decimal or 0x-prefixed hex.
  std::uint64_t out = 0;
  int base = 10;
  if (v.size() > 2 && v[0] == '0' && (v[1] == 'x' || v[1] == 'X')) {
    v.remove_prefix(2);
    base = 16;
  }
  if (v.empty()) return std::nullopt;
  auto [p, ec] = std::from_chars(v.data(), v.data() + v.size(), out, base);
  if (ec != std::errc{} || p != v.data() + v.size() || out > 0xffffffffu) return std::nullopt;
  return static_cast<std::uint32_t>(out);
}

std::vector<std::string_view> split_list(std::string_view v) {
  std::vector<std::string_view> out;
  while (true) {
    const auto comma = v.find(',');
    out.push_back(v.substr(0, comma));
    if (comma == std::string_view::npos) break;
    v.remove_prefix(comma + 1);
  }
  return out;
}

std::string join(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& x : v) s += (s.empty() ? "" : ",") + x;
  return s;
}

std::uint32_t num(std::string_view v) { return parse_number(v).value_or(0); }

// clang-format off
const std::vector<KeyDefinition> table = {
  {"HeaderDigest", KeyKind::list, KeyUse::login_only, 0, 0,
   [](P& p, std::string_view v, Role) { p.header_digest_crc32c = v == "CRC32C"; },
   [](const Policy& q, Role) { return join(q.header_digests); }},
  {"DataDigest", KeyKind::list, KeyUse::login_only, 0, 0,
   [](P& p, std::string_view v, Role) { p.data_digest_crc32c = v == "CRC32C"; },
   [](const Policy& q, Role) { return join(q.data_digests); }},
  {"MaxConnections", KeyKind::numeric_min, KeyUse::leading_only, 1, 65535,
   [](P& p, std::string_view v, Role) { p.max_connections = num(v); },
   [](const Policy& q, Role) { return std::to_string(q.wanted.max_connections); }},
  {"InitialR2T", KeyKind::boolean_or, KeyUse::leading_only, 0, 0,
   [](P& p, std::string_view v, Role) { p.initial_r2t = yes(v); },
   [](const Policy& q, Role) { return yes_no(q.wanted.initial_r2t); }},
  {"ImmediateData", KeyKind::boolean_and, KeyUse::leading_only, 0, 0,
   [](P& p, std::string_view v, Role) { p.immediate_data = yes(v); },
   [](const Policy& q, Role) { return yes_no(q.wanted.immediate_data); }},
  {"MaxRecvDataSegmentLength", KeyKind::declarative, KeyUse::all, 512, 16777215,
   [](P& p, std::string_view v, Role from) {
     (from == Role::initiator ? p.initiator_max_recv_data_segment_length
                              : p.target_max_recv_data_segment_length) = num(v);
   },
   [](const Policy& q, Role me) { return std::to_string(q.wanted.max_recv_segment(me)); }},
  {"MaxBurstLength", KeyKind::numeric_min, KeyUse::leading_only, 512, 16777215,
   [](P& p, std::string_view v, Role) { p.max_burst_length = num(v); },
   [](const Policy& q, Role) { return std::to_string(q.wanted.max_burst_length); }},
  {"FirstBurstLength", KeyKind::numeric_min, KeyUse::leading_only, 512, 16777215,
   [](P& p, std::string_view v, Role) { p.first_burst_length = num(v); },
   [](const Policy& q, Role) { return std::to_string(q.wanted.first_burst_length); }},
  {"DefaultTime2Wait", KeyKind::numeric_max, KeyUse::leading_only, 0, 3600,
   [](P& p, std::string_view v, Role) { p.default_time2wait = num(v); },
   [](const Policy& q, Role) { return std::to_string(q.wanted.default_time2wait); }},
  {"DefaultTime2Retain", KeyKind::numeric_min, KeyUse::leading_only, 0, 3600,
   [](P& p, std::string_view v, Role) { p.default_time2retain = num(v); },
   [](const Policy& q, Role) { return std::to_string(q.wanted.default_time2retain); }},
  {"MaxOutstandingR2T", KeyKind::numeric_min, KeyUse::leading_only, 1, 65535,
   [](P& p, std::string_view v, Role) { p.max_outstanding_r2t = num(v); },
   [](const Policy& q, Role) { return std::to_string(q.wanted.max_outstanding_r2t); }},
  {"DataPDUInOrder", KeyKind::boolean_or, KeyUse::leading_only, 0, 0,
   [](P& p, std::string_view v, Role) { p.data_pdu_in_order = yes(v); },
   [](const Policy& q, Role) { return yes_no(q.wanted.data_pdu_in_order); }},
  {"DataSequenceInOrder", KeyKind::boolean_or, KeyUse::leading_only, 0, 0,
   [](P& p, std::string_view v, Role) { p.data_sequence_in_order = yes(v); },
   [](const Policy& q, Role) { return yes_no(q.wanted.data_sequence_in_order); }},
  {"ErrorRecoveryLevel", KeyKind::numeric_min, KeyUse::leading_only, 0, 2,
   [](P& p, std::string_view v, Role) { p.error_recovery_level = num(v); },
   [](const Policy& q, Role) { return std::to_string(q.wanted.error_recovery_level); }},
  // Obsolete marker keys (RFC 7143 §13.25 lists them as obsolete): answered No, as RFC 3720 And.
  {"IFMarker", KeyKind::boolean_and, KeyUse::login_only, 0, 0, [](P&, std::string_view, Role) {},
   [](const Policy&, Role) { return std::string("No"); }},
  {"OFMarker", KeyKind::boolean_and, KeyUse::login_only, 0, 0, [](P&, std::string_view, Role) {},
   [](const Policy&, Role) { return std::string("No"); }},
  {"TaskReporting", KeyKind::list, KeyUse::leading_only, 0, 0, [](P&, std::string_view, Role) {},
   [](const Policy&, Role) { return std::string("RFC3720"); }},
  {"iSCSIProtocolLevel", KeyKind::numeric_min, KeyUse::leading_only, 0, 31,
   [](P& p, std::string_view v, Role) { p.protocol_level = num(v); },
   [](const Policy& q, Role) { return std::to_string(q.wanted.protocol_level); }},
  {"RDMAExtensions", KeyKind::boolean_and, KeyUse::leading_only, 0, 0,
   [](P& p, std::string_view v, Role) { p.rdma_extensions = yes(v); },
   [](const Policy& q, Role) { return yes_no(q.wanted.rdma_extensions); }},
  // RFC 7145 §6.4, §6.5: each length describes one side's receive buffers, so only that side's
  // declaration counts (tgt answers these keys as if negotiated; LIO declares both).
  {"InitiatorRecvDataSegmentLength", KeyKind::declarative, KeyUse::all, 512, 16777215,
   [](P& p, std::string_view v, Role from) {
     if (from == Role::initiator) p.initiator_recv_data_segment_length = num(v);
   },
   [](const Policy& q, Role) { return std::to_string(q.wanted.initiator_recv_data_segment_length); }},
  {"TargetRecvDataSegmentLength", KeyKind::declarative, KeyUse::all, 512, 16777215,
   [](P& p, std::string_view v, Role from) {
     if (from == Role::target) p.target_recv_data_segment_length = num(v);
   },
   [](const Policy& q, Role) { return std::to_string(q.wanted.target_recv_data_segment_length); }},
  {"MaxOutstandingUnexpectedPDUs", KeyKind::numeric_min_or_zero, KeyUse::leading_only, 0, 0xffffffff,
   [](P& p, std::string_view v, Role) { p.max_outstanding_unexpected_pdus = num(v); },
   [](const Policy& q, Role) { return std::to_string(q.wanted.max_outstanding_unexpected_pdus); }},
  {"SessionType", KeyKind::declarative, KeyUse::leading_only, 0, 0,
   [](P& p, std::string_view v, Role) { p.session_type = std::string(v); },
   [](const Policy& q, Role) { return q.wanted.session_type; }},
  {"InitiatorName", KeyKind::declarative, KeyUse::login_only, 0, 0,
   [](P& p, std::string_view v, Role) { p.initiator_name = std::string(v); },
   [](const Policy& q, Role) { return q.wanted.initiator_name; }},
  {"TargetName", KeyKind::declarative, KeyUse::all, 0, 0,
   [](P& p, std::string_view v, Role) { p.target_name = std::string(v); },
   [](const Policy& q, Role) { return q.wanted.target_name; }},
  {"InitiatorAlias", KeyKind::declarative, KeyUse::all, 0, 0,
   [](P& p, std::string_view v, Role) { p.initiator_alias = std::string(v); },
   [](const Policy& q, Role) { return q.wanted.initiator_alias; }},
  {"TargetAlias", KeyKind::declarative, KeyUse::all, 0, 0,
   [](P& p, std::string_view v, Role) { p.target_alias = std::string(v); },
   [](const Policy& q, Role) { return q.wanted.target_alias; }},
  {"TargetPortalGroupTag", KeyKind::declarative, KeyUse::login_only, 0, 65535,
   [](P& p, std::string_view v, Role) { p.target_portal_group_tag = static_cast<std::uint16_t>(num(v)); },
   [](const Policy& q, Role) { return std::to_string(q.wanted.target_portal_group_tag); }},
};
// clang-format on

bool numeric(KeyKind k) noexcept {
  return k == KeyKind::numeric_min || k == KeyKind::numeric_max || k == KeyKind::numeric_min_or_zero;
}

std::uint32_t min_or_zero(std::uint32_t a, std::uint32_t b) noexcept {
  if (a == 0) return b;
  if (b == 0) return a;
  return std::min(a, b);
}
bool boolean(KeyKind k) noexcept { return k == KeyKind::boolean_and || k == KeyKind::boolean_or; }

// RFC 7145 §6.4, §6.5: the role whose receive buffers each iSER length describes.
std::optional<Role> rdma_length_owner(std::string_view name) noexcept {
  if (name == "InitiatorRecvDataSegmentLength") return Role::initiator;
  if (name == "TargetRecvDataSegmentLength") return Role::target;
  return std::nullopt;
}

bool valid_value(const KeyDefinition& key, std::string_view v) {
  if (numeric(key.kind) || (key.kind == KeyKind::declarative && key.max != 0)) {
    auto n = parse_number(v);
    return n && *n >= key.min && *n <= key.max;
  }
  if (boolean(key.kind)) return v == "Yes" || v == "No";
  return !v.empty();
}

}  // namespace

const std::vector<KeyDefinition>& key_table() { return table; }

const KeyDefinition* find_key(std::string_view name) noexcept {
  for (const auto& k : table)
    if (k.name == name) return &k;
  return nullptr;
}

Negotiation::Negotiation(Role me, NegotiationPolicy policy) : me_(me), policy_(std::move(policy)) {}

TextPairs Negotiation::offer(std::initializer_list<std::string_view> keys) {
  TextPairs out;
  for (auto name : keys) {
    const auto* key = find_key(name);
    // A declarative key is each side's own statement (RFC 7143 §6.2): the peer having declared
    // its value (e.g. its MaxRecvDataSegmentLength) must not suppress ours.
    if (key == nullptr || (seen_.contains(name) && key->kind != KeyKind::declarative)) continue;
    std::string value = key->local(policy_, me_);
    if (key->kind == KeyKind::declarative) {
      if (value.empty()) continue;
      key->apply(params_, value, me_);  // our own declaration takes effect at once
      seen_.emplace(name);
      declared_.emplace(name);
    } else {
      outstanding_.push_back({std::string(name), value});
    }
    out.push_back({std::string(name), std::move(value)});
  }
  return out;
}

std::string Negotiation::respond(const KeyDefinition& key, std::string_view offered) {
  const std::string local = key.local(policy_, me_);
  switch (key.kind) {
    case KeyKind::list: {
      const auto ours = split_list(local);
      for (auto v : split_list(offered))  // the originator's order is its preference
        if (std::find(ours.begin(), ours.end(), v) != ours.end()) return std::string(v);
      return std::string(value_reject);
    }
    case KeyKind::boolean_and: return yes_no(yes(offered) && yes(local));
    case KeyKind::boolean_or: return yes_no(yes(offered) || yes(local));
    case KeyKind::numeric_min: return std::to_string(std::min(num(offered), num(local)));
    case KeyKind::numeric_max: return std::to_string(std::max(num(offered), num(local)));
    case KeyKind::numeric_min_or_zero: return std::to_string(min_or_zero(num(offered), num(local)));
    case KeyKind::declarative: break;
  }
  return {};
}

Result<void> Negotiation::handle_answer(const KeyDefinition& key, const std::string& offered, std::string_view answer) {
  if (answer == value_reject || answer == value_not_understood || answer == value_irrelevant) {
    return {};  // RFC 7143 §6.2: the key keeps its default value
  }
  if (!valid_value(key, answer)) return fail(errc::negotiation_failed);
  bool ok = true;
  switch (key.kind) {
    case KeyKind::list: {
      const auto ours = split_list(offered);
      ok = std::find(ours.begin(), ours.end(), answer) != ours.end();
      break;
    }
    case KeyKind::boolean_and: ok = yes(offered) || !yes(answer); break;  // No offered → must stay No
    case KeyKind::boolean_or: ok = !yes(offered) || yes(answer); break;   // Yes offered → must stay Yes
    case KeyKind::numeric_min: ok = num(answer) <= num(offered); break;
    case KeyKind::numeric_max: ok = num(answer) >= num(offered); break;
    case KeyKind::numeric_min_or_zero: ok = num(offered) == 0 || (num(answer) != 0 && num(answer) <= num(offered)); break;
    case KeyKind::declarative: break;
  }
  if (!ok) return fail(errc::negotiation_failed);
  key.apply(params_, answer, me_);
  return {};
}

Result<TextPairs> Negotiation::receive(const TextPairs& from_peer) {
  TextPairs answers;
  const Role peer = me_ == Role::initiator ? Role::target : Role::initiator;
  for (const auto& pair : from_peer) {
    // Named references, not a structured binding: clang 14 cannot capture bindings in a lambda.
    const std::string& name = pair.key;
    const std::string& value = pair.value;
    auto pending = std::find_if(outstanding_.begin(), outstanding_.end(), [&](const TextPair& p) { return p.key == name; });
    const auto* key = find_key(name);
    if (pending != outstanding_.end()) {
      const std::string offered = pending->value;
      outstanding_.erase(pending);
      seen_.emplace(name);
      if (auto r = handle_answer(*key, offered, value); !r) return fail(r.error());
      continue;
    }
    if (key == nullptr) {
      answers.push_back({name, std::string(value_not_understood)});
      continue;
    }
    // RFC 7143 §6.2: a key must not be renegotiated within one negotiation (declarations may repeat).
    if (seen_.contains(name) && key->kind != KeyKind::declarative) return fail(errc::negotiation_failed);
    seen_.emplace(name);
    if (!valid_value(*key, value)) {
      answers.push_back({name, std::string(value_reject)});
      continue;
    }
    if (key->kind == KeyKind::declarative) {
      key->apply(params_, value, peer);
      if (policy_.answer_rdma_lengths && !declared_.contains(name)) {
        if (auto owner = rdma_length_owner(name)) {
          // LIO waits for an answer to these (see NegotiationPolicy::answer_rdma_lengths).
          std::string mine = *owner == peer ? value : key->local(policy_, me_);
          if (*owner == me_) key->apply(params_, mine, me_);
          declared_.emplace(name);
          answers.push_back({name, std::move(mine)});
        }
      }
      continue;
    }
    std::string result = respond(*key, value);
    if (result != value_reject) key->apply(params_, result, me_);
    answers.push_back({name, std::move(result)});
  }
  return answers;
}

void Negotiation::finish() {
  for (const auto& [name, value] : outstanding_) {
    const auto* key = find_key(name);
    // RFC 7143 §6.2.1: no answer is needed when the offer decides the result by itself.
    if ((key->kind == KeyKind::boolean_and && value == "No") || (key->kind == KeyKind::boolean_or && value == "Yes"))
      key->apply(params_, value, me_);
  }
  outstanding_.clear();
  // RFC 7143 §13.14: FirstBurstLength must not exceed MaxBurstLength.
  params_.first_burst_length = std::min(params_.first_burst_length, params_.max_burst_length);
  if (params_.rdma_extensions) {
    // RFC 7145 §6.2: with RDMAExtensions=Yes MaxRecvDataSegmentLength is not used; the control-PDU
    // limits are InitiatorRecvDataSegmentLength and TargetRecvDataSegmentLength (§6.4, §6.5).
    params_.initiator_max_recv_data_segment_length = params_.initiator_recv_data_segment_length;
    params_.target_max_recv_data_segment_length = params_.target_recv_data_segment_length;
    // RFC 7145 §6.1: HeaderDigest and DataDigest are irrelevant on iSER (the RDMA transport has its
    // own CRCs); whatever was answered, none is used.
    params_.header_digest_crc32c = false;
    params_.data_digest_crc32c = false;
  }
}

}  // namespace iserkit::iscsi
