// flash_attention: the op around the attention kernels (backend.h): checks, contiguous operands, the dropout
// mask's place in the generator, and a backward that hands the saved output and logsumexp back to the kernel.
// What it saves is O(B H Tq (Dv + 1)); the composite of chapter 02 saves the [B, H, Tq, Tk] weights.
// bfloat16 operands give a bfloat16 output with a float32 lse (the kernels sum in float32). Under autocast
// (autograd/autocast.h) float32 operands are cast to bfloat16 and the output comes back as float32, as matmul's.
#include "autograd/autocast.h"
#include "common.h"

namespace stepformer {

namespace {
Tensor flash_attention_in(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& blocked, double scale,
                          bool causal, double dropout_p, bool training, Generator& gen) {
  constexpr const char* name = "flash_attention";
  if (q.dim() != 4 || k.dim() != 4 || v.dim() != 4 || k.size(0) != q.size(0) || v.size(0) != q.size(0) ||
      k.size(1) != q.size(1) || v.size(1) != q.size(1) || k.size(3) != q.size(3) || v.size(2) != k.size(2))
    throw ShapeError(fmt::format("{}: q {}, k {}, v {} do not fit [B, H, Tq, Dh], [B, H, Tk, Dh], [B, H, Tk, Dv]", name,
                                 to_string(q.shape()), to_string(k.shape()), to_string(v.shape())));
  if (!(dropout_p >= 0 && dropout_p <= 1))
    throw ValueError(fmt::format("{}: dropout must be in [0, 1], got {}", name, dropout_p));
  const Shape scores{q.size(0), q.size(1), q.size(2), k.size(2)};
  TensorDesc mask;  // data == nullptr: no mask
  if (blocked.defined()) {
    detail::check_operands(name, {&q, &blocked}, false);
    detail::check_dtype(name, blocked, DType::boolean, "the mask");
    bool fits = blocked.dim() <= 4;
    for (std::int64_t d = 1; fits && d <= blocked.dim(); ++d)
      fits = blocked.size(-d) == 1 || blocked.size(-d) == scores[static_cast<std::size_t>(4 - d)];
    if (!fits)
      throw ShapeError(fmt::format("{}: the mask {} does not broadcast to the scores {}", name,
                                   to_string(blocked.shape()), to_string(scores)));
    mask = detail::broadcast_desc(blocked, scores);
  }
  AttentionConfig cfg;
  cfg.scale = scale;
  cfg.causal = causal;
  if (training && dropout_p > 0) {  // the counters dropout() would take for a [B, H, Tq, Tk] mask
    cfg.dropout = dropout_p;
    cfg.seed = gen.seed();
    cfg.offset = gen.take(static_cast<std::uint64_t>(q.size(0) * q.size(1) * q.size(2) * k.size(2)));
  }
  const Tensor qc = contiguous(q), kc = contiguous(k), vc = contiguous(v);
  Tensor out = detail::empty_as(qc, {q.size(0), q.size(1), q.size(2), v.size(3)});
  Tensor lse = detail::empty_as(qc, {q.size(0), q.size(1), q.size(2)},
                                q.dtype() == DType::bfloat16 ? DType::float32 : q.dtype());
  qc.backend().attention_forward(out.desc(), lse.desc(), qc.desc(), kc.desc(), vc.desc(), mask, cfg);
  record(Op::flash_attention, out, {q, k, v}, {qc, kc, vc, out, lse, blocked},
         [cfg, scores](const Tensor& g, const Tensor& qc, const Tensor& kc, const Tensor& vc, const Tensor& o,
                       const Tensor& lse, const Tensor& blocked) -> Gradients {
           const Tensor gc = contiguous(detail::stored_as(g, qc.dtype()));
           const TensorDesc mask = blocked.defined() ? detail::broadcast_desc(blocked, scores) : TensorDesc{};
           Tensor dq = detail::empty_as(qc, qc.shape()), dk = detail::empty_as(kc, kc.shape()),
                  dv = detail::empty_as(vc, vc.shape());
           qc.backend().attention_backward(dq.desc(), dk.desc(), dv.desc(), gc.desc(), qc.desc(), kc.desc(), vc.desc(),
                                           o.desc(), lse.desc(), mask, cfg);
           return {dq, dk, dv};
         });
  return out;
}
}  // namespace

Tensor flash_attention(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& blocked, double scale,
                       bool causal, double dropout_p, bool training, Generator& gen) {
  constexpr const char* name = "flash_attention";
  detail::check_operands(name, {&q, &k, &v});
  detail::check_floating(name, q);
  if (autocast_dtype() == DType::bfloat16 && q.dtype() == DType::float32)
    return flash_attention_in(q.to(DType::bfloat16), k.to(DType::bfloat16), v.to(DType::bfloat16), blocked, scale,
                              causal, dropout_p, training, gen)
        .to(DType::float32);
  return flash_attention_in(q, k, v, blocked, scale, causal, dropout_p, training, gen);
}

}  // namespace stepformer
