// SCSI CDBs: builders for the initiator (options structs with designated initializers, never flag
// lists) and parsers for the target that validate fields and report the exact sense to return.
// Implements the CDB layouts of SPC-5 §4.2 and §6 (INQUIRY, MODE SENSE, REPORT LUNS, REQUEST SENSE,
// TEST UNIT READY) and SBC-4 §5 (READ/WRITE 6/10/12/16, READ CAPACITY 10/16, SYNCHRONIZE CACHE,
// UNMAP and its parameter list §5.32.2, WRITE SAME 10/16).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include <tl/expected.hpp>

#include "iserkit/common/bytes.hpp"
#include "iserkit/common/result.hpp"
#include "iserkit/scsi/opcodes.hpp"
#include "iserkit/scsi/sense.hpp"

namespace iserkit::scsi {

/// A command descriptor block of 6 to 16 bytes, stored inline.
struct Cdb {
  std::array<std::byte, 16> bytes{};  ///< the CDB; bytes past size() are zero
  std::uint8_t length = 0;            ///< CDB length in bytes (6, 10, 12 or 16)

  [[nodiscard]] ConstByteSpan span() const noexcept { return {bytes.data(), length}; }
  [[nodiscard]] std::size_t size() const noexcept { return length; }
  [[nodiscard]] Opcode opcode() const noexcept { return static_cast<Opcode>(bytes[0]); }
};

/// A parse result on the target side: the decoded fields, or the sense data the device server
/// must return with CHECK CONDITION (already carrying the field pointer where useful).
template <class T>
using SenseOr = tl::expected<T, SenseData>;

/// CDB length implied by an opcode's group code (SPC-5 §4.2.5.1): 6, 10, 12 or 16 bytes; 0 for
/// variable-length (0x7f) or vendor-specific groups 6 and 7.
std::size_t cdb_length_for(std::uint8_t opcode) noexcept;

// ---------------------------------------------------------------------------------------------
// Builders (initiator)
// ---------------------------------------------------------------------------------------------

/// Options for READ and WRITE of every size. SBC-4 §5.15–§5.18, §5.40–§5.43.
struct ReadWriteOptions {
  std::uint64_t lba = 0;       ///< first logical block address
  std::uint32_t blocks = 0;    ///< number of logical blocks (not bytes); READ/WRITE (6): 1..256
  bool fua = false;            ///< force unit access: durable before GOOD (not in the 6-byte CDBs)
  bool dpo = false;            ///< disable page out (cache retention hint)
};

/// READ (6). Returns errc::invalid_argument when lba > 0x1fffff or blocks is not 1..256 or fua/dpo
/// are set (the 6-byte CDB has no flag bits). 256 blocks is encoded as 0. SBC-4 §5.15.
Result<Cdb> read6(const ReadWriteOptions& o) noexcept;
/// READ (10). errc::invalid_argument when lba > 0xffffffff or blocks > 65535. SBC-4 §5.16.
Result<Cdb> read10(const ReadWriteOptions& o) noexcept;
/// READ (12). errc::invalid_argument when lba > 0xffffffff. SBC-4 §5.17.
Result<Cdb> read12(const ReadWriteOptions& o) noexcept;
/// READ (16). SBC-4 §5.18.
Cdb read16(const ReadWriteOptions& o) noexcept;
/// WRITE (6); same limits as read6. SBC-4 §5.40.
Result<Cdb> write6(const ReadWriteOptions& o) noexcept;
/// WRITE (10); same limits as read10. SBC-4 §5.41.
Result<Cdb> write10(const ReadWriteOptions& o) noexcept;
/// WRITE (12); same limits as read12. SBC-4 §5.42.
Result<Cdb> write12(const ReadWriteOptions& o) noexcept;
/// WRITE (16). SBC-4 §5.43.
Cdb write16(const ReadWriteOptions& o) noexcept;

/// Options for SYNCHRONIZE CACHE. blocks == 0 means "from lba to the end of the medium".
struct SynchronizeCacheOptions {
  std::uint64_t lba = 0;     ///< first logical block
  std::uint32_t blocks = 0;  ///< number of logical blocks; 0 = all remaining
  bool immed = false;        ///< return status before the cache is flushed
};
/// SYNCHRONIZE CACHE (10). errc::invalid_argument when lba or blocks do not fit. SBC-4 §5.27.
Result<Cdb> synchronize_cache10(const SynchronizeCacheOptions& o) noexcept;
/// SYNCHRONIZE CACHE (16). SBC-4 §5.28.
Cdb synchronize_cache16(const SynchronizeCacheOptions& o) noexcept;

/// One UNMAP block descriptor (SBC-4 §5.32.2, table 97).
struct UnmapDescriptor {
  std::uint64_t lba = 0;     ///< first logical block to unmap
  std::uint32_t blocks = 0;  ///< number of logical blocks; 0 is allowed and unmaps nothing
  friend constexpr bool operator==(UnmapDescriptor, UnmapDescriptor) noexcept = default;
};
/// Options for UNMAP.
struct UnmapOptions {
  std::uint16_t parameter_list_length_bytes = 0;  ///< size of the parameter list that follows
  bool anchor = false;                            ///< anchor instead of deallocate
};
/// UNMAP CDB (10 bytes). SBC-4 §5.32.1.
Cdb unmap(const UnmapOptions& o) noexcept;
/// The UNMAP parameter list for `descriptors`: 8-byte header + 16 bytes per descriptor.
/// SBC-4 §5.32.2. Preconditions: at most 4095 descriptors (the list length is 16 bits).
std::vector<std::byte> unmap_parameter_list(std::span<const UnmapDescriptor> descriptors);

/// Options for WRITE SAME. The data-out buffer is one logical block (none with ndob).
struct WriteSameOptions {
  std::uint64_t lba = 0;     ///< first logical block
  std::uint32_t blocks = 0;  ///< number of logical blocks; 0 = to the end of the medium (if allowed)
  bool unmap = false;        ///< UNMAP bit: the device may deallocate (if the block is zero)
  bool anchor = false;       ///< ANCHOR bit
  bool ndob = false;         ///< no data-out buffer: write zeroes (WRITE SAME (16) only)
};
/// WRITE SAME (10). errc::invalid_argument when lba/blocks do not fit or ndob is set. SBC-4 §5.49.
Result<Cdb> write_same10(const WriteSameOptions& o) noexcept;
/// WRITE SAME (16). SBC-4 §5.50.
Cdb write_same16(const WriteSameOptions& o) noexcept;

/// Options for INQUIRY.
struct InquiryOptions {
  bool evpd = false;                     ///< request a vital product data page
  std::uint8_t page_code = 0;            ///< VPD page (evpd) — must be 0 for standard data
  std::uint16_t allocation_length = 255; ///< bytes the initiator can take
};
/// INQUIRY (6). SPC-5 §6.6.1.
Cdb inquiry(const InquiryOptions& o) noexcept;

/// READ CAPACITY (10). SBC-4 §5.20.
Cdb read_capacity10() noexcept;
/// Options for READ CAPACITY (16).
struct ReadCapacity16Options {
  std::uint32_t allocation_length = 32;  ///< bytes; the full data is 32 bytes
};
/// READ CAPACITY (16): SERVICE ACTION IN (16) with service action 0x10. SBC-4 §5.21.
Cdb read_capacity16(const ReadCapacity16Options& o = {}) noexcept;

/// Options for REPORT LUNS.
struct ReportLunsOptions {
  std::uint8_t select_report = 0;          ///< 0 all LUNs, 1 well-known only, 2 all (SPC-5 table 286)
  std::uint32_t allocation_length = 4096;  ///< bytes; at least 16
};
/// REPORT LUNS (12). SPC-5 §6.33.
Cdb report_luns(const ReportLunsOptions& o = {}) noexcept;

/// TEST UNIT READY (6). SPC-5 §6.47.
Cdb test_unit_ready() noexcept;

/// Options for REQUEST SENSE.
struct RequestSenseOptions {
  bool descriptor_format = false;        ///< DESC bit
  std::uint8_t allocation_length = 252;  ///< bytes
};
/// REQUEST SENSE (6). SPC-5 §6.39.
Cdb request_sense(const RequestSenseOptions& o = {}) noexcept;

/// Page control of MODE SENSE (SPC-5 §6.13, table 172).
enum class ModePageControl : std::uint8_t { current = 0, changeable = 1, default_values = 2, saved = 3 };
/// Options for MODE SENSE (6) and (10).
struct ModeSenseOptions {
  std::uint8_t page_code = 0x3f;         ///< 0x08 caching, 0x0a control, 0x3f all pages
  std::uint8_t subpage_code = 0;         ///< 0 = page_0 format; 0xff = all subpages
  ModePageControl pc = ModePageControl::current;
  bool dbd = false;                      ///< disable block descriptors
  bool llbaa = false;                    ///< long LBA block descriptors (10-byte CDB only)
  std::uint16_t allocation_length = 255; ///< bytes; (6): at most 255
};
/// MODE SENSE (6). errc::invalid_argument when allocation_length > 255 or llbaa. SPC-5 §6.13.
Result<Cdb> mode_sense6(const ModeSenseOptions& o) noexcept;
/// MODE SENSE (10). SPC-5 §6.14.
Cdb mode_sense10(const ModeSenseOptions& o) noexcept;

// ---------------------------------------------------------------------------------------------
// Parsers (target). Each takes the whole CDB as received (its size may exceed the opcode's CDB
// length, e.g. a 16-byte iSCSI CDB field) and checks only what the device server must check.
// ---------------------------------------------------------------------------------------------

/// A decoded READ/WRITE of any size.
struct ReadWriteCdb {
  Opcode opcode = Opcode::read10;  ///< which of the eight variants
  std::uint64_t lba = 0;           ///< first logical block
  std::uint32_t blocks = 0;        ///< transfer length in logical blocks (READ/WRITE (6): 0 → 256)
  bool fua = false;                ///< FUA bit (always false for the 6-byte CDBs)
  bool dpo = false;                ///< DPO bit
  std::uint8_t protect = 0;        ///< RDPROTECT/WRPROTECT (3 bits)
  [[nodiscard]] bool is_write() const noexcept;
};
/// Decodes READ/WRITE 6/10/12/16. Errors: INVALID COMMAND OPERATION CODE for another opcode or a
/// CDB shorter than the opcode needs. Does not check protect or the LBA range (the device server
/// knows whether it supports protection and how large the medium is). SBC-4 §5.15–§5.18, §5.40–§5.43.
SenseOr<ReadWriteCdb> parse_read_write_cdb(ConstByteSpan cdb) noexcept;

/// A decoded SYNCHRONIZE CACHE (10) or (16).
struct SynchronizeCacheCdb {
  std::uint64_t lba = 0;
  std::uint32_t blocks = 0;  ///< 0 = to the end of the medium
  bool immed = false;
};
/// Decodes SYNCHRONIZE CACHE (10)/(16). SBC-4 §5.27, §5.28.
SenseOr<SynchronizeCacheCdb> parse_synchronize_cache_cdb(ConstByteSpan cdb) noexcept;

/// A decoded WRITE SAME (10) or (16).
struct WriteSameCdb {
  Opcode opcode = Opcode::write_same16;
  std::uint64_t lba = 0;
  std::uint32_t blocks = 0;  ///< 0 = to the end of the medium (SBC-4 §5.50, WSNZ)
  bool unmap = false;
  bool anchor = false;
  bool ndob = false;         ///< WRITE SAME (16) only: no data-out buffer, write zeroes
  std::uint8_t protect = 0;  ///< WRPROTECT
};
/// Decodes WRITE SAME (10)/(16). Errors: INVALID FIELD IN CDB for NDOB in the 10-byte CDB (it has
/// no such bit) or ANCHOR without UNMAP (SBC-4 §5.50 table 124). SBC-4 §5.49, §5.50.
SenseOr<WriteSameCdb> parse_write_same_cdb(ConstByteSpan cdb) noexcept;

/// A decoded UNMAP CDB.
struct UnmapCdb {
  bool anchor = false;
  std::uint16_t parameter_list_length_bytes = 0;  ///< 0 = nothing to do (not an error)
};
/// Decodes the UNMAP CDB. SBC-4 §5.32.1.
SenseOr<UnmapCdb> parse_unmap_cdb(ConstByteSpan cdb) noexcept;
/// Decodes an UNMAP parameter list (SBC-4 §5.32.2). Errors: PARAMETER LIST LENGTH ERROR when the
/// list is 1..7 bytes or shorter than its header's UNMAP DATA LENGTH / BLOCK DESCRIPTOR DATA LENGTH
/// say. An incomplete last descriptor (descriptor data length not a multiple of 16) is ignored, as
/// SBC-4 requires. An empty list (0 bytes) gives no descriptors. Range checks are the caller's.
SenseOr<std::vector<UnmapDescriptor>> parse_unmap_parameter_list(ConstByteSpan list);

/// A decoded INQUIRY CDB.
struct InquiryCdb {
  bool evpd = false;
  std::uint8_t page_code = 0;
  std::uint16_t allocation_length = 0;  ///< bytes
};
/// Decodes INQUIRY. Errors: INVALID FIELD IN CDB when EVPD is 0 and PAGE CODE is not 0, or the
/// obsolete CMDDT bit is set. SPC-5 §6.6.1.
SenseOr<InquiryCdb> parse_inquiry_cdb(ConstByteSpan cdb) noexcept;

/// Decodes READ CAPACITY (16) (SERVICE ACTION IN (16), action 0x10): the allocation length in
/// bytes. Errors: INVALID FIELD IN CDB for another service action. SBC-4 §5.21.
SenseOr<std::uint32_t> parse_read_capacity16_cdb(ConstByteSpan cdb) noexcept;

/// A decoded REPORT LUNS CDB.
struct ReportLunsCdb {
  std::uint8_t select_report = 0;
  std::uint32_t allocation_length = 0;  ///< bytes
};
/// Decodes REPORT LUNS. Errors: INVALID FIELD IN CDB for SELECT REPORT other than 0, 1, 2, 0x10,
/// 0x11, 0x12, or an allocation length below 4 (SPC-5 §6.33.1).
SenseOr<ReportLunsCdb> parse_report_luns_cdb(ConstByteSpan cdb) noexcept;

/// A decoded REQUEST SENSE CDB.
struct RequestSenseCdb {
  bool descriptor_format = false;
  std::uint8_t allocation_length = 0;
};
/// Decodes REQUEST SENSE. SPC-5 §6.39.
SenseOr<RequestSenseCdb> parse_request_sense_cdb(ConstByteSpan cdb) noexcept;

/// A decoded MODE SENSE (6) or (10) CDB.
struct ModeSenseCdb {
  bool ten = false;  ///< MODE SENSE (10)
  ModePageControl pc = ModePageControl::current;
  std::uint8_t page_code = 0;
  std::uint8_t subpage_code = 0;
  bool dbd = false;
  bool llbaa = false;
  std::uint16_t allocation_length = 0;  ///< bytes
};
/// Decodes MODE SENSE (6)/(10). Page support is the caller's check. SPC-5 §6.13, §6.14.
SenseOr<ModeSenseCdb> parse_mode_sense_cdb(ConstByteSpan cdb) noexcept;

}  // namespace iserkit::scsi
