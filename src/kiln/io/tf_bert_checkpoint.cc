#include "kiln/io/tf_bert_checkpoint.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <map>
#include <set>

#include "kiln/core/error.h"
#include "kiln/io/bert_names.h"
#include "kiln/io/finite_check.h"
#include "kiln/io/tf_bundle.h"

namespace kiln::io {
namespace {

bool is_optimizer_state(const std::vector<std::string>& parts) {
  static const std::set<std::string> kSkipped = {"adam_m",      "adam_v",     "LAMB",       "LAMB_1",
                                                 "global_step", "beta1_power", "beta2_power"};
  return std::any_of(parts.begin(), parts.end(), [](const std::string& p) { return kSkipped.count(p) != 0; });
}

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> parts;
  size_t begin = 0;
  for (size_t end; (end = s.find(sep, begin)) != std::string::npos; begin = end + 1) parts.push_back(s.substr(begin, end - begin));
  parts.push_back(s.substr(begin));
  return parts;
}

}  // namespace

std::optional<TfNameMapping> map_tf_bert_name(const std::string& tf_name) {
  const std::vector<std::string> parts = split(tf_name, '/');
  if (is_optimizer_state(parts)) return std::nullopt;
  TfNameMapping m;
  for (const std::string& p : parts) {
    std::string mapped = p;
    if (p.rfind("layer_", 0) == 0 && p.size() > 6 && std::all_of(p.begin() + 6, p.end(), [](unsigned char c) { return std::isdigit(c); })) {
      mapped = "layer." + p.substr(6);
    } else if (p == "kernel") {
      mapped = "weight";
      m.transpose = true;
    } else if (p == "gamma" || p == "output_weights") {
      mapped = "weight";
    } else if (p == "beta" || p == "output_bias") {
      mapped = "bias";
    } else if (p.ends_with("_embeddings")) {
      mapped = p + ".weight";
    }
    m.name += (m.name.empty() ? "" : ".") + mapped;
  }
  return m;
}

TfImportSummary load_tf_bert_checkpoint(const std::filesystem::path& path, ParamStore& store, int64_t vocab_size,
                                        bool allow_non_finite) {
  TfImportSummary summary;
  summary.prefix = resolve_tf_checkpoint(path);
  const TfBundle bundle = TfBundle::open(summary.prefix);
  const std::string index = bundle.index_file().string();
  std::map<std::string, const ParamSpec*> pending;
  for (const ParamSpec& s : store.specs()) pending[s.name] = &s;
  float* values = store.host_values().data();

  for (const TfTensorInfo& t : bundle.tensors()) {
    const std::optional<TfNameMapping> m = map_tf_bert_name(t.name);
    if (!m) {
      ++summary.skipped;
      continue;
    }
    const ParamSpec* spec = store.find(m->name);
    if (!spec)
      throw Error("{}: variable '{}' {} has no counterpart in the model (no parameter '{}')", index, t.name,
                  shape_str(t.shape), m->name);
    if (!pending.erase(m->name))
      throw Error("{}: variable '{}' maps to '{}', which another variable already set", index, t.name, m->name);
    Shape expected = spec->shape;
    // kiln may pad the vocabulary: the checkpoint holds the real rows only, the padding keeps its init.
    if (is_vocab_sized(spec->name)) expected[0] = std::min(expected[0], vocab_size);
    if (m->transpose) std::reverse(expected.begin(), expected.end());
    if (t.shape != expected || (m->transpose && expected.size() != 2))
      throw Error("{}: variable '{}' has shape {}; the model's '{}' needs {}", index, t.name, shape_str(t.shape),
                  spec->name, shape_str(expected));
    const std::vector<float> v = bundle.read_f32(t);
    if (!allow_non_finite) check_finite(v.data(), int64_t(v.size()), bundle.data_file(t.shard).string(), t.name);
    float* dst = values + spec->offset;
    if (m->transpose) {
      const int64_t in = t.shape[0], out = t.shape[1];
      for (int64_t i = 0; i < in; ++i)
        for (int64_t o = 0; o < out; ++o) dst[o * in + i] = v[size_t(i * out + o)];
    } else {
      std::copy(v.begin(), v.end(), dst);
    }
    ++summary.loaded;
  }
  if (!pending.empty())
    throw Error("{}: no variable for the model's parameter '{}' ({} of {} parameters missing)", index,
                pending.begin()->first, pending.size(), store.specs().size());
  return summary;
}

}  // namespace kiln::io
