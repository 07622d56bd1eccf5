// The copy manager (SPC-4 §5.17, LID1): EXTENDED COPY with E4h CSCD descriptors and 02h segment
// descriptors, RECEIVE COPY RESULTS COPY STATUS and OPERATING PARAMETERS; see extended_copy.hpp.
// A copy runs inside the EXTENDED COPY command (no background operation): the command's status is
// the copy's end, and its task's abort flag stops it between chunks.
#include "scsi/extended_copy.hpp"

#include <algorithm>
#include <array>
#include <optional>
#include <string>
#include <string_view>
#include <variant>

#include "iserkit/common/log.hpp"
#include "scsi/device_state.hpp"
#include "scsi/handlers.hpp"
#include "scsi/sanitize.hpp"
#include "scsi/token_copy.hpp"

namespace iserkit::target::detail {

using scsi::SenseData;
using scsi::SenseKey;

namespace {

constexpr std::size_t header_bytes = 16;        // SPC-4 §6.4.3.1: the parameter list header
constexpr std::uint8_t identification_cscd = 0xe4;  // SPC-4 §6.4.5.1
constexpr std::uint8_t block_to_block = 0x02;   // SPC-4 §6.4.6.5
constexpr std::uint16_t block_segment_length = 0x18;  // DESCRIPTOR LENGTH of 02h (28 bytes in all)
constexpr std::uint8_t copy_status_sa = 0x00;
constexpr std::uint8_t operating_parameters_sa = 0x03;
constexpr std::uint8_t naa_designator_type = 0x3;

std::uint8_t log2_of(std::uint32_t block_size_bytes) noexcept;

SenseData illegal(scsi::AscPair pair) noexcept { return SenseData::make(SenseKey::illegal_request, pair); }

// COPY ABORTED (SPC-4 §6.4.4: an error while processing segment descriptors) with a segment
// pointer (SPC-4 §4.5.2.4.5: SD = 1, FIELD POINTER = the descriptor's offset in the parameter list).
SenseData copy_aborted(scsi::AscPair pair, std::optional<std::uint16_t> segment_offset = {}) noexcept {
  SenseData s = SenseData::make(SenseKey::copy_aborted, pair);
  if (segment_offset) {
    s.sense_key_specific = std::array<std::uint8_t, 3>{0xa0, static_cast<std::uint8_t>(*segment_offset >> 8),
                                                       static_cast<std::uint8_t>(*segment_offset & 0xff)};
  }
  return s;
}

// Bytes of a CSCD descriptor of `type` (SPC-4 §6.4.5: 32, the IPv6 and IP copy service ones 64),
// or 0 for a code that is no CSCD descriptor.
std::size_t cscd_length(std::uint8_t type) noexcept {
  if (type >= 0xe0 && type <= 0xe9) return 32;
  if (type == 0xea || type == 0xeb) return 64;
  return 0;
}

}  // namespace

scsi::SenseOr<ExtendedCopyParameters> parse_extended_copy_parameters(ConstByteSpan list) noexcept {
  if (list.size() < header_bytes) return tl::unexpected(illegal(scsi::asc::parameter_list_length_error));
  const std::byte* p = list.data();
  ExtendedCopyParameters out;
  out.list_id = load_u8(p);
  out.usage = static_cast<ListIdUsage>((load_u8(p + 1) >> 3) & 0x3);
  // SPC-4 §6.4.3.2: LIST ID USAGE 01b is reserved.
  if (out.usage == ListIdUsage::reserved) return tl::unexpected(SenseData::invalid_field_in_parameter_list(1));
  const std::uint64_t cscd_list_bytes = load_be16(p + 2);
  const std::uint64_t segment_list_bytes = load_be32(p + 8);
  const std::uint64_t inline_bytes = load_be32(p + 12);
  // SPC-4 §6.4.3.1: the lists must fit in the PARAMETER LIST LENGTH.
  if (header_bytes + cscd_list_bytes + segment_list_bytes + inline_bytes > list.size())
    return tl::unexpected(illegal(scsi::asc::parameter_list_length_error));
  // SPC-4 §6.18.4: MAXIMUM DESCRIPTOR LIST LENGTH bounds both descriptor lists together.
  if (cscd_list_bytes + segment_list_bytes > xcopy_max_descriptor_list_bytes)
    return tl::unexpected(illegal(scsi::asc::parameter_list_length_error));
  if (inline_bytes > xcopy_max_inline_bytes) return tl::unexpected(illegal(inline_data_length_exceeded));

  // CSCD descriptors (SPC-4 §6.4.5).
  const std::size_t cscd_end = header_bytes + cscd_list_bytes;
  for (std::size_t at = header_bytes; at < cscd_end;) {
    const std::uint8_t type = load_u8(p + at);
    const std::size_t length = cscd_length(type);
    if (out.cscds.size() == xcopy_max_cscd_descriptors) return tl::unexpected(illegal(too_many_target_descriptors));
    if (length == 0 || type != identification_cscd) return tl::unexpected(illegal(unsupported_target_descriptor_type_code));
    if (at + length > cscd_end) return tl::unexpected(SenseData::invalid_field_in_parameter_list(2));
    CscdDescriptor d;
    d.offset = static_cast<std::uint16_t>(at);
    // SPC-4 §6.4.5.1: LU ID TYPE is ignored for E4h, NUL is obsolete; RELATIVE INITIATOR PORT
    // IDENTIFIER names an initiator port of the copy manager's, which has just one path: ignored.
    d.peripheral_type = load_u8(p + at + 1) & 0x1f;
    if (d.peripheral_type != 0) {
      // Only block devices (SPC-4 §6.4.5.2 device type specific parameters of type 00h).
      return tl::unexpected(SenseData::invalid_field_in_parameter_list(static_cast<std::uint16_t>(at + 1)));
    }
    d.code_set = load_u8(p + at + 4) & 0x0f;
    d.association = (load_u8(p + at + 5) >> 4) & 0x3;
    d.designator_type = load_u8(p + at + 5) & 0x0f;
    const std::size_t designator_length = load_u8(p + at + 7);
    // The designation descriptor occupies bytes 4..27: at most 20 bytes of designator.
    if (designator_length > 20) {
      return tl::unexpected(SenseData::invalid_field_in_parameter_list(static_cast<std::uint16_t>(at + 7)));
    }
    const auto* designator = reinterpret_cast<const std::uint8_t*>(p + at + 8);
    d.designator.assign(designator, designator + designator_length);
    d.block_length_bytes = load_be24(p + at + 29);  // SPC-4 §6.4.5.2: DISK BLOCK LENGTH
    out.cscds.push_back(std::move(d));
    at += length;
  }

  // Segment descriptors (SPC-4 §6.4.6).
  const std::size_t segment_end = cscd_end + segment_list_bytes;
  for (std::size_t at = cscd_end; at < segment_end;) {
    if (at + 4 > segment_end) return tl::unexpected(SenseData::invalid_field_in_parameter_list(8));
    const std::uint8_t type = load_u8(p + at);
    const std::size_t length = 4 + std::size_t{load_be16(p + at + 2)};
    if (out.segments.size() == xcopy_max_segment_descriptors) return tl::unexpected(illegal(too_many_segment_descriptors));
    if (type != block_to_block) return tl::unexpected(illegal(unsupported_segment_descriptor_type_code));
    if (length != 4 + block_segment_length) {
      return tl::unexpected(SenseData::invalid_field_in_parameter_list(static_cast<std::uint16_t>(at + 2)));
    }
    if (at + length > segment_end) return tl::unexpected(SenseData::invalid_field_in_parameter_list(8));
    BlockSegment s;
    s.offset = static_cast<std::uint16_t>(at);
    // DC (byte 1 bit 1) and CAT (bit 0) only matter when the two block sizes differ (refused at
    // execution) or with padding: with one block size source and destination counts are equal.
    s.source = load_be16(p + at + 4);
    s.destination = load_be16(p + at + 6);
    s.blocks = load_be16(p + at + 10);
    s.source_lba = load_be64(p + at + 12);
    s.destination_lba = load_be64(p + at + 20);
    out.segments.push_back(s);
    at += length;
  }
  return out;
}

std::vector<std::byte> encode_copy_status(const CopyStatus& status) {
  std::vector<std::byte> d(12);
  store_be32(d.data(), 8);  // AVAILABLE DATA: n - 3
  // HDD = 0: no held data is ever discarded (none is held).
  store_u8(d.data() + 4, static_cast<std::uint8_t>(status.state));
  store_be16(d.data() + 5, status.segments_processed);
  store_u8(d.data() + 7, 0x00);  // TRANSFER COUNT UNITS: bytes
  store_be32(d.data() + 8, static_cast<std::uint32_t>(std::min<std::uint64_t>(status.bytes_transferred, 0xffffffffu)));
  return d;
}

std::vector<std::byte> encode_operating_parameters(std::uint32_t block_size_bytes) {
  constexpr std::array<std::uint8_t, 2> implemented{block_to_block, identification_cscd};
  std::vector<std::byte> d(44 + implemented.size());
  store_be32(d.data(), static_cast<std::uint32_t>(d.size() - 4));  // AVAILABLE DATA
  // Byte 4: SNLID = 0 (LIST IDENTIFIERs are used).
  store_be16(d.data() + 8, xcopy_max_cscd_descriptors);
  store_be16(d.data() + 10, xcopy_max_segment_descriptors);
  store_be32(d.data() + 12, xcopy_max_descriptor_list_bytes);
  store_be32(d.data() + 16, xcopy_max_segment_bytes);
  store_be32(d.data() + 20, xcopy_max_inline_bytes);
  store_be32(d.data() + 24, 0);  // HELD DATA LIMIT: none held
  store_be32(d.data() + 28, 0);  // MAXIMUM STREAM DEVICE TRANSFER SIZE: no stream devices
  store_be16(d.data() + 34, xcopy_max_concurrent_copies);  // TOTAL CONCURRENT COPIES
  store_u8(d.data() + 36, static_cast<std::uint8_t>(xcopy_max_concurrent_copies));  // MAXIMUM CONCURRENT COPIES
  store_u8(d.data() + 37, log2_of(block_size_bytes));  // DATA SEGMENT GRANULARITY: log2 of the block size
  store_u8(d.data() + 43, static_cast<std::uint8_t>(implemented.size()));  // IMPLEMENTED DESCRIPTOR LIST LENGTH
  for (std::size_t i = 0; i < implemented.size(); ++i) store_u8(d.data() + 44 + i, implemented[i]);
  return d;
}

namespace {

std::uint8_t log2_of(std::uint32_t block_size_bytes) noexcept {
  std::uint8_t n = 0;
  while ((std::uint64_t{1} << (n + 1)) <= block_size_bytes) ++n;
  return n;
}

}  // namespace

std::vector<std::byte> encode_third_party_copy_vpd(std::uint32_t block_size_bytes) {
  std::vector<std::byte> out;
  // 0000h Block Device ROD Limits (token_copy.cpp).
  append_block_rod_limits(out, block_size_bytes);
  // 0001h Supported Commands: COMMANDS SUPPORTED LIST LENGTH, then per command its opcode, the
  // length of its service action list and the service actions.
  // EXTENDED COPY (LID1), POPULATE TOKEN, WRITE USING TOKEN; RECEIVE COPY RESULTS COPY STATUS,
  // OPERATING PARAMETERS, RECEIVE ROD TOKEN INFORMATION (token_copy.cpp).
  const std::vector<std::uint8_t> commands{0x83, 3, 0x00, populate_token_sa, write_using_token_sa,
                                           0x84, 3, copy_status_sa, operating_parameters_sa,
                                           receive_rod_token_information_sa};
  std::vector<std::byte> body(1 + commands.size());
  store_u8(body.data(), static_cast<std::uint8_t>(commands.size()));
  for (std::size_t i = 0; i < commands.size(); ++i) store_u8(body.data() + 1 + i, commands[i]);
  append_tpc_descriptor(out, 0x0001, std::move(body));
  // 0004h Parameter Data: the LID1 descriptor limits (bytes 4..7 of the descriptor body reserved).
  body.assign(28, std::byte{0});
  store_be16(body.data() + 4, xcopy_max_cscd_descriptors);
  store_be16(body.data() + 6, xcopy_max_segment_descriptors);
  store_be32(body.data() + 8, xcopy_max_descriptor_list_bytes);
  store_be32(body.data() + 12, xcopy_max_inline_bytes);
  append_tpc_descriptor(out, 0x0004, std::move(body));
  // 0008h Supported Descriptors.
  body.assign({std::byte{2}, std::byte{block_to_block}, std::byte{identification_cscd}});
  append_tpc_descriptor(out, 0x0008, std::move(body));
  // 000Ch Supported CSCD Descriptor IDs: none of the special IDs (above 07FFh).
  body.assign(2, std::byte{0});
  append_tpc_descriptor(out, 0x000c, std::move(body));
  // 0106h ROD Token Features, 0108h Supported ROD Types (token_copy.cpp).
  append_rod_token_descriptors(out);
  // 8001h General Copy Operations.
  body.assign(32, std::byte{0});
  store_be32(body.data(), xcopy_max_concurrent_copies);       // TOTAL CONCURRENT COPIES
  store_be32(body.data() + 4, xcopy_max_concurrent_copies);   // MAXIMUM IDENTIFIED CONCURRENT COPIES
  store_be32(body.data() + 8, xcopy_max_segment_bytes);       // MAXIMUM SEGMENT LENGTH
  store_u8(body.data() + 12, log2_of(block_size_bytes));      // DATA SEGMENT GRANULARITY
  append_tpc_descriptor(out, 0x8001, std::move(body));
  return out;
}

// ---------------------------------------------------------------------------------------------
// CopyManager
// ---------------------------------------------------------------------------------------------

bool CopyManager::try_start() noexcept {
  std::uint32_t n = running_.load();
  do {
    if (n >= xcopy_max_concurrent_copies) return false;
  } while (!running_.compare_exchange_weak(n, n + 1));
  return true;
}

void CopyManager::finish() noexcept { running_.fetch_sub(1); }

// ---------------------------------------------------------------------------------------------
// Phase 1
// ---------------------------------------------------------------------------------------------

void plan_extended_copy(CommandPlan& plan, ConstByteSpan cdb) noexcept {
  // SPC-4 §6.4.1: LID1 is service action 00h (EXTENDED COPY (LID4), 01h, is not offered).
  if ((load_u8(cdb.data() + 1) & 0x1f) != 0) {
    plan.error = SenseData::invalid_field_in_cdb(1, 4);
    return;
  }
  const std::uint32_t length = load_be32(cdb.data() + 10);
  // SPC-4 §6.4.1: a PARAMETER LIST LENGTH of 0 is no error: nothing is copied.
  if (length == 0) return;
  if (length < header_bytes || length > header_bytes + xcopy_max_descriptor_list_bytes + xcopy_max_inline_bytes) {
    // Refused before the Data-Out is asked for, so a peer cannot make the target buffer more.
    plan.error = illegal(scsi::asc::parameter_list_length_error);
    return;
  }
  plan.direction = DataDirection::to_target;
  plan.transfer_length_bytes = length;
}

void plan_receive_copy_results(CommandPlan& plan, ConstByteSpan cdb) noexcept {
  const std::uint8_t sa = load_u8(cdb.data() + 1) & 0x1f;
  // SPC-4 §6.18.1: RECEIVE DATA (01h) and FAILED SEGMENT DETAILS (04h) are not offered (no held
  // data; a failed copy's segment is in its sense data).
  if (sa != copy_status_sa && sa != operating_parameters_sa) {
    plan.error = SenseData::invalid_field_in_cdb(1, 4);
    return;
  }
  plan_data_in(plan, load_be32(cdb.data() + 10));
}

// ---------------------------------------------------------------------------------------------
// The chunk mover (shared with WRITE USING TOKEN, token_copy.cpp)
// ---------------------------------------------------------------------------------------------

void set_destination(BlockMove& m, UnitState& unit) noexcept {
  m.destination = &unit.unit->backend();
  m.destination_ranges = &unit.ranges;
  m.destination_sanitize = unit.sanitize.get();
  m.destination_stats = &unit.unit->stats();
}

ChunkPath chunk_path(const BlockMove& m, std::uint64_t first, std::uint64_t blocks, bool refused) noexcept {
  if (m.source == nullptr || refused || !m.destination->capabilities().can_copy_in_kernel) return ChunkPath::user_space;
  const std::uint64_t from = m.source_lba + first;
  const std::uint64_t to = m.destination_lba + first;
  if (m.source == m.destination && from < to + blocks && to < from + blocks) return ChunkPath::user_space;
  return ChunkPath::in_kernel;
}

namespace {

// copy_from()'s answers that mean "not in the kernel, copy it yourself" (block_backend.hpp).
bool kernel_copy_refused(const std::error_code& ec) noexcept {
  return ec == std::errc::operation_not_supported || ec == std::errc::cross_device_link ||
         ec == std::errc::invalid_argument;
}

}  // namespace

Awaitable<std::optional<ScsiOutcome>> move_blocks(const CommandPlan& plan, const BlockMove& m, ByteSpan buffer,
                                                  const MoveHooks& hooks) {
  const std::uint32_t bs = m.block_size_bytes;
  const std::uint64_t chunk_blocks = std::max<std::uint64_t>(1, buffer.size() / bs);
  BlockBackend& destination = *m.destination;
  bool refused = false;  // the destination refused copy_from() once: the rest goes through the buffer
  for (std::uint64_t done = 0; done < m.blocks;) {
    // SAM-5 §7: an aborted task (ABORT TASK, a reset, the session's end) stops between chunks.
    if (plan.abort_requested || (hooks.stopped && hooks.stopped())) co_return ScsiOutcome::check_condition(hooks.aborted);
    const std::uint64_t n = std::min(chunk_blocks, m.blocks - done);
    const std::uint64_t first = m.backwards ? m.blocks - done - n : done;
    const std::uint64_t offset = (m.destination_lba + first) * bs;
    bool moved = false;
    if (chunk_path(m, first, n, refused) == ChunkPath::in_kernel) {
      // In the kernel: the read happens inside copy_from(), so the range lock is taken first (a
      // WRITE USING TOKEN whose destination holds its own token's blocks is cancelled before it
      // reads them). after_read runs after each part was read and before it is written.
      auto guard = co_await lock_range(*m.destination_ranges, m.destination_lba + first, n);
      // SBC-4 §4.11: a sanitize that started meanwhile drained the range first: stop.
      if (auto refused_by = m.destination_sanitize->refuses(scsi::Opcode::write16))
        co_return ScsiOutcome::check_condition(*refused_by);
      KernelCopy copy;
      copy.source_offset_bytes = (m.source_lba + first) * bs;
      copy.offset_bytes = offset;
      copy.length_bytes = n * bs;
      std::optional<ScsiOutcome> stop;
      if (hooks.after_read) copy.proceed = [&] { return !(stop = hooks.after_read()); };
      auto r = co_await destination.copy_from(*m.source, copy);
      if (r) {
        moved = true;
        if (m.destination_stats) m.destination_stats->copy_bytes_in_kernel.fetch_add(n * bs, std::memory_order_relaxed);
      } else if (stop) {
        co_return *stop;  // after_read ended it (ECANCELED)
      } else if (kernel_copy_refused(r.error())) {
        refused = true;  // this chunk again, and the rest, through the buffer
      } else {
        co_return backend_error_outcome(r.error(), !copy.read_failed);
      }
    }
    if (!moved) {
      const ByteSpan data(buffer.data(), n * bs);
      if (m.source != nullptr) {
        if (auto r1 = co_await m.source->read((m.source_lba + first) * bs, data); !r1)
          co_return backend_error_outcome(r1.error(), false);
        // Checked after the read: a change of the source that the read may have seen happened
        // after the check's flag was set (point in time ROD tokens).
        if (hooks.after_read)
          if (auto stop = hooks.after_read()) co_return *stop;
      }
      auto guard = co_await lock_range(*m.destination_ranges, m.destination_lba + first, n);
      // SBC-4 §4.11: a sanitize that started meanwhile drained the range first: stop.
      if (auto refused_by = m.destination_sanitize->refuses(scsi::Opcode::write16))
        co_return ScsiOutcome::check_condition(*refused_by);
      auto w = m.source != nullptr ? co_await destination.write(offset, data, Fua::no)
                                   : co_await destination.write_zeroes(offset, n * bs, Fua::no);
      if (!w) co_return backend_error_outcome(w.error(), true);
      if (m.source != nullptr && m.destination_stats)
        m.destination_stats->copy_bytes_user_space.fetch_add(n * bs, std::memory_order_relaxed);
    }
    done += n;
    if (hooks.moved) hooks.moved(n);
    // Let the io_context run other commands between chunks (a memory backend completes at once).
    co_await asio::post(co_await asio::this_coro::executor, asio::use_awaitable);
  }
  co_return std::nullopt;
}

// ---------------------------------------------------------------------------------------------
// Phase 2
// ---------------------------------------------------------------------------------------------

namespace {

// A segment with its two logical units resolved.
struct ResolvedSegment {
  const BlockSegment* segment;
  UnitState* source;
  UnitState* destination;
  // The units' reset counts when the copy was resolved: a LOGICAL UNIT RESET of either (from any
  // session) since then stops the copy between chunks (SAM-5 §6.3.3).
  std::uint32_t source_resets = 0;
  std::uint32_t destination_resets = 0;
};

// Every segment resolved, and the other device servers they reach (kept alive while the copy runs).
struct Resolution {
  std::vector<ResolvedSegment> segments;
  std::vector<std::shared_ptr<const ScsiDispatcher>> peers;
};

// A copy source or destination: the logical unit, and the I_T nexus (id and initiator port name)
// through which its reservations are checked.
struct CopyTarget {
  UnitState* unit = nullptr;
  std::uint64_t nexus = 0;
  std::string port;
};

// The logical unit of `state` with the CSCD's designator: an NAA designator associated with a
// logical unit (SPC-4 §6.4.5.1: the copy manager matches it with the designators of VPD 0x83).
UnitState* find_unit(const ScsiDispatcher::State& state, const CscdDescriptor& d) {
  if (d.designator_type != naa_designator_type || d.association != 0 || d.designator.empty()) return nullptr;
  for (auto* u : state.all_units()) {
    const auto naa = u->unit->naa();
    if (std::equal(naa.begin(), naa.end(), d.designator.begin(), d.designator.end())) return u;
  }
  return nullptr;
}

// The initiator name of an initiator port name "<name>,i,0x<ISID>" (SPC-5 §7.6.4.6).
std::string_view initiator_of(std::string_view port) noexcept {
  const auto at = port.rfind(",i,0x");
  return at == std::string_view::npos ? port : port.substr(0, at);
}

// Where the CSCD's logical unit is, for `nexus` (named `port`) of `state`: a unit of this device
// server; else a unit of another server of the copy domain in this server's tenant to which the
// same initiator from the same address has an I_T nexus open (it logged in there), checked through
// that nexus; else nothing: unreachable.
std::optional<CopyTarget> locate(const ScsiDispatcher::State& state, std::uint64_t nexus, const std::string& port,
                                 const CscdDescriptor& d, std::vector<std::shared_ptr<const ScsiDispatcher>>& peers) {
  if (auto* u = find_unit(state, d)) return CopyTarget{u, nexus, port};
  if (!state.copy_domain) return std::nullopt;
  const auto initiator = initiator_of(port);
  // The same name is not enough (names are not secret): the nexus there must come from the same
  // network address as this one.
  const std::string origin = state.origin(NexusId{nexus});
  for (auto& peer : state.copy_domain->servers_of(state.copy_tenant)) {
    const auto& other = peer->internal_state();
    if (&other == &state) continue;
    UnitState* u = find_unit(other, d);
    if (u == nullptr) continue;
    // Never a target the initiator has not logged in to (its ACL, CHAP, tenant portals).
    auto seen = other.nexus_of_initiator(initiator, origin);
    if (!seen) continue;
    peers.push_back(std::move(peer));
    return CopyTarget{u, seen->first, std::move(seen->second)};
  }
  return std::nullopt;
}

// What the reservations and a sanitize in progress say about the nexus of `t` reading or writing
// its unit (SPC-4 §5.17.4: the copy manager accesses each CSCD as the application client would).
std::optional<ScsiOutcome> access_refused(const CopyTarget& t, bool writing) {
  UnitState& u = *t.unit;
  if (auto refused = u.sanitize->refuses(writing ? scsi::Opcode::write16 : scsi::Opcode::read16))
    return ScsiOutcome::check_condition(*refused);
  std::lock_guard g(u.mutex);
  if (u.reserve6_holder && *u.reserve6_holder != t.nexus) return ScsiOutcome::reservation_conflict();
  if (u.persistent.has_reservation() && u.persistent.conflicts(t.port, writing ? AccessKind::write : AccessKind::read))
    return ScsiOutcome::reservation_conflict();
  if (writing && (u.unit->read_only() || u.software_write_protect)) return ScsiOutcome::check_condition(write_protected());
  return std::nullopt;
}

// Checks every segment (SPC-4 §6.4.6.5) and resolves its logical units; nothing is read or written.
std::variant<Resolution, ScsiOutcome> resolve(const ScsiDispatcher::State& state, std::uint64_t nexus,
                                              const ExtendedCopyParameters& params) {
  Resolution out;
  std::vector<std::optional<CopyTarget>> targets(params.cscds.size());
  const std::string port = state.port_name(NexusId{nexus});
  const auto target_of = [&](std::uint16_t index) -> std::variant<const CopyTarget*, ScsiOutcome> {
    // SPC-4 §6.4.6.1: a CSCD DESCRIPTOR ID past the list names no copy target.
    if (index >= params.cscds.size())
      return ScsiOutcome::check_condition(copy_aborted(copy_target_device_not_reachable));
    if (!targets[index]) {
      const auto& d = params.cscds[index];
      auto t = locate(state, nexus, port, d, out.peers);
      // Not a logical unit this initiator reaches: another tenant's, a target it has not logged
      // in to, or none at all.
      if (!t) return ScsiOutcome::check_condition(copy_aborted(unreachable_copy_target));
      if (d.block_length_bytes != t->unit->unit->block_size_bytes())
        return ScsiOutcome::check_condition(SenseData::invalid_field_in_parameter_list(static_cast<std::uint16_t>(d.offset + 29)));
      targets[index] = std::move(*t);
    }
    return &*targets[index];
  };
  for (const auto& s : params.segments) {
    auto src = target_of(s.source);
    if (auto* o = std::get_if<ScsiOutcome>(&src)) return *o;
    auto dst = target_of(s.destination);
    if (auto* o = std::get_if<ScsiOutcome>(&dst)) return *o;
    const CopyTarget& source = *std::get<const CopyTarget*>(src);
    const CopyTarget& destination = *std::get<const CopyTarget*>(dst);
    const std::uint32_t bs = source.unit->unit->block_size_bytes();
    if (destination.unit->unit->block_size_bytes() != bs) {
      return ScsiOutcome::check_condition(SenseData::invalid_field_in_parameter_list(s.offset));
    }
    if (std::uint64_t{s.blocks} * bs > xcopy_max_segment_bytes) {
      return ScsiOutcome::check_condition(SenseData::invalid_field_in_parameter_list(static_cast<std::uint16_t>(s.offset + 10)));
    }
    // Ranges on both sides are checked before anything is copied: the copy is refused as a whole.
    if (s.blocks != 0 && (!in_range(*source.unit->unit, s.source_lba, s.blocks) ||
                          !in_range(*destination.unit->unit, s.destination_lba, s.blocks))) {
      return ScsiOutcome::check_condition(copy_aborted(scsi::asc::no_additional_sense, s.offset));
    }
    if (auto refused = access_refused(source, false)) return *refused;
    if (auto refused = access_refused(destination, true)) return *refused;
    out.segments.push_back({&s, source.unit, destination.unit, source.unit->resets->load(), destination.unit->resets->load()});
  }
  return out;
}

// Copies one segment through move_blocks(). Overlapping ranges of one logical unit with the
// destination above the source are copied from the end, so every block is read before it is
// overwritten.
Awaitable<std::optional<ScsiOutcome>> copy_segment(const CommandPlan& plan, const ResolvedSegment& r,
                                                   std::vector<std::byte>& buffer, CopyStatus& status) {
  const BlockSegment& s = *r.segment;
  BlockMove move;
  move.source = &r.source->unit->backend();
  move.source_lba = s.source_lba;
  set_destination(move, *r.destination);
  move.destination_lba = s.destination_lba;
  move.blocks = s.blocks;
  move.block_size_bytes = r.source->unit->block_size_bytes();
  move.backwards = r.source == r.destination && s.destination_lba > s.source_lba &&
                   s.destination_lba < s.source_lba + s.blocks;
  MoveHooks hooks;
  hooks.aborted = copy_aborted(scsi::asc::no_additional_sense, s.offset);
  hooks.moved = [&status, bs = move.block_size_bytes](std::uint64_t n) { status.bytes_transferred += n * bs; };
  hooks.stopped = [src = r.source->resets, src_at = r.source_resets, dst = r.destination->resets,
                   dst_at = r.destination_resets] { return src->load() != src_at || dst->load() != dst_at; };
  auto outcome = co_await move_blocks(plan, move, buffer, hooks);
  // SPC-4 §6.4.3: an error while a segment is processed (a backend's read or write error, a
  // sanitize that started meanwhile) ends the command with COPY ABORTED, its additional sense code
  // kept, and the segment pointer; the INFORMATION field is the backend's and does not apply.
  if (outcome && outcome->sense && outcome->sense->key != SenseKey::copy_aborted) {
    outcome = ScsiOutcome::check_condition(copy_aborted({outcome->sense->asc, outcome->sense->ascq}, s.offset));
  }
  co_return outcome;
}

}  // namespace

Awaitable<ScsiOutcome> execute_extended_copy(const ScsiDispatcher::State& state, NexusId nexus, const CommandPlan& plan,
                                             ConstByteSpan list) {
  if (list.empty()) co_return ScsiOutcome::good();  // PARAMETER LIST LENGTH 0
  auto params = parse_extended_copy_parameters(list);
  if (!params) co_return ScsiOutcome::check_condition(params.error());
  CopyManager& manager = *state.copy_manager;
  const bool hold = params->usage != ListIdUsage::discard;
  if (hold && !manager.begin(nexus.value, params->list_id))
    co_return ScsiOutcome::check_condition(illegal(operation_in_progress));
  CopyStatus status;
  const auto end = [&](ScsiOutcome o) {
    status.state = o.status == scsi::Status::good ? CopyStatus::State::completed : CopyStatus::State::completed_with_errors;
    if (hold) manager.update(nexus.value, params->list_id, status);
    return o;
  };
  if (!manager.try_start()) co_return end(ScsiOutcome{scsi::Status::busy, std::nullopt, 0});
  struct Running {
    CopyManager& m;
    ~Running() { m.finish(); }
  } running{manager};
  auto resolved = resolve(state, nexus.value, *params);
  if (auto* o = std::get_if<ScsiOutcome>(&resolved)) co_return end(*o);
  const auto& segments = std::get<Resolution>(resolved).segments;
  std::uint64_t largest = 0;
  for (const auto& r : segments) largest = std::max<std::uint64_t>(largest, std::uint64_t{r.segment->blocks} * r.source->unit->block_size_bytes());
  std::vector<std::byte> buffer(std::min<std::uint64_t>(largest, xcopy_chunk_bytes));
  for (const auto& r : segments) {
    if (auto failed = co_await copy_segment(plan, r, buffer, status)) co_return end(*failed);
    ++status.segments_processed;
    if (hold) manager.update(nexus.value, params->list_id, status);
  }
  co_return end(ScsiOutcome::good());
}

ScsiOutcome execute_receive_copy_results(const ScsiDispatcher::State& state, NexusId nexus, const CommandPlan& plan,
                                         ConstByteSpan cdb, ByteSpan out) {
  if ((load_u8(cdb.data() + 1) & 0x1f) == operating_parameters_sa)
    return reply_data(encode_operating_parameters(plan.unit->block_size_bytes()), out);
  // SPC-4 §6.18.3: the status of the copy with this LIST IDENTIFIER from this I_T nexus.
  const auto status = state.copy_manager->take(nexus.value, load_u8(cdb.data() + 2));
  if (!status) return ScsiOutcome::check_condition(SenseData::invalid_field_in_cdb(2));
  return reply_data(encode_copy_status(*status), out);
}

}  // namespace iserkit::target::detail
