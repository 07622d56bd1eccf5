// iSCSI names and CHAP user names as every program takes them (layer 0/1: pure functions): the
// target's --iqn, --allow-initiator and [[target]] names, the initiators' --initiator-name, and CHAP
// user names (CHAP_N) wherever they are configured. One validator, so that a name refused in one
// place is refused in all. RFC 7143 §4.2.7 (iSCSI names: iqn., eui., naa. formats, 223 bytes,
// normalized by the RFC 3722 stringprep profile), §12.1.3 (CHAP_N).
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include <tl/expected.hpp>

namespace iserkit::iscsi {

/// Longest iSCSI name in bytes (RFC 7143 §4.2.7.1).
inline constexpr std::size_t max_iscsi_name_bytes = 223;

/// Longest CHAP user name (CHAP_N) in bytes we take: RFC 7143 §6.1 bounds text values at 255 bytes.
inline constexpr std::size_t max_chap_user_bytes = 255;

/// What every name error lists: the three accepted iSCSI name formats.
inline constexpr std::string_view iscsi_name_forms =
    "want iqn.YYYY-MM.reversed.domain[:anything] (lower case a-z, 0-9, '-', '.', ':'), eui. and 16 hex digits, "
    "or naa. and 16 or 32 hex digits; at most 223 bytes (RFC 7143 §4.2.7)";

/// True when `name` is a valid iSCSI name in its normalized form (RFC 7143 §4.2.7.1, §4.2.7.2):
/// 1..223 bytes; "iqn.YYYY-MM." (month 01..12) followed by a non-empty rest made of a-z, 0-9,
/// '-', '.', ':'; or "eui." followed by 16 hex digits; or "naa." followed by 16 or 32 hex digits.
/// Upper case in an iqn. name is not accepted (normalize first).
bool is_valid_iscsi_name(std::string_view name) noexcept;

/// is_valid_iscsi_name() with a reason: nothing when valid, else a message saying what is wrong
/// (too long, upper case, a character an iSCSI name cannot hold, a bad date) and listing the
/// accepted formats (iscsi_name_forms).
tl::expected<void, std::string> check_iscsi_name(std::string_view name);

/// `name` with ASCII upper case folded to lower case: the normalized form RFC 3722 maps iSCSI
/// names to, for names that are compared rather than served (ACL entries, initiator names).
std::string fold_case(std::string_view name);

/// Checks a CHAP user name (CHAP_N, RFC 7143 §12.1.3): 1..255 bytes, no control characters
/// (0x00-0x1f, 0x7f: NUL ends a text key, and the others cannot be typed or logged safely).
/// Errors: a message saying what is wrong and what is accepted.
tl::expected<void, std::string> check_chap_user(std::string_view name);

}  // namespace iserkit::iscsi
