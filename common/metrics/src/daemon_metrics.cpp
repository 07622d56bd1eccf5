// The daemons' shared metrics endpoint, build info and process metrics (daemon_metrics.hpp).
#include "iserkit/metrics/daemon_metrics.hpp"

#include "iserkit/common/host_port.hpp"
#include "iserkit_build_info.h"  // generated at build time (cmake/build_info.cmake)

namespace iserkit::metrics {

namespace {

using prometheus::ClientMetric;
using prometheus::MetricFamily;
using prometheus::MetricType;

MetricFamily gauge_family(const char* name, const char* help, double value) {
  ClientMetric m;
  m.gauge.value = value;
  return MetricFamily{name, help, MetricType::Gauge, {m}};
}

class DaemonCollector final : public prometheus::Collectable {
 public:
  std::vector<MetricFamily> Collect() const override { return daemon_metric_families(build_info(), read_process_stats()); }
};

}  // namespace

BuildInfo build_info() noexcept {
  return BuildInfo{.version = build_values::version, .commit = build_values::commit, .compiler = build_values::compiler};
}

std::vector<MetricFamily> daemon_metric_families(const BuildInfo& build, const Result<ProcessStats>& process) {
  std::vector<MetricFamily> out;
  ClientMetric info;
  info.label = {{"version", std::string(build.version)},
                {"commit", std::string(build.commit)},
                {"compiler", std::string(build.compiler)}};
  info.gauge.value = 1;
  out.push_back(MetricFamily{"iserkit_build_info", "always 1; labels: the version, commit and compiler of this build",
                             MetricType::Gauge, {info}});
  if (!process) return out;
  ClientMetric cpu;
  cpu.counter.value = process->cpu_seconds;
  out.push_back(MetricFamily{"process_cpu_seconds_total", "user and system CPU time spent, in seconds",
                             MetricType::Counter, {cpu}});
  out.push_back(gauge_family("process_resident_memory_bytes", "resident memory size in bytes",
                             static_cast<double>(process->resident_memory_bytes)));
  out.push_back(gauge_family("process_virtual_memory_bytes", "virtual memory size in bytes",
                             static_cast<double>(process->virtual_memory_bytes)));
  out.push_back(gauge_family("process_open_fds", "open file descriptors", static_cast<double>(process->open_fds)));
  out.push_back(gauge_family("process_max_fds", "the limit on open file descriptors (soft RLIMIT_NOFILE)",
                             static_cast<double>(process->max_fds)));
  out.push_back(gauge_family("process_start_time_seconds", "start time of the process since the Unix epoch, in seconds",
                             process->start_time_seconds));
  return out;
}

std::shared_ptr<prometheus::Collectable> make_daemon_collector() { return std::make_shared<DaemonCollector>(); }

Result<std::unique_ptr<Endpoint>> Endpoint::open(const std::string& host_port, int max_connections) {
  const auto address = parse_host_port(host_port);
  if (!address || address->host.empty() || !address->port) return fail(std::errc::invalid_argument);
  std::unique_ptr<Endpoint> endpoint(new Endpoint());
  try {
    // civetweb's num_threads bounds the scrapes served at once; an idle scraper holds one 5 s at most.
    endpoint->exposer_ = std::make_unique<prometheus::Exposer>(
        std::vector<std::string>{"listening_ports", host_port, "num_threads", std::to_string(max_connections),
                                 "request_timeout_ms", "5000"});
  } catch (const std::exception&) {
    return fail(std::errc::address_in_use);
  }
  endpoint->add(make_daemon_collector());
  return endpoint;
}

Endpoint::~Endpoint() = default;

void Endpoint::add(std::shared_ptr<prometheus::Collectable> collectable) {
  exposer_->RegisterCollectable(collectable);
  collectables_.push_back(std::move(collectable));
}

int Endpoint::port() const {
  const auto ports = exposer_->GetListeningPorts();
  return ports.empty() ? 0 : ports.front();
}

}  // namespace iserkit::metrics
