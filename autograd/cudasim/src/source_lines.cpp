// Source lines for the checker's reports (symbols.h, source_line): the checking build compiles with
// -gline-tables-only, and binutils' addr2line (installed with the compiler) reads those tables, so a report names
// `gemm.cu:212` beside `gemm_v2<float>+0x1c4`. One addr2line run per code address, remembered; reports are
// few (repeats at the same code are counted, not printed).
#include <fmt/format.h>
#include <unistd.h>

#include <cstdio>
#include <mutex>
#include <string>
#include <unordered_map>

#include "symbols.h"

namespace cudasim::detail {

namespace {

std::string program_path() {
  char path[4096];
  const ssize_t n = readlink("/proc/self/exe", path, sizeof path - 1);
  if (n <= 0) return {};
  path[n] = '\0';
  return path;
}

// addr2line's first line, "/src/gemm.cu:212 (discriminator 2)", as "gemm.cu:212"; "" for "??:0" or "x.cu:?".
std::string short_line(std::string out) {
  out = out.substr(0, out.find_first_of(" \n"));
  const std::size_t colon = out.rfind(':');
  if (colon == std::string::npos || out.rfind("??", 0) == 0) return {};
  const std::string number = out.substr(colon + 1);
  if (number.empty() || number == "0" || number.find_first_not_of("0123456789") != std::string::npos) return {};
  const std::size_t slash = out.rfind('/', colon);
  return out.substr(slash == std::string::npos ? 0 : slash + 1);
}

std::string ask_addr2line(const void* return_address) {
  const std::string program = program_path();
  if (program.empty() || program.find('\'') != std::string::npos) return {};
  // One byte back from the return address is inside the call instruction, so on the call's line.
  const std::uintptr_t address = reinterpret_cast<std::uintptr_t>(return_address) - program_load_bias() - 1;
  const std::string command = fmt::format("addr2line -e '{}' {:#x} 2>/dev/null", program, address);
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) return {};
  char first[4096];
  const bool got = std::fgets(first, sizeof first, pipe) != nullptr;
  pclose(pipe);
  return got ? short_line(first) : std::string();
}

}  // namespace

std::string source_line(const void* return_address) {
  static std::mutex mutex;
  static std::unordered_map<const void*, std::string> known;
  const std::lock_guard<std::mutex> lock(mutex);
  const auto it = known.find(return_address);
  if (it != known.end()) return it->second;
  return known[return_address] = ask_addr2line(return_address);
}

}  // namespace cudasim::detail
