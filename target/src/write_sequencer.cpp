// WriteSequencer (RFC 7143 §3.2.4.2, §11.7, §11.8, §13.13-§13.17).
#include "write_sequencer.hpp"

#include <algorithm>

namespace iserkit::target {

WriteSequencer::WriteSequencer(const WriteSequencerParams& params) noexcept : params_(params) {
  // RFC 7143 §13.14: unsolicited data (immediate + unsolicited Data-Out) MUST NOT exceed
  // FirstBurstLength, nor, naturally, the Expected Data Transfer Length.
  unsolicited_limit_ = std::min(params.expected_data_transfer_length, params.first_burst_length);
  unsolicited_received_ = std::min(params.immediate_bytes, unsolicited_limit_);
  unsolicited_open_ = params.unsolicited_follows && unsolicited_received_ < unsolicited_limit_;
  solicit_offset_ = unsolicited_open_ ? 0 : unsolicited_received_;
  if (params_.max_outstanding_r2t == 0) params_.max_outstanding_r2t = 1;
  if (params_.max_burst_length == 0) params_.max_burst_length = 262144;
}

Result<std::uint32_t> WriteSequencer::accept(const iscsi::DataOut& header, std::uint32_t length) noexcept {
  const std::uint32_t offset = header.buffer_offset;
  if (check_and_record(header, length)) return fail(errc::protocol_error);
  return offset;
}

std::optional<DataOutError> WriteSequencer::check_and_record(const iscsi::DataOut& header,
                                                             std::uint32_t length) noexcept {
  const std::uint64_t end = std::uint64_t{header.buffer_offset} + length;
  if (header.ttt == iscsi::reserved_ttt) {
    // Unsolicited Data-Out (RFC 7143 §11.7.4: TTT is 0xffffffff for unsolicited data).
    if (!unsolicited_open_) return DataOutError::unexpected_unsolicited;
    // RFC 7143 §11.7.5: DataSN starts at 0 for the unsolicited sequence and counts up by one.
    if (header.data_sn != unsolicited_data_sn_) return DataOutError::wrong_data_sn;
    // RFC 7143 §13.18 (DataPDUInOrder=Yes): PDUs of a sequence arrive at increasing offsets.
    if (header.buffer_offset != unsolicited_received_) return DataOutError::wrong_offset;
    if (end > unsolicited_limit_) return DataOutError::too_long;
    ++unsolicited_data_sn_;
    unsolicited_received_ = static_cast<std::uint32_t>(end);
    if (header.final || unsolicited_received_ == unsolicited_limit_) {
      unsolicited_open_ = false;
      solicit_offset_ = unsolicited_received_;
    }
    return std::nullopt;
  }
  auto it = std::find_if(outstanding_.begin(), outstanding_.end(),
                         [&](const Outstanding& o) { return o.ttt == header.ttt; });
  if (it == outstanding_.end()) return DataOutError::unknown_ttt;
  // RFC 7143 §11.7.5: for solicited data DataSN starts at 0 for each R2T.
  if (header.data_sn != it->next_data_sn) return DataOutError::wrong_data_sn;
  if (header.buffer_offset != it->offset + it->received) return DataOutError::wrong_offset;
  if (end > std::uint64_t{it->offset} + it->length) return DataOutError::too_long;
  ++it->next_data_sn;
  it->received += length;
  solicited_received_ += length;
  if (it->received == it->length) outstanding_.erase(it);
  return std::nullopt;
}

std::optional<R2tRequest> WriteSequencer::next_r2t(iscsi::Ttt ttt) noexcept {
  if (unsolicited_open_) return std::nullopt;
  if (solicit_offset_ >= params_.needed_bytes) return std::nullopt;
  // RFC 7143 §13.17: no more than MaxOutstandingR2T R2Ts per task may be outstanding.
  if (outstanding_.size() >= params_.max_outstanding_r2t) return std::nullopt;
  // RFC 7143 §13.13: a solicited sequence carries at most MaxBurstLength bytes.
  const std::uint32_t length = std::min(params_.needed_bytes - solicit_offset_, params_.max_burst_length);
  R2tRequest r{.ttt = ttt, .r2t_sn = next_r2t_sn_++, .buffer_offset = solicit_offset_,
               .desired_data_transfer_length = length};
  outstanding_.push_back({.ttt = ttt, .offset = solicit_offset_, .length = length});
  solicit_offset_ += length;
  return r;
}

bool WriteSequencer::complete() const noexcept {
  return !unsolicited_open_ && outstanding_.empty() && solicit_offset_ >= params_.needed_bytes;
}

std::uint32_t WriteSequencer::received_needed_bytes() const noexcept {
  return std::min(unsolicited_received_, params_.needed_bytes) + solicited_received_;
}

}  // namespace iserkit::target
