// LogicalUnit: one SCSI logical unit of the target (SAM-5 §4.6.4): a block backend plus the
// identity and limits the device server reports in INQUIRY (SPC-5 §6.6), the VPD pages (SPC-5 §7.7,
// SBC-4 §6.6) and MODE SENSE (SPC-5 §7.5). Immutable once built but for its capacity, which follows
// a resizable backend (refresh_capacity()); shared between sessions.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "iserkit/target/block_backend.hpp"
#include "iserkit/target/command_plan.hpp"
#include "iserkit/target/lu_identity.hpp"

namespace iserkit::target {

/// What INQUIRY and VPD 0x80/0x83 report for a logical unit (docs/lu-identity.md).
struct LogicalUnitIdentity {
  std::string vendor = "ISERKIT";        ///< T10 vendor id, at most 8 ASCII characters
  std::string product = "VIRTUAL-DISK";  ///< at most 16 ASCII characters
  std::string revision = "0001";         ///< at most 4 ASCII characters
  /// The logical unit's name, from which the serial and the NAA designator derive (lu_identity.hpp:
  /// unit_serial_from_uuid, naa_from_uuid). nullopt: the name-based UUID of vendor, product and
  /// serial (so a unit given only a serial still gets a stable NAA); the target always sets it.
  std::optional<Uuid> uuid;
  /// Unit serial number (VPD 0x80), printable ASCII (check_unit_serial). It is also the vendor
  /// specific part of the T10 vendor ID based designator. Empty: derived from `uuid`.
  std::string serial;
  /// An NAA designator's bytes (8 bytes of NAA 2h/3h/5h or 16 of NAA 6h; parse_naa_designator) for
  /// VPD 0x83. Empty: the NAA IEEE Registered Extended designator derived from `uuid`.
  std::vector<std::uint8_t> naa;
};

/// Options of a logical unit beyond its backend.
struct LogicalUnitOptions {
  LogicalUnitIdentity identity;
  /// Refuse writes even if the backend allows them (reported as WP in MODE SENSE; writes fail with
  /// DATA PROTECT / WRITE PROTECTED).
  bool read_only = false;
  /// Largest READ/WRITE in bytes (VPD 0xb0 MAXIMUM TRANSFER LENGTH, rounded down to blocks);
  /// larger commands get INVALID FIELD IN CDB. 0 = no limit.
  /// 32 MiB: 65536 blocks of 512 bytes in one command, as conformance tools send (libiscsi's
  /// WRITE SAME tests write 64 Ki blocks with one WRITE (16)).
  std::uint32_t max_transfer_bytes = 32u << 20;
  /// Most UNMAP block descriptors in one command (VPD 0xb0).
  std::uint32_t max_unmap_descriptors = 256;
  /// Most blocks one UNMAP or WRITE SAME may cover (VPD 0xb0, in logical blocks); 0 = no limit.
  /// 1 Mi blocks (512 MiB at 512-byte blocks): large enough that initiators rarely split, and
  /// within what conformance tools consider a sane explicit limit (libiscsi: ≤ 2^20).
  std::uint32_t max_unmap_blocks = 0x100000;
  /// Pace of a sanitize operation (SANITIZE, SBC-4 §5.30) in bytes of the medium per second
  /// (OVERWRITE: bytes written per pass; BLOCK ERASE: bytes deallocated); 0 = as fast as the
  /// backend goes. A background sanitize of a large LUN then leaves the storage (a shared disk, a
  /// Ceph pool) to the other LUNs' I/O; it also makes the in-progress state observable in tests.
  std::uint64_t sanitize_bytes_per_second = 0;
};

/// A logical unit: backend + identity + limits. Thread-safe: immutable after construction but for
/// the block count, an atomic that refresh_capacity() updates.
class LogicalUnit {
 public:
  /// Builds a logical unit over `backend` (must not be null).
  LogicalUnit(std::shared_ptr<BlockBackend> backend, LogicalUnitOptions options);

  /// The backend (for execute; the SCSI layer is the only user).
  [[nodiscard]] BlockBackend& backend() const noexcept { return *backend_; }
  [[nodiscard]] const LogicalUnitOptions& options() const noexcept { return options_; }
  /// Logical block size in bytes.
  [[nodiscard]] std::uint32_t block_size_bytes() const noexcept { return block_size_; }
  /// Number of logical blocks (capacity / block size), as last refreshed.
  [[nodiscard]] std::uint64_t block_count() const noexcept { return block_count_.load(std::memory_order_acquire); }
  /// Takes the backend's current size (BlockBackend::size_bytes(), rounded down to blocks) as the
  /// capacity. Returns true if it changed (the caller raises CAPACITY DATA HAS CHANGED, SBC-4
  /// §4.6). Thread-safe; callers that must raise the unit attention once serialize the calls
  /// (the dispatcher holds the LU's mutex).
  bool refresh_capacity() noexcept;
  /// True if writes are refused (option or backend).
  [[nodiscard]] bool read_only() const noexcept { return read_only_; }
  /// True if UNMAP / WRITE SAME with UNMAP are offered (backend can discard, LUN writable).
  [[nodiscard]] bool thin() const noexcept { return thin_; }
  /// The logical unit's name (LogicalUnitIdentity::uuid, or the one derived when it had none).
  [[nodiscard]] const Uuid& uuid() const noexcept { return uuid_; }
  /// The unit serial number reported in VPD 0x80 and in the T10 vendor ID based designator
  /// (derived from uuid() if the identity had none).
  [[nodiscard]] const std::string& serial() const noexcept { return serial_; }
  /// The NAA designator reported in VPD 0x83: 16 bytes of NAA 6h derived from uuid(), or the
  /// configured one (8 or 16 bytes).
  [[nodiscard]] std::span<const std::uint8_t> naa() const noexcept { return naa_; }
  /// Max transfer length in logical blocks (0 = no limit).
  [[nodiscard]] std::uint32_t max_transfer_blocks() const noexcept { return max_transfer_blocks_; }
  /// The unit's counters; mutable through a const unit (atomics, thread-safe).
  [[nodiscard]] LogicalUnitStats& stats() const noexcept { return stats_; }

 private:
  std::shared_ptr<BlockBackend> backend_;
  LogicalUnitOptions options_;
  std::uint32_t block_size_ = 512;
  std::atomic<std::uint64_t> block_count_{0};
  bool read_only_ = false;
  bool thin_ = false;
  Uuid uuid_;
  std::string serial_;
  std::vector<std::uint8_t> naa_;
  std::uint32_t max_transfer_blocks_ = 0;
  mutable LogicalUnitStats stats_;
};

}  // namespace iserkit::target
