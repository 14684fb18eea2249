// The roofline of this CPU and where our kernels sit on it: the GEMM micro-kernels alone on cache-resident
// panels (the arithmetic ceilings, float32 and bfloat16), a memory copy (the bandwidth ceiling), and softmax /
// layer_norm forward and backward, sums and element-wise passes (casts, an add, a ReLU), in GB/s (bytes each must read
// and write, over time); the fused rms_norm and rotate_pairs against their composites, in time; causal flash attention
// forward + backward.
//
//   build/bench/bin/kernel_bench [--threads N]
#include <fmt/format.h>
#include <omp.h>
#include <CLI/CLI.hpp>

#include <cstdint>
#include <tuple>
#include <vector>

#include "autograd/autograd.h"
#include "cpu/gemm.h"
#include "cpu/gemm_isa.h"
#include "timing.h"

using namespace stepformer;

int main(int argc, char** argv) {
  int requested = 0;
  CLI::App app{"kernel_bench: the CPU's ceilings, the GEMM micro-kernels' GFLOP/s on one core and memory's GB/s"};
  app.add_option("--threads", requested, "threads of the bandwidth copy (0: OpenMP's default)")
      ->check(CLI::NonNegativeNumber);
  CLI11_PARSE(app, argc, argv);
  if (requested > 0) omp_set_num_threads(requested);
  const int threads = omp_get_max_threads();

  // Arithmetic ceiling: one micro-kernel call after another on panels that stay in L1/L2, one thread.
  for (const auto& k : cpu::gemm_kernels<float>()) {
    const std::int64_t K = 256;
    std::vector<float> a(static_cast<std::size_t>(K * k.mr), 0.5f), b(static_cast<std::size_t>(K * k.nr), 0.25f),
        c(static_cast<std::size_t>(k.mr * k.nr));
    const int calls = 2000;
    const double t = bench::best_seconds([&] {
      for (int i = 0; i < calls; ++i) k.run(K, a.data(), b.data(), c.data(), k.nr, 1.f, i ? 1.f : 0.f);
    });
    fmt::print("micro-kernel {:>8} {:2}x{:2}: {:6.1f} GFLOP/s on one core (panels in cache)\n", k.name, k.mr, k.nr,
               2.0 * K * k.mr * k.nr * calls / t / 1e9);
  }

  // The bfloat16 kernels' ceilings the same way (pairs of k packed), the calling thread's tiles configured first where
  // the kernel has tiles. AMX's again on operands 16 bytes past a cache line, as std::vector's memory may lie: its tile
  // rows then straddle two lines (docs/performance.md, "AMX").
  for (const auto& k : cpu::gemm_detail::bf16_dots()) {
    const std::int64_t kp = 128;  // K = 256
    const std::size_t a_words = static_cast<std::size_t>(kp * k.mr), b_words = static_cast<std::size_t>(kp * k.nr);
    std::vector<std::uint32_t> memory(a_words + b_words + 64, 0x3F003F00u);  // pairs of 0.5
    std::vector<float> c(static_cast<std::size_t>(k.mr * k.nr) + 16);
    auto gflops = [&](std::size_t offset_bytes) {
      const std::size_t line = (64 - reinterpret_cast<std::uintptr_t>(memory.data()) % 64) % 64 / 4;  // words
      const std::uint32_t* a = memory.data() + line + offset_bytes / 4;
      const std::uint32_t* b = a + a_words;
      float* const cp = c.data() + (16 - reinterpret_cast<std::uintptr_t>(c.data()) % 64 / 4) % 16;
      if (k.begin) k.begin();
      const int calls = 2000;
      const double t = bench::best_seconds([&] {
        for (int i = 0; i < calls; ++i) k.run(kp, a, b, cp, k.nr, 1.f, i ? 1.f : 0.f);
      });
      return 2.0 * static_cast<double>(2 * kp) * k.mr * k.nr * calls / t / 1e9;
    };
    fmt::print("micro-kernel {:>8} {:2}x{:2}: {:6.1f} GFLOP/s on one core (panels in cache, 64-byte aligned)", k.name,
               k.mr, k.nr, gflops(0));
    if (k.row_alignment > 1) fmt::print("; {:.1f} with A and B 16 bytes off", gflops(16));
    fmt::print("\n");
  }

  // Bandwidth ceiling: copy 64 MB (far larger than the caches) with all threads.
  const std::int64_t n = 16 << 20;
  Generator gen(1);
  Tensor src = rand({n}, gen), dst = zeros({n});
  const double t_copy = bench::best_seconds([&] { copy_(dst, src); });
  fmt::print("memory copy, {} threads: {:.1f} GB/s (read + write of {} MB)\n", threads, 2.0 * 4 * n / t_copy / 1e9,
             4 * n >> 20);

  // Rows of the kinds a Transformer has: attention scores and a 8000-word vocabulary; d_model 512.
  for (const auto& [rows, cols] : {std::pair<std::int64_t, std::int64_t>{32768, 32}, {1024, 8000}, {16384, 512}}) {
    const Tensor x = randn({rows, cols}, gen).set_requires_grad();
    const double bytes = 4.0 * static_cast<double>(rows * cols);
    Tensor y;
    const double t_fwd = bench::best_seconds([&] {
      NoGradGuard no_grad;
      y = softmax(x);
    });
    const Tensor g = randn({rows, cols}, gen);
    const double t_both = bench::best_seconds([&] {
      Tensor z = softmax(x);
      z.backward(g);
    });
    fmt::print("softmax    [{:5}, {:4}]: forward {:5.1f} GB/s, forward + backward {:5.1f} GB/s\n", rows, cols,
               2 * bytes / t_fwd / 1e9, 5 * bytes / t_both / 1e9);
  }
  for (const auto& [rows, cols] : {std::pair<std::int64_t, std::int64_t>{16384, 512}, {4096, 128}}) {
    const Tensor x = randn({rows, cols}, gen).set_requires_grad();
    const Tensor w = ones({cols}).set_requires_grad(), b = zeros({cols}).set_requires_grad();
    const double bytes = 4.0 * static_cast<double>(rows * cols);
    const double t_fwd = bench::best_seconds([&] {
      NoGradGuard no_grad;
      layer_norm(x, w, b);
    });
    const Tensor g = randn({rows, cols}, gen);
    const double t_both = bench::best_seconds([&] { layer_norm(x, w, b).backward(g); });
    fmt::print("layer_norm [{:5}, {:4}]: forward {:5.1f} GB/s, forward + backward {:5.1f} GB/s\n", rows, cols,
               2 * bytes / t_fwd / 1e9, 5 * bytes / t_both / 1e9);
  }
  // rms_norm, the fused op, against the composite it replaced (chapter 12's x * rsqrt(mean(x^2) + eps) * g), at the
  // language model's shape (16 x 128 tokens of 256) and the base model's.
  for (const auto& [rows, cols] : {std::pair<std::int64_t, std::int64_t>{2048, 256}, {16384, 512}}) {
    const Tensor x = randn({rows, cols}, gen).set_requires_grad(), w = ones({cols}).set_requires_grad();
    const Tensor g = randn({rows, cols}, gen);
    const auto composite = [&] { return x * rsqrt(mean(x * x, {-1}, true) + 1e-5) * w; };
    const double fused_s = bench::best_seconds([&] { rms_norm(x, w).backward(g); });
    const double composite_s = bench::best_seconds([&] { composite().backward(g); });
    fmt::print("rms_norm   [{:5}, {:4}]: forward + backward fused {:7.1f} us, composite {:7.1f} us ({:.2f}x)\n", rows,
               cols, fused_s * 1e6, composite_s * 1e6, composite_s / fused_s);
  }
  // rotate_pairs (RoPE), the fused op, against the composite it replaced (halves, four products, a difference, a sum
  // and a concatenation), on the heads of chapter 12's queries as the model holds them: [16, 128, 8, 32] viewed as
  // [16, 8, 128, 32], and the base model's shape.
  for (const auto& [B, T, H, Dh] :
       {std::tuple<std::int64_t, std::int64_t, std::int64_t, std::int64_t>{16, 128, 8, 32}, {32, 32, 8, 64}}) {
    const Tensor x = randn({B, T, H, Dh}, gen).set_requires_grad(), g = randn({B, H, T, Dh}, gen);
    const Tensor c = randn({T, Dh / 2}, gen), s = randn({T, Dh / 2}, gen);
    const auto composite = [&] {
      const Tensor h = transpose(x, 1, 2), a = narrow(h, 3, 0, Dh / 2), b = narrow(h, 3, Dh / 2, Dh / 2);
      return cat({a * c - b * s, b * c + a * s}, 3);
    };
    const double fused_s =
        bench::best_seconds([&] { rotate_pairs(transpose(x, 1, 2), c, s, RopePairing::half).backward(g); });
    const double composite_s = bench::best_seconds([&] { composite().backward(g); });
    fmt::print("rope       [{}, {}, {:3}, {}]: forward + backward fused {:7.1f} us, composite {:7.1f} us ({:.2f}x)\n",
               B, H, T, Dh, fused_s * 1e6, composite_s * 1e6, composite_s / fused_s);
  }
  // flash_attention, causal, forward + backward, in GFLOP/s of the products the causal half needs (2 T^2 (Dh + Dv)
  // forward, 2.5 times that backward): chapter 12's heads [16, 8, 128, 32], the base model's [32, 8, 32, 64] and a
  // long one [1, 8, 1024, 64].
  for (const auto& [B, H, T, Dh] : {std::tuple<std::int64_t, std::int64_t, std::int64_t, std::int64_t>{16, 8, 128, 32},
                                    {32, 8, 32, 64},
                                    {1, 8, 1024, 64}}) {
    const Tensor q = randn({B, H, T, Dh}, gen).set_requires_grad(), k = randn({B, H, T, Dh}, gen).set_requires_grad(),
                 v = randn({B, H, T, Dh}, gen).set_requires_grad(), g = randn({B, H, T, Dh}, gen);
    const double t = bench::best_seconds([&] { flash_attention(q, k, v, {}, 0.125, /*causal=*/true).backward(g); });
    const double flops = 3.5 * 2.0 * static_cast<double>(B * H) * static_cast<double>(T * T) / 2 * (2 * Dh);
    fmt::print("attention  [{}, {}, {:4}, {}] causal: forward + backward {:7.1f} us, {:5.1f} GFLOP/s\n", B, H, T, Dh,
               t * 1e6, flops / t / 1e9);
  }
  // Element-wise passes a training step makes, on the base model's [16384, 512] activation (beyond the caches) and on
  // chapter 12's [2048, 688] (SwiGLU's hidden layer, within them): autocast's casts to bfloat16 and back, an add (a
  // residual), a product (SwiGLU's gate), a ReLU, a SiLU, dropout (its mask drawn, then multiplied). Bytes: what
  // each must read and write (dropout: its input and output; the mask is its own traffic).
  for (const auto& [rows, cols] : {std::pair<std::int64_t, std::int64_t>{16384, 512}, {2048, 688}}) {
    const double elems = static_cast<double>(rows * cols);
    const Tensor x = randn({rows, cols}, gen), y = randn({rows, cols}, gen);
    const Tensor xb = x.to(DType::bfloat16);
    const auto rate = [&](const char* what, double bytes_per_element, auto&& f) {
      NoGradGuard no_grad;
      const double t = bench::best_seconds(f);
      fmt::print("{:<28} [{:5}, {:4}]: {:5.1f} GB/s\n", what, rows, cols, bytes_per_element * elems / t / 1e9);
    };
    rate("cast float32 -> bfloat16", 6, [&] { x.to(DType::bfloat16); });
    rate("cast bfloat16 -> float32", 6, [&] { xb.to(DType::float32); });
    rate("add", 12, [&] { x + y; });
    rate("multiply", 12, [&] { x* y; });
    rate("relu", 8, [&] { relu(x); });
    rate("silu", 8, [&] { silu(x); });
    rate("dropout p 0.1", 8, [&] { dropout(x, 0.1, true, gen); });
  }
  // Sums read each element once: a whole tensor to one number (a loss, a gradient's squared norm), the rows
  // of a vocabulary's logits, the columns of a [tokens, d_ff] gradient (a bias gradient).
  for (const auto& [rows, cols, dim] :
       {std::tuple<std::int64_t, std::int64_t, std::int64_t>{4096, 1024, -1}, {1024, 8000, 1}, {16384, 512, 0}}) {
    const Tensor x = randn({rows, cols}, gen);
    const double t = bench::best_seconds([&] {
      NoGradGuard no_grad;
      if (dim < 0)
        sum(x);
      else
        sum(x, {dim});
    });
    fmt::print("sum        [{:5}, {:4}] {:>9}: {:5.1f} GB/s\n", rows, cols,
               dim < 0    ? "all"
               : dim == 0 ? "over rows"
                          : "each row",
               4.0 * static_cast<double>(rows * cols) / t / 1e9);
  }
  return 0;
}
