// Warp collectives (cudasim.h): __shfl_*_sync, __ballot_sync, __syncwarp, the tensor cores' mma.sync and ldmatrix,
// as one meeting of the warp's lanes that the last to arrive completes for all; the scheduler (cudasim.cpp)
// suspends and wakes the lanes.
#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "checker.h"
#include "cudasim/check.h"
#include "cudasim/cudasim.h"
#include "mma.h"
#include "reports.h"
#include "scheduler.h"

namespace cudasim {

using namespace detail;

namespace {

const char* name_of(Collective c) {
  switch (c) {
    case Collective::shuffle: return "__shfl_sync";
    case Collective::ballot: return "__ballot_sync";
    case Collective::syncwarp: return "__syncwarp";
    case Collective::mma: return "mma.sync";
    case Collective::ldmatrix: return "ldmatrix.x4";
    case Collective::ldmatrix_trans: return "ldmatrix.x4.trans";
  }
  return "?";
}

// "__shfl_sync (mask 0x0000ffff) at test.cu:12"
std::string call_text(Collective c, unsigned mask, const Site& site) {
  return fmt::format("{} (mask {:#010x}) at {}", name_of(c), mask, source_site(site));
}

// A warp collective used against its rules ends the launch, as a trap would, with a CheckError the host can
// catch: the kernel, the block and warp, the call and what is wrong, in words that do not depend on which lane
// the schedule ran first.
[[noreturn]] void misuse(const Launch& l, int warp, const std::string& call, const std::string& what) {
  throw check::CheckError(fmt::format("cuda-sim: warp collective misused in kernel {}, {}, warp {}: {}: {}",
                                      kernel_name(l), where(l), warp, call, what));
}

}  // namespace

// A lane of an open collective's mask exited without calling it: the collective can never complete.
std::exception_ptr detail::lane_exited(const Launch& l, int warp, const WarpOp& op) {
  try {
    misuse(l, warp, call_text(op.kind, op.mask, op.site),
           "a lane named in its mask exited without calling it; every lane in the mask must call the same "
           "collective with the same mask");
  } catch (const check::CheckError&) {
    return std::current_exception();
  }
}

namespace {

// Arrives at the warp's collective; returns this lane's result once every lane of the mask has arrived.
std::uint64_t collective(Collective kind, unsigned mask, std::uint64_t value, Shuffle mode, int arg, int width,
                         Site site) {
  const char* name = name_of(kind);
  Launch& l = launch_state(name);
  Block& b = *l.b;
  Thread& t = me();
  t.site = site;
  const int warp = t.linear / 32, lane = t.linear % 32;
  const int lanes_here = std::min(32, static_cast<int>(b.threads.size()) - warp * 32);
  const unsigned present = lanes_here == 32 ? 0xffffffffu : (1u << lanes_here) - 1;
  if (!(mask >> lane & 1u)) misuse(l, warp, call_text(kind, mask, site), "the mask leaves out a lane that calls it");
  if (width < 1 || width > 32 || (width & (width - 1)))
    misuse(l, warp, call_text(kind, mask, site), fmt::format("width {} is not a power of 2 in [1, 32]", width));
  const bool whole_warp = kind == Collective::mma || kind == Collective::ldmatrix || kind == Collective::ldmatrix_trans;
  if (whole_warp && present != 0xffffffffu)
    misuse(l, warp, call_text(kind, mask, site),
           fmt::format("the warp has {} lanes; the instruction needs all 32", lanes_here));
  WarpOp& op = b.warps[static_cast<std::size_t>(warp)];
  if (!op.active) {
    op.active = true, op.kind = kind, op.site = site, op.mode = mode, op.mask = mask, op.width = width, op.arrived = 0;
    for (int k = 0; k < 32; ++k)  // a lane of the mask that has returned can never arrive
      if ((mask & present) >> k & 1u && b.threads[static_cast<std::size_t>(warp * 32 + k)].state == State::done)
        std::rethrow_exception(lane_exited(l, warp, op));
  } else if (op.kind != kind || op.mask != mask || op.mode != mode || op.width != width) {
    // Both calls named in a fixed order, whichever lane came first.
    std::string mine = call_text(kind, mask, site), theirs = call_text(op.kind, op.mask, op.site);
    if (theirs < mine) std::swap(mine, theirs);
    misuse(l, warp, mine + " and " + theirs,
           "lanes of one warp meet at different collectives, masks, shuffle modes or widths");
  }
  op.values[lane] = value;
  const int segment = lane / width * width;
  int src = lane;
  switch (mode) {  // PTX shfl.sync: a source outside the lane's segment (up/down/bfly) gives its own value
    case Shuffle::idx: src = segment + ((arg % width) + width) % width; break;
    case Shuffle::up: src = lane - segment >= arg ? lane - arg : lane; break;
    case Shuffle::down: src = lane - segment + arg < width ? lane + arg : lane; break;
    case Shuffle::bfly: src = (lane ^ arg) < segment + width ? lane ^ arg : lane; break;
  }
  op.sources[lane] = src;
  op.arrived |= 1u << lane;
  if (op.arrived != (mask & present)) {
    t.state = State::at_warp;
    yield();
    return t.result;
  }
  // The last lane computes everyone's result and wakes the others.
  if (checking()) check_warp(l, b, warp, op);
  if (kind == Collective::syncwarp) ++b.warp_syncs[static_cast<std::size_t>(warp)];  // orders the warp's memory
  std::vector<int>& woken = b.waking;
  woken.clear();
  unsigned votes = 0;
  for (int k = 0; k < 32; ++k)
    if (op.arrived >> k & 1u) votes |= (op.values[k] != 0) << k;
  if (kind == Collective::mma) mma_bf16(op.values);  // each value: the address of a lane's MmaFragments
  if (kind == Collective::ldmatrix || kind == Collective::ldmatrix_trans)  // each: a lane's LdmatrixRow
    ldmatrix_x4(op.values, kind == Collective::ldmatrix_trans);
  for (int k = 0; k < 32; ++k) {
    if (!(op.arrived >> k & 1u)) continue;
    const int s = op.sources[k];
    const bool readable = s >= 0 && s < 32 && (op.arrived >> s & 1u);
    Thread& other = b.threads[static_cast<std::size_t>(warp * 32 + k)];
    // A source outside the mask is undefined on a GPU: all-ones bits here (a NaN), and synccheck reports it.
    other.result = kind == Collective::ballot ? votes : readable ? op.values[s] : ~std::uint64_t{0};
    if (k != lane) woken.push_back(other.linear);
  }
  op.active = false;
  make_ready(b, woken);
  return t.result;
}

}  // namespace

std::uint64_t shuffle(unsigned mask, std::uint64_t value, Shuffle mode, int arg, int width, Site site) {
  return collective(Collective::shuffle, mask, value, mode, arg, width, site);
}
unsigned ballot(unsigned mask, bool predicate, Site site) {
  return static_cast<unsigned>(collective(Collective::ballot, mask, predicate, Shuffle::idx, 0, 32, site));
}
void syncwarp(unsigned mask, Site site) { collective(Collective::syncwarp, mask, 0, Shuffle::idx, 0, 32, site); }
void mma_m16n8k16_bf16(float d[4], const std::uint32_t a[4], const std::uint32_t b[2], Site site) {
  MmaFragments mine{d, a, b};
  collective(Collective::mma, 0xffffffffu, reinterpret_cast<std::uint64_t>(&mine), Shuffle::idx, 0, 32, site);
}
void ldmatrix_x4(std::uint32_t d[4], const std::uint32_t row[4], bool trans, Site site) {
  LdmatrixRow mine{d, row};
  collective(trans ? Collective::ldmatrix_trans : Collective::ldmatrix, 0xffffffffu,
             reinterpret_cast<std::uint64_t>(&mine), Shuffle::idx, 0, 32, site);
}

}  // namespace cudasim
