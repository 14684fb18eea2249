#pragma once
// The autograd graph behind a tensor as Graphviz DOT (after micrograd's draw_dot): one box per op with
// its output's shape and dtype (bfloat16 filled amber), one ellipse per leaf that requires grad (its name,
// shape and dtype), arrows in the direction of the forward pass. Render with `dot -Tsvg graph.dot -o graph.svg`.
#include <string>

#include "autograd/tensor.h"

namespace stepformer {

std::string to_dot(const Tensor& root);

}  // namespace stepformer
