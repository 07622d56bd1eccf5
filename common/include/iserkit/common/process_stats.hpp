// What the kernel says about this process, read from /proc at the moment of the call: CPU time,
// memory, descriptors and start time — the values behind the Prometheus process_* metrics of both
// daemons (common/metrics/daemon_metrics.hpp, docs/metrics.md). The parsers are pure functions over
// the files' text (proc(5)), unit-tested with fixed samples; read_process_stats() does the I/O.
// Layer 0 helper: no globals, no threads.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "iserkit/common/result.hpp"

namespace iserkit {

/// The fields of /proc/PID/stat the process metrics need (proc(5), "/proc/pid/stat").
struct ProcStat {
  std::uint64_t user_ticks = 0;        ///< utime (field 14), clock ticks
  std::uint64_t system_ticks = 0;      ///< stime (field 15), clock ticks
  std::uint64_t start_ticks = 0;       ///< starttime (field 22), clock ticks after boot
  std::uint64_t virtual_bytes = 0;     ///< vsize (field 23), bytes
  std::uint64_t resident_pages = 0;    ///< rss (field 24), pages
};

/// Parses the text of /proc/PID/stat. The command name (field 2) is skipped up to its last ')', so
/// a name holding spaces or parentheses does not shift the fields. Errors:
/// std::errc::invalid_argument when the text has no ')' or fewer than 24 fields, or a needed field
/// is not a decimal number.
Result<ProcStat> parse_proc_stat(std::string_view text);

/// The boot time from the text of /proc/stat (its `btime` line), seconds since the Unix epoch.
/// Errors: std::errc::invalid_argument when there is no well-formed `btime` line.
Result<std::uint64_t> parse_boot_time(std::string_view text);

/// The soft "Max open files" limit from the text of /proc/PID/limits. "unlimited" gives
/// UINT64_MAX. Errors: std::errc::invalid_argument when the line is missing or malformed.
Result<std::uint64_t> parse_max_open_files(std::string_view text);

/// One reading of this process, as the Prometheus process collectors define it.
struct ProcessStats {
  double cpu_seconds = 0;                  ///< user + system CPU time, seconds
  std::uint64_t resident_memory_bytes = 0; ///< resident set size, bytes
  std::uint64_t virtual_memory_bytes = 0;  ///< virtual memory size, bytes
  std::uint64_t open_fds = 0;              ///< entries of /proc/self/fd (the one used to list it excluded)
  std::uint64_t max_fds = 0;               ///< the soft RLIMIT_NOFILE
  double start_time_seconds = 0;           ///< when the process started, seconds since the Unix epoch
};

/// Reads /proc/self/stat, /proc/stat, /proc/self/limits and lists /proc/self/fd, now (a few
/// system calls; for a scrape, not for the data path). Thread-safe. Errors: the errno of a file
/// that cannot be read, or std::errc::invalid_argument when one cannot be parsed.
Result<ProcessStats> read_process_stats();

}  // namespace iserkit
