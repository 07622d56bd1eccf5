// The sense → errno table (SPC-5 §4.4.8 sense keys, Annex D ASC/ASCQ; SAM-5 §5.3.1 status).
// One table, first match wins, ASC-specific rows before the sense-key catch-alls. The reasons:
// - Linux (drivers/scsi/scsi_lib.c, scsi_io_completion_action) maps DATA PROTECT 27/07 "thin
//   provisioning hard threshold reached" to BLK_STS_NOSPC (ENOSPC), RESERVATION CONFLICT to EBADE,
//   and everything it does not single out to EIO. We follow it there.
// - Where Linux says only "target error" (EREMOTEIO) we choose the errno a FUSE or NBD user can act
//   on, as nbdkit does (server/protocol.c): EINVAL for a bad request (invalid field, LBA out of
//   range: nbdkit answers out-of-range requests with EINVAL; the NBD bridge may turn it into
//   ENOSPC for writes, as the NBD spec suggests), EOPNOTSUPP for an unsupported command (nbdkit's
//   NBD_ENOTSUP), EROFS for write protection (nbdkit maps EROFS to NBD_EPERM).
#include "iserkit/scsi/errno_map.hpp"

#include <array>
#include <cerrno>

namespace iserkit::scsi {
namespace {

constexpr int any = -1;  // wildcard for asc/ascq

struct Row {
  SenseKey key;
  int asc;   // any = wildcard
  int ascq;  // any = wildcard
  int error;
};

constexpr std::array<Row, 19> table{{
    // DATA PROTECT
    {SenseKey::data_protect, 0x27, 0x07, ENOSPC},   // space allocation failed write protect (thin pool full)
    {SenseKey::data_protect, 0x27, any, EROFS},     // write protected (hardware/software/...)
    {SenseKey::data_protect, any, any, EACCES},     // other access protection (e.g. security)
    // ILLEGAL REQUEST
    {SenseKey::illegal_request, 0x20, 0x00, EOPNOTSUPP},  // invalid command operation code
    {SenseKey::illegal_request, 0x25, 0x00, ENXIO},       // logical unit not supported
    {SenseKey::illegal_request, 0x21, any, EINVAL},       // LBA out of range
    {SenseKey::illegal_request, any, any, EINVAL},        // invalid field in CDB / parameter list, ...
    // NOT READY
    {SenseKey::not_ready, 0x3a, any, ENOMEDIUM},    // medium not present
    {SenseKey::not_ready, any, any, EIO},
    // MEDIUM / HARDWARE
    {SenseKey::medium_error, any, any, EIO},        // unrecovered read error, write error
    {SenseKey::hardware_error, any, any, EIO},
    // Others
    {SenseKey::volume_overflow, any, any, ENOSPC},
    {SenseKey::miscompare, any, any, EILSEQ},       // COMPARE AND WRITE / VERIFY miscompare
    {SenseKey::unit_attention, any, any, EAGAIN},   // a condition the caller may retry past
    {SenseKey::aborted_command, any, any, EIO},
    {SenseKey::recovered_error, any, any, 0},       // SPC-5 §4.4.8: completed successfully
    {SenseKey::blank_check, any, any, EIO},
    {SenseKey::copy_aborted, any, any, EIO},
    {SenseKey::no_sense, any, any, EIO},            // CHECK CONDITION with nothing to say
}};

}  // namespace

int errno_for(Status status, const std::optional<SenseData>& sense) noexcept {
  switch (status) {
    case Status::good:
    case Status::condition_met:
      return 0;
    case Status::busy:
    case Status::task_set_full:
    case Status::aca_active:
      return EBUSY;
    case Status::reservation_conflict:
      return EBADE;
    case Status::task_aborted:
      return ECANCELED;
    case Status::check_condition:
      break;
    default:
      return EIO;
  }
  if (!sense) return EIO;
  for (const Row& r : table) {
    if (r.key != sense->key) continue;
    if (r.asc != any && r.asc != sense->asc) continue;
    if (r.ascq != any && r.ascq != sense->ascq) continue;
    return r.error;
  }
  return EIO;
}

}  // namespace iserkit::scsi
