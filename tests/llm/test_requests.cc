// Inputs of the LLM tests: recorded API bodies and ProposeRequests.
#include "tests/llm/test_requests.h"

#include <fstream>
#include <sstream>

namespace kforge::testing {

std::string ReadRecorded(const std::string& name) {
  std::ifstream in(std::string(KFORGE_LLM_RECORDED_DIR) + "/" + name);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

v1::ProposeRequest SoftmaxRootRequest() {
  v1::ProposeRequest request;
  v1::Target& target = *request.mutable_target();
  target.set_id("target-softmax-8x4096");
  v1::SubgraphNode& node = *target.add_nodes();
  node.set_op("aten::softmax");
  node.set_overload("int");
  node.set_schema("aten::softmax.int(Tensor self, int dim, ScalarType? dtype=None) -> Tensor");
  v1::Argument* self = node.add_args();
  self->set_name("self");
  self->set_tensor("in0");
  v1::Argument* dim = node.add_args();
  dim->set_name("dim");
  dim->mutable_scalar()->set_int_value(-1);
  v1::Argument* dtype = node.add_args();
  dtype->set_name("dtype");
  dtype->mutable_scalar()->set_none(true);
  node.add_outputs("out0");
  target.add_input_names("in0");
  v1::TensorSignature& in = *target.add_inputs();
  for (long long size : {8, 128, 4096}) in.add_sizes(size);
  for (long long stride : {524288, 4096, 1}) in.add_strides(stride);
  in.set_dtype(v1::FLOAT32);
  in.set_device("cuda:0");
  target.add_output_names("out0");
  *target.add_outputs() = in;
  (*target.mutable_shape_symbols())["ROWS"] = 1024;
  (*target.mutable_shape_symbols())["COLS"] = 4096;
  target.set_eager_time_s(21.5e-6);
  target.set_share(0.125);
  target.set_floor_s(4.1e-6);
  target.set_min_bytes_moved(33554432);

  v1::GpuInfo& gpu = *request.mutable_gpu();
  gpu.set_name("NVIDIA H200");
  gpu.set_arch("sm_90");
  gpu.set_sm_count(132);
  gpu.set_memory_bytes(150'000'000'000);
  gpu.set_l2_bytes(52'428'800);
  gpu.set_shared_memory_per_block_optin(232'448);
  gpu.set_copy_bandwidth_bytes_per_s(4.1e12);
  gpu.set_peak_flops(6.7e13);
  request.set_n(1);
  request.set_seed(42);
  request.set_proposer("openai");
  request.set_job_id("job-test");
  return request;
}

v1::ProposeRequest SoftmaxChildRequest() {
  v1::ProposeRequest request = SoftmaxRootRequest();
  v1::EvaluatedCandidate& parent = *request.mutable_parent();
  parent.mutable_candidate()->set_id("parent-id-1");
  parent.mutable_candidate()->set_source(
      "#include \"kforge_device.h\"\nextern \"C\" __global__ void kf_parent_softmax(KfArgs "
      "args) { /* PARENT_SOURCE_MARKER */ }\n");
  parent.mutable_candidate()->set_launch_plan_json(
      R"({"launches": [{"entry": "kf_parent_softmax", "grid": [1024], "block": [256]}]})");
  parent.mutable_candidate()->set_proposer("synth:softmax");
  parent.mutable_compile()->set_status(v1::COMPILE_OK);
  v1::KernelResources& resources = *parent.mutable_compile()->add_kernels();
  resources.set_entry_point("kf_parent_softmax");
  resources.set_registers(72);
  resources.set_spill_store_bytes(48);
  resources.set_spill_load_bytes(64);
  v1::EvaluationResult& evaluation = *parent.mutable_evaluation();
  evaluation.set_verdict(v1::PASS);
  evaluation.mutable_candidate()->set_median_s(15.0e-6);
  evaluation.mutable_eager()->set_median_s(21.5e-6);
  evaluation.set_speedup(21.5 / 15.0);
  evaluation.set_floor_s(4.1e-6);

  v1::EvaluatedCandidate& best = *request.mutable_best();
  best.mutable_candidate()->set_id("best-id-2");
  best.mutable_candidate()->set_source("// BEST_SOURCE_MARKER\n");
  best.mutable_candidate()->set_launch_plan_json(R"({"launches": []})");
  best.mutable_evaluation()->set_verdict(v1::PASS);
  best.mutable_evaluation()->mutable_candidate()->set_median_s(9.0e-6);
  best.mutable_evaluation()->set_speedup(21.5 / 9.0);

  v1::EvaluatedCandidate& compile_failure = *request.add_siblings();
  compile_failure.mutable_candidate()->set_id("sibling-compile");
  compile_failure.mutable_candidate()->set_source("// SIBLING_COMPILE_MARKER\n");
  compile_failure.mutable_compile()->set_status(v1::COMPILE_FAILED);
  compile_failure.mutable_compile()->set_log(
      "kernel.cu(12): error: identifier \"warp_reduce_max\" is undefined");

  v1::EvaluatedCandidate& mismatch = *request.add_siblings();
  mismatch.mutable_candidate()->set_id("sibling-mismatch");
  mismatch.mutable_candidate()->set_source("// SIBLING_MISMATCH_MARKER\n");
  mismatch.mutable_compile()->set_status(v1::COMPILE_OK);
  mismatch.mutable_evaluation()->set_verdict(v1::MISMATCH);
  v1::Diagnostics& diagnostics = *mismatch.mutable_evaluation()->mutable_diagnostics();
  diagnostics.set_message("output 0 differs from the reference");
  diagnostics.set_input_set("random:2");
  diagnostics.set_first_bad_index(4096);
  diagnostics.set_max_abs_error(0.031);
  diagnostics.set_max_rel_error(0.5);
  diagnostics.set_tolerance(1e-5);
  diagnostics.set_eager_error(2e-7);
  return request;
}

}  // namespace kforge::testing
