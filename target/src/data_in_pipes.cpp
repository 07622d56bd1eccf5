// DataInPipes (see data_in_pipes.hpp).
#include "data_in_pipes.hpp"

#include <fcntl.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <algorithm>

namespace iserkit::target {
namespace {
constexpr std::size_t page_bytes = 4096;
}

DataInPipes::~DataInPipes() {
  for (auto& p : spare_) close(p);
  for (auto& p : lent_) close(p);
  for (auto& a : active_) close(a.pipe);
}

void DataInPipes::close(Pipe& p) noexcept {
  if (p.read_fd >= 0) ::close(p.read_fd);
  if (p.write_fd >= 0) ::close(p.write_fd);
  p.read_fd = p.write_fd = -1;
}

int DataInPipes::take(std::uint64_t offset_bytes, std::size_t length_bytes) {
  if (length_bytes < min_bytes) return -1;
  // Each page the range touches is one slot of the pipe (a splice from the page cache puts page
  // references in it, partial ones at the ends).
  const std::size_t pages = (offset_bytes % page_bytes + length_bytes + page_bytes - 1) / page_bytes;
  Pipe p;
  if (!spare_.empty()) {
    p = spare_.back();
    if (pages * page_bytes > p.capacity) return -1;
    spare_.pop_back();
  } else {
    if (created_ >= max_pipes) return -1;
    int fds[2];
    if (::pipe2(fds, O_CLOEXEC | O_NONBLOCK) != 0) return -1;
    p = Pipe{fds[0], fds[1], 0};
    (void)::fcntl(p.write_fd, F_SETPIPE_SZ, static_cast<int>(pipe_bytes));  // refused: keeps its size
    const int capacity = ::fcntl(p.write_fd, F_GETPIPE_SZ);
    if (capacity <= 0) {
      close(p);
      return -1;
    }
    p.capacity = static_cast<std::size_t>(capacity);
    ++created_;
    if (pages * page_bytes > p.capacity) {
      give_back(p);
      return -1;
    }
  }
  lent_.push_back(p);
  taken_ = lent_.size();
  return p.write_fd;
}

void DataInPipes::started(int write_fd, iscsi::Itt itt, bool spliced, std::size_t length_bytes) {
  const auto it = std::find_if(lent_.begin(), lent_.end(), [&](const Pipe& p) { return p.write_fd == write_fd; });
  if (it == lent_.end()) return;
  const Pipe p = *it;
  lent_.erase(it);
  taken_ = lent_.size();
  if (!spliced) {
    give_back(p);
    return;
  }
  end(itt);  // an older pipe of this ITT (its task never reached end()) goes first
  active_.push_back(Active{.itt = itt, .pipe = p, .bytes = length_bytes, .taken = 0});
}

bool DataInPipes::mark(std::span<datamover::PduOut> pdus) {
  if (active_.empty()) return true;
  for (auto& pdu : pdus) {
    if (iscsi::raw_opcode(pdu.bhs) != static_cast<std::uint8_t>(iscsi::Opcode::data_in) || pdu.data.empty()) continue;
    const iscsi::Itt itt = iscsi::itt_of(pdu.bhs);
    const auto it = std::find_if(active_.begin(), active_.end(), [&](const Active& a) { return a.itt == itt; });
    if (it == active_.end()) continue;
    // RFC 7143 §11.7.5: Buffer Offset, bytes 40-43.
    const std::uint32_t offset = load_be32(&pdu.bhs[40]);
    if (offset != it->taken || pdu.data.size() > it->bytes - it->taken) return false;
    pdu.splice_from = it->pipe.read_fd;
    it->taken += pdu.data.size();
    marked_bytes_ += pdu.data.size();
  }
  return true;
}

void DataInPipes::end(iscsi::Itt itt) {
  const auto it = std::find_if(active_.begin(), active_.end(), [&](const Active& a) { return a.itt == itt; });
  if (it == active_.end()) return;
  const Pipe p = it->pipe;
  active_.erase(it);
  give_back(p);
}

void DataInPipes::give_back(Pipe p) noexcept {
  int left = 0;
  if (::ioctl(p.read_fd, FIONREAD, &left) == 0 && left == 0) {
    spare_.push_back(p);
    return;
  }
  close(p);
  --created_;
}

}  // namespace iserkit::target
