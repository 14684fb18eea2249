// Training-step and decoding benchmark of the whole Transformer: the small config (d_model 128, 2+2
// layers, batch 64 x 16 tokens) and the paper's base config (d_model 512, 6+6 layers, batch 32 x 32),
// 8000-word vocabularies, the chapter 07 recipe (Adam, label smoothing 0.1, clipping). Prints ms per
// step, tokens/s and model FLOPs utilisation (transformer/flops.h over cpu/peak.h's measured peak),
// greedy decoding ms per batch (in the step's precision; --tokens 0 leaves it out) and the process's peak memory.
// The peak is measured first, so that a profile started after the set-up and the warm-up step (perf record -D)
// holds the steps alone.
// tools/compare/torch_train_step.py runs the same shapes in PyTorch, so that the two can be run back to back.
//
//   build/bench/bin/train_bench [small|base] [--threads N] [--steps N] [--precision fp32|bf16] [--tokens N]
#include <fmt/format.h>
#include <omp.h>
#include <CLI/CLI.hpp>

#include <fstream>
#include <string>

#include "autograd/autocast.h"
#include "autograd/grad_mode.h"
#include "autograd/ops.h"
#include "cpu/peak.h"
#include "model_setup.h"
#include "timing.h"
#include "transformer/decoding.h"
#include "transformer/flops.h"
#include "transformer/train.h"

using namespace stepformer;
using namespace stepformer::transformer;

using bench::model_setup;
using bench::peak_rss_mb;

int main(int argc, char** argv) {
  std::string which = "small";
  int threads = 0, steps = 0, tokens = -1;
  std::string precision = "fp32";
  CLI::App app{"train_bench: the chapter 7 Transformer's training step"};
  app.add_option("setup", which, "small or base")->capture_default_str()->check(CLI::IsMember({"small", "base"}));
  app.add_option("--threads", threads, "CPU threads (0: OpenMP's default)")->check(CLI::NonNegativeNumber);
  app.add_option("--steps", steps, "timed steps (0: 30 small, 5 base)")->check(CLI::NonNegativeNumber);
  app.add_option("--tokens", tokens, "tokens greedy decoding makes (0: no decoding; default: the setup's length)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--precision", precision, "fp32, or bf16 autocast")
      ->capture_default_str()
      ->check(CLI::IsMember({"fp32", "bf16"}));
  CLI11_PARSE(app, argc, argv);
  if (threads > 0) omp_set_num_threads(threads);
  // MFU against the peak of the precision the GEMMs run in (cpu/peak.h).
  const double peak =
      precision == "bf16" ? cpu::bf16_peak_flops(omp_get_max_threads()) : cpu::peak_flops(omp_get_max_threads());
  const bool base = which == "base";
  const bench::ModelSetup setup = model_setup(which);
  const Config& cfg = setup.cfg;
  const std::int64_t batch = setup.batch, len = setup.len;
  if (steps <= 0) steps = base ? 5 : 30;
  if (tokens < 0) tokens = static_cast<int>(len);

  Generator gen(1), data(2);
  Transformer model(cfg, gen);
  Trainer trainer(model, {.warmup = 4000, .precision = precision_from_name(precision)});
  const Batch b = bench::random_batch(setup, batch, data);
  double best = 1e30, total = 0;
  trainer.step(b);  // warm-up: first-touch of every buffer
  for (int s = 0; s < steps; ++s) {
    const double t = bench::seconds([&] { trainer.step(b); });
    best = std::min(best, t);
    total += t;
  }
  std::string decoding;
  if (tokens > 0) {
    model.eval();
    // Decoding in the precision the step trained in: under bf16 autocast its products run on the bf16 kernel too.
    const double decode = bench::best_seconds(
        [&] {
          NoGradGuard no_grad;
          const AutocastGuard autocast(precision_from_name(precision));
          greedy_decode(model, b.src, {.max_len = tokens});
        },
        3, 0.5);
    decoding = fmt::format("; greedy decode {} tokens {:.1f} ms", tokens, decode * 1e3);
  }
  const double flops = training_step_flops(cfg, batch, len, len);
  fmt::print(
      "{} config, {}: {} parameters, batch {} x {} tokens, {} threads: train step {:.1f} ms (best) {:.1f} ms (mean of "
      "{}), {:.0f} target tokens/s, {:.1f} model GFLOP/step, MFU {:.1f}% of {:.0f} GFLOP/s{}{}, peak RSS {:.0f} MB\n",
      which, precision, model.parameter_count(), batch, len, omp_get_max_threads(), best * 1e3, total / steps * 1e3,
      steps, static_cast<double>(batch * len) / best, flops / 1e9, 100 * flops / best / peak, peak / 1e9,
      precision == "bf16" ? fmt::format(" ({})", cpu::bf16_peak_kernel()) : "", decoding, peak_rss_mb());
  return 0;
}
