// Reading the bug bank (exercises.h explains the format).
#include <algorithm>
#include <cctype>
#include <fstream>
#include <regex>
#include <set>
#include <stdexcept>

#include "exercises.h"

namespace exercises {

namespace fs = std::filesystem;

namespace {

const std::regex kEntry(R"(^== (WRONG|ALTERNATIVE) (\d+\.\d+) ([a-z0-9-]+): (.+)$)");
const std::regex kExpect(R"(^expect: (.+)$)");
const std::regex kRegion(R"(^-- region (\d+)\s*$)");

std::size_t region_count(const std::vector<Exercise>& all, const std::string& number) {
  for (const Exercise& ex : all)
    if (ex.number == number) return ex.regions.size();
  return 0;
}

}  // namespace

std::vector<BankEntry> read_bank(const fs::path& folder, const std::vector<Exercise>& all) {
  std::vector<fs::path> files;
  if (fs::exists(folder))
    for (const auto& entry : fs::directory_iterator(folder))
      if (entry.path().extension() == ".txt") files.push_back(entry.path());
  std::sort(files.begin(), files.end());
  std::vector<BankEntry> bank;
  std::set<std::string> names;
  for (const fs::path& path : files) {
    std::ifstream in(path);
    BankEntry* open = nullptr;
    int region = 1;
    int n = 0;
    for (std::string line; std::getline(in, line);) {
      ++n;
      std::smatch m;
      if (std::regex_match(line, m, kEntry)) {
        BankEntry e;
        e.wrong = m[1].str() == "WRONG";
        e.number = m[2].str();
        e.name = m[3].str();
        e.what = m[4].str();
        e.file = path;
        e.line = n;
        if (region_count(all, e.number) == 0) fail_at(path, n, "no exercise " + e.number + " in the sources");
        if (!names.insert(e.number + "=" + e.name).second)
          fail_at(path, n, "exercise " + e.number + " has two entries named " + e.name);
        if (e.name == "reference" || e.name == "stub")  // the proof names them to choose those bodies
          fail_at(path, n, "'" + e.name + "' names the " + e.name + "'s body, not an entry of the bank");
        bank.push_back(e);
        open = &bank.back();
        region = 1;
      } else if (!open) {
        if (!line.empty() && line[0] != '#') fail_at(path, n, "text before the first '== WRONG/ALTERNATIVE' line");
      } else if (open->regions.empty() && std::regex_match(line, m, kExpect)) {
        open->expect = m[1].str();
      } else if (std::regex_match(line, m, kRegion)) {
        region = std::stoi(m[1].str());
        if (region < 1 || static_cast<std::size_t>(region) > region_count(all, open->number))
          fail_at(path, n, "exercise " + open->number + " has no region " + m[1].str());
        if (open->regions.count(region)) fail_at(path, n, "region " + m[1].str() + " given twice");
        open->regions[region];
      } else {
        open->regions[region].push_back(line);
      }
    }
  }
  for (BankEntry& e : bank) {
    for (auto& [r, lines] : e.regions)  // blank lines between entries are not part of a body
      while (!lines.empty() && lines.back().find_first_not_of(" \t") == std::string::npos) lines.pop_back();
    if (e.regions.empty()) fail_at(e.file, e.line, e.number + " " + e.name + ": no body");
    if (e.wrong && e.expect.empty())
      fail_at(e.file, e.line, e.number + " " + e.name + ": a wrong entry needs 'expect:'");
    if (!e.wrong && !e.expect.empty()) fail_at(e.file, e.line, "an alternative passes: 'expect:' means nothing there");
  }
  return bank;
}

bool equal_ignoring_case(const std::string& a, const std::string& b) {
  return std::equal(a.begin(), a.end(), b.begin(), b.end(), [](char x, char y) {
    return std::tolower(static_cast<unsigned char>(x)) == std::tolower(static_cast<unsigned char>(y));
  });
}

std::map<std::string, fs::path> named_mistakes(const fs::path& root) {
  static const std::regex call(R"re(mistake\(\s*"([a-z0-9-]+)")re");
  std::map<std::string, fs::path> found;
  for (const auto& entry : fs::recursive_directory_iterator(root / "tests")) {
    if (!entry.is_regular_file() || entry.path().extension() != ".cpp") continue;
    const std::string text = read_text(entry.path());
    for (std::sregex_iterator it(text.begin(), text.end(), call), end; it != end; ++it)
      found.emplace((*it)[1].str(), fs::relative(entry.path(), root));
  }
  return found;
}

std::string misnamed(const exercises::BankEntry& e, const std::string& message) {
  static const std::regex slug(R"(mistake ([a-z0-9-]+):)"), seed(R"(seed \d{3})");
  std::smatch m;
  if (std::regex_search(message, m, slug) && !equal_ignoring_case(e.expect, "mistake " + m[1].str()))
    return "its first failure names mistake '" + m[1].str() + "', which this entry does not plant";
  for (std::sregex_iterator it(message.begin(), message.end(), seed), end; it != end; ++it)
    if (e.what.find(it->str()) == std::string::npos)
      return "its first failure names " + it->str() + "'s bug, which this entry does not plant";
  return "";
}

}  // namespace exercises
