// train/config/resolved_config.h — the run's whole resolved configuration (every key after presets,
// environment and flags) as a TOML file beside its logs, readable back with `--config`.
#pragma once
#include <filesystem>
#include <iosfwd>
#include <string>
#include <utility>
#include <vector>

namespace kiln::train {

using ResolvedConfig = std::vector<std::pair<std::string, std::string>>;

// Writes `resolved` to `file` atomically as nested TOML tables ("optim.lr" -> [optim] lr), every
// value a string (the registry parses each by its key's type when read back).
void write_resolved_config(const std::filesystem::path& file, const ResolvedConfig& resolved);

// On rank 0 with a non-empty `resolved`: writes <output_dir>/config.toml and says so in one
// console line (instead of a line per key).
void report_resolved_config(const std::filesystem::path& output_dir, bool is_rank0, const ResolvedConfig& resolved,
                            std::ostream& console);

}  // namespace kiln::train
