// Fuzz target: what the initiator decodes from a target's SCSI data: sense data, fixed and
// descriptor format (common/…/scsi/sense.hpp, SPC-5 §4.4), standard INQUIRY data and VPD pages
// 0x00/0x80/0x83/0xb0/0xb1/0xb2 (scsi/inquiry.hpp, SPC-5 §6.6, §7.7, SBC-4 §6.6), READ CAPACITY
// (10)/(16) data (SBC-4 §5.20, §5.21), REPORT LUNS data (SPC-5 §6.33) and the Third-party Copy VPD
// page 0x8f (SPC-4 §7.8.17, scsi/third_party_copy.hpp). Input: the data.
// Invariants: sense survives decode → encode (descriptor format) → decode unchanged and keeps its
// key/ASC/ASCQ in fixed format; encoders of the decoded VPD pages, capacities and LUN lists give
// back values that decode equal; LUN lists are no longer than the data allows.
#include <array>

#include "fuzz_support.hpp"
#include "iserkit/scsi/inquiry.hpp"
#include "iserkit/scsi/lba_status.hpp"
#include "iserkit/scsi/sense.hpp"
#include "iserkit/scsi/third_party_copy.hpp"

using namespace iserkit;
using namespace iserkit::scsi;

namespace {

void sense(ConstByteSpan data) {
  auto s = decode_sense(data);
  if (!s) return;
  std::array<std::byte, max_sense_size_bytes> out{};
  const std::size_t n = encode_sense(*s, SenseFormat::descriptor, out);
  FUZZ_CHECK(n <= out.size());
  auto back = decode_sense(ConstByteSpan(out.data(), n));
  FUZZ_CHECK(back.has_value() && *back == *s);
  const std::size_t f = encode_sense(*s, SenseFormat::fixed, out);
  FUZZ_CHECK(f == fixed_sense_size_bytes);
  auto fixed = decode_sense(ConstByteSpan(out.data(), f));
  FUZZ_CHECK(fixed.has_value());
  FUZZ_CHECK(fixed->key == s->key && fixed->asc == s->asc && fixed->ascq == s->ascq && fixed->deferred == s->deferred);
  FUZZ_CHECK(fixed->sense_key_specific == s->sense_key_specific);
}

// The page encoders return the whole page, header included.
template <class Parse, class Encode>
void page_round_trip(ConstByteSpan data, Parse parse, Encode encode) {
  auto v = parse(data);
  if (!v) return;
  auto again = parse(encode(*v));
  FUZZ_CHECK(again.has_value() && *again == *v);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* raw, std::size_t size) {
  const ConstByteSpan data(reinterpret_cast<const std::byte*>(raw), size);
  sense(data);

  if (auto inquiry = parse_standard_inquiry(data)) (void)encode_standard_inquiry(*inquiry);
  for (std::uint8_t page : {vpd::supported_pages, vpd::unit_serial_number, vpd::device_identification,
                            vpd::block_limits, vpd::block_device_characteristics, vpd::logical_block_provisioning}) {
    if (auto payload = vpd_payload(data, page)) {
      FUZZ_CHECK(payload->size() <= data.size());
      FUZZ_CHECK(payload->empty() || (payload->data() >= data.data() &&
                                      payload->data() + payload->size() <= data.data() + data.size()));
    }
  }
  (void)parse_supported_vpd_pages(data);
  (void)parse_unit_serial_number(data);
  if (auto designators = parse_device_identification(data)) {
    auto again = parse_device_identification(encode_vpd_page(vpd::device_identification, encode_designators(*designators)));
    FUZZ_CHECK(again.has_value() && *again == *designators);
  }
  page_round_trip(data, parse_block_limits, encode_block_limits);
  page_round_trip(data, parse_block_device_characteristics,
                  encode_block_device_characteristics);
  page_round_trip(data, parse_logical_block_provisioning,
                  encode_logical_block_provisioning);
  page_round_trip(data, parse_third_party_copy_vpd, encode_third_party_copy_vpd);

  (void)parse_read_capacity10(data);
  (void)parse_read_capacity16(data);
  if (auto luns = parse_report_luns(data)) {
    FUZZ_CHECK(8 + luns->size() * 8 <= data.size());
    auto again = parse_report_luns(encode_report_luns(*luns));
    FUZZ_CHECK(again.has_value() && *again == *luns);
  }
  (void)report_luns_full_size(data);
  // MODE SENSE (6) and (10) headers (DPOFUA, WP) and GET LBA STATUS data: peer bytes the
  // initiator reads at LUN open and for NBD BLOCK_STATUS.
  (void)parse_mode_parameter_header(data, false);
  (void)parse_mode_parameter_header(data, true);
  if (auto descriptors = parse_lba_status(data)) FUZZ_CHECK(8 + descriptors->size() * 16 <= data.size());
  return 0;
}
