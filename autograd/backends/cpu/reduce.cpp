// Reductions. Float sums accumulate in double, int64 sums in int64. One summation order, whatever the path
// and the thread count, so all paths below give bit-identical results (tests/autograd/test_values.cpp):
// an output element's terms, in the input's index order, are cut into groups of kGroup and the groups into
// blocks of kBlock terms; a group's terms are added in order, a block's groups in order, the blocks in
// order. Groups are independent of each other, so a dense run's adds overlap (the processor need not wait
// for each add before the next) and rows of groups vectorise; blocks let threads share one long sum. max is
// exact in any order and ignores both.
//  - a dense input reduced to one number (a loss, a gradient's squared norm): threads take blocks;
//  - a dense input reduced over one run of adjacent dims ([A, R, K] -> [A, K]: over its leading dims when
//    A = 1, a bias gradient; over the group of grouped-query attention's repeated heads): for each of the A
//    blocks, rows are added to a row of accumulators, unit stride, threads splitting the blocks and columns;
//  - a dense input reduced over its trailing dims ([K, R] -> [K], a per-row sum): one run per output;
//  - anything else: each output element walks the reduced sub-space of the input by its strides.
#include <algorithm>
#include <limits>
#include <utility>
#include <vector>

#include "cpu_backend.h"
#include "strided.h"

namespace stepformer::cpu {

namespace {

constexpr std::int64_t kGroup = 8;
constexpr std::int64_t kBlock = 4096;  // a multiple of kGroup
static_assert(kBlock % kGroup == 0);

// The sum of x[0, n), n <= kBlock: one block in the order above.
template <class Acc, class T>
Acc grouped_sum(const T* x, std::int64_t n) {
  Acc total = 0;
  for (std::int64_t j = 0; j < n; j += kGroup) {
    Acc group = 0;
    for (std::int64_t k = j; k < std::min(n, j + kGroup); ++k) group += static_cast<Acc>(x[k]);
    total += group;
  }
  return total;
}

// The sum of a dense run of n terms, one thread.
template <class Acc, class T>
Acc run_sum(const T* x, std::int64_t n) {
  Acc total = 0;
  for (std::int64_t at = 0; at < n; at += kBlock) total += grouped_sum<Acc>(x + at, std::min(kBlock, n - at));
  return total;
}

// The same sum, threads taking blocks; the blocks' values are added in order afterwards.
template <class Acc, class T>
Acc parallel_run_sum(const T* x, std::int64_t n) {
  const std::int64_t blocks = (n + kBlock - 1) / kBlock;
  std::vector<Acc> value(static_cast<std::size_t>(blocks));
#pragma omp parallel for schedule(static) if (n >= kParallelGrain)
  for (std::int64_t b = 0; b < blocks; ++b)
    value[static_cast<std::size_t>(b)] = grouped_sum<Acc>(x + b * kBlock, std::min(kBlock, n - b * kBlock));
  Acc total = 0;
  for (const Acc v : value) total += v;
  return total;
}

// max of a dense run, NaN winning as torch.amax.
template <class Acc, class T>
Acc run_max(const T* x, std::int64_t n, bool& nan) {
  Acc m = static_cast<Acc>(std::numeric_limits<T>::lowest());
  for (std::int64_t j = 0; j < n; ++j) {
    nan |= x[j] != x[j];
    m = std::max(m, static_cast<Acc>(x[j]));
  }
  return m;
}

}  // namespace

void CpuBackend::reduce(ReduceOp op, const TensorDesc& out, const TensorDesc& in) {
  // Split the dims into kept (out.shape == in.shape) and reduced (out.shape == 1 < in.shape).
  std::vector<int> kept, reduced;
  for (int d = 0; d < in.ndim; ++d) (out.shape[d] == 1 && in.shape[d] != 1 ? reduced : kept).push_back(d);
  std::int64_t count = 1;
  for (int d : reduced) count *= in.shape[d];
  const std::int64_t n_out = out.numel();

  // Dense input and output?
  bool dense = true;
  for (std::int64_t d = in.ndim - 1, expect = 1; d >= 0; --d) {
    if (in.shape[d] != 1 && in.strides[d] != expect) dense = false;
    expect *= in.shape[d];
  }
  bool out_dense = true;
  for (std::int64_t d = out.ndim - 1, expect = 1; d >= 0; --d) {
    if (out.shape[d] != 1 && out.strides[d] != expect) out_dense = false;
    expect *= out.shape[d];
  }
  // Are the reduced dims one run between kept ones (ignoring size-1 dims): [outer, count, inner]? inner = 1: they
  // are the trailing dims; outer = 1: the leading ones.
  std::int64_t outer = 1, inner = 1;
  bool one_run = !reduced.empty();
  for (int d : kept) {
    if (!one_run || in.shape[d] == 1) continue;
    const bool before = d < reduced.front();
    const bool after = d > reduced.back();
    one_run = before || after;
    (before ? outer : inner) *= in.shape[d];
  }

  dispatch_all(in.dtype, [&](auto t) {
    using T = decltype(t);
    if constexpr (std::is_same_v<T, bool>) {
      throw DTypeError("cpu backend: cannot reduce a bool tensor");
    } else {
      using Acc = std::conditional_t<std::is_floating_point_v<T>, double, std::int64_t>;
      const bool sum = op == ReduceOp::sum;
      const Acc lowest = static_cast<Acc>(std::numeric_limits<T>::lowest());
      auto result = [sum](Acc acc, bool nan) {
        return nan && !sum ? std::numeric_limits<T>::quiet_NaN() : static_cast<T>(acc);
      };
      const T* x = ptr<T>(in);
      T* y = ptr<T>(out);
      if (dense && n_out == 1 && count > 0) {
        bool nan = false;
        const Acc acc = sum ? parallel_run_sum<Acc>(x, count) : run_max<Acc>(x, count, nan);  // before nan is read
        *y = result(acc, nan);
        return;
      }
      if (dense && out_dense && n_out > 1 && count > 1 && one_run) {
        if (inner > 1) {  // [outer, count, inner] -> [outer, inner]
          constexpr std::int64_t kColumns = 512;
          const std::int64_t chunks = (inner + kColumns - 1) / kColumns;
#pragma omp parallel for schedule(static) if (n_out * count >= kParallelGrain)
          for (std::int64_t task = 0; task < outer * chunks; ++task) {
            const std::int64_t o = task / chunks, j0 = (task % chunks) * kColumns;
            const std::int64_t width = std::min(kColumns, inner - j0);
            const T* rows = x + o * count * inner;  // this block's [count, inner] rows
            Acc total[kColumns], block[kColumns], group[kColumns];
            bool nan[kColumns] = {};
            std::fill(total, total + width, sum ? Acc(0) : lowest);
            if (sum) {
              for (std::int64_t b = 0; b < count; b += kBlock) {
                std::fill(block, block + width, Acc(0));
                for (std::int64_t g = b; g < std::min(count, b + kBlock); g += kGroup) {
                  // A group starts from its first row rather than from 0 + it: the same bits once in the block.
                  for (std::int64_t j = 0; j < width; ++j) group[j] = static_cast<Acc>(rows[g * inner + j0 + j]);
                  for (std::int64_t i = g + 1; i < std::min(count, g + kGroup); ++i) {
                    const T* row = rows + i * inner + j0;
                    for (std::int64_t j = 0; j < width; ++j) group[j] += static_cast<Acc>(row[j]);
                  }
                  for (std::int64_t j = 0; j < width; ++j) block[j] += group[j];
                }
                for (std::int64_t j = 0; j < width; ++j) total[j] += block[j];
              }
            } else {
              for (std::int64_t i = 0; i < count; ++i) {
                const T* row = rows + i * inner + j0;
                for (std::int64_t j = 0; j < width; ++j) {
                  nan[j] |= row[j] != row[j];
                  total[j] = std::max(total[j], static_cast<Acc>(row[j]));
                }
              }
            }
            for (std::int64_t j = 0; j < width; ++j) y[o * inner + j0 + j] = result(total[j], nan[j]);
          }
        } else {  // [n_out, count] -> [n_out]
#pragma omp parallel for schedule(static) if (n_out * count >= kParallelGrain)
          for (std::int64_t o = 0; o < n_out; ++o) {
            bool nan = false;
            const Acc acc = sum ? run_sum<Acc>(x + o * count, count) : run_max<Acc>(x + o * count, count, nan);
            y[o] = result(acc, nan);
          }
        }
        return;
      }
#pragma omp parallel for schedule(static) if (n_out * count >= kParallelGrain)
      for (std::int64_t o = 0; o < n_out; ++o) {
        std::int64_t in_base = 0, out_off = 0, r = o;
        for (auto it = kept.rbegin(); it != kept.rend(); ++it) {
          const std::int64_t i = r % in.shape[*it];
          r /= in.shape[*it];
          in_base += i * in.strides[*it];
          out_off += i * out.strides[*it];
        }
        Acc total = sum ? Acc(0) : lowest, block = 0, group = 0;
        bool nan = false;
        for (std::int64_t j = 0; j < count; ++j) {
          std::int64_t off = in_base, q = j;
          for (auto it = reduced.rbegin(); it != reduced.rend(); ++it) {
            off += (q % in.shape[*it]) * in.strides[*it];
            q /= in.shape[*it];
          }
          const T v = x[off];
          if (sum) {
            group += static_cast<Acc>(v);
            const bool last = j + 1 == count;
            if ((j + 1) % kGroup == 0 || last) block += std::exchange(group, Acc(0));
            if ((j + 1) % kBlock == 0 || last) total += std::exchange(block, Acc(0));
          } else {
            nan |= v != v;  // max propagates NaN, as torch.amax
            total = std::max(total, static_cast<Acc>(v));
          }
        }
        ptr<T>(out)[out_off] = result(total, nan);
      }
    }
  });
}

}  // namespace stepformer::cpu
