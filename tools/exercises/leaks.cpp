// exercises leaks: a learner's workspace must hold no answer. Every reference body and every ALTERNATIVE body
// of the bug bank is searched for in every text file of the workspace, whitespace ignored (a body re-indented
// or re-wrapped in a doc is still the answer).
#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <fstream>
#include <sstream>

#include "verbs.h"

namespace exercises {

namespace fs = std::filesystem;

namespace {

// Every run of whitespace becomes one space; leading and trailing space dropped.
std::string squeezed(const std::string& text) {
  std::string out;
  bool space = false;
  for (char c : text) {
    if (std::isspace(static_cast<unsigned char>(c))) {
      space = !out.empty();
      continue;
    }
    if (space) out += ' ';
    space = false;
    out += c;
  }
  return out;
}

std::string joined(const std::vector<std::string>& lines) {
  std::string out;
  for (const std::string& l : lines) out += l + "\n";
  return out;
}

// The reference's region bodies, read from the reference sources (a workspace's regions are stubs).
std::vector<Answer> reference_answers(const fs::path& root, const std::vector<Exercise>& all) {
  std::vector<Answer> out;
  for (const Exercise& ex : all)
    for (std::size_t k = 0; k < ex.regions.size(); ++k) {
      const Region& r = ex.regions[k];
      std::istringstream in(read_text(root / r.file));
      std::vector<std::string> body;
      int n = 0;
      for (std::string line; std::getline(in, line);)
        if (++n > r.first_line && n < r.last_line) body.push_back(line);
      out.push_back(
          {ex.number, fmt::format("the reference's region {} ({})", k + 1, r.file.string()), squeezed(joined(body))});
    }
  return out;
}

bool is_text(const std::string& bytes) { return bytes.find('\0') == std::string::npos; }

}  // namespace

std::vector<Answer> answers(const fs::path& root, const std::vector<Exercise>& all,
                            const std::vector<BankEntry>& bank) {
  std::vector<Answer> out = reference_answers(root, all);
  const auto stubbed = [&all](const std::string& number) {
    return std::any_of(all.begin(), all.end(), [&number](const Exercise& ex) { return ex.number == number; });
  };
  for (const BankEntry& e : bank)
    if (!e.wrong && stubbed(e.number))
      for (const auto& [region, lines] : e.regions)
        out.push_back(
            {e.number, fmt::format("the bank's ALTERNATIVE {}, region {}", e.name, region), squeezed(joined(lines))});
  return out;
}

std::vector<std::string> leaks(const fs::path& workspace, const std::vector<Answer>& answers) {
  std::vector<std::string> found;
  for (auto it = fs::recursive_directory_iterator(workspace); it != fs::recursive_directory_iterator(); ++it) {
    const std::string top = fs::relative(it->path(), workspace).begin()->string();
    if (top == ".git" || top.rfind("build", 0) == 0) {  // a learner's own build trees and history are theirs
      if (it->is_directory()) it.disable_recursion_pending();
      continue;
    }
    if (!it->is_regular_file()) continue;
    const std::string bytes = read_text(it->path());
    if (!is_text(bytes)) continue;
    const std::string text = squeezed(bytes);
    for (const Answer& a : answers)
      if (!a.body.empty() && text.find(a.body) != std::string::npos)
        found.push_back(
            fmt::format("{}: exercise {}: {}", fs::relative(it->path(), workspace).string(), a.number, a.source));
  }
  std::sort(found.begin(), found.end());
  return found;
}

}  // namespace exercises
