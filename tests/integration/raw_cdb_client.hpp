// Raw CDBs over an initiator Session, for the integration clients that drive commands the
// initiator library has no call for (EXTENDED COPY, token copy): one command from its CDB, a CDB
// from its bytes, READ/WRITE (16), TEST UNIT READY past the unit attentions, and the geometry of
// the two copy tests. Header-only test support.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "iserkit/common/bytes.hpp"
#include "iserkit/initiator/session.hpp"
#include "iserkit/scsi/cdb.hpp"
#include "iserkit/scsi/sense.hpp"

namespace iserkit::test {

/// One command from its CDB (built outside the coroutines: GCC 12 rejects some braced lists there).
inline Awaitable<Result<scsi::ScsiResult>> run(initiator::Session& s, scsi::Lun lun, const scsi::Cdb& cdb,
                                               std::span<std::byte> in = {}, std::span<const std::byte> out = {}) {
  initiator::CommandRequest request;
  request.lun = lun;
  request.cdb = cdb;
  request.data_in = in;
  request.data_out = out;
  co_return co_await s.execute(request);
}

/// A CDB from its bytes; its length from the opcode's group (SPC-5 §4.2.5.1).
inline scsi::Cdb cdb_of(std::vector<unsigned> bytes) {
  scsi::Cdb c;
  for (std::size_t i = 0; i < bytes.size(); ++i) c.bytes[i] = static_cast<std::byte>(bytes[i]);
  c.length = static_cast<std::uint8_t>(scsi::cdb_length_for(static_cast<std::uint8_t>(bytes[0])));
  return c;
}

/// READ (16) (88h) or WRITE (16) (8Ah) of `n` logical blocks at `lba` (SBC-4 §5.16, §5.40).
inline scsi::Cdb rw16(unsigned opcode, std::uint64_t lba, std::uint32_t n) {
  scsi::Cdb c = cdb_of({opcode});
  store_be64(c.bytes.data() + 2, lba);
  store_be32(c.bytes.data() + 10, n);
  return c;
}

/// TEST UNIT READY (00h), built outside the coroutines.
inline const scsi::Cdb test_unit_ready_cdb = cdb_of({0x00});

/// TEST UNIT READY until no unit attention is left (a new session starts with one); the last result.
inline Awaitable<Result<scsi::ScsiResult>> settle(initiator::Session& s, scsi::Lun lun) {
  Result<scsi::ScsiResult> r;
  for (int i = 0; i < 10; ++i) {
    r = co_await run(s, lun, test_unit_ready_cdb);
    if (!r || !r->sense || r->sense->key != scsi::SenseKey::unit_attention) break;
  }
  co_return r;
}

/// The copy both copy clients make (xcopy_client_test, tokencopy_client_test): `blocks` blocks of
/// `bs` bytes from `source_lba` of LUN 0 to `destination_lba` of LUN 1. Their shell halves
/// (xcopy_test.sh, tokencopy_test.sh) compare these ranges of the backing files.
namespace copy {
constexpr std::uint32_t bs = 512;
constexpr std::uint32_t blocks = 4100;  // about 2 MiB: three 1 MiB chunks inside the target
constexpr std::uint64_t source_lba = 100;
constexpr std::uint64_t destination_lba = 5000;
}  // namespace copy

}  // namespace iserkit::test
