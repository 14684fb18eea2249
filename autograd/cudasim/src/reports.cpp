// The checkers' reports and the public switches of cudasim/check.h (which checks run, what a report does).
#include <fmt/format.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <stdexcept>

#include "checker.h"
#include "reports.h"
#include "symbols.h"

namespace cudasim {

namespace detail {

unsigned enabled_checks = 0;

std::string kernel_name(const Launch& l) {
  if (l.kernel == nullptr) return "(a lambda)";
  const SymbolName s = symbol_at(l.kernel);
  return s.found ? s.name : fmt::format("{}", l.kernel);
}

std::string source_site(const Site& s) {
  const char* file = s.file ? s.file : "?";
  const char* slash = std::strrchr(file, '/');
  return fmt::format("{}:{}", slash ? slash + 1 : file, s.line);
}

check::OnReport on_report = [] {
  const char* env = std::getenv("STEPFORMER_CUDASIM_CHECK_ABORT");
  return env && env[0] == '1' ? check::OnReport::abort : check::OnReport::throw_after_launch;
}();

std::vector<check::Report> kept;
std::vector<check::Report> this_launch;
std::map<std::tuple<std::string, std::string, const void*, unsigned>, std::size_t> seen;
bool trapped = false;

uint3 coords(std::uint32_t linear, const dim3& extent) {
  return {linear % extent.x, linear / extent.x % extent.y, linear / (extent.x * extent.y)};
}

std::string text(const uint3& u) { return fmt::format("({}, {}, {})", u.x, u.y, u.z); }

void report(const Launch& l, check::Report r, const void* code, unsigned line) {
  auto [it, fresh] = seen.try_emplace({r.checker, r.kind, code, line}, this_launch.size());
  if (!fresh) {
    ++this_launch[it->second].repeats;
    return;
  }
  r.kernel = kernel_name(l);
  const std::string head = fmt::format("{}: {} in kernel {}: ", r.checker, r.kind, r.kernel);
  r.message = head + r.message;
  std::fprintf(stderr, "cuda-sim %s\n", r.message.c_str());
  std::fflush(stderr);
  if (on_report == check::OnReport::abort) std::abort();
  this_launch.push_back(std::move(r));
}

}  // namespace detail

using namespace detail;

namespace check {

bool instrumented() {
#if defined(CUDASIM_CHECK)
  return true;
#else
  return false;
#endif
}

void enable(unsigned checks) {
  if (checks != none && !instrumented())
    throw std::logic_error(
        "cuda-sim checks need the checking build (cmake --preset cudasim-check): this build's kernels are not "
        "instrumented, nothing would be seen");
  enabled_checks = checks & all;
}
unsigned enabled() { return enabled_checks; }
void set_on_report(OnReport what) { on_report = what; }
std::vector<Report> take_reports() {
  std::vector<Report> out;
  out.swap(kept);
  return out;
}

}  // namespace check

namespace {
// STEPFORMER_CUDASIM_CHECK=race,mem,init,sync (or all) at start-up.
const bool checks_from_environment = [] {
  const char* env = std::getenv("STEPFORMER_CUDASIM_CHECK");
  if (env == nullptr || *env == '\0') return false;
  unsigned checks = 0;
  std::string list = env;
  for (std::size_t at = 0; at <= list.size();) {
    const std::size_t comma = std::min(list.find(',', at), list.size());
    const std::string word = list.substr(at, comma - at);
    if (word == "race")
      checks |= check::race;
    else if (word == "mem")
      checks |= check::mem;
    else if (word == "init")
      checks |= check::init;
    else if (word == "sync")
      checks |= check::sync;
    else if (word == "all")
      checks |= check::all;
    else
      fail("STEPFORMER_CUDASIM_CHECK=" + list + ": '" + word + "' is not one of race, mem, init, sync, all");
    at = comma + 1;
  }
  if (!check::instrumented())
    fail(
        "STEPFORMER_CUDASIM_CHECK is set, but this build's kernels are not instrumented: build with the "
        "cudasim-check preset (docs/09_cuda.md)");
  enabled_checks = checks;
  return true;
}();
}  // namespace

}  // namespace cudasim
