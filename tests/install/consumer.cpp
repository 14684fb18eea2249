// Built against an installed stepformer: d/dw sum(w * w) = 2w.
#include <autograd/autograd.h>

#include <cstdio>

int main() {
  stepformer::Tensor w = stepformer::full({2}, 1.5).set_requires_grad();
  stepformer::sum(w * w).backward();
  std::printf("gradient %g\n", w.grad().at({0}));
  return w.grad().at({0}) == 3.0 ? 0 : 1;
}
