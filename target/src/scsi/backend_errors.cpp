// The one table that turns a backend error (an errno in std::generic_category(), the BlockBackend
// contract) into the SCSI status and sense data the device server returns (SPC-5 §4.4, sense keys
// table 49; additional sense codes Annex D). Every backend goes through it: io_uring's errnos and
// librbd's negative errnos alike.
//
// How the entries were chosen (tcmu-runner's rbd handler + libtcmu's status table and SPDK's
// bdev_rbd + scsi_bdev were read for comparison; neither was copied):
// - EIO: the storage failed the data → MEDIUM ERROR with UNRECOVERED READ ERROR (11h/00h) or
//   WRITE ERROR (0Ch/00h), as both peers do for a generic read/write failure.
// - ENOSPC, EDQUOT: a thin LU ran out of space (a full Ceph pool answers -ENOSPC or -EDQUOT for a
//   pool quota) → DATA PROTECT, SPACE ALLOCATION FAILED WRITE PROTECT (27h/07h), the code SBC-4
//   §4.7.3.7 gives for thin provisioning exhaustion; Linux turns it into ENOSPC.
// - EROFS: the image or file is read-only → DATA PROTECT, WRITE PROTECTED (27h/00h).
// - EPERM, EACCES: the cluster refused the client (caps without write) → DATA PROTECT, WRITE
//   PROTECTED as well: retrying cannot help and it is no media fault.
// - ESHUTDOWN (= Ceph's EBLOCKLISTED; librados defines it so), ENOTCONN: this gateway was fenced
//   or lost its cluster → NOT READY, LOGICAL UNIT NOT ACCESSIBLE, TARGET PORT IN STANDBY STATE
//   (04h/0Bh), as tcmu-runner reports a fenced (blocklisted) client: a multipath initiator then
//   uses another gateway instead of failing the I/O; SPDK only fails the I/O.
// - ETIMEDOUT, EAGAIN, EBUSY, ENOMEM: transient (an OSD op timed out, librbd's queue is full) →
//   BUSY status without sense, as tcmu-runner answers a timed-out librbd call: the initiator
//   retries (ours with back-off, Linux through the mid layer). Writes are idempotent, so a retry
//   of one that did land is harmless.
// - EILSEQ: librbd's compare-and-write mismatch → MISCOMPARE, MISCOMPARE DURING VERIFY OPERATION
//   (1Dh/00h); the handler that knows the offset fills INFORMATION (SBC-4 §5.3).
// - EINVAL: the SCSI layer checked every field and range before the backend saw the command, so
//   the one way left is a range that the medium lost meanwhile (an RBD image or file shrank under
//   a command in flight) → ILLEGAL REQUEST, LBA OUT OF RANGE (21h/00h). tcmu-runner answers
//   INVALID FIELD IN CDB, which would blame a CDB we accepted.
// - ENOENT, ENXIO, ENODEV: the image or device is gone → NOT READY, MEDIUM NOT PRESENT (3Ah/00h).
// - EOPNOTSUPP: the backend cannot do what was asked → ILLEGAL REQUEST, INVALID COMMAND
//   OPERATION CODE (20h/00h).
// - anything else → HARDWARE ERROR, INTERNAL TARGET FAILURE (44h/00h): an error we cannot name
//   is not evidence of bad media.
#include <array>
#include <atomic>
#include <cerrno>

#include "scsi/handlers.hpp"

namespace iserkit::target::detail {

namespace {

struct Entry {
  int error;
  scsi::Status status;
  scsi::SenseKey key;
  scsi::AscPair read_asc;
  scsi::AscPair write_asc;
};

constexpr scsi::AscPair port_in_standby{0x04, 0x0b};
constexpr scsi::AscPair unrecovered_read_error = scsi::asc::unrecovered_read_error;

using K = scsi::SenseKey;
using S = scsi::Status;
namespace asc = scsi::asc;

constexpr std::array table{
    Entry{EIO, S::check_condition, K::medium_error, unrecovered_read_error, asc::write_error},
    Entry{ENOSPC, S::check_condition, K::data_protect, asc::space_allocation_failed_write_protect,
          asc::space_allocation_failed_write_protect},
    Entry{EDQUOT, S::check_condition, K::data_protect, asc::space_allocation_failed_write_protect,
          asc::space_allocation_failed_write_protect},
    Entry{EROFS, S::check_condition, K::data_protect, asc::write_protected, asc::write_protected},
    Entry{EPERM, S::check_condition, K::data_protect, asc::write_protected, asc::write_protected},
    Entry{EACCES, S::check_condition, K::data_protect, asc::write_protected, asc::write_protected},
    Entry{ESHUTDOWN, S::check_condition, K::not_ready, port_in_standby, port_in_standby},
    Entry{ENOTCONN, S::check_condition, K::not_ready, port_in_standby, port_in_standby},
    Entry{ETIMEDOUT, S::busy, K::no_sense, asc::no_additional_sense, asc::no_additional_sense},
    Entry{EAGAIN, S::busy, K::no_sense, asc::no_additional_sense, asc::no_additional_sense},
    Entry{EBUSY, S::busy, K::no_sense, asc::no_additional_sense, asc::no_additional_sense},
    Entry{ENOMEM, S::busy, K::no_sense, asc::no_additional_sense, asc::no_additional_sense},
    Entry{EILSEQ, S::check_condition, K::miscompare, asc::miscompare_during_verify, asc::miscompare_during_verify},
    Entry{EINVAL, S::check_condition, K::illegal_request, asc::lba_out_of_range, asc::lba_out_of_range},
    Entry{ENOENT, S::check_condition, K::not_ready, asc::medium_not_present, asc::medium_not_present},
    Entry{ENXIO, S::check_condition, K::not_ready, asc::medium_not_present, asc::medium_not_present},
    Entry{ENODEV, S::check_condition, K::not_ready, asc::medium_not_present, asc::medium_not_present},
    Entry{EOPNOTSUPP, S::check_condition, K::illegal_request, asc::invalid_command_operation_code,
          asc::invalid_command_operation_code},
};

constexpr std::array<const char*, table.size() + 1> error_names = {
    "EIO", "ENOSPC", "EDQUOT", "EROFS", "EPERM", "EACCES", "ESHUTDOWN", "ENOTCONN", "ETIMEDOUT", "EAGAIN",
    "EBUSY", "ENOMEM", "EILSEQ", "EINVAL", "ENOENT", "ENXIO", "ENODEV", "EOPNOTSUPP", "other"};

// Backend errors seen, by table entry (the last: any other error). Process-wide, relaxed: every
// LU of every thread comes through here, and a count per error is all the metrics need.
std::array<std::atomic<std::uint64_t>, table.size() + 1> error_counts{};

}  // namespace

ScsiOutcome backend_error_outcome(std::error_code ec, bool writing) noexcept {
  if (ec.category() == std::generic_category() || ec.category() == std::system_category()) {
    for (std::size_t i = 0; i < table.size(); ++i) {
      const auto& e = table[i];
      if (e.error != ec.value()) continue;
      error_counts[i].fetch_add(1, std::memory_order_relaxed);
      if (e.status != S::check_condition) return ScsiOutcome{e.status, std::nullopt, 0};
      return ScsiOutcome::check_condition(scsi::SenseData::make(e.key, writing ? e.write_asc : e.read_asc));
    }
  }
  error_counts[table.size()].fetch_add(1, std::memory_order_relaxed);
  return ScsiOutcome::check_condition(scsi::SenseData::make(K::hardware_error, asc::internal_target_failure));
}

ScsiOutcome outcome_of(const Result<void>& r, bool writing) noexcept {
  if (r) return ScsiOutcome::good();
  return backend_error_outcome(r.error(), writing);
}

}  // namespace iserkit::target::detail

namespace iserkit::target {

std::vector<BackendErrorCount> backend_error_counts() {
  std::vector<BackendErrorCount> out;
  for (std::size_t i = 0; i < detail::error_names.size(); ++i)
    out.push_back({detail::error_names[i], detail::error_counts[i].load(std::memory_order_relaxed)});
  return out;
}

}  // namespace iserkit::target
