// The freedict task of the 07 demo: see freedict.h.
#include "freedict.h"

#include <algorithm>
#include <fstream>
#include <set>

#include "autograd/grad_mode.h"
#include "autograd/ops.h"
#include "training.h"
#include "transformer/decoding.h"

namespace ch07 {

FreedictData::FreedictData(const Options& o) {
  if (!std::filesystem::exists(o.dict))
    throw std::invalid_argument(
        fmt::format("{} is missing: install Debian's dict-freedict-deu-eng (`./run demo freedict` does) or pass --dict",
                    o.dict.string()));
  words = split_pairs(freedict_examples(read_gzip_file(o.dict)), kMaxWords);
  if (o.tokens == "words") {
    std::vector<std::vector<std::string>> s, t;
    for (const auto& p : words.train) s.push_back(p.src), t.push_back(p.tgt);
    src.vocab = Vocabulary::build(s, 2);
    tgt.vocab = Vocabulary::build(t, 2);
  } else {  // the training split only: no valid or test sentence shapes the pieces
    std::vector<std::string> de, en;
    for (const auto& p : words.train) de.push_back(join(p.src)), en.push_back(join(p.tgt));
    const SubwordOptions so{.model_type = o.tokens, .vocab_size = o.vocab};
    if (o.joint_vocab) {
      de.insert(de.end(), en.begin(), en.end());
      src.subwords = tgt.subwords = Subwords::train(de, so);
    } else {
      src.subwords = Subwords::train(de, so);
      tgt.subwords = Subwords::train(en, so);
    }
    src.vocab = src.subwords->vocabulary();
    tgt.vocab = tgt.subwords->vocabulary();
  }
  for (auto [from, to] :
       {std::pair{&words.train, &tokens.train}, {&words.valid, &tokens.valid}, {&words.test, &tokens.test}})
    for (const Pair& p : *from) to->push_back({src.tokens(p.src), tgt.tokens(p.tgt)});
}

namespace {

// Translations as words, greedy (beam 0) or by beam search.
std::vector<std::vector<std::string>> translate_words(Transformer& model, const FreedictData& d,
                                                      const std::vector<Pair>& pairs, std::int64_t beam, double alpha) {
  const auto out = beam > 0 ? beam_translations(model, pairs, d.src.vocab, d.tgt.vocab, beam, alpha)
                            : greedy_translations(model, pairs, d.src.vocab, d.tgt.vocab);
  std::vector<std::vector<std::string>> words;
  for (const auto& tokens : out) words.push_back(d.tgt.words(tokens));
  return words;
}

// A model that has collapsed answers every sentence alike, most often with EOS first (an empty translation).
struct Collapse {
  double empty = 0;          // fraction of empty translations
  std::size_t distinct = 0;  // distinct translations
  bool collapsed() const { return empty > 0.5 || distinct <= 1; }
};
Collapse collapse_of(const std::vector<std::vector<std::string>>& translations) {
  std::set<std::vector<std::string>> distinct(translations.begin(), translations.end());
  const auto empty = std::count_if(translations.begin(), translations.end(), [](const auto& t) { return t.empty(); });
  return {translations.empty() ? 0.0 : static_cast<double>(empty) / static_cast<double>(translations.size()),
          distinct.size()};
}

void print_bleu(const std::string& how, std::size_t pairs, const BleuScore& bleu) {
  fmt::print(
      "freedict test BLEU ({}, {} pairs, lower-cased words): {:.2f}  (n-gram precisions "
      "{:.1f}/{:.1f}/{:.1f}/{:.1f}%, "
      "brevity penalty {:.3f})\n",
      how, pairs, bleu.bleu, 100 * bleu.precisions[0], 100 * bleu.precisions[1], 100 * bleu.precisions[2],
      100 * bleu.precisions[3], bleu.brevity_penalty);
}

// One sentence per line: {train,valid,test}.{de,en} as the model's tokens, vocab.{de,en} one token per id,
// test.ref the references as words, test.ours our greedy translations as words.
void export_data(const std::filesystem::path& dir, const FreedictData& d,
                 const std::vector<std::vector<std::string>>& greedy) {
  auto lines = [](const auto& sentences) {
    std::string text;
    for (const auto& s : sentences) text += join(s) + "\n";
    return text;
  };
  for (const auto& [name, pairs] :
       {std::pair{"train", &d.tokens.train}, {"valid", &d.tokens.valid}, {"test", &d.tokens.test}}) {
    std::vector<std::vector<std::string>> de, en;
    for (const Pair& p : *pairs) de.push_back(p.src), en.push_back(p.tgt);
    sf::demo::write_output(dir, std::string(name) + ".de", lines(de));
    sf::demo::write_output(dir, std::string(name) + ".en", lines(en));
  }
  for (const auto& [name, vocab] : {std::pair{"vocab.de", &d.src.vocab}, {"vocab.en", &d.tgt.vocab}}) {
    std::vector<std::vector<std::string>> tokens;
    for (std::int64_t id = 0; id < vocab->size(); ++id) tokens.push_back({vocab->token(id)});
    sf::demo::write_output(dir, name, lines(tokens));
  }
  std::vector<std::vector<std::string>> references;
  for (const auto& p : d.words.test) references.push_back(p.tgt);
  sf::demo::write_output(dir, "test.ref", lines(references));
  sf::demo::write_output(dir, "test.ours", lines(greedy));
}

}  // namespace

int run_freedict(Options o) {
  const auto read_start = Clock::now();
  const FreedictData data(o);
  const auto &train = data.tokens.train, &valid = data.tokens.valid, &test = data.tokens.test;  // lambdas capture test
  const std::int64_t steps = o.steps;
  sf::Generator gen(o.common.seed), data_gen(o.common.seed + 1);
  Transformer model(model_config(o, data.src.vocab, data.tgt.vocab), gen, o.tie_output);
  Trainer trainer(model, {.warmup = o.warmup, .lr_factor = o.lr_factor, .precision = precision_from_name(o.precision)});
  if (!o.load.empty()) {
    trainer.load(o.load, {{"model", &gen}, {"data", &data_gen}});
    fmt::print("resumed from {} at step {}\n", o.load.string(), trainer.steps_done());
  }
  fmt::print("== freedict: German -> English examples of {} ({:.1f} s to read and split into {})\n", o.dict.string(),
             std::chrono::duration<double>(Clock::now() - read_start).count(),
             o.tokens == "words" ? "words" : fmt::format("{} subwords{}", o.tokens, o.joint_vocab ? ", joint" : ""));
  fmt::print("   pairs of at most {} words: train {}, valid {}, test {}; vocabulary de {}, en {}\n",
             FreedictData::kMaxWords, train.size(), valid.size(), test.size(), data.src.vocab.size(),
             data.tgt.vocab.size());
  const auto batches = o.batch_tokens > 0 ? make_token_batches(train, data.src.vocab, data.tgt.vocab, o.batch_tokens)
                                          : make_batches(train, data.src.vocab, data.tgt.vocab, o.batch);
  const auto valid_batches = make_batches(valid, data.src.vocab, data.tgt.vocab, 100);
  fmt::print("   {} parameters; {} batches of {}; {} steps\n", model.parameter_count(), batches.size(),
             o.batch_tokens > 0 ? fmt::format("at most {} tokens", o.batch_tokens) : fmt::format("{} pairs", o.batch),
             steps);
  // A random batch each step; the data generator's offset is in the checkpoint, so a resume continues.
  // Checkpoint averaging (the paper, 6.1: "averaging the last 5 checkpoints"): the sum of the weights at
  // the last `average` multiples of 500 steps before the end, and at the end.
  sf::nn::StateDict weight_sum;
  std::int64_t averaged = 0;
  auto add_weights = [&] {
    sf::NoGradGuard no_grad;
    for (const auto& [name, t] : model.state_dict())
      weight_sum[name] = averaged == 0 ? t * 1.0 : sf::add(weight_sum.at(name), t);
    ++averaged;
  };
  const Curves curves = train_steps(trainer, model, steps, valid_batches, 500, [&] {
    const std::int64_t done = trainer.steps_done(), left = steps - done;
    if (done > 0 && left % 500 == 0 && left < 500 * o.average) add_weights();
    const double u = sf::rand({1}, data_gen, {sf::DType::float64}).to_vector<double>()[0];
    return batches[std::min(batches.size() - 1, static_cast<std::size_t>(u * static_cast<double>(batches.size())))];
  });
  if (!o.save.empty() && data.src.subwords) {  // before the checkpoint: a checkpoint is never without them
    data.src.subwords->save(subword_file(o.save, "de"));
    data.tgt.subwords->save(subword_file(o.save, "en"));
  }
  save_if_asked(o, trainer, gen, data_gen);
  const auto greedy = translate_words(model, data, test, 0, 0);
  std::vector<std::vector<std::string>> references;
  for (const auto& p : data.words.test) references.push_back(p.tgt);
  const std::size_t shown = std::min<std::size_t>(8, test.size());
  print_table({data.words.test.begin(), data.words.test.begin() + static_cast<std::ptrdiff_t>(shown)},
              {greedy.begin(), greedy.begin() + static_cast<std::ptrdiff_t>(shown)}, " ");
  // Greedy BLEU, then beam search's, of the weights the model holds; `which` says which weights they are.
  auto score = [&](const std::string& which, const std::vector<std::vector<std::string>>& greedy_words) {
    print_bleu("greedy" + which, test.size(), corpus_bleu(greedy_words, references));
    if (o.beam > 1)
      print_bleu(fmt::format("beam {}, length penalty {}{}", o.beam, o.alpha, which), test.size(),
                 corpus_bleu(translate_words(model, data, test, o.beam, o.alpha), references));
  };
  score("", greedy);
  if (o.average > 0) {  // scored after the final weights, which stay the checkpoint's and the pictures'
    add_weights();
    sf::nn::StateDict final_weights;
    {
      sf::NoGradGuard no_grad;
      for (const auto& [name, t] : model.state_dict()) final_weights[name] = t * 1.0;  // a copy, not a view
      for (auto& [name, t] : weight_sum) t = t * (1.0 / static_cast<double>(averaged));
    }
    model.load_state_dict(weight_sum);
    score(fmt::format(", mean weights of the last {}", averaged), translate_words(model, data, test, 0, 0));
    model.load_state_dict(final_weights);
  }
  if (!o.export_dir.empty()) export_data(o.export_dir, data, greedy);
  if (!test.empty()) write_pictures(o, "freedict", curves, model, test.front(), data.src.vocab, data.tgt.vocab);
  const Collapse c = collapse_of(greedy);
  fmt::print("greedy translations: {:.1f}% empty, {} distinct of {}\n", 100 * c.empty, c.distinct, greedy.size());
  if (c.collapsed()) fmt::print("the model has collapsed: it answers every sentence alike\n");
  return c.collapsed() ? 1 : 0;
}

int run_bleu(const Options& o) {
  std::vector<std::vector<std::vector<std::string>>> sides(2);
  for (int k = 0; k < 2; ++k) {
    std::ifstream in(o.bleu_files[k]);
    if (!in) throw std::invalid_argument("bleu: cannot read " + o.bleu_files[k].string());
    for (std::string line; std::getline(in, line);) sides[k].push_back(text_tokens(line));
  }
  if (sides[0].size() != sides[1].size())
    throw std::invalid_argument(fmt::format("bleu: {} has {} lines, {} has {}", o.bleu_files[0].string(),
                                            sides[0].size(), o.bleu_files[1].string(), sides[1].size()));
  print_bleu(o.bleu_files[1].filename().string(), sides[0].size(), corpus_bleu(sides[1], sides[0]));
  return 0;
}

}  // namespace ch07
