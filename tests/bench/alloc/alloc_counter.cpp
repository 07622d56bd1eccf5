// A counting allocator for the benchmarks (issue 10 item 8), loaded with LD_PRELOAD into
// iserkit-target or iserkit-nbd (or any process). It interposes the C allocation entry points
// (libstdc++'s operator new and Asio's coroutine frames end in malloc or aligned_alloc) and counts,
// process-wide, every allocation call and the bytes asked for. Nothing is counted unless
// ISERKIT_ALLOC_COUNTER names a file; each SIGUSR2 then appends one line (SIGUSR2: iserkit-nbd uses SIGUSR1 for its status line)
//   allocations=N bytes=B frees=F
// to that file (cumulative since start; a driver subtracts two snapshots), and so does exit.
// Only async-signal-safe calls in the handler (atomics, open/write/close). Bench only: never linked
// into a product binary.
//
// Where the allocations come from: when ISERKIT_ALLOC_STACKS also names a file, the call stack of
// every allocation between the first and the second report (alloc_count.py's first measured run)
// is recorded (backtrace(3), up to 32 frames, at most 16,384 stacks), and the second report writes
// them there: the process's /proc/self/maps, then one line per allocation,
//   stack BYTES ADDR ADDR ...
// (alloc_stacks.py groups and symbolizes them). Recording slows every allocation; a count taken
// with it is still a count.
#include <cerrno>
#include <csignal>
#include <fcntl.h>
#include <atomic>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <execinfo.h>
#include <unistd.h>

// glibc exports its allocator under these names, so no dlsym (which itself allocates) is needed.
extern "C" {
void* __libc_malloc(size_t);
void* __libc_calloc(size_t, size_t);
void* __libc_realloc(void*, size_t);
void __libc_free(void*);
void* __libc_memalign(size_t, size_t);
}

namespace {

std::atomic<unsigned long> allocations;
std::atomic<unsigned long> allocated_bytes;
std::atomic<unsigned long> frees;
char report_path[4096];
bool enabled = false;

// Stack recording (ISERKIT_ALLOC_STACKS): 0 off, 1 armed (before the first report), 2 recording,
// 3 done (the second report wrote them).
constexpr int max_frames = 32;
constexpr size_t max_stacks = 16384;
struct Stack {
  size_t bytes;
  int frames;
  void* pc[max_frames];
};
Stack stacks[max_stacks];
std::atomic<size_t> stacks_used;
std::atomic<int> stacks_state;
std::atomic<unsigned long> reports;
char stacks_path[4096];
__attribute__((tls_model("initial-exec"))) thread_local bool in_backtrace = false;

void record(size_t bytes) {
  if (stacks_state.load(std::memory_order_relaxed) != 2 || in_backtrace) return;
  size_t i = stacks_used.fetch_add(1, std::memory_order_relaxed);
  if (i >= max_stacks) return;
  in_backtrace = true;  // backtrace() may allocate (it did its loading in start())
  Stack& s = stacks[i];
  s.frames = backtrace(s.pc, max_frames);
  s.bytes = bytes;
  in_backtrace = false;
}

void count(size_t bytes) {
  if (enabled) {
    allocations.fetch_add(1, std::memory_order_relaxed);
    allocated_bytes.fetch_add(bytes, std::memory_order_relaxed);
    record(bytes);
  }
}

}  // namespace

extern "C" {

void* malloc(size_t size) noexcept {
  count(size);
  return __libc_malloc(size);
}
void* calloc(size_t n, size_t size) noexcept {
  count(n * size);
  return __libc_calloc(n, size);
}
void* realloc(void* p, size_t size) noexcept {
  count(size);
  return __libc_realloc(p, size);
}
void free(void* p) noexcept {
  if (p != nullptr && enabled) frees.fetch_add(1, std::memory_order_relaxed);
  __libc_free(p);
}
void* memalign(size_t alignment, size_t size) noexcept {
  count(size);
  return __libc_memalign(alignment, size);
}
void* aligned_alloc(size_t alignment, size_t size) noexcept {
  count(size);
  return __libc_memalign(alignment, size);
}
int posix_memalign(void** out, size_t alignment, size_t size) noexcept {
  if (alignment % sizeof(void*) != 0 || (alignment & (alignment - 1)) != 0) return EINVAL;
  count(size);
  void* p = __libc_memalign(alignment, size);
  if (p == nullptr) return ENOMEM;
  *out = p;
  return 0;
}
void* valloc(size_t size) noexcept {
  count(size);
  return __libc_memalign(static_cast<size_t>(sysconf(_SC_PAGESIZE)), size);
}

}  // extern "C"

namespace {

// Formats an unsigned decimal into buf (no stdio: it may allocate and is not signal-safe).
size_t put_u64(char* buf, unsigned long v) {
  char tmp[24];
  size_t n = 0;
  do {
    tmp[n++] = static_cast<char>('0' + v % 10);
    v /= 10;
  } while (v != 0);
  for (size_t i = 0; i < n; ++i) buf[i] = tmp[n - 1 - i];
  return n;
}

size_t put_str(char* buf, const char* s) {
  size_t n = strlen(s);
  memcpy(buf, s, n);
  return n;
}

size_t put_hex(char* buf, unsigned long v) {
  static const char digits[] = "0123456789abcdef";
  char tmp[24];
  size_t n = 0;
  do {
    tmp[n++] = digits[v & 15];
    v >>= 4;
  } while (v != 0);
  buf[0] = '0';
  buf[1] = 'x';
  for (size_t i = 0; i < n; ++i) buf[2 + i] = tmp[n - 1 - i];
  return n + 2;
}

void write_all(int fd, const char* p, size_t n) {
  while (n > 0) {
    ssize_t w = write(fd, p, n);
    if (w <= 0) return;
    p += w;
    n -= static_cast<size_t>(w);
  }
}

// The recorded stacks to stacks_path: /proc/self/maps, then "stack BYTES ADDR..." per allocation.
void write_stacks() {
  int fd = open(stacks_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return;
  int maps = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
  if (maps >= 0) {
    char buf[4096];
    ssize_t r;
    while ((r = read(maps, buf, sizeof buf)) > 0) write_all(fd, buf, static_cast<size_t>(r));
    close(maps);
  }
  size_t used = stacks_used.load();
  if (used > max_stacks) used = max_stacks;
  char line[64 + max_frames * 20];
  for (size_t i = 0; i < used; ++i) {
    size_t n = put_str(line, "stack ");
    n += put_u64(line + n, stacks[i].bytes);
    for (int f = 0; f < stacks[i].frames; ++f) {
      line[n++] = ' ';
      n += put_hex(line + n, reinterpret_cast<unsigned long>(stacks[i].pc[f]));
    }
    line[n++] = '\n';
    write_all(fd, line, n);
  }
  close(fd);
}

void report() {
  int saved = errno;
  unsigned long nth = reports.fetch_add(1) + 1;
  if (nth == 1 && stacks_state.load() == 1) stacks_state.store(2);
  if (nth == 2 && stacks_state.load() == 2) {
    stacks_state.store(3);
    write_stacks();
  }
  char line[128];
  size_t n = 0;
  n += put_str(line + n, "allocations=");
  n += put_u64(line + n, allocations.load());
  n += put_str(line + n, " bytes=");
  n += put_u64(line + n, allocated_bytes.load());
  n += put_str(line + n, " frees=");
  n += put_u64(line + n, frees.load());
  line[n++] = '\n';
  int fd = open(report_path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd >= 0) {
    ssize_t ignored = write(fd, line, n);
    static_cast<void>(ignored);
    close(fd);
  }
  errno = saved;
}

void on_sigusr1(int signo) {
  static_cast<void>(signo);
  report();
}

__attribute__((constructor)) void start() {
  const char* path = getenv("ISERKIT_ALLOC_COUNTER");
  if (path == nullptr || path[0] == '\0' || strlen(path) >= sizeof report_path) return;
  strcpy(report_path, path);
  struct sigaction action;
  memset(&action, 0, sizeof action);
  action.sa_handler = on_sigusr1;
  action.sa_flags = SA_RESTART;
  sigemptyset(&action.sa_mask);
  sigaction(SIGUSR2, &action, nullptr);
  const char* stacks_to = getenv("ISERKIT_ALLOC_STACKS");
  if (stacks_to != nullptr && stacks_to[0] != '\0' && strlen(stacks_to) < sizeof stacks_path) {
    strcpy(stacks_path, stacks_to);
    void* pc[2];
    backtrace(pc, 2);  // loads the unwinder now (it allocates), not inside malloc later
    stacks_state.store(1);
  }
  enabled = true;
}

__attribute__((destructor)) void stop() {
  if (enabled) report();
}

}  // namespace
