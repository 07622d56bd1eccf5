// A counting allocator for the benchmarks (issue 10 item 8), loaded with LD_PRELOAD into
// iserkit-target or iserkit-nbd (or any process). It interposes the C allocation entry points
// (libstdc++'s operator new and Asio's coroutine frames end in malloc or aligned_alloc) and counts,
// process-wide, every allocation call and the bytes asked for. Nothing is counted unless
// ISERKIT_ALLOC_COUNTER names a file; each SIGUSR2 then appends one line (SIGUSR2: iserkit-nbd uses SIGUSR1 for its status line)
//   allocations=N bytes=B frees=F
// to that file (cumulative since start; a driver subtracts two snapshots), and so does exit.
// Only async-signal-safe calls in the handler (atomics, open/write/close). Bench only: never linked
// into a product binary.
#include <cerrno>
#include <csignal>
#include <fcntl.h>
#include <atomic>
#include <cstddef>
#include <cstdlib>
#include <cstring>
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

void count(size_t bytes) {
  if (enabled) {
    allocations.fetch_add(1, std::memory_order_relaxed);
    allocated_bytes.fetch_add(bytes, std::memory_order_relaxed);
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

void report() {
  char line[128];
  size_t n = 0;
  n += put_str(line + n, "allocations=");
  n += put_u64(line + n, allocations.load());
  n += put_str(line + n, " bytes=");
  n += put_u64(line + n, allocated_bytes.load());
  n += put_str(line + n, " frees=");
  n += put_u64(line + n, frees.load());
  line[n++] = '\n';
  int saved = errno;
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
  enabled = true;
}

__attribute__((destructor)) void stop() {
  if (enabled) report();
}

}  // namespace
