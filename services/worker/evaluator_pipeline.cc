// EvaluationPipeline: compile, fetch inputs, evaluation cache, evaluate.
#include "services/worker/evaluator_pipeline.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "common/blob_store.h"
#include "common/digest.h"
#include "google/protobuf/io/coded_stream.h"
#include "google/protobuf/io/zero_copy_stream_impl_lite.h"
#include "spdlog/spdlog.h"

namespace kforge {
namespace {

v1::EvaluationResult NotEvaluated(std::string message) {
  v1::EvaluationResult result;
  result.set_verdict(v1::NOT_EVALUATED);
  result.mutable_diagnostics()->set_message(std::move(message));
  return result;
}

std::string Deterministic(const google::protobuf::Message& message) {
  std::string out;
  google::protobuf::io::StringOutputStream stream(&out);
  google::protobuf::io::CodedOutputStream coded(&stream);
  coded.SetSerializationDeterministic(true);
  message.SerializeToCodedStream(&coded);
  coded.Trim();
  return out;
}

}  // namespace

EvaluationPipeline::EvaluationPipeline(Compiler* compiler, Evaluator* evaluator, Store* store,
                                       EvaluationPipelineOptions options)
    : compiler_(compiler), evaluator_(evaluator), store_(store), options_(options) {}

std::string EvaluationPipeline::CacheKey(const v1::CompileResult& compiled,
                                         const v1::EvaluateRequest& request,
                                         const std::string& gpu_name) {
  // Only what decides the verdict and the timings: not the capture's statistics (eager
  // time, share) that do not reach the evaluator.
  v1::Target target = request.target();
  target.clear_eager_time_s();
  target.clear_share();
  target.clear_calls_per_forward();
  target.clear_floor_s();
  target.clear_family();
  Sha256Hasher hasher;
  hasher.Update("kforge-eval-v1\n");
  hasher.Update(Sha256Hex(compiled.cubin()));
  hasher.Update("\n");
  hasher.Update(Sha256Hex(request.candidate().launch_plan_json()));
  hasher.Update("\n");
  hasher.Update(Sha256Hex(Deterministic(target)));
  hasher.Update("\n");
  hasher.Update(Sha256Hex(Deterministic(request.policy())));
  hasher.Update(request.timing() ? "\ntiming\n" : "\nvalidate\n");
  hasher.Update(gpu_name);
  return absl::StrCat("eval/", hasher.Finish());
}

v1::EvaluationResult EvaluationPipeline::Evaluate(const v1::EvaluateRequest& request,
                                                  const std::string& captured_inputs) {
  v1::CompileResult compiled = compiler_->Compile(request.candidate(), request.options());
  if (compiled.status() != v1::COMPILE_OK) {
    v1::EvaluationResult result;
    result.set_verdict(v1::COMPILE_ERROR);
    result.mutable_diagnostics()->set_message(
        absl::StrCat("the candidate did not compile (", v1::CompileStatus_Name(compiled.status()),
                     ")"));
    result.mutable_diagnostics()->set_log_excerpt(compiled.log().substr(0, 4096));
    result.set_policy_version(request.policy().version());
    return result;
  }

  std::string inputs = captured_inputs;
  if (inputs.empty()) {
    if (request.target().captured_inputs().sha256().empty()) {
      return NotEvaluated(absl::StrCat("target ", request.target().id(),
                                       " names no captured inputs; re-run capture"));
    }
    if (store_ == nullptr) {
      return NotEvaluated(absl::StrCat(
          "the captured inputs of target ", request.target().id(),
          " live in a store and this worker has none; start it with --store URL"));
    }
    absl::StatusOr<std::string> blob = GetBlob(*store_, request.target().captured_inputs());
    if (!blob.ok()) {
      return NotEvaluated(absl::StrCat("cannot fetch the captured inputs of target ",
                                       request.target().id(), " from ", store_->Describe(),
                                       ": ", blob.status().message()));
    }
    inputs = *std::move(blob);
  }

  // The GPU's name is part of the key: timings of one GPU say nothing about another.
  std::string gpu_name;
  if (absl::StatusOr<std::vector<v1::GpuInfo>> gpus = evaluator_->GetGpuInfo();
      gpus.ok() && !gpus->empty()) {
    gpu_name = (*gpus)[0].name();
  }
  std::string key = CacheKey(compiled, request, gpu_name);
  if (store_ != nullptr && !request.fresh_process() && !gpu_name.empty()) {
    if (std::optional<std::string> hit = LookupOrMiss(*store_, key)) {
      v1::EvaluationResult cached;
      if (cached.ParseFromString(*hit)) return cached;
      spdlog::warn("evaluation cache entry {} does not parse; evaluating again", key);
    }
  }

  v1::EvaluationResult result = evaluator_->Evaluate(request, compiled, inputs);
  result.set_cache_key(key);
  if (compiled.kernels_size() > 0 && !result.has_resources()) {
    *result.mutable_resources() = compiled.kernels(0);
  }
  // NOT_EVALUATED says something about this machine, not the candidate: never cached.
  if (store_ != nullptr && result.verdict() != v1::NOT_EVALUATED) {
    PutOptions put;
    if (result.verdict() != v1::PASS) {
      put.ttl = std::chrono::seconds(absl::ToInt64Seconds(options_.failure_ttl));
    }
    put.if_absent = !request.fresh_process();  // a re-confirmation replaces the entry
    if (absl::Status s = store_->Put(key, result.SerializeAsString(), put); !s.ok()) {
      spdlog::warn("cannot cache evaluation {}: {}", key, std::string(s.message()));
    }
  }
  return result;
}

}  // namespace kforge
