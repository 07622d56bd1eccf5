// Shared by the SessionEngine tests that drive the engine by hand (session_engine_test.cpp,
// session_recovery_test.cpp): a SCSI command with a 10-byte CDB to LUN 0, a target PDU handed
// over as the datamover does (its data segment copied to where place() says), and the check that
// the session ended and how a task ended with it.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <span>
#include <system_error>
#include <vector>

#include "session_engine.hpp"

namespace iserkit::test {

/// A command to LUN 0 whose 10-byte CDB is `opcode` and zeros (READ(10) 0x28, WRITE(10) 0x2a,
/// SYNCHRONIZE CACHE(10) 0x35); `in` and `out` are its data buffers.
inline initiator::ScsiSubmission cdb10_submission(std::uint8_t opcode, std::span<std::byte> in = {},
                                                  std::span<const std::byte> out = {},
                                                  std::chrono::milliseconds timeout = {}) {
  initiator::ScsiSubmission s;
  s.lun = scsi::Lun::from_index(0);
  s.cdb.length = 10;
  s.cdb.bytes[0] = std::byte{opcode};
  s.data_in = in;
  s.data_out = out;
  s.timeout = timeout;
  return s;
}

/// The target PDU `h` with data segment `data` as the datamover hands it to `engine`: the data
/// copied to the span place() gives, or into `scratch` when it gives none; `pdu_error` as a digest
/// or framing error would set it.
inline datamover::PduIn placed_pdu(initiator::SessionEngine& engine, const iscsi::PduHeader& h,
                                   std::span<const std::byte> data, std::vector<std::byte>& scratch,
                                   std::error_code pdu_error = {}) {
  datamover::PduIn in;
  in.bhs = iscsi::encode_bhs(h);
  iscsi::set_lengths(in.bhs, 0, static_cast<std::uint32_t>(data.size()));
  in.pdu_error = pdu_error;
  if (!data.empty()) {
    auto where = engine.place(in.bhs, static_cast<std::uint32_t>(data.size()));
    if (where.empty()) {
      scratch.assign(data.begin(), data.end());
      where = scratch;
    }
    std::copy(data.begin(), data.end(), where.begin());
    in.data = where;
  }
  return in;
}

/// The session of `fixture` (either test's fixture: its `ended`, and `outcome(id)` from the
/// completions it collected) ended with `session_error`, and task `id` with `task_error`.
template <class Fixture>
void expect_ended_with(Fixture& fixture, std::error_code session_error, initiator::TaskId id,
                       std::error_code task_error) {
  ASSERT_TRUE(fixture.ended);
  EXPECT_EQ(*fixture.ended, session_error);
  ASSERT_NE(fixture.outcome(id), nullptr);
  EXPECT_EQ(fixture.outcome(id)->error, task_error);
}

}  // namespace iserkit::test
