// Chapter 08 — training. Read docs/08_training.md beside this file.
// One small problem (a two-layer network fitting y = tanh(3x) - x/2 on [-1, 1]) trained four ways from the same
// initial weights: SGD with momentum, Adam, AdamW with linear warmup and decay, and Adam with the paper's
// warmup schedule (section 5.3). Writes their loss curves side by side, and the schedules themselves.
// Then a checkpoint: a run stopped halfway, saved, loaded into a fresh model and optimizer and continued,
// must end bit-identical to the run that never stopped.
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <CLI/CLI.hpp>

#include <cmath>
#include <filesystem>
#include <functional>
#include <memory>

#include "autograd/ops.h"
#include "demo.h"
#include "nn/nn.h"

namespace sf = stepformer;
using namespace stepformer::nn;

namespace {

// Linear(1, H) -> GELU -> Linear(H, 1): [N, 1] -> [N, 1].
struct Net : CallableModule<Net> {
  std::shared_ptr<Sequential> body;
  Net(std::int64_t hidden, std::uint64_t seed) {
    sf::Generator gen(seed);  // every run starts from the same weights
    body = register_module("body", std::make_shared<Sequential>(std::vector<std::shared_ptr<UnaryModule>>{
                                       std::make_shared<Linear>(1, hidden, true, gen), std::make_shared<GELU>(),
                                       std::make_shared<Linear>(hidden, 1, true, gen)}));
  }
  sf::Tensor forward(const sf::Tensor& x) { return (*body)(x); }
};

struct Problem {
  sf::Tensor x, y;  // [N, 1] each
};

// One training run: `steps` steps of optimizer + schedule from step `first`; returns the losses.
std::vector<double> train(Net& net, Optimizer& opt, const std::function<double(std::int64_t)>& lr, const Problem& p,
                          std::int64_t first, std::int64_t steps) {
  std::vector<double> losses;
  for (std::int64_t step = first; step < first + steps; ++step) {
    opt.zero_grad();
    const sf::Tensor loss = mse_loss(net(p.x), p.y);
    loss.backward();
    opt.set_lr(lr(step));
    opt.step();
    losses.push_back(loss.item());
  }
  return losses;
}

// The paper's learning rate, lr = d_model^-0.5 * min(step^-0.5, step * warmup^-1.5), for its two models:
// linear growth for `warmup` steps, then decay as 1/sqrt(step). The peak is at step = warmup.
void paper_schedules(const sf::demo::CommonOptions& common) {
  std::vector<sf::demo::Series> series;
  fmt::print("\n== the paper's schedule (section 5.3), warmup 4000\n");
  for (const std::int64_t d_model : {512, 1024}) {
    const NoamSchedule noam{.d_model = d_model, .warmup = 4000};
    sf::demo::Series s{fmt::format("d_model {} (the {} model)", d_model, d_model == 512 ? "base" : "big"), {}, {}};
    for (std::int64_t step = 1; step <= 40000; step += step < 8000 ? 40 : 400) {
      s.x.push_back(static_cast<double>(step));
      s.values.push_back(noam(step));
    }
    fmt::print("d_model {:4d}: lr(1) = {:.2e}, peak lr(4000) = {:.2e}, lr(16000) = {:.2e} (half the peak)\n", d_model,
               noam(1), noam(4000), noam(16000));
    series.push_back(std::move(s));
  }
  sf::demo::write_output(common.out, "08_noam_schedule.svg",
                         sf::demo::line_chart_svg(series, "the paper's learning rate: warmup 4000, then 1/sqrt(step)",
                                                  "step", "learning rate"));
}

// The target distribution of label smoothing, read back from the engine's own cross_entropy: with all
// logits 0 the softmax is uniform, and the gradient of the mean loss over one row is softmax - target, so
// target = 1/V - gradient.
void label_smoothing_target(const sf::demo::CommonOptions& common) {
  const std::int64_t V = 8, target = 3;
  const double s = 0.1;
  std::vector<double> rows;
  fmt::print("\n== label smoothing: the target the loss pulls toward, V = {}, true class {}\n", V, target);
  for (const double smoothing : {0.0, s}) {
    sf::Tensor logits = sf::zeros({1, V}, {sf::DType::float64}).set_requires_grad();
    sf::cross_entropy(logits, sf::from_vector(std::vector<std::int64_t>{target}, {1}, {sf::DType::int64}), -100,
                      smoothing)
        .backward();
    const auto g = logits.grad().to_vector<double>();
    std::vector<double> q;
    for (double gi : g)
      q.push_back(std::abs(1.0 / static_cast<double>(V) - gi) < 1e-12 ? 0.0 : 1.0 / static_cast<double>(V) - gi);
    double entropy = 0;
    for (double qi : q) entropy -= qi > 0 ? qi * std::log(qi) : 0.0;
    fmt::print("s = {:.1f}: [{:.4f}]  smallest possible loss (its entropy) {:.3f}\n", smoothing, fmt::join(q, ", "),
               entropy);
    rows.insert(rows.end(), q.begin(), q.end());
  }
  fmt::print(
      "The true class keeps 1 - s + s/V = {:.4f}; every class gets s/V = {:.4f}. A trained model's loss\n"
      "levels off at that entropy, not at 0: chapter 07's training curves stop above it.\n",
      1 - s + s / static_cast<double>(V), s / static_cast<double>(V));
  std::vector<std::string> classes;
  for (std::int64_t c = 0; c < V; ++c) classes.push_back(c == target ? "true" : std::to_string(c));
  sf::demo::write_output(common.out, "08_label_smoothing.svg",
                         sf::demo::heatmap_svg(sf::from_vector(rows, {2, V}), {"s = 0", "s = 0.1"}, classes,
                                               "the target distribution over V = 8 classes (true class 3)"));
}

// Two Adam steps on one parameter by hand (docs/08_training.md, "Adam, two steps by hand"): p = 1, the gradients
// 0.5 then -0.1, lr 0.1, beta1 0.9, beta2 0.999, eps 1e-8; each line's moments by the formulas beside the engine's
// parameter after its step. The loss p * g has the gradient g.
void adam_by_hand() {
  const Adam::Options o{.lr = 0.1, .beta1 = 0.9, .beta2 = 0.999, .eps = 1e-8};
  sf::Tensor p = sf::from_vector(std::vector<double>{1.0}, {1}, {sf::DType::float64}).set_requires_grad();
  Adam adam({{"p", p}}, o);
  double value = 1.0, m = 0, v = 0;
  fmt::print("\n== Adam, two steps by hand: p = 1, lr {}, beta1 {}, beta2 {}, eps {:g}\n", o.lr, o.beta1, o.beta2,
             o.eps);
  fmt::print("{:>4} {:>5} {:>9} {:>11} {:>9} {:>9} {:>9} {:>10} {:>10}\n", "step", "g", "m", "v", "m_hat", "v_hat",
             "update", "p by hand", "Adam's p");
  int t = 0;
  for (const double g : {0.5, -0.1}) {
    ++t;
    m = o.beta1 * m + (1 - o.beta1) * g;
    v = o.beta2 * v + (1 - o.beta2) * g * g;
    const double m_hat = m / (1 - std::pow(o.beta1, t)), v_hat = v / (1 - std::pow(o.beta2, t));
    const double move = o.lr * m_hat / (std::sqrt(v_hat) + o.eps);
    value -= move;
    adam.zero_grad();
    sf::sum(p * g).backward();
    adam.step();
    fmt::print("{:>4} {:>5} {:>9.6f} {:>11.8f} {:>9.6f} {:>9.6f} {:>9.6f} {:>10.6f} {:>10.6f}\n", t, g, m, v, m_hat,
               v_hat, move, value, p.item());
  }
  fmt::print(
      "Step 1 moves p by lr whatever the gradient's size (m_hat / sqrt(v_hat) = g / |g|); step 2's gradient points\n"
      "the other way, yet p keeps moving down: the first moment still remembers 0.5.\n");
}

}  // namespace

int main(int argc, char** argv) try {
  sf::demo::CommonOptions common;
  std::int64_t steps = 300, hidden = 32, warmup = 50;
  CLI::App app{"08_training: optimizers, warmup schedules and an exact checkpoint resume, on a small regression"};
  app.option_defaults()->always_capture_default();  // --help shows every default
  app.add_option("--steps", steps, "training steps per run")->capture_default_str()->check(CLI::Range(2, 100000));
  app.add_option("--hidden", hidden, "hidden units")->capture_default_str()->check(CLI::Range(1, 4096));
  app.add_option("--warmup", warmup, "warmup steps of the two schedules")
      ->capture_default_str()
      ->check(CLI::Range(1, 100000));
  sf::demo::add_common_options(app, common);
  CLI11_PARSE(app, argc, argv);

  sf::Generator data_gen(common.seed);
  Problem p;
  p.x = sf::uniform({128, 1}, -1.0, 1.0, data_gen);  // [128, 1]
  p.y = sf::tanh(p.x * 3.0) - p.x * 0.5;             // [128, 1]

  // The four runs. Each learning rate is a function of the 1-based step (nn/schedule.h).
  const LinearWarmup linear{.peak = 0.02, .warmup = warmup, .total = steps};
  // The paper's schedule peaks at factor / sqrt(d_model * warmup); "d_model" here is the hidden width.
  const NoamSchedule noam{.d_model = hidden, .warmup = warmup, .factor = 0.02 * std::sqrt(double(hidden * warmup))};
  struct Run {
    std::string name;
    std::function<std::unique_ptr<Optimizer>(Net&)> make;
    std::function<double(std::int64_t)> lr;
  };
  const std::vector<Run> runs = {
      {"SGD, momentum 0.9, lr 0.05",
       [](Net& n) { return std::make_unique<SGD>(n.named_parameters(), SGD::Options{.lr = 0.05, .momentum = 0.9}); },
       [](std::int64_t) { return 0.05; }},
      {"Adam, lr 0.01", [](Net& n) { return std::make_unique<Adam>(n.named_parameters(), Adam::Options{}); },
       [](std::int64_t) { return 0.01; }},
      {"AdamW, linear warmup + decay",
       [](Net& n) { return std::make_unique<AdamW>(n.named_parameters(), AdamW::Options{}); }, linear},
      {"Adam, the paper's warmup",
       [](Net& n) {
         return std::make_unique<Adam>(n.named_parameters(), Adam::Options{.beta1 = 0.9, .beta2 = 0.98, .eps = 1e-9});
       },
       noam},
  };
  std::vector<sf::demo::Series> curves, schedules;
  fmt::print("{:<32} {:>12} {:>12}\n", "run", "loss step 1", fmt::format("step {}", steps));
  for (const Run& r : runs) {
    Net net(hidden, common.seed);
    const auto opt = r.make(net);
    const std::vector<double> losses = train(net, *opt, r.lr, p, 1, steps);
    fmt::print("{:<32} {:>12.5f} {:>12.5f}\n", r.name, losses.front(), losses.back());
    curves.push_back({r.name, losses});
    std::vector<double> lrs;
    for (std::int64_t s = 1; s <= steps; ++s) lrs.push_back(r.lr(s));
    schedules.push_back({r.name, lrs});
  }
  sf::demo::write_output(
      common.out, "08_loss_curves.svg",
      sf::demo::line_chart_svg(curves, "training loss (mean squared error), four optimizers", "step", "loss"));
  sf::demo::write_output(common.out, "08_learning_rates.svg",
                         sf::demo::line_chart_svg(schedules, "learning rate per step", "step", "learning rate"));
  paper_schedules(common);
  label_smoothing_target(common);
  adam_by_hand();

  // A checkpoint in the middle of a run: save, load into fresh objects, continue. Adam's moments and step
  // counts are in the file (optimizer.*), so the continuation is the same computation, bit for bit.
  const std::int64_t half = steps / 2;
  Net straight(hidden, common.seed);
  AdamW straight_opt(straight.named_parameters(), {});
  const double straight_last = train(straight, straight_opt, linear, p, 1, steps).back();

  Net first(hidden, common.seed);
  AdamW first_opt(first.named_parameters(), {});
  train(first, first_opt, linear, p, 1, half);
  std::filesystem::create_directories(common.out);
  const std::filesystem::path path = common.out / "08_checkpoint.safetensors";
  save_checkpoint(path, first, &first_opt, {{"step", std::to_string(half)}});
  fmt::print("wrote {}\n", path.string());
  Net resumed(hidden, common.seed + 1);  // other weights: the checkpoint must overwrite all of them
  AdamW resumed_opt(resumed.named_parameters(), {});
  const Metadata meta = load_checkpoint(path, resumed, &resumed_opt);
  const std::int64_t from = std::stoll(meta.at("step")) + 1;
  const double resumed_last = train(resumed, resumed_opt, linear, p, from, steps - half).back();
  const double weights_diff = [&] {
    double worst = 0;
    const auto a = straight.named_parameters(), b = resumed.named_parameters();
    for (std::size_t i = 0; i < a.size(); ++i)
      worst = std::max(worst, std::sqrt(sf::max(sf::pow(a[i].second - b[i].second, 2.0)).item()));
    return worst;
  }();
  fmt::print("\ncheckpoint at step {} of {}: resumed run ends at loss {:.6f}, the uninterrupted run at {:.6f}\n", half,
             steps, resumed_last, straight_last);
  fmt::print("{} (max |weight difference| {})\n",
             weights_diff == 0 && resumed_last == straight_last
                 ? "resumed run is bit-identical to the uninterrupted one"
                 : "resumed run DIFFERS from the uninterrupted one",
             weights_diff);
  return weights_diff == 0 && resumed_last == straight_last ? 0 : 1;
} catch (const std::exception& e) {
  return stepformer::demo::report_error("08_training", e);
}
