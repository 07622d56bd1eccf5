// The initiator's per-command buffer descriptor (TaskData) and the per-command STag lease it may
// hold: made by Datamover::prepare_task_data(), read only by the datamover. The session engine
// carries a pointer to it (ScsiSubmission::task_data → PduOut::task_data) without including this
// header. No Asio.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <utility>

#include "iserkit/common/buffer.hpp"
#include "iserkit/common/result.hpp"

namespace iserkit::datamover {

/// Who gives back a per-command STag (iSER: a memory window bound over the registered pool for one
/// command, RFC 7145 §9.2): release_stag() is called once when the command's TaskData ends, on
/// the datamover's executor. The iSER connection invalidates the window then (Local Invalidate)
/// unless the peer already did (Send with Invalidate).
class StagOwner {
 public:
  /// `slot` is the owner's own index of the window. `answered`: the command ended with its SCSI
  /// Response (TaskData::finish() ran), so a target that follows the protocol is done with the
  /// window; false when it ended otherwise (timeout, abort, a lost connection), when the target may
  /// still be working on it.
  virtual void release_stag(std::uint32_t slot, bool answered) noexcept = 0;

 protected:
  ~StagOwner() = default;
};

/// A held per-command STag: calls StagOwner::release_stag() once, when destroyed or assigned
/// over. Move-only; costs no allocation (the owner pointer shares its owner's control block).
class StagLease {
 public:
  StagLease() = default;
  StagLease(std::shared_ptr<StagOwner> owner, std::uint32_t slot) noexcept : owner_(std::move(owner)), slot_(slot) {}
  StagLease(StagLease&& o) noexcept : owner_(std::move(o.owner_)), slot_(o.slot_), answered_(o.answered_) {}
  StagLease& operator=(StagLease&& o) noexcept {
    if (this != &o) {
      reset();
      owner_ = std::move(o.owner_);
      slot_ = o.slot_;
      answered_ = o.answered_;
    }
    return *this;
  }
  StagLease(const StagLease&) = delete;
  StagLease& operator=(const StagLease&) = delete;
  ~StagLease() { reset(); }
  void reset() noexcept {
    if (auto owner = std::move(owner_)) owner->release_stag(slot_, std::exchange(answered_, false));
  }
  /// The command ended with its SCSI Response: release_stag() will say so.
  void set_answered() noexcept { answered_ = true; }
  explicit operator bool() const noexcept { return static_cast<bool>(owner_); }

 private:
  std::shared_ptr<StagOwner> owner_;
  std::uint32_t slot_ = 0;
  bool answered_ = false;
};

/// The data buffers of one SCSI command as the connection's datamover prepared them
/// (Datamover::prepare_task_data()). Opaque to the initiator's session: it places Data-In into
/// data_in() and sends immediate data and Data-Out from data_out(), points the SCSI Command PDU at
/// the descriptor (PduOut::task_data), and calls finish() when the command completed.
/// - TCP (direct()): the caller's spans as they are; no registration, no allocation, no copy.
/// - iSER (registered()): the registered views whose STags go in the iSER header (RFC 7145 §9.2),
///   over the caller's own bytes when they lie in the connection's registered pool (zero copy),
///   else over a registered bounce buffer with one counted copy (copy_counter.hpp): the write data
///   into it at preparation, the read data out of it at finish().
/// Move-only. The caller's spans must stay valid until finish() (or the descriptor's destruction);
/// the descriptor must not move while a PDU points at it.
class TaskData {
 public:
  /// No data (a command without a data phase).
  TaskData() = default;
  TaskData(TaskData&&) noexcept = default;
  TaskData& operator=(TaskData&&) noexcept = default;
  TaskData(const TaskData&) = delete;
  TaskData& operator=(const TaskData&) = delete;
  ~TaskData() = default;

  /// For datamovers whose peer does not touch the initiator's memory (TCP): the caller's spans,
  /// `data_in` (read buffer, bytes) and `data_out` (write buffer, bytes), used as they are.
  [[nodiscard]] static TaskData direct(std::span<std::byte> data_in, std::span<const std::byte> data_out) noexcept;

  /// For RDMA datamovers (iSER, RFC 7145 §9.2): registered views of `data_in` / `data_out` from
  /// `pool` (BufferPool::registration()); a span outside the pool's registered memory is replaced
  /// by a bounce buffer leased from `pool` (the write data is copied into it now, counted).
  /// Errors: std::errc::not_enough_memory when the pool cannot lease a bounce buffer (nothing was
  /// copied, the caller's spans are untouched).
  [[nodiscard]] static Result<TaskData> registered(BufferPool& pool, std::span<std::byte> data_in,
                                                   std::span<const std::byte> data_out);

  /// Where the read data lands (the caller's span, or the bounce buffer), bytes.
  [[nodiscard]] std::span<std::byte> data_in() const noexcept { return data_in_; }
  /// Where the write data is sent from (the caller's span, or the bounce buffer), bytes.
  [[nodiscard]] std::span<const std::byte> data_out() const noexcept { return data_out_; }
  /// For the datamover: the registered memory the peer RDMA-writes the read data into (its rkey is
  /// the Read STag, its address the Base Offset); nullopt when none (TCP, or no read data).
  [[nodiscard]] const std::optional<Buffer>& read_region() const noexcept { return read_region_; }
  /// For the datamover: the registered memory the peer RDMA-reads the write data from; nullopt
  /// when none.
  [[nodiscard]] const std::optional<Buffer>& write_region() const noexcept { return write_region_; }
  /// For the iSER datamover, when the SCSI Command is sent: the peer reaches the read region
  /// (`read` true) or the write region through the per-command STag `stag` (a memory window bound
  /// over it) instead of the pool's rkey; `lease` gives that STag back when this descriptor ends.
  /// const because the command's PDU points at a const descriptor: the binding is the datamover's
  /// bookkeeping, not the caller's data. No-op without that region.
  void bind_stag(bool read, std::uint32_t stag, StagLease lease) const noexcept {
    if (!(read ? read_region_ : write_region_)) return;
    (read ? binding_.read_stag : binding_.write_stag) = stag;
    (read ? binding_.read_lease : binding_.write_lease) = std::move(lease);
  }
  /// True when bind_stag() gave every region of this descriptor a per-command STag.
  [[nodiscard]] bool stags_bound() const noexcept {
    return (!read_region_ || binding_.read_lease) && (!write_region_ || binding_.write_lease);
  }
  /// The STag the iSER header carries for the read region: the per-command one when bound, else
  /// the region's rkey; 0 without a read region.
  [[nodiscard]] std::uint32_t read_stag() const noexcept {
    return binding_.read_lease ? binding_.read_stag : (read_region_ ? read_region_->rkey : 0);
  }
  /// The STag for the write region, as read_stag().
  [[nodiscard]] std::uint32_t write_stag() const noexcept {
    return binding_.write_lease ? binding_.write_stag : (write_region_ ? write_region_->rkey : 0);
  }
  /// True when a bounce buffer stands in for one of the caller's spans.
  [[nodiscard]] bool bounced() const noexcept { return static_cast<bool>(bounce_in_) || static_cast<bool>(bounce_out_); }

  /// Ends the command after it completed with `data_in_bytes` bytes of read data (the read
  /// buffer's size less an underflow residual; clamped to it): a bounced read copies them into the
  /// caller's span (counted); otherwise nothing happens. Call at most once; a command that failed
  /// is not finished, so its caller's read buffer is left as the transport left it. A finished
  /// command's per-command STags are given back as answered (StagOwner::release_stag()).
  void finish(std::size_t data_in_bytes) noexcept;

 private:
  std::span<std::byte> data_in_;
  std::span<const std::byte> data_out_;
  std::optional<Buffer> read_region_;
  std::optional<Buffer> write_region_;
  PooledBuffer bounce_in_;        // registered stand-in for the caller's read span
  PooledBuffer bounce_out_;       // registered copy of the caller's write span
  std::span<std::byte> caller_in_;  // where finish() copies bounced read data
  // Declared last: the STags are given back (invalidated) before the bounce buffers go back to
  // the pool.
  struct Binding {
    std::uint32_t read_stag = 0;
    std::uint32_t write_stag = 0;
    StagLease read_lease;
    StagLease write_lease;
  };
  mutable Binding binding_;
};

}  // namespace iserkit::datamover
