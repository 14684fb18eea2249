#pragma once
// The autograd graph. Each differentiable op that sees an input requiring grad gives its output a Node:
// one Edge per such input, holding the function that maps the output's gradient to that input's
// gradient, and the Node that receives it (the input's own grad_fn, or its leaf's accumulator).
// Edges for inputs that need no gradient are never made, so their saved tensors are never kept.
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "autograd/op_table.h"
#include "autograd/tensor.h"

namespace stepformer {

using GradFn = std::function<Tensor(const Tensor& grad_output)>;

struct Edge {
  std::shared_ptr<Node> to;  // where the gradient goes
  GradFn grad;               // d(output)/d(input) applied to grad_output
  Shape input_shape;         // the gradient must have this shape (checked)
};

// A tensor a backward formula reads, and the version it had when the op ran.
struct SavedVersion {
  std::weak_ptr<Storage> storage;
  std::uint64_t version;
};

struct Node {
  Node();
  ~Node();
  Node(const Node&) = delete;
  Node& operator=(const Node&) = delete;

  bool is_accumulator() const { return accumulates; }

  Op op{};      // meaningless for accumulators
  Shape shape;  // the output's shape
  DType dtype{};
  std::vector<Edge> edges;
  std::vector<SavedVersion> saved;
  bool released = false;     // backward ran without retain_graph: the edges' functions are gone
  bool accumulates = false;  // an accumulator: adds the gradient into `leaf`'s grad
  std::weak_ptr<TensorImpl> leaf;
  std::shared_ptr<const std::string> scope;  // anomaly mode: the module the op ran in

  static std::int64_t live_count();  // Nodes alive now (flat-memory tests)
};

// Called by every differentiable op after computing `out`: if grad mode is on and some input requires
// grad, gives `out` a Node with an edge per input that does. `saved` are the tensors the formulas read;
// backward checks that none was modified in place since.
struct InputGrad {
  Tensor input;
  GradFn grad;
};
void record(Op op, Tensor& out, std::vector<InputGrad> inputs, std::vector<Tensor> saved = {});

}  // namespace stepformer
