// synccheck: every thread of a block reaches the same __syncthreads, every lane of a warp collective the same
// call (the scheduler calls check_barrier and check_warp when a block or a warp is gathered at one).
#include <fmt/format.h>

#include <cstring>

#include "checker.h"
#include "reports.h"

namespace cudasim::detail {

namespace {

bool same_site(const Site& a, const Site& b) {
  return a.line == b.line && (a.file == b.file || (a.file && b.file && std::strcmp(a.file, b.file) == 0));
}

std::string sites_text(const Block& b, int first, int second) {
  const Thread& t = b.threads[static_cast<std::size_t>(first)];
  const Thread& u = b.threads[static_cast<std::size_t>(second)];
  if (u.state == State::done)
    return fmt::format("thread {} waits at the __syncthreads of {}, thread {} exited without reaching it", text(t.idx),
                       source_site(t.site), text(u.idx));
  return fmt::format("thread {} waits at the __syncthreads of {}, thread {} at the one of {}", text(t.idx),
                     source_site(t.site), text(u.idx), source_site(u.site));
}

}  // namespace

void check_barrier(const Launch& l, const Block& b, const Thread* arriving) {
  if (profiling_on) profile_barrier(b);
  if (!(enabled_checks & check::sync)) return;
  const int n = static_cast<int>(b.threads.size());
  int first = arriving ? arriving->linear : -1;
  for (int k = 0; k < n && first < 0; ++k)
    if (b.threads[static_cast<std::size_t>(k)].state == State::at_barrier) first = k;
  if (first < 0) return;
  const Site site = b.threads[static_cast<std::size_t>(first)].site;
  for (int k = 0; k < n; ++k) {
    const Thread& t = b.threads[static_cast<std::size_t>(k)];
    const bool waits_here = k == first || (t.state == State::at_barrier && same_site(t.site, site));
    if (waits_here) continue;
    if (t.state != State::at_barrier && t.state != State::done) continue;  // cannot happen: all live ones wait
    check::Report rep;
    rep.checker = "synccheck", rep.kind = "divergent barrier";
    rep.block = rep.other_block = l.block_idx;
    rep.thread = b.threads[static_cast<std::size_t>(first)].idx, rep.other_thread = t.idx, rep.has_other = true;
    rep.location = source_site(site);
    rep.message = fmt::format("block {}: {} (a __syncthreads every thread of the block must reach)", text(l.block_idx),
                              sites_text(b, first, k));
    report(l, std::move(rep), site.file, site.line);
    return;
  }
}

void check_warp(const Launch& l, const Block& b, int warp, const WarpOp& op) {
  if (profiling_on) profile_warp_collective();
  if (!(enabled_checks & check::sync)) return;
  const unsigned arrived = op.arrived;
  // A shuffle reading a lane that is not at the collective: undefined on a GPU.
  for (int k = 0; k < 32 && op.kind == Collective::shuffle; ++k) {
    const int s = op.sources[k];
    if (!(arrived >> k & 1u) || (s >= 0 && s < 32 && (arrived >> s & 1u))) continue;
    check::Report rep;
    rep.checker = "synccheck", rep.kind = "shuffle from a lane outside the mask";
    rep.block = l.block_idx, rep.thread = b.threads[static_cast<std::size_t>(warp * 32 + k)].idx;
    rep.location = source_site(op.site);
    rep.message = fmt::format(
        "block {}, warp {}: lane {} reads lane {} in the __shfl_sync of {}, whose mask {:#010x} leaves lane {} out "
        "(its value is undefined on a GPU; cuda-sim returns all-ones bits, a NaN)",
        text(l.block_idx), warp, k, s, rep.location, op.mask, s);
    report(l, std::move(rep), op.site.file, op.site.line);
    break;
  }
  int first = -1;
  for (int k = 0; k < 32; ++k) {
    if (!(arrived >> k & 1u)) continue;
    const Thread& t = b.threads[static_cast<std::size_t>(warp * 32 + k)];
    if (first < 0) {
      first = k;
      continue;
    }
    const Thread& f = b.threads[static_cast<std::size_t>(warp * 32 + first)];
    if (same_site(t.site, f.site)) continue;
    check::Report rep;
    rep.checker = "synccheck", rep.kind = "divergent warp collective";
    rep.block = rep.other_block = l.block_idx;
    rep.thread = f.idx, rep.other_thread = t.idx, rep.has_other = true;
    rep.location = source_site(f.site);
    rep.message = fmt::format(
        "block {}, warp {}: lane {} is at the collective of {}, lane {} at the one of {} (the "
        "lanes of one collective must call it at the same place)",
        text(l.block_idx), warp, first, source_site(f.site), k, source_site(t.site));
    report(l, std::move(rep), f.site.file, f.site.line);
    return;
  }
}

}  // namespace cudasim::detail
