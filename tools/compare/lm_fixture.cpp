// lm_fixture: writes what chapter 12's PyTorch comparisons (tools/compare) read, from the very model and data a
// run of 12_modern_lm with the same options trains; the training program itself only trains.
//
//   lm_fixture parity FILE [model options]   the block with random weights, a batch, its logits and gradients
//                                             (tools/compare/torch_lm.py)
//   lm_fixture data FILE [model options]     the starting weights, both token streams and the recipe
//                                             (tools/compare/torch_lm_bpb.py)
#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include "fixtures.h"

using namespace ch12;

int main(int argc, char** argv) {
  Options o;
  std::string path;
  CLI::App app{"lm_fixture: chapter 12's fixtures for tools/compare's PyTorch scripts"};
  app.option_defaults()->always_capture_default();
  app.require_subcommand(1);
  app.add_option("--seed", o.common.seed, "seed for the weights (and the parity batch), as 12_modern_lm's");
  add_model_options(app, o);
  CLI::App* parity = app.add_subcommand(
      "parity", "the block's weights, a batch, its logits and gradients, for tools/compare/torch_lm.py");
  CLI::App* data = app.add_subcommand(
      "data", "the starting weights, both token streams and the recipe, for tools/compare/torch_lm_bpb.py");
  for (CLI::App* sub : {parity, data}) sub->add_option("file", path, "the safetensors file to write")->required();
  CLI11_PARSE(app, argc, argv);
  try {
    check_model_options(o);
    if (parity->parsed())
      write_parity_file(o, path);
    else
      write_data_file(o, load_corpus(o), path);
  } catch (const std::exception& e) {
    fmt::print(stderr, "lm_fixture: {}\n", e.what());
    return 1;
  }
  return 0;
}
