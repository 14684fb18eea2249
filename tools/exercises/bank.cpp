// Reading the bug bank (exercises.h explains the format).
#include <algorithm>
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
        if (e.name == "reference") fail_at(path, n, "'reference' is the reference solution's name");
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

}  // namespace exercises
