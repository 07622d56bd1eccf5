// Where iserkit-nbd stands (BridgeStatus) and what its worker loops report (LoopSample): the
// state machine of the bridge's sessions (connecting, connected, recovering, gave up, stopped)
// fed by session and path events, and its views: --stats-file (key=value lines, written on every
// change), SIGUSR1 (one line), --status-socket (JSON, status_json.hpp). Used by main.cpp only; on
// the main loop's thread (worker loops post their events there and sample their counters into a
// LoopSample under its mutex).
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <ctime>
#include <fstream>
#include <functional>
#include <iostream>
#include <memory>
#include <mutex>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "iserkit/common/copy_counter.hpp"
#include "iserkit/initiator/multipath.hpp"
#include "iserkit/initiator/session.hpp"
#include "nbd_bridge/lun_export.hpp"
#include "nbd_bridge/server.hpp"
#include "nbd_bridge/status_json.hpp"

namespace iserkit::nbd {

/// Counters of one worker loop (--threads N, loops 1..N-1), sampled on that loop (every 250 ms and
/// at shutdown) and read by the main loop: a session is single-threaded, so the main loop never
/// reads another loop's session directly.
struct LoopSample {
  mutable std::mutex mutex;
  initiator::SessionStats session;
  initiator::ReconnectStatus reconnect;  // while that loop's session logs in again
  bool reconnecting = false;
  std::uint64_t read_bytes = 0, lba_status_commands = 0;
};

/// Copies what the main loop shows of a worker loop's session into `sample`. On the session's loop.
inline void sample_session(const initiator::Session& session, LoopSample& sample) {
  sample.session = session.stats();
  sample.reconnecting = session.recovering();
  sample.reconnect = session.reconnect_status();
}

/// Where the bridge stands, for --stats-file and SIGUSR1. Lives on the main loop's thread.
struct BridgeStatus {
  enum class State { connecting, connected, recovering, gave_up, stopped };
  State state = State::connecting;
  std::chrono::system_clock::time_point since = std::chrono::system_clock::now();
  std::string stats_file;
  std::weak_ptr<initiator::Session> session;      // loop 0's
  std::weak_ptr<initiator::Multipath> multipath;  // with several URLs
  std::weak_ptr<LunExport> exported;         // loop 0's: read_bytes, lba_status_commands
  mutable std::uint64_t read_bytes = 0, lba_status_commands = 0;  // last seen (kept after the export is gone)
  std::function<void()> exit_on_give_up;  // set with --on-give-up exit
  // --threads N > 1: loop `k`'s session logged in again, so the target is back; the other loops'
  // sessions that wait out their back-off log in now (Session::reconnect_now()).
  std::function<void(std::size_t k)> reconnect_others;
  // Set by run() while it waits for a signal: starts the orderly shutdown (every loop's session
  // logged out, connections drained) as SIGTERM does.
  std::function<void()> shutdown;
  // NBD payload bytes held by every client connection now (ServerOptions::buffered_total).
  std::shared_ptr<std::atomic<std::uint64_t>> buffered = std::make_shared<std::atomic<std::uint64_t>>(0);
  std::uint64_t buffer_limit_bytes = 0;  // per connection
  // --threads N > 1: each loop's session state, the worker loops' samples ([0] unused), the server's
  // per-loop counters (last seen, kept after the server is gone).
  std::vector<State> loop_states{State::connecting};
  std::vector<std::shared_ptr<LoopSample>> samples{nullptr};
  std::weak_ptr<Server> server;
  mutable std::vector<ServerLoopStats> loop_stats;

  [[nodiscard]] std::size_t threads() const noexcept { return loop_states.size(); }
  void set_threads(std::size_t n) {
    loop_states.assign(n, State::connecting);
    samples.assign(n, nullptr);
    for (std::size_t k = 1; k < n; ++k) samples[k] = std::make_shared<LoopSample>();
    loop_stats.assign(n, {});
  }
  /// Loop `k`'s session counters: loop 0's read here, the others' last sample.
  [[nodiscard]] std::optional<initiator::SessionStats> loop_session(std::size_t k) const {
    if (k == 0) {
      if (auto s = session.lock()) return s->stats();
      return std::nullopt;
    }
    std::lock_guard lock(samples[k]->mutex);
    return samples[k]->session;
  }
  /// The session counters summed over the loops; nullopt before loop 0's session exists.
  [[nodiscard]] std::optional<initiator::SessionStats> session_total() const {
    auto total = loop_session(0);
    if (!total) return std::nullopt;
    for (std::size_t k = 1; k < threads(); ++k) {
      const auto st = *loop_session(k);
      total->commands_sent += st.commands_sent;
      total->data_in_bytes_placed += st.data_in_bytes_placed;
      total->data_out_bytes_sent += st.data_out_bytes_sent;
      total->pings_sent += st.pings_sent;
      total->pings_answered += st.pings_answered;
      total->connections_lost += st.connections_lost;
      total->reconnect_attempts += st.reconnect_attempts;
      total->recoveries += st.recoveries;
      total->commands_reissued += st.commands_reissued;
      total->unit_attentions += st.unit_attentions;
      total->gave_up += st.gave_up;
    }
    return total;
  }
  /// The background logins while a loop's session is recovering or failed (the loop furthest
  /// along: most attempts; the soonest next attempt of any); nullopt while every session is
  /// logged in, and with multipath (its paths' states say it).
  [[nodiscard]] std::optional<nbd::ReconnectView> reconnect_view() const {
    std::optional<nbd::ReconnectView> out;
    const auto now = std::chrono::steady_clock::now();
    for (std::size_t k = 0; k < threads(); ++k) {
      initiator::ReconnectStatus r;
      if (k == 0) {
        auto s = session.lock();
        if (!s || !s->recovering()) continue;
        r = s->reconnect_status();
      } else {
        // The loop's events (posted here at once) are newer than its sample (every 250 ms).
        if (loop_states[k] == State::connected) continue;
        std::lock_guard lock(samples[k]->mutex);
        if (!samples[k]->reconnecting) continue;
        r = samples[k]->reconnect;
      }
      if (!out) out.emplace();
      if (r.attempts >= out->attempts) {
        out->attempts = r.attempts;
        out->last_error = r.last_error ? r.last_error.message() : std::string{};
      }
      if (r.next_attempt) {
        const auto in = static_cast<std::uint64_t>(
            std::max<std::int64_t>(0, std::chrono::duration_cast<std::chrono::milliseconds>(*r.next_attempt - now).count()));
        out->next_attempt_in_ms = std::min(out->next_attempt_in_ms.value_or(in), in);
      }
    }
    return out;
  }
  void refresh_exported_counters() const {
    if (auto e = exported.lock()) {
      read_bytes = e->read_bytes();
      lba_status_commands = e->lba_status_commands();
    }
    if (auto s = server.lock()) loop_stats = s->loop_stats();
  }

  static const char* name(State s) {
    switch (s) {
      case State::connecting: return "connecting";
      case State::connected: return "connected";
      case State::recovering: return "recovering";
      case State::gave_up: return "gave_up";
      case State::stopped: return "stopped";
    }
    return "unknown";
  }
  static std::string utc(std::chrono::system_clock::time_point t) {
    const std::time_t tt = std::chrono::system_clock::to_time_t(t);
    std::tm tm{};
    gmtime_r(&tt, &tm);
    char buf[32];
    std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
    return buf;
  }
  /// key=value lines: state, since (UTC), the session's recovery counters (summed over the loops),
  /// copied payload bytes; with --threads N > 1 also threads=N and loop.K.* per loop.
  std::string text() const {
    std::ostringstream o;
    o << "state=" << name(state) << "\nsince=" << utc(since) << "\n";
    if (auto st = session_total()) {
      o << "connections_lost=" << st->connections_lost << "\nreconnect_attempts=" << st->reconnect_attempts
        << "\nrecoveries=" << st->recoveries << "\ncommands_reissued=" << st->commands_reissued
        << "\ncommands_sent=" << st->commands_sent << "\ngave_up=" << st->gave_up << "\n";
    }
    if (const auto r = reconnect_view()) {
      o << "reconnect.attempts=" << r->attempts << "\nreconnect.next_attempt_in_ms="
        << (r->next_attempt_in_ms ? std::to_string(*r->next_attempt_in_ms) : std::string("running"))
        << "\nreconnect.last_error=" << r->last_error << "\n";
    }
    if (auto m = multipath.lock()) {
      const auto& st = m->stats();
      o << "multipath=" << initiator::to_string(m->policy()) << "\npath_downs=" << st.path_downs
        << "\npath_ups=" << st.path_ups << "\npath_retries=" << st.path_retries << "\nalua_retries=" << st.alua_retries
        << "\nflushes_held=" << st.flushes_held << "\ncommands_sent=" << st.commands << "\n";
      const auto paths = m->paths();
      for (std::size_t i = 0; i < paths.size(); ++i) {
        const auto& p = paths[i];
        const std::string k = "path." + std::to_string(i) + ".";
        o << k << "state=" << initiator::to_string(p.state) << "\n"
          << k << "alua=" << scsi::to_string(p.access_state) << "\n"
          << k << "commands=" << p.commands << "\n"
          << k << "failures=" << p.failures << "\n"
          << k << "downs=" << p.downs << "\n"
          << k << "reinstatements=" << p.reinstatements << "\n"
          << k << "reinstate_attempts=" << p.reinstate_attempts << "\n"
          << k << "url=" << p.url << "\n";
      }
    }
    refresh_exported_counters();
    std::uint64_t read_total = read_bytes, lba_status_total = lba_status_commands;
    for (std::size_t k = 1; k < threads(); ++k) {
      std::lock_guard lock(samples[k]->mutex);
      read_total += samples[k]->read_bytes;
      lba_status_total += samples[k]->lba_status_commands;
    }
    o << "read_bytes=" << read_total << "\nlba_status_commands=" << lba_status_total << "\n";
    o << "copied_payload_bytes=" << copied_payload_bytes() << "\n";
    if (threads() > 1) {
      o << "threads=" << threads() << "\n";
      for (std::size_t k = 0; k < threads(); ++k) {
        const std::string p = "loop." + std::to_string(k) + ".";
        const auto st = loop_session(k).value_or(initiator::SessionStats{});
        o << p << "state=" << name(loop_states[k]) << "\n"
          << p << "commands_sent=" << st.commands_sent << "\n"
          << p << "connections_lost=" << st.connections_lost << "\n"
          << p << "recoveries=" << st.recoveries << "\n"
          << p << "open_connections=" << loop_stats[k].open_connections << "\n"
          << p << "connections=" << loop_stats[k].connections << "\n"
          << p << "requests=" << loop_stats[k].requests << "\n";
      }
    }
    return o.str();
  }
  /// The same as one JSON document, for --status-socket (nbd_bridge/status_json.hpp).
  std::string json() const {
    const auto total = session_total();
    std::vector<nbd::LoopStatus> loops;
    if (threads() > 1) {
      refresh_exported_counters();
      for (std::size_t k = 0; k < threads(); ++k) {
        loops.push_back({.state = name(loop_states[k]),
                         .session = loop_session(k).value_or(initiator::SessionStats{}),
                         .open_connections = loop_stats[k].open_connections,
                         .connections = loop_stats[k].connections,
                         .requests = loop_stats[k].requests});
      }
    }
    const auto reconnect = reconnect_view();
    return nbd::bridge_status_json(name(state), utc(since), total ? &*total : nullptr, multipath.lock().get(),
                                   copied_payload_bytes(), buffered->load(std::memory_order_relaxed),
                                   buffer_limit_bytes, loops, reconnect ? &*reconnect : nullptr);
  }
  /// One line for SIGUSR1.
  std::string line() const {
    std::string t = text();
    for (auto& c : t)
      if (c == '\n') c = ' ';
    return "iserkit-nbd: status: " + t;
  }
  void write() const {
    if (stats_file.empty()) return;
    // Write then rename, so a reader never sees half a file.
    const std::string tmp = stats_file + ".tmp";
    { std::ofstream(tmp) << text(); }
    std::rename(tmp.c_str(), stats_file.c_str());
  }
  void set(State s) {
    state = s;
    since = std::chrono::system_clock::now();
    write();
  }
  /// The bridge's state from its loops' (one loop: that loop's): gave up if one gave up, else
  /// recovering if one recovers, else connecting if one still connects, else connected.
  State combined() const {
    for (State s : {State::gave_up, State::recovering, State::connecting})
      if (std::find(loop_states.begin(), loop_states.end(), s) != loop_states.end()) return s;
    return State::connected;
  }
  /// Loop `k`'s session `e` (called on the main loop; worker loops post it here).
  void on_event(std::size_t k, const initiator::SessionEvent& e) {
    using K = initiator::SessionEvent::Kind;
    const std::string who = threads() > 1 ? "loop " + std::to_string(k) + ": " : "";
    switch (e.kind) {
      case K::connection_lost:
        std::cerr << "iserkit-nbd: " << who << "connection lost (" << e.error.message() << "): recovering\n";
        loop_states[k] = State::recovering;
        break;
      case K::recovered:
        std::cerr << "iserkit-nbd: " << who << "recovered after " << e.attempts << " login attempt(s)\n";
        loop_states[k] = State::connected;
        if (reconnect_others) reconnect_others(k);
        break;
      case K::gave_up:
        std::cerr << "iserkit-nbd: " << who << "gave up: " << e.error.message()
                  << (exit_on_give_up ? "\n" : ": requests fail with EIO; logging in again in the background\n");
        loop_states[k] = State::gave_up;
        break;
    }
    const State now = combined();
    if (now != state) {
      set(now);
    } else {
      write();
    }
    if (e.kind == K::gave_up && exit_on_give_up) exit_on_give_up();
  }
  void on_path_event(const initiator::PathEvent& e) {
    using K = initiator::PathEvent::Kind;
    switch (e.kind) {
      case K::path_down:
        std::cerr << "iserkit-nbd: path " << e.path << " down (" << e.error.message() << ")\n";
        write();
        break;
      case K::path_up:
        std::cerr << "iserkit-nbd: path " << e.path << " up\n";
        if (state == State::recovering || state == State::gave_up) {
          set(State::connected);
        } else {
          write();
        }
        break;
      case K::all_paths_lost:
        std::cerr << "iserkit-nbd: all paths lost: recovering\n";
        set(State::recovering);
        break;
      case K::gave_up:
        std::cerr << "iserkit-nbd: gave up: no usable path"
                  << (exit_on_give_up ? "\n" : ": requests fail with EIO; paths reinstated in the background\n");
        set(State::gave_up);
        if (exit_on_give_up) exit_on_give_up();
        break;
    }
  }
};

}  // namespace iserkit::nbd
