#include "kiln/train/config/resolved_config.h"

#include <fmt/format.h>
#include <toml++/toml.h>

#include <ostream>

#include "kiln/core/file_util.h"

namespace kiln::train {

void write_resolved_config(const std::filesystem::path& file, const ResolvedConfig& resolved) {
  toml::table root;
  for (const auto& [key, value] : resolved) {
    toml::table* table = &root;
    size_t begin = 0;
    for (size_t dot = key.find('.'); dot != std::string::npos; begin = dot + 1, dot = key.find('.', begin)) {
      table = table->emplace<toml::table>(key.substr(begin, dot - begin)).first->second.as_table();
    }
    table->insert_or_assign(key.substr(begin), value);
  }
  write_file_atomic(file, [&](std::ostream& out) {
    out << "# kiln: the resolved configuration of this run (kiln train ... --config this file)\n" << root << "\n";
  });
}

void report_resolved_config(const std::filesystem::path& output_dir, bool is_rank0, const ResolvedConfig& resolved,
                            std::ostream& console) {
  if (!is_rank0 || resolved.empty()) return;
  const std::filesystem::path file = output_dir / "config.toml";
  write_resolved_config(file, resolved);
  console << fmt::format("config: {} settings resolved, written to {}\n", resolved.size(), file.string());
}

}  // namespace kiln::train
