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
#include <utility>
#include <vector>

#include "autograd/op_table.h"
#include "autograd/tensor.h"

namespace stepformer {

// One gradient per input, in the order the inputs were given to record(). An entry may be left undefined
// for an input that needs no gradient (the op can tell: that input's requires_grad() was false).
using Gradients = std::vector<Tensor>;
// A backward function reads the output's gradient and the tensors its op saved, and nothing else: the saved
// tensors are handed to it, so what the version check covers is what the formulas read (PyTorch's
// ctx.saved_tensors; derivatives.yaml derives the list from the formula).
using BackwardFn = std::function<Gradients(const Tensor& grad_output, const std::vector<Tensor>& saved)>;

struct Edge {
  std::shared_ptr<Node> to;  // where this input's gradient goes; null when the input needs none
  Shape input_shape;         // the gradient must have this shape (checked)
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
  BackwardFn backward;        // null for accumulators, and after a backward that did not retain the graph
  std::vector<Edge> edges;    // one per input, in record()'s order
  std::vector<Tensor> saved;  // detached; an undefined entry is a tensor the op did not need
  std::vector<std::uint64_t> saved_versions;  // each saved tensor's storage version when the op ran
  bool released = false;                      // backward ran without retain_graph: `backward` and what it held are gone
  bool accumulates = false;                   // an accumulator: adds the gradient into `leaf`'s grad
  std::weak_ptr<TensorImpl> leaf;
  std::shared_ptr<const std::string> scope;  // anomaly mode: the module the op ran in

  static std::int64_t live_count();  // Nodes alive now (flat-memory tests)
};

// Called by every differentiable op after computing `out`: if grad mode is on and some input requires
// grad, gives `out` a Node holding `backward` and an edge per input, and keeps `saved` (detached: a saved
// tensor must not own the graph) with their versions. Before `backward` runs, the engine checks that no saved
// tensor was modified in place since; while it runs, that it reads no tensor beyond the gradient, `saved` and
// what it makes itself (an AutogradError naming the op), so a tensor captured instead of saved is caught.
void record(Op op, Tensor& out, const std::vector<Tensor>& inputs, std::vector<Tensor> saved, BackwardFn backward);

// The forms the ops use. The backward's parameters are the gradient and then the saved tensors, in order:
//   record(Op::mul, out, {a, b}, {a, b}, [](const Tensor& g, const Tensor& a, const Tensor& b) -> Gradients {...});
//   record(Op::neg, out, {a}, [](const Tensor& g) -> Gradients { return {neg(g)}; });  // saves nothing
template <class F>
void record(Op op, Tensor& out, const std::vector<Tensor>& inputs, F backward) {
  record(op, out, inputs, std::vector<Tensor>{},
         [f = std::move(backward)](const Tensor& g, const std::vector<Tensor>&) -> Gradients { return f(g); });
}
template <std::size_t N, class F>
void record(Op op, Tensor& out, const std::vector<Tensor>& inputs, const Tensor (&saved)[N], F backward) {
  record(op, out, inputs, std::vector<Tensor>(saved, saved + N),
         [f = std::move(backward)](const Tensor& g, const std::vector<Tensor>& s) -> Gradients {
           return [&]<std::size_t... I>(std::index_sequence<I...>) { return f(g, s[I]...); }
           (std::make_index_sequence<N>{});
         });
}

}  // namespace stepformer
