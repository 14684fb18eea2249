#pragma once
// The autograd graph and the engine that walks it (src/engine.cpp; Tensor::backward is defined there too).
// Each differentiable op that sees an input requiring grad gives its output a Node:
// the op's backward function, which maps the output's gradient to the gradients of all its inputs at once
// (as PyTorch's Node::apply, micrograd's _backward), and one Edge per input naming the Node that receives
// that input's gradient (its own grad_fn, or its leaf's accumulator; none if it needs no gradient).
// When no input requires grad, no Node is made and the backward function, with the tensors it captured,
// is dropped at once.
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "autograd/op_table.h"
#include "autograd/tensor.h"

namespace stepformer {

// One gradient per input, in the order the inputs were given to record(). An entry may be left undefined
// for an input that needs no gradient (the op can tell: that input's requires_grad() was false).
using Gradients = std::vector<Tensor>;
using BackwardFn = std::function<Gradients(const Tensor& grad_output)>;

struct Edge {
  std::shared_ptr<Node> to;  // where this input's gradient goes; null when the input needs none
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
  BackwardFn backward;      // null for accumulators, and after a backward that did not retain the graph
  std::vector<Edge> edges;  // one per input, in record()'s order
  std::vector<SavedVersion> saved;
  bool released = false;     // backward ran without retain_graph: `backward` and what it held are gone
  bool accumulates = false;  // an accumulator: adds the gradient into `leaf`'s grad
  std::weak_ptr<TensorImpl> leaf;
  std::shared_ptr<const std::string> scope;  // anomaly mode: the module the op ran in

  static std::int64_t live_count();  // Nodes alive now (flat-memory tests)
};

// Called by every differentiable op after computing `out`: if grad mode is on and some input requires
// grad, gives `out` a Node holding `backward` and an edge per input. `saved` are the tensors the formulas
// read, the very handles `backward` captured (so an input the formulas do not read is not listed): backward
// checks that none was modified in place since.
void record(Op op, Tensor& out, const std::vector<Tensor>& inputs, BackwardFn backward,
            const std::vector<Tensor>& saved = {});

}  // namespace stepformer
