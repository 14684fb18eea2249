// exercises: list the exercises, make a student workspace, grade a build (docs/exercises.md).
//
//   exercises list      [--root DIR]
//   exercises workspace DEST [--root DIR] [--chapter N] [--bank] [--marked-only]
//   exercises grade     [--root DIR] [--build DIR] [--chapter N] [--json FILE] [--expect pass|stubbed]
//   exercises prove     [--root DIR] [--build DIR] [--table FILE]
//
// grade runs, for each exercise, the tests tagged [exN.M] in every test program of the build, each under
// `timeout` (a crash or a hang fails that exercise only), and prints a table and a total; --expect turns it
// into a check (exit 1 unless every exercise passes / every exercise fails with NotImplemented).
// prove is the CI's check on a --bank workspace's build: with only exercise k (and what it needs) restored,
// exactly those exercises pass; then every bug-bank entry in turn (tools/exercises/bank): a wrong solution
// scores 0 with a first failure naming its mistake, an alternative solution scores full points.
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <sys/wait.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>
#include <sstream>

#include "exercises.h"
#include "files/atomic_write.h"

namespace fs = std::filesystem;
using exercises::Exercise;

namespace {

constexpr const char* kPrograms[] = {"autograd_tests", "nn_tests", "transformer_tests", "cuda_tests",
                                     "distributed_tests"};

// Where the test programs are: chapter 09's kernel exercises are graded on cuda-sim's counters, which only
// the checking build has (clang, STEPFORMER_CUDASIM_CHECK=ON): its cuda_tests is taken from `kernels`.
struct Builds {
  fs::path tests, kernels;
  fs::path program(const std::string& name) const {
    return (name == "cuda_tests" && !kernels.empty() ? kernels : tests) / "bin" / name;
  }
};
// Per test program and exercise; STEPFORMER_GRADE_TIMEOUT (seconds) overrides it.
int timeout_seconds() {
  const char* env = std::getenv("STEPFORMER_GRADE_TIMEOUT");
  return env ? std::max(1, std::atoi(env)) : 300;
}

// Where a learner writes an exercise, by name (a workspace's stubs move lines): "`split_heads`, `merge_heads`",
// a region in another file than the first with that file after it: "`cross_entropy` (in autograd/src/ops/loss.cpp)".
std::string where_to_write(const Exercise& ex) {
  std::string out;
  for (const auto& r : ex.regions) {
    if (out.find("`" + r.function + "`") != std::string::npos) continue;
    out += (out.empty() ? "`" : ", `") + r.function + "`";
    if (r.file != ex.regions.front().file) out += " (in " + r.file.string() + ")";
  }
  return out;
}

std::string shell_quote(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

struct Run {
  bool ran = false;  // some test carried the tag
  bool passed = false;
  std::string message;  // the first failure, or how the program ended
};

// The first failed assertion of Catch2's compact report, on one line, its messages (the INFOs naming what is
// checked) first: "'the messages' (failed: the expression for: its values)". A long expression wraps onto
// more lines; the report of the next assertion or the summary ends it.
std::string first_failure(const std::string& output) {
  static const std::regex next_report(R"(^\S+:\d+: (passed|failed)|^test cases:|^assertions:)");
  static const std::regex messages(R"( with \d+ messages?: )");
  std::istringstream lines(output);
  std::string block;
  bool inside = false;
  for (std::string line; std::getline(lines, line);) {
    if (inside && std::regex_search(line, next_report)) break;
    const auto at = line.find(": failed: ");
    if (!inside && at == std::string::npos) continue;
    block += inside ? " " + line : line.substr(at + 2);
    inside = true;
  }
  std::smatch m;
  if (!std::regex_search(block, m, messages)) return block;
  return m.suffix().str() + " (" + m.prefix().str() + ")";
}

// Runs one program's tests with the tag; the program may crash or hang without taking the grader along.
// Chapter 10's tests need two processes: mpirun starts them (as root too: CI runs as root, and OpenMPI refuses
// root unless told; a learner's own account needs neither variable).
Run run_tagged(const fs::path& program, const std::string& tag) {
  const bool mpi = program.filename() == "distributed_tests";
  const std::string launcher =
      mpi ? "env OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 mpirun -np 2 --oversubscribe " : "";
  // mpirun gives its processes a pseudo-terminal: without --colour-mode none the report would carry colour codes.
  const std::string cmd =
      fmt::format("timeout {} {}{} {} --allow-running-no-tests --reporter compact{} 2>&1", timeout_seconds(), launcher,
                  shell_quote(program.string()), shell_quote(tag), mpi ? " --colour-mode none" : "");
  FILE* pipe = popen(cmd.c_str(), "r");
  if (!pipe) throw std::runtime_error("cannot run " + program.string());
  std::string output;
  char buf[4096];
  for (std::size_t n; (n = std::fread(buf, 1, sizeof buf, pipe)) > 0;) output.append(buf, n);
  const int status = pclose(pipe);
  const int code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  Run r;
  if (output.find("No tests ran") != std::string::npos && code == 0) return r;
  r.ran = true;
  r.passed = code == 0;
  if (r.passed) return r;
  r.message = first_failure(output);
  if (code == 124)
    r.message = fmt::format("timed out after {} s", timeout_seconds());
  else if (code > 128 && r.message.empty())
    r.message = fmt::format("crashed (signal {})", code - 128);
  else if (r.message.empty())
    r.message = fmt::format("{} exited with {}", program.filename().string(), code);
  return r;
}

struct Result {
  const Exercise* ex = nullptr;
  bool passed = false;
  std::string message;
  std::string blocked_by;
};

// Every exercise of `chapter` (all when negative), or only exercise `number` when it is given.
std::vector<Result> grade(const std::vector<Exercise>& all, const Builds& build, int chapter,
                          const std::string& number = "") {
  std::vector<Result> results;
  std::set<std::string> failed;
  for (const Exercise& ex : all) {
    if (chapter >= 0 && ex.chapter != chapter) continue;
    if (!number.empty() && ex.number != number) continue;
    Result r;
    r.ex = &ex;
    bool ran = false;
    r.passed = true;
    for (const char* name : kPrograms) {
      const fs::path program = build.program(name);
      if (!fs::exists(program)) continue;
      // Only chapter 10 has tests there, and starting two processes for every other tag costs seconds each
      // (the CI proof grades hundreds of times).
      if ((name == std::string("distributed_tests")) != (ex.chapter == 10)) continue;
      const Run run = run_tagged(program, "[ex" + ex.number + "]");
      ran |= run.ran;
      if (run.ran && !run.passed && r.passed) r.passed = false, r.message = run.message;
    }
    if (!ran)
      r.passed = false, r.message = "no test carries the tag [ex" + ex.number + "]" +
                                    (build.kernels.empty() ? " (chapter 09's kernels are graded in cuda-sim's checking "
                                                             "build: --kernel-build, as ./run grade does)"
                                                           : "");
    if (!r.passed) failed.insert(ex.number);
    results.push_back(r);
  }
  for (Result& r : results) {  // after all: 0.1 may need 0.4, graded later
    if (r.passed) continue;
    std::vector<std::string> blockers;
    for (const std::string& need : r.ex->needs)
      if (failed.count(need)) blockers.push_back(need);
    // The one whose stub the first failure shows goes first, so that the line reads as one story.
    std::stable_partition(blockers.begin(), blockers.end(), [&r](const std::string& need) {
      return r.message.find("exercise " + need + ":") != std::string::npos;
    });
    r.blocked_by = fmt::format("{}", fmt::join(blockers, ", "));
  }
  return results;
}

int total_points(const std::vector<Result>& results, bool only_passed) {
  int sum = 0;
  for (const Result& r : results)
    if (!only_passed || r.passed) sum += r.ex->points;
  return sum;
}

void print(const std::vector<Result>& results) {
  fmt::print("{:<8} {:<9} {:>6}  {:<6}  {}\n", "chapter", "exercise", "points", "result", "first failure");
  for (const Result& r : results) {
    std::string note = r.passed               ? ""
                       : r.blocked_by.empty() ? r.message
                                              : "blocked by " + r.blocked_by + ": " + r.message;
    if (note.size() > 100) note = note.substr(0, 97) + "...";
    fmt::print("{:<8} {:<9} {:>6}  {:<6}  {}\n", fmt::format("{:02}", r.ex->chapter), r.ex->number,
               r.passed ? fmt::format("{}/{}", r.ex->points, r.ex->points) : fmt::format("0/{}", r.ex->points),
               r.passed ? "pass" : "FAIL", note);
  }
  fmt::print("total: {}/{}\n", total_points(results, true), total_points(results, false));
}

nlohmann::json to_json(const std::vector<Result>& results) {
  nlohmann::json j;
  j["total"] = total_points(results, true);
  j["possible"] = total_points(results, false);
  for (const Result& r : results)
    j["exercises"].push_back({{"exercise", r.ex->number},
                              {"chapter", r.ex->chapter},
                              {"points", r.ex->points},
                              {"passed", r.passed},
                              {"first_failure", r.message},
                              {"blocked_by", r.blocked_by},
                              {"hint", r.ex->hint}});
  return j;
}

void make_workspace(const fs::path& root, const fs::path& dest, int chapter, bool bank, bool marked_only,
                    const std::vector<Exercise>& all) {
  if (marked_only && !fs::exists(dest / "WORKSPACE.md"))
    throw std::runtime_error(dest.string() + " is not a workspace (no WORKSPACE.md)");
  if (!marked_only && fs::exists(dest) && !fs::is_empty(dest))
    throw std::runtime_error(dest.string() + " exists and is not empty");
  fs::create_directories(dest);
  for (auto it = fs::recursive_directory_iterator(root); !marked_only && it != fs::recursive_directory_iterator();
       ++it) {
    const fs::path rel = fs::relative(it->path(), root);
    const std::string top = rel.begin()->string();
    if (top == ".git" || top.rfind("build", 0) == 0 || top == "stepformer-out" || fs::equivalent(it->path(), dest)) {
      if (it->is_directory()) it.disable_recursion_pending();
      continue;
    }
    if (it->is_directory())
      fs::create_directories(dest / rel);
    else if (it->is_regular_file())
      fs::copy_file(it->path(), dest / rel);
  }
  std::vector<std::string> only;
  for (const Exercise& ex : all)
    if (chapter < 0 || ex.chapter == chapter) only.push_back(ex.number);
  std::set<fs::path> files;
  for (const Exercise& ex : all)
    for (const auto& region : ex.regions) files.insert(region.file);
  const auto entries =
      bank ? exercises::read_bank(root / "tools/exercises/bank", all) : std::vector<exercises::BankEntry>{};
  for (const fs::path& f : files)
    stepformer::files::write_atomically(
        dest / f, exercises::rewrite(exercises::read_text(root / f), f,
                                     bank ? exercises::StubKind::bank : exercises::StubKind::stub, only, entries, all));
  if (marked_only) {
    fmt::print("rewrote the marked files of {} ({})\n", dest.string(),
               bank ? "every body, chosen at run time" : "stubs");
    return;
  }
  std::string guide = "# Your stepformer workspace\n\n";
  guide += chapter < 0 ? "Every exercise" : fmt::format("Every exercise of chapter {:02}", chapter);
  guide +=
      " below has its solution removed: the marked region now throws `NotImplemented`.\n"
      "Open the file, read the hint and the surrounding code, write the region, then grade:\n\n"
      "```sh\n./run grade          # builds this workspace and grades it; ./run grade 02 for chapter 02\n```\n\n"
      "The grader prints each exercise's points and the first failing check; `blocked by 0.4, 0.3` means\n"
      "exercises this one needs are not solved yet. docs/exercises.md explains the rest.\n\n"
      "Find a region by its file, its function and its marker `// EXERCISE N.M`; an exercise with several\n"
      "regions has the others marked `// EXERCISE N.M (continued)`.\n\n"
      "| exercise | points | file | function | hint |\n|---|---|---|---|---|\n";
  for (const Exercise& ex : all)
    if (chapter < 0 || ex.chapter == chapter)
      guide += fmt::format("| {} | {} | `{}` | {} | {} |\n", ex.number, ex.points, ex.regions.front().file.string(),
                           where_to_write(ex), ex.hint);
  stepformer::files::write_atomically(dest / "WORKSPACE.md", guide);
  fmt::print("workspace written to {} ({} exercises stubbed{}); read {}\n", dest.string(), only.size(),
             bank ? ", every body chosen at run time" : "", (dest / "WORKSPACE.md").string());
}

std::string lowercase(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// The CI's proof. 1: with only `k` and what it needs restored, exactly those pass. 2: each bank entry, with
// every other exercise at its reference: a wrong one scores 0 and its first failure contains its `expect`
// words and names no other mistake or seed; an alternative scores full points. 3: every exercise has at least
// two wrong entries, and every mistake a graded check names is planted by an entry expecting it.
int prove(const fs::path& root, const std::vector<Exercise>& all, const std::vector<exercises::BankEntry>& bank,
          const Builds& build, const fs::path& table_file) {
  int problems = 0;
  for (const auto& [slug, file] : exercises::named_mistakes(root)) {
    const bool planted = std::any_of(bank.begin(), bank.end(), [&](const exercises::BankEntry& e) {
      return e.wrong && lowercase(e.expect) == "mistake " + slug;
    });
    if (!planted) {
      ++problems;
      fmt::print("{} names mistake '{}', and no WRONG entry of the bank plants it (expect: mistake {})\n",
                 file.string(), slug, slug);
    }
  }
  std::map<std::string, const Exercise*> by_number;
  for (const Exercise& ex : all) by_number[ex.number] = &ex;
  for (const Exercise& ex : all) {
    std::set<std::string> restored{ex.number};
    std::vector<std::string> todo = ex.needs;
    while (!todo.empty()) {
      const std::string n = todo.back();
      todo.pop_back();
      if (restored.insert(n).second && by_number.count(n))
        for (const auto& m : by_number[n]->needs) todo.push_back(m);
    }
    std::string list, bodies;
    for (const auto& n : restored) list += (list.empty() ? "" : ",") + n, bodies += n + "=reference,";
    setenv("STEPFORMER_EXERCISE_BODIES", bodies.c_str(), 1);
    const auto results = grade(all, build, -1);
    for (const Result& r : results) {
      const bool expect = restored.count(r.ex->number) > 0;
      if (r.passed != expect) {
        ++problems;
        fmt::print("restoring {}: exercise {} {} ({})\n", list, r.ex->number,
                   expect ? "still fails" : "passes without its solution", r.message);
      }
    }
    fmt::print("restoring {:<12} -> {} passes\n", list,
               std::count_if(results.begin(), results.end(), [](const Result& r) { return r.passed; }));
  }
  struct Row {
    int wrong = 0, caught = 0, alternatives = 0, passing = 0;
  };
  std::map<std::string, Row> rows;
  for (const exercises::BankEntry& e : bank) {
    setenv("STEPFORMER_EXERCISE_BODIES", ("*=reference," + e.number + "=" + e.name).c_str(), 1);
    const Result r = grade(all, build, -1, e.number).front();
    Row& row = rows[e.number];
    bool ok = false;
    std::string wrong_name;
    if (e.wrong) {
      ++row.wrong;
      wrong_name = r.passed ? "" : exercises::misnamed(e, r.message);
      ok = !r.passed && lowercase(r.message).find(lowercase(e.expect)) != std::string::npos && wrong_name.empty();
      row.caught += ok;
    } else {
      ++row.alternatives;
      ok = r.passed;
      row.passing += ok;
    }
    fmt::print("{} {:<5} {:<28} {}\n", ok ? "ok  " : "BAD ", e.number, e.name,
               r.passed ? std::string("passes") : "fails: " + r.message);
    if (!ok) {
      ++problems;
      fmt::print("     {}:{}: {} ({}) {}\n", e.file.string(), e.line, e.wrong ? "wrong" : "alternative", e.what,
                 e.wrong ? (r.passed              ? "passes: the tests do not catch this mistake"
                            : !wrong_name.empty() ? "fails, but " + wrong_name
                                                  : "fails, but the first failure does not say '" + e.expect + "'")
                         : "fails: the tests grade the reference's spelling, not its behaviour");
    }
  }
  unsetenv("STEPFORMER_EXERCISE_BODIES");
  std::string table =
      "| exercise | wrong solutions caught / kept | alternative solutions passing / kept |\n|---|---|---|\n";
  for (const Exercise& ex : all) {
    const Row row = rows[ex.number];
    if (row.wrong < 2) {
      ++problems;
      fmt::print("exercise {}: {} wrong solutions in the bank, at least 2 wanted\n", ex.number, row.wrong);
    }
    table += fmt::format("| {} | {} / {} | {} |\n", ex.number, row.caught, row.wrong,
                         row.alternatives ? fmt::format("{} / {}", row.passing, row.alternatives) : "-");
  }
  fmt::print("\n{}", table);
  if (!table_file.empty()) stepformer::files::write_atomically(table_file, table);
  fmt::print("{}\n", problems ? fmt::format("{} problems", problems)
                              : "every exercise's tests pass exactly when it is restored, fail every wrong solution "
                                "in the bank with a message naming it, and pass every alternative");
  return problems ? 1 : 0;
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
  gr->add_option("--json", json, "also write the results here (default: BUILD/grade.json)");
  gr->add_option("--expect", expect, "check: pass (every exercise passes) or stubbed (every one fails, NotImplemented)")
      ->check(CLI::IsMember({"pass", "stubbed"}));
  auto* pr = app.add_subcommand("prove", "on a --bank workspace's build: restored exercises pass, the bug bank fails");
  pr->add_option("--build", build, "the build folder")->capture_default_str();
  pr->add_option("--kernel-build", kernel_build, "the cuda-sim checking build (as for grade)");
  pr->add_option("--table", table, "also write the bug bank's table here (markdown)");
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
    const Builds builds{build, kernel_build};
    if (pr->parsed()) return prove(root, all, exercises::read_bank(root / "tools/exercises/bank", all), builds, table);
    const auto results = grade(all, builds, chapter);
    print(results);
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
