// Token copy (SBC-4): POPULATE TOKEN, WRITE USING TOKEN, RECEIVE ROD TOKEN INFORMATION and
// the process's ROD token table; see token_copy.hpp for the semantics chosen. The data moves
// with the copy manager's chunk mover (move_blocks(), extended_copy.cpp), inside the command.
#include "scsi/token_copy.hpp"

#include <openssl/crypto.h>
#include <openssl/rand.h>

#include <algorithm>

#include "scsi/device_state.hpp"
#include "scsi/extended_copy.hpp"
#include "scsi/handlers.hpp"
#include "scsi/sanitize.hpp"

namespace iserkit::target::detail {

using scsi::SenseData;
using scsi::SenseKey;

namespace {

constexpr std::size_t populate_header_bytes = 16;  // SBC-4 POPULATE TOKEN: the parameter list header
constexpr std::size_t write_header_bytes = 536;    // SBC-4 WRITE USING TOKEN: up to the first range descriptor
constexpr std::size_t range_descriptor_bytes = 16;
constexpr std::uint16_t rod_token_length_field = rod_token_bytes - 8;  // ROD TOKEN LENGTH: 01F8h
constexpr std::size_t random_from = 128;  // token bytes 128..511: from the CSPRNG
constexpr std::uint8_t identification_cscd = 0xe4;

SenseData illegal(scsi::AscPair pair) noexcept { return SenseData::make(SenseKey::illegal_request, pair); }

// Reads the block device range descriptors of [at, at + bytes) (SBC-4).
std::vector<RangeDescriptor> read_ranges(const std::byte* at, std::size_t bytes) {
  std::vector<RangeDescriptor> out;
  out.reserve(bytes / range_descriptor_bytes);
  for (std::size_t i = 0; i < bytes; i += range_descriptor_bytes)
    out.push_back({load_be64(at + i), load_be32(at + i + 8)});
  return out;
}

// The descriptor list length of a parameter list: a multiple of 16 bytes, at least one, at most
// token_max_range_descriptors descriptors.
std::optional<SenseData> check_descriptor_list_length(std::size_t bytes, std::uint16_t field) noexcept {
  if (bytes == 0 || bytes % range_descriptor_bytes != 0) return SenseData::invalid_field_in_parameter_list(field);
  if (bytes / range_descriptor_bytes > token_max_range_descriptors) return illegal(too_many_segment_descriptors);
  return std::nullopt;
}

// The lengths both token parameter lists start with (SBC-4 POPULATE TOKEN, WRITE USING TOKEN):
// at least `min_bytes`; DATA LENGTH (bytes 0-1, n - 1) within the list; the header of
// `header_bytes` plus the BLOCK DEVICE RANGE DESCRIPTOR LENGTH (at byte `descriptor_length_at`)
// within DATA LENGTH. Returns that descriptor length (bytes).
scsi::SenseOr<std::size_t> range_descriptor_list_bytes(ConstByteSpan list, std::size_t min_bytes,
                                                       std::size_t header_bytes,
                                                       std::size_t descriptor_length_at) noexcept {
  if (list.size() < min_bytes) return tl::unexpected(illegal(scsi::asc::parameter_list_length_error));
  const std::size_t data_length = std::size_t{load_be16(list.data())} + 2;
  const std::size_t descriptor_bytes = load_be16(list.data() + descriptor_length_at);
  if (data_length > list.size() || header_bytes + descriptor_bytes > data_length)
    return tl::unexpected(illegal(scsi::asc::parameter_list_length_error));
  return descriptor_bytes;
}

bool populate_type_accepted(std::uint32_t type) noexcept {
  return type == rod_type_point_in_time_default || type == rod_type_point_in_time_change_vulnerable ||
         type == rod_type_point_in_time_any;
}

}  // namespace

scsi::SenseOr<PopulateTokenParameters> parse_populate_token_parameters(ConstByteSpan list) noexcept {
  const auto descriptors = range_descriptor_list_bytes(list, populate_header_bytes, populate_header_bytes, 14);
  if (!descriptors) return tl::unexpected(descriptors.error());
  const std::size_t descriptor_bytes = *descriptors;
  const std::byte* p = list.data();
  PopulateTokenParameters out;
  const std::uint8_t flags = load_u8(p + 2);
  out.immed = (flags & 0x01) != 0;
  out.rtv = (flags & 0x02) != 0;
  out.inactivity_seconds = load_be32(p + 4);
  out.rod_type = load_be32(p + 8);
  if (out.inactivity_seconds > token_max_inactivity_seconds) return tl::unexpected(SenseData::invalid_field_in_parameter_list(4));
  // SBC-4: with RTV the ROD TYPE must be one the copy manager makes (RTV = 0: its choice).
  if (out.rtv && !populate_type_accepted(out.rod_type)) return tl::unexpected(SenseData::invalid_field_in_parameter_list(8));
  if (auto bad = check_descriptor_list_length(descriptor_bytes, 14)) return tl::unexpected(*bad);
  out.ranges = read_ranges(p + populate_header_bytes, descriptor_bytes);
  return out;
}

scsi::SenseOr<WriteUsingTokenParameters> parse_write_using_token_parameters(ConstByteSpan list) noexcept {
  const auto descriptors =
      range_descriptor_list_bytes(list, write_header_bytes + range_descriptor_bytes, write_header_bytes, 534);
  if (!descriptors) return tl::unexpected(descriptors.error());
  const std::size_t descriptor_bytes = *descriptors;
  const std::byte* p = list.data();
  WriteUsingTokenParameters out;
  const std::uint8_t flags = load_u8(p + 2);
  out.immed = (flags & 0x01) != 0;
  out.delete_token = (flags & 0x02) != 0;
  out.offset_into_rod = load_be64(p + 8);
  std::copy(p + 16, p + 16 + rod_token_bytes, out.token.begin());
  if (auto bad = check_descriptor_list_length(descriptor_bytes, 534)) return tl::unexpected(*bad);
  out.ranges = read_ranges(p + write_header_bytes, descriptor_bytes);
  return out;
}

scsi::SenseOr<std::uint64_t> check_ranges(const std::vector<RangeDescriptor>& ranges, std::uint64_t block_count,
                                          std::uint64_t max_blocks, bool disjoint, std::uint16_t first_offset) noexcept {
  std::uint64_t total = 0;
  for (std::size_t i = 0; i < ranges.size(); ++i) {
    const auto& r = ranges[i];
    const auto field = static_cast<std::uint16_t>(first_offset + i * range_descriptor_bytes);
    // SBC-4: a range past the end of the medium (a zero-length one is no transfer).
    if (r.blocks != 0 && (r.lba >= block_count || r.blocks > block_count - r.lba)) {
      SenseData s = illegal(scsi::asc::lba_out_of_range);
      s.information = r.lba;
      return tl::unexpected(s);
    }
    total += r.blocks;  // at most 64 × (2^32 - 1): no overflow
    if (total > max_blocks) return tl::unexpected(SenseData::invalid_field_in_parameter_list(static_cast<std::uint16_t>(field + 8)));
    if (disjoint && r.blocks != 0) {
      for (std::size_t j = 0; j < i; ++j) {
        const auto& o = ranges[j];
        if (o.blocks != 0 && r.lba < o.lba + o.blocks && o.lba < r.lba + r.blocks)
          return tl::unexpected(SenseData::invalid_field_in_parameter_list(field));
      }
    }
  }
  return total;
}

bool random_bytes(ByteSpan out) noexcept {
  return out.empty() || RAND_bytes(reinterpret_cast<unsigned char*>(out.data()), static_cast<int>(out.size())) == 1;
}

// ---------------------------------------------------------------------------------------------
// TokenStore
// ---------------------------------------------------------------------------------------------

RodToken::~RodToken() {
  if (watches) watches->unwatch(watch_id);
}

TokenStore::TokenStore(Clock clock) : clock_(std::move(clock)) {}

std::shared_ptr<TokenStore> TokenStore::process() {
  static const auto store = std::make_shared<TokenStore>();
  return store;
}

void TokenStore::drop_expired_locked(std::chrono::steady_clock::time_point now) {
  std::erase_if(tokens_, [&](const std::shared_ptr<RodToken>& t) { return t->in_use == 0 && now - t->last_used > t->inactivity; });
}

bool TokenStore::add(std::shared_ptr<RodToken> token) {
  std::vector<std::shared_ptr<RodToken>> dropped;  // destroyed outside the mutex (unwatch)
  std::lock_guard g(mutex_);
  const auto now = clock_();
  if (tokens_.size() >= token_max_total ||
      static_cast<std::size_t>(std::count_if(tokens_.begin(), tokens_.end(), [&](const auto& t) {
        return t->server == token->server && t->nexus == token->nexus;
      })) >= token_max_per_nexus) {
    for (auto& t : tokens_)
      if (t->in_use == 0 && now - t->last_used > t->inactivity) dropped.push_back(t);
    drop_expired_locked(now);
  }
  if (tokens_.size() >= token_max_total) return false;
  const auto mine = std::count_if(tokens_.begin(), tokens_.end(), [&](const auto& t) {
    return t->server == token->server && t->nexus == token->nexus;
  });
  if (static_cast<std::size_t>(mine) >= token_max_per_nexus) return false;
  token->last_used = now;
  tokens_.push_back(std::move(token));
  return true;
}

TokenStore::Found TokenStore::use(ConstByteSpan bytes, std::string_view tenant) {
  std::shared_ptr<RodToken> expired;  // destroyed after the mutex is released
  std::lock_guard g(mutex_);
  if (bytes.size() != rod_token_bytes) return {nullptr, token_unknown};
  for (auto it = tokens_.begin(); it != tokens_.end(); ++it) {
    auto& t = *it;
    // Every token is compared in full and in constant time: timing tells nothing of a prefix.
    if (CRYPTO_memcmp(t->bytes.data(), bytes.data(), rod_token_bytes) != 0) continue;
    // Another tenant's token is unknown here, exactly like bytes that never were a token.
    if (t->tenant != tenant) return {nullptr, token_unknown};
    const auto now = clock_();
    if (t->in_use == 0 && now - t->last_used > t->inactivity) {
      expired = t;
      tokens_.erase(it);
      return {nullptr, token_expired};
    }
    if (t->deleted) return {nullptr, token_deleted};
    if (t->cancelled->load()) return {nullptr, token_cancelled};
    ++t->in_use;
    return {t, std::nullopt};
  }
  return {nullptr, token_unknown};
}

void TokenStore::release(const std::shared_ptr<RodToken>& token, bool delete_token) {
  std::lock_guard g(mutex_);
  --token->in_use;
  token->last_used = clock_();
  if (delete_token) token->deleted = true;
}

void TokenStore::drop_server(const void* server) {
  std::vector<std::shared_ptr<RodToken>> dropped;
  std::lock_guard g(mutex_);
  for (auto& t : tokens_)
    if (t->server == server) dropped.push_back(t);
  std::erase_if(tokens_, [&](const std::shared_ptr<RodToken>& t) { return t->server == server; });
}

std::size_t TokenStore::size() const {
  std::lock_guard g(mutex_);
  return tokens_.size();
}

// ---------------------------------------------------------------------------------------------
// RECEIVE ROD TOKEN INFORMATION
// ---------------------------------------------------------------------------------------------

namespace {
bool running(RodStatus::State s) noexcept {
  return s == RodStatus::State::in_progress || s == RodStatus::State::in_progress_background;
}
}  // namespace

std::vector<std::byte> encode_rod_token_information(const RodStatus& status) {
  std::array<std::byte, scsi::max_sense_size_bytes> sense{};
  const std::size_t sense_bytes = status.sense ? scsi::encode_sense(*status.sense, scsi::SenseFormat::fixed, sense) : 0;
  const std::size_t token_bytes = status.token ? 2 + rod_token_bytes : 0;
  std::vector<std::byte> d(32 + sense_bytes + 4 + token_bytes);
  store_be32(d.data(), static_cast<std::uint32_t>(d.size() - 4));  // AVAILABLE DATA
  store_u8(d.data() + 4, status.service_action);                   // RESPONSE TO SERVICE ACTION
  store_u8(d.data() + 5, static_cast<std::uint8_t>(status.state)); // COPY OPERATION STATUS
  store_be16(d.data() + 6, 0);                                     // OPERATION COUNTER
  // ESTIMATED STATUS UPDATE DELAY (ms): a copy in progress is worth asking again soon.
  store_be32(d.data() + 8, running(status.state) ? 100 : 0);
  // EXTENDED COPY COMPLETION STATUS: the command's status.
  store_u8(d.data() + 12, status.state == RodStatus::State::completed_with_errors ? 0x02 : 0x00);
  store_u8(d.data() + 13, static_cast<std::uint8_t>(sense_bytes));  // LENGTH OF THE SENSE DATA FIELD
  store_u8(d.data() + 14, static_cast<std::uint8_t>(sense_bytes));  // SENSE DATA LENGTH
  store_u8(d.data() + 15, 0xf1);  // TRANSFER COUNT UNITS: logical blocks
  store_be64(d.data() + 16, status.transfer_count_blocks);
  store_be16(d.data() + 24, status.segments_processed);
  std::copy(sense.begin(), sense.begin() + static_cast<std::ptrdiff_t>(sense_bytes), d.begin() + 32);
  std::byte* tail = d.data() + 32 + sense_bytes;
  store_be32(tail, static_cast<std::uint32_t>(token_bytes));  // ROD TOKEN DESCRIPTORS LENGTH
  if (status.token) std::copy(status.token->begin(), status.token->end(), tail + 4 + 2);  // 2 reserved bytes first
  return d;
}

// ---------------------------------------------------------------------------------------------
// VPD 0x8F descriptors
// ---------------------------------------------------------------------------------------------

void append_tpc_descriptor(std::vector<std::byte>& out, std::uint16_t type, std::vector<std::byte> body) {
  body.resize((body.size() + 3) / 4 * 4);
  std::array<std::byte, 4> header{};
  store_be16(header.data(), type);
  store_be16(header.data() + 2, static_cast<std::uint16_t>(body.size()));
  out.insert(out.end(), header.begin(), header.end());
  out.insert(out.end(), body.begin(), body.end());
}

void append_block_rod_limits(std::vector<std::byte>& out, std::uint32_t block_size_bytes) {
  // 0000h Block Device ROD Limits (SBC-4): bytes after the descriptor header.
  std::vector<std::byte> body(32);
  store_be16(body.data() + 6, token_max_range_descriptors);       // MAXIMUM RANGE DESCRIPTORS
  store_be32(body.data() + 8, token_max_inactivity_seconds);      // MAXIMUM INACTIVITY TIMEOUT
  store_be32(body.data() + 12, token_default_inactivity_seconds); // DEFAULT INACTIVITY TIMEOUT
  store_be64(body.data() + 16, token_max_bytes / block_size_bytes);  // MAXIMUM TOKEN TRANSFER SIZE (blocks)
  store_be64(body.data() + 24, token_max_bytes / block_size_bytes);  // OPTIMAL TRANSFER COUNT (blocks)
  append_tpc_descriptor(out, 0x0000, std::move(body));
}

void append_rod_token_descriptors(std::vector<std::byte>& out) {
  std::vector<std::byte> body;
  // 0106h ROD Token Features (SPC-4 §7.8.17.7): REMOTE TOKENS 0 (none), lifetimes, then one block
  // device ROD token type specific features descriptor.
  body.assign(32 + 48, std::byte{0});
  store_be32(body.data() + 12, 1);                              // MINIMUM TOKEN LIFETIME (s)
  store_be32(body.data() + 16, token_max_inactivity_seconds);   // MAXIMUM TOKEN LIFETIME (s)
  store_be32(body.data() + 20, token_max_inactivity_seconds);   // MAXIMUM TOKEN INACTIVITY TIMEOUT (s)
  store_be16(body.data() + 30, 48);                             // TYPE SPECIFIC FEATURES LENGTH
  std::byte* f = body.data() + 32;
  store_u8(f, 0x00);                                            // peripheral device type: block
  store_be16(f + 2, 44);                                        // descriptor length
  store_be16(f + 6, 1);                                         // OPTIMAL BLOCK ROD LENGTH GRANULARITY
  store_be64(f + 8, token_max_bytes);                           // MAXIMUM BYTES IN BLOCK ROD
  store_be64(f + 16, token_max_bytes);                          // OPTIMAL BYTES IN BLOCK ROD TRANSFER
  store_be64(f + 24, xcopy_chunk_bytes);                        // OPTIMAL BYTES TO TOKEN PER SEGMENT
  store_be64(f + 32, xcopy_chunk_bytes);                        // OPTIMAL BYTES FROM TOKEN PER SEGMENT
  append_tpc_descriptor(out, 0x0106, std::move(body));
  // 0108h Supported ROD Types (SPC-4 §7.8.17.8): point in time change vulnerable (in and out: made
  // by POPULATE TOKEN, taken by WRITE USING TOKEN) and the block device zero ROD token (in only).
  body.assign(4 + 2 * 64, std::byte{0});
  store_be16(body.data() + 2, 2 * 64);                          // ROD TYPE DESCRIPTORS LENGTH
  store_be32(body.data() + 4, rod_type_point_in_time_change_vulnerable);
  store_u8(body.data() + 8, 0x03);                              // TOKEN_IN, TOKEN_OUT
  store_be32(body.data() + 4 + 64, rod_type_block_device_zero);
  store_u8(body.data() + 8 + 64, 0x02);                         // TOKEN_IN
  append_tpc_descriptor(out, 0x0108, std::move(body));
}

// ---------------------------------------------------------------------------------------------
// Phase 1
// ---------------------------------------------------------------------------------------------

void plan_token_command(CommandPlan& plan, ConstByteSpan cdb) noexcept {
  const bool populate = (load_u8(cdb.data() + 1) & 0x1f) == populate_token_sa;
  const std::uint32_t length = load_be32(cdb.data() + 10);
  if (length == 0) return;  // SBC-4: not an error, nothing is done
  const std::size_t header = populate ? populate_header_bytes : write_header_bytes;
  // At most what the 16-bit DATA LENGTH can describe (65537 bytes), so a list of too many
  // descriptors reaches the parser and gets TOO MANY SEGMENT DESCRIPTORS.
  if (length < header + range_descriptor_bytes || length > max_token_parameter_list_bytes) {
    // Refused before the Data-Out is asked for: a peer cannot make the target buffer more.
    plan.error = illegal(scsi::asc::parameter_list_length_error);
    return;
  }
  plan.direction = DataDirection::to_target;
  plan.transfer_length_bytes = length;
}

void plan_receive_rod_token_information(CommandPlan& plan, ConstByteSpan cdb) noexcept {
  plan_data_in(plan, load_be32(cdb.data() + 10));
}

// ---------------------------------------------------------------------------------------------
// Phase 2
// ---------------------------------------------------------------------------------------------

namespace {

std::vector<std::pair<std::uint64_t, std::uint64_t>> spans_of(const std::vector<RangeDescriptor>& ranges) {
  std::vector<std::pair<std::uint64_t, std::uint64_t>> out;
  for (const auto& r : ranges)
    if (r.blocks != 0) out.emplace_back(r.lba, r.lba + r.blocks);
  return out;
}

// The 512 bytes of a new token (SPC-4 §5.17, ROD tokens) for `blocks` of `unit`, or nullopt when the
// random generator failed.
std::optional<std::array<std::byte, rod_token_bytes>> make_token_bytes(const LogicalUnit& unit, std::uint64_t blocks) {
  std::array<std::byte, rod_token_bytes> t{};
  store_be32(t.data(), rod_type_point_in_time_change_vulnerable);  // ROD TYPE
  store_be16(t.data() + 6, rod_token_length_field);                // ROD TOKEN LENGTH
  // COPY MANAGER ROD TOKEN IDENTIFIER (8..15) and the vendor specific part (128..511): random.
  if (!random_bytes(ByteSpan(t.data() + 8, 8)) || !random_bytes(ByteSpan(t.data() + random_from, rod_token_bytes - random_from)))
    return std::nullopt;
  // CREATOR LOGICAL UNIT DESCRIPTOR (16..47): an identification CSCD descriptor (E4h) with the
  // unit's NAA designator and its block length (SPC-4 §6.4.5.1).
  std::byte* c = t.data() + 16;
  store_u8(c, identification_cscd);
  store_u8(c + 4, 0x01);  // CODE SET binary
  store_u8(c + 5, 0x03);  // ASSOCIATION logical unit, DESIGNATOR TYPE NAA
  const auto naa = unit.naa();
  const std::size_t n = std::min<std::size_t>(naa.size(), 20);
  store_u8(c + 7, static_cast<std::uint8_t>(n));
  for (std::size_t i = 0; i < n; ++i) store_u8(c + 8 + i, naa[i]);
  store_be24(c + 29, unit.block_size_bytes());
  // NUMBER OF BYTES REPRESENTED (48..63, 128 bits): the high 64 bits stay zero.
  store_be64(t.data() + 56, blocks * unit.block_size_bytes());
  // Block device type specific data: the LOGICAL BLOCK LENGTH as READ CAPACITY (16) bytes 8..11.
  store_be32(t.data() + 88, unit.block_size_bytes());
  return t;
}

ScsiOutcome busy() noexcept { return ScsiOutcome{scsi::Status::busy, std::nullopt, 0}; }

// The unit of `token` if a device server of this tenant (`state` or its copy domain peers)
// still holds it, with that server kept alive in `keep`.
UnitState* reachable_unit(const ScsiDispatcher::State& state, const RodToken& token,
                          std::shared_ptr<const ScsiDispatcher>& keep) {
  const auto unit = token.unit.lock();
  if (!unit) return nullptr;
  const auto find = [&](const ScsiDispatcher::State& s) -> UnitState* {
    for (auto* u : s.all_units())
      if (u->unit.get() == unit.get()) return u;
    return nullptr;
  };
  if (auto* u = find(state)) return u;
  if (!state.copy_domain) return nullptr;
  for (auto& peer : state.copy_domain->servers_of(state.copy_tenant)) {
    if (auto* u = find(peer->internal_state())) {
      keep = std::move(peer);
      return u;
    }
  }
  return nullptr;
}

}  // namespace

Awaitable<ScsiOutcome> execute_populate_token(const ScsiDispatcher::State& state, NexusId nexus,
                                              const CommandPlan& plan, ConstByteSpan cdb, ConstByteSpan list) {
  if (list.empty()) co_return ScsiOutcome::good();
  auto params = parse_populate_token_parameters(list);
  if (!params) co_return ScsiOutcome::check_condition(params.error());
  UnitState* unit_state = nullptr;
  for (auto* u : state.all_units())
    if (u->unit.get() == plan.unit) unit_state = u;
  if (unit_state == nullptr) co_return ScsiOutcome::check_condition(illegal(scsi::asc::logical_unit_not_supported));
  const LogicalUnit& unit = *plan.unit;
  auto total = check_ranges(params->ranges, unit.block_count(), token_max_bytes / unit.block_size_bytes(), false,
                            populate_header_bytes);
  if (!total) co_return ScsiOutcome::check_condition(total.error());
  const std::uint32_t list_id = load_be32(cdb.data() + 6);
  RodStatuses& statuses = *state.rod_statuses;
  if (!statuses.begin(nexus.value, list_id, populate_token_sa))
    co_return ScsiOutcome::check_condition(illegal(operation_in_progress));
  RodStatus status;
  status.service_action = populate_token_sa;
  const auto end = [&](ScsiOutcome o) {
    status.state = o.status == scsi::Status::good ? RodStatus::State::completed : RodStatus::State::completed_with_errors;
    status.sense = o.sense;
    statuses.update(nexus.value, list_id, status);
    return o;
  };
  auto token = std::make_shared<RodToken>();
  auto bytes = make_token_bytes(unit, *total);
  if (!bytes) co_return end(ScsiOutcome::check_condition(SenseData::make(SenseKey::copy_aborted, insufficient_resources_to_create_rod_token)));
  token->bytes = *bytes;
  token->tenant = state.copy_tenant;
  token->server = &state;
  token->nexus = nexus.value;
  token->unit = unit_state->unit;
  token->block_size_bytes = unit.block_size_bytes();
  for (const auto& r : params->ranges)
    if (r.blocks != 0) token->ranges.push_back(r);
  token->blocks = *total;
  token->inactivity = std::chrono::seconds(params->inactivity_seconds == 0 ? token_default_inactivity_seconds
                                                                           : params->inactivity_seconds);
  // The token watches its ranges before it exists; a write already in flight on them (it took its
  // range before the watch) would change the data after this point: wait for it to finish.
  const auto spans = spans_of(token->ranges);
  token->watches = unit_state->ranges.watches();
  for (int attempt = 0;; ++attempt) {
    // A fresh flag each time: a write seen by an earlier attempt's watch must not cancel this one.
    token->cancelled = std::make_shared<std::atomic<bool>>(false);
    token->watch_id = token->watches->watch(spans, token->cancelled);
    if (!unit_state->ranges.any_held(spans)) break;
    token->watches->unwatch(token->watch_id);
    if (attempt == 10000) co_return end(busy());  // a second of writes in flight: try again later
    asio::steady_timer timer(co_await asio::this_coro::executor);
    timer.expires_after(std::chrono::microseconds(100));
    boost::system::error_code ec;
    co_await timer.async_wait(use_awaitable_ec(ec));
  }
  // A write that took its range after watch() (and may have finished before any_held()) already
  // cancelled the token: conservative, never wrong.
  if (!state.tokens->add(token))
    co_return end(ScsiOutcome::check_condition(SenseData::make(SenseKey::copy_aborted, insufficient_resources_to_create_rod_token)));
  status.transfer_count_blocks = *total;
  status.segments_processed = static_cast<std::uint16_t>(params->ranges.size());
  status.token = token->bytes;
  co_return end(ScsiOutcome::good());
}

namespace {

// Everything one WRITE USING TOKEN copy needs, owned, so that a background copy (IMMED = 1) does
// not depend on the command, its session or the device server staying alive.
struct WriteJob {
  std::shared_ptr<TokenStore> store;
  std::shared_ptr<RodToken> token;                   // null: the block device zero ROD token
  std::shared_ptr<const LogicalUnit> source;         // the token's unit (null with the zero token)
  std::shared_ptr<LogicalUnit> destination;
  std::shared_ptr<RangeLock> destination_ranges;
  std::shared_ptr<SanitizeState> destination_sanitize;
  std::shared_ptr<std::atomic<std::uint32_t>> resets;  // the destination's LU resets
  std::uint32_t resets_at_start = 0;
  std::shared_ptr<CopyManager> manager;              // try_start() counted this copy
  std::shared_ptr<RodStatuses> statuses;
  std::uint64_t nexus = 0;
  std::uint32_t list_id = 0;
  RodStatus status;
  std::vector<RangeDescriptor> ranges;               // the destination ranges
  std::uint64_t offset_into_rod = 0;
  std::uint64_t total_blocks = 0;
  bool delete_token = false;

  ~WriteJob() {
    if (token) store->release(token, delete_token);
    if (manager) manager->finish();
  }
  // Records how the copy ended for RECEIVE ROD TOKEN INFORMATION.
  ScsiOutcome end(ScsiOutcome o) {
    status.state = o.status == scsi::Status::good ? RodStatus::State::completed : RodStatus::State::completed_with_errors;
    status.sense = o.sense;
    statuses->update(nexus, list_id, status);
    return o;
  }
};

// The copy of a WRITE USING TOKEN: the destination ranges in order, from block OFFSET INTO ROD of
// the ROD (the token's ranges in order), through the chunk mover. `plan` is the command's (its
// abort flag) in the foreground, nullptr in the background (then only a reset stops it).
Awaitable<ScsiOutcome> run_write_job(std::shared_ptr<WriteJob> job, const CommandPlan* plan) {
  static const CommandPlan background_plan;  // abort_requested stays false
  const CommandPlan& p = plan != nullptr ? *plan : background_plan;
  const std::uint32_t bs = job->destination->block_size_bytes();
  std::vector<std::byte> buffer(std::min<std::uint64_t>(std::max<std::uint64_t>(job->total_blocks, 1) * bs, xcopy_chunk_bytes));
  MoveHooks hooks;
  hooks.aborted = SenseData::make(SenseKey::copy_aborted, scsi::asc::no_additional_sense);
  if (job->token) {
    // SBC-4 token copy: a change vulnerable token that a write cancelled ends the copy.
    hooks.after_read = [cancelled = job->token->cancelled]() -> std::optional<ScsiOutcome> {
      if (!cancelled->load()) return std::nullopt;
      return ScsiOutcome::check_condition(SenseData::make(SenseKey::copy_aborted, token_cancelled));
    };
  }
  hooks.stopped = [resets = job->resets, at = job->resets_at_start] { return resets->load() != at; };
  hooks.moved = [&job](std::uint64_t n) {
    job->status.transfer_count_blocks += n;
    job->statuses->update(job->nexus, job->list_id, job->status);
  };
  // Walk the ROD (the token's ranges from OFFSET INTO ROD) along the destination ranges.
  const std::vector<RangeDescriptor> no_ranges;
  const auto& rod = job->token ? job->token->ranges : no_ranges;
  std::size_t source_index = 0;
  std::uint64_t source_skip = job->offset_into_rod;
  while (source_index < rod.size() && source_skip >= rod[source_index].blocks) {
    source_skip -= rod[source_index].blocks;
    ++source_index;
  }
  for (const auto& d : job->ranges) {
    std::uint64_t done = 0;
    while (done < d.blocks) {
      BlockMove move;
      move.destination = &job->destination->backend();
      move.destination_ranges = job->destination_ranges.get();
      move.destination_sanitize = job->destination_sanitize.get();
      move.destination_stats = &job->destination->stats();
      move.destination_lba = d.lba + done;
      move.block_size_bytes = bs;
      std::uint64_t n = d.blocks - done;
      if (job->token) {
        const auto& s = rod[source_index];
        n = std::min<std::uint64_t>(n, s.blocks - source_skip);
        move.source = &job->source->backend();
        move.source_lba = s.lba + source_skip;
        // One unit, the destination above an overlapping source: copy from the end.
        move.backwards = job->source.get() == job->destination.get() && move.destination_lba > move.source_lba &&
                         move.destination_lba < move.source_lba + n;
      }
      move.blocks = n;
      if (auto failed = co_await move_blocks(p, move, buffer, hooks)) co_return job->end(*failed);
      done += n;
      if (job->token) {
        source_skip += n;
        if (source_skip == rod[source_index].blocks) {
          source_skip = 0;
          ++source_index;
        }
      }
    }
    ++job->status.segments_processed;
  }
  co_return job->end(ScsiOutcome::good());
}

}  // namespace

Awaitable<ScsiOutcome> execute_write_using_token(const ScsiDispatcher::State& state, NexusId nexus,
                                                 const CommandPlan& plan, ConstByteSpan cdb, ConstByteSpan list) {
  if (list.empty()) co_return ScsiOutcome::good();
  auto params = parse_write_using_token_parameters(list);
  if (!params) co_return ScsiOutcome::check_condition(params.error());
  if (plan.write_protected) co_return ScsiOutcome::check_condition(write_protected());
  UnitState* destination = nullptr;
  for (auto* u : state.all_units())
    if (u->unit.get() == plan.unit) destination = u;
  if (destination == nullptr) co_return ScsiOutcome::check_condition(illegal(scsi::asc::logical_unit_not_supported));
  const LogicalUnit& unit = *plan.unit;
  const std::uint32_t bs = unit.block_size_bytes();
  auto total = check_ranges(params->ranges, unit.block_count(), token_max_bytes / bs, true, write_header_bytes);
  if (!total) co_return ScsiOutcome::check_condition(total.error());
  // The ROD token (SPC-4 §5.17, ROD tokens): its length, then its type.
  if (load_be16(params->token.data() + 6) != rod_token_length_field) co_return ScsiOutcome::check_condition(illegal(invalid_token_length));
  const std::uint32_t type = load_be32(params->token.data());
  const bool zero = type == rod_type_block_device_zero;
  if (!zero && type != rod_type_point_in_time_change_vulnerable) co_return ScsiOutcome::check_condition(illegal(unsupported_token_type));

  auto job = std::make_shared<WriteJob>();
  job->store = state.tokens;
  job->delete_token = params->delete_token;
  if (!zero) {
    auto found = state.tokens->use(params->token, state.copy_tenant);
    if (!found.token) co_return ScsiOutcome::check_condition(illegal(*found.error));
    job->token = found.token;  // released by ~WriteJob
    std::shared_ptr<const ScsiDispatcher> keep;
    // Its unit went away, or no target of this tenant holds it any more: unknown here.
    if (reachable_unit(state, *job->token, keep) == nullptr) co_return ScsiOutcome::check_condition(illegal(token_unknown));
    job->source = job->token->unit.lock();
    if (!job->source) co_return ScsiOutcome::check_condition(illegal(token_unknown));
    // The ROD from OFFSET INTO ROD must cover every destination block, in the unit's block size.
    if (job->token->block_size_bytes != bs || params->offset_into_rod > job->token->blocks ||
        *total > job->token->blocks - params->offset_into_rod)
      co_return ScsiOutcome::check_condition(SenseData::invalid_field_in_parameter_list(8));
  }
  job->destination = destination->unit;
  job->destination_ranges = destination->range_lock;
  job->destination_sanitize = destination->sanitize;
  job->resets = destination->resets;
  job->resets_at_start = destination->resets->load();
  job->ranges = std::move(params->ranges);
  job->offset_into_rod = params->offset_into_rod;
  job->total_blocks = *total;
  job->nexus = nexus.value;
  job->list_id = load_be32(cdb.data() + 6);
  job->statuses = state.rod_statuses;
  job->status.service_action = write_using_token_sa;
  if (!job->statuses->begin(job->nexus, job->list_id, write_using_token_sa))
    co_return ScsiOutcome::check_condition(illegal(operation_in_progress));
  if (!state.copy_manager->try_start()) co_return job->end(busy());
  job->manager = state.copy_manager;  // finish() in ~WriteJob
  if (!params->immed) co_return co_await run_write_job(std::move(job), &plan);
  // SBC-4: IMMED = 1: status now, the copy goes on in the background (RECEIVE ROD TOKEN
  // INFORMATION: in progress, background, then how it ended); a logical unit reset or the target's
  // end stops it, the command's abort and the session's end do not.
  job->status.state = RodStatus::State::in_progress_background;
  job->statuses->update(job->nexus, job->list_id, job->status);
  asio::co_spawn(co_await asio::this_coro::executor, run_write_job(std::move(job), nullptr), asio::detached);
  co_return ScsiOutcome::good();
}

ScsiOutcome execute_receive_rod_token_information(const ScsiDispatcher::State& state, NexusId nexus,
                                                  ConstByteSpan cdb, ByteSpan out) {
  // SPC-4: LIST IDENTIFIER in bytes 2..5.
  const auto status = state.rod_statuses->take(nexus.value, load_be32(cdb.data() + 2));
  if (!status) return ScsiOutcome::check_condition(SenseData::invalid_field_in_cdb(2));
  return reply_data(encode_rod_token_information(*status), out);
}

}  // namespace iserkit::target::detail
