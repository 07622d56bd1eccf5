// Input decoding shared by the two session-engine fuzz targets (fuzz_initiator_engine.cpp: the
// initiator's engine fed target PDUs; fuzz_target_engine.cpp: the target's engine fed initiator
// PDUs). Both read the same frame: 4 configuration bytes, then up to 256 steps, each a step byte
// and its arguments; a PDU step carries a raw 48-byte BHS whose opcode the harness picks from the
// opcodes the peer may send. The corpora (corpus/fuzz_*_engine/) are in this format.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <span>

#include "fuzz_support.hpp"
#include "iserkit/common/log.hpp"
#include "iserkit/iscsi/pdu.hpp"

namespace iserkit::fuzz {

/// Turns the project's log off for this process unless ISERKIT_FUZZ_LOG names a level (trace,
/// debug, …); the first call decides, later calls do nothing.
inline void quiet_log_once() {
  static const bool quiet = [] {
    const char* level = std::getenv("ISERKIT_FUZZ_LOG");
    log::set_level(level != nullptr ? level : "off");
    return true;
  }();
  (void)quiet;
}

/// The input's 4 configuration bytes, in order (0 for each past the end).
inline std::array<std::uint8_t, 4> config_bytes(Reader& in) noexcept {
  std::array<std::uint8_t, 4> c{};
  for (auto& b : c) b = in.u8();
  return c;
}

/// Calls `step(byte)` with each step byte until the input ends, at most `max_steps` times; `step`
/// reads its own arguments from the same Reader.
template <class Step>
void for_each_step(Reader& in, Step&& step, int max_steps = 256) {
  for (int steps = 0; !in.empty() && steps < max_steps; ++steps) step(in.u8());
}

/// The next 48 bytes as a BHS (zeros past the end). Unless bit 7 of `selector` asks for the raw
/// opcode, byte 0 becomes opcodes[selector % size] with only the bits of the raw byte 0 that
/// `keep_bits` names (e.g. 0x40, the I bit) kept.
inline iscsi::Bhs pdu_header(Reader& in, std::uint8_t selector, std::span<const std::uint8_t> opcodes,
                             std::uint8_t keep_bits) noexcept {
  iscsi::Bhs bhs{};
  const auto raw = in.bytes(iscsi::bhs_size);
  std::copy(raw.begin(), raw.end(), bhs.begin());
  if ((selector & 0x80) == 0 && !opcodes.empty()) {
    bhs[0] = static_cast<std::byte>((static_cast<std::uint8_t>(bhs[0]) & keep_bits) |
                                    opcodes[selector % opcodes.size()]);
  }
  return bhs;
}

/// A PDU step's arguments in input order: three bytes whose meaning each harness gives (the first
/// is always the opcode selector), then the BHS built by pdu_header() from the first byte.
struct PduStep {
  std::array<std::uint8_t, 3> args{};
  iscsi::Bhs bhs{};
};

/// Reads a PDU step's three argument bytes and its BHS (see pdu_header()).
inline PduStep read_pdu_step(Reader& in, std::span<const std::uint8_t> opcodes, std::uint8_t keep_bits) noexcept {
  PduStep step;
  for (auto& b : step.args) b = in.u8();
  step.bhs = pdu_header(in, step.args[0], opcodes, keep_bits);
  return step;
}

/// Runs one fuzzer input through an engine harness, in the frame both harnesses share: the log
/// silenced (quiet_log_once()); the 4 configuration bytes handed to `start`, which returns the
/// harness ready for steps (a std::unique_ptr); then each step byte: below 4 (mod 8) a PDU step,
/// read_pdu_step() with `opcodes` and `keep_bits` then `on_pdu(harness, PduStep, Reader&)`; else
/// `on_step(harness, byte, Reader&)`; both read their other arguments from the Reader. At the end
/// `harness->finish()` (it checks the end-of-input invariants). Returns 0, as libFuzzer wants.
template <class Start, class OnPdu, class OnStep>
int run_engine_input(const std::uint8_t* raw, std::size_t size, std::span<const std::uint8_t> opcodes,
                     std::uint8_t keep_bits, Start&& start, OnPdu&& on_pdu, OnStep&& on_step) {
  quiet_log_once();
  Reader in(raw, size);
  auto harness = start(config_bytes(in));
  for_each_step(in, [&](const std::uint8_t step) {
    if (step % 8 < 4) {
      on_pdu(*harness, read_pdu_step(in, opcodes, keep_bits), in);
    } else {
      on_step(*harness, step, in);
    }
  });
  harness->finish();
  return 0;
}

}  // namespace iserkit::fuzz
