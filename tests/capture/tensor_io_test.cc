// tensor_io against real Python: files torch.save wrote are read here, files written here are
// read by torch.load (label integration: runs the .venv python as a subprocess).
#include "common/tensor_io.h"

#include <ATen/ops/arange.h>
#include <ATen/ops/equal.h>

#include <fstream>

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/capture/capture_test_util.h"
#include "tests/support/temp_dir.h"

namespace kforge {
namespace {

using capture_test::Python;
using capture_test::Quote;
using capture_test::RunCommand;

const std::string kHelper = std::string(KFORGE_SOURCE_DIR) + "/tests/capture/tensor_io_helper.py";

std::vector<int64_t> Sizes(const at::Tensor& t) { return t.sizes().vec(); }

class TensorIoTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto r = RunCommand(Python() + " " + Quote(kHelper) + " write " + dir_.str(), dir_.path());
    ASSERT_EQ(r.exit_code, 0) << r.err;
  }
  nlohmann::json PythonRead(const std::string& path) {
    auto r = RunCommand(Python() + " " + Quote(kHelper) + " read " + Quote(path), dir_.path());
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return nlohmann::json::parse(r.out);
  }
  TempDir dir_;
};

TEST_F(TensorIoTest, ReadsTupleAsNumberedTensors) {
  auto tensors = ReadTensors((dir_ / "tuple.pt").string());
  ASSERT_TRUE(tensors.ok()) << tensors.status();
  ASSERT_EQ(tensors->size(), 2u);
  EXPECT_EQ((*tensors)[0].name, "0");
  EXPECT_EQ((*tensors)[1].name, "1");
  EXPECT_EQ(Sizes((*tensors)[0].tensor), (std::vector<int64_t>{2, 3}));
  EXPECT_EQ((*tensors)[0].tensor.scalar_type(), at::kFloat);
  EXPECT_TRUE(at::equal((*tensors)[1].tensor, at::arange(4, at::kLong)));
}

TEST_F(TensorIoTest, ReadsListWithStridesKept) {
  auto tensors = ReadTensors((dir_ / "list.pt").string());
  ASSERT_TRUE(tensors.ok()) << tensors.status();
  ASSERT_EQ(tensors->size(), 3u);
  const at::Tensor& c = (*tensors)[2].tensor;
  EXPECT_EQ((*tensors)[2].name, "2");
  EXPECT_EQ(Sizes(c), (std::vector<int64_t>{4, 2}));
  EXPECT_EQ(c.strides().vec(), (std::vector<int64_t>{1, 4}));
  EXPECT_EQ(c.scalar_type(), at::kHalf);
}

TEST_F(TensorIoTest, ReadsDictKeysAsNames) {
  auto tensors = ReadTensors((dir_ / "dict.pt").string());
  ASSERT_TRUE(tensors.ok()) << tensors.status();
  ASSERT_EQ(tensors->size(), 2u);
  EXPECT_EQ((*tensors)[0].name, "x");
  EXPECT_EQ((*tensors)[1].name, "mask");
  EXPECT_EQ((*tensors)[1].tensor.scalar_type(), at::kBool);
}

TEST_F(TensorIoTest, ReadsBareTensorAndNestedTuples) {
  auto bare = ReadTensors((dir_ / "bare.pt").string());
  ASSERT_TRUE(bare.ok()) << bare.status();
  ASSERT_EQ(bare->size(), 1u);
  EXPECT_EQ((*bare)[0].name, "");
  auto nested = ReadTensors((dir_ / "nested.pt").string());
  ASSERT_TRUE(nested.ok()) << nested.status();
  ASSERT_EQ(nested->size(), 3u);
  EXPECT_EQ((*nested)[1].name, "1.0");
  EXPECT_EQ((*nested)[2].name, "1.1");
}

TEST_F(TensorIoTest, PythonReadsWhatWeWrite) {
  at::Tensor a = at::arange(12, at::kFloat).reshape({3, 4});
  at::Tensor t = a.t();  // strides (1, 4)
  at::Tensor ids = at::arange(5, at::kLong);

  const std::string tuple_path = (dir_ / "ours_tuple.pt").string();
  ASSERT_TRUE(WriteTensors(tuple_path, {{"0", a}, {"1", ids}}).ok());
  nlohmann::json tuple = PythonRead(tuple_path);
  EXPECT_EQ(tuple["container"], "tuple");
  EXPECT_EQ(tuple["tensors"]["0"]["sizes"], nlohmann::json({3, 4}));
  EXPECT_EQ(tuple["tensors"]["1"]["dtype"], "int64");
  EXPECT_EQ(tuple["tensors"]["1"]["values"], nlohmann::json({0, 1, 2, 3, 4}));

  const std::string dict_path = (dir_ / "ours_dict.pt").string();
  ASSERT_TRUE(WriteTensors(dict_path, {{"in0", t}, {"in1", ids}}).ok());
  nlohmann::json dict = PythonRead(dict_path);
  EXPECT_EQ(dict["container"], "dict");
  EXPECT_EQ(dict["tensors"]["in0"]["sizes"], nlohmann::json({4, 3}));
  EXPECT_EQ(dict["tensors"]["in0"]["strides"], nlohmann::json({1, 4}));
  EXPECT_EQ(dict["tensors"]["in0"]["values"][1], 4.0);  // t[0][1] == a[1][0]

  const std::string list_path = (dir_ / "ours_list.pt").string();
  ASSERT_TRUE(WriteTensors(list_path, {{"0", a}}, TensorContainer::kList).ok());
  EXPECT_EQ(PythonRead(list_path)["container"], "list");

  // And back: what we wrote reads the same here.
  auto back = ReadTensors(dict_path);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ((*back)[0].name, "in0");
  EXPECT_TRUE(at::equal((*back)[0].tensor, t));
}

TEST_F(TensorIoTest, MissingFileNamesTheFile) {
  const std::string path = (dir_ / "absent.pt").string();
  auto r = ReadTensors(path);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(r.status().message().find(path), std::string::npos) << r.status();
}

TEST_F(TensorIoTest, CorruptFileNamesTheFile) {
  const std::string path = (dir_ / "corrupt.pt").string();
  std::ofstream(path) << "this is not a torch.save file";
  auto r = ReadTensors(path);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find(path), std::string::npos) << r.status();
  EXPECT_EQ(std::string(r.status().message()).find("Exception raised from"), std::string::npos);
}

TEST_F(TensorIoTest, NonTensorElementIsAnError) {
  const std::string path = (dir_ / "mixed.pt").string();
  auto w = RunCommand(Python() + " -c " +
                          Quote("import sys, torch; torch.save((torch.ones(2), 3), sys.argv[1])") +
                          " " + Quote(path),
                      dir_.path());
  ASSERT_EQ(w.exit_code, 0) << w.err;
  auto r = ReadTensors(path);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("element '1'"), std::string::npos) << r.status();
}

}  // namespace
}  // namespace kforge
