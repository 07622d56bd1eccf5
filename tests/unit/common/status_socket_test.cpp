// StatusSocket bounds (status_socket.hpp): a client that connects and never reads does not hold
// up the others; a client slower than write_timeout is closed; clients above max_clients are
// closed unanswered; the document arrives whole.
#include "iserkit/common/status_socket.hpp"

#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <future>
#include <thread>

#include <gtest/gtest.h>

namespace iserkit {
namespace {

// A raw client connected to `path` that reads nothing until asked.
int connect_raw(const std::string& path) {
  const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path, path.data(), path.size());
  EXPECT_EQ(::connect(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof addr), 0);
  return fd;
}

// Reads `fd` to EOF (or error) and returns the bytes read.
std::size_t drain(int fd) {
  std::size_t total = 0;
  char chunk[65536];
  while (true) {
    const ssize_t n = ::read(fd, chunk, sizeof chunk);
    if (n <= 0) return total;
    total += static_cast<std::size_t>(n);
  }
}

class StatusSocketTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() / ("iserkit-status-" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir_);
    path_ = (dir_ / "s.sock").string();
  }
  void TearDown() override {
    socket_.reset();
    guard_.reset();
    if (thread_.joinable()) thread_.join();
    std::filesystem::remove_all(dir_);
  }
  void start(std::string document, StatusSocketLimits limits) {
    auto s = StatusSocket::open(context_.get_executor(), path_, [d = std::move(document)] { return d; }, limits);
    ASSERT_TRUE(s.has_value()) << s.error().message();
    socket_ = std::move(*s);
    thread_ = std::thread([this] { context_.run(); });
  }
  void stop() {
    asio::post(context_, [this] { socket_->stop(); });
    guard_.reset();
    thread_.join();
  }

  std::filesystem::path dir_;
  std::string path_;
  asio::io_context context_;
  std::optional<asio::executor_work_guard<asio::io_context::executor_type>> guard_{asio::make_work_guard(context_)};
  std::unique_ptr<StatusSocket> socket_;
  std::thread thread_;
};

// 768 KiB: larger than a Unix socket's buffer, so a client that does not read keeps its answer
// from completing (under the 1 MiB query_status_socket accepts).
const std::string big_document(768 * 1024, 'x');

TEST_F(StatusSocketTest, SilentClientDoesNotBlockOthers) {
  start(big_document, {.max_clients = 4, .write_timeout = std::chrono::seconds(30)});
  const int silent = connect_raw(path_);
  std::this_thread::sleep_for(std::chrono::milliseconds(100));  // its answer is under way and stuck
  auto other = std::async(std::launch::async, [this] { return query_status_socket(path_); });
  const bool answered = other.wait_for(std::chrono::seconds(5)) == std::future_status::ready;
  ::close(silent);  // unblocks a server that serves one client at a time, so the test ends either way
  ASSERT_TRUE(answered) << "a client that reads nothing held up another client";
  auto text = other.get();
  ASSERT_TRUE(text.has_value()) << text.error().message();
  EXPECT_EQ(*text, big_document);
  stop();
}

TEST_F(StatusSocketTest, ClientSlowerThanWriteTimeoutIsClosed) {
  start(big_document, {.max_clients = 4, .write_timeout = std::chrono::milliseconds(200)});
  const int slow = connect_raw(path_);
  std::this_thread::sleep_for(std::chrono::milliseconds(600));
  const std::size_t got = drain(slow);  // what the kernel held, then EOF: the server gave up
  ::close(slow);
  EXPECT_LT(got, big_document.size());
  // The server still answers.
  auto text = query_status_socket(path_);
  ASSERT_TRUE(text.has_value()) << text.error().message();
  EXPECT_EQ(text->size(), big_document.size());
  stop();
}

TEST_F(StatusSocketTest, ClientsAboveTheBoundAreClosedUnanswered) {
  start(big_document, {.max_clients = 1, .write_timeout = std::chrono::seconds(30)});
  const int silent = connect_raw(path_);
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  const int second = connect_raw(path_);
  EXPECT_EQ(drain(second), 0u);  // closed at once, nothing sent
  ::close(second);
  EXPECT_EQ(drain(silent), big_document.size());  // the first one still gets it whole
  ::close(silent);
  stop();
}

}  // namespace
}  // namespace iserkit
