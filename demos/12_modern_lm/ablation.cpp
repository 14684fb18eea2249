// Chapter 12's ablation: every block trained the same way, each run's curve in a file of its own, then a table and
// a picture of all the runs found.
#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "lm_run.h"

namespace ch12 {
namespace fs = std::filesystem;

namespace {
// "# block,seed,parameters,tokens_per_s,seconds,steps" then "step,valid_nats,valid_bpb" rows.
void write_run(const Options& o, const Run& r) {
  std::string text =
      fmt::format("# {},{},{},{:.1f},{:.1f},{}\n", r.block, r.seed, r.parameters, r.tokens_per_s, r.seconds, o.steps);
  for (std::size_t i = 0; i < r.valid.size(); ++i)
    text += fmt::format("{},{:.6f},{:.6f}\n", r.valid_steps[i], r.valid[i], r.valid_bpb[i]);
  sf::demo::write_output(o.common.out, fmt::format("12_ablation_{}_seed{}.csv", r.block, r.seed), text);
}

Run read_run(const fs::path& path) {
  std::ifstream in(path);
  std::string header, line;
  std::getline(in, header);
  Run r;
  std::replace(header.begin(), header.end(), ',', ' ');
  std::istringstream h(header.substr(header.find(' ') + 1));
  std::int64_t steps = 0;
  h >> r.block >> r.seed >> r.parameters >> r.tokens_per_s >> r.seconds >> steps;
  while (std::getline(in, line)) {
    std::replace(line.begin(), line.end(), ',', ' ');
    std::istringstream row(line);
    double step = 0, nats = 0, bpb = 0;
    row >> step >> nats >> bpb;
    r.valid_steps.push_back(step);
    r.valid.push_back(nats);
    r.valid_bpb.push_back(bpb);
  }
  if (!h || r.valid.empty()) throw sf::ValueError(fmt::format("ablation: {} is not a run's curve", path.string()));
  return r;
}
}  // namespace

void ablation(const Options& o, const Corpus* c) {
  std::vector<std::string> blocks = o.blocks.empty() ? lm_config_names() : o.blocks;
  if (blocks == std::vector<std::string>{"none"}) blocks.clear();
  for (const std::string& block : blocks)
    for (std::int64_t s = 0; s < o.seeds; ++s) {
      const std::uint64_t seed = o.common.seed + static_cast<std::uint64_t>(s);
      sf::Generator gen(seed);
      LanguageModel model(config_for(o, block, c->vocab.size()), gen);
      Run r = train_run(o, *c, model, seed, false);
      r.block = block;
      fmt::print("{:<14} seed {}  {:>9} parameters  valid {:.4f} nats/token {:.4f} bits/byte  {:5.0f} tok/s  {:.0f}s\n",
                 block, seed, r.parameters, r.valid.back(), r.valid_bpb.back(), r.tokens_per_s, r.seconds);
      write_run(o, r);
    }
  // Every run in --out, in lm_config_names() order, seeds ascending.
  std::map<std::string, std::vector<Run>> by_block;
  for (const auto& entry : fs::directory_iterator(o.common.out)) {
    const std::string name = entry.path().filename().string();
    if (name.starts_with("12_ablation_") && name.ends_with(".csv")) {
      Run r = read_run(entry.path());
      by_block[r.block].push_back(std::move(r));
    }
  }
  std::string table =
      "| block | parameters | valid bits/byte, each seed | mean | vs 2017 | tokens/s |\n|---|---|---|---|---|---|\n";
  std::vector<sf::demo::Series> series;
  const double base = by_block.count("2017") ? [&] {
    double sum = 0;
    for (const Run& r : by_block["2017"]) sum += r.valid_bpb.back();
    return sum / static_cast<double>(by_block["2017"].size());
  }()
                                             : 0.0;
  for (const std::string& block : lm_config_names()) {
    auto& runs = by_block[block];
    if (runs.empty()) continue;
    std::sort(runs.begin(), runs.end(), [](const Run& a, const Run& b) { return a.seed < b.seed; });
    std::vector<std::string> each;
    double sum = 0, speed = 0;
    for (const Run& r : runs) {
      each.push_back(fmt::format("{:.4f}", r.valid_bpb.back()));
      sum += r.valid_bpb.back();
      speed += r.tokens_per_s;
    }
    const double n = static_cast<double>(runs.size()), mean = sum / n;
    table += fmt::format("| {} | {} | {} | {:.4f} | {} | {:.0f} |\n", block, runs[0].parameters, fmt::join(each, ", "),
                         mean, base > 0 ? fmt::format("{:+.4f}", mean - base) : "-", speed / n);
    series.push_back({block, runs[0].valid_bpb, runs[0].valid_steps});
  }
  fmt::print("\n{}", table);
  sf::demo::write_output(o.common.out, "12_ablation.md", table);
  sf::demo::write_output(
      o.common.out, "12_ablation.svg",
      sf::demo::line_chart_svg(series, "validation bits per byte (first seed of each block)", "step", "bits/byte"));
}

}  // namespace ch12
