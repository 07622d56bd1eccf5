// --run helpers (nbd_bridge/captive): the NBD URI and environment given to the captive command,
// the host clients use for a wildcard listener, spawning and reaping with the shell's exit
// statuses, the pid file and the private socket directory.
#include "nbd_bridge/captive.hpp"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <thread>

namespace iserkit::nbd {
namespace {

TEST(NbdCaptive, UriForUnixSocketAndTcp) {
  EXPECT_EQ(nbd_uri({.unix_socket = "/tmp/d/nbd.sock"}), "nbd+unix:///?socket=/tmp/d/nbd.sock");
  EXPECT_EQ(nbd_uri({.unix_socket = "/tmp/a b", .export_name = "x:y"}), "nbd+unix:///x%3Ay?socket=/tmp/a%20b");
  EXPECT_EQ(nbd_uri({.tcp_host = "127.0.0.1", .tcp_port = 10809}), "nbd://127.0.0.1:10809/");
  EXPECT_EQ(nbd_uri({.tcp_host = "::1", .tcp_port = 7, .export_name = "disk"}), "nbd://[::1]:7/disk");
  // --tls=require: nbds, with the credentials libnbd needs in the URI.
  EXPECT_EQ(nbd_uri({.tcp_host = "127.0.0.1", .tcp_port = 7, .tls = true, .tls_username = "alice",
                     .tls_psk_file = "/k/keys.psk"}),
            "nbds://alice@127.0.0.1:7/?tls-psk-file=/k/keys.psk");
  EXPECT_EQ(nbd_uri({.unix_socket = "/s", .export_name = "d", .tls = true, .tls_certificates = "/pki"}),
            "nbds+unix:///d?socket=/s&tls-certificates=/pki");
  EXPECT_EQ(nbd_uri({.unix_socket = "/s", .tls = false, .tls_psk_file = "/k"}), "nbd+unix:///?socket=/s");
  EXPECT_EQ(client_host("*"), "127.0.0.1");
  EXPECT_EQ(client_host("0.0.0.0"), "127.0.0.1");
  EXPECT_EQ(client_host("::"), "::1");
  EXPECT_EQ(client_host("192.0.2.1"), "192.0.2.1");
}

TEST(NbdCaptive, EnvironmentNamesAsNbdkit) {
  const auto env = captive_environment({.unix_socket = "/s", .export_name = "e"});
  const auto has = [&](const std::string& entry) { return std::find(env.begin(), env.end(), entry) != env.end(); };
  EXPECT_TRUE(has("uri=nbd+unix:///e?socket=/s"));
  EXPECT_TRUE(has("nbd=nbd+unix:///e?socket=/s"));
  EXPECT_TRUE(has("unixsocket=/s"));
  EXPECT_TRUE(has("port="));
  EXPECT_TRUE(has("exportname=e"));
}

TEST(NbdCaptive, SpawnSeesVariablesAndReportsShellStatus) {
  char dir_template[] = "/tmp/captive-test.XXXXXX";
  ASSERT_NE(::mkdtemp(dir_template), nullptr);
  const std::string out = std::string(dir_template) + "/out";
  auto pid = spawn_command("printf %s \"$uri\" >" + out + "; exit 3", {"uri=nbd://h:1/"});
  ASSERT_TRUE(pid);
  EXPECT_EQ(wait_command(*pid), 3);
  std::string text;
  std::getline(std::ifstream(out), text);
  EXPECT_EQ(text, "nbd://h:1/");
  // A signal ends it: 128 + N, as a shell reports it. reap_command never blocks.
  pid = spawn_command("sleep 5", {});
  ASSERT_TRUE(pid);
  EXPECT_FALSE(reap_command(*pid));
  ::kill(*pid, SIGKILL);
  std::optional<int> status;
  for (int i = 0; i < 500 && !status; ++i) {
    status = reap_command(*pid);
    if (!status) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ASSERT_TRUE(status);
  EXPECT_EQ(*status, 128 + SIGKILL);
  // A command that cannot run: the shell's 127.
  pid = spawn_command("/nonexistent/command", {});
  ASSERT_TRUE(pid);
  EXPECT_EQ(wait_command(*pid), 127);
  ::unlink(out.c_str());
  ::rmdir(dir_template);
}

TEST(NbdCaptive, PidFileAndPrivateSocket) {
  auto socket = PrivateSocket::create();
  ASSERT_TRUE(socket);
  const std::string path = socket->path();
  const std::string dir = path.substr(0, path.rfind('/'));
  struct stat st {};
  ASSERT_EQ(::stat(dir.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);
  const std::string pid_file = dir + "/pid";
  ASSERT_TRUE(write_pid_file(pid_file));
  std::string text;
  std::getline(std::ifstream(pid_file), text);
  EXPECT_EQ(text, std::to_string(::getpid()));
  EXPECT_FALSE(write_pid_file(dir + "/no/such/dir/pid"));
  ::unlink(pid_file.c_str());
  { PrivateSocket gone = std::move(*socket); }
  EXPECT_NE(::stat(dir.c_str(), &st), 0);  // removed with its owner
}

}  // namespace
}  // namespace iserkit::nbd
