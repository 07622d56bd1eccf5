// The initiator options the three front ends share (iserkit, iserkit-nbd, iserkit-fuse), parsed in
// the one grammar of common/cli_values.hpp: enumerations case-insensitive, errors listing the
// accepted words, and the checks of the names an initiator logs in with (layer 6 helpers).
#pragma once

#include <string>
#include <string_view>

#include "iserkit/datamover/iser_datamover.hpp"
#include "iserkit/initiator/multipath.hpp"
#include "iserkit/initiator/options.hpp"

namespace iserkit::initiator {

/// --digest, --header-digest, --data-digest: "none" or "crc32c" (any case; RFC 7143 §13.1
/// spells them None and CRC32C). Throws cli::BadValue naming `option` and listing both.
Digest digest_option(std::string_view option, std::string_view text);

/// --transport: url, tcp, iser or auto. Throws cli::BadValue listing them.
TransportPolicy transport_option(std::string_view text);

/// --multipath: failover or round-robin. Throws cli::BadValue listing them.
MultipathPolicy multipath_option(std::string_view text);

/// --iser-stags: automatic (or auto), per-command, whole-slab. Throws cli::BadValue listing them.
datamover::IserStags iser_stags_option(std::string_view text);

/// --initiator-name: an iSCSI name (iscsi/names.hpp; upper case is accepted, as the target
/// compares names case-folded, RFC 3722). Throws cli::BadValue with the accepted formats.
void check_initiator_name(std::string_view name);

/// The CHAP user names of `chap` (user, target_user) when set: iscsi::check_chap_user().
/// Throws cli::BadValue naming `source` (e.g. "--chap-user", "--chap-file", "the URL").
void check_chap_names(const ChapOptions& chap, std::string_view source);

}  // namespace iserkit::initiator
