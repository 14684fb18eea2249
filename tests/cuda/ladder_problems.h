#pragma once
// The kernel ladders' problems, one table for the tests and the benchmark, as ggml's one op table drives both its
// tests and its performance mode: each family's problem (the size docs/09_cuda.md counts), the versions that
// run it, the name each version's launch has in cuda-sim's profiler, what every version must compute (the CPU's
// answer), and the bytes or FLOPs a run must move. tests/cuda/test_ladders.cpp checks every version's values and
// holds each version's comment to the counts; bench/ladder_bench.cpp prints every version's check beside its
// counts (cuda-sim's checking build) or its time (a GPU). No Catch2 here: the benchmark includes it too.
#include <functional>
#include <stdexcept>
#include <string>
#include <vector>

#include "autograd/autograd.h"
#include "ladders.h"

#if defined(STEPFORMER_WITH_CUDA)
// The same entry points compiled by nvcc: ladders.h declares them in the namespace STEPFORMER_CUDA_NS names,
// cuda_sim in the programs that include this.
namespace stepformer::cuda {
void gemm_version(int, const TensorDesc&, const TensorDesc&, const TensorDesc&, double, double);
void softmax_version(int, const TensorDesc&, const TensorDesc&);
void row_sum_version(int, const TensorDesc&, const TensorDesc&);
void transpose_version(int, const TensorDesc&, const TensorDesc&);
}  // namespace stepformer::cuda
#endif

namespace stepformer::ladders {

// The numbered versions of one device's kernels: cuda-sim's, or the GPU's.
struct Kernels {
  decltype(&cuda_sim::gemm_version) gemm;
  decltype(&cuda_sim::softmax_version) softmax, row_sum, transpose;
};

inline Kernels kernels_of(Device dev) {
#if defined(STEPFORMER_WITH_CUDA)
  if (dev.type == DeviceType::cuda)
    return {cuda::gemm_version, cuda::softmax_version, cuda::row_sum_version, cuda::transpose_version};
#endif
  if (dev.type != DeviceType::cuda_sim)
    throw DeviceError("the kernel ladders run on cuda-sim or a GPU, not on " + device_name(dev));
  return {cuda_sim::gemm_version, cuda_sim::softmax_version, cuda_sim::row_sum_version, cuda_sim::transpose_version};
}

struct Problem {
  std::string family;  // what test_ladders.cpp finds it by
  std::string title;
  int first, last;                         // the versions that run it
  std::function<std::string(int)> kernel;  // the profiler's name of a version's launch (a prefix of it)
  Tensor expected;                         // on the CPU; every version's output has its shape, float32
  double tolerance;                        // absolute and relative; 0: bit for bit
  double bytes, flops;                     // what one run must read and write, and compute (0: not a product)
  std::function<void(int version, const Tensor& out)> run;  // that version on the device, into `out`

  // A buffer for the output on `dev`, filled with NaN: a version that leaves part of it unwritten is wrong.
  Tensor output(Device dev) const { return full(expected.shape(), NAN, {DType::float32, dev}); }
};

// Every family's problem on `dev`, inputs drawn from fixed seeds (the same numbers on every run and device).
inline std::vector<Problem> problems(Device dev) {
  const Kernels k = kernels_of(dev);
  const auto input = [](const Shape& shape, std::uint64_t seed) {
    Generator gen(seed);
    return uniform(shape, -1.0, 1.0, gen, {DType::float32, kCPU, false});
  };
  const auto numbered = [](std::string stem) { return [stem](int v) { return stem + std::to_string(v); }; };
  std::vector<Problem> all;

  const std::int64_t rows = 256, cols = 1024;
  const Tensor x = input({rows, cols}, 21), x_dev = x.to(dev);
  const double elems = static_cast<double>(rows * cols);
  all.push_back({"softmax", "softmax over 256 rows of 1024 floats", 1, cuda_sim::kSoftmaxVersions,
                 [](int v) {
                   return v < cuda_sim::kSoftmaxVersions ? "softmax_v" + std::to_string(v) : "softmax_forward_kernel";
                 },
                 softmax(x, -1), 1e-5, 8 * elems, 0,
                 [=](int v, const Tensor& y) { k.softmax(v, y.desc(), x_dev.desc()); }});

  const Tensor r = input({64, 4096}, 22), r_dev = r.to(dev);
  all.push_back({"row_sum", "the sums of 64 rows of 4096 floats", 1, cuda_sim::kRowSumVersions, numbered("row_sum_v"),
                 sum(r, {1}), 1e-4, 4.0 * (64 * 4096 + 64), 0,
                 [=](int v, const Tensor& y) { k.row_sum(v, y.desc(), r_dev.desc()); }});

  const Tensor m = input({512, 512}, 23), m_dev = transpose(m.to(dev), 0, 1);
  all.push_back(
      {"transpose", "contiguous() of a transposed 512x512 float matrix", 1, cuda_sim::kTransposeVersions,
       [](int v) { return v < cuda_sim::kTransposeVersions ? "transpose_v" + std::to_string(v) : "transpose_kernel"; },
       contiguous(transpose(m, 0, 1)), 0, 8.0 * 512 * 512, 0,
       [=](int v, const Tensor& y) { k.transpose(v, y.desc(), m_dev.desc()); }});

  // GEMM: float32 operands run v1-v3, bfloat16 operands (float32 products, as autocast's) v3 to v6.
  const std::int64_t n = 128;
  const Tensor a = input({n, n}, 24), b = input({n, n}, 25);
  for (const DType dt : {DType::float32, DType::bfloat16}) {
    const Tensor a_in = a.to(dt), b_in = b.to(dt), a_dev = a_in.to(dev), b_dev = b_in.to(dev);
    const bool bf16 = dt == DType::bfloat16;
    all.push_back({bf16 ? "gemm_bf16" : "gemm",
                   std::string("c = a b, 128x128x128, ") + (bf16 ? "bfloat16" : "float32") + " operands, a float32 c",
                   bf16 ? 3 : 1, bf16 ? cuda_sim::kGemmVersions : 3, numbered("gemm_v"),
                   matmul(a_in.to(DType::float32), b_in.to(DType::float32)), 1e-5 * std::sqrt(double(n)),
                   (bf16 ? 8.0 : 12.0) * double(n * n), 2.0 * double(n * n * n),
                   [=](int v, const Tensor& c) { k.gemm(v, c.desc(), a_dev.desc(), b_dev.desc(), 1.0, 0.0); }});
  }
  return all;
}

inline const Problem& problem(const std::vector<Problem>& all, const std::string& family) {
  for (const Problem& p : all)
    if (p.family == family) return p;
  throw ValueError("no kernel ladder problem named '" + family + "'");
}

}  // namespace stepformer::ladders
