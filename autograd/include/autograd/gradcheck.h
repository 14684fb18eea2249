#pragma once
// Finite-difference gradient check (float64), as torch.autograd.gradcheck.
// f maps the inputs to a tensor of any shape; the check compares, for L = sum(f(x) * w) with a fixed
// random w, the analytic dL/dx from backward() with the central difference (L(x+h) - L(x-h)) / 2h
// for every element of every input that requires grad.
#include <functional>
#include <string>
#include <vector>

#include "autograd/tensor.h"

namespace stepformer {

struct GradcheckOptions {
  double eps = 1e-6;
  double atol = 1e-6;
  double rtol = 1e-4;
};

struct GradcheckResult {
  bool ok = true;
  std::string report;  // on failure: the worst element's input, index, analytic and numeric values
  explicit operator bool() const { return ok; }
};

GradcheckResult gradcheck(const std::function<Tensor(const std::vector<Tensor>&)>& f, const std::vector<Tensor>& inputs,
                          GradcheckOptions options = {});

}  // namespace stepformer
