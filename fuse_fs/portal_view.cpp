// The FUSE view's portal model (see portal_view.hpp): discovery (RFC 7143 Appendix C), lazy
// per-target sessions with reconnection, REPORT LUNS (SPC-5 §6.33) and LUN identification
// (SPC-5 §6.6.2 INQUIRY, §7.7.15 VPD 0x80, §7.7.6 VPD 0x83; SBC-4 §5.20 READ CAPACITY (16)).
#include "fuse_fs/portal_view.hpp"

#include <algorithm>
#include <utility>

#include "fuse_fs/target_paths.hpp"
#include "iserkit/common/errors.hpp"
#include "iserkit/common/log.hpp"
#include "iserkit/initiator/diagnosis.hpp"
#include "iserkit/initiator/discovery.hpp"
#include "iserkit/initiator/errors.hpp"

namespace iserkit::fuse_fs {
namespace {

// `ec` in words for a login, discovery or multipath open at `url` (initiator/diagnosis.hpp).
std::string words(std::error_code ec, const initiator::Url& url, const initiator::ChapOptions& chap,
                  std::optional<std::vector<std::string>> listed = std::nullopt) {
  const initiator::ErrorContext context{.program = initiator::Program::fuse,
                                        .url = url,
                                        .chap = &chap,
                                        .offset_bytes = std::nullopt,
                                        .length_bytes = std::nullopt,
                                        .capacity_bytes = std::nullopt,
                                        .listed_targets = std::move(listed)};
  return initiator::diagnose(ec, context).text();
}

}  // namespace

PortalView::PortalView(asio::any_io_executor ex, ViewOptions options)
    : ex_(std::move(ex)),
      options_(std::move(options)),
      listings_(options_.portals.size()),
      allocation_(options_.allocation_cache) {
  rebuild_root();
}

void PortalView::rebuild_root() {
  // The union of every portal's listing, first portal first; an IQN keeps the first portal that
  // listed it, or with multipath every path that leads to it (target_paths.hpp).
  const auto grouped = group_target_paths(options_.portals, listings_, options_.multipath.has_value());
  std::vector<std::string> names;
  for (const auto& g : grouped) names.push_back(g.iqn);
  const auto diff = tree_.set_targets(names);
  for (const auto& s : diff.skipped)
    log::warn("fuse: target name cannot be a directory entry, skipped: name={}", log::escaped(s));
  for (const auto& a : diff.added) log::info("fuse: target listed: {}", log::escaped(a));
  for (const Node* n : tree_.list(root_ino)) {
    if (n->kind != NodeKind::target) continue;
    auto& t = targets_[n->ino];
    if (!t) {
      t = std::make_unique<TargetState>();
      t->iqn = n->name;
      t->dir = n->ino;
    }
    const auto g = std::find_if(grouped.begin(), grouped.end(), [&](const TargetPaths& x) { return x.iqn == n->name; });
    if (g != grouped.end()) {
      t->portal = g->paths.front();
      if (options_.multipath && g->paths != t->paths) {
        if (!t->paths.empty() && t->multipath)
          log::info("fuse: target's paths changed; the new ones are used when its LUNs are opened again: target={} "
                    "paths={}", log::escaped(t->iqn), g->paths.size());
        t->paths = g->paths;
      }
    }
  }
  for (auto& [dir, t] : targets_) {
    const Node* n = tree_.get(dir);
    t->present = n != nullptr && n->present;
  }
  for (const auto& r : diff.removed) {
    log::info("fuse: target no longer listed: {}", log::escaped(r));
    if (TargetState* t = target(tree_.target_dir(r)); t != nullptr) drop_channels(*t);
  }
}

void PortalView::drop_channels(TargetState& t) {
  if (t.session && t.session->is_open()) {
    auto s = t.session;
    asio::co_spawn(ex_, [s]() -> Awaitable<void> { co_await s->logout(); }, asio::detached);
  }
  if (!options_.multipath) return;
  // A Multipath never ends by itself (its paths are reinstated for ever): log it out, and open the
  // target's LUNs again if it is listed again.
  std::vector<std::shared_ptr<initiator::Multipath>> devices;
  if (t.multipath) devices.push_back(std::exchange(t.multipath, nullptr));
  for (auto& [index, l] : t.luns) {
    if (l->multipath && (devices.empty() || l->multipath != devices.front())) devices.push_back(l->multipath);
    l->multipath.reset();
    l->handle.reset();
  }
  for (auto& m : devices) asio::co_spawn(ex_, [m]() -> Awaitable<void> { co_await m->logout(); }, asio::detached);
}

void PortalView::set_listing(std::size_t portal, const std::vector<initiator::DiscoveredTarget>& targets) {
  if (portal >= listings_.size()) return;
  listings_[portal] = targets;
  rebuild_root();
  root_scanned_at_ = Clock::now();
}

Awaitable<void> PortalView::discover_one(std::size_t i, std::shared_ptr<std::size_t> pending,
                                         std::shared_ptr<Completion> all_done) {
  const auto& url = options_.portals[i];
  auto found = co_await initiator::discover(ex_, url, options_.session);
  if (!found) {
    if (!root_error_) root_error_ = found.error();
    log::warn("fuse: discovery: {}: portal={}", words(found.error(), url, options_.session.chap),
              initiator::format_url(url));
  } else {  // a portal that fails keeps what it listed before
    listings_[i] = std::move(*found);
  }
  if (--*pending == 0) all_done->complete();
}

Awaitable<Result<void>> PortalView::refresh_root(bool force) {
  if (shut_down_) co_return Result<void>{};
  if (root_scan_.running()) {
    co_await root_scan_.wait();
    if (root_error_) co_return fail(root_error_);
    co_return Result<void>{};
  }
  bool any = false;
  for (const auto& p : options_.portals) any = any || p.target.empty();
  if (!any || (!force && Clock::now() - root_scanned_at_ < options_.cache_time)) co_return Result<void>{};
  root_scan_.start();
  root_error_ = {};
  // Every portal at once, so one that does not answer delays the listing by one timeout at most.
  auto pending = std::make_shared<std::size_t>(0);
  auto all_done = std::make_shared<Completion>();
  for (std::size_t i = 0; i < options_.portals.size(); ++i) {
    if (options_.portals[i].target.empty()) ++*pending;
  }
  for (std::size_t i = 0; i < options_.portals.size(); ++i) {
    if (options_.portals[i].target.empty()) asio::co_spawn(ex_, discover_one(i, pending, all_done), asio::detached);
  }
  co_await all_done->wait();
  rebuild_root();
  root_scanned_at_ = Clock::now();
  root_scan_.finish();
  if (root_error_) co_return fail(root_error_);
  co_return Result<void>{};
}

Awaitable<Result<std::shared_ptr<initiator::Session>>> PortalView::session(TargetState& t) {
  if (t.session && t.session->is_open()) co_return t.session;
  if (shut_down_) co_return fail(errc::session_closed);
  if (t.connecting.running()) {
    co_await t.connecting.wait();
    if (t.session && t.session->is_open()) co_return t.session;
    co_return fail(t.last_error ? t.last_error : make_error_code(errc::connection_closed));
  }
  if (t.last_error && Clock::now() - t.failed_at < options_.reconnect_backoff) co_return fail(t.last_error);
  t.connecting.start();
  const initiator::Url& url = t.portal;
  const bool again = t.session != nullptr;
  auto s = co_await initiator::Session::connect(ex_, url, options_.session);
  if (s) {
    t.session = *s;
    t.last_error = {};
    log::info("fuse: {}: target={} peer={}", again ? "logged in again" : "logged in", log::escaped(t.iqn),
              t.session->peer());
  } else {
    t.last_error = s.error();
    t.failed_at = Clock::now();
    // An unknown target: name what the portal lists instead.
    std::optional<std::vector<std::string>> listed;
    if (initiator::needs_target_list(s.error())) {
      if (auto found = co_await initiator::discover(ex_, url, options_.session)) listed = initiator::target_names(*found);
    }
    log::warn("fuse: login: {}: target={}", words(s.error(), url, options_.session.chap, std::move(listed)),
              log::escaped(t.iqn));
  }
  t.connecting.finish();
  if (!s) co_return fail(s.error());
  co_return *s;
}

Awaitable<Result<std::shared_ptr<initiator::Multipath>>> PortalView::open_multipath(TargetState& t,
                                                                                   std::uint16_t index) {
  if (shut_down_) co_return fail(errc::session_closed);
  initiator::MultipathOptions mo;
  mo.policy = *options_.multipath;
  mo.session = options_.session;
  mo.replacement_timeout = options_.session.replacement_timeout;
  mo.path_replacement_timeout = options_.path_replacement_timeout;
  // Discovered portals are grouped by name only: a path that leads to another logical unit is
  // refused (logged by Multipath, and below) and the device uses the others.
  mo.open_without_refused_paths = true;
  const std::string iqn = t.iqn;
  mo.on_event = [iqn, index](const initiator::PathEvent& e) {
    log::warn("fuse: multipath: {}: target={} lun={} path={}{}", initiator::to_string(e.kind), log::escaped(iqn), index,
              e.path, e.error ? " error=" + e.error.message() : std::string());
  };
  auto opened = co_await initiator::Multipath::open(ex_, t.paths, scsi::Lun::from_index(index), mo);
  if (!opened) co_return fail(opened.error());
  auto m = *opened;
  if (shut_down_) {
    m->close();
    co_return fail(errc::session_closed);
  }
  const auto paths = m->paths();
  std::size_t up = 0;
  for (const auto& p : paths) {
    if (p.state == initiator::PathStatus::State::refused)
      log::warn("fuse: multipath: path refused, it leads to another logical unit: target={} lun={} url={}",
                log::escaped(t.iqn), index, p.url);
    if (p.state == initiator::PathStatus::State::up) ++up;
  }
  log::info("fuse: multipath: opened: target={} lun={} policy={} paths={} up={}", log::escaped(t.iqn), index,
            initiator::to_string(mo.policy), paths.size(), up);
  co_return m;
}

Awaitable<Result<std::shared_ptr<initiator::CommandChannel>>> PortalView::channel(TargetState& t) {
  if (!options_.multipath) {
    auto s = co_await session(t);
    if (!s) co_return fail(s.error());
    co_return std::shared_ptr<initiator::CommandChannel>(*s);
  }
  if (t.multipath) co_return std::shared_ptr<initiator::CommandChannel>(t.multipath);
  if (shut_down_) co_return fail(errc::session_closed);
  if (t.connecting.running()) {
    co_await t.connecting.wait();
    if (t.multipath) co_return std::shared_ptr<initiator::CommandChannel>(t.multipath);
    co_return fail(t.last_error ? t.last_error : make_error_code(errc::connection_closed));
  }
  if (t.last_error && Clock::now() - t.failed_at < options_.reconnect_backoff) co_return fail(t.last_error);
  t.connecting.start();
  auto m = co_await open_multipath(t, 0);
  if (m) {
    t.multipath = *m;
    t.last_error = {};
  } else {
    t.last_error = m.error();
    t.failed_at = Clock::now();
    log::warn("fuse: multipath: open: {}: target={} paths={}", words(m.error(), t.portal, options_.session.chap),
              log::escaped(t.iqn), t.paths.size());
  }
  t.connecting.finish();
  if (!m) co_return fail(m.error());
  co_return std::shared_ptr<initiator::CommandChannel>(*m);
}

Awaitable<Result<std::shared_ptr<initiator::CommandChannel>>> PortalView::lun_channel(TargetState& t,
                                                                                     std::uint16_t index) {
  if (!options_.multipath || index == 0) co_return co_await channel(t);
  auto m = co_await open_multipath(t, index);
  if (!m) co_return fail(m.error());
  co_return std::shared_ptr<initiator::CommandChannel>(*m);
}

Awaitable<Result<std::shared_ptr<LunState>>> PortalView::open_lun(TargetState& t,
                                                                  std::shared_ptr<initiator::CommandChannel> ch,
                                                                  std::uint16_t index) {
  auto h = co_await initiator::LunHandle::open(ch, scsi::Lun::from_index(index));
  if (!h) {
    if (auto m = std::dynamic_pointer_cast<initiator::Multipath>(ch); m && m != t.multipath) m->close();
    co_return fail(h.error());
  }
  auto l = std::make_shared<LunState>();
  l->multipath = std::dynamic_pointer_cast<initiator::Multipath>(ch);
  l->target = &t;
  l->index = index;
  auto& m = l->metadata;
  m.index = index;
  if (auto inq = co_await h->inquiry()) {
    m.vendor = inq->vendor;
    m.product = inq->product;
    m.revision = inq->revision;
  }
  if (auto sn = co_await h->unit_serial_number()) {
    const auto first = sn->find_first_not_of(' ');
    m.serial = first == std::string::npos ? std::string() : sn->substr(first);
  }
  if (auto ids = co_await h->device_identification()) m.designators = std::move(*ids);
  const auto& info = h->info();
  m.block_size_bytes = info.capacity.block_size_bytes;
  m.blocks = info.capacity.blocks;
  m.thin = info.capacity.thin;
  m.unmapped_reads_zero = info.capacity.unmapped_reads_zero || (info.provisioning && info.provisioning->lbprz != 0);
  m.unmap_supported = info.provisioning && info.provisioning->lbpu;
  l->handle.emplace(std::move(*h));
  co_return l;
}

void PortalView::sync_tree(TargetState& t) {
  std::vector<LunEntry> entries;
  for (const auto& [index, l] : t.luns) entries.push_back({.index = index, .size_bytes = l->metadata.size_bytes()});
  const auto diff = tree_.set_luns(t.dir, entries);
  for (const auto& a : diff.added) log::info("fuse: LUN file appeared: {}/{}", log::escaped(t.iqn), a);
  for (const auto& r : diff.removed) log::info("fuse: LUN file disappeared: {}/{}", log::escaped(t.iqn), r);
}

Awaitable<Result<void>> PortalView::scan_target(TargetState& t) {
  auto s = co_await channel(t);
  if (!s) co_return fail(s.error());
  auto listed = co_await initiator::report_luns(**s);
  if (!listed) co_return fail(listed.error());
  std::map<std::uint16_t, std::shared_ptr<LunState>> next;
  for (const auto& lun : *listed) {
    const auto index = lun.index();
    if (!index) {
      log::warn("fuse: LUN with an addressing form the view does not name, skipped: target={} lun=0x{:016x}",
                log::escaped(t.iqn),
                lun.raw());
      continue;
    }
    auto old = t.luns.find(*index);
    // With multipath a LUN keeps its own device; without, its handle must be on the current session.
    const bool current =
        old != t.luns.end() && old->second->handle &&
        (options_.multipath ? old->second->multipath != nullptr : old->second->handle->channel() == *s);
    if (current) {
      // Known LUN on the current session: pick up a capacity change (SBC-4 §5.20).
      auto& l = *old->second;
      if (auto cap = co_await l.handle->read_capacity(); cap && (cap->blocks != l.metadata.blocks ||
                                                                 cap->block_size_bytes != l.metadata.block_size_bytes)) {
        if (auto h = co_await initiator::LunHandle::open(l.handle->channel(), lun)) {
          l.handle.emplace(std::move(*h));
    l.lba_status_unsupported = false;  // the unit may have changed (README "Holes and st_blocks")
          l.metadata.blocks = l.handle->info().capacity.blocks;
          l.metadata.block_size_bytes = l.handle->info().capacity.block_size_bytes;
          log::info("fuse: LUN capacity changed: target={} lun={} bytes={}", log::escaped(t.iqn), *index,
                    l.metadata.size_bytes());
        }
      }
      next.emplace(*index, old->second);
      continue;
    }
    if (old != t.luns.end()) {  // known LUN, new session: keep its state (open files share it)
      if (auto ch = co_await lun_channel(t, *index)) {
        if (auto h = co_await initiator::LunHandle::open(*ch, lun)) {
          old->second->handle.emplace(std::move(*h));
          old->second->multipath = std::dynamic_pointer_cast<initiator::Multipath>(*ch);
        } else if (auto m = std::dynamic_pointer_cast<initiator::Multipath>(*ch); m && m != t.multipath) {
          m->close();
        }
      }
      next.emplace(*index, old->second);
      continue;
    }
    auto ch = co_await lun_channel(t, *index);
    if (!ch) {
      log::warn("fuse: open LUN: {}: target={} lun={}", ch.error().message(), log::escaped(t.iqn), *index);
      continue;
    }
    auto opened = co_await open_lun(t, *ch, *index);
    if (!opened) {
      auto at = t.portal;
      at.lun = *index;
      log::warn("fuse: open LUN: {}: target={} lun={}", words(opened.error(), at, options_.session.chap),
                log::escaped(t.iqn), *index);
      continue;  // not a block device (errc::not_supported) or not ready: not shown
    }
    next.emplace(*index, *opened);
  }
  for (auto& [index, l] : t.luns) {  // a LUN no longer listed: its own device is closed
    if (!next.contains(index) && l->multipath && l->multipath != t.multipath) {
      l->multipath->close();
      l->multipath.reset();
      l->handle.reset();
    }
  }
  t.luns = std::move(next);
  sync_tree(t);
  co_return Result<void>{};
}

Awaitable<Result<void>> PortalView::refresh_target(Ino dir, bool force) {
  TargetState* t = target(dir);
  if (t == nullptr) co_return fail(errc::invalid_argument);
  if (t->scanning.running()) {
    co_await t->scanning.wait();
  } else if (force || !t->scanned || Clock::now() - t->scanned_at >= options_.cache_time) {
    t->scanning.start();
    auto r = co_await scan_target(*t);
    if (r) {
      t->scanned = true;
      t->scanned_at = Clock::now();
      t->last_error = {};
    } else {
      // A failed login was said by session() or channel() (which set last_error to it), in words.
      if (r.error() != t->last_error)
        log::warn("fuse: listing LUNs: {}: target={}", words(r.error(), t->portal, options_.session.chap), t->iqn);
      t->last_error = r.error();
    }
    t->scanning.finish();
  }
  if (!t->scanned) co_return fail(t->last_error ? t->last_error : make_error_code(errc::connection_closed));
  co_return Result<void>{};
}

Awaitable<Result<void>> PortalView::rescan_all() {
  Result<void> first = co_await refresh_root(true);
  std::vector<Ino> dirs;
  for (const auto& [dir, t] : targets_) {
    if (t->present && t->scanned) dirs.push_back(dir);
  }
  for (Ino dir : dirs) {
    auto r = co_await refresh_target(dir, true);
    if (!r && first) first = r;
  }
  co_return first;
}

namespace {
std::vector<PathInfo> path_infos(const initiator::Multipath& m) {
  std::vector<PathInfo> out;
  for (const auto& p : m.paths()) {
    out.push_back(PathInfo{.url = p.url,
                           .peer = p.peer,
                           .state = initiator::to_string(p.state),
                           .alua = std::string(scsi::to_string(p.access_state)),
                           .target_port_group = p.target_port_group,
                           .commands = p.commands,
                           .failures = p.failures,
                           .downs = p.downs,
                           .reinstatements = p.reinstatements});
  }
  return out;
}
}  // namespace

TargetState* PortalView::target(Ino dir) const {
  auto it = targets_.find(dir);
  return it == targets_.end() ? nullptr : it->second.get();
}

std::shared_ptr<LunState> PortalView::lun(Ino ino) const {
  const Node* n = tree_.get(ino);
  if (n == nullptr || n->kind != NodeKind::lun || !n->present) return nullptr;
  TargetState* t = target(n->parent);
  if (t == nullptr) return nullptr;
  auto it = t->luns.find(n->lun_index);
  return it == t->luns.end() ? nullptr : it->second;
}

std::string PortalView::info_json(Ino dir) const {
  TargetState* t = target(dir);
  if (t == nullptr) return {};
  TargetInfo info;
  info.target = t->iqn;
  const bool v6 = t->portal.host.find(':') != std::string::npos;
  info.portal = (v6 ? "[" + t->portal.host + "]" : t->portal.host) + ":" + std::to_string(t->portal.port);
  info.url = initiator::format_url(t->portal);
  if (options_.multipath) {
    info.multipath_policy = initiator::to_string(*options_.multipath);
    if (t->multipath) {
      info.session_state = t->multipath->any_path_usable() ? "logged-in"
                           : t->multipath->gave_up()      ? "gave-up"
                                                          : "all-paths-lost";
      info.paths = path_infos(*t->multipath);
    } else {
      info.session_state = t->last_error ? "failed: " + t->last_error.message() : "not-connected";
      for (const auto& u : t->paths)
        info.paths.push_back(PathInfo{.url = initiator::format_url(u), .state = "not-connected"});
    }
    for (const auto& [index, l] : t->luns) {
      info.luns.push_back(l->metadata);
      info.lun_paths.push_back(l->multipath ? path_infos(*l->multipath) : std::vector<PathInfo>{});
    }
    return target_info_json(info);
  }
  if (t->session && t->session->is_open() && t->session->recovering()) {
    // Logging in again by itself: requests wait (recovering), or past the replacement timeout
    // fail with EIO until a login succeeds (gave-up, as a Multipath without a usable path says).
    info.session_state = t->session->state() == initiator::SessionState::failed ? "gave-up" : "recovering";
    const initiator::ReconnectStatus r = t->session->reconnect_status();
    TargetInfo::Reconnect shown{.attempts = r.attempts, .next_attempt_in_ms = std::nullopt,
                                .last_error = r.last_error ? r.last_error.message() : std::string{}};
    if (r.next_attempt) {
      const auto in = std::chrono::duration_cast<std::chrono::milliseconds>(*r.next_attempt - Clock::now()).count();
      shown.next_attempt_in_ms = static_cast<std::uint64_t>(std::max<std::int64_t>(0, in));
    }
    info.reconnect = shown;
  } else if (t->session && t->session->is_open()) {
    info.session_state = "logged-in";
    info.parameters = t->session->parameters();
    if (info.parameters->initiator_name.empty()) {
      info.parameters->initiator_name = options_.session.initiator_name.empty() ? initiator::default_initiator_name()
                                                                                : options_.session.initiator_name;
    }
    if (info.parameters->target_name.empty()) info.parameters->target_name = t->iqn;
  } else if (t->last_error) {
    info.session_state = "failed: " + t->last_error.message();
  } else if (t->session) {
    info.session_state = "failed: " + t->session->error().message();
  } else {
    info.session_state = "not-connected";
  }
  for (const auto& [index, l] : t->luns) info.luns.push_back(l->metadata);
  return target_info_json(info);
}

ExtentCache::Key LunState::allocation_key() const noexcept {
  return (static_cast<ExtentCache::Key>(target != nullptr ? target->dir : 0) << 16) | index;
}

bool PortalView::usable(const LunState& x) noexcept {
  // A Multipath stays usable (its paths come back by themselves); a Session must still be open.
  return x.handle && (x.multipath != nullptr || (x.handle->session() && x.handle->session()->is_open()));
}

Awaitable<Result<initiator::LunHandle>> PortalView::handle(LunState& l) {
  if (usable(l)) co_return *l.handle;
  if (l.reopening.running()) {
    co_await l.reopening.wait();
    if (usable(l)) co_return *l.handle;
    co_return fail(l.last_error ? l.last_error : make_error_code(errc::connection_closed));
  }
  l.reopening.start();
  Result<initiator::LunHandle> out = fail(errc::connection_closed);
  auto s = co_await lun_channel(*l.target, l.index);
  if (!s) {
    out = fail(s.error());
  } else if (auto h = co_await initiator::LunHandle::open(*s, scsi::Lun::from_index(l.index)); !h) {
    if (auto m = std::dynamic_pointer_cast<initiator::Multipath>(*s); m && m != l.target->multipath) m->close();
    out = fail(h.error());
  } else {
    l.multipath = std::dynamic_pointer_cast<initiator::Multipath>(*s);
    l.handle.emplace(std::move(*h));
    l.lba_status_unsupported = false;  // the unit may have changed (README "Holes and st_blocks")
    l.metadata.blocks = l.handle->info().capacity.blocks;
    l.metadata.block_size_bytes = l.handle->info().capacity.block_size_bytes;
    sync_tree(*l.target);
    out = *l.handle;
  }
  l.last_error = out ? std::error_code{} : out.error();
  l.reopening.finish();
  co_return out;
}

Awaitable<void> PortalView::shutdown() {
  shut_down_ = true;
  for (auto& [dir, t] : targets_) {
    // With multipath: every LUN's device, each path logged out after its commands finished.
    std::vector<std::shared_ptr<initiator::Multipath>> devices;
    if (t->multipath) devices.push_back(t->multipath);
    for (auto& [index, l] : t->luns) {
      if (l->multipath && l->multipath != t->multipath) devices.push_back(l->multipath);
    }
    for (auto& m : devices) {
      co_await m->logout();
      log::info("fuse: logged out: target={} paths={}", t->iqn, m->paths().size());
    }
    if (!t->session || !t->session->is_open()) continue;
    if (auto r = co_await t->session->logout(); !r) {
      log::warn("fuse: logout: {}: target={}", r.error().message(), t->iqn);
    } else {
      log::info("fuse: logged out: target={}", t->iqn);
    }
  }
}

}  // namespace iserkit::fuse_fs
