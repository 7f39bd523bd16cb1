// TorchRow (common/torch_rows.h): a target as the row torch_compile_times.py times.
#include "common/torch_rows.h"

#include "gtest/gtest.h"

namespace kforge {
namespace {

// group_norm(input, 32, weight, bias, 1e-5, True) on 2x64x8x8 fp16, inputs named out of order
// so the row must map argument -> input index by name, not by position.
v1::Target GroupNormTarget() {
  v1::Target t;
  t.set_id("gn-target");
  t.set_min_bytes_moved(12345);
  v1::SubgraphNode* node = t.add_nodes();
  node->set_op("aten::group_norm");
  auto tensor = [&](const std::string& name, const std::string& value) {
    v1::Argument* a = node->add_args();
    a->set_name(name);
    a->set_tensor(value);
  };
  auto scalar = [&](const std::string& name) {
    v1::Argument* a = node->add_args();
    a->set_name(name);
    return a->mutable_scalar();
  };
  tensor("input", "x");
  scalar("num_groups")->set_int_value(32);
  tensor("weight", "w");
  tensor("bias", "b");
  scalar("eps")->set_float_value(1e-5);
  scalar("cudnn_enabled")->set_bool_value(true);
  node->add_outputs("y");
  for (const auto& [name, sizes] : std::vector<std::pair<std::string, std::vector<int64_t>>>{
           {"b", {64}}, {"x", {2, 64, 8, 8}}, {"w", {64}}}) {
    t.add_input_names(name);
    v1::TensorSignature* sig = t.add_inputs();
    for (int64_t s : sizes) sig->add_sizes(s);
    int64_t stride = 1;
    std::vector<int64_t> strides(sizes.size());
    for (size_t i = sizes.size(); i-- > 0;) {
      strides[i] = stride;
      stride *= sizes[i];
    }
    for (int64_t s : strides) sig->add_strides(s);
    sig->set_dtype(v1::FLOAT16);
  }
  t.add_output_names("y");
  return t;
}

TEST(TorchRowTest, MapsTensorArgumentsToInputIndicesAndKeepsScalars) {
  const v1::Target t = GroupNormTarget();
  absl::StatusOr<nlohmann::json> row = TorchRow(t, "row-1", "label", FillsByArgumentName(t));
  ASSERT_TRUE(row.ok()) << row.status();
  EXPECT_EQ((*row)["id"], "row-1");
  EXPECT_EQ((*row)["label"], "label");
  EXPECT_EQ((*row)["op"], "aten::group_norm");
  EXPECT_EQ((*row)["overload"], "");
  EXPECT_EQ((*row)["min_bytes"], 12345);
  const nlohmann::json& args = (*row)["args"];
  ASSERT_EQ(args.size(), 6u);
  EXPECT_EQ(args[0], (nlohmann::json{{"name", "input"}, {"input", 1}}));
  EXPECT_EQ(args[1], (nlohmann::json{{"name", "num_groups"}, {"value", 32}}));
  EXPECT_EQ(args[2], (nlohmann::json{{"name", "weight"}, {"input", 2}}));
  EXPECT_EQ(args[3], (nlohmann::json{{"name", "bias"}, {"input", 0}}));
  EXPECT_DOUBLE_EQ(args[4]["value"].get<double>(), 1e-5);
  EXPECT_EQ(args[5]["value"], true);
  const nlohmann::json& inputs = (*row)["inputs"];
  ASSERT_EQ(inputs.size(), 3u);
  // Fills follow the argument each input feeds: b is the bias, x the input, w the weight.
  EXPECT_EQ(inputs[0]["fill"], "bias");
  EXPECT_EQ(inputs[1]["fill"], "normal");
  EXPECT_EQ(inputs[2]["fill"], "weight");
  EXPECT_EQ(inputs[1]["sizes"], (std::vector<int64_t>{2, 64, 8, 8}));
  EXPECT_EQ(inputs[1]["strides"], (std::vector<int64_t>{4096, 64, 8, 1}));
  EXPECT_EQ(inputs[1]["dtype"], "FLOAT16");
}

TEST(TorchRowTest, ConvertsEveryScalarKind) {
  v1::Target t = GroupNormTarget();
  v1::SubgraphNode* node = t.mutable_nodes(0);
  auto add = [&](const std::string& name) {
    v1::Argument* a = node->add_args();
    a->set_name(name);
    return a->mutable_scalar();
  };
  add("ints")->mutable_int_list()->add_values(3);
  v1::ScalarValue* floats = add("floats");
  floats->mutable_float_list()->add_values(0.5);
  floats->mutable_float_list()->add_values(2.0);
  add("mode")->set_string_value("tanh");
  add("none")->set_none(true);
  absl::StatusOr<nlohmann::json> row = TorchRow(t, "r", "", FillsByArgumentName(t));
  ASSERT_TRUE(row.ok()) << row.status();
  const nlohmann::json& args = (*row)["args"];
  ASSERT_EQ(args.size(), 10u);
  EXPECT_EQ(args[6]["value"], (std::vector<int64_t>{3}));
  EXPECT_EQ(args[7]["value"], (std::vector<double>{0.5, 2.0}));
  EXPECT_EQ(args[8]["value"], "tanh");
  EXPECT_TRUE(args[9].contains("value"));
  EXPECT_TRUE(args[9]["value"].is_null());
}

TEST(TorchRowTest, AChainRowListsItsNodesAndWhatEachTakes) {
  v1::Target chain = GroupNormTarget();  // group_norm -> relu of its output
  chain.mutable_nodes(0)->clear_outputs();
  chain.mutable_nodes(0)->add_outputs("v0");
  v1::SubgraphNode* relu = chain.add_nodes();
  relu->set_op("aten::relu");
  relu->add_outputs("out0");
  v1::Argument* self = relu->add_args();
  self->set_name("self");
  self->set_tensor("v0");
  absl::StatusOr<nlohmann::json> row = TorchRow(chain, "r", "", FillsByArgumentName(chain));
  ASSERT_TRUE(row.ok()) << row.status();
  EXPECT_EQ((*row)["op"], "aten::group_norm -> aten::relu");
  EXPECT_FALSE(row->contains("args"));
  ASSERT_EQ((*row)["chain"].size(), 2u);
  EXPECT_EQ((*row)["chain"][0]["op"], "aten::group_norm");
  EXPECT_EQ((*row)["chain"][0]["args"][0]["input"], 1);  // x
  EXPECT_EQ((*row)["chain"][1]["args"][0]["node"], 0);
  EXPECT_EQ((*row)["inputs"][2]["fill"], "weight");  // fills come from every node

  relu->mutable_args(0)->set_tensor("v9");  // made by no earlier node
  row = TorchRow(chain, "r", "", FillsByArgumentName(chain));
  EXPECT_TRUE(absl::IsInvalidArgument(row.status())) << row.status();
}

TEST(TorchRowTest, RefusesMismatchedFillsAndUnknownValues) {
  const v1::Target t = GroupNormTarget();
  absl::StatusOr<nlohmann::json> row = TorchRow(t, "r", "", {"normal"});
  EXPECT_TRUE(absl::IsInvalidArgument(row.status())) << row.status();

  v1::Target dangling = GroupNormTarget();
  dangling.mutable_nodes(0)->mutable_args(0)->set_tensor("t7");
  row = TorchRow(dangling, "r", "", FillsByArgumentName(dangling));
  EXPECT_TRUE(absl::IsInvalidArgument(row.status())) << row.status();
  EXPECT_NE(row.status().message().find("'t7'"), absl::string_view::npos) << row.status();
}

}  // namespace
}  // namespace kforge
