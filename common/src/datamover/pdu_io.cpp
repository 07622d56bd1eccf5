// Building outgoing PDUs (pdu_io.hpp). No I/O here; every transport and both engines use these.
#include "iserkit/datamover/pdu_io.hpp"

namespace iserkit::datamover {
namespace {

void finalize(PduOut& pdu) {
  iscsi::set_lengths(pdu.bhs, static_cast<std::uint8_t>(pdu.ahs.size() / 4),
                     static_cast<std::uint32_t>(pdu.data.size()));
}

}  // namespace

PduOut make_pdu(const iscsi::PduHeader& header, std::span<const std::byte> data, std::vector<std::byte> ahs) {
  PduOut pdu{.bhs = iscsi::encode_bhs(header), .ahs = std::move(ahs), .data = data};
  finalize(pdu);
  return pdu;
}

PduOut make_pdu_owned(const iscsi::PduHeader& header, std::vector<std::byte> data) {
  PduOut pdu{.bhs = iscsi::encode_bhs(header), .owned_data = std::move(data)};
  pdu.data = pdu.owned_data;
  finalize(pdu);
  return pdu;
}

}  // namespace iserkit::datamover
