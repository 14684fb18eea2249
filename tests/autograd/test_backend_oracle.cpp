// Every kernel of the Backend interface against the reference backend (autograd/backends/reference), the
// oracle: one table of cases, each naming the kernel it holds, run once on the reference device and once
// on the device under test (the CPU here; cuda-sim in both thread start orders when CTest runs this
// program with STEPFORMER_TEST_DEVICE). Operands have odd sizes (1, 7, 33, 65, 257), broadcast (stride 0)
// and transposed or sliced (strided) views. Outputs start filled with a sentinel and are compared whole,
// so a kernel that writes outside its view, or leaves part of it unwritten, fails too.
//
// The table must cover the interface: the last test reads backend.h and fails for any virtual kernel
// without a case, so a new kernel cannot arrive untested.
//
// Tolerances: float64 1e-12 (only the order of additions differs); float32 2e-5 relative + absolute
// (float accumulation and vectorised exp), GEMM 1e-5 sqrt(K); a bfloat16 product 2^-7 (one unit of its last
// bit); conversions, fills, dropout masks and integer results exactly. Uniform and normal fills within rounding:
// nvcc contracts a + (b - a) * u into one FMA, which rounds once where the reference rounds twice (1 ulp in float64).
#include <fmt/format.h>
#include <catch2/generators/catch_generators.hpp>
#include <fstream>
#include <functional>
#include <regex>
#include <set>
#include <sstream>

#include "../helpers.h"

using namespace stepformer;
using stepformer::test::close;

namespace {

TokenDraw sampling_draw_at(double u) {  // a draw at a u the host chose
  TokenDraw d;
  d.u = u;
  return d;
}

constexpr Device kReference{DeviceType::reference, 0};
const std::int64_t kSizes[] = {1, 7, 33, 65, 257};

// The device the reference is compared with: the CPU, or STEPFORMER_TEST_DEVICE's.
Device device_under_test() { return default_device(); }

// An input on `dev`: the same values on every device (drawn on the CPU, then copied).
Tensor input(Device dev, const Shape& shape, std::uint64_t seed, DType dtype, double low = -2, double high = 2) {
  Generator gen(seed);
  return uniform(shape, low, high, gen, {dtype, kCPU, false}).to(dev);
}
// An output buffer on `dev` filled with a sentinel that no kernel computes by chance (a whole number in int64).
Tensor sentinel(Device dev, const Shape& shape, DType dtype) {
  return full(shape, dtype == DType::int64 ? 1234.0 : 1234.5, {dtype, dev, false});
}
// The first bad index a kernel found, as {position, value} (-1 and 0: none), however its backend reports it: `run`
// calls the kernel with a DescribeBadIndex and returns what the kernel returned (a position, or -1), and a backend
// that reports later (a GPU) does so at its next copy to the host, here the copy of `written`.
template <class Run>
std::vector<double> first_bad_index(const Tensor& indices, const Tensor& written, const Run& run) {
  std::vector<double> found{-1, 0};
  const DescribeBadIndex describe = [&](std::int64_t position, std::int64_t value) {
    found = {static_cast<double>(position), static_cast<double>(value)};
    return std::string("bad index");
  };
  const std::int64_t returned = run(describe);
  if (returned >= 0) return {static_cast<double>(returned), indices.cpu().to_vector<double>()[returned]};
  try {
    (void)written.cpu();
  } catch (const IndexError&) {  // `found` holds what the backend described
  }
  return found;
}

Tensor ids(Device dev, const std::vector<std::int64_t>& v) {
  return from_vector(v, {static_cast<std::int64_t>(v.size())}, {DType::int64, kCPU}).to(dev);
}
// A view's descriptor with broadcast (stride 0) dims to `shape`, as the ops make them.
TensorDesc broadcast(const Tensor& t, const Shape& shape) {
  TensorDesc d = t.desc(), out = d;
  out.ndim = static_cast<int>(shape.size());
  const int shift = out.ndim - d.ndim;
  for (int i = 0; i < out.ndim; ++i) {
    out.shape[i] = shape[static_cast<std::size_t>(i)];
    out.strides[i] = (i - shift < 0 || d.shape[i - shift] == 1) ? 0 : d.strides[i - shift];
  }
  return out;
}
const TensorDesc kNone{};

// A case runs one kernel on one device and returns the tensors to compare (whole buffers, not views).
using Run = std::function<std::vector<Tensor>(Device dev, Backend& b)>;
struct Case {
  std::string kernel;  // the Backend method it holds (as named in backend.h)
  std::string what;
  DType dtype;
  Run run;
  double tol_scale = 1;  // times the dtype's tolerance (longer sums)
  bool exact = false;
  // Exact where the device runs host code (the CPU, cuda-sim), within 1e-12 on a GPU: the kernel calls exp, and
  // CUDA's differs from the C library's in the last bit (CUDA Math API: exp within 1 ulp).
  bool libm_on_gpu = false;
};

std::vector<Case> cases() {
  std::vector<Case> all;
  auto add = [&](std::string kernel, std::string what, DType dt, Run run, double scale = 1, bool exact = false) {
    all.push_back({std::move(kernel), std::move(what), dt, std::move(run), scale, exact});
  };
  for (const DType dt : {DType::float32, DType::float64}) {
    const std::string tag = std::string(" ") + std::string(dtype_name(dt));
    for (const std::int64_t n : kSizes) {
      const std::string size = " n=" + std::to_string(n) + tag;
      // --- memory: a round trip through the device, and the bytes-in-use count ------------------------
      add("copy_from_host", "host -> device -> host" + size, dt, [=](Device dev, Backend&) {
        std::vector<double> host(static_cast<std::size_t>(n));
        for (std::size_t i = 0; i < host.size(); ++i) host[i] = 0.25 * static_cast<double>(i) - 3;
        Tensor t = from_vector(host, {n}, {DType::float64, dev});
        return std::vector<Tensor>{t};
      });
      add(
          "allocate", "bytes_in_use grows and shrinks by the allocation" + size, dt,
          [=](Device, Backend& b) {
            const std::size_t before = b.bytes_in_use(), bytes = static_cast<std::size_t>(n) * 8;
            void* p = b.allocate(bytes);
            const bool grew = b.bytes_in_use() >= before + bytes;  // by the size or more (a device may round up)
            b.deallocate(p, bytes);
            const bool back = b.bytes_in_use() == before;
            return std::vector<Tensor>{
                from_vector(std::vector<double>{double(grew), double(back)}, {2}, {DType::float64})};
          },
          1, true);
      // --- elementwise ------------------------------------------------------------------------------
      add(
          "fill", "a transposed view" + size, dt,
          [=](Device dev, Backend& b) {
            Tensor out = sentinel(dev, {3, n}, dt);
            b.fill(transpose(narrow(out, 0, 1, 2), 0, 1).desc(), -0.75);
            return std::vector<Tensor>{out};
          },
          1, true);
#define STEPFORMER_UNARY_CASE(op)                                                                            \
  add("unary", "unary " #op " on a transposed view" + size, dt, [=](Device dev, Backend& b) {                \
    const bool positive = UnaryOp::op == UnaryOp::log || UnaryOp::op == UnaryOp::sqrt ||                     \
                          UnaryOp::op == UnaryOp::rsqrt || UnaryOp::op == UnaryOp::pow;                      \
    const bool is_bool = UnaryOp::op == UnaryOp::logical_not;                                                \
    Tensor x = input(dev, {3, n}, 11, dt, positive ? 0.1 : -3, 3);                                           \
    if (is_bool) x = gt(x, scalar(0.0, {dt, dev}));                                                          \
    const DType out_dt =                                                                                     \
        UnaryOp::op == UnaryOp::copy ? (dt == DType::float32 ? DType::float64 : DType::float32) : x.dtype(); \
    Tensor out = sentinel(dev, {n, 3}, out_dt);                                                              \
    b.unary(UnaryOp::op, out.desc(), transpose(x, 0, 1).desc(), 1.5);                                        \
    return std::vector<Tensor>{out};                                                                         \
  });
      STEPFORMER_UNARY_OPS(STEPFORMER_UNARY_CASE)
#undef STEPFORMER_UNARY_CASE
      // Unit-stride rows, which the CPU's float32 SiLU runs through its vectorised exp (the cases above read a
      // transposed view), forward and backward; the input wide enough to reach exp's far tails.
      add("unary", "unary silu on unit-stride rows, x in [-20, 20]" + size, dt, [=](Device dev, Backend& b) {
        Tensor out = sentinel(dev, {3, n}, dt);
        b.unary(UnaryOp::silu, out.desc(), input(dev, {3, n}, 12, dt, -20, 20).desc(), 0);
        return std::vector<Tensor>{out};
      });
      add("binary", "binary silu_backward on unit-stride rows, x in [-20, 20]" + size, dt, [=](Device dev, Backend& b) {
        Tensor out = sentinel(dev, {3, n}, dt);
        b.binary(BinaryOp::silu_backward, out.desc(), input(dev, {3, n}, 13, dt).desc(),
                 input(dev, {3, n}, 14, dt, -20, 20).desc());
        return std::vector<Tensor>{out};
      });
      add("binary", "binary silu_mul on unit-stride rows, x in [-20, 20]" + size, dt, [=](Device dev, Backend& b) {
        Tensor out = sentinel(dev, {3, n}, dt);
        b.binary(BinaryOp::silu_mul, out.desc(), input(dev, {3, n}, 15, dt, -20, 20).desc(),
                 input(dev, {3, n}, 16, dt).desc());
        return std::vector<Tensor>{out};
      });
      add(
          "unary", "unary neg on int64" + size, dt,
          [=](Device dev, Backend& b) {
            std::vector<std::int64_t> v;
            for (std::int64_t i = 0; i < n; ++i) v.push_back(i * 7 - 20);
            Tensor out = full({n}, 99, {DType::int64, dev});
            b.unary(UnaryOp::neg, out.desc(), ids(dev, v).desc(), 0);
            return std::vector<Tensor>{out};
          },
          1, true);
#define STEPFORMER_BINARY_CASE(op)                                                                       \
  add("binary", "binary " #op ": [n, 3] with a broadcast row and a transposed operand" + size, dt,       \
      [=](Device dev, Backend& b) {                                                                      \
        const Tensor x = input(dev, {3, n}, 21, dt), y = input(dev, {3}, 22, dt, 0.5, 2);                \
        const DType out_dt = BinaryOp::op == BinaryOp::eq || BinaryOp::op == BinaryOp::ne ||             \
                                     BinaryOp::op == BinaryOp::lt || BinaryOp::op == BinaryOp::gt        \
                                 ? DType::boolean                                                        \
                                 : dt;                                                                   \
        Tensor out = full({n, 3}, 0, {out_dt, dev});                                                     \
        b.binary(BinaryOp::op, out.desc(), transpose(x, 0, 1).desc(), broadcast(y, {n, 3}));             \
        Tensor same = full({n, 3}, 0, {out_dt, dev}); /* equal operands: eq is all true, lt all false */ \
        b.binary(BinaryOp::op, same.desc(), transpose(x, 0, 1).desc(), transpose(x, 0, 1).desc());       \
        return std::vector<Tensor>{out, same};                                                           \
      });
      STEPFORMER_BINARY_OPS(STEPFORMER_BINARY_CASE)
#undef STEPFORMER_BINARY_CASE
      // Unit-stride rows, which the CPU's float32 add, sub and mul run in SIMD clones (the cases above read a
      // transposed view and a broadcast row).
      add("binary", "binary add, sub, mul on unit-stride rows" + size, dt, [=](Device dev, Backend& b) {
        const Tensor x = input(dev, {3, n}, 23, dt), y = input(dev, {3, n}, 24, dt);
        std::vector<Tensor> outs;
        for (BinaryOp op : {BinaryOp::add, BinaryOp::sub, BinaryOp::mul}) {
          outs.push_back(sentinel(dev, {3, n}, dt));
          b.binary(op, outs.back().desc(), x.desc(), y.desc());
        }
        return outs;
      });
      add(
          "binary", "int64 add, sub, mul" + size, dt,
          [=](Device dev, Backend& b) {
            std::vector<std::int64_t> v;
            for (std::int64_t i = 0; i < n; ++i) v.push_back(i * 3 - 50);
            const Tensor x = ids(dev, v);
            std::vector<Tensor> outs;
            for (BinaryOp op : {BinaryOp::add, BinaryOp::sub, BinaryOp::mul}) {
              outs.push_back(full({n}, 0, {DType::int64, dev}));
              b.binary(op, outs.back().desc(), x.desc(), broadcast(ids(dev, {5}), {n}));
            }
            return outs;
          },
          1, true);
      add(
          "where", "broadcast condition, strided operands" + size, dt,
          [=](Device dev, Backend& b) {
            const Tensor c = gt(input(dev, {n, 1}, 31, dt), scalar(0.0, {dt, dev}));
            const Tensor x = input(dev, {3, n}, 32, dt), y = input(dev, {n, 6}, 33, dt);
            Tensor out = sentinel(dev, {n, 3}, dt);
            b.where(out.desc(), broadcast(c, {n, 3}), transpose(x, 0, 1).desc(), slice(y, 1, 0, 6, 2).desc());
            return std::vector<Tensor>{out};
          },
          1, true);
      add(
          "where", "unit-stride rows, the second operand a row or one value" + size, dt,
          [=](Device dev, Backend& b) {
            const Tensor c = gt(input(dev, {3, n}, 34, dt), scalar(0.0, {dt, dev}));
            const Tensor x = input(dev, {3, n}, 35, dt), y = input(dev, {3, n}, 36, dt);
            Tensor rows = sentinel(dev, {3, n}, dt), value = sentinel(dev, {3, n}, dt);
            b.where(rows.desc(), c.desc(), x.desc(), y.desc());
            b.where(value.desc(), c.desc(), x.desc(), broadcast(scalar(-2.5, {dt, dev}), {3, n}));
            return std::vector<Tensor>{rows, value};
          },
          1, true);
      add("accumulate", "into a transposed view, alpha 0.5" + size, dt, [=](Device dev, Backend& b) {
        Tensor out = input(dev, {3, n}, 41, dt);
        b.accumulate(transpose(out, 0, 1).desc(), input(dev, {n, 3}, 42, dt).desc(), 0.5);
        return std::vector<Tensor>{out};
      });
      // --- reductions -------------------------------------------------------------------------------
      for (const ReduceOp op : {ReduceOp::sum, ReduceOp::max})
        add(
            "reduce", std::string(op == ReduceOp::sum ? "sum" : "max") + " over each dim set of [n, 5, 3]" + size, dt,
            [=](Device dev, Backend& b) {
              const Tensor x = input(dev, {n, 5, 3}, 51, dt);
              std::vector<Tensor> outs;
              for (const Shape& kept :
                   {Shape{1, 5, 3}, Shape{n, 1, 1}, Shape{1, 5, 1}, Shape{1, 1, 1}, Shape{n, 5, 1}}) {
                outs.push_back(sentinel(dev, kept, dt));
                b.reduce(op, outs.back().desc(), x.desc());
              }
              Tensor t = sentinel(dev, {1, n}, dt);  // over a transposed input
              b.reduce(op, t.desc(), transpose(input(dev, {n, 7}, 52, dt), 0, 1).desc());
              outs.push_back(t);
              return outs;
            },
            10);
      // --- rows ------------------------------------------------------------------------------------
      for (const bool log : {false, true}) {
        add("softmax_forward", std::string(log ? "log_softmax" : "softmax") + " of 5 rows" + size, dt,
            [=](Device dev, Backend& b) {
              Tensor out = sentinel(dev, {5, n}, dt);
              b.softmax_forward(out.desc(), input(dev, {5, n}, 61, dt, -6, 6).desc(), log);
              return std::vector<Tensor>{out};
            });
        add("softmax_backward", std::string(log ? "log_softmax" : "softmax") + " of 5 rows" + size, dt,
            [=](Device dev, Backend& b) {
              Tensor y = sentinel(dev, {5, n}, dt), dx = sentinel(dev, {5, n}, dt);
              b.softmax_forward(y.desc(), input(dev, {5, n}, 62, dt, -6, 6).desc(), log);
              const Tensor y_ref = y.to(kReference).to(dev);  // the same y on both devices
              b.softmax_backward(dx.desc(), input(dev, {5, n}, 63, dt).desc(), y_ref.desc(), log);
              return std::vector<Tensor>{dx};
            });
      }
      for (const bool affine : {true, false}) {
        const std::string which = affine ? " with gamma and beta" : " without gamma and beta";
        add(
            "layer_norm_forward", "5 rows" + which + size, dt,
            [=](Device dev, Backend& b) {
              Tensor y = sentinel(dev, {5, n}, dt), mean = sentinel(dev, {5}, dt), rstd = sentinel(dev, {5}, dt);
              const Tensor g = input(dev, {n}, 71, dt), be = input(dev, {n}, 72, dt);
              b.layer_norm_forward(y.desc(), mean.desc(), rstd.desc(), input(dev, {5, n}, 73, dt, -3, 5).desc(),
                                   affine ? g.desc() : kNone, affine ? be.desc() : kNone, 1e-5);
              return std::vector<Tensor>{y, mean, rstd};
            },
            5);
        add(
            "layer_norm_backward", "5 rows" + which + size, dt,
            [=](Device dev, Backend& b) {
              const Tensor x = input(dev, {5, n}, 74, dt, -3, 5), g = input(dev, {n}, 75, dt);
              // The statistics from the reference, so that both devices start from the same mean and rstd.
              Tensor y = sentinel(kReference, {5, n}, dt), mean = sentinel(kReference, {5}, dt),
                     rstd = sentinel(kReference, {5}, dt);
              backend_for(kReference)
                  .layer_norm_forward(y.desc(), mean.desc(), rstd.desc(), x.to(kReference).desc(), kNone, kNone, 1e-5);
              Tensor dx = sentinel(dev, {5, n}, dt), dg = sentinel(dev, {n}, dt), db = sentinel(dev, {n}, dt);
              b.layer_norm_backward(dx.desc(), affine ? dg.desc() : kNone, affine ? db.desc() : kNone,
                                    input(dev, {5, n}, 76, dt).desc(), x.desc(), mean.to(dev).desc(),
                                    rstd.to(dev).desc(), affine ? g.desc() : kNone);
              return std::vector<Tensor>{dx, dg, db};
            },
            5);
      }
      for (const bool gain : {true, false}) {
        const std::string which = gain ? " with gamma" : " without gamma";
        add(
            "rms_norm_forward", "5 rows" + which + size, dt,
            [=](Device dev, Backend& b) {
              Tensor y = sentinel(dev, {5, n}, dt), rstd = sentinel(dev, {5}, dt);
              const Tensor g = input(dev, {n}, 77, dt);
              b.rms_norm_forward(y.desc(), rstd.desc(), kNone, input(dev, {5, n}, 78, dt, -3, 5).desc(), kNone,
                                 gain ? g.desc() : kNone, 1e-5);
              return std::vector<Tensor>{y, rstd};
            },
            5);
        // With a residual: the rows of x + residual are normalised and the sum is an output too.
        add(
            "rms_norm_forward", "5 rows plus a residual" + which + size, dt,
            [=](Device dev, Backend& b) {
              Tensor y = sentinel(dev, {5, n}, dt), rstd = sentinel(dev, {5}, dt), sum = sentinel(dev, {5, n}, dt);
              const Tensor g = input(dev, {n}, 77, dt);
              b.rms_norm_forward(y.desc(), rstd.desc(), sum.desc(), input(dev, {5, n}, 78, dt, -3, 5).desc(),
                                 input(dev, {5, n}, 82, dt, -2, 2).desc(), gain ? g.desc() : kNone, 1e-5);
              return std::vector<Tensor>{y, rstd, sum};
            },
            5);
        add(
            "rms_norm_backward", "5 rows" + which + size, dt,
            [=](Device dev, Backend& b) {
              const Tensor x = input(dev, {5, n}, 79, dt, -3, 5), g = input(dev, {n}, 80, dt);
              // rstd from the reference, so that both devices start from the same statistic.
              Tensor y = sentinel(kReference, {5, n}, dt), rstd = sentinel(kReference, {5}, dt);
              backend_for(kReference)
                  .rms_norm_forward(y.desc(), rstd.desc(), kNone, x.to(kReference).desc(), kNone, kNone, 1e-5);
              Tensor dx = sentinel(dev, {5, n}, dt), dg = sentinel(dev, {n}, dt);
              b.rms_norm_backward(dx.desc(), gain ? dg.desc() : kNone, input(dev, {5, n}, 81, dt).desc(), x.desc(),
                                  rstd.to(dev).desc(), gain ? g.desc() : kNone);
              return std::vector<Tensor>{dx, dg};
            },
            5);
      }
      // --- rotary position embedding ---------------------------------------------------------------------
      for (const RopePairing pairing : {RopePairing::half, RopePairing::adjacent})
        for (const bool inverse : {false, true}) {
          const std::string which = std::string(pairing == RopePairing::half ? " half" : " adjacent") +
                                    (inverse ? " inverse" : "") + ", heads a permuted view, D=2n";
          add("rotate_pairs", "[2, 4, 3, D]" + which + size, dt, [=](Device dev, Backend& b) {
            // x [2, 3, 4, D] read as [2, 4, 3, D] through its strides: rows are not where a contiguous walk
            // would find them, and position t is dim 2 of the view.
            const Tensor x = transpose(input(dev, {2, 3, 4, 2 * n}, 82, dt), 1, 2);
            Tensor y = sentinel(dev, {2, 4, 3, 2 * n}, dt);
            b.rotate_pairs(y.desc(), x.desc(), input(dev, {3, n}, 83, dt, -1, 1).desc(),
                           input(dev, {3, n}, 84, dt, -1, 1).desc(), pairing, inverse);
            return std::vector<Tensor>{y};
          });
        }
      // --- indexing --------------------------------------------------------------------------------
      add(
          "gather_rows", "rows of a [n, 7] table, repeated ids" + size, dt,
          [=](Device dev, Backend& b) {
            std::vector<std::int64_t> v;
            for (std::int64_t i = 0; i < 9; ++i) v.push_back((i * 5 + 2) % n);
            Tensor out = sentinel(dev, {9, 7}, dt);
            const std::vector<double> none = first_bad_index(ids(dev, v), out, [&](const DescribeBadIndex& describe) {
              return b.gather_rows(out.desc(), input(dev, {n, 7}, 81, dt).desc(), ids(dev, v).desc(), describe);
            });
            // An id past the table at position 1: its position and value, at once or at the next copy (a GPU's).
            Tensor out_bad = sentinel(dev, {3, 7}, dt);
            const Tensor bad_ids = ids(dev, {0, n, n + 4});
            const std::vector<double> bad = first_bad_index(bad_ids, out_bad, [&](const DescribeBadIndex& describe) {
              return b.gather_rows(out_bad.desc(), input(dev, {n, 7}, 81, dt).desc(), bad_ids.desc(), describe);
            });
            return std::vector<Tensor>{out, from_vector(none, {2}, {DType::float64}),
                                       from_vector(bad, {2}, {DType::float64})};
          },
          1, true);
      add("scatter_add_rows", "repeated ids accumulate, the skip id is skipped" + size, dt,
          [=](Device dev, Backend& b) {
            std::vector<std::int64_t> v;
            for (std::int64_t i = 0; i < 9; ++i) v.push_back((i * 3) % n);
            Tensor table = input(dev, {n, 7}, 82, dt);
            b.scatter_add_rows(table.desc(), input(dev, {9, 7}, 83, dt).desc(), ids(dev, v).desc(), v[1]);
            return std::vector<Tensor>{table};
          });
      // A repeated id keeps its last row on every backend (a GPU's threads must not race for it), and rows of the
      // leading index p land in their own [n, 7] block.
      add(
          "write_rows", "9 rows into a [2, n, 7] table at repeated ids, the last one written" + size, dt,
          [=](Device dev, Backend& b) {
            std::vector<std::int64_t> v;
            for (std::int64_t i = 0; i < 9; ++i) v.push_back((i * 4 + 1) % n);
            Tensor table = input(dev, {2, n, 7}, 86, dt);
            const std::vector<double> none = first_bad_index(ids(dev, v), table, [&](const DescribeBadIndex& describe) {
              return b.write_rows(table.desc(), input(dev, {2, 9, 7}, 87, dt).desc(), ids(dev, v).desc(), describe);
            });
            // An id past the table at position 1, reported (its rows not written: the table is not compared).
            Tensor table_bad = input(dev, {1, n, 7}, 88, dt);
            const Tensor bad_ids = ids(dev, {0, n, n + 4});
            const std::vector<double> bad = first_bad_index(bad_ids, table_bad, [&](const DescribeBadIndex& describe) {
              return b.write_rows(table_bad.desc(), input(dev, {1, 3, 7}, 89, dt).desc(), bad_ids.desc(), describe);
            });
            return std::vector<Tensor>{table, from_vector(none, {2}, {DType::float64}),
                                       from_vector(bad, {2}, {DType::float64})};
          },
          1, true);
      // Every backend adds a row's gradients in the order of their positions, so the sums agree to the bit
      // on every device and on every run (a resumed training run must equal an uninterrupted one; atomicAdd
      // on a GPU adds in whatever order the threads arrive).
      add(
          "scatter_add_rows", "200 ids on 3 rows, added in position order, bit for bit" + size, dt,
          [=](Device dev, Backend& b) {
            std::vector<std::int64_t> v;
            for (std::int64_t i = 0; i < 200; ++i) v.push_back((i * 7 + i / 5) % std::min<std::int64_t>(n, 3));
            Tensor table = input(dev, {n, 33}, 84, dt);
            b.scatter_add_rows(table.desc(), input(dev, {200, 33}, 85, dt).desc(), ids(dev, v).desc(), -1);
            return std::vector<Tensor>{table};
          },
          1, true);
      // --- cross-entropy ---------------------------------------------------------------------------
      for (const double s : {0.0, 0.1}) {
        const std::string sm = " smoothing " + std::to_string(s).substr(0, 3);
        std::vector<std::int64_t> t;
        for (std::int64_t i = 0; i < 6; ++i) t.push_back(i == 2 ? -100 : (i * 7 + 1) % n);
        add("cross_entropy_forward", "6 rows of n classes, one ignored (its lse written too)," + sm + size, dt,
            [=](Device dev, Backend& b) {
              Tensor loss = sentinel(dev, {6}, dt), lse = sentinel(dev, {6}, dt);
              const std::vector<double> none = first_bad_index(ids(dev, t), loss, [&](const DescribeBadIndex& d) {
                return b.cross_entropy_forward(loss.desc(), lse.desc(), input(dev, {6, n}, 91, dt, -5, 5).desc(),
                                               ids(dev, t).desc(), -100, s, d);
              });
              Tensor loss2 = sentinel(dev, {3}, dt), lse2 = sentinel(dev, {3}, dt);
              const Tensor bad_targets = ids(dev, {0, n, -1});
              const std::vector<double> bad = first_bad_index(bad_targets, loss2, [&](const DescribeBadIndex& d) {
                return b.cross_entropy_forward(loss2.desc(), lse2.desc(), input(dev, {3, n}, 92, dt).desc(),
                                               bad_targets.desc(), -100, s, d);
              });
              return std::vector<Tensor>{loss, lse, from_vector(none, {2}, {DType::float64}),
                                         from_vector(bad, {2}, {DType::float64})};
            });
        add("cross_entropy_backward", "6 rows, broadcast and per-row upstream gradients," + sm + size, dt,
            [=](Device dev, Backend& b) {
              const Tensor x = input(dev, {6, n}, 93, dt, -5, 5);
              Tensor loss = sentinel(dev, {6}, dt), lse = sentinel(dev, {6}, dt);
              b.cross_entropy_forward(loss.desc(), lse.desc(), x.desc(), ids(dev, t).desc(), -100, s, {});
              Tensor d1 = sentinel(dev, {6, n}, dt), d2 = sentinel(dev, {6, n}, dt);
              b.cross_entropy_backward(d1.desc(), x.desc(), lse.desc(), ids(dev, t).desc(),
                                       broadcast(input(dev, {1}, 94, dt), {6}), -100, s);
              b.cross_entropy_backward(d2.desc(), x.desc(), lse.desc(), ids(dev, t).desc(),
                                       slice(input(dev, {12}, 95, dt), 0, 0, 12, 2).desc(), -100, s);
              return std::vector<Tensor>{d1, d2};
            });
      }
      // --- attention: Tk = n keys, a mask broadcast over heads and queries; then also causal with dropout ---
      for (const bool causal : {false, true}) {
        const std::int64_t Tq = causal ? n : 5;
        const std::string which =
            std::string(" mask [1, 1, 1, Tk]") + (causal ? ", causal, dropout 0.3, Tq = Tk" : ", Tq 5");
        const auto operands = [=](Device dev) {
          std::vector<double> pad(static_cast<std::size_t>(n));
          for (std::int64_t j = 1; j < n; j += 3) pad[static_cast<std::size_t>(j)] = 1;  // key 0 always seen
          return std::vector<Tensor>{input(dev, {1, 2, Tq, 8}, 96, dt), input(dev, {1, 2, n, 8}, 97, dt),
                                     input(dev, {1, 2, n, 6}, 98, dt),
                                     from_vector(pad, {1, 1, 1, n}, {DType::boolean, dev})};
        };
        const auto config = [=] {
          AttentionConfig cfg;
          cfg.scale = 0.35, cfg.causal = causal, cfg.dropout = causal ? 0.3 : 0.0, cfg.seed = 5, cfg.offset = 8;
          return cfg;
        };
        const auto mask_desc = [=](const Tensor& m) { return broadcast(m, {1, 2, Tq, n}); };
        add("attention_forward", which + size, dt, [=](Device dev, Backend& b) {
          const std::vector<Tensor> x = operands(dev);
          Tensor out = sentinel(dev, {1, 2, Tq, 6}, dt), lse = sentinel(dev, {1, 2, Tq}, dt);
          b.attention_forward(out.desc(), lse.desc(), x[0].desc(), x[1].desc(), x[2].desc(), mask_desc(x[3]), config());
          return std::vector<Tensor>{out, lse};
        });
        add(
            "attention_backward", which + size, dt,
            [=](Device dev, Backend& b) {
              const std::vector<Tensor> x = operands(dev), r = operands(kReference);
              // The forward's out and lse from the reference, so that both devices start from the same.
              Tensor out = sentinel(kReference, {1, 2, Tq, 6}, dt), lse = sentinel(kReference, {1, 2, Tq}, dt);
              backend_for(kReference)
                  .attention_forward(out.desc(), lse.desc(), r[0].desc(), r[1].desc(), r[2].desc(), mask_desc(r[3]),
                                     config());
              Tensor dq = sentinel(dev, {1, 2, Tq, 8}, dt), dk = sentinel(dev, {1, 2, n, 8}, dt),
                     dv = sentinel(dev, {1, 2, n, 6}, dt);
              b.attention_backward(dq.desc(), dk.desc(), dv.desc(), input(dev, {1, 2, Tq, 6}, 99, dt).desc(),
                                   x[0].desc(), x[1].desc(), x[2].desc(), out.to(dev).desc(), lse.to(dev).desc(),
                                   mask_desc(x[3]), config());
              return std::vector<Tensor>{dq, dk, dv};
            },
            4);
      }
      // --- random and the optimizer ------------------------------------------------------------------
      // Sampling from float32 and float64 logits: the same token and float64 distribution exactly (every backend
      // adds in the same order; on a GPU the distribution within 1e-12, Case::libm_on_gpu), at draws near 0, mid-way
      // and within rounding of 1, and at a draw whose number is read from a counter on the device; "ties" gives many
      // logits the same value, which the order breaks by id.
      const SamplingConfig rules[] = {{1.0, 0, 1.0}, {0.7, 5, 0.9}, {0.0, 0, 1.0}, {2.0, n + 3, 0.5}};
      for (const SamplingConfig& rule : rules)
        for (const bool ties : {false, true})
          add(
              "sample_token",
              "temperature " + std::to_string(rule.temperature) + ", top_k " + std::to_string(rule.top_k) + ", top_p " +
                  std::to_string(rule.top_p) + (ties ? ", tied logits" : "") + size,
              dt,
              [=](Device dev, Backend& b) {
                std::vector<double> host(static_cast<std::size_t>(n));
                for (std::size_t v = 0; v < host.size(); ++v)
                  host[v] = ties ? 0.5 * static_cast<double>((v * 7) % 5) : std::sin(3.7 * static_cast<double>(v));
                const Tensor logits = from_vector(host, {n}, {dt, dev});
                std::vector<Tensor> out;
                for (const double u : {0.0, 0.41, 1 - 1e-15}) {
                  Tensor token = full({1}, -7, {DType::int64, dev}), probs = sentinel(dev, {n}, DType::float64);
                  b.sample_token(token.desc(), probs.desc(), logits.desc(), rule, sampling_draw_at(u));
                  out.insert(out.end(), {token, probs});
                }
                // Draw 5 - 2 of the run from offset 8, its number read from the device (a recorded step's draw).
                const Tensor counter = full({1}, 5, {DType::int64, dev});
                Tensor token = full({1}, -7, {DType::int64, dev}), probs = sentinel(dev, {n}, DType::float64);
                b.sample_token(token.desc(), probs.desc(), logits.desc(), rule,
                               TokenDraw{0.0, counter.desc(), 11, 8, 2});
                out.insert(out.end(), {token, probs});
                return out;
              },
              1, true);
      for (const Distribution dist : {Distribution::uniform, Distribution::normal, Distribution::dropout})
        add(
            "random_fill",
            std::string(dist == Distribution::uniform  ? "uniform"
                        : dist == Distribution::normal ? "normal"
                                                       : "dropout") +
                ", offset 6" + size,
            dt,
            [=](Device dev, Backend& b) {
              Tensor out = sentinel(dev, {n}, dt);
              b.random_fill(out.desc(), dist, dist == Distribution::dropout ? 0.3 : -1.0, 2.0, 42, 6);
              return std::vector<Tensor>{out};
            },
            1, dist == Distribution::dropout);
      for (const bool decoupled : {false, true})
        add("adam_update", std::string(decoupled ? "AdamW" : "Adam") + " step 3, weight decay 0.1" + size, dt,
            [=](Device dev, Backend& b) {
              Tensor p = input(dev, {n}, 101, dt), g = input(dev, {n}, 102, dt),
                     m = input(dev, {n}, 103, dt, -0.1, 0.1), v = input(dev, {n}, 104, dt, 0, 0.1);
              AdamConfig cfg;
              cfg.lr = 0.01, cfg.weight_decay = 0.1, cfg.decoupled = decoupled, cfg.step = 3;
              b.adam_update(p.desc(), g.desc(), m.desc(), v.desc(), cfg);
              return std::vector<Tensor>{p, m, v};
            });
      // 20 parameters of 0 to n values: more than one launch's 16 on CUDA.
      add("adam_update_many", "AdamW step 3, 20 parameters of up to" + size, dt, [=](Device dev, Backend& b) {
        std::vector<Tensor> out, grads;  // grads: alive until the update has read them
        std::vector<AdamTensors> group;
        for (std::uint64_t i = 0; i < 20; ++i) {
          const std::int64_t k = n * static_cast<std::int64_t>(i) / 19;
          const Tensor p = input(dev, {k}, 110 + 4 * i, dt), g = input(dev, {k}, 111 + 4 * i, dt),
                       m = input(dev, {k}, 112 + 4 * i, dt, -0.1, 0.1), v = input(dev, {k}, 113 + 4 * i, dt, 0, 0.1);
          group.push_back({p.desc(), g.desc(), m.desc(), v.desc()});
          out.insert(out.end(), {p, m, v});
          grads.push_back(g);
        }
        AdamConfig cfg;
        cfg.lr = 0.01, cfg.weight_decay = 0.1, cfg.decoupled = true, cfg.step = 3;
        b.adam_update_many(group, cfg);
        return out;
      });
      // The step's lr and bias corrections read from the device (a step recorded as a graph): those of step 5 at lr
      // 0.02, where cfg says step 3 at 0.01.
      add("adam_update_many", "AdamW, step values on the device, 3 parameters of up to" + size, dt,
          [=](Device dev, Backend& b) {
            std::vector<Tensor> out, grads;
            std::vector<AdamTensors> group;
            for (std::uint64_t i = 0; i < 3; ++i) {
              const std::int64_t k = n * static_cast<std::int64_t>(i + 1) / 3;
              const Tensor p = input(dev, {k}, 210 + 4 * i, dt), g = input(dev, {k}, 211 + 4 * i, dt),
                           m = input(dev, {k}, 212 + 4 * i, dt, -0.1, 0.1),
                           v = input(dev, {k}, 213 + 4 * i, dt, 0, 0.1);
              group.push_back({p.desc(), g.desc(), m.desc(), v.desc()});
              out.insert(out.end(), {p, m, v});
              grads.push_back(g);
            }
            const Tensor values =
                from_vector(std::vector<double>{0.02, 1 - std::pow(0.9, 5.0), 1 - std::pow(0.999, 5.0)}, {3},
                            {DType::float64, dev});
            AdamConfig cfg;
            cfg.lr = 0.01, cfg.weight_decay = 0.1, cfg.decoupled = true, cfg.step = 3, cfg.step_values = values.desc();
            b.adam_update_many(group, cfg);
            return out;
          });
      // 21 tensors: one of three chunks on CUDA (9,000 values), then 0 to n values; more than one launch's 16. A
      // backend without the kernel (false) is held to the op's composite, which the reference computes.
      const auto many = [=](Device dev, std::uint64_t seed) {
        std::vector<Tensor> xs{input(dev, {9000}, seed, dt)};
        for (std::uint64_t i = 0; i < 20; ++i)
          xs.push_back(input(dev, {n * static_cast<std::int64_t>(i) / 19}, seed + 1 + i, dt, -3, 3));
        std::vector<TensorDesc> descs;
        for (const Tensor& x : xs) descs.push_back(x.desc());
        return std::pair{xs, descs};
      };
      add(
          "sum_squares_many", "21 tensors, 9000 values and up to" + size, dt,
          [=](Device dev, Backend& b) {
            const auto [xs, descs] = many(dev, 120);
            Tensor out = sentinel(dev, {21}, DType::float64);
            if (!b.sum_squares_many(out.desc(), descs)) {
              const NoGradGuard no_grad;
              copy_(out, sum_of_squares(xs));  // sum(x * x) of each
            }
            return std::vector<Tensor>{out};
          },
          10);
      add(
          "scale_many", "21 tensors, 9000 values and up to" + size + ", in place", dt,
          [=](Device dev, Backend& b) {
            auto [xs, descs] = many(dev, 130);
            const Tensor factor = input(dev, {1}, 151, dt);
            if (!b.scale_many(descs, factor.desc())) {
              const NoGradGuard no_grad;
              for (Tensor& x : xs) mul_(x, factor);
            }
            return xs;
          },
          1, true);
    }
    // --- GEMM: odd M, N, K; transposed operands; a broadcast batch; alpha and beta --------------------
    const std::int64_t shapes[][3] = {{1, 7, 33}, {7, 65, 1}, {33, 33, 257}, {65, 7, 33}, {257, 1, 7}, {33, 257, 65}};
    for (const auto& mnk : shapes)
      for (const bool ta : {false, true})
        for (const bool tb : {false, true}) {
          const std::int64_t M = mnk[0], N = mnk[1], K = mnk[2];
          add(
              "gemm",
              "M=" + std::to_string(M) + " N=" + std::to_string(N) + " K=" + std::to_string(K) + (ta ? " A^T" : "") +
                  (tb ? " B^T" : "") + ", batch 2 with A broadcast, alpha 0.5 beta 2" + tag,
              dt,
              [=](Device dev, Backend& b) {
                const Tensor a = ta ? transpose(input(dev, {K, M}, 111, dt), 0, 1) : input(dev, {M, K}, 111, dt);
                const Tensor bb = tb ? transpose(input(dev, {2, N, K}, 112, dt), 1, 2) : input(dev, {2, K, N}, 112, dt);
                Tensor c = input(dev, {2, M, N}, 113, dt);
                b.gemm(c.desc(), broadcast(a, {2, M, K}), bb.desc(), 0.5, 2.0);
                Tensor c0 = full({M, N}, std::nan(""), {dt, dev});  // beta 0: C's old values (NaN) are not read
                b.gemm(c0.desc(), a.desc(), squeeze(narrow(bb, 0, 1, 1), 0).desc(), 1.0, 0.0);
                return std::vector<Tensor>{c, c0};
              },
              std::sqrt(static_cast<double>(K)) / 2);
        }
  }
  // --- attention for one query a head (a decoding step's): CUDA's block per head ------------------------------
  // Grouped heads (4 query heads on 2 key/value heads), keys and values the first Tk rows of a longer cache, heads of
  // 40/36 and 130/64 (two and five of each lane's dimensions), batch 0's query seeing no key at all (out NaN, lse -inf:
  // both turned into numbers here, since NaN equals nothing) or, causal with dropout, key 0 alone.
  for (const DType dt : {DType::float32, DType::float64, DType::bfloat16})
    for (const std::int64_t Dh : {40, 130})
      for (const bool causal : {false, true}) {
        const std::int64_t Dv = Dh == 40 ? 36 : 64, Tk = 45, capacity = 50;
        add(
            "attention_forward",
            fmt::format("1 query, 4 heads on 2, Dh {} Dv {}, {} keys of a cache of {}, {} {}", Dh, Dv, Tk, capacity,
                        causal ? "causal, dropout 0.2" : "batch 0 sees no key", std::string(dtype_name(dt))),
            dt,
            [=](Device dev, Backend& b) {
              const auto values = [&](const Shape& shape, std::uint64_t seed) {
                return input(kCPU, shape, seed, DType::float64).to(dt).to(dev);
              };
              const Tensor q = values({2, 4, 1, Dh}, 120);
              const Tensor k = narrow(values({2, 2, capacity, Dh}, 121), 2, 0, Tk);
              const Tensor v = narrow(values({2, 2, capacity, Dv}, 122), 2, 0, Tk);
              std::vector<double> pad(static_cast<std::size_t>(2 * Tk));
              for (std::int64_t j = 0; j < Tk; ++j) pad[static_cast<std::size_t>(j)] = causal ? 0 : 1;
              for (std::int64_t j = Tk + 2; j < 2 * Tk; j += 5) pad[static_cast<std::size_t>(j)] = 1;
              const Tensor mask = from_vector(pad, {2, 1, 1, Tk}, {DType::boolean, dev});
              AttentionConfig cfg;
              cfg.scale = 0.2, cfg.causal = causal, cfg.dropout = causal ? 0.2 : 0.0, cfg.seed = 3, cfg.offset = 4;
              const DType stats = dt == DType::bfloat16 ? DType::float32 : dt;
              Tensor out = sentinel(dev, {2, 4, 1, Dv}, dt), lse = sentinel(dev, {2, 4, 1}, stats);
              b.attention_forward(out.desc(), lse.desc(), q.desc(), k.desc(), v.desc(), broadcast(mask, {2, 4, 1, Tk}),
                                  cfg);
              const Tensor no_key = scalar(-INFINITY, {stats, dev});
              return std::vector<Tensor>{masked_fill(out, ne(out, out), 777), masked_fill(lse, eq(lse, no_key), -777)};
            },
            dt == DType::bfloat16 ? 2 : 4);
      }
  // --- bfloat16: conversion both ways, fill, where, and the GEMM with a float32 or bfloat16 product -------
  const DType bf16 = DType::bfloat16;
  for (const std::int64_t n : kSizes) {
    const std::string size = " n=" + std::to_string(n);
    for (const DType other : {DType::float32, DType::float64, DType::int64})
      for (const bool to_bf16 : {true, false})
        add(
            "unary",
            std::string("copy ") +
                (to_bf16 ? std::string(dtype_name(other)) + " -> bfloat16"
                         : "bfloat16 -> " + std::string(dtype_name(other))) +
                " on a transposed view" + size,
            bf16,
            [=](Device dev, Backend& b) {
              Tensor x = input(dev, {3, n}, 21, DType::float64, -300, 300);
              x = to_bf16 ? x.to(other) : x.to(kCPU).to(bf16).to(dev);  // bf16 values made on the CPU
              Tensor out = sentinel(dev, {n, 3}, to_bf16 ? bf16 : other);
              b.unary(UnaryOp::copy, out.desc(), transpose(x, 0, 1).desc(), 0);
              return std::vector<Tensor>{out};
            },
            1, true);
    // Unit-stride rows, which the CPU converts between float32 and bfloat16 in SIMD clones.
    for (const bool to_bf16 : {true, false})
      add(
          "unary",
          std::string("copy ") + (to_bf16 ? "float32 -> bfloat16" : "bfloat16 -> float32") + " on unit-stride rows" +
              size,
          bf16,
          [=](Device dev, Backend& b) {
            const Tensor wide = input(dev, {3, n}, 22, DType::float32, -300, 300);
            const Tensor x = to_bf16 ? wide : wide.to(kCPU).to(bf16).to(dev);
            Tensor out = sentinel(dev, {3, n}, to_bf16 ? bf16 : DType::float32);
            b.unary(UnaryOp::copy, out.desc(), x.desc(), 0);
            return std::vector<Tensor>{out};
          },
          1, true);
    add(
        "fill", "bfloat16, a transposed view" + size, bf16,
        [=](Device dev, Backend& b) {
          Tensor out = sentinel(dev, {3, n}, bf16);
          b.fill(transpose(narrow(out, 0, 1, 2), 0, 1).desc(), 3.14159);
          return std::vector<Tensor>{out};
        },
        1, true);
    add(
        "write_rows", "bfloat16 rows (a KV cache's under autocast) at repeated ids" + size, bf16,
        [=](Device dev, Backend& b) {
          const std::vector<std::int64_t> v{n - 1, 0, n - 1};
          Tensor table = input(kCPU, {2, n, 5}, 25, DType::float32).to(bf16).to(dev);
          const Tensor rows = input(kCPU, {2, 3, 5}, 26, DType::float32).to(bf16).to(dev);
          (void)b.write_rows(table.desc(), rows.desc(), ids(dev, v).desc(),
                             [](std::int64_t, std::int64_t) { return std::string("bad index"); });
          return std::vector<Tensor>{table};
        },
        1, true);
    add(
        "where", "bfloat16 with a broadcast condition" + size, bf16,
        [=](Device dev, Backend& b) {
          const Tensor x = input(kCPU, {3, n}, 22, DType::float32).to(bf16).to(dev);
          const Tensor y = input(kCPU, {3, n}, 23, DType::float32).to(bf16).to(dev);
          const Tensor cond = gt(input(dev, {1, n}, 24, DType::float32), scalar(0.0, {DType::float32, dev}));
          Tensor out = sentinel(dev, {3, n}, bf16);
          b.where(out.desc(), broadcast(cond, {3, n}), x.desc(), y.desc());
          return std::vector<Tensor>{out};
        },
        1, true);
  }
  // A long K under a small c, unbatched (a weight gradient's shape), which CUDA splits into slices of K (gemm.cu):
  // float32, float64 and bfloat16 operands, transposed or not, alpha and beta, and beta 0 over a NaN c.
  for (const DType dt : {DType::float32, DType::float64, DType::bfloat16})
    for (const bool ta : {false, true})
      for (const bool tb : {false, true}) {
        const std::int64_t M = 33, N = 65, K = 1024;
        const DType product = dt == DType::bfloat16 ? DType::float32 : dt;
        add(
            "gemm",
            std::string(dtype_name(dt)) + " operands, M=33 N=65 K=1024" + (ta ? " A^T" : "") + (tb ? " B^T" : "") +
                ", alpha 0.5 beta 2",
            product,
            [=](Device dev, Backend& b) {
              auto values = [&](const Shape& shape, std::uint64_t seed) {
                return input(kCPU, shape, seed, DType::float64).to(dt).to(dev);
              };
              const Tensor a = ta ? transpose(values({K, M}, 114), 0, 1) : values({M, K}, 114);
              const Tensor bb = tb ? transpose(values({N, K}, 115), 0, 1) : values({K, N}, 115);
              Tensor c = input(dev, {M, N}, 116, product);
              b.gemm(c.desc(), a.desc(), bb.desc(), 0.5, 2.0);
              Tensor c0 = full({M, N}, std::nan(""), {product, dev});
              b.gemm(c0.desc(), a.desc(), bb.desc(), 1.0, 0.0);
              return std::vector<Tensor>{c, c0};
            },
            std::sqrt(static_cast<double>(K)) / 2);
      }
  // A vocabulary past the 2,048 values whose weights and sort CUDA's sampling kernel keeps in shared memory
  // (random.cu): the same steps over global memory.
  for (const DType dt : {DType::float32, DType::float64})
    add(
        "sample_token", std::string("temperature 0.8, top_k 900, top_p 0.95, n=4000, ") + std::string(dtype_name(dt)),
        dt,
        [=](Device dev, Backend& b) {
          const std::int64_t n = 4000;
          std::vector<double> host(static_cast<std::size_t>(n));
          for (std::size_t v = 0; v < host.size(); ++v) host[v] = 4 * std::sin(0.37 * static_cast<double>(v));
          const Tensor logits = from_vector(host, {n}, {dt, dev});
          std::vector<Tensor> out;
          for (const double u : {0.0, 0.41, 1 - 1e-15}) {
            Tensor token = full({1}, -7, {DType::int64, dev}), probs = sentinel(dev, {n}, DType::float64);
            b.sample_token(token.desc(), probs.desc(), logits.desc(), {0.8, 900, 0.95}, sampling_draw_at(u));
            out.insert(out.end(), {token, probs});
          }
          return out;
        },
        1, true);
  // One row of c (a generated token's products), which CUDA gives a warp per element when b is contiguous along K
  // (gemv.cu): K past several rounds of 32 lanes and not a multiple of 32, N past a block's warps, a batch of 3 with b
  // broadcast; b contiguous along N too (the tiled kernels); alpha and beta, and beta 0 over a NaN c.
  for (const DType dt : {DType::float32, DType::float64, DType::bfloat16})
    for (const bool tb : {true, false})
      for (const DType product : {DType::float32, DType::float64, DType::bfloat16}) {
        // Products of the operands' dtype, and bfloat16's float32 too (its bfloat16 one with B^T alone).
        if (product != dt && !(dt == DType::bfloat16 && product == DType::float32)) continue;
        if (product == DType::bfloat16 && !tb) continue;
        const std::int64_t N = 37, K = 300;
        add(
            "gemm",
            std::string(dtype_name(dt)) + " operands, " + std::string(dtype_name(product)) +
                " product, one row: M=1 N=37 K=300" + (tb ? " B^T" : "") +
                ", batch 3 with B broadcast, alpha 0.5 beta 2",
            product,
            [=](Device dev, Backend& b) {
              auto values = [&](const Shape& shape, std::uint64_t seed) {
                return input(kCPU, shape, seed, DType::float64).to(dt).to(dev);
              };
              const Tensor a = values({3, 1, K}, 117);
              const Tensor bb = tb ? transpose(values({N, K}, 118), 0, 1) : values({K, N}, 118);
              Tensor c = input(kCPU, {3, 1, N}, 119, DType::float64).to(product).to(dev);
              b.gemm(c.desc(), a.desc(), broadcast(bb, {3, K, N}), 0.5, 2.0);
              Tensor c0 = full({1, N}, std::nan(""), {product, dev});
              b.gemm(c0.desc(), squeeze(narrow(a, 0, 2, 1), 0).desc(), bb.desc(), 1.0, 0.0);
              return std::vector<Tensor>{c, c0};
            },
            product == DType::bfloat16 ? 1 : std::sqrt(static_cast<double>(K)) / 2);
      }
  // Sums long enough that CUDA splits them across blocks: a reduction's few outputs of 9,001 x 2 or x 6 inputs each
  // (reduce.cu), and the norms' parameter gradients over 300 rows, in slices (norm.cu).
  for (const DType dt : {DType::float32, DType::float64}) {
    const std::string which = dt == DType::float32 ? ", float32" : ", float64";
    for (const ReduceOp op : {ReduceOp::sum, ReduceOp::max})
      add(
          "reduce", std::string(op == ReduceOp::sum ? "sum" : "max") + " of [2, 9001, 3] to 1, 3 and 6 outputs" + which,
          dt,
          [=](Device dev, Backend& b) {
            const Tensor x = input(dev, {2, 9001, 3}, 53, dt);
            std::vector<Tensor> outs;
            for (const Shape& kept : {Shape{1, 1, 1}, Shape{1, 1, 3}, Shape{2, 1, 3}}) {
              outs.push_back(sentinel(dev, kept, dt));
              b.reduce(op, outs.back().desc(), x.desc());
            }
            return outs;
          },
          10);
    add(
        "layer_norm_backward", "300 rows with gamma and beta" + which, dt,
        [=](Device dev, Backend& b) {
          const Tensor x = input(dev, {300, 40}, 74, dt, -3, 5), g = input(dev, {40}, 75, dt);
          Tensor y = sentinel(kReference, {300, 40}, dt), mean = sentinel(kReference, {300}, dt),
                 rstd = sentinel(kReference, {300}, dt);
          backend_for(kReference)
              .layer_norm_forward(y.desc(), mean.desc(), rstd.desc(), x.to(kReference).desc(), kNone, kNone, 1e-5);
          Tensor dx = sentinel(dev, {300, 40}, dt), dg = sentinel(dev, {40}, dt), db = sentinel(dev, {40}, dt);
          b.layer_norm_backward(dx.desc(), dg.desc(), db.desc(), input(dev, {300, 40}, 76, dt).desc(), x.desc(),
                                mean.to(dev).desc(), rstd.to(dev).desc(), g.desc());
          return std::vector<Tensor>{dx, dg, db};
        },
        10);
    add(
        "rms_norm_backward", "300 rows with gamma" + which, dt,
        [=](Device dev, Backend& b) {
          const Tensor x = input(dev, {300, 40}, 79, dt, -3, 5), g = input(dev, {40}, 80, dt);
          Tensor y = sentinel(kReference, {300, 40}, dt), rstd = sentinel(kReference, {300}, dt);
          backend_for(kReference)
              .rms_norm_forward(y.desc(), rstd.desc(), kNone, x.to(kReference).desc(), kNone, kNone, 1e-5);
          Tensor dx = sentinel(dev, {300, 40}, dt), dg = sentinel(dev, {40}, dt);
          b.rms_norm_backward(dx.desc(), dg.desc(), input(dev, {300, 40}, 81, dt).desc(), x.desc(), rstd.to(dev).desc(),
                              g.desc());
          return std::vector<Tensor>{dx, dg};
        },
        10);
  }
  // {136, 264, 96}: every stride a multiple of 8, so the CUDA v4 kernel stages with 16-byte loads both ways.
  const std::int64_t bf16_shapes[][3] = {{1, 7, 33},    {33, 33, 257},   {65, 7, 33},
                                         {33, 257, 65}, {130, 150, 300}, {136, 264, 96}};
  for (const auto& mnk : bf16_shapes)
    for (const bool ta : {false, true})
      for (const bool tb : {false, true})
        for (const DType product : {DType::float32, bf16}) {
          const std::int64_t M = mnk[0], N = mnk[1], K = mnk[2];
          add(
              "gemm",
              "bfloat16 operands, " + std::string(dtype_name(product)) + " product, M=" + std::to_string(M) +
                  " N=" + std::to_string(N) + " K=" + std::to_string(K) + (ta ? " A^T" : "") + (tb ? " B^T" : "") +
                  ", batch 2 with A broadcast, alpha 0.5 beta 2",
              product,
              [=](Device dev, Backend& b) {
                auto values = [&](const Shape& shape, std::uint64_t seed) {
                  return input(kCPU, shape, seed, DType::float32).to(bf16).to(dev);
                };
                const Tensor a = ta ? transpose(values({K, M}, 111), 0, 1) : values({M, K}, 111);
                const Tensor bb = tb ? transpose(values({2, N, K}, 112), 1, 2) : values({2, K, N}, 112);
                Tensor c = input(kCPU, {2, M, N}, 113, DType::float32).to(product).to(dev);
                b.gemm(c.desc(), broadcast(a, {2, M, K}), bb.desc(), 0.5, 2.0);
                Tensor c0 = full({M, N}, std::nan(""), {product, dev});  // beta 0: C's old values are not read
                b.gemm(c0.desc(), a.desc(), squeeze(narrow(bb, 0, 1, 1), 0).desc(), 1.0, 0.0);
                return std::vector<Tensor>{c, c0};
              },
              product == bf16 ? 1 : std::sqrt(static_cast<double>(K)) / 2);
        }
  for (Case& c : all)
    if (c.kernel == "sample_token") c.libm_on_gpu = true;
  return all;
}

// Both devices' results, compared tensor by tensor.
void check_case(const Case& c) {
  const Device dut = device_under_test();
  const std::vector<Tensor> want = c.run(kReference, backend_for(kReference));
  const std::vector<Tensor> got = c.run(dut, backend_for(dut));
  REQUIRE(want.size() == got.size());
  // A bfloat16 result: the float32 sums may differ in their last bits, which moves a rounding to bfloat16
  // by one unit of its 8 significant bits: 2^-7 relative.
  const double per_dtype = c.dtype == DType::float64 ? 1e-12 : c.dtype == DType::bfloat16 ? 0x1p-7 : 2e-5;
  const double tol = c.exact && c.libm_on_gpu && dut.type == DeviceType::cuda ? 1e-12
                     : c.exact                                                ? 0
                                                                              : per_dtype * c.tol_scale;
  for (std::size_t i = 0; i < want.size(); ++i) {
    INFO(c.kernel << ": " << c.what << " (output " << i << ", " << device_name(dut) << " vs reference)");
    CHECK(close(got[i].to(kCPU).to(DType::float64), want[i].to(kCPU).to(DType::float64), tol, tol));
  }
}

// The virtual kernels backend.h declares (every `virtual ... name(`), except device().
std::set<std::string> backend_methods() {
  std::ifstream in(STEPFORMER_SOURCE_DIR "/autograd/include/autograd/backend.h");
  std::stringstream text;
  text << in.rdbuf();
  const std::string s = text.str();
  std::set<std::string> names;
  const std::regex method(R"(virtual\s[^;()]*?\b(\w+)\s*\()");
  for (auto it = std::sregex_iterator(s.begin(), s.end(), method); it != std::sregex_iterator(); ++it)
    if ((*it)[1] != "device" && (*it)[1] != "Backend") names.insert((*it)[1]);
  return names;
}

}  // namespace

TEST_CASE("oracle: every Backend kernel matches the reference backend", "[oracle]") {
  for (const Case& c : cases()) check_case(c);
}

TEST_CASE("oracle: every virtual kernel of backend.h has a case in the table", "[oracle]") {
  const std::set<std::string> declared = backend_methods();
  REQUIRE(declared.size() >= 20);  // the regex found the interface, not a stray line
  std::set<std::string> covered;
  for (const Case& c : cases()) covered.insert(c.kernel);
  // Covered by the cases of their partner: copy_to_host by the round trip, deallocate and bytes_in_use by
  // the allocation case; host_waits, kernel_launches and driver_allocations are no kernels, and the language
  // model's tests count them on cuda-sim. The graph calls record and replay kernels, compute nothing themselves:
  // tests/cuda/test_device_graph.cpp holds them to the eager ops' results.
  for (const char* implied : {"copy_to_host", "deallocate", "bytes_in_use", "host_waits", "kernel_launches",
                              "driver_allocations", "begin_graph", "end_graph", "replay_graph", "release_graph"})
    covered.insert(implied);
  for (const std::string& name : declared) {
    INFO("Backend::" << name << " has no case in tests/autograd/test_backend_oracle.cpp");
    CHECK(covered.count(name) == 1);
  }
}

TEST_CASE("oracle: an op or dtype without a kernel is a typed error naming it and the device", "[oracle]") {
  for (const Device dev : {kReference, device_under_test()}) {
    INFO(device_name(dev));
    Backend& b = backend_for(dev);
    const Tensor x = full({3}, 1.0, {DType::float32, dev}), out = full({3}, 0.0, {DType::float32, dev});
    const std::string device(device_type_name(dev.type));
    // An op value the dispatch does not know (a new enum value without a kernel): never silence.
    REQUIRE_THROWS_WITH_ALL(b.unary(static_cast<UnaryOp>(200), out.desc(), x.desc(), 0), NotImplemented,
                            "unary op #200", device.c_str());
    REQUIRE_THROWS_WITH_ALL(b.binary(static_cast<BinaryOp>(201), out.desc(), x.desc(), x.desc()), NotImplemented,
                            "binary op #201", device.c_str());
    // A known op on a dtype it has no formula for.
    const Tensor ids = full({3}, 2, {DType::int64, dev}), ids_out = full({3}, 0, {DType::int64, dev});
    REQUIRE_THROWS_WITH_ALL(b.unary(UnaryOp::exp, ids_out.desc(), ids.desc(), 0), DTypeError, "'exp'", "int64",
                            device.c_str());
    REQUIRE_THROWS_WITH_ALL(b.binary(BinaryOp::div, ids_out.desc(), ids.desc(), ids.desc()), DTypeError,
                            "integer division");
  }
}
