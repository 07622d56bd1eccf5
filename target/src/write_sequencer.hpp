// WriteSequencer: the target side of one write task's data transfer (RFC 7143 §3.2.4.2 immediate and
// unsolicited data, §11.8 R2T, §11.7 Data-Out). Sans-I/O: it accounts for immediate data, accepts
// or refuses each Data-Out (TTT, DataSN, BufferOffset, length, in order as DataPDUInOrder=Yes and
// DataSequenceInOrder=Yes require), and hands out the R2Ts still needed, at most MaxOutstandingR2T
// at a time and each at most MaxBurstLength bytes.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include <boost/container/small_vector.hpp>

#include "iserkit/common/result.hpp"
#include "iserkit/iscsi/pdu.hpp"

namespace iserkit::target {

/// What a write task's data phase looks like, from the command PDU and the session parameters.
struct WriteSequencerParams {
  /// Bytes the SCSI layer needs (solicited with R2Ts up to here); 0 when nothing is to be solicited.
  std::uint32_t needed_bytes = 0;
  /// The command's Expected Data Transfer Length (bytes).
  std::uint32_t expected_data_transfer_length = 0;
  /// Bytes of immediate data in the command PDU.
  std::uint32_t immediate_bytes = 0;
  /// The command's F bit was 0: unsolicited Data-Out PDUs follow (RFC 7143 §11.3.1).
  bool unsolicited_follows = false;
  std::uint32_t first_burst_length = 65536;  ///< bytes (negotiated)
  std::uint32_t max_burst_length = 262144;   ///< bytes (negotiated)
  std::uint32_t max_outstanding_r2t = 1;     ///< negotiated
};

/// An R2T to send (RFC 7143 §11.8).
struct R2tRequest {
  iscsi::Ttt ttt{0};
  std::uint32_t r2t_sn = 0;
  std::uint32_t buffer_offset = 0;                 ///< bytes
  std::uint32_t desired_data_transfer_length = 0;  ///< bytes
};

/// Why a Data-Out was refused (the caller answers with a Reject and fails the task).
enum class DataOutError : std::uint8_t {
  unknown_ttt,          ///< TTT names no outstanding R2T of this task
  unexpected_unsolicited,  ///< unsolicited Data-Out when none may follow
  wrong_data_sn,        ///< DataSN not the next in its sequence
  wrong_offset,         ///< BufferOffset not the next byte of its sequence (DataPDUInOrder=Yes)
  too_long,             ///< runs past the R2T's desired length or the unsolicited limit
};

/// Sequencer of one write task. Not thread-safe (lives on the session's thread).
class WriteSequencer {
 public:
  explicit WriteSequencer(const WriteSequencerParams& params) noexcept;

  /// Checks a Data-Out header carrying `length` bytes and, if valid, records the bytes as received.
  /// Returns the buffer offset where the bytes go.
  Result<std::uint32_t> accept(const iscsi::DataOut& header, std::uint32_t length) noexcept;
  /// Like accept(), with the reason for a refusal.
  std::optional<DataOutError> check_and_record(const iscsi::DataOut& header, std::uint32_t length) noexcept;

  /// The next R2T to send, using `ttt` for it, or nullopt when none may be sent now (unsolicited
  /// data still arriving, MaxOutstandingR2T reached, or everything solicited).
  std::optional<R2tRequest> next_r2t(iscsi::Ttt ttt) noexcept;

  /// True when every byte the task needs has arrived and no sequence is still open.
  [[nodiscard]] bool complete() const noexcept;
  /// True when the unsolicited part (immediate data plus unsolicited Data-Out) is over.
  [[nodiscard]] bool unsolicited_done() const noexcept { return !unsolicited_open_; }
  /// Bytes received so far that fall inside [0, needed_bytes).
  [[nodiscard]] std::uint32_t received_needed_bytes() const noexcept;
  /// Bytes of unsolicited data (immediate + unsolicited Data-Out) received.
  [[nodiscard]] std::uint32_t unsolicited_bytes() const noexcept { return unsolicited_received_; }
  /// The unsolicited limit: min(EDTL, FirstBurstLength) (RFC 7143 §13.14).
  [[nodiscard]] std::uint32_t unsolicited_limit() const noexcept { return unsolicited_limit_; }
  /// Number of R2Ts sent so far (for ExpDataSN in the SCSI Response, RFC 7143 §11.4.6).
  [[nodiscard]] std::uint32_t r2ts_sent() const noexcept { return next_r2t_sn_; }
  /// R2Ts sent and not yet fully answered.
  [[nodiscard]] std::size_t outstanding_r2ts() const noexcept { return outstanding_.size(); }

 private:
  struct Outstanding {
    iscsi::Ttt ttt;
    std::uint32_t offset;
    std::uint32_t length;
    std::uint32_t received = 0;
    std::uint32_t next_data_sn = 0;
  };

  WriteSequencerParams params_;
  std::uint32_t unsolicited_limit_ = 0;
  std::uint32_t unsolicited_received_ = 0;
  std::uint32_t unsolicited_data_sn_ = 0;
  bool unsolicited_open_ = false;
  std::uint32_t solicit_offset_ = 0;  // next byte to ask for with an R2T
  std::uint32_t solicited_received_ = 0;
  std::uint32_t next_r2t_sn_ = 0;
  // In place up to 4 (MaxOutstandingR2T is 1 by default): a task's R2T bookkeeping allocates
  // nothing in the common case (issue 23 item 4: heap allocations per request).
  boost::container::small_vector<Outstanding, 4> outstanding_;
};

}  // namespace iserkit::target
