// exercises: list the exercises, make a student workspace, grade a build (docs/exercises.md).
//
//   exercises list      [--root DIR]
//   exercises workspace DEST [--root DIR] [--chapter N] [--bank] [--marked-only]
//   exercises grade     [--root DIR] [--build DIR] [--chapter N | --exercise N.M] [--json FILE] [--expect pass|stubbed]
//   exercises prove     [--root DIR] [--build DIR] [--table FILE]
//   exercises leaks     WORKSPACE [--root DIR] [--chapter N]
//
// grade runs, for each exercise, the tests tagged [exN.M] in every test program of the build, each under
// `timeout` (a crash or a hang fails that exercise only), and prints a table and a total; --expect turns it
// into a check (exit 1 unless every exercise passes / every exercise fails with NotImplemented).
// prove is the CI's check on a --bank workspace's build: with only exercise k (and what it needs) restored, k
// passes, and with every exercise but k restored, k fails at its stub; then every bug-bank entry in turn
// (tools/exercises/bank): a wrong solution scores 0 with a first failure naming its mistake, an alternative
// solution scores full points.
//
// leaks exits 1, naming each file, when a workspace holds the reference body of an exercise it stubs or an
// ALTERNATIVE body of the bank.
//
// This file is the command line; each verb is a file of its own (verbs.h).
#include <fmt/format.h>

#include <sys/ioctl.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdlib>

#include "files/atomic_write.h"
#include "verbs.h"

namespace fs = std::filesystem;
using namespace exercises;

namespace {
// The terminal's width (COLUMNS, then the tty's), 120 when the output goes to a file or a pipe.
std::size_t terminal_width() {
  if (const char* columns = std::getenv("COLUMNS"); columns && std::atoi(columns) > 0)
    return static_cast<std::size_t>(std::atoi(columns));
  winsize w{};
  if (isatty(STDOUT_FILENO) && ioctl(STDOUT_FILENO, TIOCGWINSZ, &w) == 0 && w.ws_col > 0) return w.ws_col;
  return 120;
}
}  // namespace

int main(int argc, char** argv) {
  CLI::App app("stepformer's exercises: list, make a workspace, grade (docs/exercises.md)");
  fs::path root = ".", build = "build/release", kernel_build, dest, json, table;
  std::string chapter_text;  // "09" is chapter 9, not an octal number
  int chapter = -1;
  bool bank = false, marked_only = false;
  std::string expect;
  app.add_option("--root", root, "the sources (the reference repository or a workspace)")->capture_default_str();
  auto* list_cmd = app.add_subcommand("list", "the exercises and their points");
  auto* ws = app.add_subcommand("workspace", "copy the project with the exercises stubbed");
  ws->add_option("dest", dest, "a new folder")->required();
  ws->add_option("--chapter", chapter_text, "stub only this chapter's exercises (e.g. 2 or 02)");
  ws->add_flag("--bank", bank, "every body (reference, bug bank, stub) chosen at run time (for the CI proof)");
  ws->add_flag("--marked-only", marked_only, "rewrite only the marked files of an existing workspace");
  auto* gr = app.add_subcommand("grade", "run each exercise's tests in a build and print the points");
  gr->add_option("--build", build, "the build folder (its bin/ holds the test programs)")->capture_default_str();
  gr->add_option("--kernel-build", kernel_build,
                 "the cuda-sim checking build whose cuda_tests grades chapter 09 (its kernels are counted)");
  gr->add_option("--chapter", chapter_text, "grade only this chapter (e.g. 2 or 02)");
  std::string only;
  gr->add_option("--exercise", only, "grade only this exercise (e.g. 2.3) and, unreported, those it needs");
  gr->add_option("--json", json, "also write the results here (default: BUILD/grade.json)");
  gr->add_option("--expect", expect, "check: pass (every exercise passes) or stubbed (every one fails, NotImplemented)")
      ->check(CLI::IsMember({"pass", "stubbed"}));
  auto* pr = app.add_subcommand("prove", "on a --bank workspace's build: restored exercises pass, the bug bank fails");
  pr->add_option("--build", build, "the build folder")->capture_default_str();
  pr->add_option("--kernel-build", kernel_build, "the cuda-sim checking build (as for grade)");
  pr->add_option("--table", table, "also write the bug bank's table here (markdown)");
  auto* lk = app.add_subcommand("leaks", "check that a workspace holds no answer to the exercises it stubs");
  lk->add_option("workspace", dest, "a workspace written by `exercises workspace`")->required();
  lk->add_option("--chapter", chapter_text, "the chapter it was written for (as given to workspace)");
  app.require_subcommand(1);
  CLI11_PARSE(app, argc, argv);
  try {
    if (!chapter_text.empty()) {
      if (chapter_text.find_first_not_of("0123456789") != std::string::npos || chapter_text.size() > 2)
        throw std::runtime_error("--chapter expects a chapter number such as 2 or 02, got '" + chapter_text + "'");
      chapter = std::stoi(chapter_text);
    }
    const auto all = exercises::find_exercises(root);
    if (list_cmd->parsed()) {
      int sum = 0;
      for (const Exercise& ex : all) {
        sum += ex.points;
        fmt::print("{:<5} {:>2} points  {}  {}  {}\n", ex.number, ex.points, ex.regions.front().file.string(),
                   where_to_write(ex), ex.hint);
      }
      fmt::print("{} exercises, {} points\n", all.size(), sum);
      return 0;
    }
    if (ws->parsed()) {
      make_workspace(fs::absolute(root), fs::absolute(dest), chapter, bank, marked_only, all);
      return 0;
    }
    if (lk->parsed()) {
      std::vector<Exercise> stubbed;
      for (const Exercise& ex : all)
        if (chapter < 0 || ex.chapter == chapter) stubbed.push_back(ex);
      const auto found = leaks(dest, answers(root, stubbed, read_bank(root / "tools/exercises/bank", all)));
      for (const std::string& f : found) fmt::print("{}\n", f);
      fmt::print("{}: {}\n", dest.string(),
                 found.empty() ? fmt::format("no answer to its {} exercises", stubbed.size())
                               : fmt::format("{} answer{} found (above)", found.size(), found.size() == 1 ? "" : "s"));
      return found.empty() ? 0 : 1;
    }
    const Builds builds{build, kernel_build};
    if (pr->parsed()) return prove(root, all, exercises::read_bank(root / "tools/exercises/bank", all), builds, table);
    if (!only.empty() &&
        std::none_of(all.begin(), all.end(), [&only](const Exercise& ex) { return ex.number == only; }))
      throw std::runtime_error("--exercise: no exercise " + only + " (exercises list shows them)");
    const auto results = grade(all, builds, chapter, only);
    print(results, terminal_width());
    stepformer::files::write_atomically(json.empty() ? build / "grade.json" : json, to_json(results).dump(2) + "\n");
    if (expect == "pass") {
      const bool ok = total_points(results, true) == total_points(results, false) && !results.empty();
      fmt::print("{}\n", ok ? "expected: every exercise passes - yes" : "expected: every exercise passes - NO");
      return ok ? 0 : 1;
    }
    if (expect == "stubbed") {
      bool ok = !results.empty();
      for (const Result& r : results)
        if (r.passed || r.message.find("'exercise ") == std::string::npos) {  // the stub's message
          ok = false;
          fmt::print("exercise {}: expected a NotImplemented failure, got {}\n", r.ex->number,
                     r.passed ? "a pass" : r.message);
        }
      fmt::print("{}\n", ok ? "expected: every exercise fails with NotImplemented - yes"
                            : "expected: every exercise fails with NotImplemented - NO");
      return ok ? 0 : 1;
    }
    return 0;
  } catch (const std::exception& e) {
    fmt::print(stderr, "exercises: {}\n", e.what());
    return 1;
  }
}
