// Fuzz target: the initiator's sans-I/O session engine (initiator/src/session_engine.hpp) fed target
// PDUs, timer steps and further submissions, the way the coroutine driver (session.cpp) drives it,
// without I/O. The engine starts in full feature phase with reads, writes (solicited and
// unsolicited), a command without data, a Text Request and an ABORT TASK; its actions are applied as
// the driver would (PDUs "sent", completions delivered).
//
// Input: 4 configuration bytes, then steps until the input ends (at most 256):
//  - config[0]: bit 0 ImmediateData, bit 1 InitialR2T, bit 2 fail the session on a command timeout,
//    bit 3 NOP-Out keepalive (interval 50 ms, timeout 100 ms), bit 4 command timeout 200 ms,
//    bit 5 hold a timed-out command until its ABORT TASK ends (iSER per-command STags);
//  - config[1]: FirstBurstLength = 512 << (bits 0-2), MaxBurstLength = 512 << (bits 3-5) (FirstBurst
//    cut to MaxBurst);
//  - config[2]: the target's MaxRecvDataSegmentLength = 512 << (bits 0-2); commands in flight
//    1 + (bits 3-5);
//  - config[3]: the initial window, MaxCmdSN - CmdSN + 1 = config[3] % 16 (0: closed).
//  - step byte % 8: 0-3 a target PDU: a selector (bit 7: keep the raw opcode, else one of the 10
//    target opcodes), an ITT selector (< 0xf0: the ITT of one of the PDUs the engine sent, else the
//    raw ITT), a flags byte (bit 0: StatSN = the engine's ExpStatSN; bit 1: ExpCmdSN/MaxCmdSN open
//    the window by flags >> 4; bit 2: a data digest error; bit 3: TTT = one the engine sent), the
//    48-byte BHS, and a record with the data segment (placed through place() as the datamover does);
//    4: on_timer after u16 ms (× 10 with the step's bit 3);
//    5: a new SCSI command (kind byte: read / write / none; u16 bytes);
//    6: a task management request (function byte, ITT selector), a Text Request, or a Logout;
//    7: the connection fails (after a place() answered for a Data-In when the byte asks).
// At the end the connection fails (fail_session), as it eventually does.
//
// Invariants: every task the harness submitted completes exactly once (none twice, none unknown, all
// by the end); the session ends once, and no PDU leaves after that; place() hands out only a span of
// the read buffer of a live read task, at the Data-In's BufferOffset; Data-Out and immediate data
// borrow the write buffer at their BufferOffset, at most MaxRecvDataSegmentLength / FirstBurstLength
// bytes, and never from a task its owner already got back; non-immediate commands carry consecutive
// CmdSNs inside the window; commands holding an ITT stay within the in-flight limit; the bytes
// placed never exceed the read buffers; at the end no ITT, queued command or task is left.
#include <algorithm>
#include <cstdlib>
#include <array>
#include <chrono>
#include <cstring>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <vector>

#include "engine_fuzz_input.hpp"
#include "iserkit/common/bytes.hpp"
#include "iserkit/common/errors.hpp"
#include "iserkit/common/log.hpp"
#include "session_engine.hpp"

using namespace iserkit;
using namespace iserkit::initiator;
using namespace std::chrono_literals;

namespace {

constexpr std::array<std::uint8_t, 10> target_opcodes = {0x20, 0x21, 0x22, 0x23, 0x24, 0x25, 0x26, 0x31, 0x32, 0x3f};

struct Submitted {
  TaskKind kind = TaskKind::scsi;
  std::span<std::byte> read;
  std::span<const std::byte> write;
  bool completed = false;
  bool completed_before_batch = false;  // its owner got it back in an earlier take_actions()
};

class Harness {
 public:
  Harness(EngineConfig config, EngineStart start, SessionEngine::TimePoint now)
      : config_(config), engine_(config, start, now), now_(now), next_cmd_sn_(start.cmd_sn) {}

  SessionEngine& engine() { return engine_; }
  SessionEngine::TimePoint now() const { return now_; }
  void advance(std::chrono::milliseconds d) { now_ += d; }

  std::span<std::byte> new_buffer(std::size_t n, std::uint8_t fill) {
    auto& b = storage_.emplace_back(n, std::byte{fill});
    return b;
  }

  void submit_scsi(std::uint8_t kind, std::uint16_t bytes) {
    ScsiSubmission s;
    s.lun = scsi::Lun::from_index(kind & 1);
    s.cdb.length = 10;
    Submitted record;
    switch ((kind >> 1) % 3) {
      case 0:
        s.cdb.bytes[0] = std::byte{0x28};
        s.data_in = new_buffer(bytes, 0);
        record.read = s.data_in;
        read_bytes_ += bytes;
        break;
      case 1:
        s.cdb.bytes[0] = std::byte{0x2a};
        s.data_out = new_buffer(bytes, 0x5a);
        record.write = s.data_out;
        break;
      default: s.cdb.bytes[0] = std::byte{0x00}; break;  // TEST UNIT READY
    }
    if (auto id = engine_.submit(s, now_)) add(*id, record);
    drain();
  }

  void submit_tmf(std::uint8_t function, std::uint8_t itt_selector) {
    TaskManagementOptions o;
    o.function = static_cast<iscsi::TaskManagementFunction>(1 + function % 8);
    o.lun = scsi::Lun::from_index(function >> 7);
    o.referenced_task_tag = pick_itt(itt_selector).value_or(iscsi::reserved_itt);
    o.ref_cmd_sn = engine_.window().next();
    if (auto id = engine_.submit_task_management(o, now_)) add(*id, {.kind = TaskKind::task_management});
    drain();
  }
  void submit_text() {
    constexpr std::string_view text{"SendTargets=All\0", 16};
    std::vector<std::byte> t(text.size());
    std::memcpy(t.data(), text.data(), text.size());
    if (auto id = engine_.submit_text(std::move(t), now_)) add(*id, {.kind = TaskKind::text});
    drain();
  }
  void logout() {
    if (auto id = engine_.logout(now_)) add(*id, {.kind = TaskKind::logout});
    drain();
  }

  /// A target PDU as the datamover hands it over: place() for the data segment, then on_pdu().
  void deliver(iscsi::Bhs bhs, std::span<const std::byte> data, std::error_code pdu_error, bool receive_fails) {
    iscsi::set_lengths(bhs, 0, static_cast<std::uint32_t>(data.size()));
    datamover::PduIn in;
    in.bhs = bhs;
    in.pdu_error = pdu_error;
    if (!data.empty()) {
      auto where = engine_.place(bhs, static_cast<std::uint32_t>(data.size()));
      if (!where.empty()) {
        check_placement(bhs, where, data.size());
      } else {
        scratch_.assign(data.begin(), data.end());
        where = scratch_;
      }
      std::memcpy(where.data(), data.data(), data.size());
      in.data = where;
    }
    if (receive_fails) {
      engine_.on_receive_ended();
      engine_.fail_session(make_error_code(errc::connection_closed));
    } else {
      engine_.on_pdu(in, now_);
    }
    drain();
  }

  void timer(std::chrono::milliseconds step) {
    now_ += step;
    engine_.on_timer(now_);
    drain();
  }

  void fail() {
    engine_.fail_session(make_error_code(errc::connection_closed));
    drain();
  }

  /// An ITT the engine put in one of its PDUs (selector < 0xf0), else nothing.
  std::optional<iscsi::Itt> pick_itt(std::uint8_t selector) const {
    if (selector >= 0xf0 || itts_.empty()) return std::nullopt;
    return itts_[selector % itts_.size()];
  }
  std::optional<iscsi::Ttt> pick_ttt(std::uint8_t selector) const {
    if (ttts_.empty()) return std::nullopt;
    return ttts_[selector % ttts_.size()];
  }

  /// At the end of the input: everything submitted has completed and nothing is held.
  void finish() {
    fail();
    FUZZ_CHECK(!engine_.open());
    FUZZ_CHECK(ended_);
    for (const auto& [id, s] : submitted_) FUZZ_CHECK(s.completed);
    FUZZ_CHECK(engine_.itts_in_use() == 0);
    FUZZ_CHECK(engine_.commands_holding_itt() == 0);
    FUZZ_CHECK(engine_.commands_queued() == 0);
    FUZZ_CHECK(engine_.next_deadline() == SessionEngine::TimePoint::max());
  }

 private:
  void add(TaskId id, Submitted s) {
    FUZZ_CHECK(id != 0);
    FUZZ_CHECK(!submitted_.contains(id));  // TaskIds are never reused
    submitted_.emplace(id, s);
  }

  const Submitted* owner_of_read(const std::byte* p) const {
    for (const auto& [id, s] : submitted_)
      if (!s.read.empty() && p >= s.read.data() && p < s.read.data() + s.read.size()) return &s;
    return nullptr;
  }

  void check_placement(const iscsi::Bhs& bhs, std::span<std::byte> where, std::size_t length) {
    // Only Data-In is placed, into the live read task it names, at its BufferOffset.
    FUZZ_CHECK(iscsi::raw_opcode(bhs) == 0x25);
    FUZZ_CHECK(where.size() == length);
    const Submitted* s = owner_of_read(where.data());
    FUZZ_CHECK(s != nullptr);
    FUZZ_CHECK(!s->completed);
    const std::uint32_t offset = load_be32(&bhs[40]);
    FUZZ_CHECK(where.data() == s->read.data() + offset);
    FUZZ_CHECK(std::uint64_t{offset} + length <= s->read.size());
  }

  void check_borrowed(const OutgoingPdu& out, std::uint32_t offset, std::size_t max_bytes) {
    auto it = submitted_.find(out.borrower);
    FUZZ_CHECK(it != submitted_.end());
    const Submitted& s = it->second;
    FUZZ_CHECK(!s.completed_before_batch);  // its owner may already reuse the buffer
    FUZZ_CHECK(out.pdu.data.data() == s.write.data() + offset);
    FUZZ_CHECK(std::uint64_t{offset} + out.pdu.data.size() <= s.write.size());
    FUZZ_CHECK(out.pdu.data.size() <= max_bytes);
  }

  void drain() {
    EngineActions a = engine_.take_actions();
    if (ended_) FUZZ_CHECK(a.pdus.empty());  // nothing leaves a closed connection
    for (const OutgoingPdu& out : a.pdus) {
      auto header = iscsi::decode_bhs(out.pdu.bhs);
      FUZZ_CHECK(header.has_value());
      FUZZ_CHECK(iscsi::data_segment_length_bytes(out.pdu.bhs) == out.pdu.data.size());
      const iscsi::Itt itt = iscsi::itt_of(out.pdu.bhs);
      if (itt != iscsi::reserved_itt && std::find(itts_.begin(), itts_.end(), itt) == itts_.end()) itts_.push_back(itt);
      if (const auto* cmd = std::get_if<iscsi::ScsiCommand>(&*header)) {
        if (!cmd->immediate) {
          // RFC 7143 §4.2.2.1: consecutive CmdSNs, each inside the window.
          FUZZ_CHECK(cmd->cmd_sn == next_cmd_sn_);
          FUZZ_CHECK(cmd->cmd_sn <= engine_.window().max_cmd_sn());
          ++next_cmd_sn_;
        }
        if (!out.pdu.data.empty()) {
          FUZZ_CHECK(cmd->write);
          check_borrowed(out, 0, std::min(config_.limits.first_burst_length, config_.limits.max_send_segment_length));
        }
      } else if (const auto* d = std::get_if<iscsi::DataOut>(&*header)) {
        check_borrowed(out, d->buffer_offset, config_.limits.max_send_segment_length);
      } else if (const auto* n = std::get_if<iscsi::NopOut>(&*header)) {
        if (n->ttt != iscsi::reserved_ttt) FUZZ_CHECK(n->itt == iscsi::reserved_itt);
      } else {
        FUZZ_CHECK(out.borrower == 0);
      }
    }
    for (const TaskOutcome& c : a.completions) {
      auto it = submitted_.find(c.id);
      FUZZ_CHECK(it != submitted_.end());  // no completion of a task nobody submitted
      FUZZ_CHECK(!it->second.completed);   // each task ends exactly once
      FUZZ_CHECK(it->second.kind == c.kind);
      it->second.completed = true;
    }
    for (auto& [id, s] : submitted_) s.completed_before_batch = s.completed;
    if (a.ended) {
      FUZZ_CHECK(!ended_);  // the session ends once
      ended_ = true;
      FUZZ_CHECK(!engine_.open());
    }
    FUZZ_CHECK(engine_.commands_holding_itt() <= config_.max_commands_in_flight);
    FUZZ_CHECK(engine_.commands_holding_itt() <= engine_.itts_in_use());
    FUZZ_CHECK(engine_.stats().data_in_bytes_placed <= read_bytes_);
    if (!engine_.open()) FUZZ_CHECK(engine_.commands_queued() == 0);
  }

  EngineConfig config_;
  SessionEngine engine_;
  SessionEngine::TimePoint now_;
  SerialNumber next_cmd_sn_;
  std::deque<std::vector<std::byte>> storage_;  // the callers' buffers: alive for the whole run
  std::map<TaskId, Submitted> submitted_;
  std::vector<iscsi::Itt> itts_;
  std::vector<iscsi::Ttt> ttts_;
  std::vector<std::byte> scratch_;
  std::uint64_t read_bytes_ = 0;
  bool ended_ = false;

 public:
  void remember_ttt(const iscsi::Bhs& bhs) {
    // TTTs the target handed out (R2T, NOP-In, Text continuation) are the ones the engine echoes.
    const iscsi::Ttt ttt{load_be32(&bhs[20])};
    if (ttt != iscsi::reserved_ttt && ttts_.size() < 64) ttts_.push_back(ttt);
  }
};

}  // namespace

namespace {

// The 4 configuration bytes (see the top of this file) → a harness in full feature phase with work
// in flight.
std::unique_ptr<Harness> start_harness(const std::array<std::uint8_t, 4>& c) {
  EngineConfig config;
  config.limits.immediate_data = (c[0] & 1) != 0;
  config.limits.initial_r2t = (c[0] & 2) != 0;
  config.fail_session_on_timeout = (c[0] & 4) != 0;
  config.hold_timed_out_until_aborted = (c[0] & 32) != 0;
  config.nop_interval = (c[0] & 8) != 0 ? 50ms : 0ms;
  config.nop_timeout = 100ms;
  config.command_timeout = (c[0] & 16) != 0 ? 200ms : 0ms;
  config.request_timeout = 300ms;
  config.limits.max_burst_length = 512u << ((c[1] >> 3) & 7);
  config.limits.first_burst_length = std::min(512u << (c[1] & 7), config.limits.max_burst_length);
  config.limits.max_send_segment_length = 512u << (c[2] & 7);
  config.max_commands_in_flight = 1 + ((c[2] >> 3) & 7);
  config.max_queued_commands = 32;
  const SerialNumber first(0xfffffff0u);  // the window wraps around 2^32 in most runs
  const EngineStart start{.cmd_sn = first, .exp_cmd_sn = first,
                          .max_cmd_sn = SerialNumber(first.value() + c[3] % 16 - 1),
                          .exp_stat_sn = SerialNumber(7)};
  auto h = std::make_unique<Harness>(config, start, SessionEngine::TimePoint{} + 1h);
  // Full feature phase with work in flight: two reads, two writes, a command without data, text,
  // and an ABORT TASK for the first command.
  h->submit_scsi(0, 1024);
  h->submit_scsi(1, 1536);
  h->submit_scsi(2, 8192);
  h->submit_scsi(2, 700);
  h->submit_scsi(4, 0);
  h->submit_text();
  h->submit_tmf(0, 0);
  return h;
}

// Steps 0-3: a target PDU. Arguments: selector, ITT selector, flags; the opcode is a target's (byte
// 0 has no other bits a target sets), byte 1's flags stay raw; then the data segment record.
void pdu_step(Harness& h, fuzz::PduStep pdu, fuzz::Reader& in) {
  iscsi::Bhs& bhs = pdu.bhs;
  const std::uint8_t itt_selector = pdu.args[1];
  const std::uint8_t flags = pdu.args[2];
  const auto data = in.record();
  if (auto itt = h.pick_itt(itt_selector)) store_be32(&bhs[16], iscsi::to_u32(*itt));
  if ((flags & 1) != 0) store_be32(&bhs[24], (h.engine().exp_stat_sn()).value());
  if ((flags & 2) != 0) {
    const SerialNumber exp = h.engine().window().next();
    store_be32(&bhs[28], exp.value());
    store_be32(&bhs[32], (exp + (flags >> 4)).value());
  }
  if ((flags & 8) != 0)
    if (auto ttt = h.pick_ttt(itt_selector)) store_be32(&bhs[20], iscsi::to_u32(*ttt));
  h.remember_ttt(bhs);
  const std::error_code pdu_error = (flags & 4) != 0 ? make_error_code(errc::data_digest_error) : std::error_code{};
  h.deliver(bhs, data, pdu_error, false);
}

// Steps 4-7: time, submissions, connection failure.
void other_step(Harness& h, std::uint8_t step, fuzz::Reader& in) {
  switch (step % 8) {
    case 4: {
      const auto ms = std::chrono::milliseconds(in.u16());
      h.timer((step & 8) != 0 ? ms * 10 : ms);
      break;
    }
    case 5: {
      const std::uint8_t kind = in.u8();
      h.submit_scsi(kind, static_cast<std::uint16_t>(in.u16() % 20000));
      break;
    }
    case 6: {
      const std::uint8_t what = in.u8();
      const std::uint8_t arg = in.u8();
      if (what < 0xa0) h.submit_tmf(what, arg);
      else if (what < 0xe0) h.submit_text();
      else h.logout();
      break;
    }
    default: {
      if ((step & 8) != 0) {
        // A receive fails after its Data-In header was placed (connection error mid-PDU).
        iscsi::Bhs bhs{};
        bhs[0] = std::byte{0x25};
        if (auto itt = h.pick_itt(in.u8())) store_be32(&bhs[16], iscsi::to_u32(*itt));
        store_be32(&bhs[40], in.u16());
        std::vector<std::byte> data(1 + in.u8());
        h.deliver(bhs, data, {}, true);
      } else {
        h.fail();
      }
      break;
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* raw, std::size_t size) {
  return fuzz::run_engine_input(raw, size, target_opcodes, 0, start_harness, pdu_step, other_step);
}
