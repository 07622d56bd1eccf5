// The /proc readers behind the process_* metrics (process_stats.hpp; proc(5)).
#include "iserkit/common/process_stats.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <algorithm>
#include <limits>
#include <optional>
#include <vector>

namespace iserkit {

namespace {

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n'; }

// The whitespace-separated words of `text`.
std::vector<std::string_view> words(std::string_view text) {
  std::vector<std::string_view> out;
  std::size_t i = 0;
  while (i < text.size()) {
    while (i < text.size() && is_space(text[i])) ++i;
    const std::size_t start = i;
    while (i < text.size() && !is_space(text[i])) ++i;
    if (i > start) out.push_back(text.substr(start, i - start));
  }
  return out;
}

bool to_u64(std::string_view s, std::uint64_t& out) {
  if (s.empty()) return false;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  return ec == std::errc{} && end == s.data() + s.size();
}

// The rest of the first line of `text` that starts with `prefix`; nullopt when none does.
std::optional<std::string_view> line_after(std::string_view text, std::string_view prefix) {
  std::size_t pos = 0;
  while (pos <= text.size()) {
    const std::size_t end = std::min(text.find('\n', pos), text.size());
    const std::string_view line = text.substr(pos, end - pos);
    if (line.starts_with(prefix)) return line.substr(prefix.size());
    pos = end + 1;
  }
  return std::nullopt;
}

Result<std::string> read_text(const char* path) {
  const int fd = ::open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return fail(std::error_code(errno, std::generic_category()));
  std::string out;
  char chunk[4096];
  while (true) {
    const ssize_t n = ::read(fd, chunk, sizeof chunk);
    if (n < 0) {
      if (errno == EINTR) continue;
      const std::error_code ec(errno, std::generic_category());
      ::close(fd);
      return fail(ec);
    }
    if (n == 0) break;
    out.append(chunk, static_cast<std::size_t>(n));
  }
  ::close(fd);
  return out;
}

Result<std::uint64_t> count_open_fds() {
  DIR* dir = ::opendir("/proc/self/fd");
  if (dir == nullptr) return fail(std::error_code(errno, std::generic_category()));
  std::uint64_t n = 0;
  while (const dirent* e = ::readdir(dir))
    if (e->d_name[0] != '.') ++n;
  ::closedir(dir);
  return n == 0 ? 0 : n - 1;  // the descriptor opendir() used to list the directory
}

}  // namespace

Result<ProcStat> parse_proc_stat(std::string_view text) {
  const auto close = text.rfind(')');
  if (close == std::string_view::npos) return fail(std::errc::invalid_argument);
  // words[0] is field 3 (state); field N is words[N - 3].
  const auto w = words(text.substr(close + 1));
  if (w.size() < 22) return fail(std::errc::invalid_argument);
  ProcStat s;
  if (!to_u64(w[14 - 3], s.user_ticks) || !to_u64(w[15 - 3], s.system_ticks) || !to_u64(w[22 - 3], s.start_ticks) ||
      !to_u64(w[23 - 3], s.virtual_bytes) || !to_u64(w[24 - 3], s.resident_pages))
    return fail(std::errc::invalid_argument);
  return s;
}

Result<std::uint64_t> parse_boot_time(std::string_view text) {
  const auto rest = line_after(text, "btime ");
  if (!rest) return fail(std::errc::invalid_argument);
  const auto w = words(*rest);
  std::uint64_t v = 0;
  if (w.size() != 1 || !to_u64(w[0], v)) return fail(std::errc::invalid_argument);
  return v;
}

Result<std::uint64_t> parse_max_open_files(std::string_view text) {
  // "Max open files            1024                 524288               files"
  const auto rest = line_after(text, "Max open files");
  if (!rest) return fail(std::errc::invalid_argument);
  const auto w = words(*rest);
  if (w.size() < 2) return fail(std::errc::invalid_argument);
  if (w[0] == "unlimited") return std::numeric_limits<std::uint64_t>::max();
  std::uint64_t v = 0;
  if (!to_u64(w[0], v)) return fail(std::errc::invalid_argument);
  return v;
}

Result<ProcessStats> read_process_stats() {
  auto stat_text = read_text("/proc/self/stat");
  if (!stat_text) return fail(stat_text.error());
  auto stat = parse_proc_stat(*stat_text);
  if (!stat) return fail(stat.error());
  auto system_text = read_text("/proc/stat");
  if (!system_text) return fail(system_text.error());
  auto boot = parse_boot_time(*system_text);
  if (!boot) return fail(boot.error());
  auto limits_text = read_text("/proc/self/limits");
  if (!limits_text) return fail(limits_text.error());
  auto max_fds = parse_max_open_files(*limits_text);
  if (!max_fds) return fail(max_fds.error());
  auto open_fds = count_open_fds();
  if (!open_fds) return fail(open_fds.error());
  const long ticks = ::sysconf(_SC_CLK_TCK);
  const long page = ::sysconf(_SC_PAGESIZE);
  if (ticks <= 0 || page <= 0) return fail(std::errc::invalid_argument);
  const auto per_second = static_cast<double>(ticks);
  return ProcessStats{
      .cpu_seconds = static_cast<double>(stat->user_ticks + stat->system_ticks) / per_second,
      .resident_memory_bytes = stat->resident_pages * static_cast<std::uint64_t>(page),
      .virtual_memory_bytes = stat->virtual_bytes,
      .open_fds = *open_fds,
      .max_fds = *max_fds,
      .start_time_seconds = static_cast<double>(*boot) + static_cast<double>(stat->start_ticks) / per_second,
  };
}

}  // namespace iserkit
