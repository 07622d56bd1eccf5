// EXTENDED COPY (LID1) from the initiator: the probe, one command, and which errors mean "the copy
// manager will not do it". SPC-4 §6.4, §7.8.17; SPC-5 §6.6.2, §7.7.6. See copy.hpp.
#include "iserkit/initiator/copy.hpp"

#include "iserkit/common/errors.hpp"
#include "iserkit/initiator/errors.hpp"

namespace iserkit::initiator {
namespace {

// The first NAA designator of the logical unit itself (association 0), or empty.
std::vector<std::byte> naa_of(const std::vector<scsi::Designator>& designators) {
  for (const auto& d : designators)
    if (d.type == scsi::DesignatorType::naa && d.association == scsi::Association::logical_unit) return d.value;
  return {};
}

}  // namespace

Awaitable<ExtendedCopyProbe> probe_extended_copy(LunHandle& source, LunHandle& destination, std::uint64_t cap_bytes) {
  using Reason = tl::unexpected<std::string>;
  const std::uint32_t bs = source.info().capacity.block_size_bytes;
  if (bs == 0 || bs != destination.info().capacity.block_size_bytes)
    co_return Reason("the logical block sizes differ (source " + std::to_string(bs) + ", destination " +
                     std::to_string(destination.info().capacity.block_size_bytes) + ")");
  auto inquiry = co_await source.inquiry();
  if (!inquiry) co_return Reason("INQUIRY of the source failed: " + inquiry.error().message());
  // SPC-5 §6.6.2: 3PC = 1 means the device server supports third-party copy commands.
  if (!inquiry->third_party_copy) co_return Reason("the source does not report third-party copy (INQUIRY 3PC = 0)");
  auto limits = co_await source.third_party_copy_limits();
  if (!limits) co_return Reason("the source has no usable Third-party Copy VPD page (0x8f): " + limits.error().message());
  if (!limits->extended_copy_lid1) co_return Reason("the source's VPD 0x8f does not list EXTENDED COPY (LID1)");
  if (!limits->block_to_block || !limits->identification_cscd)
    co_return Reason("the source's VPD 0x8f lacks block-to-block segments (02h) or identification CSCD descriptors (E4h)");
  ExtendedCopyPlan plan;
  plan.block_size_bytes = bs;
  plan.limits = *limits;
  plan.command = scsi::copy_command_limits(*limits, bs, cap_bytes);
  if (plan.command.max_command_blocks() == 0) co_return Reason("the source's copy limits leave no room for a segment");
  auto source_ids = co_await source.device_identification();
  if (!source_ids) co_return Reason("VPD 0x83 of the source failed: " + source_ids.error().message());
  auto destination_ids = co_await destination.device_identification();
  if (!destination_ids) co_return Reason("VPD 0x83 of the destination failed: " + destination_ids.error().message());
  plan.source_naa = naa_of(*source_ids);
  plan.destination_naa = naa_of(*destination_ids);
  if (plan.source_naa.empty() || plan.destination_naa.empty())
    co_return Reason("a logical unit has no NAA designator in VPD 0x83 to name it in a CSCD descriptor");
  co_return plan;
}

Awaitable<Result<void>> extended_copy_blocks(LunHandle& source, const ExtendedCopyPlan& plan, std::uint64_t source_lba,
                                             std::uint64_t destination_lba, std::uint64_t blocks,
                                             std::chrono::milliseconds timeout) {
  if (blocks == 0 || blocks > plan.command.max_command_blocks()) co_return fail(errc::invalid_argument);
  scsi::ExtendedCopyList list;
  list.source_naa = plan.source_naa;
  list.destination_naa = plan.destination_naa;
  list.block_size_bytes = plan.block_size_bytes;
  list.segments = scsi::split_copy_segments(source_lba, destination_lba, blocks, plan.command);
  const auto bytes = scsi::encode_extended_copy_list(list);
  co_return co_await source.extended_copy(bytes, timeout);
}

bool extended_copy_refused(std::error_code ec) noexcept {
  const auto sense = sense_of(ec);
  if (!sense) return false;
  if (sense->key == scsi::SenseKey::illegal_request) return true;
  // SPC-4 Annex D: 08/04 UNREACHABLE COPY TARGET, 0D/02 COPY TARGET DEVICE NOT REACHABLE.
  return sense->key == scsi::SenseKey::copy_aborted &&
         ((sense->asc == 0x08 && sense->ascq == 0x04) || (sense->asc == 0x0d && sense->ascq == 0x02));
}

}  // namespace iserkit::initiator
