#pragma once
// The options every demo has, and where its output files go.
#include <cstdint>
#include <exception>
#include <filesystem>
#include <string>

// CLI11 is header-only and costs seconds in every file that includes it: only the files that build a command
// line include <CLI/CLI.hpp>; the rest see the name.
namespace CLI {
class App;
}  // namespace CLI

namespace stepformer::demo {

// Writes `text` to out_dir/name atomically, prints "wrote <path>", returns the path.
std::filesystem::path write_output(const std::filesystem::path& out_dir, const std::string& name,
                                   const std::string& text);

// Options every demo has: --out DIR and --seed S.
struct CommonOptions {
  std::filesystem::path out = "stepformer-out";
  std::uint64_t seed = 1;
};
// --out, --seed, --detect-anomaly, --device, and --threads (OpenMP's CPU threads) unless the demo has its own.
void add_common_options(CLI::App& app, CommonOptions& o, bool cpu_threads = true);

// A demo's main ends in `catch (const std::exception& e) { return report_error("NN_name", e); }`: a typed error
// (an option value the parser let through, such as --heads that does not divide --d-model; a missing file) is
// printed as "NN_name: what" on stderr, exit status 1, never an uncaught exception's abort.
int report_error(const char* demo, const std::exception& e);

}  // namespace stepformer::demo
