// The one table from SCSI status + sense (SAM-5 §5.3, SPC-5 §4.4.8 and Annex D) to errno, shared
// by the NBD bridge (which maps errno on to NBD_E*) and the FUSE view (which returns -errno). The
// choices follow Linux's sd/scsi_lib (scsi_result_to_blk_status) and nbdkit's errno handling;
// each row of the table in errno_map.cpp says why.
#pragma once

#include <optional>

#include "iserkit/scsi/opcodes.hpp"
#include "iserkit/scsi/sense.hpp"

namespace iserkit::scsi {

/// The errno that best describes a finished SCSI command.
/// Returns: 0 for GOOD and CONDITION MET; EBUSY for BUSY and TASK SET FULL; EBADE for RESERVATION
/// CONFLICT (as Linux's BLK_STS_RESV_CONFLICT); ECANCELED for TASK ABORTED; for CHECK CONDITION the
/// first matching row of the table (ASC/ASCQ rows before sense-key rows); EIO when nothing matches
/// or CHECK CONDITION came without sense. See errno_map.cpp for the table and the reasons.
/// Spec: SAM-5 §5.3.1, SPC-5 §4.4.
int errno_for(Status status, const std::optional<SenseData>& sense) noexcept;

/// errno_for() for sense alone (status CHECK CONDITION).
inline int errno_for(const SenseData& sense) noexcept { return errno_for(Status::check_condition, sense); }

}  // namespace iserkit::scsi
