// The daemons' shared metrics (common/metrics/daemon_metrics.hpp): iserkit_build_info and the
// process_* families as the text exposition shows them, and the endpoint's address checks.
#include "iserkit/metrics/daemon_metrics.hpp"

#include <prometheus/registry.h>
#include <prometheus/text_serializer.h>

#include <gtest/gtest.h>

namespace iserkit::metrics {
namespace {

std::string text(const std::vector<prometheus::MetricFamily>& families) {
  return prometheus::TextSerializer().Serialize(families);
}

TEST(DaemonMetrics, BuildInfoAndProcessFamilies) {
  const ProcessStats p{.cpu_seconds = 1.5, .resident_memory_bytes = 4096, .virtual_memory_bytes = 8192,
                       .open_fds = 7, .max_fds = 1024, .start_time_seconds = 1764316800};
  const auto out = text(daemon_metric_families({.version = "1.2.3", .commit = "abc123", .compiler = "gcc 12.2.0"}, p));
  EXPECT_NE(out.find("# TYPE iserkit_build_info gauge\n"), std::string::npos) << out;
  EXPECT_NE(out.find("iserkit_build_info{version=\"1.2.3\",commit=\"abc123\",compiler=\"gcc 12.2.0\"} 1\n"),
            std::string::npos) << out;
  EXPECT_NE(out.find("# TYPE process_cpu_seconds_total counter\nprocess_cpu_seconds_total 1.5\n"), std::string::npos) << out;
  EXPECT_NE(out.find("process_resident_memory_bytes 4096\n"), std::string::npos) << out;
  EXPECT_NE(out.find("process_virtual_memory_bytes 8192\n"), std::string::npos) << out;
  EXPECT_NE(out.find("process_open_fds 7\n"), std::string::npos) << out;
  EXPECT_NE(out.find("process_max_fds 1024\n"), std::string::npos) << out;
  EXPECT_NE(out.find("process_start_time_seconds 1764316800\n"), std::string::npos) << out;
}

TEST(DaemonMetrics, UnreadableProcLeavesOnlyBuildInfo) {
  const Result<ProcessStats> none = fail(std::errc::no_such_file_or_directory);
  const auto families = daemon_metric_families(build_info(), none);
  ASSERT_EQ(families.size(), 1u);
  EXPECT_EQ(families[0].name, "iserkit_build_info");
}

TEST(DaemonMetrics, ThisBuildHasAnIdentity) {
  const auto b = build_info();
  EXPECT_FALSE(b.version.empty());
  EXPECT_FALSE(b.commit.empty());
  EXPECT_FALSE(b.compiler.empty());
  EXPECT_EQ(b.commit.find('"'), std::string_view::npos);
  // The collector reads /proc now: every process_* family is there.
  const auto out = text(make_daemon_collector()->Collect());
  for (const char* name : {"process_cpu_seconds_total", "process_resident_memory_bytes", "process_virtual_memory_bytes",
                           "process_open_fds", "process_max_fds", "process_start_time_seconds"})
    EXPECT_NE(out.find(std::string("# TYPE ") + name), std::string::npos) << name;
}

TEST(DaemonMetrics, MalformedAddressesAreRefused) {
  for (const char* bad : {"nonsense", ":9100", "127.0.0.1:", "127.0.0.1:9x"}) {
    const auto e = Endpoint::open(bad, 1);
    ASSERT_FALSE(e) << bad;
    EXPECT_EQ(e.error(), std::make_error_code(std::errc::invalid_argument)) << bad;
  }
}

TEST(DaemonMetrics, EndpointKeepsWhatItServes) {
  auto endpoint = Endpoint::open("127.0.0.1:0", 1);
  ASSERT_TRUE(endpoint) << endpoint.error().message();
  EXPECT_GT((*endpoint)->port(), 0);
  // The Exposer holds collectables weakly: one given to add() and dropped by the caller lives on.
  auto registry = std::make_shared<prometheus::Registry>();
  std::weak_ptr<prometheus::Registry> watch = registry;
  (*endpoint)->add(std::move(registry));
  EXPECT_FALSE(watch.expired());
}

}  // namespace
}  // namespace iserkit::metrics
