// Chapter 10 — chapter 07's numerals task trained by several processes at once. Read docs/10_distributed.md.
//
//   mpirun -np 2 build/release/bin/10_distributed                  two processes on this machine
//   mpirun -np 2 build/release/bin/10_distributed --zero           ZeRO-1: Adam's moments split over the ranks
//   mpirun -np 8 --hostfile hosts build/release/bin/10_distributed   eight, on the machines listed in `hosts`
//   build/release/bin/10_distributed                               one process (the same program, size 1)
//
// Every rank draws the same global batch (same data seed) and keeps its own slice of it, so together the
// ranks see what one process with the global batch would. Rank 0 prints and writes the checkpoints.
#include <fmt/format.h>
#include <omp.h>
#include <sys/resource.h>
#include <unistd.h>
#include <CLI/CLI.hpp>

#include <chrono>

#include "demo.h"
#include "distributed/train.h"
#include "distributed/zero.h"

namespace sf = stepformer;
using namespace stepformer::transformer;
using stepformer::distributed::Communicator;
using Clock = std::chrono::steady_clock;

namespace {

struct Options {
  sf::demo::CommonOptions common;
  std::int64_t steps = 600, batch = 32, warmup = 200, report_every = 50, save_every = 0;
  std::int64_t d_model = 64, layers = 2, heads = 4, d_ff = 256;
  double dropout = 0.0;
  int threads = 1;                 // per process: two processes of one thread each fill this 2-core machine
  std::string precision = "fp32";  // bf16: autocast (chapter 11); the gradients sent are float32 either way
  bool zero = false, no_overlap = false;
  std::size_t bucket_kb = 1024;
  std::filesystem::path save, load;
};

double peak_rss_mb() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_maxrss) / 1024.0;  // Linux: kilobytes
}

// Chapter 10's picture: where each gradient goes, drawn from the trainer's own layout, every width an element
// count. Data parallel: the parameters in backward's order (reverse registration order) packed into buckets of
// at most --bucket-kb, each all-reduced as soon as it is full. ZeRO-1: the flat vector in registration order cut
// into one equal slice per rank (the last padded), each reduced to the rank that owns it.
struct Segment {
  std::string label, detail;  // the name, and a second line where the segment is wide enough
  std::int64_t elements;
  std::vector<std::int64_t> cuts;  // element offsets inside the segment where a parameter ends
};
std::string strip_svg(const std::string& title, const std::string& caption, const std::vector<Segment>& segments) {
  const double width = 900, left = 10, top = 40, height = 46;
  std::int64_t total = 0;
  for (const Segment& seg : segments) total += seg.elements;
  std::string svg = fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{0}\" height=\"130\" viewBox=\"0 0 {0} 130\" "
      "font-family=\"Helvetica, sans-serif\" font-size=\"12\">\n<text x=\"{1}\" y=\"20\" font-size=\"14\">{2}</text>\n",
      width + 2 * left, left, title);
  double x = left;
  for (std::size_t i = 0; i < segments.size(); ++i) {
    const double w = (width * static_cast<double>(segments[i].elements)) / static_cast<double>(total);
    svg += fmt::format("<rect x=\"{:.1f}\" y=\"{}\" width=\"{:.1f}\" height=\"{}\" fill=\"{}\" stroke=\"#333\"/>\n", x,
                       top, w, height, segments[i].label.empty() ? "#dddddd" : sf::demo::region_fill(i));
    for (const std::int64_t cut : segments[i].cuts) {
      const double cx = x + w * static_cast<double>(cut) / static_cast<double>(segments[i].elements);
      svg += fmt::format("<line x1=\"{0:.1f}\" x2=\"{0:.1f}\" y1=\"{1}\" y2=\"{2}\" stroke=\"white\"/>\n", cx, top,
                         top + height);
    }
    const Segment& seg = segments[i];
    const bool wide = w > 7.0 * static_cast<double>(std::max(seg.label.size(), seg.detail.size()));
    if (!seg.label.empty() && w > 14)
      svg += fmt::format("<text x=\"{:.1f}\" y=\"{}\" text-anchor=\"middle\">{}</text>\n", x + w / 2,
                         top + (wide ? 19 : 27), wide ? seg.label : std::to_string(i));
    if (wide)
      svg += fmt::format("<text x=\"{:.1f}\" y=\"{}\" text-anchor=\"middle\">{}</text>\n", x + w / 2, top + 35,
                         seg.detail);
    x += w;
  }
  return svg + fmt::format("<text x=\"{}\" y=\"{}\">{}</text>\n</svg>\n", left, top + height + 28, caption);
}

void gradient_picture(const Options& o, const sf::distributed::DistributedTrainer& trainer, Transformer& model,
                      int ranks) {
  const auto params = model.named_parameters();
  std::int64_t total = 0;
  for (const auto& [name, p] : params) total += p.numel();
  std::vector<Segment> segments;
  if (const auto* dp = trainer.data_parallel()) {
    for (std::size_t b = 0; b < dp->buckets().size(); ++b) {
      const auto& bucket = dp->buckets()[b];
      Segment seg{
          fmt::format("bucket {}", b), fmt::format("{} tensors", bucket.params.size()), bucket.flat.numel(), {}};
      for (std::size_t k = 1; k < bucket.offsets.size(); ++k) seg.cuts.push_back(bucket.offsets[k]);
      segments.push_back(std::move(seg));
    }
    sf::demo::write_output(
        o.common.out, "10_buckets.svg",
        strip_svg(fmt::format("data parallel: {} gradients ({} floats) in {} buckets of at most {} KiB", params.size(),
                              total, segments.size(), o.bucket_kb),
                  "left to right: backward's order (the last layer's gradients first); white lines end a tensor; "
                  "each bucket is all-reduced when full (a narrow one shows its number only)",
                  segments));
    return;
  }
  const auto& zero = dynamic_cast<const sf::distributed::ZeroAdam&>(trainer.optimizer());
  const std::int64_t shard = zero.shard_size();
  for (int r = 0; r < ranks; ++r) {
    const std::int64_t begin = shard * r, end = std::min(total, begin + shard);
    Segment seg{fmt::format("rank {}", r), fmt::format("elements {} to {}", begin, end - 1), end - begin, {}};
    std::int64_t at = 0;
    for (const auto& [name, p] : params) {
      at += p.numel();
      if (at > begin && at < end) seg.cuts.push_back(at - begin);
    }
    segments.push_back(std::move(seg));
  }
  if (shard * ranks > total) segments.push_back({"", "", shard * ranks - total, {}});  // the padding
  sf::demo::write_output(
      o.common.out, "10_zero_shards.svg",
      strip_svg(fmt::format("ZeRO-1 on {} ranks: {} floats in {} slices of {}", ranks, total, ranks, shard),
                fmt::format("left to right: registration order; white lines end a tensor; each rank keeps Adam's "
                            "moments for its slice only ({} chunks reduced to their owners)",
                            zero.chunk_count()),
                segments));
}

int run(const Options& o, Communicator& comm) {
  const bool root = comm.rank() == 0;
  fmt::print("rank {} of {} on {} (pid {})\n", comm.rank(), comm.size(), comm.host(), getpid());
  std::fflush(stdout);
  const NumeralVocabularies vocab = numeral_vocabularies();
  const NumeralTask task(o.common.seed);
  Config cfg;
  cfg.src_vocab = vocab.src.size();
  cfg.tgt_vocab = vocab.tgt.size();
  cfg.n_layers = o.layers, cfg.d_model = o.d_model, cfg.d_ff = o.d_ff, cfg.n_heads = o.heads;
  cfg.dropout = o.dropout, cfg.max_len = 64, cfg.pad_id = Vocabulary::kPad;
  // The model's generator initialises the weights (rank 0's win: the trainer broadcasts them) and draws the
  // dropout masks, which must differ between ranks; the data generator must be the same on every rank.
  sf::Generator gen(o.common.seed + static_cast<std::uint64_t>(comm.rank()) * 1000003), data_gen(o.common.seed + 1);
  Transformer model(cfg, gen);
  sf::distributed::DistributedOptions d;
  d.zero = o.zero;
  d.data_parallel = {.bucket_bytes = o.bucket_kb * 1024, .overlap = !o.no_overlap};
  sf::distributed::DistributedTrainer trainer(
      model, comm, {.warmup = o.warmup, .precision = sf::transformer::precision_from_name(o.precision)}, d);
  const sf::transformer::NamedGenerators shared{{"data", &data_gen}}, own{{"model", &gen}};
  if (!o.load.empty()) {
    const std::string change = trainer.load(o.load, shared, own);
    if (root) fmt::print("resumed from {} at step {}\n", o.load.string(), trainer.steps_done());
    if (root && !change.empty()) fmt::print("note: {}\n", change);
  }
  if (root)
    fmt::print("== numerals on {} processes x {} thread(s), {}: {} parameters, batch {} per rank ({} in all), {}{}\n",
               comm.size(), o.threads, o.precision, model.parameter_count(), o.batch, o.batch * comm.size(),
               o.zero ? "ZeRO-1" : "data parallel",
               o.zero         ? ""
               : o.no_overlap ? ", no overlap"
                              : ", overlapped");
  if (root) {  // docs/10_distributed.md, "All-reduce, and what it costs": the ring's traffic for this gradient
    const std::int64_t n = 4 * model.parameter_count(), N = comm.size();
    fmt::print(
        "a ring all-reduce of the {} bytes of gradients on {} ranks: each rank sends 2 (N - 1) / N x n = {} "
        "bytes per step, in 2 (N - 1) = {} messages per bucket\n",
        n, N, 2 * (N - 1) * n / N, 2 * (N - 1));
  }
  const auto start = Clock::now();
  std::int64_t tokens = 0, first_step = trainer.steps_done();
  double loss = 0;
  while (trainer.steps_done() < o.steps) {
    const std::vector<Pair> global = task.train_batch(o.batch * comm.size(), data_gen);
    const auto mine = global.begin() + comm.rank() * o.batch;
    loss = trainer.step(make_batch({mine, mine + o.batch}, vocab.src, vocab.tgt));
    tokens += trainer.last_global_tokens();
    const std::int64_t s = trainer.steps_done();
    if (!o.save.empty() && o.save_every > 0 && s % o.save_every == 0) trainer.save(o.save, shared, own);
    if (root && (s % o.report_every == 0 || s == o.steps)) {
      const double elapsed = std::chrono::duration<double>(Clock::now() - start).count();
      fmt::print("step {:5d}/{}  loss {:.3f}  {:7.0f} tok/s  {:.2f} ms/step\n", s, o.steps, loss, tokens / elapsed,
                 1000 * elapsed / static_cast<double>(s - first_step));
      std::fflush(stdout);
    }
  }
  const double elapsed = std::chrono::duration<double>(Clock::now() - start).count();
  if (!o.save.empty()) trainer.save(o.save, shared, own);
  const double waiting = trainer.data_parallel() ? trainer.data_parallel()->seconds_waiting() : 0.0;
  const double rss = comm.all_reduce_sum(peak_rss_mb()) / comm.size();
  if (root) gradient_picture(o, trainer, model, comm.size());
  if (root) {
    fmt::print("final loss {:.4f}; {:.0f} target tokens/s over {} steps; mean peak RSS per rank {:.0f} MB\n", loss,
               tokens / elapsed, trainer.steps_done() - first_step, rss);
    if (trainer.data_parallel())
      fmt::print("rank 0 waited {:.2f} s ({:.1f}% of the run) for gradients after backward\n", waiting,
                 100 * waiting / elapsed);
    const auto test = task.test_set(200);
    fmt::print("numerals exact match on {} held-out numbers: {:.1f}%\n", test.size(),
               100 * exact_match(model, test, vocab.src, vocab.tgt));
    if (!o.save.empty()) fmt::print("checkpoint: {}\n", o.save.string());
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  CLI::App app{"10_distributed: the numerals task trained by several processes (run it under mpirun)"};
  app.option_defaults()->always_capture_default();     // --help shows every default
  sf::demo::add_common_options(app, o.common, false);  // its own --threads
  app.add_option("--steps", o.steps, "training steps")->capture_default_str();
  app.add_option("--batch", o.batch, "pairs per batch on each rank")->capture_default_str();
  app.add_option("--warmup", o.warmup, "warmup steps of the schedule")->capture_default_str();
  app.add_option("--d-model", o.d_model, "model size")->capture_default_str();
  app.add_option("--layers", o.layers, "encoder and decoder layers")->capture_default_str();
  app.add_option("--heads", o.heads, "attention heads")->capture_default_str();
  app.add_option("--d-ff", o.d_ff, "feed-forward size")->capture_default_str();
  app.add_option("--dropout", o.dropout, "dropout")->capture_default_str();
  app.add_option("--threads", o.threads, "CPU threads per process")->capture_default_str();
  app.add_option("--precision", o.precision, "fp32, or bf16: autocast; the gradients sent stay float32")
      ->check(CLI::IsMember({"fp32", "bf16"}))
      ->capture_default_str();
  app.add_flag("--zero", o.zero, "ZeRO-1: shard Adam's moments over the ranks");
  app.add_flag("--no-overlap", o.no_overlap, "all-reduce the gradients after backward instead of during it");
  app.add_option("--bucket-kb", o.bucket_kb, "gradient bucket size in KiB")->capture_default_str();
  app.add_option("--report-every", o.report_every, "steps between progress lines")->capture_default_str();
  app.add_option("--save", o.save, "write a checkpoint at the end (and every --save-every steps)");
  app.add_option("--save-every", o.save_every, "steps between checkpoints (0: only at the end)");
  app.add_option("--load", o.load, "resume from a checkpoint");
  CLI11_PARSE(app, argc, argv);
  Communicator comm;
  try {
    omp_set_num_threads(o.threads);
    return run(o, comm);
  } catch (const std::exception& e) {
    fmt::print(stderr, "10_distributed (rank {} of {}): {}\n", comm.rank(), comm.size(), e.what());
    comm.abort(1);  // the other ranks may be waiting in a collective for this one
  }
}
