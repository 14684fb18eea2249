#pragma once
// Grad mode: while disabled (NoGradGuard), ops record no graph, as torch.no_grad().
// Per OS thread, like PyTorch's.
namespace stepformer {

bool grad_enabled();

class NoGradGuard {
 public:
  NoGradGuard();
  ~NoGradGuard();
  NoGradGuard(const NoGradGuard&) = delete;
  NoGradGuard& operator=(const NoGradGuard&) = delete;

 private:
  bool previous_;
};

}  // namespace stepformer
