// The registered views of one command's buffers for iSER (RFC 7145 §9.2: the Read/Write STag and
// Base Offset the target RDMA-writes into / RDMA-reads from). When the caller's span lies in the
// session's registered pool (BufferPool::registration) it is advertised as is: zero copy. Otherwise
// a registered bounce buffer is leased from that pool and the payload is copied into it before a
// write or out of it after a read; those copies are counted (copy_counter.hpp).
// Layer 3 glue for the initiator session; sans-I/O.
#pragma once

#include <algorithm>

#include "iserkit/common/buffer.hpp"
#include "iserkit/common/copy_counter.hpp"
#include "iserkit/initiator/session.hpp"

namespace iserkit::initiator {

class RdmaBuffers {
 public:
  /// Points req.read_buffers / req.write_buffers at registered memory covering req.data_in /
  /// req.data_out (and redirects the data spans to a bounce buffer when needed). Throws
  /// std::bad_alloc when the pool cannot provide a bounce buffer.
  void prepare(BufferPool& pool, CommandRequest& req) {
    if (!req.data_in.empty() && req.read_buffers == nullptr) {
      if (auto b = pool.registration(req.data_in)) {
        read_ = {*b};
      } else {
        bounce_ = pool.allocate(req.data_in.size());
        caller_read_ = req.data_in;
        req.data_in = bounce_.bytes();
        read_ = {bounce_.buffer()};
      }
      req.read_buffers = &read_;
    }
    if (!req.data_out.empty() && req.write_buffers == nullptr) {
      if (auto b = pool.registration(req.data_out)) {
        write_ = {*b};
      } else {
        bounce_ = pool.allocate(req.data_out.size());
        copy_payload(bounce_.data(), req.data_out.data(), req.data_out.size());
        req.data_out = bounce_.bytes();
        write_ = {bounce_.buffer()};
      }
      req.write_buffers = &write_;
    }
  }

  /// After a successful read through a bounce buffer: copies the bytes the target transferred
  /// (the buffer size less an underflow residual) to the caller's span.
  void finish(const scsi::ScsiResult& result) {
    if (caller_read_.empty()) return;
    std::size_t n = caller_read_.size();
    if (!result.residual_overflow) n -= std::min<std::size_t>(n, result.residual_bytes);
    copy_payload(caller_read_.data(), bounce_.data(), n);
  }

 private:
  SgList read_;
  SgList write_;
  PooledBuffer bounce_;
  std::span<std::byte> caller_read_;
};

}  // namespace iserkit::initiator
