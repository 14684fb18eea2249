// flash_attention: the op around the attention kernels (backend.h): checks, contiguous operands, the dropout
// mask's place in the generator, and a backward that hands the saved output and logsumexp back to the kernel.
// What it saves is O(B H Tq (Dv + 1)); the composite of chapter 02 saves the [B, H, Tq, Tk] weights.
// bfloat16 operands give a bfloat16 output with a float32 lse (the kernels sum in float32). Under autocast
// (autograd/autocast.h) float32 operands are cast to bfloat16 and the output comes back as float32, as matmul's.
#include "autograd/autocast.h"
#include "common.h"

namespace stepformer {

namespace {
// k or v as the kernels read it: each head's rows packed (row j at j * D), the heads anywhere, as in the first Tk
// rows of a longer KV cache; copied only when not so.
Tensor packed_rows(const Tensor& x) {
  const bool packed = (x.size(3) == 1 || x.strides()[3] == 1) && (x.size(2) == 1 || x.strides()[2] == x.size(3));
  return packed ? x : contiguous(x);
}

Tensor flash_attention_in(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& blocked, double scale,
                          bool causal, double dropout_p, bool training, Generator& gen) {
  constexpr const char* name = "flash_attention";
  if (q.dim() != 4 || k.dim() != 4 || v.dim() != 4 || k.size(0) != q.size(0) || v.size(0) != q.size(0) ||
      k.size(1) < 1 || q.size(1) % k.size(1) != 0 || v.size(1) != k.size(1) || k.size(3) != q.size(3) ||
      v.size(2) != k.size(2))
    throw ShapeError(
        fmt::format("{}: q {}, k {}, v {} do not fit [B, H, Tq, Dh], [B, Hkv, Tk, Dh], [B, Hkv, Tk, Dv] "
                    "with Hkv dividing H",
                    name, to_string(q.shape()), to_string(k.shape()), to_string(v.shape())));
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
  const Tensor qc = contiguous(q), kc = packed_rows(k), vc = packed_rows(v);
  Tensor out = detail::empty_as(qc, {q.size(0), q.size(1), q.size(2), v.size(3)});
  Tensor lse = detail::empty_as(qc, {q.size(0), q.size(1), q.size(2)},
                                q.dtype() == DType::bfloat16 ? DType::float32 : q.dtype());
  qc.backend().attention_forward(out.desc(), lse.desc(), qc.desc(), kc.desc(), vc.desc(), mask, cfg);
  record(Op::flash_attention, out, {q, k, v}, {qc, kc, vc, out, lse, blocked},
         [cfg, scores](const Tensor& g, const Tensor& qc, const Tensor& kc, const Tensor& vc, const Tensor& o,
                       const Tensor& lse, const Tensor& blocked) -> Gradients {
           const Tensor gc = contiguous(detail::stored_as(g, qc.dtype()));
           const TensorDesc mask = blocked.defined() ? detail::broadcast_desc(blocked, scores) : TensorDesc{};
           // One dk, dv per query head, then each group's summed: a shared head's gradient is its readers'.
           const std::int64_t B = qc.size(0), H = qc.size(1), Hkv = kc.size(1), Tk = kc.size(2);
           Tensor dq = detail::empty_as(qc, qc.shape()), dk = detail::empty_as(kc, {B, H, Tk, kc.size(3)}),
                  dv = detail::empty_as(vc, {B, H, Tk, vc.size(3)});
           qc.backend().attention_backward(dq.desc(), dk.desc(), dv.desc(), gc.desc(), qc.desc(), kc.desc(), vc.desc(),
                                           o.desc(), lse.desc(), mask, cfg);
           if (Hkv == H) return {dq, dk, dv};
           const auto group_sum = [&](const Tensor& d) { return sum(view(d, {B, Hkv, H / Hkv, Tk, d.size(3)}), {2}); };
           return {dq, group_sum(dk), group_sum(dv)};
         });
  return out;
}
}  // namespace

Tensor flash_attention(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& blocked, double scale,
                       bool causal, double dropout_p, bool training, Generator& gen) {
  constexpr const char* name = "flash_attention";
  detail::check_operands(name, {&q, &k, &v}, /*same_dtype=*/false);
  for (const Tensor* t : {&q, &k, &v}) detail::check_floating(name, *t);
  // Under autocast float32 queries may meet keys and values kept in bfloat16 already (a KV cache, chapter 12).
  if (autocast_dtype() == DType::bfloat16 && q.dtype() == DType::float32 && k.dtype() != DType::float64 &&
      v.dtype() != DType::float64)
    return flash_attention_in(q.to(DType::bfloat16), k.to(DType::bfloat16), v.to(DType::bfloat16), blocked, scale,
                              causal, dropout_p, training, gen)
        .to(DType::float32);
  detail::check_operands(name, {&q, &k, &v});  // one dtype
  return flash_attention_in(q, k, v, blocked, scale, causal, dropout_p, training, gen);
}

}  // namespace stepformer
