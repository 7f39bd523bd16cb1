// manifest.json of a bundle: round trip, validation errors that name the field, and the
// checksum verification of ReadBundleManifest (a changed or missing file is refused, named).
#include "runtime/bundle_manifest.h"

#include <filesystem>
#include <fstream>

#include "common/sha256.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/support/temp_dir.h"

namespace kforge {
namespace {

using ::testing::HasSubstr;

void Write(const std::filesystem::path& path, const std::string& data) {
  std::filesystem::create_directories(path.parent_path());
  std::ofstream(path, std::ios::binary) << data;
}

BundleKernel SampleKernel(const std::string& id) {
  BundleKernel k;
  k.id = id;
  k.target_id = std::string(64, 'a');
  k.op = "aten::softmax";
  k.overload = "int";
  k.schema = "aten::softmax.int(Tensor self, int dim, ScalarType? dtype=None) -> Tensor";
  k.signature = "f32[64,512], -1, None";
  k.constants = {{"dim", -1}, {"dtype", nullptr}};
  k.inputs.push_back({"float32", {64, 512}, {512, 1}, true, 16});
  k.outputs.push_back({"float32", {64, 512}, {512, 1}});
  k.int_args = {-1};
  k.float_args = {1e-5, 0.1};
  k.launch_plan_json =
      R"({"launches":[{"entry":"kf_softmax_rows","grid":["in0_numel / in0_size_last"],"block":[256]}]})";
  k.binaries.push_back({"sm_90", {"kernels/" + id + ".sm_90.cubin", Sha256Hex("cubin")},
                        {"kernels/" + id + ".sm_90.ptx", Sha256Hex("ptx")}, true});
  k.source = {"kernels/" + id + ".cu", Sha256Hex("source")};
  k.candidate_id = std::string(64, 'b');
  k.gpu_name = "NVIDIA H200";
  k.eager_s = 1.25e-5;
  k.kernel_s = 5e-6;
  k.speedup = 2.5;
  return k;
}

BundleManifest SampleManifest() {
  BundleManifest m;
  m.created_by = "test";
  m.source_run = "/runs/x";
  m.model_sha256 = std::string(64, 'c');
  m.kernels.push_back(SampleKernel("softmax_aaaaaaaaaaaa"));
  m.notes.push_back("a note");
  return m;
}

TEST(BundleManifestTest, RoundTripsEveryField) {
  const BundleManifest m = SampleManifest();
  const std::string text = ManifestToJson(m);
  absl::StatusOr<BundleManifest> back = ParseManifest(text, "manifest.json");
  ASSERT_TRUE(back.ok()) << back.status();
  ASSERT_EQ(back->kernels.size(), 1u);
  const BundleKernel& k = back->kernels[0];
  EXPECT_EQ(k.id, "softmax_aaaaaaaaaaaa");
  EXPECT_EQ(k.overload, "int");
  EXPECT_EQ(k.inputs[0].sizes, (std::vector<int64_t>{64, 512}));
  EXPECT_EQ(k.inputs[0].strides, (std::vector<int64_t>{512, 1}));
  EXPECT_TRUE(k.inputs[0].contiguous);
  EXPECT_EQ(k.inputs[0].alignment_bytes, 16);
  EXPECT_EQ(k.int_args, (std::vector<int64_t>{-1}));
  EXPECT_EQ(k.float_args, (std::vector<double>{1e-5, 0.1}));  // exact: doubles round-trip
  EXPECT_EQ(k.binaries[0].arch, "sm_90");
  EXPECT_TRUE(k.binaries[0].validated);
  EXPECT_EQ(k.constants["dim"], -1);
  EXPECT_EQ(k.speedup, 2.5);
  EXPECT_EQ(back->notes, m.notes);
  EXPECT_EQ(k.outputs[0].aliases_input, -1);
  EXPECT_EQ(text.find("aliases_input"), std::string::npos);  // written only when in place
  // Deterministic text: the bundle id is a function of the content only.
  EXPECT_EQ(ManifestToJson(*back), text);
}

// An in-place kernel (relu_, add_) writes its output into an input: the manifest names it.
TEST(BundleManifestTest, AnInPlaceOutputNamesTheInputItIsWrittenInto) {
  BundleManifest m = SampleManifest();
  m.kernels[0].outputs[0].aliases_input = 0;
  absl::StatusOr<BundleManifest> back = ParseManifest(ManifestToJson(m), "manifest.json");
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->kernels[0].outputs[0].aliases_input, 0);

  m.kernels[0].outputs[0].aliases_input = 1;
  EXPECT_THAT(ParseManifest(ManifestToJson(m), "m.json").status().message(),
              HasSubstr("kernels[0].outputs[0].aliases_input: no such input"));
  m.kernels[0].outputs[0].aliases_input = 0;
  m.kernels[0].outputs[0].dtype = "bfloat16";
  EXPECT_THAT(ParseManifest(ManifestToJson(m), "m.json").status().message(),
              HasSubstr("the input's dtype, sizes and strides differ from the output's"));
}

TEST(BundleManifestTest, AChainKernelDescribesEachNode) {
  BundleManifest m = SampleManifest();
  BundleKernel& k = m.kernels[0];
  k.op = "aten::mul -> aten::softmax";
  k.overload = k.schema = "";
  k.constants = nlohmann::json::object();
  k.chain = {{"aten::mul", "Tensor", "aten::mul.Tensor(Tensor self, Tensor other) -> Tensor",
              {{"other", 0.125}}},
             {"aten::softmax", "int", "aten::softmax.int(...) -> Tensor", {{"dim", -1}}}};
  absl::StatusOr<BundleManifest> back = ParseManifest(ManifestToJson(m), "manifest.json");
  ASSERT_TRUE(back.ok()) << back.status();
  ASSERT_EQ(back->kernels[0].chain.size(), 2u);
  EXPECT_EQ(back->kernels[0].chain[0].op, "aten::mul");
  EXPECT_EQ(back->kernels[0].chain[1].overload, "int");
  EXPECT_EQ(back->kernels[0].chain[0].constants["other"], 0.125);
  EXPECT_EQ(ManifestToJson(*back), ManifestToJson(m));
  // A single op writes no chain.
  EXPECT_EQ(ManifestToJson(SampleManifest()).find("\"chain\""), std::string::npos);

  k.op = "aten::mul -> aten::add";
  EXPECT_THAT(ParseManifest(ManifestToJson(m), "m.json").status().message(),
              HasSubstr("kernels[0].op: a chain's op must name its nodes' ops"));
  k.op = "aten::mul -> softmax";
  k.chain[1].op = "softmax";
  EXPECT_THAT(ParseManifest(ManifestToJson(m), "m.json").status().message(),
              HasSubstr("kernels[0].chain[1].op: expected an aten operator"));
}

TEST(BundleManifestTest, RefusesWhatTheRuntimeCannotUseNamingTheField) {
  auto refused = [](BundleManifest m) {
    return ParseManifest(ManifestToJson(m), "m.json").status();
  };
  BundleManifest m = SampleManifest();
  m.kernels.push_back(SampleKernel("softmax_aaaaaaaaaaaa"));
  EXPECT_THAT(refused(m).message(), HasSubstr("kernels[1].id: 'softmax_aaaaaaaaaaaa' repeats"));

  m = SampleManifest();
  m.kernels[0].inputs[0].dtype = "float8";
  EXPECT_THAT(refused(m).message(), HasSubstr("kernels[0].guards.inputs[0].dtype: unknown dtype"));

  m = SampleManifest();
  m.kernels[0].inputs[0].alignment_bytes = 12;
  EXPECT_THAT(refused(m).message(), HasSubstr("alignment_bytes: a power of two"));

  m = SampleManifest();
  m.kernels[0].inputs[0].strides = {1};
  EXPECT_THAT(refused(m).message(), HasSubstr("strides: one stride per dim"));

  m = SampleManifest();
  m.kernels[0].binaries[0].cubin.path = "../../etc/passwd";
  EXPECT_THAT(refused(m).message(), HasSubstr("is not a path inside the bundle"));

  m = SampleManifest();
  m.kernels[0].binaries[0].arch = "compute_90";
  EXPECT_THAT(refused(m).message(), HasSubstr("binaries[0].arch"));

  m = SampleManifest();
  m.kernels[0].launch_plan_json = R"({"launches":[{"entry":"k","grid":[1],"block":[1],"shared_byte":1}]})";
  EXPECT_THAT(refused(m).message(), HasSubstr("kernels[0].launch_plan: launch plan"));

  m = SampleManifest();
  m.kernels[0].id = "a:b";
  EXPECT_THAT(refused(m).message(), HasSubstr("without ':'"));

  EXPECT_THAT(ParseManifest("[1]", "m.json").status().message(), HasSubstr("not a JSON object"));
  std::string text = ManifestToJson(SampleManifest());
  text.replace(text.find("kforge-bundle/5"), 15, "kforge-bundle/9");
  EXPECT_THAT(ParseManifest(text, "m.json").status().message(),
              HasSubstr("format 'kforge-bundle/9' is not kforge-bundle/5; this runtime reads "
                        "kforge-bundle/1, kforge-bundle/2, kforge-bundle/3, kforge-bundle/4, "
                        "kforge-bundle/5 bundles only"));
  // Bundles of older formats still load: their kernels read a prefix of today's KfArgs.
  for (const char* older :
       {"kforge-bundle/1", "kforge-bundle/2", "kforge-bundle/3", "kforge-bundle/4"}) {
    text = ManifestToJson(SampleManifest());
    text.replace(text.find("kforge-bundle/5"), 15, older);
    EXPECT_TRUE(ParseManifest(text, "m.json").ok()) << older;
  }
  text = ManifestToJson(SampleManifest());
  text.replace(text.find("\"scalar_args\""), 13, "\"scalar_argz\"");
  EXPECT_THAT(ParseManifest(text, "m.json").status().message(),
              HasSubstr("kernels[0].scalar_args: missing"));
}

class BundleOnDisk : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = dir_.path() / "bundle";
    Write(root_ / "kernels/softmax_aaaaaaaaaaaa.sm_90.cubin", "cubin");
    Write(root_ / "kernels/softmax_aaaaaaaaaaaa.sm_90.ptx", "ptx");
    Write(root_ / "kernels/softmax_aaaaaaaaaaaa.cu", "source");
    manifest_text_ = ManifestToJson(SampleManifest());
    Write(root_ / "manifest.json", manifest_text_);
  }
  TempDir dir_;
  std::filesystem::path root_;
  std::string manifest_text_;
};

TEST_F(BundleOnDisk, LoadsAndIdsTheManifestBySha256) {
  absl::StatusOr<LoadedBundleManifest> loaded = ReadBundleManifest(root_);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_EQ(loaded->id, Sha256Hex(manifest_text_));
  EXPECT_EQ(loaded->files.at("kernels/softmax_aaaaaaaaaaaa.sm_90.cubin"), "cubin");
}

TEST_F(BundleOnDisk, RefusesAChangedFileNamingIt) {
  Write(root_ / "kernels/softmax_aaaaaaaaaaaa.sm_90.cubin", "cubin, patched");
  absl::StatusOr<LoadedBundleManifest> loaded = ReadBundleManifest(root_);
  ASSERT_FALSE(loaded.ok());
  EXPECT_TRUE(absl::IsDataLoss(loaded.status()));
  EXPECT_THAT(loaded.status().message(),
              HasSubstr("checksum mismatch for kernels/softmax_aaaaaaaaaaaa.sm_90.cubin"));
}

TEST_F(BundleOnDisk, RefusesAMissingFileNamingIt) {
  std::filesystem::remove(root_ / "kernels/softmax_aaaaaaaaaaaa.cu");
  absl::StatusOr<LoadedBundleManifest> loaded = ReadBundleManifest(root_);
  ASSERT_FALSE(loaded.ok());
  EXPECT_THAT(loaded.status().message(), HasSubstr("kernels/softmax_aaaaaaaaaaaa.cu is missing"));
}

TEST_F(BundleOnDisk, SaysWhenTheDirectoryIsNoBundle) {
  absl::StatusOr<LoadedBundleManifest> loaded = ReadBundleManifest(dir_.path());
  EXPECT_TRUE(absl::IsNotFound(loaded.status()));
  EXPECT_THAT(loaded.status().message(), HasSubstr("has no manifest.json"));
}

TEST(KfDtypeNamesTest, FollowTheKernelAbi) {
  EXPECT_EQ(KfDtypeFromName("float32"), 1);
  EXPECT_EQ(KfDtypeFromName("bfloat16"), 3);
  EXPECT_EQ(KfDtypeFromName("bool"), 10);
  EXPECT_EQ(KfDtypeFromName("complex64"), 0);
  EXPECT_EQ(KfDtypeName(2), "float16");
  EXPECT_EQ(KfDtypeName(99), "");
}

}  // namespace
}  // namespace kforge
