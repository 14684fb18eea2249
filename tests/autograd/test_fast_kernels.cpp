// The vectorised float32 row kernels (softmax, log_softmax, layer_norm, cross-entropy; values and
// gradients) against the same ops in float64, whose kernels use libm and plain loops: odd row lengths,
// non-contiguous inputs. Tolerance: float32 rounding of the result, 2e-6 relative + 1e-6 absolute
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

}  // namespace

TEST_CASE("float32 softmax, log_softmax, layer_norm, cross_entropy agree with float64 on odd sizes", "[fast]") {
  for (const std::int64_t cols : {1, 7, 33, 65, 257})
    for (const bool transposed : {false, true}) {
      INFO("cols=" << cols << " transposed=" << transposed);
      const std::int64_t rows = 5;
      const Tensor g = f64_input({rows, cols}, 7);
      {
        auto [x32, x64] = inputs(rows, cols, transposed, 1);
        const Tensor y32 = softmax(view_of(x32, transposed)), y64 = softmax(view_of(x64, transposed));
        CHECK(close(y32, y64, 1e-6, 2e-6));
        sum(y32 * g.to(DType::float32)).backward();
        sum(y64 * g).backward();
        CHECK(close(x32.grad(), x64.grad(), 1e-6, 2e-6));
      }
      {
        auto [x32, x64] = inputs(rows, cols, transposed, 2);
        const Tensor y32 = log_softmax(view_of(x32, transposed)), y64 = log_softmax(view_of(x64, transposed));
        CHECK(close(y32, y64, 1e-6, 2e-6));
        sum(y32 * g.to(DType::float32)).backward();
        sum(y64 * g).backward();
        CHECK(close(x32.grad(), x64.grad(), 1e-6, 2e-6));
      }
      {
        auto [x32, x64] = inputs(rows, cols, transposed, 3);
        const Tensor w = f64_input({cols}, 4), b = f64_input({cols}, 5);
        const Tensor y32 = layer_norm(view_of(x32, transposed), w.to(DType::float32), b.to(DType::float32));
        const Tensor y64 = layer_norm(view_of(x64, transposed), w, b);
        CHECK(close(y32, y64, 1e-5, 2e-6));
        sum(y32 * g.to(DType::float32)).backward();
        sum(y64 * g).backward();
        CHECK(close(x32.grad(), x64.grad(), 1e-5, 1e-5));
      }
      {
        auto [x32, x64] = inputs(rows, cols, transposed, 6);
        std::vector<std::int64_t> t;
        for (std::int64_t r = 0; r < rows; ++r) t.push_back((r * 5 + 3) % cols);
        const Tensor targets = from_vector(t, {rows}, {DType::int64});
        const Tensor l32 = cross_entropy(view_of(x32, transposed), targets, -100, 0.1);
        const Tensor l64 = cross_entropy(view_of(x64, transposed), targets, -100, 0.1);
        CHECK(close(l32, l64, 1e-6, 2e-6));
        l32.backward();
        l64.backward();
        CHECK(close(x32.grad(), x64.grad(), 1e-6, 2e-6));
      }
    }
}
