// The front ends' shared initiator options (option_values.hpp).
#include "iserkit/initiator/option_values.hpp"

#include "iserkit/common/cli_values.hpp"
#include "iserkit/iscsi/names.hpp"

namespace iserkit::initiator {

Digest digest_option(std::string_view option, std::string_view text) {
  return cli::enum_option<Digest>(option, text, {{"none", Digest::none}, {"crc32c", Digest::crc32c}});
}

TransportPolicy transport_option(std::string_view text) {
  return cli::enum_option<TransportPolicy>("transport", text,
                                           {{"url", TransportPolicy::from_url},
                                            {"tcp", TransportPolicy::tcp},
                                            {"iser", TransportPolicy::iser},
                                            {"auto", TransportPolicy::automatic}});
}

MultipathPolicy multipath_option(std::string_view text) {
  return cli::enum_option<MultipathPolicy>(
      "multipath", text, {{"failover", MultipathPolicy::failover}, {"round-robin", MultipathPolicy::round_robin}});
}

datamover::IserStags iser_stags_option(std::string_view text) {
  using datamover::IserStags;
  return cli::enum_option<IserStags>("iser-stags", text,
                                     {{"automatic", IserStags::automatic},
                                      {"auto", IserStags::automatic},
                                      {"per-command", IserStags::per_command},
                                      {"whole-slab", IserStags::whole_slab}});
}

void check_initiator_name(std::string_view name) {
  if (auto ok = iscsi::check_iscsi_name(iscsi::fold_case(name)); !ok)
    throw cli::BadValue(cli::option_message("initiator-name", name, ok.error()));
}

void check_chap_names(const ChapOptions& chap, std::string_view source) {
  for (const auto* user : {&chap.user, &chap.target_user}) {
    if (user->empty()) continue;
    if (auto ok = iscsi::check_chap_user(*user); !ok)
      throw cli::BadValue(std::string(source) + ": CHAP user name: " + ok.error());
  }
}

}  // namespace iserkit::initiator
