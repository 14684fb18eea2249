#pragma once
// The order backward walks the graph in (engine.cpp; exercise 0.4). Private to the engine: Tensor::backward is
// the public way in. Chapter 00's graded test includes this header to check the order itself, apart from the
// gradients it produces.
#include <vector>

#include "autograd/engine.h"

namespace stepformer {

// Every Node reachable from `root`, root first, each listed once and before every Node it sends gradients to
// (so that when backward reaches a Node, all of its consumers have run).
std::vector<Node*> topological_order(Node* root);

}  // namespace stepformer
