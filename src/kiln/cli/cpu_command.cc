// cli/cpu_command.cc — `kiln cpu`: the instruction sets this CPU and OS support, the level oneDNN
// may use (ONEDNN_MAX_CPU_ISA), the extensions kiln's own code was compiled for, and what each
// precision actually runs as here.
#include <fmt/format.h>

#include <iostream>

#include "kiln/cli/commands.h"
#include "kiln/core/cpu_features.h"
#include "kiln/core/isa.h"

namespace kiln::cli {

void add_cpu_command(CLI::App& app) {
  CLI::App* cmd = app.add_subcommand("cpu", "print the CPU features kiln detects and the precision each dtype runs as");
  cmd->callback([] {
    const CpuFeatures& f = cpu_features();
    std::cout << fmt::format("features: {}\n", f.flags());
    std::cout << fmt::format("best ISA level: {}\n", cpu_isa_name(f.max_isa));
    std::cout << fmt::format("kiln's own code built for: {}\n", isa_names(isa_compiled_for()));
    if (!f.isa_cap_text.empty())
      std::cout << fmt::format("ONEDNN_MAX_CPU_ISA={}: oneDNN uses up to {}\n", f.isa_cap_text,
                               cpu_isa_name(f.effective_isa()));
    for (DType t : {DType::f32, DType::bf16, DType::f16})
      std::cout << fmt::format("{:>4}: {}\n", dtype_name(t), precision_note(t, f));
  });
}

}  // namespace kiln::cli
