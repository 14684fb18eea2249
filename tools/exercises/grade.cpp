// exercises grade: each exercise's tests (the tag [exN.M]) in every test program of a build, each run under
// `timeout`, so a crash or a hang fails that exercise only; an exercise whose `needs` fail is blocked by them.
#include <fmt/format.h>
#include <sys/wait.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <mutex>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <thread>

#include "verbs.h"

namespace exercises {

namespace fs = std::filesystem;

namespace {

constexpr const char* kPrograms[] = {"autograd_tests", "nn_tests", "transformer_tests", "cuda_tests",
                                     "distributed_tests"};

// Per test program and exercise; STEPFORMER_GRADE_TIMEOUT (seconds) overrides it.
int timeout_seconds() {
  const char* env = std::getenv("STEPFORMER_GRADE_TIMEOUT");
  return env ? std::max(1, std::atoi(env)) : 300;
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
Run run_tagged(const fs::path& program, const std::string& tag, const std::string& bodies) {
  const bool mpi = program.filename() == "distributed_tests";
  const std::string launcher =
      mpi ? "env OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 mpirun -np 2 --oversubscribe " : "";
  // mpirun gives its processes a pseudo-terminal: without --colour-mode none the report would carry colour codes.
  // The bodies go on the command line, not into this process's environment: the proof grades several at once.
  const std::string env = (grade_jobs() > 1 ? " OMP_NUM_THREADS=1" : "") +
                          (bodies.empty() ? "" : " STEPFORMER_EXERCISE_BODIES=" + shell_quote(bodies));
  const std::string cmd = fmt::format(
      "{}timeout {} {}{} {} --allow-running-no-tests --reporter compact{} 2>&1", env.empty() ? "" : "env" + env + " ",
      timeout_seconds(), launcher, shell_quote(program.string()), shell_quote(tag), mpi ? " --colour-mode none" : "");
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

// The exercise tags a program's tests carry (`--list-tags`, once per program): a program without the tag is not
// started for it. An empty set means the listing failed, and every tag is tried.
const std::set<std::string>& tags_of(const fs::path& program) {
  static std::mutex mutex;
  static std::map<fs::path, std::set<std::string>> cache;
  const std::lock_guard<std::mutex> lock(mutex);
  const auto found = cache.find(program);
  if (found != cache.end()) return found->second;
  std::set<std::string>& tags = cache[program];
  FILE* pipe = popen(
      fmt::format("timeout {} {} --list-tags 2>/dev/null", timeout_seconds(), shell_quote(program.string())).c_str(),
      "r");
  if (!pipe) return tags;
  std::string output;
  char buf[4096];
  for (std::size_t n; (n = std::fread(buf, 1, sizeof buf, pipe)) > 0;) output.append(buf, n);
  if (pclose(pipe) != 0) return tags;
  static const std::regex tag(R"(\[ex[0-9]+\.[0-9]+\])");
  for (auto it = std::sregex_iterator(output.begin(), output.end(), tag); it != std::sregex_iterator(); ++it)
    tags.insert(it->str());
  return tags;
}

bool may_carry(const fs::path& program, const std::string& tag) {
  const std::set<std::string>& tags = tags_of(program);
  return tags.empty() || tags.count(tag) > 0;
}

}  // namespace

// Test programs run side by side, one per core (STEPFORMER_GRADE_JOBS overrides), each on one OpenMP thread so
// that they do not crowd each other out: the proof grades about a thousand times.
int grade_jobs() {
  const char* env = std::getenv("STEPFORMER_GRADE_JOBS");
  return env ? std::max(1, std::atoi(env)) : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
}

void side_by_side(std::size_t n, const std::function<void(std::size_t)>& work) {
  std::atomic<std::size_t> next{0};
  std::vector<std::thread> workers;
  for (int w = 0; w < grade_jobs(); ++w)
    workers.emplace_back([&] {
      for (std::size_t i; (i = next++) < n;) work(i);
    });
  for (std::thread& w : workers) w.join();
}

std::vector<Result> grade(const std::vector<Exercise>& all, const Builds& build, int chapter, const std::string& number,
                          bool with_needs, const std::string& bodies) {
  std::vector<const Exercise*> chosen;
  for (const Exercise& ex : all)
    if ((chapter < 0 || ex.chapter == chapter) && (number.empty() || ex.number == number)) chosen.push_back(&ex);
  // The exercises those need, from other chapters too, are graded with them (and not reported): "blocked by"
  // names every unsolved one, whichever chapter is asked for.
  const std::size_t asked = chosen.size();
  for (std::size_t i = 0; with_needs && i < chosen.size(); ++i)
    for (const std::string& need : chosen[i]->needs)
      for (const Exercise& ex : all)
        if (ex.number == need && std::find(chosen.begin(), chosen.end(), &ex) == chosen.end()) chosen.push_back(&ex);
  // Every (exercise, program) run first, side by side; then each exercise's result from its runs in program order.
  struct Job {
    std::size_t exercise;
    fs::path program;
    Run run;
  };
  std::vector<Job> jobs;
  for (std::size_t i = 0; i < chosen.size(); ++i)
    for (const char* name : kPrograms) {
      const fs::path program = build.program(name);
      const std::string tag = "[ex" + chosen[i]->number + "]";
      // Only chapter 10 has tests there, and starting two processes for every other tag costs seconds each.
      if (!fs::exists(program) || (name == std::string("distributed_tests")) != (chosen[i]->chapter == 10) ||
          !may_carry(program, tag))
        continue;
      jobs.push_back({i, program, {}});
    }
  side_by_side(jobs.size(), [&](std::size_t j) {
    jobs[j].run = run_tagged(jobs[j].program, "[ex" + chosen[jobs[j].exercise]->number + "]", bodies);
  });
  std::vector<Result> results;
  std::set<std::string> failed;
  for (std::size_t i = 0; i < chosen.size(); ++i) {
    const Exercise& ex = *chosen[i];
    Result r;
    r.ex = &ex;
    bool ran = false;
    r.passed = true;
    for (const Job& job : jobs) {
      if (job.exercise != i) continue;
      ran |= job.run.ran;
      if (job.run.ran && !job.run.passed && r.passed) r.passed = false, r.message = job.run.message;
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
  results.resize(asked);
  return results;
}

std::string failure_line(const Result& r) {
  return r.blocked_by.empty() ? r.message : "blocked by " + r.blocked_by + ": " + r.message;
}

int total_points(const std::vector<Result>& results, bool only_passed) {
  int sum = 0;
  for (const Result& r : results)
    if (!only_passed || r.passed) sum += r.ex->points;
  return sum;
}

void print(const std::vector<Result>& results, std::size_t width) {
  fmt::print("{:<8} {:<9} {:>6}  {:<6}  {}\n", "chapter", "exercise", "points", "result", "first failure");
  const std::size_t room = width > 60 ? width - 37 : 23;  // what the columns before the failure leave
  bool cut = false;
  for (const Result& r : results) {
    std::string note = r.passed ? "" : failure_line(r);
    if (note.size() > room) note = note.substr(0, room - 3) + "...", cut = true;
    fmt::print("{:<8} {:<9} {:>6}  {:<6}  {}\n", fmt::format("{:02}", r.ex->chapter), r.ex->number,
               r.passed ? fmt::format("{}/{}", r.ex->points, r.ex->points) : fmt::format("0/{}", r.ex->points),
               r.passed ? "pass" : "FAIL", note);
  }
  fmt::print("total: {}/{}\n", total_points(results, true), total_points(results, false));
  if (!cut) return;
  // The end of a message (the first difference, the values) is what a learner needs: every cut one, whole.
  fmt::print("\nthe first failures, whole:\n");
  for (const Result& r : results)
    if (!r.passed && failure_line(r).size() > room) fmt::print("\n{}: {}\n", r.ex->number, failure_line(r));
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

}  // namespace exercises
