// The vectorised float32 row kernels (softmax, log_softmax, layer_norm, cross-entropy; values and
// gradients) against the same ops in float64, whose kernels use libm and plain loops: odd row lengths,
// non-contiguous inputs. This holds what differs between the two precisions (the float exp, float
// accumulation, the multi-versioned code); the formulas both share are held by the float64 gradient
// checks and the PyTorch fixtures. Tolerance: float32 rounding of the result, 2e-6 relative + 1e-6 absolute
// (layer_norm's gradients 1e-5: they subtract nearly equal means).
#include "../helpers.h"

using namespace stepformer;
using namespace stepformer::test;

namespace {

// x in float32 and the same values in float64, both leaves; `transposed` makes them non-contiguous views.
struct Pair32_64 {
  Tensor x32, x64;
};
Pair32_64 inputs(std::int64_t rows, std::int64_t cols, bool transposed, std::uint64_t seed) {
  const Tensor base = f64_input(transposed ? Shape{cols, rows} : Shape{rows, cols}, seed, -4, 4).detach();
  Tensor x64 = base.to(DType::float64), x32 = base.to(DType::float32);
  x64.set_requires_grad();
  x32.set_requires_grad();
  return {x32, x64};
}
Tensor view_of(const Tensor& x, bool transposed) { return transposed ? transpose(x, 0, 1) : x; }

// op on [rows, cols] float32 vs float64 inputs: values, then the gradient of sum(op(x) * g), g random.
template <class Op>
void check_against_float64(Op op, std::int64_t rows, std::int64_t cols, bool transposed, std::uint64_t seed,
                           double value_atol, double grad_atol, double grad_rtol) {
  auto [x32, x64] = inputs(rows, cols, transposed, seed);
  const Tensor y32 = op(view_of(x32, transposed)), y64 = op(view_of(x64, transposed));
  CHECK(close(y32, y64, value_atol, 2e-6));
  const Tensor g = f64_input(y64.shape(), seed + 100);
  sum(y32 * g.to(DType::float32)).backward();
  sum(y64 * g).backward();
  CHECK(close(x32.grad(), x64.grad(), grad_atol, grad_rtol));
}

}  // namespace

TEST_CASE("float32 softmax, log_softmax, layer_norm, rms_norm, cross_entropy agree with float64 on odd sizes",
          "[fast]") {
  const std::int64_t rows = 5;
  for (const std::int64_t cols : {1, 7, 33, 65, 257})
    for (const bool transposed : {false, true}) {
      INFO("cols=" << cols << " transposed=" << transposed);
      const Tensor w = f64_input({cols}, 4).detach(), b = f64_input({cols}, 5).detach();
      std::vector<std::int64_t> t;
      for (std::int64_t r = 0; r < rows; ++r) t.push_back((r * 5 + 3) % cols);
      const Tensor targets = from_vector(t, {rows}, {DType::int64});
      check_against_float64([](const Tensor& x) { return softmax(x); }, rows, cols, transposed, 1, 1e-6, 1e-6, 2e-6);
      check_against_float64([](const Tensor& x) { return log_softmax(x); }, rows, cols, transposed, 2, 1e-6, 1e-6,
                            2e-6);
      check_against_float64([&](const Tensor& x) { return layer_norm(x, w.to(x.dtype()), b.to(x.dtype())); }, rows,
                            cols, transposed, 3, 1e-5, 1e-5, 1e-5);
      check_against_float64([&](const Tensor& x) { return rms_norm(x, w.to(x.dtype())); }, rows, cols, transposed, 7,
                            1e-5, 1e-5, 1e-5);
      check_against_float64([&](const Tensor& x) { return cross_entropy(x, targets, -100, 0.1); }, rows, cols,
                            transposed, 6, 1e-6, 1e-6, 2e-6);
      // layer_norm's weight and bias gradients (summed over rows in fixed blocks by the float32 kernel).
      Tensor w32 = w.to(DType::float32), b32 = b.to(DType::float32), w64 = w.to(DType::float64),
             b64 = b.to(DType::float64);
      for (Tensor* p : {&w32, &b32, &w64, &b64}) p->set_requires_grad();
      auto [x32, x64] = inputs(rows, cols, transposed, 8);
      const Tensor g = f64_input({rows, cols}, 9);
      sum(layer_norm(view_of(x32, transposed), w32, b32) * g.to(DType::float32)).backward();
      sum(layer_norm(view_of(x64, transposed), w64, b64) * g).backward();
      CHECK(close(w32.grad(), w64.grad(), 1e-5, 1e-5));
      CHECK(close(b32.grad(), b64.grad(), 1e-5, 1e-5));
      // rms_norm's gain gradient, summed the same way.
      for (Tensor* p : {&w32, &w64}) p->zero_grad();
      sum(rms_norm(view_of(x32, transposed), w32) * g.to(DType::float32)).backward();
      sum(rms_norm(view_of(x64, transposed), w64) * g).backward();
      CHECK(close(w32.grad(), w64.grad(), 1e-5, 1e-5));
    }
}
