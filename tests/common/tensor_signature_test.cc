#include "common/tensor_signature.h"

#include <gtest/gtest.h>

namespace kforge {
namespace {

// A one-node target of `schema` whose tensor arguments `args` are the target's inputs.
v1::Target OneNode(const std::string& schema, const std::vector<std::string>& args) {
  v1::Target target;
  v1::SubgraphNode* node = target.add_nodes();
  node->set_op(schema.substr(0, schema.find_first_of(".(")));
  node->set_schema(schema);
  for (size_t i = 0; i < args.size(); ++i) {
    v1::Argument* arg = node->add_args();
    arg->set_name(args[i]);
    arg->set_tensor("in" + std::to_string(i));
    target.add_input_names("in" + std::to_string(i));
  }
  node->add_outputs("out0");
  target.add_output_names("out0");
  return target;
}

TEST(AliasedInputTest, InPlaceOpsReturnTheArgumentTheyWrite) {
  EXPECT_EQ(AliasedInput(OneNode("aten::relu_(Tensor(a!) self) -> Tensor(a!)", {"self"}), 0), 0);
  EXPECT_EQ(AliasedInput(OneNode("aten::add_.Tensor(Tensor(a!) self, Tensor other, *, "
                                 "Scalar alpha=1) -> Tensor(a!)",
                                 {"self", "other"}),
                         0),
            0);
  // The written argument is found by name, wherever the target lists it.
  v1::Target swapped = OneNode(
      "aten::mul_.Tensor(Tensor(a!) self, Tensor other) -> Tensor(a!)", {"self", "other"});
  swapped.mutable_input_names()->SwapElements(0, 1);
  EXPECT_EQ(AliasedInput(swapped, 0), 1);
}

TEST(AliasedInputTest, FunctionalOpsAndOtherOutputsAliasNothing) {
  EXPECT_EQ(AliasedInput(OneNode("aten::relu(Tensor self) -> Tensor", {"self"}), 0), -1);
  EXPECT_EQ(AliasedInput(OneNode("aten::add.Tensor(Tensor self, Tensor other, *, Scalar "
                                 "alpha=1) -> Tensor",
                                 {"self", "other"}),
                         0),
            -1);
  EXPECT_EQ(AliasedInput(OneNode("aten::relu_(Tensor(a!) self) -> Tensor(a!)", {"self"}), 1), -1);
  // A view (Tensor(a) without "!") is not written.
  EXPECT_EQ(AliasedInput(OneNode("aten::view(Tensor(a) self, SymInt[] size) -> Tensor(a)",
                                 {"self"}),
                         0),
            -1);
  EXPECT_EQ(AliasedInput(v1::Target(), 0), -1);
}

}  // namespace
}  // namespace kforge
