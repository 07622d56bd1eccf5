// What a datamover is and can do (Datamover::capabilities()), as a value: the session engines and
// their data phases are chosen from it without including the Datamover interface (and Asio).
#pragma once

#include <cstdint>

namespace iserkit::datamover {

/// Which wire a datamover drives.
enum class Transport { tcp, iser };

/// What a datamover can do beyond Send_Control.
struct Capabilities {
  /// Put_Data/Get_Data move the payload by RDMA (iSER): no Data-In, R2T or solicited Data-Out PDUs
  /// on the wire (RFC 7145 §7.3); buffers must come from buffer_pool() (registered memory).
  bool rdma_data = false;
  /// CRC32C digests can be used (TCP only; RFC 7145 §6.1 makes them irrelevant on iSER).
  bool digests = true;
  /// The largest data transfer one SCSI command should carry over this connection, bytes; 0 = no
  /// limit of the transport's own (iSER: IserOptions::max_transfer_bytes, sized to what the
  /// peer's RDMA buffers take per command).
  std::uint32_t max_transfer_bytes = 0;
  /// The largest data transfer one SCSI command should carry when the target states no MAXIMUM
  /// TRANSFER LENGTH (Block Limits VPD), bytes; 0 = none (the target's silence means no limit).
  /// iSER: IserOptions::unstated_max_transfer_bytes, because targets size their RDMA buffers per
  /// command without saying so (tgtd: 512 KiB).
  std::uint32_t unstated_max_transfer_bytes = 0;
  /// The peer reads and writes a command's buffers by itself (RDMA to the STags of its TaskData):
  /// a command given up before its response (a timeout) leaves its buffer exposed to the peer
  /// until the connection is closed.
  bool exposes_task_buffers = false;
};

}  // namespace iserkit::datamover
