// SANITIZE (SBC-4 §5.30) and the sanitize operation (SBC-4 §4.11): see sanitize.hpp. The
// operation runs as its own coroutine on the executor of the command that started it (an I/O
// thread's io_context, which outlives sessions), holds the logical unit and the sanitize state by
// shared_ptr, and moves at most 1 MiB (OVERWRITE) or 64 MiB (BLOCK ERASE discard) per backend
// call, yielding to the io_context between calls so other logical units' commands keep running.
// Memory LUN: BLOCK ERASE frees the chunks; file LUN: fallocate(PUNCH_HOLE|KEEP_SIZE), or writing
// zeroes where the file system cannot punch holes (the backend's discard fallback: the data is
// gone either way, only the space stays allocated); RBD LUN: rbd discard.
#include "scsi/sanitize.hpp"

#include <algorithm>
#include <chrono>
#include <cstring>

#include "iserkit/common/log.hpp"
#include "scsi/handlers.hpp"

namespace iserkit::target::detail {

using scsi::Opcode;
using scsi::SenseData;

namespace {

constexpr std::uint64_t overwrite_step_bytes = 1u << 20;   // one write per step (the pattern buffer)
constexpr std::uint64_t erase_step_bytes = 64u << 20;      // one discard per step
constexpr auto immed0_poll = std::chrono::milliseconds(10);  // how often SANITIZE (IMMED = 0) looks

SenseData sanitize_failed_sense() noexcept {
  return SenseData::make(scsi::SenseKey::medium_error, sanitize_command_failed);
}

// SBC-4 §4.11: what a sanitize operation in progress still lets through (also in the failure
// mode, which adds SANITIZE itself and MAINTENANCE IN).
bool allowed_while_sanitizing(Opcode op) noexcept {
  return op == Opcode::inquiry || op == Opcode::report_luns || op == Opcode::request_sense;
}

struct SanitizeJob {
  SanitizeAction action = SanitizeAction::overwrite;
  OverwriteParameters overwrite;
};

// With a pace (LogicalUnitOptions::sanitize_bytes_per_second), waits until `done_bytes` are due
// since `start`, in slices of at most 100 ms so a stop is seen.
Awaitable<void> pace(const SanitizeState& state, std::uint64_t bytes_per_second, std::chrono::steady_clock::time_point start,
                     std::uint64_t done_bytes) {
  if (bytes_per_second == 0) co_return;
  const auto due = start + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                               std::chrono::duration<double>(static_cast<double>(done_bytes) / static_cast<double>(bytes_per_second)));
  asio::steady_timer timer(co_await asio::this_coro::executor);
  while (!state.stop.load() && std::chrono::steady_clock::now() < due) {
    timer.expires_after(std::min<std::chrono::steady_clock::duration>(due - std::chrono::steady_clock::now(),
                                                                       std::chrono::milliseconds(100)));
    boost::system::error_code ec;
    co_await timer.async_wait(use_awaitable_ec(ec));
  }
}

// Sets the progress indication to done / total (in 65536ths).
void set_progress(SanitizeState& state, std::uint64_t done, std::uint64_t total) {
  const auto p = total == 0 ? 0 : static_cast<std::uint16_t>(std::min<std::uint64_t>((done << 16) / total, 0xffff));
  std::lock_guard g(state.mutex);
  state.progress = p;
}

// The sanitize operation itself: bounded steps on the backend's own I/O path, then a flush (the
// sanitized medium must not sit in a volatile cache when the operation is reported complete).
Awaitable<void> run_sanitize(std::shared_ptr<LogicalUnit> unit, std::shared_ptr<SanitizeState> state,
                             std::shared_ptr<SanitizeState::Outcome> outcome, SanitizeJob job) {
  auto executor = co_await asio::this_coro::executor;
  BlockBackend& backend = unit->backend();
  const std::uint32_t bs = unit->block_size_bytes();
  const std::uint64_t size = unit->block_count() * bs;
  const std::uint64_t rate = unit->options().sanitize_bytes_per_second;
  const auto start = std::chrono::steady_clock::now();
  Result<void> r{};
  bool stopped = false;
  if (job.action == SanitizeAction::block_erase) {
    // Paced: steps of the size of the overwrite steps, so the pace is even.
    const std::uint64_t step = rate == 0 ? erase_step_bytes : overwrite_step_bytes;
    for (std::uint64_t offset = 0; offset < size && r;) {
      if (state->stop.load()) {
        stopped = true;
        break;
      }
      const std::uint64_t n = std::min(step, size - offset);
      r = co_await backend.discard(offset, n);
      offset += n;
      set_progress(*state, offset, size);
      co_await asio::post(executor, asio::use_awaitable);
      co_await pace(*state, rate, start, offset);
    }
  } else {
    const auto& o = job.overwrite;
    const std::uint64_t total = size * o.overwrite_count;
    const std::uint64_t buffer_bytes = std::max<std::uint64_t>(bs, std::min(overwrite_step_bytes / bs * bs, size));
    std::vector<std::byte> buffer(buffer_bytes);
    for (std::uint8_t pass = 0; pass < o.overwrite_count && r && !stopped; ++pass) {
      const auto block = overwrite_block(o.pattern, bs, overwrite_pass_inverted(o.invert, o.overwrite_count, pass));
      for (std::uint64_t i = 0; i < buffer_bytes; i += bs) std::memcpy(buffer.data() + i, block.data(), bs);
      for (std::uint64_t offset = 0; offset < size && r;) {
        if (state->stop.load()) {
          stopped = true;
          break;
        }
        const std::uint64_t n = std::min(buffer_bytes, size - offset);
        r = co_await backend.write(offset, ConstByteSpan(buffer.data(), n), Fua::no);
        offset += n;
        set_progress(*state, size * pass + offset, total);
        co_await asio::post(executor, asio::use_awaitable);
        co_await pace(*state, rate, start, size * pass + offset);
      }
    }
  }
  if (r && !stopped) r = co_await backend.flush();
  const bool failed = !r || stopped;
  if (!r) log::warn("sanitize: failed: error={}", r.error().message());
  if (stopped) log::info("sanitize: stopped (target shutdown); the logical unit stays in the sanitize failure mode");
  std::lock_guard g(state->mutex);
  state->progress = 0;
  state->phase.store(failed ? SanitizeState::Phase::failed : SanitizeState::Phase::idle);
  outcome->done = true;
  if (failed) outcome->failure = sanitize_failed_sense();
}

}  // namespace

scsi::SenseOr<SanitizeCdb> parse_sanitize_cdb(ConstByteSpan cdb, std::uint32_t block_size_bytes,
                                              bool block_erase_supported) noexcept {
  if (cdb.size() < 10) return tl::unexpected(illegal_request(scsi::asc::invalid_command_operation_code));
  const std::byte* p = cdb.data();
  const std::uint8_t b1 = load_u8(p + 1);
  // Byte 1 bit 6 is ZNR, meaningful only for zoned block devices: reserved here.
  if ((b1 & 0x40) != 0) return tl::unexpected(SenseData::invalid_field_in_cdb(1, 6));
  for (std::uint16_t i = 2; i <= 6; ++i)
    if (load_u8(p + i) != 0) return tl::unexpected(SenseData::invalid_field_in_cdb(i));
  SanitizeCdb c;
  c.immed = (b1 & 0x80) != 0;
  c.ause = (b1 & 0x20) != 0;
  c.parameter_list_length_bytes = load_be16(p + 7);
  const std::uint16_t length = c.parameter_list_length_bytes;
  // SBC-4 §5.30.2.1: an unsupported service action is an invalid field in the CDB; so is a
  // PARAMETER LIST LENGTH outside what the service action takes.
  switch (b1 & 0x1f) {
    case 0x01:
      c.action = SanitizeAction::overwrite;
      if (length < 5 || length > block_size_bytes + 4) return tl::unexpected(SenseData::invalid_field_in_cdb(7));
      return c;
    case 0x02:
      c.action = SanitizeAction::block_erase;
      if (!block_erase_supported) return tl::unexpected(SenseData::invalid_field_in_cdb(1, 4));
      if (length != 0) return tl::unexpected(SenseData::invalid_field_in_cdb(7));
      return c;
    case 0x1f:
      c.action = SanitizeAction::exit_failure_mode;
      if (length != 0) return tl::unexpected(SenseData::invalid_field_in_cdb(7));
      return c;
    default:  // reserved, and CRYPTOGRAPHIC ERASE (03h): no encryption, nothing to erase that way
      return tl::unexpected(SenseData::invalid_field_in_cdb(1, 4));
  }
}

scsi::SenseOr<OverwriteParameters> parse_overwrite_parameters(ConstByteSpan list, std::uint32_t block_size_bytes) noexcept {
  if (list.size() < 4) return tl::unexpected(illegal_request(scsi::asc::parameter_list_length_error));
  const std::byte* p = list.data();
  const std::uint8_t b0 = load_u8(p);
  OverwriteParameters o;
  o.invert = (b0 & 0x80) != 0;
  o.overwrite_count = b0 & 0x1f;
  if (((b0 >> 5) & 0x03) != 0) return tl::unexpected(SenseData::invalid_field_in_parameter_list(0));  // TEST
  if (o.overwrite_count == 0) return tl::unexpected(SenseData::invalid_field_in_parameter_list(0));  // 00h reserved
  if (load_u8(p + 1) != 0) return tl::unexpected(SenseData::invalid_field_in_parameter_list(1));
  const std::uint16_t pattern_length = load_be16(p + 2);
  // SBC-4 §5.30.2.2: INITIALIZATION PATTERN LENGTH 0 or above the logical block length is invalid.
  if (pattern_length == 0 || pattern_length > block_size_bytes || pattern_length > list.size() - 4)
    return tl::unexpected(SenseData::invalid_field_in_parameter_list(2));
  o.pattern.assign(p + 4, p + 4 + pattern_length);
  return o;
}

std::vector<std::byte> overwrite_block(ConstByteSpan pattern, std::uint32_t block_size_bytes, bool inverted) {
  std::vector<std::byte> block(block_size_bytes);
  const std::byte mask = inverted ? std::byte{0xff} : std::byte{0};
  for (std::size_t i = 0; i < block.size(); ++i) block[i] = pattern[i % pattern.size()] ^ mask;
  return block;
}

bool overwrite_pass_inverted(bool invert, std::uint8_t count, std::uint8_t pass) noexcept {
  // Passes alternate, ending with the pattern itself: pass `pass` is inverted when an odd number
  // of passes follows it.
  return invert && ((count - 1 - pass) % 2) == 1;
}

bool block_erase_supported(const LogicalUnit& unit) noexcept {
  const auto& caps = unit.backend().capabilities();
  return caps.can_discard && caps.discard_zeroes;
}

SenseData sanitize_in_progress_sense(std::uint16_t progress) noexcept {
  SenseData s = SenseData::make(scsi::SenseKey::not_ready, logical_unit_not_ready_sanitize_in_progress);
  s.sense_key_specific = std::array<std::uint8_t, 3>{0x80, static_cast<std::uint8_t>(progress >> 8),
                                                     static_cast<std::uint8_t>(progress & 0xff)};
  return s;
}

std::optional<SenseData> SanitizeState::refuses(Opcode op) const {
  const Phase now = phase.load(std::memory_order_acquire);
  if (now == Phase::idle || allowed_while_sanitizing(op)) return std::nullopt;
  if (now == Phase::failed) {
    if (op == Opcode::sanitize || op == Opcode::maintenance_in) return std::nullopt;
    return sanitize_failed_sense();
  }
  std::lock_guard g(mutex);
  return sanitize_in_progress_sense(progress);
}

std::optional<SenseData> SanitizeState::current_sense() const {
  switch (phase.load(std::memory_order_acquire)) {
    case Phase::in_progress: {
      std::lock_guard g(mutex);
      return sanitize_in_progress_sense(progress);
    }
    case Phase::failed: return sanitize_failed_sense();
    default: return std::nullopt;
  }
}

void plan_sanitize(CommandPlan& plan, ConstByteSpan cdb) noexcept {
  const auto c = parse_sanitize_cdb(cdb, plan.unit->block_size_bytes(), block_erase_supported(*plan.unit));
  if (!parsed_cdb(plan, c)) return;
  // Every action but EXIT FAILURE MODE changes the medium.
  if (c->action != SanitizeAction::exit_failure_mode && plan.write_protected) {
    plan.error = write_protected();
    return;
  }
  plan.direction = DataDirection::to_target;
  plan.transfer_length_bytes = c->parameter_list_length_bytes;  // at most block size + 4 (checked)
  plan.exact_data_out = true;
}

Awaitable<ScsiOutcome> execute_sanitize(const CommandPlan& plan, std::shared_ptr<LogicalUnit> unit_owner,
                                        std::shared_ptr<SanitizeState> state, RangeLock& ranges, ConstByteSpan cdb,
                                        ConstByteSpan parameter_list) {
  const LogicalUnit& unit = *plan.unit;
  const auto c = parse_sanitize_cdb(cdb, unit.block_size_bytes(), block_erase_supported(unit));
  if (!c) co_return ScsiOutcome::check_condition(c.error());
  SanitizeJob job{.action = c->action, .overwrite = {}};
  if (c->action == SanitizeAction::overwrite) {
    auto o = parse_overwrite_parameters(parameter_list, unit.block_size_bytes());
    if (!o) co_return ScsiOutcome::check_condition(o.error());
    job.overwrite = std::move(*o);
  }
  auto outcome = std::make_shared<SanitizeState::Outcome>();
  {
    std::lock_guard g(state->mutex);
    const auto phase = state->phase.load();
    if (phase == SanitizeState::Phase::in_progress) co_return ScsiOutcome::check_condition(sanitize_in_progress_sense(state->progress));
    // SBC-4 §5.30.1 (restricted completion): after a failed operation started with AUSE = 0 only a
    // new sanitize operation with AUSE = 0 may end the failure mode.
    if (phase == SanitizeState::Phase::failed && !state->ause) {
      if (c->action == SanitizeAction::exit_failure_mode) co_return ScsiOutcome::check_condition(SenseData::invalid_field_in_cdb(1, 4));
      if (c->ause) co_return ScsiOutcome::check_condition(SenseData::invalid_field_in_cdb(1, 5));
    }
    if (c->action == SanitizeAction::exit_failure_mode) {
      // Unrestricted completion: the failed operation counts as completed without error. Without
      // a failed operation there is nothing to leave: GOOD.
      state->phase.store(SanitizeState::Phase::idle);
      co_return ScsiOutcome::good();
    }
    state->ause = c->ause;
    state->progress = 0;
    state->phase.store(SanitizeState::Phase::in_progress);
  }
  // From here on new commands get NOT READY; writes already under way finish first.
  { auto all = co_await lock_range(ranges, 0, unit.block_count()); }
  log::info("sanitize: started: action={} blocks={} immed={}", c->action == SanitizeAction::overwrite ? "overwrite" : "block-erase",
            unit.block_count(), c->immed);
  auto executor = co_await asio::this_coro::executor;
  asio::co_spawn(executor, run_sanitize(std::move(unit_owner), state, outcome, std::move(job)), asio::detached);
  // SBC-4 §5.30.1: IMMED = 1: status once the CDB and parameter list are checked; IMMED = 0:
  // after the operation. An aborted command (plan.abort_requested) stops waiting; the operation
  // goes on.
  if (c->immed) co_return ScsiOutcome::good();
  asio::steady_timer timer(executor);
  for (;;) {
    {
      std::lock_guard g(state->mutex);
      if (outcome->done) co_return outcome->failure ? ScsiOutcome::check_condition(*outcome->failure) : ScsiOutcome::good();
    }
    if (plan.abort_requested) co_return ScsiOutcome::good();  // ignored by the transport
    timer.expires_after(immed0_poll);
    boost::system::error_code ec;
    co_await timer.async_wait(use_awaitable_ec(ec));
  }
}

}  // namespace iserkit::target::detail
