// Chapter 12's language model: training-step throughput and generation with and without the KV cache. The default
// model of `./run demo lm` (the Llama-style block, D 256, 4 layers, 8 heads of which 2 key/value, F 1024 -> SwiGLU
// 688, vocabulary 2000, batch 16 x 128 tokens), on random ids (speed does not depend on the text). Prints ms per
// step, tokens/s, MFU (lm_forward_flops over cpu/peak.h's measured peak), then tokens/s of one 256-token sample with
// the cache and without it (under bf16 autocast with --precision bf16; on a CUDA device generate replays the cached
// step as a graph, and the launches a token are printed); --tokens 0 leaves generation out, for a profile of the
// step alone.
// tools/compare/torch_lm_train.py runs the same model and shapes in PyTorch.
//
//   build/bench/bin/lm_bench [--block llama|2017|2017+CHANGE] [--threads N] [--steps N] [--precision fp32|bf16]
//                            [--device cpu|cuda|cuda-sim] [--tokens N]
// On a GPU the step's time includes the wait for its loss (the timed step reads it): the GPU's work, not only
// its launches; MFU is printed for the CPU only (cpu/peak.h measures the CPU's peak).
#include <fmt/format.h>
#include <omp.h>
#include <CLI/CLI.hpp>

#include <string>

#include "autograd/autocast.h"
#include "autograd/grad_mode.h"
#include "cpu/peak.h"
#include "timing.h"
#include "transformer/lm_train.h"
#include "transformer/sampling.h"
#include "transformer/train.h"

using namespace stepformer;
using namespace stepformer::transformer;

int main(int argc, char** argv) {
  std::string block = "llama", precision = "fp32", device = "cpu";
  int threads = 0, steps = 10, tokens = 256;
  CLI::App app{"lm_bench: chapter 12's language model, its training step and generation with and without the cache"};
  app.add_option("--block", block, "llama, 2017 or 2017+CHANGE (lm_config_from_name)")->capture_default_str();
  app.add_option("--threads", threads, "CPU threads (0: OpenMP's default)")->check(CLI::NonNegativeNumber);
  app.add_option("--steps", steps, "timed training steps")->capture_default_str()->check(CLI::PositiveNumber);
  app.add_option("--precision", precision, "fp32, or bf16 autocast")
      ->capture_default_str()
      ->check(CLI::IsMember({"fp32", "bf16"}));
  app.add_option("--device", device, "cpu, cuda or cuda-sim")->capture_default_str();
  app.add_option("--tokens", tokens, "tokens of the timed sample (0: no generation)")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  CLI11_PARSE(app, argc, argv);
  if (threads > 0) omp_set_num_threads(threads);
  const Device dev = parse_device(device);
  set_default_device(dev);  // the model, its batch and its optimizer's state
  const std::int64_t B = 16, T = 128, V = 2000;
  LMConfig cfg = lm_config_from_name(block, V);
  cfg.max_len = 512;
  Generator gen(1), data(2);
  LanguageModel model(cfg, gen);
  TokenStream stream;
  for (std::int64_t i = 0; i < B * T * 4; ++i)
    stream.ids.push_back(static_cast<std::int64_t>(random_bits(7, 0, static_cast<std::uint64_t>(i)) % V));
  LMTrainer trainer(model, {.total_steps = 1000, .precision = precision_from_name(precision)});
  const LMBatch batch = random_windows(stream, B, T, data);
  // Warm-up: first touch of every buffer; on a CUDA device the third step is recorded as a graph (LMTrainer), so the
  // timed steps are its replays.
  for (int s = 0; s < 3; ++s) trainer.step(batch);
  double best = 1e30, total = 0;
  for (int s = 0; s < steps; ++s) {
    const double t = bench::seconds([&] { trainer.step(batch).item(); });
    best = std::min(best, t);
    total += t;
  }
  const double flops = 3 * lm_forward_flops(cfg, B, T);
  std::string mfu;
  if (dev.type == DeviceType::cpu) {
    const double peak =
        precision == "bf16" ? cpu::bf16_peak_flops(omp_get_max_threads()) : cpu::peak_flops(omp_get_max_threads());
    mfu = fmt::format(", MFU {:.1f}% of {:.0f} GFLOP/s{}", 100 * flops / best / peak, peak / 1e9,
                      precision == "bf16" ? fmt::format(" ({})", cpu::bf16_peak_kernel()) : "");
  }
  const std::string where =
      dev.type == DeviceType::cpu ? fmt::format("{} threads", omp_get_max_threads()) : std::string(device_name(dev));
  fmt::print(
      "lm {} {}: {} parameters, batch {} x {} tokens, {}: train step {:.1f} ms (best) {:.1f} ms (mean of {}), "
      "{:.0f} tokens/s, {:.2f} model GFLOP/step{}\n",
      block, precision, model.parameter_count(), B, T, where, best * 1e3, total / steps * 1e3, steps,
      static_cast<double>(B * T) / best, flops / 1e9, mfu);
  if (tokens == 0) return 0;
  const std::int64_t n = tokens;
  double seconds[2];
  std::size_t waits[2], launches[2];
  for (const bool cached : {false, true}) {
    Generator g(3);
    const std::size_t waits_before = host_waits(dev), launches_before = kernel_launches(dev);
    seconds[cached] = bench::seconds([&] {
      const AutocastGuard autocast(precision_from_name(precision));  // generation in the precision trained in
      generate(model, {Vocabulary::kEos}, n, {0.8, 0, 0.9}, g, cached);
    });
    waits[cached] = host_waits(dev) - waits_before;
    launches[cached] = kernel_launches(dev) - launches_before;
  }
  fmt::print("generation of {} tokens: with the KV cache {:.0f} tokens/s, without {:.0f} tokens/s: {:.1f}x", n,
             n / seconds[1], n / seconds[0], seconds[0] / seconds[1]);
  const auto per_token = [n](std::size_t count) { return static_cast<double>(count) / static_cast<double>(n); };
  if (waits[1] > 0)  // docs/09_cuda.md, "Where the host waits"
    fmt::print("; host waits per token {:.2f} with the cache", per_token(waits[1]));
  if (launches[1] > 0)  // a CUDA device: the steps replayed as one graph each (docs/09_cuda.md, "Graphs")
    fmt::print("; launches per token {:.1f} with the cache, {:.1f} without", per_token(launches[1]),
               per_token(launches[0]));
  fmt::print("\n");
  return 0;
}
