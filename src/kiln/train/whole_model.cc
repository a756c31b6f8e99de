#include "kiln/train/whole_model.h"

#include <nlohmann/json.hpp>

#include <map>
#include <string>

#include "kiln/core/error.h"
#include "kiln/io/param_parts.h"

namespace kiln::train {
namespace {

// One rank's parameter layout, as it travels to rank 0.
std::string layout_json(const ParamStore& store) {
  nlohmann::json specs = nlohmann::json::array();
  for (const ParamSpec& s : store.specs())
    specs.push_back({{"name", s.name}, {"shape", s.shape}, {"full", s.full_shape}, {"dim", s.part_dim},
                     {"start", s.part_start}, {"offset", s.offset}});
  return nlohmann::json{{"size", store.padded_size()}, {"specs", specs}}.dump();
}

Shape shape_at(const nlohmann::json& j, const char* key) {
  const auto dims = j.at(key).get<std::vector<int64_t>>();
  KILN_CHECK(dims.size() <= Shape::kCapacity, "parameter layout: a {} of rank {}, above kiln's largest rank {}", key,
             dims.size(), Shape::kCapacity);
  return Shape(dims.begin(), dims.end());
}

std::vector<ParamSpec> layout_specs(const nlohmann::json& layout) {
  std::vector<ParamSpec> specs;
  for (const auto& j : layout.at("specs")) {
    ParamSpec s;
    s.name = j.at("name");
    s.shape = shape_at(j, "shape");
    s.full_shape = shape_at(j, "full");
    s.part_dim = j.at("dim");
    s.part_start = j.at("start");
    s.offset = j.at("offset");
    s.numel = shape_numel(s.shape);
    specs.push_back(std::move(s));
  }
  return specs;
}

// Whole tensors by name, filled part by part.
class Assembler {
 public:
  explicit Assembler(const std::vector<io::FlatState>& optimizer) {
    for (const auto& state : optimizer) state_names_.push_back(state.first);
  }

  // `buffers`: the rank's values, then its optimizer buffers, each with the rank's layout.
  void add(const std::vector<ParamSpec>& specs, const std::vector<const float*>& buffers) {
    for (const ParamSpec& s : specs) {
      auto [at, fresh] = index_.try_emplace(s.name, whole_.model.size());
      if (!fresh && s.part_dim < 0) continue;  // a replica of a parameter already taken
      if (fresh) {
        whole_.model.emplace_back(s.name, Tensor::zeros(s.full_shape));
        for (const std::string& state : state_names_)
          whole_.optimizer.emplace_back(state + "." + s.name, Tensor::zeros(s.full_shape));
      }
      const size_t k = at->second;
      io::insert_part(s, buffers[0] + s.offset, whole_.model[k].second.ptr<float>());
      for (size_t i = 0; i < state_names_.size(); ++i)
        io::insert_part(s, buffers[i + 1] + s.offset,
                    whole_.optimizer[k * state_names_.size() + i].second.ptr<float>());
    }
  }
  WholeModel take() { return std::move(whole_); }

 private:
  std::vector<std::string> state_names_;
  std::map<std::string, size_t> index_;
  WholeModel whole_;
};

void send_parts(const ParamStore& store, const std::vector<io::FlatState>& optimizer, dist::Communicator& group) {
  std::string layout = layout_json(store);
  int64_t length = int64_t(layout.size());
  group.send(Tensor::view(&length, {1}, DType::i64), 0);
  group.send(Tensor::view(layout.data(), {length}, DType::u8), 0);
  group.send(store.values, 0);
  for (const auto& state : optimizer) group.send(*state.second, 0);
}

void receive_parts(int rank, const std::vector<io::FlatState>& optimizer, dist::Communicator& group,
                   Assembler& assembler) {
  int64_t length = 0;
  Tensor length_view = Tensor::view(&length, {1}, DType::i64);
  group.recv(length_view, rank);
  std::string text(size_t(length), '\0');
  Tensor text_view = Tensor::view(text.data(), {length}, DType::u8);
  group.recv(text_view, rank);
  const nlohmann::json layout = nlohmann::json::parse(text);
  const int64_t size = layout.at("size");
  std::vector<Tensor> buffers;
  std::vector<const float*> pointers;
  for (size_t i = 0; i <= optimizer.size(); ++i) {
    buffers.push_back(Tensor::empty({size}));
    group.recv(buffers.back(), rank);
    pointers.push_back(buffers.back().ptr<float>());
  }
  assembler.add(layout_specs(layout), pointers);
}

}  // namespace

WholeModel gather_whole_model(const ParamStore& store, const std::vector<io::FlatState>& optimizer,
                              dist::Communicator& group) {
  KILN_CHECK(store.values.device.is_cpu(), "checkpoint gather: the parameters must be on the host");
  if (group.rank() != 0) {
    send_parts(store, optimizer, group);
    return {};
  }
  Assembler assembler(optimizer);
  std::vector<const float*> own = {store.values.ptr<float>()};
  for (const auto& state : optimizer) own.push_back(state.second->ptr<float>());
  assembler.add(store.specs(), own);
  for (int rank = 1; rank < group.size(); ++rank) receive_parts(rank, optimizer, group, assembler);
  return assembler.take();
}

}  // namespace kiln::train
