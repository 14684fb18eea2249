#pragma once
// What the checkers found: report() prints a finding at once and keeps it for the launch's end (check.cpp's
// check_launch_end turns them into a CheckError, or keeps them for check::take_reports in record mode).
#include <cstddef>
#include <exception>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "cudasim/check.h"
#include "scheduler.h"

namespace cudasim::detail {

extern check::OnReport on_report;
extern std::vector<check::Report> kept;         // every report since the last take_reports()
extern std::vector<check::Report> this_launch;  // the running launch's, deduplicated
// (checker, kind, code address or source file, source line) -> index in this_launch
extern std::map<std::tuple<std::string, std::string, const void*, unsigned>, std::size_t> seen;
extern bool trapped;  // a memcheck error ended the launch

// Thrown from an access hook: the access must not happen. It ends the launch as a trap ends a grid.
struct Trap : std::exception {
  const char* what() const noexcept override { return "cuda-sim checker: the kernel trapped"; }
};

std::string kernel_name(const Launch& l);  // as the symbol table has it; "(a lambda)" for a lambda
std::string source_site(const Site& s);    // "gemm.cu:94": the file's name without its folders
uint3 coords(std::uint32_t linear, const dim3& extent);
std::string text(const uint3& u);  // "(x, y, z)"
// Prints and keeps `r`, once per (checker, kind, code, line) in a launch; later ones count as repeats.
void report(const Launch& l, check::Report r, const void* code, unsigned line = 0);

}  // namespace cudasim::detail
