#pragma once
// Block diagrams of the models, drawn from the configs the code runs (Graphviz DOT; draw_dot makes the SVG):
// change a config and the picture changes, so a chapter's figure cannot drift from its code (tests/CMakeLists.txt
// holds each figure in docs/images to what its demo draws). Every arrow carries the shape of the tensor on it.
// The layout reads bottom to top, as the paper's Figure 1 does.
#include <filesystem>
#include <string>

#include "transformer/config.h"
#include "transformer/language_model.h"

namespace stepformer::demo {

// What to write for the sizes a config does not fix: the batch, source and target lengths. Letters ("B", "S",
// "T") for the general figure, numbers for the batch a demo runs.
struct Dims {
  std::string batch = "B", source = "S", target = "T";
};

// Vaswani et al. 2017, Figure 1: both stacks with their embeddings and the output projection.
std::string transformer_figure(const transformer::Config& cfg, const Dims& dims = {});
// One encoder layer (chapter 05) and one decoder layer (chapter 06), each sublayer with its add & norm.
std::string encoder_layer_figure(const transformer::Config& cfg, const Dims& dims = {});
std::string decoder_layer_figure(const transformer::Config& cfg, const Dims& dims = {});
// Multi-head attention (chapter 02): the projections, the split into heads, scaled dot-product attention on
// every head at once, the merge and the output projection (Figure 2 of the paper, with the shapes).
std::string multi_head_figure(const transformer::Config& cfg, const Dims& dims = {});
// A residual connection around a sublayer, post-norm (the paper's) beside pre-norm (chapter 03).
std::string add_norm_figure(const transformer::Config& cfg, const Dims& dims = {});
// The position-wise feed-forward network (chapter 04).
std::string feed_forward_figure(const transformer::Config& cfg, const Dims& dims = {});
// Chapter 12's decoder-only model with one block opened: each switch of the config (norm, positions,
// feed-forward, key/value heads, bias, tied embeddings) shows in the picture.
std::string language_model_figure(const transformer::LMConfig& cfg, const Dims& dims = {});

// Writes out_dir/NAME.dot and, when Graphviz's dot is installed, out_dir/NAME.svg (atomically); says which.
// Returns whether the SVG was drawn.
bool draw_dot(const std::filesystem::path& out_dir, const std::string& name, const std::string& dot);

}  // namespace stepformer::demo
