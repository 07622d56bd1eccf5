// ScriptedPeer: one transcript harness for the two sans-I/O session engines (issue 27 item 6),
// modelled on how Boost.MySQL tests its sans-I/O algorithms (a script of reads and writes run
// against the algorithm, then re-run with a network error injected at every step). No code was
// copied.
//
// A Script is a list of steps run in order against a Rig (initiator_rig.hpp: the initiator's
// LoginMachine + SessionEngine; target_rig.hpp: the target's LoginMachine + SessionEngine):
//  - receive(what, pdu):  the engine receives this PDU from the peer (header phase, data segment
//                         placed as a datamover would, payload phase);
//  - call(what, f):       the engine's owner acts: submit a command, log out, the backend
//                         completes a task, a budget is granted…;
//  - at(what, t):         time passes: the timer fires at t0 + t;
//  - expect(what, match): the engine's next action (in the order it produced them) matches;
//                         `match` returns "" on a match, else what differs;
//  - expect_pdu<T>(what, check): shorthand: the next action is a PDU of type T whose fields
//                         `check` inspects (Check::eq records each mismatch by field name);
//                         expect_action<A>(what, check) the same for the rig's other actions.
// Strict: before each receive / call / at step every action of the earlier steps must have been
// expected, and none may be left at the end. A failure names the step number, its kind, its
// label and what the engine did instead.
//
// Values the engine chooses (an ITT, a TTT, a TaskId) are captured into Vars by a step's matcher
// or call and read by later steps' builders ("read.itt").
//
// fail_at_every_step(make_rig): for every step k and every fault that fits it, a fresh rig runs
// steps 0..k-1 as written, then the fault replaces or precedes step k:
//  - connection_lost: the transport fails (initiator connection_failed(), target on_closed());
//  - malformed_pdu:   step k's PDU arrives with an opcode the peer may not send;
//  - digest_error:    step k's PDU arrives with a data digest error (PduIn::pdu_error);
//  - duplicate_pdu:   step k's PDU arrives twice (a stale or replayed PDU);
//  - timer_expired:   the peer goes silent: the clock jumps an hour before step k;
//  - late_pdu:        the connection drops, yet step k's PDU, read just before, still reaches
//                     the engine (it must ignore it: nothing is sent or completed for it).
// The rest of the script then runs leniently (receives only while the connection is up,
// expectations consume a matching action if there is one and never fail), every deadline then
// passes (the clock jumps two hours), then the rig is torn down as its driver would (the owner closes the session; the backend finishes what it holds).
// The rig checks its invariants on every action, in normal and in fault runs: nothing is sent
// after the connection closed, no task ends twice, every buffer a PDU borrows is still alive,
// and at teardown every command ended exactly once (the initiator: with an error when the
// connection failed under it) and every resource came back. Each rig also checks the documented
// reaction to the fault (Rig::check_reaction). All of it runs under ASan/UBSan in scripts/test.sh
// (label unit); the rigs free a task's buffer as soon as it completes, so a late write into it is
// a heap-use-after-free there.
//
// How to add a case: tests/unit/engine_harness/README.md.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <cstring>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <system_error>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#include "iserkit/common/serial_number.hpp"
#include "iserkit/datamover/pdu_io.hpp"
#include "iserkit/iscsi/pdu.hpp"

namespace iserkit::test::harness {

using Clock = std::chrono::steady_clock;
using TimePoint = Clock::time_point;
/// The rigs' time origin; `at` steps are relative to it.
inline constexpr TimePoint t0 = TimePoint{} + std::chrono::hours(1);

/// Values a script captures from what the engine chose, by name (an ITT, a TTT, a TaskId).
class Vars {
 public:
  void set(const std::string& name, std::uint64_t value) { values_[name] = value; }
  /// The value captured as `name`; 0 when never captured (a lenient replay after a fault).
  [[nodiscard]] std::uint64_t get(const std::string& name) const {
    auto it = values_.find(name);
    return it == values_.end() ? 0 : it->second;
  }
  [[nodiscard]] iscsi::Itt itt(const std::string& name) const { return iscsi::Itt{static_cast<std::uint32_t>(get(name))}; }
  [[nodiscard]] iscsi::Ttt ttt(const std::string& name) const { return iscsi::Ttt{static_cast<std::uint32_t>(get(name))}; }

 private:
  std::map<std::string, std::uint64_t> values_;
};

/// A PDU the engine sent: its decoded header, raw BHS and a copy of its data segment.
struct SentPdu {
  iscsi::PduHeader header;
  iscsi::Bhs bhs{};
  std::vector<std::byte> data;
  std::uint64_t batch = 0;  ///< which take_actions() batch (target: which SendPdus) it left in
  template <class T>
  [[nodiscard]] const T* as() const {
    return std::get_if<T>(&header);
  }
};

/// A PDU the peer sends to the engine.
struct PeerPdu {
  iscsi::PduHeader header;
  std::vector<std::byte> data;  ///< the data segment
  std::error_code pdu_error;    ///< PduIn::pdu_error (digest error, too long)
  /// iSER SCSI Commands: the initiator's read / write buffer (PduIn::peer_read, peer_write).
  std::optional<datamover::PeerBuffer> peer_read;
  std::optional<datamover::PeerBuffer> peer_write;
};

/// `n` bytes of a recognisable pattern (byte i = i * 7 + seed).
inline std::vector<std::byte> pattern(std::size_t n, std::uint8_t seed) {
  std::vector<std::byte> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = static_cast<std::byte>((i * 7 + seed) & 0xff);
  return v;
}
/// Bytes [from, from + n) of `v`.
inline std::vector<std::byte> slice(const std::vector<std::byte>& v, std::size_t from, std::size_t n) {
  return {v.begin() + static_cast<std::ptrdiff_t>(from), v.begin() + static_cast<std::ptrdiff_t>(from + n)};
}

/// "opcode itt=… len=…" for failure messages.
inline std::string describe(const iscsi::Bhs& bhs) {
  std::ostringstream s;
  s << iscsi::opcode_name(iscsi::raw_opcode(bhs)) << " itt=0x" << std::hex << iscsi::to_u32(iscsi::itt_of(bhs))
    << std::dec << " len=" << iscsi::data_segment_length_bytes(bhs);
  return s.str();
}

/// Prints a field value of any of the PDU types' field types.
template <class T>
std::string show(const T& v) {
  if constexpr (std::is_same_v<T, bool>) {
    return v ? "true" : "false";
  } else if constexpr (std::is_same_v<T, SerialNumber>) {
    return std::to_string(v.value());
  } else if constexpr (std::is_enum_v<T>) {
    return std::to_string(static_cast<std::uint64_t>(v));
  } else if constexpr (std::is_arithmetic_v<T>) {
    return std::to_string(v);
  } else if constexpr (std::is_convertible_v<T, std::string>) {
    return std::string(v);
  } else {
    return "(value)";
  }
}

/// Collects the mismatches of one matcher, by field name ("" when everything matched).
class Check {
 public:
  /// Records a mismatch unless `got == want`.
  template <class A, class B>
  Check& eq(const char* field, const A& got, const B& want) {
    if (!(got == want)) add(std::string(field) + "=" + show(got) + " (want " + show(want) + ")");
    return *this;
  }
  /// Records `what` unless `ok`.
  Check& is(const char* what, bool ok) {
    if (!ok) add(what);
    return *this;
  }
  [[nodiscard]] const std::string& why() const noexcept { return why_; }

 private:
  void add(const std::string& s) { why_ += (why_.empty() ? "" : ", ") + s; }
  std::string why_;
};

/// The faults fail_at_every_step() injects.
enum class Fault { connection_lost, malformed_pdu, digest_error, duplicate_pdu, timer_expired, late_pdu };

inline const char* to_string(Fault f) noexcept {
  switch (f) {
    case Fault::connection_lost: return "connection_lost";
    case Fault::malformed_pdu: return "malformed_pdu";
    case Fault::digest_error: return "digest_error";
    case Fault::duplicate_pdu: return "duplicate_pdu";
    case Fault::timer_expired: return "timer_expired";
    case Fault::late_pdu: return "late_pdu";
  }
  return "?";
}

/// A script of steps against a Rig. The Rig provides (duck-typed; see initiator_rig.hpp):
///  `Action` (a variant whose alternatives include SentPdu), `std::deque<Action>& pending()`,
///  `std::string describe(const Action&)`, `void deliver(const PeerPdu&, TimePoint)`,
///  `void deliver_malformed(const PeerPdu&, TimePoint)`, `void deliver_digest_error(PeerPdu,
///  TimePoint)`, `void deliver_late(const PeerPdu&, TimePoint)` (to the engine even after the
///  connection closed), `void fire_timer(TimePoint)`, `TimePoint now`,
///  `void lose_connection(TimePoint)`, `bool connection_up()`, `void finish()` (teardown and
///  final checks), `void begin_fault(Fault)` / `void check_reaction(Fault)`, `std::string context`
///  (prefixed to the rig's own failure messages) and `bool lenient` (set by the runner).
template <class Rig>
class Script {
 public:
  using Action = typename Rig::Action;
  /// "" when `action` is the one expected, else what differs. May capture into Vars.
  using Match = std::function<std::string(const Action&, Vars&)>;

  /// The engine receives `pdu(vars)` from the peer.
  Script& receive(std::string what, std::function<PeerPdu(const Vars&)> pdu) {
    steps_.push_back({Kind::receive, std::move(what), std::move(pdu), {}, {}, {}});
    return *this;
  }
  /// The engine receives a PDU that does not depend on captured values.
  Script& receive(std::string what, PeerPdu pdu) {
    return receive(std::move(what), [pdu = std::move(pdu)](const Vars&) { return pdu; });
  }
  /// The engine's owner (or backend) acts.
  Script& call(std::string what, std::function<void(Rig&, Vars&)> f) {
    steps_.push_back({Kind::call, std::move(what), {}, std::move(f), {}, {}});
    return *this;
  }
  /// The timer fires at t0 + `since_t0`.
  Script& at(std::string what, std::chrono::milliseconds since_t0) {
    steps_.push_back({Kind::timer, std::move(what), {}, {}, {}, since_t0});
    return *this;
  }
  /// The engine's next action matches.
  Script& expect(std::string what, Match match) {
    steps_.push_back({Kind::expect, std::move(what), {}, {}, std::move(match), {}});
    return *this;
  }
  /// The engine's next action is a PDU of type T; `check(const T&, const SentPdu&, Check&, Vars&)`
  /// inspects its fields and may capture values.
  template <class T, class F>
  Script& expect_pdu(std::string what, F check) {
    return expect(std::move(what), [check](const Action& a, Vars& vars) -> std::string {
      const auto* sent = std::get_if<SentPdu>(&a);
      if (sent == nullptr) return "not a PDU";
      const T* h = sent->template as<T>();
      if (h == nullptr) return std::string("a PDU of another type");
      Check c;
      check(*h, *sent, c, vars);
      return c.why();
    });
  }
  /// The engine's next action is an `A` (one of Rig::Action's alternatives other than a PDU);
  /// `check(const A&, Check&, Vars&)` inspects it.
  template <class A, class F>
  Script& expect_action(std::string what, F check) {
    return expect(std::move(what), [check](const Action& a, Vars& vars) -> std::string {
      const A* x = std::get_if<A>(&a);
      if (x == nullptr) return "another kind of action";
      Check c;
      check(*x, c, vars);
      return c.why();
    });
  }
  /// Appends every step of `more` (scripts built in pieces: login, then I/O, then logout).
  Script& then(const Script& more) {
    steps_.insert(steps_.end(), more.steps_.begin(), more.steps_.end());
    return *this;
  }
  [[nodiscard]] std::size_t size() const noexcept { return steps_.size(); }

  /// Runs every step against `rig`, then its teardown; gtest failures name the step.
  void run(Rig& rig) const {
    Vars vars;
    rig.lenient = false;
    for (std::size_t i = 0; i < steps_.size(); ++i) {
      rig.context = where(i);
      if (!perform(rig, i, vars)) return;
    }
    rig.context = "after the last step";
    if (!rig.pending().empty()) {
      ADD_FAILURE() << "after the last step: actions nobody expected: " << list(rig);
      return;
    }
    rig.finish();
  }

  /// For every step k and every fault that fits it: a rig from `make_rig()` runs steps 0..k-1, then
  /// the fault, then the rest leniently, then its teardown (see the file comment). Returns the
  /// number of fault runs (every one checked).
  std::size_t fail_at_every_step(const std::function<std::unique_ptr<Rig>()>& make_rig) const {
    std::size_t runs = 0;
    for (std::size_t k = 0; k < steps_.size(); ++k) {
      for (Fault f : {Fault::connection_lost, Fault::malformed_pdu, Fault::digest_error, Fault::duplicate_pdu,
                      Fault::timer_expired, Fault::late_pdu}) {
        if (!fits(f, k)) continue;
        ++runs;
        SCOPED_TRACE(std::string("fault ") + to_string(f) + " at " + where(k));
        std::unique_ptr<Rig> rig = make_rig();
        Vars vars;
        rig->lenient = false;
        bool prefix_ok = true;
        for (std::size_t i = 0; i < k && prefix_ok; ++i) {
          rig->context = where(i) + " (before the fault)";
          prefix_ok = perform(*rig, i, vars);
        }
        if (!prefix_ok) return runs;  // the script itself fails: reported above
        rig->lenient = true;
        rig->context = std::string("fault ") + to_string(f) + " at " + where(k);
        rig->pending().clear();  // expectations after the fault are lenient
        rig->begin_fault(f);
        inject(*rig, f, k, vars);
        for (std::size_t i = k; i < steps_.size(); ++i) {
          if (i == k && f != Fault::timer_expired && f != Fault::duplicate_pdu &&
              f != Fault::connection_lost)
            continue;  // the fault replaced step k
          perform(*rig, i, vars);
        }
        rig->now += std::chrono::hours(2);  // then every deadline passes (replacement timeout, pings…)
        rig->fire_timer(rig->now);
        rig->check_reaction(f);
        rig->finish();
        if (::testing::Test::HasFatalFailure()) return runs;
      }
    }
    return runs;
  }

 private:
  enum class Kind { receive, call, timer, expect };
  struct Step {
    Kind kind;
    std::string what;
    std::function<PeerPdu(const Vars&)> pdu;
    std::function<void(Rig&, Vars&)> call;
    Match match;
    std::chrono::milliseconds at{0};
  };

  static const char* kind_name(Kind k) {
    switch (k) {
      case Kind::receive: return "receive";
      case Kind::call: return "call";
      case Kind::timer: return "at";
      case Kind::expect: return "expect";
    }
    return "?";
  }
  std::string where(std::size_t i) const {
    return "step " + std::to_string(i) + " (" + kind_name(steps_[i].kind) + " '" + steps_[i].what + "')";
  }
  static std::string list(Rig& rig) {
    std::string s;
    for (const auto& a : rig.pending()) s += (s.empty() ? "" : "; ") + rig.describe(a);
    return s;
  }

  bool fits(Fault f, std::size_t k) const {
    const Step& s = steps_[k];
    switch (f) {
      case Fault::connection_lost:
      case Fault::timer_expired: return s.kind != Kind::expect;
      case Fault::malformed_pdu:
      case Fault::duplicate_pdu:
      case Fault::late_pdu: return s.kind == Kind::receive;
      case Fault::digest_error: {
        if (s.kind != Kind::receive) return false;
        Vars none;
        return !s.pdu(none).data.empty();
      }
    }
    return false;
  }

  void inject(Rig& rig, Fault f, std::size_t k, Vars& vars) const {
    const Step& s = steps_[k];
    switch (f) {
      case Fault::connection_lost: rig.lose_connection(rig.now); break;
      case Fault::timer_expired:
        rig.now += std::chrono::hours(1);
        rig.fire_timer(rig.now);
        break;
      case Fault::malformed_pdu: rig.deliver_malformed(s.pdu(vars), rig.now); break;
      case Fault::digest_error: {
        rig.deliver_digest_error(s.pdu(vars), rig.now);
        break;
      }
      case Fault::duplicate_pdu: rig.deliver(s.pdu(vars), rig.now); break;
      case Fault::late_pdu:
        rig.lose_connection(rig.now);
        rig.deliver_late(s.pdu(vars), rig.now);
        break;
    }
  }

  /// One step; false when it failed (strict mode) so the run stops.
  bool perform(Rig& rig, std::size_t i, Vars& vars) const {
    const Step& s = steps_[i];
    if (s.kind != Kind::expect && !rig.lenient && !rig.pending().empty()) {
      ADD_FAILURE() << where(i) << ": actions of the earlier steps nobody expected: " << list(rig);
      return false;
    }
    switch (s.kind) {
      case Kind::receive:
        if (!rig.lenient || rig.connection_up()) rig.deliver(s.pdu(vars), rig.now);
        break;
      case Kind::call: s.call(rig, vars); break;
      case Kind::timer:
        if (t0 + s.at > rig.now) rig.now = t0 + s.at;
        rig.fire_timer(rig.now);
        break;
      case Kind::expect: {
        auto& q = rig.pending();
        if (rig.lenient) {
          for (auto it = q.begin(); it != q.end(); ++it)
            if (s.match(*it, vars).empty()) {
              q.erase(q.begin(), it + 1);
              break;
            }
          break;
        }
        if (q.empty()) {
          ADD_FAILURE() << where(i) << ": the engine did nothing more";
          return false;
        }
        const std::string why = s.match(q.front(), vars);
        if (!why.empty()) {
          ADD_FAILURE() << where(i) << ": saw " << rig.describe(q.front()) << ": " << why;
          return false;
        }
        q.pop_front();
        break;
      }
    }
    return !::testing::Test::HasFatalFailure();
  }

  std::vector<Step> steps_;
};

}  // namespace iserkit::test::harness
