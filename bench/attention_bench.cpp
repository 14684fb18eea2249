// Attention alone at growing lengths: chapter 02's composite (softmax(Q K^T / sqrt(d)) V from ops, the [T, T]
// scores and weights kept for backward) against flash_attention (ops.h: tiles, an online softmax, nothing of
// size T x T kept), causal, d_model 512 in 8 heads, batch 1 (the shape). For each length: forward +
// backward time (the best of several runs, the two in turn) and the bytes each holds between forward and
// backward (the device's live allocations with the graph alive: what grows with T).
// --layer runs instead a training step (forward and backward, dropout 0.1) of one encoder layer used as a
// decoder-only layer (the causal mask as its mask), d_model 512, 8 heads, d_ff 2048, batch 1, at one length, with
// the composite (need_weights) or flash attention, and prints the step's time and the process's peak
// RSS: one process per point, so that each peak is its own.
//
// --precision bf16 runs both on bfloat16 q, k, v (a bfloat16 product and softmax in the composite; on CUDA, flash's
// forward on the tensor cores for these heads of 64).
//
//   build/bench/bin/attention_bench [--device cpu|cuda|cuda-sim|reference] [--threads N] [--max-len T]
//                                   [--precision fp32|bf16]
//   build/bench/bin/attention_bench --layer composite|flash --len T [--threads N]
#include <fmt/format.h>
#include <omp.h>
#include <CLI/CLI.hpp>

#include <cmath>
#include <limits>
#include <string>

#include "autograd/autograd.h"
#include "device_wait.h"
#include "model_setup.h"
#include "timing.h"
#include "transformer/encoder.h"

using namespace stepformer;

namespace {

Tensor composite(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& future, double scale) {
  const Tensor s =
      masked_fill(matmul(q, transpose(k, -2, -1)) * scale, future, -std::numeric_limits<double>::infinity());
  return matmul(softmax(s, -1), v);
}

int layer_step(const std::string& which, std::int64_t T, Device dev) {
  transformer::Config cfg;  // the base model's layer: d_model 512, 8 heads, d_ff 2048, dropout 0.1
  Generator gen(1);
  transformer::EncoderLayer layer(cfg, gen);
  layer.to(dev);
  layer.train();
  const Tensor x = randn({1, T, cfg.d_model}, gen, {DType::float32, dev, true});
  const Tensor g = randn({1, T, cfg.d_model}, gen, {DType::float32, dev});
  const Tensor causal = transformer::subsequent_mask(T, dev);
  layer.self_attn->need_weights = which == "composite";
  const double best = bench::best_seconds(
      [&] {
        const Tensor y = layer(x, causal).context;
        y.backward(g);
        bench::wait_for(x.grad());
      },
      2, 2.0);
  fmt::print("layer step, {} attention, T {}: {:.1f} ms, peak RSS {:.0f} MB\n", which, T, 1e3 * best,
             bench::peak_rss_mb());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::string device = "cpu", layer, precision = "fp32";
  std::int64_t max_len = 4096, len = 1024;
  int threads = 0;
  CLI::App app{"attention_bench: the composite attention against flash_attention, forward + backward, by length"};
  app.add_option("--device", device, "cpu, cuda, cuda-sim or reference")->capture_default_str();
  app.add_option("--threads", threads, "CPU threads (0: OpenMP's default)")->check(CLI::NonNegativeNumber);
  app.add_option("--max-len", max_len, "the longest T (from 128, doubling)")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("--precision", precision, "fp32 or bf16 q, k, v")
      ->capture_default_str()
      ->check(CLI::IsMember({"fp32", "bf16"}));
  app.add_option("--layer", layer, "instead, one layer's training step with this attention")
      ->check(CLI::IsMember({"composite", "flash"}));
  app.add_option("--len", len, "the layer step's T")->capture_default_str()->check(CLI::PositiveNumber);
  CLI11_PARSE(app, argc, argv);
  if (threads > 0) omp_set_num_threads(threads);
  const DType dtype = precision == "bf16" ? DType::bfloat16 : DType::float32;
  const Device dev = parse_device(device);
  if (!layer.empty()) return layer_step(layer, len, dev);
  const std::int64_t B = 1, H = 8, Dh = 64;
  const double scale = transformer::attention_scale(Dh);
  Backend& backend = backend_for(dev);
  fmt::print("attention, causal, batch {}, {} heads of {} (d_model {}), {}, on {} ({} CPU threads)\n", B, H, Dh, H * Dh,
             dtype_name(dtype), device, omp_get_max_threads());
  fmt::print("{:>6} {:>14} {:>14} {:>8} {:>16} {:>16} {:>8}\n", "T", "composite ms", "flash ms", "speedup",
             "composite held", "flash held", "ratio");
  for (std::int64_t T = 128; T <= max_len; T *= 2) {
    Generator gen(1);
    const auto operand = [&](bool grad) {
      return uniform({B, H, T, Dh}, -1, 1, gen, {DType::float32, dev}).to(dtype).set_requires_grad(grad);
    };
    Tensor q = operand(true), k = operand(true), v = operand(true);
    const Tensor g = operand(false);
    const Tensor j = view(arange(T, {DType::int64, dev}), {1, T}), i = view(arange(T, {DType::int64, dev}), {T, 1});
    const Tensor future = view(gt(j, i), {1, 1, T, T});
    std::size_t held[2] = {};
    auto run = [&](int which) {
      const std::size_t before = backend.bytes_in_use();
      const Tensor out = which == 0 ? composite(q, k, v, future, scale) : flash_attention(q, k, v, {}, scale, true);
      held[which] = backend.bytes_in_use() - before;
      out.backward(g);
      bench::wait_for(q.grad());
      for (Tensor* t : {&q, &k, &v}) t->zero_grad();
    };
    const auto best = bench::best_of_rotation(
        2, T >= 2048 ? 4.0 : 1.0, [&] { run(0); }, [&] { run(1); });
    fmt::print("{:>6} {:>14.2f} {:>14.2f} {:>7.2f}x {:>13.1f} MB {:>13.1f} MB {:>7.1f}x\n", T, 1e3 * best[0],
               1e3 * best[1], best[0] / best[1], held[0] / 1e6, held[1] / 1e6,
               static_cast<double>(held[0]) / static_cast<double>(held[1]));
    std::fflush(stdout);
  }
}
