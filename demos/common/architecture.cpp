#include "architecture.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cstdlib>
#include <functional>
#include <vector>

#include "demo.h"
#include "transformer/swiglu.h"

namespace stepformer::demo {
namespace {

using transformer::Config;
using transformer::LMConfig;

// Colours after the paper's Figure 1: attention orange, add & norm yellow, feed-forward blue, embeddings pink,
// the output projection violet, softmax green; tensor reshuffles grey.
enum class Kind { tensor, embedding, attention, norm, add, feed_forward, linear, softmax, reshape };

const char* style(Kind kind) {
  switch (kind) {
    case Kind::tensor: return R"(shape=plaintext style="")";
    case Kind::embedding: return R"(fillcolor="#f7cdd5")";
    case Kind::attention: return R"(fillcolor="#fbd6a2")";
    case Kind::norm: return R"(fillcolor="#f2eda8")";
    case Kind::add: return R"(shape=circle fixedsize=true width=0.3 fillcolor="#ffffff" style="filled")";
    case Kind::feed_forward: return R"(fillcolor="#c3e1f4")";
    case Kind::linear: return R"(fillcolor="#dcd5f0")";
    case Kind::softmax: return R"(fillcolor="#cbe9c5")";
    case Kind::reshape: return R"(fillcolor="#eeeeee")";
  }
  return "";
}

std::string escape(const std::string& s) {
  std::string out;
  for (const char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    out += c == '\n' ? std::string("\\n") : std::string(1, c);
  }
  return out;
}

// A directed graph under construction; nodes are numbered in the order they are made.
class Dot {
 public:
  explicit Dot(std::string title) : title_(std::move(title)) {}
  std::string node(const std::string& label, Kind kind) {
    const std::string id = fmt::format("n{}", count_++);
    line(fmt::format("{} [label=\"{}\" {}];", id, escape(label), style(kind)));
    return id;
  }
  // An arrow carrying a tensor of `shape`; a residual (skip) arrow is dashed and unlabelled.
  void edge(const std::string& from, const std::string& to, const std::string& shape) {
    edges_ += fmt::format("  {} -> {} [label=\"{}\"];\n", from, to, escape(shape));
  }
  void skip(const std::string& from, const std::string& to) {
    edges_ += fmt::format("  {} -> {} [style=dashed color=\"#888888\"];\n", from, to);
  }
  void open(const std::string& label) {
    line(fmt::format("subgraph cluster{} {{", count_++));
    ++depth_;
    line(fmt::format("label=\"{}\"; labeljust=r; style=\"rounded\"; color=\"#888888\";", escape(label)));
  }
  void close() {
    --depth_;
    line("}");
  }
  std::string str() const {
    return fmt::format(
        "digraph G {{\n"
        "  rankdir=BT; nodesep=0.25; ranksep=0.3; labelloc=t; fontname=\"Helvetica\"; fontsize=13;\n"
        "  label=\"{}\";\n"
        "  node [shape=box style=\"rounded,filled\" fontname=\"Helvetica\" fontsize=11 penwidth=0.8 "
        "margin=\"0.12,0.04\"];\n"
        "  edge [fontname=\"Helvetica\" fontsize=9 fontcolor=\"#333333\" color=\"#444444\" arrowsize=0.6];\n"
        "{}{}}}\n",
        escape(title_), body_, edges_);
  }

 private:
  void line(const std::string& s) { body_ += std::string(2 * (depth_ + 1), ' ') + s + "\n"; }
  // Edges go after every subgraph: an edge inside one would pull its nodes into that cluster.
  std::string title_, body_, edges_;
  int count_ = 0, depth_ = 0;
};

std::string shape(const std::vector<std::string>& dims) { return fmt::format("[{}]", fmt::join(dims, ", ")); }
std::string num(std::int64_t n) { return std::to_string(n); }

// A sublayer f with its residual connection (section 5.4 and chapter 03): post-norm Norm(x + dropout(f(x))),
// the paper's, or pre-norm x + dropout(f(Norm(x))). `f` draws the sublayer from its input node and returns its
// output node; `io` is the shape on both sides.
std::string residual(Dot& g, const std::string& x, const std::string& io, bool pre_norm, const std::string& norm,
                     double dropout, const std::function<std::string(const std::string&)>& f) {
  const std::string drop = dropout > 0 ? fmt::format("\n(dropout {} on f)", dropout) : "";
  if (pre_norm) {
    const std::string n = g.node(norm, Kind::norm);
    g.edge(x, n, io);
    const std::string y = f(n);
    const std::string add = g.node("+", Kind::add);
    g.edge(y, add, io + drop);
    g.skip(x, add);
    return add;
  }
  const std::string y = f(x);
  const std::string add = g.node("Add & " + norm + drop, Kind::norm);
  g.edge(y, add, io);
  g.skip(x, add);
  return add;
}

std::string heads(std::int64_t h, std::int64_t d) { return fmt::format("{} heads of {}", h, h > 0 ? d / h : 0); }

// Chapter 02's MultiHeadAttention as one box: its inputs' arrows come from `query` (and `memory`, for
// cross-attention, whose arrow carries its own shape).
std::string attention_box(Dot& g, const Config& cfg, const std::string& what, const std::string& mask,
                          const std::string& query, const std::string& query_shape) {
  const std::string a = g.node(fmt::format("{}\n{}, {}", what, heads(cfg.n_heads, cfg.d_model), mask), Kind::attention);
  g.edge(query, a, query_shape);
  return a;
}

std::string feed_forward_box(Dot& g, const Config& cfg, const std::string& x, const std::string& io) {
  const std::string f = g.node(fmt::format("Feed-forward\n{} -> {} (ReLU) -> {}", cfg.d_model, cfg.d_ff, cfg.d_model),
                               Kind::feed_forward);
  g.edge(x, f, io);
  return f;
}

std::string encoder_layer(Dot& g, const Config& cfg, const Dims& d, const std::string& x) {
  const std::string io = shape({d.batch, d.source, num(cfg.d_model)});
  const std::string h = residual(g, x, io, cfg.pre_norm, "LayerNorm", cfg.dropout, [&](const std::string& in) {
    return attention_box(g, cfg, "Multi-head self-attention", "PAD keys masked", in, io);
  });
  return residual(g, h, io, cfg.pre_norm, "LayerNorm", cfg.dropout,
                  [&](const std::string& in) { return feed_forward_box(g, cfg, in, io); });
}

std::string decoder_layer(Dot& g, const Config& cfg, const Dims& d, const std::string& x, const std::string& memory) {
  const std::string io = shape({d.batch, d.target, num(cfg.d_model)});
  const std::string h1 = residual(g, x, io, cfg.pre_norm, "LayerNorm", cfg.dropout, [&](const std::string& in) {
    return attention_box(g, cfg, "Masked multi-head self-attention", "future and PAD keys masked", in, io);
  });
  const std::string h2 = residual(g, h1, io, cfg.pre_norm, "LayerNorm", cfg.dropout, [&](const std::string& in) {
    const std::string a =
        attention_box(g, cfg, "Multi-head cross-attention\nqueries from the decoder", "PAD keys masked", in, io + " Q");
    g.edge(memory, a, shape({d.batch, d.source, num(cfg.d_model)}) + " K, V");
    return a;
  });
  return residual(g, h2, io, cfg.pre_norm, "LayerNorm", cfg.dropout,
                  [&](const std::string& in) { return feed_forward_box(g, cfg, in, io); });
}

// ids -> token embedding times sqrt(D) -> + positional encoding -> dropout (section 3.4 and 3.5).
std::string embedding(Dot& g, const Config& cfg, std::int64_t vocab, const std::string& ids,
                      const std::string& ids_shape, const std::string& io) {
  const std::string e =
      g.node(fmt::format("Embedding {} x {}, times sqrt({})", vocab, cfg.d_model, cfg.d_model), Kind::embedding);
  g.edge(ids, e, ids_shape);
  const std::string p = g.node(fmt::format("+ positional encoding\ndropout {}", cfg.dropout), Kind::embedding);
  g.edge(e, p, io);
  return p;
}

std::string final_norm(Dot& g, const Config& cfg, const std::string& x, const std::string& io) {
  if (!cfg.pre_norm) return x;  // post-norm: every layer ends normalised
  const std::string n = g.node("LayerNorm", Kind::norm);
  g.edge(x, n, io);
  return n;
}

std::string title(const std::string& what, const Config& cfg) {
  return fmt::format("{} (D = {}, {}, F = {}, {})", what, cfg.d_model, heads(cfg.n_heads, cfg.d_model), cfg.d_ff,
                     cfg.pre_norm ? "pre-norm" : "post-norm");
}

}  // namespace

std::string transformer_figure(const Config& cfg, const Dims& d) {
  Dot g(fmt::format("The Transformer: N = {} layers in each stack, D = {}, {}, F = {}, {} source and {} target tokens",
                    cfg.n_layers, cfg.d_model, heads(cfg.n_heads, cfg.d_model), cfg.d_ff, cfg.src_vocab,
                    cfg.tgt_vocab));
  const std::string src_io = shape({d.batch, d.source, num(cfg.d_model)});
  const std::string tgt_io = shape({d.batch, d.target, num(cfg.d_model)});
  const std::string src = g.node("source token ids", Kind::tensor);
  const std::string tgt = g.node("target token ids, shifted right", Kind::tensor);
  const std::string x = embedding(g, cfg, cfg.src_vocab, src, shape({d.batch, d.source}), src_io);
  g.open(fmt::format("encoder layer, x {}", cfg.n_layers));
  const std::string enc = encoder_layer(g, cfg, d, x);
  g.close();
  const std::string memory = final_norm(g, cfg, enc, src_io);
  const std::string y = embedding(g, cfg, cfg.tgt_vocab, tgt, shape({d.batch, d.target}), tgt_io);
  g.open(fmt::format("decoder layer, x {}", cfg.n_layers));
  const std::string dec = decoder_layer(g, cfg, d, y, memory);
  g.close();
  const std::string h = final_norm(g, cfg, dec, tgt_io);
  const std::string out = g.node(fmt::format("Linear {} -> {}", cfg.d_model, cfg.tgt_vocab), Kind::linear);
  g.edge(h, out, tgt_io);
  const std::string sm = g.node("log-softmax (in the loss)", Kind::softmax);
  g.edge(out, sm, shape({d.batch, d.target, num(cfg.tgt_vocab)}) + " logits");
  const std::string p = g.node("next-token log-probabilities", Kind::tensor);
  g.edge(sm, p, shape({d.batch, d.target, num(cfg.tgt_vocab)}));
  return g.str();
}

std::string encoder_layer_figure(const Config& cfg, const Dims& d) {
  Dot g(title("One encoder layer", cfg));
  const std::string x = g.node("x: the embedded source, or the layer below", Kind::tensor);
  const std::string y = encoder_layer(g, cfg, d, x);
  const std::string out = g.node(fmt::format("to the next layer ({} in all)", cfg.n_layers), Kind::tensor);
  g.edge(y, out, shape({d.batch, d.source, num(cfg.d_model)}));
  return g.str();
}

std::string decoder_layer_figure(const Config& cfg, const Dims& d) {
  Dot g(title("One decoder layer", cfg));
  const std::string x = g.node("x: the embedded target, or the layer below", Kind::tensor);
  const std::string memory = g.node("the encoder's memory", Kind::tensor);
  const std::string y = decoder_layer(g, cfg, d, x, memory);
  const std::string out = g.node(fmt::format("to the next layer ({} in all)", cfg.n_layers), Kind::tensor);
  g.edge(y, out, shape({d.batch, d.target, num(cfg.d_model)}));
  return g.str();
}

std::string multi_head_figure(const Config& cfg, const Dims& d) {
  const std::string D = num(cfg.d_model), H = num(cfg.n_heads),
                    Dh = num(cfg.n_heads > 0 ? cfg.d_model / cfg.n_heads : 0);
  Dot g(fmt::format("Multi-head attention: D = {}, {}", cfg.d_model, heads(cfg.n_heads, cfg.d_model)));
  const std::string query = g.node("queries' source", Kind::tensor);
  const std::string keys = g.node("keys' and values' source\n(the same x, or the encoder's memory)", Kind::tensor);
  const auto project = [&](const std::string& from, const std::string& name, const std::string& len) {
    const std::string w = g.node(fmt::format("Linear {}: {} -> {}", name, D, D), Kind::linear);
    g.edge(from, w, shape({d.batch, len, D}));
    const std::string split = g.node(fmt::format("split into {} heads\nview, transpose(1, 2)", H), Kind::reshape);
    g.edge(w, split, shape({d.batch, len, D}));
    return split;
  };
  const std::string q = project(query, "W_Q", d.target), k = project(keys, "W_K", d.source),
                    v = project(keys, "W_V", d.source);
  const std::string scores = g.node(fmt::format("Q K^T / sqrt({})", Dh), Kind::attention);
  g.edge(q, scores, shape({d.batch, H, d.target, Dh}) + " Q");
  g.edge(k, scores, shape({d.batch, H, d.source, Dh}) + " K");
  const std::string masked = g.node("blocked keys -> -inf", Kind::attention);
  g.edge(scores, masked, shape({d.batch, H, d.target, d.source}));
  const std::string softmax = g.node("softmax over the keys", Kind::softmax);
  g.edge(masked, softmax, shape({d.batch, H, d.target, d.source}));
  const std::string mix =
      g.node(cfg.dropout > 0 ? fmt::format("weights V\n(dropout {} on the weights)", cfg.dropout) : "weights V",
             Kind::attention);
  g.edge(softmax, mix, shape({d.batch, H, d.target, d.source}) + " weights");
  g.edge(v, mix, shape({d.batch, H, d.source, Dh}) + " V");
  const std::string merge = g.node("merge the heads\ntranspose(1, 2), reshape", Kind::reshape);
  g.edge(mix, merge, shape({d.batch, H, d.target, Dh}));
  const std::string wo = g.node(fmt::format("Linear W_O: {} -> {}", D, D), Kind::linear);
  g.edge(merge, wo, shape({d.batch, d.target, D}));
  const std::string out = g.node("output", Kind::tensor);
  g.edge(wo, out, shape({d.batch, d.target, D}));
  return g.str();
}

std::string add_norm_figure(const Config& cfg, const Dims& d) {
  Dot g(fmt::format("A sublayer f with its residual connection, D = {}: post-norm (the paper's) and pre-norm",
                    cfg.d_model));
  const std::string io = shape({d.batch, d.target, num(cfg.d_model)});
  for (const bool pre : {false, true}) {
    g.open(pre ? "pre-norm: x + dropout(f(LayerNorm(x)))" : "post-norm: LayerNorm(x + dropout(f(x)))");
    const std::string x = g.node("x", Kind::tensor);
    const std::string y = residual(g, x, io, pre, "LayerNorm", cfg.dropout, [&](const std::string& in) {
      const std::string f = g.node("sublayer f\n(attention or feed-forward)", Kind::reshape);
      g.edge(in, f, io);
      return f;
    });
    const std::string out = g.node("output", Kind::tensor);
    g.edge(y, out, io);
    g.close();
  }
  return g.str();
}

std::string feed_forward_figure(const Config& cfg, const Dims& d) {
  Dot g(fmt::format("Position-wise feed-forward network: D = {}, F = {}", cfg.d_model, cfg.d_ff));
  const std::string x = g.node("x: one vector per position", Kind::tensor);
  const std::string w1 = g.node(fmt::format("Linear W_1: {} -> {}", cfg.d_model, cfg.d_ff), Kind::linear);
  g.edge(x, w1, shape({d.batch, d.target, num(cfg.d_model)}));
  const std::string relu = g.node("ReLU", Kind::feed_forward);
  g.edge(w1, relu, shape({d.batch, d.target, num(cfg.d_ff)}));
  const std::string drop = g.node(fmt::format("dropout {}", cfg.dropout), Kind::feed_forward);
  g.edge(relu, drop, shape({d.batch, d.target, num(cfg.d_ff)}));
  const std::string w2 = g.node(fmt::format("Linear W_2: {} -> {}", cfg.d_ff, cfg.d_model), Kind::linear);
  g.edge(drop, w2, shape({d.batch, d.target, num(cfg.d_ff)}));
  const std::string out = g.node("output", Kind::tensor);
  g.edge(w2, out, shape({d.batch, d.target, num(cfg.d_model)}));
  return g.str();
}

std::string language_model_figure(const LMConfig& cfg, const Dims& d) {
  const std::int64_t dh = cfg.n_heads > 0 ? cfg.d_model / cfg.n_heads : 0;
  const std::string norm = cfg.norm == transformer::NormKind::rms ? "RMSNorm" : "LayerNorm";
  const std::string io = shape({d.batch, d.target, num(cfg.d_model)});
  const std::string bias = cfg.bias ? "" : ", no bias";
  const std::string kv = cfg.n_kv_heads == cfg.n_heads ? "multi-head"
                         : cfg.n_kv_heads == 1         ? "multi-query"
                                                       : "grouped-query";
  Dot g(
      fmt::format("Decoder-only language model: N = {}, D = {}, {} query and {} key/value heads of {} ({}), "
                  "{} tokens; KV cache {} bytes per token",
                  cfg.n_layers, cfg.d_model, cfg.n_heads, cfg.n_kv_heads, dh, kv, cfg.vocab,
                  transformer::kv_cache_bytes_per_token(cfg)));
  const std::string ids = g.node("token ids", Kind::tensor);
  const std::string emb = g.node(
      fmt::format("Token embedding {} x {}, times sqrt({})", cfg.vocab, cfg.d_model, cfg.d_model), Kind::embedding);
  g.edge(ids, emb, shape({d.batch, d.target}));
  std::string x = emb;
  if (cfg.positions != transformer::PositionKind::rope) {
    x = g.node(cfg.positions == transformer::PositionKind::learned ? "+ learned positions" : "+ sinusoidal positions",
               Kind::embedding);
    g.edge(emb, x, io);
  }
  g.open(fmt::format("block, x {}", cfg.n_layers));
  const std::string h = residual(g, x, io, cfg.pre_norm, norm, 0, [&](const std::string& in) {
    const std::string q =
        g.node(fmt::format("Linear W_Q: {} -> {} x {}{}", cfg.d_model, cfg.n_heads, dh, bias), Kind::linear);
    const std::string k =
        g.node(fmt::format("Linear W_K, W_V: {} -> {} x {}{}", cfg.d_model, cfg.n_kv_heads, dh, bias), Kind::linear);
    g.edge(in, q, io);
    g.edge(in, k, io);
    std::string qr = q, kr = k;
    const std::string qs = shape({d.batch, num(cfg.n_heads), d.target, num(dh)});
    const std::string ks = shape({d.batch, num(cfg.n_kv_heads), d.target, num(dh)});
    if (cfg.positions == transformer::PositionKind::rope) {
      qr = g.node("RoPE: rotate by position", Kind::embedding);
      kr = g.node("RoPE: rotate by position", Kind::embedding);
      g.edge(q, qr, qs);
      g.edge(k, kr, ks + " K");
    }
    const std::string group =
        cfg.n_kv_heads == cfg.n_heads
            ? std::string("one key/value head per query head")
            : fmt::format("each key/value head shared by {} query heads", cfg.n_heads / cfg.n_kv_heads);
    const std::string a = g.node(fmt::format("causal attention\n{}", group), Kind::attention);
    g.edge(qr, a, qs + " Q");
    if (kr == k) {
      g.edge(k, a, ks + " K, V");
    } else {  // the values are not rotated
      g.edge(kr, a, ks + " K");
      g.edge(k, a, ks + " V");
    }
    const std::string o =
        g.node(fmt::format("Linear W_O: {} x {} -> {}{}", cfg.n_heads, dh, cfg.d_model, bias), Kind::linear);
    g.edge(a, o, qs);
    return o;
  });
  const std::string y = residual(g, h, io, cfg.pre_norm, norm, 0, [&](const std::string& in) {
    if (cfg.feed_forward == transformer::FeedForwardKind::swiglu) {
      const std::int64_t f = transformer::swiglu_hidden(cfg.d_ff);
      const std::string gate = g.node(fmt::format("Linear W_gate: {} -> {}", cfg.d_model, f), Kind::linear);
      const std::string up = g.node(fmt::format("Linear W_up: {} -> {}", cfg.d_model, f), Kind::linear);
      g.edge(in, gate, io);
      g.edge(in, up, io);
      const std::string mul = g.node("SiLU(gate) * up", Kind::feed_forward);
      g.edge(gate, mul, shape({d.batch, d.target, num(f)}));
      g.edge(up, mul, shape({d.batch, d.target, num(f)}));
      const std::string down = g.node(fmt::format("Linear W_down: {} -> {}", f, cfg.d_model), Kind::linear);
      g.edge(mul, down, shape({d.batch, d.target, num(f)}));
      return down;
    }
    const std::string w1 = g.node(fmt::format("Linear {} -> {}", cfg.d_model, cfg.d_ff), Kind::linear);
    g.edge(in, w1, io);
    const std::string act =
        g.node(cfg.feed_forward == transformer::FeedForwardKind::gelu ? "GELU" : "ReLU", Kind::feed_forward);
    g.edge(w1, act, shape({d.batch, d.target, num(cfg.d_ff)}));
    const std::string w2 = g.node(fmt::format("Linear {} -> {}", cfg.d_ff, cfg.d_model), Kind::linear);
    g.edge(act, w2, shape({d.batch, d.target, num(cfg.d_ff)}));
    return w2;
  });
  g.close();
  std::string last = y;
  if (cfg.pre_norm) {
    last = g.node(norm, Kind::norm);
    g.edge(y, last, io);
  }
  const std::string head =
      g.node(cfg.tie_embeddings ? fmt::format("h E^T: the token embedding, tied ({} x {})", cfg.vocab, cfg.d_model)
                                : fmt::format("Linear {} -> {}", cfg.d_model, cfg.vocab),
             Kind::linear);
  g.edge(last, head, io);
  const std::string logits = g.node("logits: position t predicts token t + 1", Kind::tensor);
  g.edge(head, logits, shape({d.batch, d.target, num(cfg.vocab)}));
  return g.str();
}

bool draw_dot(const std::filesystem::path& out_dir, const std::string& name, const std::string& dot) {
  const std::filesystem::path source = write_output(out_dir, name + ".dot", dot);
  const std::filesystem::path svg = out_dir / (name + ".svg");
#if defined(__EMSCRIPTEN__)  // the book's page: no shell, no graphviz; the chapter shows the figure drawn
  fmt::print("(wrote {}; graphviz draws it outside the browser)\n", source.string());
  return false;
#else
  const std::string cmd = fmt::format("dot -Tsvg '{}' -o '{}.tmp' 2>/dev/null && mv '{}.tmp' '{}'", source.string(),
                                      svg.string(), svg.string(), svg.string());
  if (std::system(cmd.c_str()) == 0) {
    fmt::print("wrote {}\n", svg.string());
    return true;
  }
  fmt::print("(install graphviz to draw {}: apt-get install graphviz)\n", svg.string());
  return false;
#endif
}

}  // namespace stepformer::demo
