// Targets for worker tests (CPU and GPU): a row softmax and an affine group norm, shaped as a
// capture records them (single aten node, named inputs, scalar arguments by schema name).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/tensor_signature.h"
#include "kforge/v1/common.pb.h"

namespace kforge::testing {

inline v1::TensorSignature Contiguous(const std::vector<int64_t>& sizes, v1::DType dtype) {
  return DenseSignature(sizes, dtype);
}

inline v1::Argument TensorArg(const std::string& name, const std::string& value) {
  v1::Argument arg;
  arg.set_name(name);
  arg.set_tensor(value);
  return arg;
}

inline v1::Argument IntArg(const std::string& name, int64_t value) {
  v1::Argument arg;
  arg.set_name(name);
  arg.mutable_scalar()->set_int_value(value);
  return arg;
}

inline v1::Argument FloatArg(const std::string& name, double value) {
  v1::Argument arg;
  arg.set_name(name);
  arg.mutable_scalar()->set_float_value(value);
  return arg;
}

inline v1::Argument BoolArg(const std::string& name, bool value) {
  v1::Argument arg;
  arg.set_name(name);
  arg.mutable_scalar()->set_bool_value(value);
  return arg;
}

inline v1::Argument NoneArg(const std::string& name) {
  v1::Argument arg;
  arg.set_name(name);
  arg.mutable_scalar()->set_none(true);
  return arg;
}

// aten::softmax.int(Tensor self, int dim, ScalarType? dtype=None) over the last dim.
inline v1::Target SoftmaxTarget(int64_t rows, int64_t cols, v1::DType dtype = v1::FLOAT32) {
  v1::Target t;
  t.set_id("test-softmax");
  v1::SubgraphNode* node = t.add_nodes();
  node->set_op("aten::softmax");
  node->set_overload("int");
  node->set_schema("aten::softmax.int(Tensor self, int dim, ScalarType? dtype=None) -> Tensor");
  *node->add_args() = TensorArg("self", "in0");
  *node->add_args() = IntArg("dim", -1);
  *node->add_args() = NoneArg("dtype");
  node->add_outputs("out0");
  t.add_input_names("in0");
  *t.add_inputs() = Contiguous({rows, cols}, dtype);
  t.add_output_names("out0");
  *t.add_outputs() = Contiguous({rows, cols}, dtype);
  (*t.mutable_shape_symbols())["ROWS"] = rows;
  (*t.mutable_shape_symbols())["COLS"] = cols;
  t.set_family("softmax");
  t.set_shape_generic(true);
  t.set_min_bytes_moved(2 * rows * cols * (dtype == v1::FLOAT32 ? 4 : 2));
  return t;
}

// aten::add_.Tensor(self, other, alpha=1) on two [rows, cols] tensors: an in-place op, whose
// output is `self` written (ResNet's residual `out += identity`).
inline v1::Target AddInPlaceTarget(int64_t rows, int64_t cols, v1::DType dtype = v1::FLOAT32) {
  v1::Target t;
  t.set_id("test-add-in-place");
  v1::SubgraphNode* node = t.add_nodes();
  node->set_op("aten::add_");
  node->set_overload("Tensor");
  node->set_schema(
      "aten::add_.Tensor(Tensor(a!) self, Tensor other, *, Scalar alpha=1) -> Tensor(a!)");
  *node->add_args() = TensorArg("self", "in0");
  *node->add_args() = TensorArg("other", "in1");
  *node->add_args() = IntArg("alpha", 1);
  node->add_outputs("out0");
  for (const char* name : {"in0", "in1"}) {
    t.add_input_names(name);
    *t.add_inputs() = Contiguous({rows, cols}, dtype);
  }
  t.add_output_names("out0");
  *t.add_outputs() = Contiguous({rows, cols}, dtype);
  t.set_family("elementwise");
  t.set_min_bytes_moved(3 * rows * cols * (dtype == v1::FLOAT32 ? 4 : 2));
  return t;
}

// aten::group_norm(Tensor input, int num_groups, Tensor? weight, Tensor? bias, float eps,
// bool cudnn_enabled) on NCHW with affine weight and bias.
inline v1::Target GroupNormTarget(int64_t n, int64_t c, int64_t h, int64_t w, int64_t groups) {
  v1::Target t;
  t.set_id("test-group-norm");
  v1::SubgraphNode* node = t.add_nodes();
  node->set_op("aten::group_norm");
  node->set_overload("");
  node->set_schema(
      "aten::group_norm(Tensor input, int num_groups, Tensor? weight=None, Tensor? bias=None, "
      "float eps=1e-05, bool cudnn_enabled=True) -> Tensor");
  *node->add_args() = TensorArg("input", "in0");
  *node->add_args() = IntArg("num_groups", groups);
  *node->add_args() = TensorArg("weight", "in1");
  *node->add_args() = TensorArg("bias", "in2");
  *node->add_args() = FloatArg("eps", 1e-5);
  *node->add_args() = BoolArg("cudnn_enabled", true);
  node->add_outputs("out0");
  for (const char* name : {"in0", "in1", "in2"}) t.add_input_names(name);
  *t.add_inputs() = Contiguous({n, c, h, w}, v1::FLOAT32);
  *t.add_inputs() = Contiguous({c}, v1::FLOAT32);
  *t.add_inputs() = Contiguous({c}, v1::FLOAT32);
  t.add_output_names("out0");
  *t.add_outputs() = Contiguous({n, c, h, w}, v1::FLOAT32);
  t.set_family("group_norm");
  t.set_shape_generic(true);
  t.set_min_bytes_moved(2 * n * c * h * w * 4 + 2 * c * 4);
  return t;
}

}  // namespace kforge::testing
