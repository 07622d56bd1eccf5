// Progress of long `iserkit` transfers (read, write) on a terminal: a line on stderr redrawn at
// most four times a second ("read: 12.0 MiB / 64.0 MiB (18%), 120.0 MiB/s") and a closing
// summary ("read: 67108864 bytes (64.0 MiB) in 0.53 s, 120.8 MiB/s"). Quiet unless enabled: the
// CLI enables it when stderr is a terminal (isatty) or with --progress always, never with
// --progress never, so scripts and pipes see no extra output. Layer 6.
#pragma once

#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <optional>
#include <string>

namespace iserkit::cli {

/// When to show progress (`--progress auto|always|never`).
enum class ProgressMode { automatic, always, never };

/// Parses "auto", "always" or "never"; nullopt for anything else.
inline std::optional<ProgressMode> parse_progress_mode(const std::string& text) {
  if (text == "auto") return ProgressMode::automatic;
  if (text == "always") return ProgressMode::always;
  if (text == "never") return ProgressMode::never;
  return std::nullopt;
}

/// Whether progress is shown for `mode`: automatic means "stderr is a terminal".
inline bool progress_enabled(ProgressMode mode) {
  return mode == ProgressMode::always || (mode == ProgressMode::automatic && ::isatty(STDERR_FILENO) == 1);
}

/// "12.0 MiB": a byte count in binary units with one decimal.
inline std::string human_bytes(double bytes) {
  static const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
  std::size_t u = 0;
  while (bytes >= 1024 && u + 1 < std::size(units)) {
    bytes /= 1024;
    ++u;
  }
  char text[32];
  std::snprintf(text, sizeof text, u == 0 ? "%.0f %s" : "%.1f %s", bytes, units[u]);
  return text;
}

/// One transfer's progress display. `total_bytes` = 0 when unknown (a write from a pipe).
/// Not thread-safe: call from the thread doing the transfer.
class Progress {
 public:
  Progress(std::string operation, std::uint64_t total_bytes, bool enabled)
      : operation_(std::move(operation)), total_(total_bytes), enabled_(enabled) {}

  /// Sets the total once it is known (`iserkit copy` learns it after logging in).
  void set_total(std::uint64_t total_bytes) noexcept { total_ = total_bytes; }

  /// Reports `done_bytes` transferred so far; redraws at most every 250 ms.
  void update(std::uint64_t done_bytes) {
    done_ = done_bytes;
    if (!enabled_) return;
    const auto now = std::chrono::steady_clock::now();
    if (drawn_ && now - last_draw_ < std::chrono::milliseconds(250)) return;
    last_draw_ = now;
    drawn_ = true;
    std::string line = "\r" + operation_ + ": " + human_bytes(static_cast<double>(done_));
    if (total_ > 0) {
      char pct[16];
      std::snprintf(pct, sizeof pct, " (%.0f%%)", 100.0 * static_cast<double>(done_) / static_cast<double>(total_));
      line += " / " + human_bytes(static_cast<double>(total_)) + pct;
    }
    line += ", " + human_bytes(rate()) + "/s\033[K";
    std::fputs(line.c_str(), stderr);
  }

  /// Prints the closing summary (when enabled): bytes, time and average rate.
  void finish() {
    if (!enabled_) return;
    char tail[64];
    std::snprintf(tail, sizeof tail, " in %.2f s, ", seconds());
    const std::string line = "\r" + operation_ + ": " + std::to_string(done_) + " bytes (" +
                             human_bytes(static_cast<double>(done_)) + ")" + tail + human_bytes(rate()) + "/s\033[K\n";
    std::fputs(line.c_str(), stderr);
  }

  /// Ends an unfinished line (before an error message), so the message starts on its own line.
  void abandon() {
    if (enabled_ && drawn_) std::fputs("\n", stderr);
  }

 private:
  [[nodiscard]] double seconds() const {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  }
  [[nodiscard]] double rate() const {
    const double s = seconds();
    return s > 0 ? static_cast<double>(done_) / s : 0.0;
  }

  std::string operation_;
  std::uint64_t total_;
  bool enabled_;
  std::uint64_t done_ = 0;
  bool drawn_ = false;
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
  std::chrono::steady_clock::time_point last_draw_{};
};

}  // namespace iserkit::cli
