#include "tools/kforge/commands.h"

#include "common/tensor_signature.h"
#include "services/capture/capture_cli.h"
#include "runtime/export/export_cli.h"
#include "services/coordinator/optimize_cli.h"
#include "services/coordinator/report_cli.h"
#include "services/coordinator/service/coordinator_cli.h"
#include "services/proposer/proposer_cli.h"
#include "services/proposer/synth/family_registry.h"
#include "services/worker/compile_cli.h"
#include "services/worker/eval_cli.h"
#include "services/worker/worker_cli.h"

namespace kforge::cli {

void RegisterAll(CLI::App& app) {
  // Capture asks the synthesizer's registry whether a proposer family covers each target, as
  // its CUDA kernels will see it (a target captured on the CPU runs on a GPU later).
  RegisterCaptureCommands(app, [](const v1::Target& target) {
    return synth::FamilyRegistry::Default().FamilyFor(ForCudaKernels(target));
  });
  RegisterCompileCommands(app);
  RegisterEvalCommands(app);
  RegisterWorkerCommands(app);
  // optimize exports its kernels at the end through the exporter, which links LibTorch; the
  // coordinator itself does not.
  RegisterOptimizeCommands(app, ExportAfterOptimize);
  RegisterReportCommands(app);
  RegisterExportCommands(app);
  RegisterProposerCommands(app);
  RegisterCoordinatorCommands(app);
}

}  // namespace kforge::cli
