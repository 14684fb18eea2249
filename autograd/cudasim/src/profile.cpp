// The profiler (cudasim/profile.h): groups each block's accesses into warp-level requests and counts sectors
// and bank wavefronts per request, per kernel.
#include "cudasim/profile.h"

#include "cudasim/check.h"

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <vector>

#include "checker.h"
#include "files/atomic_write.h"
#include "scheduler.h"
#include "symbols.h"

namespace cudasim {

namespace detail {
bool profiling_on = false;
}  // namespace detail

using namespace detail;

namespace {

// One warp-level request: the lanes of `warp` at code `pc` for the `nth` time.
struct Key {
  const void* pc;
  std::uint32_t warp, nth;
  bool operator==(const Key& o) const { return pc == o.pc && warp == o.warp && nth == o.nth; }
};
struct KeyHash {
  std::size_t operator()(const Key& k) const {
    return std::hash<const void*>()(k.pc) ^ (std::size_t{k.warp} << 20) ^ (std::size_t{k.nth} * 0x9e3779b97f4a7c15ull);
  }
};
struct Request {
  bool shared = false, write = false;
  std::vector<std::uintptr_t> units;  // global: 32-byte sectors; shared: 4-byte words
};

std::vector<profile::Counters> counters;      // per kernel, in order of first launch
std::map<const void*, std::size_t> index_of;  // kernel -> counters index
profile::Counters* current = nullptr;
std::uint64_t stated_flops = 0;                                      // for the next launch
std::unordered_map<Key, Request, KeyHash> requests;                  // the running block's
std::vector<std::unordered_map<const void*, std::uint32_t>> visits;  // per thread: times it reached a pc

std::string json_path;  // where the JSON goes at exit

void print_at_exit() {
  if (counters.empty()) return;
  std::fprintf(stderr, "%s", profile::table(counters).c_str());
  try {  // at exit: a failure is reported, never thrown
    stepformer::files::write_atomically(json_path, profile::json(counters));
    std::fprintf(stderr, "cuda-sim: profile written to %s\n", json_path.c_str());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "cuda-sim: cannot write the profile: %s\n", e.what());
  }
}

const bool from_environment = [] {
  const char* env = std::getenv("STEPFORMER_CUDASIM_PROFILE");
  if (env == nullptr || *env == '\0' || std::string(env) == "0") return false;
  const std::string value = env;
  if (value != "1" && (value.size() < 6 || value.substr(value.size() - 5) != ".json"))
    fail("STEPFORMER_CUDASIM_PROFILE=" + value + ": expected 1 or a FILE.json");
  json_path = value == "1" ? "cudasim-profile.json" : value;
  if (!check::instrumented())
    fail(
        "STEPFORMER_CUDASIM_PROFILE=1, but this build's kernels are not instrumented: build with the "
        "cudasim-check preset (docs/09_cuda.md)");
  profiling_on = true;
  std::atexit(print_at_exit);
  return true;
}();

}  // namespace

namespace detail {

void profile_launch_begin(const Launch& l) {
  auto [it, fresh] = index_of.try_emplace(l.kernel, counters.size());
  if (fresh) {
    counters.emplace_back();
    const SymbolName s = l.kernel ? symbol_at(l.kernel) : SymbolName{};
    counters.back().kernel = s.found ? s.name : l.kernel ? fmt::format("{}", l.kernel) : "(a lambda)";
  }
  current = &counters[it->second];
  ++current->launches;
  current->flops += stated_flops;
  stated_flops = 0;
}

void profile_block_begin(const Launch& l) {
  requests.clear();
  visits.assign(l.b->threads.size(), {});
  ++current->blocks;
  current->threads += l.b->threads.size();
}

void profile_access(const Launch& l, std::uintptr_t a, unsigned size, bool write, bool shared, const void* pc) {
  const int thread = l.b->current;
  const std::uint32_t nth = visits[static_cast<std::size_t>(thread)][pc]++;
  Request& r = requests[Key{pc, static_cast<std::uint32_t>(thread / 32), nth}];
  r.shared = shared, r.write = write;
  if (shared) {
    for (std::uintptr_t w = a / 4; w <= (a + size - 1) / 4; ++w) r.units.push_back(w);
  } else {
    for (std::uintptr_t s = a / 32; s <= (a + size - 1) / 32; ++s) r.units.push_back(s);
    (write ? current->global_store_bytes : current->global_load_bytes) += size;
  }
}

void profile_block_end() {
  for (auto& [key, r] : requests) {
    std::sort(r.units.begin(), r.units.end());
    r.units.erase(std::unique(r.units.begin(), r.units.end()), r.units.end());
    if (!r.shared) {
      (r.write ? current->global_store_requests : current->global_load_requests) += 1;
      (r.write ? current->global_store_sectors : current->global_load_sectors) += r.units.size();
      continue;
    }
    std::uint64_t per_bank[32] = {};
    for (const std::uintptr_t w : r.units) ++per_bank[w % 32];
    const std::uint64_t wavefronts = *std::max_element(per_bank, per_bank + 32);
    const std::uint64_t ideal = (r.units.size() + 31) / 32;
    current->shared_bank_conflicts += wavefronts - ideal;
    (r.write ? current->shared_store_requests : current->shared_load_requests) += 1;
    (r.write ? current->shared_store_wavefronts : current->shared_load_wavefronts) += wavefronts;
  }
  requests.clear();
}

void profile_barrier(const Block& b) { current->barriers += (b.threads.size() + 31) / 32; }
void profile_warp_collective() { ++current->warp_collectives; }

}  // namespace detail

namespace profile {

double Counters::intensity() const {
  return flops && global_bytes() ? static_cast<double>(flops) / static_cast<double>(global_bytes()) : 0.0;
}
double Roofline::attainable(double intensity) const { return std::min(peak_flops, intensity * bytes_per_second); }

void next_launch_flops(std::uint64_t flops) {
  if (profiling_on) stated_flops = flops;
}

void enable(bool on) {
  if (on && !check::instrumented())
    throw std::logic_error(
        "the cuda-sim profiler needs the checking build (cmake --preset cudasim-check): this build's kernels are "
        "not instrumented, nothing would be counted");
  profiling_on = on;
}
bool enabled() { return profiling_on; }

std::vector<Counters> take() {
  std::vector<Counters> out;
  out.swap(counters);
  index_of.clear();
  current = nullptr;
  stated_flops = 0;
  return out;
}

std::string table(const std::vector<Counters>& all) {
  std::string s = fmt::format("{:<34} {:>8} {:>10} {:>7} {:>10} {:>7} {:>10} {:>9} {:>10} {:>8} {:>8} {:>7} {:>7}\n",
                              "kernel", "launches", "gld req", "sect/r", "gst req", "sect/r", "shared req", "conflicts",
                              "barriers", "shuffles", "MB moved", "FLOP/B", "TFLOP/s");
  for (const Counters& c : all) {
    const auto ratio = [](std::uint64_t a, std::uint64_t b) { return b ? static_cast<double>(a) / b : 0.0; };
    s += fmt::format("{:<34} {:>8} {:>10} {:>7.2f} {:>10} {:>7.2f} {:>10} {:>9} {:>10} {:>8} {:>8.3f} {:>7} {:>7}\n",
                     c.kernel.substr(0, 34), c.launches, c.global_load_requests,
                     ratio(c.global_load_sectors, c.global_load_requests), c.global_store_requests,
                     ratio(c.global_store_sectors, c.global_store_requests),
                     c.shared_load_requests + c.shared_store_requests, c.shared_bank_conflicts, c.barriers,
                     c.warp_collectives, static_cast<double>(c.global_bytes()) / 1e6,
                     c.flops ? fmt::format("{:.2f}", c.intensity()) : "-",
                     c.flops ? fmt::format("{:.2f}", kRoofline.attainable(c.intensity()) / 1e12) : "-");
  }
  s += fmt::format(
      "TFLOP/s: what the {} roofline allows at that intensity (min of {:.1f} TFLOP/s and FLOP/B x {:.0f} GB/s): a "
      "model\n",
      kRoofline.gpu, kRoofline.peak_flops / 1e12, kRoofline.bytes_per_second / 1e9);
  return s;
}

std::string json(const std::vector<Counters>& all) {
  std::string s = "[";
  for (const Counters& c : all) {
    std::string name;
    for (const char ch : c.kernel) name += ch == '"' || ch == '\\' ? std::string("\\") + ch : std::string(1, ch);
    s += fmt::format(
        "{}\n  {{\"kernel\": \"{}\", \"launches\": {}, \"blocks\": {}, \"threads\": {}, "
        "\"global_load_requests\": {}, \"global_load_sectors\": {}, \"global_load_bytes\": {}, "
        "\"global_store_requests\": {}, \"global_store_sectors\": {}, \"global_store_bytes\": {}, "
        "\"shared_load_requests\": {}, \"shared_load_wavefronts\": {}, \"shared_store_requests\": {}, "
        "\"shared_store_wavefronts\": {}, \"shared_bank_conflicts\": {}, \"barriers\": {}, "
        "\"warp_collectives\": {}, \"flops\": {}, \"global_bytes\": {}, \"flop_per_byte\": {}, "
        "\"roofline_gpu\": \"{}\", \"roofline_attainable_flops\": {}}}",
        &c == &all.front() ? "" : ",", name, c.launches, c.blocks, c.threads, c.global_load_requests,
        c.global_load_sectors, c.global_load_bytes, c.global_store_requests, c.global_store_sectors,
        c.global_store_bytes, c.shared_load_requests, c.shared_load_wavefronts, c.shared_store_requests,
        c.shared_store_wavefronts, c.shared_bank_conflicts, c.barriers, c.warp_collectives, c.flops, c.global_bytes(),
        c.intensity(), kRoofline.gpu, kRoofline.attainable(c.intensity()));
  }
  return s + "\n]\n";
}

}  // namespace profile

}  // namespace cudasim
