// Unit tests of the synthesizer: parameter spaces and neighbour moves, determinism per seed,
// feedback-driven children, refusals, family lookup, and launch plans that parse and resolve
// for the sample shape and a held-out shape.
#include "services/proposer/synth/synthesizer.h"

#include <cmath>
#include <map>
#include <optional>
#include <set>
#include <tuple>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/launch_plan.h"
#include "common/shape_key.h"
#include "common/tensor_signature.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "services/proposer/synth/family_registry.h"
#include "services/proposer/synth/kernel_source.h"
#include "services/proposer/synth/param_space.h"
#include "services/proposer/synth/prior_calibration.h"
#include "services/proposer/synth/seeded_rng.h"
#include "services/proposer/synth/target_args.h"
#include "tests/synth/sample_targets.h"

namespace kforge::synth {
namespace {

using ::testing::Contains;
using ::testing::HasSubstr;
using ::testing::Not;
using testing::Dense;
using testing::FloatDTypes;
using testing::SampleTargets;

std::map<std::string, std::string> Params(const v1::Candidate& c) {
  return {c.params().begin(), c.params().end()};
}

std::unique_ptr<KernelGenerator> Bind(const v1::Target& target) {
  return testing::BindForTest(target);
}

v1::ProposeRequest Request(const v1::Target& target, int n, uint64_t seed) {
  v1::ProposeRequest request;
  *request.mutable_target() = target;
  request.set_n(n);
  request.set_seed(seed);
  return request;
}

const testing::SampleTarget& Sample(const std::vector<testing::SampleTarget>& samples,
                                    const std::string& name) {
  for (const auto& s : samples) {
    if (s.name == name) return s;
  }
  ADD_FAILURE() << "no sample " << name;
  return samples.front();
}

TEST(SeededRngTest, SameSeedSameSequenceAndBoundsHold) {
  SeededRng a(42), b(42), c(43);
  bool differs = false;
  for (int i = 0; i < 100; ++i) {
    const uint64_t x = a.Below(7);
    EXPECT_EQ(x, b.Below(7));
    EXPECT_LT(x, 7u);
    const uint64_t from_a = a.Next();
    EXPECT_EQ(from_a, b.Next());
    if (from_a != c.Next()) differs = true;
  }
  EXPECT_TRUE(differs);
  // mt19937_64's first output for seed 42 is fixed by the standard; our mapping on top of it
  // is ours, so this pins the whole sequence across standard libraries.
  SeededRng pinned(5489);
  EXPECT_EQ(pinned.Next(), 14514284786278117030ull);
}

TEST(ParamSpaceTest, NeighboursChangeOneParameterToAnAdjacentValue) {
  ParamSpace space({{"a", {"1", "2", "4"}, ""}, {"b", {"x", "y"}, ""}});
  Config c({{"a", "2"}, {"b", "x"}});
  std::vector<Config> moves = space.Neighbours(c);
  std::set<std::string> got;
  for (const Config& m : moves) {
    EXPECT_TRUE(space.Contains(m));
    got.insert(m.ToString());
  }
  EXPECT_EQ(got, (std::set<std::string>{"a=1;b=x", "a=4;b=x", "a=2;b=y"}));
  EXPECT_EQ(space.Neighbours(Config({{"a", "4"}, {"b", "y"}})).size(), 2u);
}

TEST(ParamSpaceTest, ParsesCanonicalFormAndRejectsValuesOutsideTheSpace) {
  ParamSpace space({{"a", {"1", "2"}, ""}, {"b", {"x", "y"}, ""}});
  auto parsed = space.Parse("b=y;a=2");
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(parsed->ToString(), "a=2;b=y");
  EXPECT_THAT(space.Parse("a=3;b=x").status().message(), HasSubstr("a=3"));
  EXPECT_THAT(space.Parse("a=1").status().message(), HasSubstr("'b'"));
  EXPECT_THAT(space.Parse("a=1;b=x;c=0").status().message(), HasSubstr("unknown parameter 'c'"));
}

TEST(FamilyRegistryTest, EverySampleFindsItsFamily) {
  EXPECT_THAT(FamilyRegistry::Default().ListFamilies(),
              ::testing::ElementsAre("rowwise", "group_norm", "batch_norm", "pooling",
                                     "reduction", "elementwise", "layout"));
  for (v1::DType dtype : FloatDTypes()) {
    for (const auto& sample : SampleTargets(dtype)) {
      std::string refusal;
      const Family* family = FamilyRegistry::Default().Find(sample.target, &refusal);
      ASSERT_NE(family, nullptr) << sample.name << ": " << refusal;
      EXPECT_EQ(family->Name(), sample.family) << sample.name;
      EXPECT_EQ(FamilyRegistry::Default().FamilyFor(sample.target), sample.family);
    }
  }
}

// Returns the refusal for `target` after checking that nothing covers it.
std::string Refusal(const v1::Target& target) {
  std::string refusal;
  EXPECT_EQ(FamilyRegistry::Default().Find(target, &refusal), nullptr) << target.DebugString();
  EXPECT_EQ(FamilyRegistry::Default().FamilyFor(target), "");
  return refusal;
}

TEST(FamilyRegistryTest, RefusesWhatNoFamilyCoversAndSaysWhy) {
  const auto samples = SampleTargets(v1::FLOAT16);
  {
    v1::Target t = Sample(samples, "softmax_last").target;
    t.mutable_inputs(0)->set_strides(0, 1);  // transposed view: a row's elements apart
    t.mutable_inputs(0)->set_strides(2, 128 * 32);
    EXPECT_THAT(Refusal(t), HasSubstr("is not dense with its rows' elements adjacent"));
  }
  {
    v1::Target t = Sample(samples, "softmax_last").target;
    t.mutable_nodes(0)->mutable_args(1)->mutable_scalar()->set_int_value(0);
    EXPECT_THAT(Refusal(t), HasSubstr("last dim only"));
  }
  {
    v1::Target t = Sample(samples, "relu").target;
    t.mutable_inputs(0)->set_dtype(v1::INT32);
    t.mutable_outputs(0)->set_dtype(v1::INT32);
    EXPECT_THAT(Refusal(t), HasSubstr("float32, float16 and bfloat16"));
  }
  {
    v1::Target t = Sample(samples, "layer_norm_affine").target;
    t.mutable_inputs(0)->set_dtype(v1::FLOAT64);
    EXPECT_THAT(Refusal(t), HasSubstr("float64"));
  }
  {
    v1::Target t = Sample(samples, "batch_norm").target;
    for (auto& arg : *t.mutable_nodes(0)->mutable_args()) {
      if (arg.name() == "training") arg.mutable_scalar()->set_bool_value(true);
    }
    EXPECT_THAT(Refusal(t), HasSubstr("inference"));
  }
  {
    // Chains: an operand broadcast inside the value's rows, elementwise nodes before a batch
    // norm, a chain of elementwise nodes only. An LLM proposer can write them.
    v1::Target t = Sample(samples, "softmax_attention_chain").target;
    *t.mutable_inputs(2) = Dense({2, 1, 256, 256}, v1::FLOAT16);  // over [2, 8, S, S]
    EXPECT_THAT(Refusal(t), HasSubstr("does not cover this chain of 4 ops around aten::softmax "
                                      "call: the operand in2 of add [2,1,256,256] broadcasts over "
                                      "the value [2,8,256,256]"));
    t = Sample(samples, "batch_norm_relu").target;
    std::swap(*t.mutable_nodes(0), *t.mutable_nodes(1));
    EXPECT_THAT(Refusal(t), HasSubstr("elementwise nodes before the batch_norm"));
    // The attention's mul and add alone: three tensor inputs, the elementwise engine reads two.
    t = Sample(samples, "softmax_attention_chain").target;
    t.mutable_nodes()->DeleteSubrange(2, t.nodes_size() - 2);
    t.mutable_nodes(1)->set_outputs(0, "out0");
    *t.mutable_outputs(0) = t.inputs(0);
    EXPECT_THAT(Refusal(t), HasSubstr("chain of elementwise nodes whose add reads input 2"));
  }
  {
    v1::Target t = Sample(samples, "relu").target;
    t.mutable_nodes(0)->set_op("aten::relu_");  // in place, but no schema that says so
    EXPECT_THAT(Refusal(t), HasSubstr("does not write the output into self"));
  }
  {
    v1::Target t = Sample(samples, "relu").target;
    t.mutable_nodes(0)->set_op("aten::conv2d");
    EXPECT_THAT(Refusal(t), HasSubstr("no synthesizer family covers aten::conv2d"));
  }
  {
    v1::Target t = Sample(samples, "gelu_erf").target;
    t.mutable_nodes(0)->mutable_args(1)->mutable_scalar()->set_string_value("cubic");
    EXPECT_THAT(Refusal(t), HasSubstr("approximate='cubic'"));
  }
  {
    v1::Target t = Sample(samples, "sum_trailing_keepdim").target;
    t.mutable_nodes(0)->mutable_args(1)->mutable_scalar()->mutable_int_list()->set_values(1, 3);
    t.mutable_nodes(0)->mutable_args(1)->mutable_scalar()->mutable_int_list()->set_values(2, 3);
    EXPECT_THAT(Refusal(t), HasSubstr("adjacent dims only"));
  }
  {
    v1::Target t = Sample(samples, "group_norm_affine").target;
    t.mutable_nodes(0)->mutable_args(1)->mutable_scalar()->set_int_value(3);
    EXPECT_THAT(Refusal(t), HasSubstr("do not split into 3 groups"));
  }
  {
    // A chain whose second node does not read the first's output: malformed.
    v1::Target t = Sample(samples, "relu").target;
    *t.add_nodes() = t.nodes(0);
    EXPECT_THAT(Refusal(t), HasSubstr("none of its operands is the value the chain streams"));
  }
}

// x.to(dtype) and x.type_as(y) are covered as conversions between float types on the tensor's
// device only.
TEST(FamilyRegistryTest, RefusesDtypeConversionsItDoesNotCoverAndSaysWhy) {
  const auto samples = SampleTargets(v1::FLOAT32);
  auto with_arg = [&](const std::string& name, const v1::ScalarValue& value) {
    v1::Target t = Sample(samples, "to_bfloat16").target;
    for (auto& arg : *t.mutable_nodes(0)->mutable_args()) {
      if (arg.name() == name) *arg.mutable_scalar() = value;
    }
    return t;
  };
  {
    // x.to(torch.float32) of a float32 tensor returns x.
    v1::Target t = with_arg("dtype", scalar::Int(6));
    t.mutable_outputs(0)->set_dtype(v1::FLOAT32);
    EXPECT_THAT(Refusal(t), HasSubstr("synth family elementwise does not cover this aten::to "
                                      "call: aten::to: self is already float32; to(float32) "
                                      "returns self: nothing to compute"));
    t = with_arg("copy", scalar::Bool(true));
    t.mutable_nodes(0)->mutable_args(1)->mutable_scalar()->set_int_value(6);
    t.mutable_outputs(0)->set_dtype(v1::FLOAT32);
    EXPECT_THAT(Refusal(t), HasSubstr("with copy=True is a plain copy, no conversion"));
  }
  {
    v1::Target t = with_arg("dtype", scalar::Int(4));
    t.mutable_outputs(0)->set_dtype(v1::INT64);
    EXPECT_THAT(Refusal(t), HasSubstr("aten::to to int64: the family converts between float32, "
                                      "float16 and bfloat16 only"));
  }
  {
    v1::Target t = Sample(SampleTargets(v1::FLOAT16), "to_float32").target;
    t.mutable_inputs(0)->set_dtype(v1::INT64);
    EXPECT_THAT(Refusal(t), HasSubstr("self has dtype int64; the synthesizer covers float32, "
                                      "float16 and bfloat16"));
  }
  {
    // x.to("cuda", torch.bfloat16) and x.to(y) are other overloads.
    v1::Target t = Sample(samples, "to_bfloat16").target;
    t.mutable_nodes(0)->set_overload("device");
    EXPECT_THAT(Refusal(t), HasSubstr("aten::to.device: the elementwise family covers "
                                      "aten::to.dtype only"));
    t.mutable_nodes(0)->set_overload("other");
    EXPECT_THAT(Refusal(t), HasSubstr("aten::to.other: the elementwise family covers "
                                      "aten::to.dtype only"));
  }
  {
    // x.type_as(y): a conversion to y's dtype, y not read; to its own dtype it returns x.
    v1::Target t = Sample(samples, "to_bfloat16_by_type_as").target;
    EXPECT_EQ(FamilyRegistry::Default().FamilyFor(t), "elementwise");
    t.mutable_inputs(1)->set_dtype(v1::FLOAT32);
    t.mutable_outputs(0)->set_dtype(v1::FLOAT32);
    EXPECT_THAT(Refusal(t), HasSubstr("type_as: self is already float32: it returns self"));
    t.mutable_inputs(1)->set_dtype(v1::INT64);
    EXPECT_THAT(Refusal(t), HasSubstr("type_as int64: the family converts between float32"));
  }
  {
    v1::Target t = with_arg("memory_format", scalar::Int(2));  // channels_last
    EXPECT_THAT(Refusal(t), HasSubstr("memory_format=2 changes the layout"));
    for (int64_t format : {0, 1}) {  // contiguous, preserve
      v1::Target keeps = with_arg("memory_format", scalar::Int(format));
      EXPECT_EQ(FamilyRegistry::Default().FamilyFor(keeps), "elementwise") << format;
    }
  }
  {
    // A transposed view converted into the layout eager gives it (its own), or contiguous.
    v1::Target t = Sample(samples, "to_bfloat16").target;
    t.mutable_inputs(0)->set_strides(3, 2048);
    t.mutable_inputs(0)->set_strides(2, 1);
    EXPECT_EQ(FamilyRegistry::Default().FamilyFor(t), "elementwise");
    *t.mutable_outputs(0)->mutable_strides() = t.inputs(0).strides();
    EXPECT_EQ(FamilyRegistry::Default().FamilyFor(t), "elementwise");
  }
  {
    v1::Target t = Sample(samples, "to_bfloat16").target;
    t.mutable_outputs(0)->set_dtype(v1::FLOAT16);
    EXPECT_THAT(Refusal(t), HasSubstr("dtype=bfloat16 but the captured output is float16"));
  }
  // non_blocking changes nothing on one device; copy=False still makes a new tensor when the
  // dtype changes.
  EXPECT_EQ(FamilyRegistry::Default().FamilyFor(with_arg("non_blocking", scalar::Bool(true))),
            "elementwise");
  EXPECT_EQ(FamilyRegistry::Default().FamilyFor(with_arg("copy", scalar::Bool(true))),
            "elementwise");
}

// Qwen3's f32[1,8,2048,2048].to(bfloat16) and the other conversions to and from float32: the
// one-input space and engine with T0 and TO of the two types, vectors of 16 bytes at most of
// the wider type, and a floor of the bytes read plus the bytes written.
TEST(SynthesizerTest, DtypeConversionsUseTheOneInputEngine) {
  const std::tuple<v1::DType, const char*, const char*, const char*> pairs[] = {
      {v1::FLOAT32, "to_bfloat16", "float", "__nv_bfloat16"},
      {v1::FLOAT32, "to_float16", "float", "__half"},
      {v1::BFLOAT16, "to_float32", "__nv_bfloat16", "float"},
      {v1::FLOAT16, "to_float32", "__half", "float"},
  };
  for (const auto& [from, name, in_type, out_type] : pairs) {
    SCOPED_TRACE(absl::StrCat(v1::DType_Name(from), " ", name));
    const v1::Target target = Sample(SampleTargets(from), name).target;
    EXPECT_EQ(FamilyRegistry::Default().FamilyFor(target), "elementwise");
    auto generator = Bind(target);
    ASSERT_NE(generator, nullptr);
    std::vector<std::string> params;
    for (const auto& p : generator->Space().params()) params.push_back(p.name);
    EXPECT_THAT(params, ::testing::ElementsAre("threads", "vec", "ilp", "grid", "occupancy"));
    EXPECT_EQ(generator->Check(
                  *generator->Space().Parse("threads=256;vec=8;ilp=1;grid=oneshot;occupancy=0")),
              "loads wider than 16 bytes");
    auto config = generator->Space().Parse("threads=256;vec=4;ilp=2;grid=stride;occupancy=0");
    ASSERT_TRUE(config.ok()) << config.status();
    ASSERT_EQ(generator->Check(*config), "");
    auto kernel = generator->Generate(*config);
    ASSERT_TRUE(kernel.ok()) << kernel.status();
    EXPECT_THAT(kernel->source, HasSubstr(absl::StrCat("typedef ", in_type, " T0;")));
    EXPECT_THAT(kernel->source, HasSubstr(absl::StrCat("typedef ", out_type, " TO;")));
    EXPECT_THAT(kernel->source, HasSubstr("#define KF_NIN 1"));
    EXPECT_THAT(kernel->source, HasSubstr("kf_op(float a, float b) {\n  return a;\n}"));
    EXPECT_THAT(kernel->launch_plan_json, HasSubstr("\"alignment_bytes\": 16"));
    EXPECT_DOUBLE_EQ(generator->MinBytes(), 8.0 * 2048 * 2048 * (4 + 2));
    // 3 vecs x 3 ilps x 2 grids x 14 (threads, occupancy): 64..512 threads with 0, 50, 100%,
    // 1024 with 0 and 100 (50% of the SM's 2048 threads is one block of 1024: no cap).
    EXPECT_EQ(testing::ValidSample(*generator, 400, 5).size(), 252u);
  }
}

// Arithmetic by a number the capture recorded (a traced Python number): the number is baked
// into the kernel as a float, as aten computes with it (division: times its float
// reciprocal), and `self` is the one input.
TEST(SynthesizerTest, ArithmeticByANumberBakesItIntoAOneInputKernel) {
  for (v1::DType dtype : {v1::FLOAT32, v1::BFLOAT16}) {
    const auto samples = SampleTargets(dtype);
    for (const auto& [name, body] : std::vector<std::pair<std::string, std::string>>{
             {"mul_number", "return a * ((float)0.088388347648318447);"},
             {"add_number", "return a + ((float)0.5) * ((float)1);"},
             {"div_number", "return a * (1.f / ((float)11.313708498984761));"},
             {"rsub_scalar", "return ((float)1) - a;"}}) {
      SCOPED_TRACE(absl::StrCat(v1::DType_Name(dtype), " ", name));
      const v1::Target target = Sample(samples, name).target;
      EXPECT_EQ(FamilyRegistry::Default().FamilyFor(target), "elementwise");
      auto generator = Bind(target);
      ASSERT_NE(generator, nullptr);
      auto config = generator->Space().Parse("threads=256;vec=4;ilp=2;grid=stride;occupancy=0");
      ASSERT_TRUE(config.ok()) << config.status();
      auto kernel = generator->Generate(*config);
      ASSERT_TRUE(kernel.ok()) << kernel.status();
      EXPECT_THAT(kernel->source, HasSubstr("#define KF_NIN 1"));
      EXPECT_THAT(kernel->source, HasSubstr(body));
      // Bytes of self read and the output written: the number is no tensor.
      EXPECT_DOUBLE_EQ(generator->MinBytes(), 2.0 * 2 * 8 * 256 * 256 * ElementSize(dtype));
    }
  }
  // A string where a number belongs is refused with the reason.
  v1::Target t = Sample(SampleTargets(v1::FLOAT32), "mul_number").target;
  for (auto& arg : *t.mutable_nodes(0)->mutable_args()) {
    if (arg.name() == "other") arg.mutable_scalar()->set_string_value("x");
  }
  EXPECT_THAT(Refusal(t), HasSubstr("other"));
}

// In-place forms (relu_, add_) bind as the functional op, the output being self (the
// evaluator also runs them in place); one whose schema does not say so is refused.
TEST(SynthesizerTest, InPlaceFormsBindWhenTheirSchemaWritesSelf) {
  for (const char* name : {"relu_in_place", "add_in_place"}) {
    v1::Target t = Sample(SampleTargets(v1::FLOAT32), name).target;
    auto generator = testing::BindForTest(t);
    ASSERT_NE(generator, nullptr) << name;
    const std::vector<Config> configs = testing::ValidSample(*generator, 1, 1);
    ASSERT_EQ(configs.size(), 1u);
    auto kernel = generator->Generate(configs[0]);
    ASSERT_TRUE(kernel.ok()) << kernel.status();
    EXPECT_THAT(kernel->source, HasSubstr("in place"));
    t.mutable_nodes(0)->clear_schema();
    EXPECT_THAT(Refusal(t), HasSubstr("does not write the output into self")) << name;
  }
}

// A chain is one kernel: its prologue applied to every value the anchor reads of input 0, its
// epilogue to every value it writes, each stage the elementwise family's arithmetic.
TEST(SynthesizerTest, AChainIsOneKernelOfItsAnchor) {
  const auto samples = SampleTargets(v1::BFLOAT16);
  struct Case {
    const char* sample;
    const char* header;
    std::vector<const char*> code;
  };
  const Case cases[] = {
      {"softmax_attention_chain", "// kforge synth: mul -> add -> softmax -> to bfloat16 rows",
       {"ch.one0 = kf_to_float(ch.p0[0]);", "o.v0 = ch.one0;",  // the f64 scale, read once
        "ch.base1 = (row * cols) % args.inputs[2].numel;",  // the mask's rows
        "kf_load<V>(ch.p1 + ch.base1 + c, o.v1);", "return a * b;", "kf_op_add<P, V>",
        "kf_chain_init(ctx.chain, args, ctx.row, ctx.cols);"}},
      {"layer_norm_chain", "// kforge synth: add -> layer_norm -> gelu rows",
       {"ch.base0 = row * cols;", "erff(", "kf_epilogue_apply<V>(p.epi, o);"}},
      {"group_norm_silu_chain", "// kforge synth: group_norm -> silu rows", {"KF_EXP(-a)"}},
      // The time embedding [N,C,1,1] spread over each channel's H*W.
      {"group_norm_temb_chain", "// kforge synth: add -> group_norm -> silu rows",
       {"ch.s0 = kf_spread(args.inputs[1], args.outputs[0], row * cols, KF_VEC);",
        "if (V == 1 || (V == KF_VEC && ch.s0.whole)) {", "struct KfSpread {"}},
      {"silu_mul_chain", "// kforge synth: silu -> mul elementwise",
       {"x = kf_stage0(x, 0.f);", "x = kf_stage1(x, b);", "KF_DIV(a, 1.f + KF_EXP(-a))"}},
      {"add_div_chain", "// kforge synth: add -> div by 1.41421 elementwise",
       {"x = kf_stage0(x, b);", "x = kf_stage1(x, 0.f);"}},
      {"batch_norm_add_relu",
       "// kforge synth: batch_norm inference -> add -> relu\n",
       {"#define KF_EPILOGUE 1", "kf_epi_load<V>(args, k * V, epi[j]);", "return a + b;"}},
      // The mean broadcast back: every element the row's mean through the epilogue, which
      // reads the hidden state (input 0, operand 0: the row's values as the output pass
      // read them) and the weight's row (operand 1).
      {"mean_broadcast_rms_norm",
       "// kforge synth: pow 2 -> mean -> add by 1e-06 -> rsqrt -> mul -> to bfloat16 -> mul "
       "rows",
       {"ctx.a = s.s * (1.f / (float)count);", "return ctx.a; }",
        "ch.base1 = (row * cols) % args.inputs[1].numel;", "x = kf_epi2(o.v0[i], x);",
        "x = kf_epi4(o.v1[i], x);", "return rsqrtf(a);",
        "for (int i = 0; i < V; ++i) o.v0[i] = r[i];", "kf_epilogue_load_from_row<V>(v, epi);",
        // The conversion inside the chain rounds, as eager's .to(bfloat16) does.
        "typedef __nv_bfloat16 TO;\n  return kf_to_float(kf_from_float<TO>(a));"}},
      // SiLU written out: the mul's operand is the streamed input's own value.
      {"sigmoid_mul_self_chain", "// kforge synth: sigmoid -> mul elementwise",
       {"x = kf_stage0(x, 0.f);", "x = kf_stage1(a, x);"}},
  };
  for (const Case& test : cases) {
    SCOPED_TRACE(test.sample);
    auto generator = testing::BindForTest(Sample(samples, test.sample).target);
    ASSERT_NE(generator, nullptr);
    for (const Config& config : testing::ValidSample(*generator, 4, 1)) {
      auto kernel = generator->Generate(config);
      ASSERT_TRUE(kernel.ok()) << kernel.status();
      EXPECT_THAT(kernel->source, HasSubstr(test.header));
      for (const char* code : test.code) EXPECT_THAT(kernel->source, HasSubstr(code));
    }
  }
  // The operands count toward the bytes the target must move: the mask and the scale.
  auto chain = testing::BindForTest(Sample(samples, "softmax_attention_chain").target);
  auto alone = testing::BindForTest(Sample(samples, "softmax_into_float32").target);
  ASSERT_NE(chain, nullptr);
  EXPECT_DOUBLE_EQ(chain->MinBytes(), 2.0 * 8 * 256 * 256 * 4 + 256 * 256 * 2 + 8);
  // A single op's source has no chain code.
  ASSERT_NE(alone, nullptr);
  auto plain = alone->Generate(testing::ValidSample(*alone, 1, 1)[0]);
  ASSERT_TRUE(plain.ok()) << plain.status();
  EXPECT_THAT(plain->source, Not(HasSubstr("KfChain")));
}

// A sum or mean accumulates in fp32 where the chain's prologue makes every term >= 0 (or
// NaN): x^2, |x|, exp, maybe converted after; else in fp64, which keeps a row of nearly
// cancelling values exact enough. A power by an odd integer keeps the sign.
TEST(SynthesizerTest, ASumOfTermsOfOneSignAccumulatesInFp32) {
  const auto samples = SampleTargets(v1::FLOAT32);
  auto stat = [](const v1::Target& target) {
    auto generator = testing::BindForTest(target);
    if (generator == nullptr) return std::string("unbound");
    auto kernel = generator->Generate(testing::ValidSample(*generator, 1, 1)[0]);
    if (!kernel.ok()) return std::string(kernel.status().message());
    for (const char* type : {"struct KfStat { float s; };", "struct KfStat { double s; };"}) {
      if (absl::StrContains(kernel->source, type)) return std::string(type);
    }
    return std::string("no sum statistic");
  };
  constexpr char kF32[] = "struct KfStat { float s; };";
  constexpr char kF64[] = "struct KfStat { double s; };";
  const v1::Target rms = Sample(samples, "mean_broadcast_rms_norm").target;
  EXPECT_EQ(stat(rms), kF32);
  auto with_exponent = [&](const v1::ScalarValue& exponent) {
    v1::Target t = rms;
    for (v1::Argument& arg : *t.mutable_nodes(0)->mutable_args()) {
      if (arg.name() == "exponent") *arg.mutable_scalar() = exponent;
    }
    return t;
  };
  EXPECT_EQ(stat(with_exponent(scalar::Int(4))), kF32);
  EXPECT_EQ(stat(with_exponent(scalar::Float(0.5))), kF32);   // sqrt: NaN below 0
  EXPECT_EQ(stat(with_exponent(scalar::Int(3))), kF64);
  EXPECT_EQ(stat(with_exponent(scalar::Float(-1.0))), kF64);
  // The same chain through exp, and through a function of either sign.
  v1::Target exp = rms;
  exp.mutable_nodes(0)->set_op("aten::exp");
  exp.mutable_nodes(0)->set_overload("");
  exp.mutable_nodes(0)->mutable_args()->DeleteSubrange(1, 1);
  EXPECT_EQ(stat(exp), kF32);
  v1::Target tanh = exp;
  tanh.mutable_nodes(0)->set_op("aten::tanh");
  EXPECT_EQ(stat(tanh), kF64);
  // Reductions of the tensor itself.
  EXPECT_EQ(stat(Sample(samples, "sum_last").target), kF64);
  EXPECT_EQ(stat(Sample(samples, "sum_trailing_keepdim").target), kF64);
}

// A reduction in a chain is written only where the nodes after it broadcast its value back
// over the row it reduced; otherwise the refusal says what the family writes.
TEST(SynthesizerTest, AChainedReductionMustBeBroadcastBackOverItsRow) {
  const v1::Target rms = Sample(SampleTargets(v1::FLOAT32), "mean_broadcast_rms_norm").target;
  ASSERT_NE(testing::BindForTest(rms), nullptr);
  // sum and amax broadcast back the same way (`x / x.sum(-1, keepdim=True)`, softmax's
  // `x - x.amax(-1, keepdim=True)`); argmax's index is not a value to broadcast.
  for (const char* op : {"aten::sum", "aten::amax", "aten::argmax"}) {
    v1::Target t = rms;
    t.mutable_nodes(1)->set_op(op);
    t.mutable_nodes(1)->set_overload(std::string(op) == "aten::sum" ? "dim_IntList" : "");
    if (std::string(op) == "aten::argmax") {
      EXPECT_THAT(Refusal(t), HasSubstr("an index is not broadcast back"));
      continue;
    }
    auto generator = testing::BindForTest(t);
    ASSERT_NE(generator, nullptr) << op;
    auto kernel = generator->Generate(testing::ValidSample(*generator, 1, 1)[0]);
    ASSERT_TRUE(kernel.ok()) << kernel.status();
    EXPECT_THAT(kernel->source, HasSubstr(std::string(op) == "aten::sum" ? "ctx.a = (float)s.s;"
                                                                         : "ctx.a = s.v;"));
  }
  auto with_mean_arg = [&](const char* name, const v1::ScalarValue& value) {
    v1::Target t = rms;
    for (v1::Argument& arg : *t.mutable_nodes(1)->mutable_args()) {
      if (arg.name() == name) *arg.mutable_scalar() = value;
    }
    return t;
  };
  EXPECT_THAT(Refusal(with_mean_arg("keepdim", scalar::Bool(false))),
              HasSubstr("(keepdim=True) is broadcast back to the input's shape"));
  EXPECT_THAT(Refusal(with_mean_arg("dim", scalar::Ints({1}))),
              HasSubstr("(keepdim=True) is broadcast back to the input's shape"));
  // A chain that ends at the reduction writes one value per row: not a broadcast.
  v1::Target ends = rms;
  ends.mutable_nodes()->DeleteSubrange(2, ends.nodes_size() - 2);
  ends.mutable_nodes(1)->set_outputs(0, "out0");
  *ends.mutable_outputs(0) = testing::Dense({2, 1024, 1}, v1::FLOAT32);
  ends.mutable_input_names()->DeleteSubrange(1, ends.input_names_size() - 1);
  ends.mutable_inputs()->DeleteSubrange(1, ends.inputs_size() - 1);
  EXPECT_THAT(Refusal(ends), HasSubstr("broadcast back"));
}

// A written-out RMSNorm reads its hidden state once: capture names it one input (pow's and
// the mul's), and the output pass hands the epilogue the row as it read it, from shared
// memory or from a register cache that holds x itself rather than the prologue's x^2. Where
// the two reads are two inputs (Gemma's sample), the register cache holds x^2 and the
// epilogue loads its operand.
TEST(SynthesizerTest, AWrittenOutRmsNormReadsItsRowOnce) {
  const auto samples = SampleTargets(v1::BFLOAT16);
  auto source = [&](const char* sample, const char* cache) {
    auto generator = testing::BindForTest(Sample(samples, sample).target);
    EXPECT_NE(generator, nullptr) << sample;
    if (generator == nullptr) return std::string();
    auto config =
        generator->Space().Parse(absl::StrCat("row_threads=128;vec=4;reg_cache=8;split=1;split_"
                                              "mode=scratch;lag_scale=1;unroll=1;grid=oneshot;"
                                              "rows_per_block=1;cache=",
                                              cache));
    EXPECT_TRUE(config.ok()) << config.status();
    if (!config.ok()) return std::string();
    auto kernel = generator->Generate(generator->Canonicalize(*config));
    EXPECT_TRUE(kernel.ok()) << kernel.status();
    return kernel.ok() ? kernel->source : std::string();
  };
  for (const char* cache : {"none", "smem", "regs"}) {
    SCOPED_TRACE(cache);
    const std::string src = source("mean_broadcast_rms_norm", cache);
    EXPECT_THAT(src, HasSubstr("kf_epilogue_load_from_row<V>(v, epi);"));
    EXPECT_THAT(src, Not(HasSubstr("kf_cache_in")));  // the register cache holds x as read
  }
  const std::string gemma = source("mean_broadcast_gemma_norm", "regs");
  EXPECT_THAT(gemma, HasSubstr("kf_cache_in<V>(v, c, ctx);"));
  EXPECT_THAT(gemma, Not(HasSubstr("_from_row")));
  // With the register cache, the output pass's parameters (the weight's vectors) are loaded
  // in pass 0 with the row, not after its reduction; after the prologue (Gemma's form), the
  // cached hooks' parameters.
  EXPECT_THAT(source("mean_broadcast_rms_norm", "regs"),
              HasSubstr("kf_out_params<V>(c, ctx, pre[k]);"));
  EXPECT_THAT(gemma, HasSubstr("kf_cached_out_params<V>(c, ctx, pre[k]);"));
}

// The bf16 sample attention chain (mul -> add mask -> softmax -> to) and a one-warp-per-row
// config of it with `choices` (rows per block, algo, cache, row order), canonicalized.
std::unique_ptr<KernelGenerator> AttentionChain() {
  return testing::BindForTest(
      Sample(SampleTargets(v1::BFLOAT16), "softmax_attention_chain").target);
}
Config AttentionConfig(const KernelGenerator& attention, const std::string& choices) {
  auto config =
      attention.Space().Parse(absl::StrCat("row_threads=32;vec=8;reg_cache=8;split=1;split_mode="
                                           "scratch;lag_scale=1;unroll=1;fast_math=1;"
                                           "grid=oneshot;",
                                           choices));
  EXPECT_TRUE(config.ok()) << config.status();
  return config.ok() ? attention.Canonicalize(*config) : Config();
}

// A chain operand whose rows the value repeats (attention's mask over batches and heads) gives
// the row engine a choice of row order: the rows reading one mask row side by side, or in order.
// Only unsplit rows take it, and a chain without such an operand has no such choice.
TEST(SynthesizerTest, RowsThatShareAMaskRowCanBeNeighbours) {
  auto attention = AttentionChain();
  ASSERT_NE(attention, nullptr);
  const Config operand =
      AttentionConfig(*attention, "rows_per_block=8;algo=online;cache=smem;row_order=operand");
  ASSERT_EQ(attention->Check(operand), "");
  auto kernel = attention->Generate(operand);
  ASSERT_TRUE(kernel.ok()) << kernel.status();
  EXPECT_THAT(kernel->source, HasSubstr("return args.inputs[2].numel / max(cols, (kf_i64)1);"));
  EXPECT_THAT(kernel->source,
              HasSubstr("const kf_i64 row = kf_value_row(args, rb * KF_RPB + rib, rows, cols);"));
  Config linear = operand;
  linear.Set("row_order", "linear");
  auto in_order = attention->Generate(linear);
  ASSERT_TRUE(in_order.ok()) << in_order.status();
  EXPECT_THAT(in_order->source, Not(HasSubstr("kf_value_row")));
  Config split = operand;
  split.SetInt("split", 2);
  EXPECT_EQ(attention->Canonicalize(split).Get("row_order"), "linear");

  auto layer_norm =
      testing::BindForTest(Sample(SampleTargets(v1::BFLOAT16), "layer_norm_chain").target);
  ASSERT_NE(layer_norm, nullptr);
  EXPECT_EQ(layer_norm->Space().Find("row_order"), nullptr);
  EXPECT_NE(attention->Space().Find("row_order"), nullptr);
}

// A register cache holds the values after the chain's prologue, and a two-pass softmax leaves
// exp(x - max) there: its output pass multiplies, loading no mask and taking no exp again.
TEST(SynthesizerTest, ARegisterCacheHoldsValuesAfterThePrologue) {
  auto attention = AttentionChain();
  ASSERT_NE(attention, nullptr);
  const Config regs =
      AttentionConfig(*attention, "rows_per_block=4;algo=two_pass;cache=regs;row_order=linear");
  ASSERT_EQ(attention->Check(regs), "");
  auto kernel = attention->Generate(regs);
  ASSERT_TRUE(kernel.ok()) << kernel.status();
  EXPECT_THAT(kernel->source, Not(HasSubstr("#error")));
  EXPECT_THAT(kernel->source, HasSubstr("kf_prologue_apply<V>(pro, v);\n}"));  // kf_cache_in
  EXPECT_THAT(kernel->source, HasSubstr("v[i] = kf_exp(v[i], ctx);"));
  EXPECT_THAT(kernel->source, HasSubstr("o[i] = v[i] * ctx.b;"));
  // Fast math into bfloat16: exp(x - max) as one FFMA before the ex2 (device/softmax_exp.cuh);
  // exact math keeps the difference.
  EXPECT_THAT(kernel->source, HasSubstr("#define KF_SHIFTED_EXP 1\n"));
  Config exact = regs;
  exact.Set("fast_math", "0");
  auto exact_kernel = attention->Generate(exact);
  ASSERT_TRUE(exact_kernel.ok()) << exact_kernel.status();
  EXPECT_THAT(exact_kernel->source, HasSubstr("#define KF_SHIFTED_EXP 0\n"));
  EXPECT_THAT(kernel->source, HasSubstr("kf_cached_out_vec<V>(l.v, c, l.p, ctx, o);"));
  // One pass: the online statistics keep their exps; the output pass takes its own.
  Config online = regs;
  online.Set("algo", "online");
  auto one_pass = attention->Generate(online);
  ASSERT_TRUE(one_pass.ok()) << one_pass.status();
  EXPECT_THAT(one_pass->source, HasSubstr("kf_cached_add<0, V>(s, v, c, ctx);"));
  EXPECT_THAT(one_pass->source, Not(HasSubstr("o[i] = v[i] * ctx.b;")));
  // Other caches carry none of it.
  Config smem = regs;
  smem.Set("cache", "smem");
  auto shared = attention->Generate(attention->Canonicalize(smem));
  ASSERT_TRUE(shared.ok()) << shared.status();
  EXPECT_THAT(shared->source, Not(HasSubstr("kf_cached_")));
}

// cache=smem_f32: shared memory holds the values after the chain's prologue as float, so the
// later passes read none of its operands again; offered only to chains with a prologue, sized
// at four bytes an element, and not to sync splits, whose double buffer holds raw chunks.
TEST(SynthesizerTest, SharedMemoryCanHoldValuesAfterThePrologue) {
  auto attention = AttentionChain();
  ASSERT_NE(attention, nullptr);
  const Config f32 =
      AttentionConfig(*attention, "rows_per_block=2;algo=online;cache=smem_f32;row_order=linear");
  ASSERT_EQ(attention->Check(f32), "");
  Config raw = f32;
  raw.Set("cache", "smem");
  // Two rows of 256 elements, two bytes more an element.
  EXPECT_EQ(attention->SharedBytes(f32) - attention->SharedBytes(raw), 2 * 256 * 2);
  auto kernel = attention->Generate(f32);
  ASSERT_TRUE(kernel.ok()) << kernel.status();
  EXPECT_THAT(kernel->source, Not(HasSubstr("#error")));
  EXPECT_THAT(kernel->source, HasSubstr("if (use_smem) kf_smem_put<V>(srow, c - c0, chunk, v);"));
  EXPECT_THAT(kernel->source, HasSubstr("kf_cached_out_params<V>(c, ctx, p);"));
  EXPECT_THAT(kernel->launch_plan_json, HasSubstr("CHUNK * 4, "));
  EXPECT_THAT(kernel->source, Not(HasSubstr("exps_cached")));
  // A two-pass softmax's second pass leaves exp(x - max) in shared memory, and the output
  // pass multiplies; a row that outgrew shared memory takes its exps where it is re-read.
  Config two_pass = f32;
  two_pass.Set("algo", "two_pass");
  auto exps = attention->Generate(two_pass);
  ASSERT_TRUE(exps.ok()) << exps.status();
  EXPECT_THAT(exps->source, HasSubstr("v[i] = kf_exp(v[i], ctx);\n      st.s += v[i];"));
  EXPECT_THAT(exps->source, HasSubstr("kf_cached_add<1, V>(t, v, c, ctx);  // leaves exp(x - max) "
                                      "in v\n        if (use_smem) kf_smem_put<V>(srow, c - c0, chunk, v);"));
  EXPECT_THAT(exps->source, HasSubstr("kf_finish<1>(t, ctx);\n  exps_cached = true;"));
  EXPECT_THAT(exps->source, HasSubstr("if (exps_cached) {"));
  EXPECT_THAT(exps->source, HasSubstr("o[i] = v[i] * ctx.b;"));
  // The search starts from such a config: a warp a row, as the chain's winners were.
  bool seeded = false;
  for (const Config& seed : attention->Seeds()) {
    seeded = seeded || (seed.Get("cache") == "smem_f32" && seed.Get("algo") == "two_pass" &&
                        seed.GetInt("row_threads") == 32 && attention->Check(seed).empty());
  }
  EXPECT_TRUE(seeded);
  Config sync = f32;
  sync.SetInt("row_threads", 16);
  sync.SetInt("split", 2);
  sync.Set("split_mode", "sync");
  EXPECT_THAT(attention->Check(attention->Canonicalize(sync)), HasSubstr("sync split"));
  // A softmax without a prologue has no such cache.
  auto plain = testing::BindForTest(Sample(SampleTargets(v1::BFLOAT16), "softmax_last").target);
  ASSERT_NE(plain, nullptr);
  ASSERT_NE(plain->Space().Find("cache"), nullptr);
  EXPECT_THAT(plain->Space().Find("cache")->values, Not(::testing::Contains("smem_f32")));
}

// A one-element float64 tensor on the device (a scale the model keeps there): the kernel
// reads it as double, once before the loop or once per vector (`scalar`), so the bf16 input
// still vectorizes to 16 bytes; a float64 tensor of more elements is refused with the reason.
TEST(SynthesizerTest, AOneElementFloat64OperandIsReadAsAScalar) {
  const v1::Target target = Sample(SampleTargets(v1::BFLOAT16), "mul_device_scalar").target;
  auto generator = Bind(target);
  ASSERT_NE(generator, nullptr);
  auto config =
      generator->Space().Parse("threads=256;vec=8;ilp=1;grid=stride;occupancy=0;scalar=each");
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(generator->Check(*config), "");
  EXPECT_EQ(generator->Space().Find("reuse"), nullptr);  // a scalar spans no output row
  auto kernel = generator->Generate(*config);
  ASSERT_TRUE(kernel.ok()) << kernel.status();
  EXPECT_THAT(kernel->source, HasSubstr("typedef double T1;"));
  EXPECT_THAT(kernel->source, HasSubstr("float kf_to_float(double x)"));
  EXPECT_THAT(kernel->source, HasSubstr("return a * b;"));
  EXPECT_THAT(kernel->launch_plan_json, HasSubstr("\"alignment_bytes\": 16"));
  EXPECT_DOUBLE_EQ(generator->MinBytes(), 2.0 * 2 * 8 * 256 * 256 * 2 + 8);
  // Read with each vector: the streamed input's loads first, the scalar's after them.
  EXPECT_THAT(kernel->source, HasSubstr("#define KF_SCALAR_ONCE 0"));
  auto once =
      generator->Space().Parse("threads=256;vec=8;ilp=1;grid=stride;occupancy=0;scalar=once");
  ASSERT_TRUE(once.ok()) << once.status();
  EXPECT_THAT(generator->Generate(*once)->source, HasSubstr("#define KF_SCALAR_ONCE 1"));

  v1::Target wide = target;
  wide.mutable_inputs(1)->add_sizes(2);
  wide.mutable_inputs(1)->add_strides(1);
  EXPECT_THAT(Refusal(wide), HasSubstr("other has dtype float64"));
}

// The one-input math ops and pow by a number, each as aten's CUDA kernel computes it; pow by a
// tensor is another overload, refused.
TEST(SynthesizerTest, UnaryMathAndPowByANumberComputeAsAten) {
  const auto samples = SampleTargets(v1::BFLOAT16);
  for (const auto& [name, body] : std::vector<std::pair<std::string, std::string>>{
           {"neg", "return -a;"},
           {"abs", "return fabsf(a);"},
           {"exp", "return KF_EXP(a);"},
           {"sqrt", "return sqrtf(a);"},
           {"rsqrt", "return rsqrtf(a);"},
           {"sin", "return sinf(a);"},
           {"cos", "return cosf(a);"},
           {"pow_square", "return a * a;"}}) {
    SCOPED_TRACE(name);
    auto generator = Bind(Sample(samples, name).target);
    ASSERT_NE(generator, nullptr);
    std::vector<std::string> params;
    for (const auto& p : generator->Space().params()) params.push_back(p.name);
    // exp alone has a fast-math choice (__expf).
    EXPECT_EQ(params.size(), name == "exp" ? 6u : 5u);
    auto kernel = generator->Generate(testing::ValidSample(*generator, 1, 3).front());
    ASSERT_TRUE(kernel.ok()) << kernel.status();
    EXPECT_THAT(kernel->source, HasSubstr(body));
  }
  v1::Target t = Sample(samples, "pow_square").target;
  for (auto& arg : *t.mutable_nodes(0)->mutable_args()) {
    if (arg.name() == "exponent") arg.mutable_scalar()->set_float_value(1.7);
  }
  auto generator = Bind(t);
  ASSERT_NE(generator, nullptr);
  auto kernel = generator->Generate(testing::ValidSample(*generator, 1, 3).front());
  ASSERT_TRUE(kernel.ok()) << kernel.status();
  EXPECT_THAT(kernel->source, HasSubstr("return powf(a, ((float)1.7));"));
  t.mutable_nodes(0)->set_overload("Tensor_Tensor");
  EXPECT_THAT(Refusal(t), HasSubstr("aten::pow.Tensor_Tensor: the elementwise family covers "
                                    "pow.Tensor_Scalar only"));
}

// The activations and clamps with numbers, each as aten's CUDA kernel computes it: clamps
// compare in the tensor's type with the bounds rounded to it and keep NaN; hardsigmoid and
// hardswish take std::max / std::min's NaN; masked_fill and where take their number where
// the bool mask says; a clamp without a bound, a mask that is not bool and a where of two
// numbers are refused with the reason.
TEST(SynthesizerTest, ActivationsWithNumbersComputeAsAten) {
  const auto samples = SampleTargets(v1::BFLOAT16);
  for (const auto& [name, body] : std::vector<std::pair<std::string, std::string>>{
           {"log", "return logf(a);"},
           {"log1p", "return log1pf(a);"},
           {"reciprocal", "return 1.f / a;"},
           {"erf", "return erff(a);"},
           {"hardsigmoid",
            "lo = t < 0.f ? 0.f : t;\n  return (6.f < lo ? 6.f : lo) * (1.f / 6.f);"},
           {"hardswish", "return a * (6.f < lo ? 6.f : lo) * (1.f / 6.f);"},
           {"mish", "return a * tanhf(log1pf(expf(a)));"},
           {"leaky_relu", "return a > 0.f ? a : a * ((float)0.10000000000000001);"},
           {"relu6",
            "lo = kf_to_float(kf_from_float<TO>(((float)0)));\n  const float hi = "
            "kf_to_float(kf_from_float<TO>(((float)6)));\n  return fminf(fmaxf(a, lo), hi);"},
           {"hardtanh", "return fminf(fmaxf(a, lo), hi);"},
           {"clamp_min_only",
            "if (a != a) return a;\n  const float lo = kf_to_float(kf_from_float<TO>("
            "((float)-0.29999999999999999)));\n  return fmaxf(a, lo);"},
           {"clamp_max", "return fminf(a, hi);"},
           {"elu", "return a > 0.f ? a * ((float)1) : expm1f(a * ((float)1)) * ((float)1.5);"},
           {"softplus", "return a * ((float)2) > ((float)1) ? a : log1pf(expf(a * ((float)2))) / "
                        "((float)2);"},
           {"masked_fill_broadcast", "return b != 0.f ? ((float)-10000) : a;"},
           {"masked_fill_flat", "return b != 0.f ? ((float)0) : a;"},
           {"where_number_other", "return a != 0.f ? b : ((float)-10000);"},
           {"where_number_self", "return a != 0.f ? ((float)0.5) : b;"}}) {
    SCOPED_TRACE(name);
    auto generator = Bind(Sample(samples, name).target);
    ASSERT_NE(generator, nullptr);
    auto kernel = generator->Generate(testing::ValidSample(*generator, 1, 3).front());
    ASSERT_TRUE(kernel.ok()) << kernel.status();
    EXPECT_THAT(kernel->source, HasSubstr(body));
  }
  // The mask is read as bytes, one per element: bf16 vectors of 8 still fit.
  auto masked = Bind(Sample(samples, "masked_fill_flat").target);
  ASSERT_NE(masked, nullptr);
  auto config = masked->Space().Parse("threads=256;vec=8;ilp=1;grid=stride;occupancy=0");
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(masked->Check(*config), "");
  auto kernel = masked->Generate(*config);
  ASSERT_TRUE(kernel.ok()) << kernel.status();
  EXPECT_THAT(kernel->source, HasSubstr("typedef unsigned char T1;"));
  EXPECT_THAT(kernel->source, HasSubstr("float kf_to_float(unsigned char x)"));

  v1::Target unbounded = Sample(samples, "clamp_min_only").target;
  for (auto& arg : *unbounded.mutable_nodes(0)->mutable_args()) {
    if (arg.name() == "min") arg.mutable_scalar()->set_none(true);
  }
  EXPECT_THAT(Refusal(unbounded), HasSubstr("clamp without a bound: nothing to compute"));
  v1::Target not_bool = Sample(samples, "masked_fill_flat").target;
  not_bool.mutable_inputs(1)->set_dtype(v1::FLOAT32);
  EXPECT_THAT(Refusal(not_bool), HasSubstr("masked_fill: the mask has dtype float32, not bool"));
  v1::Target two_numbers = Sample(samples, "where_number_self").target;
  two_numbers.mutable_inputs()->RemoveLast();
  two_numbers.mutable_input_names()->RemoveLast();
  for (auto& arg : *two_numbers.mutable_nodes(0)->mutable_args()) {
    if (arg.name() == "other") arg.mutable_scalar()->set_float_value(1);
  }
  EXPECT_THAT(Refusal(two_numbers), HasSubstr("where with two number branches"));
}

// Elementwise inputs may be views of any strides (a slice, an expand): the kernel reads them
// through their broadcast groups, the plan does not require contiguity (the runtime's guards
// still hold each call to the validated strides), and the floor counts what an expanded input
// holds. The output stays dense: eager lays out a permuted input's result like it, which the
// family does not write.
TEST(SynthesizerTest, ElementwiseInputsMayBeViews) {
  const auto samples = SampleTargets(v1::BFLOAT16);
  for (const char* name : {"mul_sliced", "neg_sliced", "add_expanded", "mul_transposed",
                           "add_alpha"}) {
    auto generator = Bind(Sample(samples, name).target);
    ASSERT_NE(generator, nullptr) << name;
    auto kernel = generator->Generate(testing::ValidSample(*generator, 1, 1)[0]);
    ASSERT_TRUE(kernel.ok()) << kernel.status();
    const bool dense = std::string(name) == "add_alpha";
    EXPECT_THAT(kernel->launch_plan_json,
                HasSubstr(dense ? "\"contiguous\": true" : "\"contiguous\": false"))
        << name;
  }
  auto expanded = Bind(Sample(samples, "add_expanded").target);
  ASSERT_NE(expanded, nullptr);
  EXPECT_DOUBLE_EQ(expanded->MinBytes(), (2.0 * 64 * 1024 + 1024) * 2);
  // An output dense in another order (eager's layout of a transposed input's result) is
  // written in its memory order; one with gaps is refused.
  auto rotary = Bind(Sample(samples, "mul_transposed").target);
  ASSERT_NE(rotary, nullptr);
  v1::Target gaps = Sample(samples, "neg_sliced").target;
  *gaps.mutable_outputs(0) = gaps.inputs(0);
  EXPECT_THAT(Refusal(gaps), HasSubstr("the output is not dense"));
  // Tensors that carry no strides are contiguous (the launch plan's convention).
  v1::Target unstrided = Sample(samples, "add_alpha").target;
  unstrided.mutable_outputs(0)->clear_strides();
  for (auto& in : *unstrided.mutable_inputs()) in.clear_strides();
  auto generator = Bind(unstrided);
  ASSERT_NE(generator, nullptr);
  auto kernel = generator->Generate(testing::ValidSample(*generator, 1, 1)[0]);
  ASSERT_TRUE(kernel.ok()) << kernel.status();
  EXPECT_THAT(kernel->launch_plan_json, HasSubstr("\"contiguous\": true"));
}

// Gemma3's head norms after the transpose: the row engine reads rows that are dense but not
// adjacent through the outer dims' strides and writes the output in the input's layout, in one
// unsplit launch whose vectors the strides between rows keep aligned; rows that are not dense
// are refused with the reason.
TEST(SynthesizerTest, RowEngineReadsViewsWhoseRowsAreDense) {
  const auto samples = SampleTargets(v1::BFLOAT16);
  const v1::Target head_norm = Sample(samples, "mean_broadcast_head_norm").target;
  ASSERT_EQ(head_norm.inputs_size(), 3);  // x (read twice), the weight, type_as's other
  auto generator = Bind(head_norm);
  ASSERT_NE(generator, nullptr);
  auto config = generator->Space().Parse(
      "row_threads=32;rows_per_block=2;vec=4;cache=regs;reg_cache=16;split=1;"
      "split_mode=scratch;lag_scale=1;unroll=1;grid=oneshot");
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(generator->Check(*config), "");
  auto kernel = generator->Generate(*config);
  ASSERT_TRUE(kernel.ok()) << kernel.status();
  EXPECT_THAT(kernel->source, HasSubstr("return kf_outer_offset(args.inputs[0], row, "));
  EXPECT_THAT(kernel->source, HasSubstr("return kf_outer_offset(args.outputs[0], row, "));
  EXPECT_THAT(kernel->source, HasSubstr("ch.base0 = kf_in_row(args, row, cols);"));
  EXPECT_THAT(kernel->launch_plan_json, HasSubstr("\"contiguous\": false"));
  EXPECT_THAT(kernel->launch_plan_json, HasSubstr("in0_stride1 * min(in0_size1 - 1, 1)"));
  config->SetInt("split", 4);
  EXPECT_THAT(generator->Check(*config), HasSubstr("take one launch, unsplit"));
  // The contiguous RMSNorm keeps adjacent rows: no strides read.
  auto dense = Bind(Sample(samples, "mean_broadcast_rms_norm").target);
  ASSERT_NE(dense, nullptr);
  auto dense_kernel = dense->Generate(testing::ValidSample(*dense, 1, 1)[0]);
  ASSERT_TRUE(dense_kernel.ok()) << dense_kernel.status();
  EXPECT_THAT(dense_kernel->source, Not(HasSubstr("kf_outer_offset(args")));
  EXPECT_THAT(dense_kernel->launch_plan_json, HasSubstr("\"contiguous\": true"));
  // A row whose elements are not adjacent (a transpose of the row's own dim) is refused.
  v1::Target scattered = head_norm;
  for (auto* sig : {scattered.mutable_inputs(0), scattered.mutable_outputs(0)}) {
    const int64_t h = sig->sizes(1), s = sig->sizes(2), d = sig->sizes(3);
    sig->clear_strides();
    for (int64_t stride : {h * s * d, s * d, 1l, s}) sig->add_strides(stride);
  }
  EXPECT_THAT(Refusal(scattered), HasSubstr("is not dense with its rows' elements adjacent"));
}

// Layout copies: any input strides (the plan does not require contiguous tensors), the
// element type copied as it is, and the prior prefers vectors where the innermost dim is dense;
// a contiguous input, a channels-last output and a dtype change are refused with the reason.
TEST(SynthesizerTest, LayoutCopiesReadViewsThroughTheirStrides) {
  const auto samples = SampleTargets(v1::BFLOAT16);
  const v1::Target transpose = Sample(samples, "contiguous_transpose").target;
  EXPECT_EQ(FamilyRegistry::Default().FamilyFor(transpose), "layout");
  auto generator = Bind(transpose);
  ASSERT_NE(generator, nullptr);
  auto vec8 = generator->Space().Parse("threads=256;vec=8;ilp=2;grid=stride");
  auto vec1 = generator->Space().Parse("threads=256;vec=1;ilp=2;grid=stride");
  ASSERT_TRUE(vec8.ok() && vec1.ok());
  EXPECT_LT(generator->EstimateSeconds(*vec8), generator->EstimateSeconds(*vec1));
  EXPECT_THAT(generator->Check(*generator->Space().Parse("threads=256;vec=16;ilp=1;grid=stride")),
              HasSubstr("vectors of 32 bytes"));
  auto kernel = generator->Generate(*vec8);
  ASSERT_TRUE(kernel.ok()) << kernel.status();
  EXPECT_THAT(kernel->source, HasSubstr("typedef __nv_bfloat16 T;"));
  EXPECT_THAT(kernel->source, HasSubstr("kf_groups<I>(x, x, l.groups)"));
  EXPECT_DOUBLE_EQ(generator->MinBytes(), 2.0 * 2 * 128 * 8 * 64 * 2);
  // The captured call's entry reads as the host decided, dense vectors of the head dim, through
  // its groups as constants (the head dim, the heads of stride 8192, the tokens of stride 64,
  // the batch): no thread works the layout out. The launcher takes it for the captured shape key
  // with every pointer aligned to a vector; other calls run kf_layout_copy.
  EXPECT_THAT(kernel->source, HasSubstr("#define KF_CAPTURED_READ 1\n#define KF_CAPTURED_EXACT "
                                        "0\n#define KF_CAPTURED_NUMEL 131072\n"));
  EXPECT_THAT(kernel->source,
              HasSubstr("  { const I q = kf_const_div<I, 64ull>(e); offset += (e - q * (I)64) * "
                        "(I)1; e = q; }\n"
                        "  { const I q = kf_const_div<I, 8ull>(e); offset += (e - q * (I)8) * "
                        "(I)8192; e = q; }\n"
                        "  { const I q = kf_const_div<I, 128ull>(e); offset += (e - q * (I)128) "
                        "* (I)64; e = q; }\n"
                        "  { const I q = kf_const_div<I, 2ull>(e); offset += (e - q * (I)2) * "
                        "(I)65536; e = q; }\n  return offset;"));
  EXPECT_THAT(kernel->source, HasSubstr("kf_layout_copy_captured(KfCapturedArgs args)"));
  const nlohmann::json plan = nlohmann::json::parse(kernel->launch_plan_json);
  EXPECT_EQ(plan["launches"][0]["entry"], "kf_layout_copy");
  EXPECT_EQ(plan["launches"][0]["captured_entry"], "kf_layout_copy_captured");
  EXPECT_EQ(plan["captured"]["alignment_bytes"], 16);
  EXPECT_EQ(plan["captured"]["shape_key"],
            absl::StrFormat("0x%016x", CapturedShapeKey(transpose)));
  // A one-shot grid of 32 blocks of 4,096 elements tiles the call: no bound to test.
  auto oneshot =
      generator->Generate(*generator->Space().Parse("threads=256;vec=8;ilp=2;grid=oneshot"));
  ASSERT_TRUE(oneshot.ok()) << oneshot.status();
  EXPECT_THAT(oneshot->source, HasSubstr("#define KF_CAPTURED_EXACT 1\n"));
  // Element by element, the captured entry needs no alignment.
  auto scalar = generator->Generate(*vec1);
  ASSERT_TRUE(scalar.ok()) << scalar.status();
  EXPECT_THAT(scalar->source, HasSubstr("#define KF_CAPTURED_READ 0\n"));
  EXPECT_EQ(nlohmann::json::parse(scalar->launch_plan_json)["captured"]["alignment_bytes"], 1);

  v1::Target dense = transpose;
  dense.mutable_inputs(0)->clear_strides();
  EXPECT_THAT(Refusal(dense), HasSubstr("of a contiguous tensor: a plain copy"));
  v1::Target channels_last = transpose;
  for (auto& arg : *channels_last.mutable_nodes(0)->mutable_args()) {
    if (arg.name() == "memory_format") arg.mutable_scalar()->set_int_value(2);
  }
  EXPECT_THAT(Refusal(channels_last), HasSubstr("memory_format=2"));
  v1::Target converting = transpose;
  converting.mutable_outputs(0)->set_dtype(v1::FLOAT32);
  EXPECT_THAT(Refusal(converting), HasSubstr("dtype bfloat16 into float32"));
}

// Nearest-neighbour upsampling by whole factors is a layout copy of kf_repeat_view: the
// factors and the upsampled row's spread compiled in, the floor the input read once and the
// output written once; a channels-last input and output (eager's) read in the output's memory
// order, whose innermost dim (channels) is dense; a ratio whose float source index is not
// dst / r, and an output dense in no order, are refused with the reason.
TEST(SynthesizerTest, NearestUpsamplingByWholeFactorsIsALayoutCopy) {
  const auto samples = SampleTargets(v1::FLOAT32);
  const v1::Target up = Sample(samples, "upsample_nearest2d").target;
  EXPECT_EQ(FamilyRegistry::Default().FamilyFor(up), "layout");
  auto generator = Bind(up);
  ASSERT_NE(generator, nullptr);
  EXPECT_DOUBLE_EQ(generator->MinBytes(), (2.0 * 64 * 32 * 32 + 2.0 * 64 * 64 * 64) * 4);
  auto spread = generator->Generate(*generator->Space().Parse("threads=256;vec=4;ilp=2;grid=stride"));
  ASSERT_TRUE(spread.ok()) << spread.status();
  EXPECT_THAT(spread->source, HasSubstr("#define KF_REPEAT 1, 1, 2, 2\n#define KF_SPREAD 2\n"));
  // Two floats per vector are one input element repeated: no spread to compile.
  auto repeat = generator->Generate(*generator->Space().Parse("threads=256;vec=2;ilp=2;grid=stride"));
  ASSERT_TRUE(repeat.ok()) << repeat.status();
  EXPECT_THAT(repeat->source, HasSubstr("#define KF_REPEAT 1, 1, 2, 2\n#define KF_SPREAD 0\n"));
  auto sizes = Bind(Sample(samples, "upsample_nearest2d_sizes").target);
  ASSERT_NE(sizes, nullptr);
  auto three = sizes->Generate(*sizes->Space().Parse("threads=128;vec=4;ilp=1;grid=oneshot"));
  ASSERT_TRUE(three.ok()) << three.status();
  EXPECT_THAT(three->source, HasSubstr("#define KF_REPEAT 1, 1, 3, 2\n#define KF_SPREAD 2\n"));

  v1::Target half = up;  // 32 -> 48 rows: a factor of 1.5
  half.mutable_outputs(0)->set_sizes(2, 48);
  half.mutable_outputs(0)->clear_strides();
  for (int64_t st : {64 * 48 * 64, 48 * 64, 64, 1}) half.mutable_outputs(0)->add_strides(st);
  for (auto& arg : *half.mutable_nodes(0)->mutable_args()) {
    if (arg.name() == "scale_factors") *arg.mutable_scalar() = scalar::Floats({1.5, 2.0});
  }
  EXPECT_THAT(Refusal(half), HasSubstr("spatial dim 0 goes from 32 to 48; the layout family "
                                       "covers upsampling by whole factors"));
  v1::Target channels_last = up;  // [2,64,32,32] -> [2,64,64,64], channels innermost
  channels_last.mutable_inputs(0)->clear_strides();
  for (int64_t st : {64 * 32 * 32, 1, 32 * 64, 64}) channels_last.mutable_inputs(0)->add_strides(st);
  channels_last.mutable_outputs(0)->clear_strides();
  for (int64_t st : {64 * 64 * 64, 1, 64 * 64, 64}) channels_last.mutable_outputs(0)->add_strides(st);
  auto cl = Bind(channels_last);
  ASSERT_NE(cl, nullptr);
  auto dense_vec = cl->Space().Parse("threads=256;vec=4;ilp=2;grid=stride");
  auto scalar = cl->Space().Parse("threads=256;vec=1;ilp=2;grid=stride");
  EXPECT_LT(cl->EstimateSeconds(*dense_vec), cl->EstimateSeconds(*scalar));
  v1::Target scattered = up;  // an output whose rows are twice as far apart as they are long
  scattered.mutable_outputs(0)->clear_strides();
  for (int64_t st : {64 * 64 * 128, 64 * 128, 128, 1}) scattered.mutable_outputs(0)->add_strides(st);
  EXPECT_THAT(Refusal(scattered), HasSubstr("is not dense in any order"));
}

// upsample_nearest1d and 3d, the default overload with its scale arguments: a 1d scale of 3
// and a 3d scale of 2 over depth and rows alone are whole factors; a 3d scale whose float
// reciprocal picks other source rows (a 5 -> 7 resize) is refused naming the dim.
TEST(SynthesizerTest, NearestUpsamplingIn1dAnd3dReadsItsScaleArguments) {
  auto nearest = [](const std::string& op, const std::vector<int64_t>& in,
                    const std::vector<int64_t>& out,
                    const std::vector<std::pair<std::string, double>>& scales) {
    v1::Target t;
    v1::SubgraphNode* node = t.add_nodes();
    node->set_op(op);
    v1::Argument* self = node->add_args();
    self->set_name("self");
    self->set_tensor("in0");
    v1::Argument* size = node->add_args();
    size->set_name("output_size");
    *size->mutable_scalar() = scalar::Ints(std::vector<int64_t>(out.begin() + 2, out.end()));
    for (const auto& [name, value] : scales) {
      v1::Argument* a = node->add_args();
      a->set_name(name);
      *a->mutable_scalar() = scalar::Float(value);
    }
    node->add_outputs("out0");
    t.add_input_names("in0");
    *t.add_inputs() = Dense(in, v1::FLOAT32);
    t.add_output_names("out0");
    *t.add_outputs() = Dense(out, v1::FLOAT32);
    return t;
  };
  auto one = Bind(nearest("aten::upsample_nearest1d", {2, 8, 40}, {2, 8, 120}, {{"scales", 3.0}}));
  ASSERT_NE(one, nullptr);
  auto k1 = one->Generate(*one->Space().Parse("threads=128;vec=4;ilp=1;grid=oneshot"));
  ASSERT_TRUE(k1.ok()) << k1.status();
  EXPECT_THAT(k1->source, HasSubstr("#define KF_REPEAT 1, 1, 3\n"));
  auto three = Bind(nearest("aten::upsample_nearest3d", {1, 4, 5, 6, 7}, {1, 4, 10, 12, 7},
                            {{"scales_d", 2.0}, {"scales_h", 2.0}, {"scales_w", 1.0}}));
  ASSERT_NE(three, nullptr);
  auto k3 = three->Generate(*three->Space().Parse("threads=128;vec=1;ilp=1;grid=oneshot"));
  ASSERT_TRUE(k3.ok()) << k3.status();
  EXPECT_THAT(k3->source, HasSubstr("#define KF_REPEAT 1, 1, 2, 2, 1\n"));
  EXPECT_THAT(Refusal(nearest("aten::upsample_nearest3d", {1, 4, 5, 6, 7}, {1, 4, 7, 6, 7},
                              {{"scales_d", 1.4}, {"scales_h", 1.0}, {"scales_w", 1.0}})),
              HasSubstr("spatial dim 0 goes from 5 to 7"));
}

// sub and div of two tensors: aten's order of operands and alpha; div with a rounding mode is
// another overload, refused.
TEST(SynthesizerTest, SubAndDivOfTensorsKeepTheOperandOrder) {
  const auto samples = SampleTargets(v1::FLOAT16);
  for (const auto& [name, body] : std::vector<std::pair<std::string, std::string>>{
           {"sub_alpha", "return a - ((float)2) * b;"}, {"div_broadcast", "return a / b;"}}) {
    SCOPED_TRACE(name);
    auto generator = Bind(Sample(samples, name).target);
    ASSERT_NE(generator, nullptr);
    // A broadcast operand adds the `keep` parameter.
    const std::string keep = generator->Space().Find("keep") ? ";keep=0" : "";
    auto kernel = generator->Generate(
        *generator->Space().Parse("threads=256;vec=1;ilp=1;grid=oneshot;occupancy=0" + keep));
    ASSERT_TRUE(kernel.ok()) << kernel.status();
    EXPECT_THAT(kernel->source, HasSubstr("#define KF_NIN 2"));
    EXPECT_THAT(kernel->source, HasSubstr(body));
  }
  v1::Target t = Sample(samples, "div_broadcast").target;
  t.mutable_nodes(0)->set_overload("Tensor_mode");
  EXPECT_THAT(Refusal(t), HasSubstr("aten::div.Tensor_mode: the elementwise family covers "
                                    "div.Tensor and div.Scalar only"));
  // rsub of two tensors: other - alpha * self.
  t = Sample(samples, "sub_alpha").target;
  t.mutable_nodes(0)->set_op("aten::rsub");
  auto rsub = Bind(t);
  ASSERT_NE(rsub, nullptr);
  auto kernel =
      rsub->Generate(*rsub->Space().Parse("threads=256;vec=1;ilp=1;grid=oneshot;occupancy=0"));
  ASSERT_TRUE(kernel.ok()) << kernel.status();
  EXPECT_THAT(kernel->source, HasSubstr("return b - ((float)2) * a;"));
}

TEST(SynthesizerTest, UnsupportedTargetIsARefusalNotAnError) {
  v1::Target t = Sample(SampleTargets(v1::FLOAT32), "relu").target;  // copied before the vector dies
  t.mutable_nodes(0)->set_op("aten::conv2d");
  Synthesizer synth;
  auto response = synth.Propose(Request(t, 4, 1));
  ASSERT_TRUE(response.ok()) << response.status();
  EXPECT_EQ(response->candidates_size(), 0);
  EXPECT_THAT(response->refusal(), HasSubstr("aten::conv2d"));
}

TEST(SynthesizerTest, SameSeedSameProposalsForEveryFamily) {
  Synthesizer synth;
  for (const auto& sample : SampleTargets(v1::BFLOAT16)) {
    auto a = synth.Propose(Request(sample.target, 6, 7));
    auto b = synth.Propose(Request(sample.target, 6, 7));
    ASSERT_TRUE(a.ok() && b.ok()) << sample.name;
    ASSERT_GE(a->candidates_size(), 4) << sample.name;
    ASSERT_EQ(a->candidates_size(), b->candidates_size());
    std::set<std::string> ids;
    for (int i = 0; i < a->candidates_size(); ++i) {
      const v1::Candidate& c = a->candidates(i);
      EXPECT_EQ(c.id(), b->candidates(i).id()) << sample.name;
      EXPECT_EQ(c.source(), b->candidates(i).source());
      EXPECT_EQ(c.proposer(), "synth:" + sample.family);
      EXPECT_TRUE(ids.insert(c.id()).second) << "duplicate proposal for " << sample.name;
    }
  }
}

TEST(SynthesizerTest, DifferentSeedsExploreDifferently) {
  Synthesizer synth;
  const auto samples = SampleTargets(v1::FLOAT16);
  int differing = 0;
  for (const char* name : {"softmax_last", "layer_norm_affine", "mean_middle", "group_norm_affine"}) {
    auto a = synth.Propose(Request(Sample(samples, name).target, 8, 1));
    auto b = synth.Propose(Request(Sample(samples, name).target, 8, 2));
    ASSERT_TRUE(a.ok() && b.ok());
    std::set<std::string> ids_a, ids_b;
    for (const auto& c : a->candidates()) ids_a.insert(c.id());
    for (const auto& c : b->candidates()) ids_b.insert(c.id());
    if (ids_a != ids_b) ++differing;
  }
  EXPECT_GE(differing, 1);
}

TEST(SynthesizerTest, RootExpansionsSpendAShareOnUniformExploration) {
  SynthesizerOptions prior_only;
  prior_only.root_explore_fraction = 0;
  Synthesizer by_prior(prior_only), hedged;
  const auto samples = SampleTargets(v1::FLOAT32);
  int explored = 0;
  for (const char* name : {"softmax_last", "layer_norm_affine", "group_norm_affine", "relu"}) {
    auto a = by_prior.Propose(Request(Sample(samples, name).target, 4, 9));
    auto b = hedged.Propose(Request(Sample(samples, name).target, 4, 9));
    ASSERT_TRUE(a.ok() && b.ok()) << name;
    ASSERT_EQ(a->candidates_size(), 4) << name;
    ASSERT_EQ(b->candidates_size(), 4) << name;
    // The prior's first three picks stand; the fourth is a uniform draw from the sample.
    for (int i = 0; i < 3; ++i) EXPECT_EQ(a->candidates(i).id(), b->candidates(i).id()) << name;
    if (a->candidates(3).id() != b->candidates(3).id()) ++explored;
  }
  EXPECT_GE(explored, 3);
}

TEST(SynthesizerTest, RootsAreDiverseAndValid) {
  Synthesizer synth;
  for (const auto& sample : SampleTargets(v1::FLOAT32)) {
    auto generator = Bind(sample.target);
    ASSERT_NE(generator, nullptr);
    auto response = synth.Propose(Request(sample.target, 5, 3));
    ASSERT_TRUE(response.ok());
    std::vector<Config> configs;
    for (const auto& c : response->candidates()) {
      auto config = generator->Space().FromMap(Params(c));
      ASSERT_TRUE(config.ok()) << config.status();
      EXPECT_EQ(generator->Check(*config), "") << sample.name << " " << config->ToString();
      EXPECT_TRUE(c.parent_id().empty());
      configs.push_back(*config);
    }
    // Roots differ in at least two parameters where the space allows it.
    if (generator->Space().Size() > 500) {
      for (size_t i = 0; i < configs.size(); ++i) {
        for (size_t j = i + 1; j < configs.size(); ++j) {
          int distance = 0;
          for (size_t k = 0; k < configs[i].values().size(); ++k) {
            distance += configs[i].values()[k] != configs[j].values()[k];
          }
          EXPECT_GE(distance, 2) << sample.name << ": " << configs[i].ToString() << " vs "
                                 << configs[j].ToString();
        }
      }
    }
  }
}

// Builds an evaluated parent from a proposal.
v1::EvaluatedCandidate Evaluated(const v1::Candidate& c, v1::Verdict verdict,
                                 const std::string& message) {
  v1::EvaluatedCandidate e;
  *e.mutable_candidate() = c;
  e.mutable_evaluation()->set_verdict(verdict);
  e.mutable_evaluation()->mutable_diagnostics()->set_message(message);
  return e;
}

TEST(SynthesizerTest, ChildrenAreNeighboursOfTheParentAndSkipSiblings) {
  Synthesizer synth;
  for (const auto& sample : SampleTargets(v1::FLOAT16)) {
    auto generator = Bind(sample.target);
    ASSERT_NE(generator, nullptr);
    auto roots = synth.Propose(Request(sample.target, 2, 11));
    ASSERT_TRUE(roots.ok() && roots->candidates_size() == 2) << sample.name;
    v1::ProposeRequest request = Request(sample.target, 4, 11);
    *request.mutable_parent() = Evaluated(roots->candidates(0), v1::PASS, "");
    *request.add_siblings() = Evaluated(roots->candidates(1), v1::PASS, "");
    auto first = synth.Propose(request);
    ASSERT_TRUE(first.ok());
    ASSERT_GE(first->candidates_size(), 1) << sample.name;
    // The first batch of children becomes siblings of the next.
    for (const auto& c : first->candidates()) *request.add_siblings() = Evaluated(c, v1::PASS, "");
    auto second = synth.Propose(request);
    ASSERT_TRUE(second.ok());

    const Config parent = *generator->Space().FromMap(Params(roots->candidates(0)));
    std::set<std::string> tried = {parent.ToString(),
                                   generator->Space().FromMap(Params(roots->candidates(1)))->ToString()};
    for (const auto* batch : {&*first, &*second}) {
      for (const auto& c : batch->candidates()) {
        auto config = generator->Space().FromMap(Params(c));
        ASSERT_TRUE(config.ok()) << config.status();
        EXPECT_TRUE(generator->Space().Contains(*config));
        EXPECT_EQ(generator->Check(*config), "");
        EXPECT_EQ(c.parent_id(), roots->candidates(0).id());
        EXPECT_TRUE(tried.insert(config->ToString()).second)
            << sample.name << ": proposed twice " << config->ToString();
        int distance = 0;
        for (size_t k = 0; k < parent.values().size(); ++k) {
          distance += parent.values()[k] != config->values()[k];
        }
        // Canonicalization may reset parameters that stop mattering; a move changes at
        // most one parameter the kernel depends on plus those.
        EXPECT_GE(distance, 1);
        EXPECT_LE(distance, 4) << sample.name << ": " << parent.ToString() << " -> "
                               << config->ToString();
      }
    }
  }
}

TEST(PriorCalibrationTest, LearnsPerValueErrorsAndLeavesUntouchedValuesAlone) {
  ParamSpace space({{"mode", {"a", "b", "c"}, ""}, {"width", {"1", "2", "4"}, ""}});
  PriorCalibration calibration;
  EXPECT_DOUBLE_EQ(calibration.Correction(*space.FromMap({{"mode", "a"}, {"width", "1"}})), 0);
  // Measured: mode=b runs 3x its prior, everything else as the prior says. Mode c is never
  // measured.
  for (const char* mode : {"a", "b"}) {
    for (const char* width : {"1", "2", "4"}) {
      const Config c = *space.FromMap({{"mode", mode}, {"width", width}});
      calibration.Add(c, 1e-5, std::string(mode) == "b" ? 3e-5 : 1e-5);
    }
  }
  calibration.Fit(/*ridge=*/1.0, /*min_points=*/4);
  auto correction = [&](const char* mode, const char* width) {
    return calibration.Correction(*space.FromMap({{"mode", mode}, {"width", width}}));
  };
  // b pays most of log 3 (~1.1) more than a; the ridge keeps it a little short.
  EXPECT_GT(correction("b", "2") - correction("a", "2"), 0.7);
  EXPECT_LT(correction("b", "2") - correction("a", "2"), std::log(3.0) + 1e-9);
  // The widths were measured alike: no width is preferred.
  EXPECT_NEAR(correction("a", "1"), correction("a", "4"), 1e-9);
  // c was never measured: only its width's (equal) effect applies, between a and b.
  EXPECT_LT(correction("c", "2"), correction("b", "2"));
  EXPECT_GT(correction("c", "2"), correction("a", "2"));
  // Too few points: no correction at all.
  PriorCalibration few;
  few.Add(*space.FromMap({{"mode", "b"}, {"width", "1"}}), 1e-5, 9e-5);
  few.Fit(1.0, 4);
  EXPECT_DOUBLE_EQ(few.Correction(*space.FromMap({{"mode", "b"}, {"width", "1"}})), 0);
  // Garbage times are not points.
  few.Add(*space.FromMap({{"mode", "a"}, {"width", "1"}}), 1e-5, 0);
  EXPECT_EQ(few.points(), 1);
}

TEST(SynthesizerTest, HistoryThatMeasuresAMoveSlowPushesItDownTheChildren) {
  const auto samples = SampleTargets(v1::FLOAT32);
  const auto& sample = Sample(samples, "softmax_last");
  auto generator = Bind(sample.target);
  ASSERT_NE(generator, nullptr);
  Synthesizer synth;
  auto roots = synth.Propose(Request(sample.target, 1, 5));
  ASSERT_TRUE(roots.ok() && roots->candidates_size() == 1);
  v1::ProposeRequest request = Request(sample.target, 1, 5);
  *request.mutable_parent() = Evaluated(roots->candidates(0), v1::PASS, "");
  auto first = synth.Propose(request);
  ASSERT_TRUE(first.ok() && first->candidates_size() == 1);
  const Config parent = *generator->Space().FromMap(Params(roots->candidates(0)));
  const Config child = *generator->Space().FromMap(Params(first->candidates(0)));
  std::string name, value;  // the move the prior likes best
  for (size_t k = 0; k < parent.values().size(); ++k) {
    if (parent.values()[k] != child.values()[k]) std::tie(name, value) = child.values()[k];
  }
  ASSERT_FALSE(name.empty());
  // History: configs with that value ran 5x their prior, the others as estimated.
  SeededRng rng(3);
  int with = 0, without = 0;
  for (int i = 0; i < 400 && (with < 4 || without < 4); ++i) {
    const Config c = generator->Canonicalize(generator->Space().Sample(rng));
    if (!generator->Check(c).empty()) continue;
    const bool slow = c.Get(name) == value;
    if ((slow ? with : without) >= 4) continue;
    ++(slow ? with : without);
    v1::Candidate candidate = first->candidates(0);
    candidate.clear_params();
    for (const auto& [n, v] : c.values()) (*candidate.mutable_params())[n] = v;
    v1::EvaluatedCandidate* h = request.add_history();
    *h = Evaluated(candidate, v1::PASS, "");
    h->mutable_evaluation()->mutable_candidate()->set_median_s(
        generator->EstimateSeconds(c) * (slow ? 5 : 1));
  }
  ASSERT_EQ(with, 4);
  ASSERT_EQ(without, 4);
  auto informed = synth.Propose(request);
  ASSERT_TRUE(informed.ok() && informed->candidates_size() == 1);
  EXPECT_NE(Params(informed->candidates(0)).at(name), value)
      << "the first child still makes the move the history measured 5x slow: " << name << "="
      << value;
  // The same history without calibration: the prior's choice again.
  Synthesizer uncalibrated(SynthesizerOptions{.calibrate_prior = false});
  auto plain = uncalibrated.Propose(request);
  ASSERT_TRUE(plain.ok() && plain->candidates_size() == 1);
  EXPECT_EQ(plain->candidates(0).id(), first->candidates(0).id());
}

TEST(SynthesizerTest, MismatchWithFastMathTurnsItOff) {
  Synthesizer synth;
  const auto samples = SampleTargets(v1::FLOAT32);
  const auto& sample = Sample(samples, "softmax_last");
  auto generator = Bind(sample.target);
  // A fast-math root: take any proposal and flip fast_math on.
  auto roots = synth.Propose(Request(sample.target, 1, 5));
  ASSERT_TRUE(roots.ok() && roots->candidates_size() == 1);
  Config config = *generator->Space().FromMap(Params(roots->candidates(0)));
  config.Set("fast_math", "1");
  auto kernel = generator->Generate(config);
  ASSERT_TRUE(kernel.ok()) << kernel.status();
  v1::Candidate parent = roots->candidates(0);
  parent.clear_params();
  for (const auto& [k, v] : config.values()) (*parent.mutable_params())[k] = v;
  parent.set_source(kernel->source);
  parent.set_launch_plan_json(kernel->launch_plan_json);

  v1::ProposeRequest request = Request(sample.target, 6, 5);
  *request.mutable_parent() = Evaluated(parent, v1::MISMATCH, "max rel error 3e-5 > 1e-5");
  auto children = synth.Propose(request);
  ASSERT_TRUE(children.ok());
  ASSERT_GE(children->candidates_size(), 1);
  Config fixed = config;
  fixed.Set("fast_math", "0");
  EXPECT_EQ(generator->Space().FromMap(Params(children->candidates(0)))->ToString(),
            generator->Canonicalize(fixed).ToString());
  for (const auto& c : children->candidates()) EXPECT_EQ(c.params().at("fast_math"), "0");
}

// The children the synthesizer proposes after `config` (valid for the fp32 sample `name`)
// failed with `verdict` (a launch error unless given) and `message`, beside the generator and
// the parent config.
struct FailedParentChildren {
  std::unique_ptr<KernelGenerator> generator;
  Config parent;
  std::vector<Config> children;
};
FailedParentChildren ChildrenAfterFailure(const std::string& name, const std::string& config,
                                             const std::string& message,
                                             v1::Verdict verdict = v1::LAUNCH_ERROR) {
  const auto samples = SampleTargets(v1::FLOAT32);
  const auto& sample = Sample(samples, name);
  FailedParentChildren out;
  out.generator = Bind(sample.target);
  out.parent = *out.generator->Space().Parse(config);
  EXPECT_EQ(out.generator->Check(out.parent), "");
  v1::Candidate parent;
  parent.set_id("parent");
  parent.set_proposer("synth:" + sample.family);
  for (const auto& [k, v] : out.parent.values()) (*parent.mutable_params())[k] = v;
  v1::ProposeRequest request = Request(sample.target, 8, 9);
  *request.mutable_parent() = Evaluated(parent, verdict, message);
  Synthesizer synth;
  auto proposed = synth.Propose(request);
  EXPECT_TRUE(proposed.ok());
  if (!proposed.ok()) return out;
  for (const auto& c : proposed->candidates()) {
    out.children.push_back(*out.generator->Space().FromMap(Params(c)));
  }
  return out;
}

TEST(SynthesizerTest, SharedMemoryLaunchErrorAvoidsBiggerSharedMemory) {
  const FailedParentChildren r = ChildrenAfterFailure(
      "layer_norm_affine",
      "row_threads=256;rows_per_block=4;vec=4;algo=welford;cache=smem;reg_cache=8;split=1;"
      "split_mode=scratch;lag_scale=1;unroll=1;grid=oneshot",
      "cuLaunchKernelEx: too much shared memory requested (12288 bytes)");
  ASSERT_GE(r.children.size(), 1u);
  for (const Config& child : r.children) {
    EXPECT_LT(r.generator->SharedBytes(child), r.generator->SharedBytes(r.parent))
        << child.ToString();
  }
}

TEST(SynthesizerTest, RefusedCooperativeLaunchTurnsSyncSplitsIntoScratch) {
  const FailedParentChildren r = ChildrenAfterFailure(
      "log_softmax_long_rows",
      "row_threads=256;rows_per_block=1;vec=1;algo=online;cache=none;reg_cache=8;split=8;"
      "split_mode=sync;lag_scale=1;unroll=2;fast_math=0;grid=oneshot",
      "launch 1 (kf_rows_sync, grid 264x1x1) was refused: too many blocks in cooperative "
      "launch (a cooperative launch's blocks must all fit on the GPU at once)");
  ASSERT_GE(r.children.size(), 1u);
  for (const Config& child : r.children) {
    EXPECT_NE(child.Get("split_mode"), "sync");
    EXPECT_NE(child.Get("split_mode"), "sync_keep");
  }
}

// A split whose blocks wait on each other's partials that timed out: no child waits so.
// A waiting split that hung (TIMEOUT) or whose bounded wait trapped (CRASH): no child waits.
TEST(SynthesizerTest, TimedOutWaitingSplitTurnsWaitingSplitsIntoScratch) {
  const std::pair<v1::Verdict, const char*> failures[] = {
      {v1::TIMEOUT, "the kernel ran past its 10 s limit and was killed"},
      {v1::CRASH, "the kernel faulted (unspecified launch failure)"}};
  for (const auto& [verdict, text] : failures) {
    const FailedParentChildren r = ChildrenAfterFailure(
        "group_norm_affine",
        "row_threads=512;rows_per_block=1;vec=4;algo=welford;cache=none;reg_cache=8;split=4;"
        "split_mode=ordered;lag_scale=1;unroll=1;grid=oneshot",
        text, verdict);
    ASSERT_GE(r.children.size(), 1u);
    for (const Config& child : r.children) {
      for (const char* mode : {"sync", "sync_keep", "ordered"}) {
        EXPECT_NE(child.Get("split_mode"), mode) << child.ToString();
      }
    }
  }
}

TEST(SynthesizerTest, NeighbourMovesStayInTheSpaceForEverySampledConfig) {
  for (const auto& sample : SampleTargets(v1::FLOAT16)) {
    auto generator = Bind(sample.target);
    ASSERT_NE(generator, nullptr);
    SeededRng rng(17);
    for (int i = 0; i < 50; ++i) {
      const Config c = generator->Canonicalize(generator->Space().Sample(rng));
      ASSERT_TRUE(generator->Space().Contains(c)) << c.ToString();
      for (const Config& m : generator->Space().Neighbours(c)) {
        EXPECT_TRUE(generator->Space().Contains(m)) << m.ToString();
        EXPECT_TRUE(generator->Space().Contains(generator->Canonicalize(m))) << m.ToString();
      }
    }
  }
}

using testing::ValidSample;

std::string WithoutCapturedShape(std::string source) {
  const size_t begin = source.find(kCapturedShapeBegin);
  const size_t end = source.find(kCapturedShapeEnd);
  if (begin != std::string::npos && end != std::string::npos) source.erase(begin, end - begin);
  return source;
}

// A plan without its captured call, whose shape key differs from shape to shape.
std::string WithoutCapturedCall(const std::string& plan_json) {
  nlohmann::json plan = nlohmann::json::parse(plan_json);
  plan.erase("captured");
  return plan.dump();
}

TEST(SynthesizerTest, SourceIsShapeGenericAndPlansResolveForTwoShapes) {
  for (v1::DType dtype : FloatDTypes()) {
    const auto samples = SampleTargets(dtype, 0);
    const auto held_out = SampleTargets(dtype, 1);
    ASSERT_EQ(samples.size(), held_out.size());
    for (size_t s = 0; s < samples.size(); ++s) {
      const v1::Target& target = samples[s].target;
      auto generator = Bind(target);
      auto other = Bind(held_out[s].target);
      ASSERT_NE(generator, nullptr);
      ASSERT_NE(other, nullptr);
      const std::vector<Config> configs = ValidSample(*generator, 20, 100 + s);
      EXPECT_GE(configs.size(), 20u) << samples[s].name << ": space too small";
      for (const Config& config : configs) {
        SCOPED_TRACE(absl::StrCat(samples[s].name, " ", v1::DType_Name(dtype), " ", config.ToString()));
        auto kernel = generator->Generate(config);
        ASSERT_TRUE(kernel.ok()) << kernel.status();
        // Sizes come from the ABI at run time: the held-out shape gets the same source, but
        // for the span where a kernel bakes its captured shape for a fast path.
        auto other_kernel = other->Generate(config);
        if (other_kernel.ok()) {
          EXPECT_EQ(WithoutCapturedShape(kernel->source),
                    WithoutCapturedShape(other_kernel->source));
          EXPECT_EQ(WithoutCapturedCall(kernel->launch_plan_json),
                    WithoutCapturedCall(other_kernel->launch_plan_json));
        }
        auto plan = LaunchPlan::Parse(kernel->launch_plan_json);
        ASSERT_TRUE(plan.ok()) << plan.status() << "\n" << kernel->launch_plan_json;
        EXPECT_THAT(kernel->source, HasSubstr("extern \"C\" __global__ void __launch_bounds__"));
        for (const LaunchPlan::Launch& launch : plan->launches()) {
          EXPECT_THAT(kernel->source, HasSubstr(absl::StrCat(" ", launch.entry, "(KfArgs args)")));
          // A captured entry is compiled where the captured span defines KF_CAPTURED_SETUP.
          if (!launch.captured_entry.empty()) {
            EXPECT_THAT(kernel->source,
                        HasSubstr(absl::StrCat(" ", launch.captured_entry, "(KfCapturedArgs args)")));
          }
        }
        // Layout copies read any strides, elementwise kernels their inputs' (views in, a
        // dense output), the row engine views whose rows are dense (a transpose of the heads
        // before a norm); every other family assumes contiguous tensors.
        bool views = false;
        for (const v1::TensorSignature& in : target.inputs()) views = views || !IsContiguous(in);
        const std::string& family = samples[s].family;
        const bool reads_views =
            family == "elementwise" || family == "reduction" || family == "rowwise";
        EXPECT_EQ(plan->requirements().contiguous, family != "layout" && !(reads_views && views));
        for (const auto* t : {&target, &held_out[s].target}) {
          std::vector<v1::TensorSignature> ins(t->inputs().begin(), t->inputs().end());
          std::vector<v1::TensorSignature> outs(t->outputs().begin(), t->outputs().end());
          auto resolved = plan->Resolve(BindSymbols(ins, outs, testing::IntArgs(*t), 132));
          // A vector kernel is for shapes its vectors tile: its plan refuses the others, as
          // the generator bound to them refuses the config.
          if (t != &target && absl::StrContains(other->Check(config), kNoPerElementPath)) {
            EXPECT_THAT(resolved.status().message(), HasSubstr("requires.multiple_of"));
            continue;
          }
          ASSERT_TRUE(resolved.ok()) << resolved.status() << "\n" << kernel->launch_plan_json;
          for (const ResolvedLaunch& launch : resolved->launches) {
            EXPECT_LE(launch.shared_bytes, GpuModel{}.shared_bytes_per_block_optin);
          }
        }
      }
    }
  }
}

// Batch norm's flat mode recognizes the captured call by its shape key (one 64-bit compare),
// and on a one-shot grid that tiles it exactly takes straight-line code with a constant
// element count; a stride grid keeps its loop, and plane mode has no captured path.
TEST(SynthesizerTest, BatchNormRecognizesTheCapturedCallByItsShapeKey) {
  const v1::Target target = Sample(SampleTargets(v1::FLOAT32), "batch_norm").target;
  auto generator = Bind(target);
  ASSERT_NE(generator, nullptr);
  int64_t numel = 1;
  for (int64_t size : target.inputs(0).sizes()) numel *= size;
  ASSERT_EQ(numel % (256 * 4 * 2), 0);
  auto kernel = generator->Generate(
      *generator->Space().Parse("mode=flat;threads=256;vec=4;ilp=2;grid=oneshot;occupancy=0"));
  ASSERT_TRUE(kernel.ok()) << kernel.status();
  EXPECT_THAT(kernel->source, HasSubstr(absl::StrFormat("#define KF_SHAPE_KEY 0x%016xull",
                                                        CapturedShapeKey(target))));
  EXPECT_THAT(kernel->source, HasSubstr("args.shape_key == KF_SHAPE_KEY"));
  EXPECT_THAT(kernel->source, HasSubstr("#define KF_CAPTURED_EXACT true"));
  EXPECT_THAT(kernel->source, HasSubstr(absl::StrCat("#define KF_CAPTURED_NUMEL ", numel)));
  auto strided = generator->Generate(
      *generator->Space().Parse("mode=flat;threads=256;vec=4;ilp=2;grid=stride;occupancy=0"));
  ASSERT_TRUE(strided.ok()) << strided.status();
  EXPECT_THAT(strided->source, HasSubstr("#define KF_CAPTURED_EXACT false"));
  auto plane = generator->Generate(
      *generator->Space().Parse("mode=plane;threads=256;vec=4;ilp=2;grid=oneshot;occupancy=0"));
  ASSERT_TRUE(plane.ok()) << plane.status();
  EXPECT_THAT(plane->source, ::testing::Not(HasSubstr("#define KF_SHAPE_KEY")));
}

TEST(SynthesizerTest, VectorsMustTileTheirRun) {
  // Vector kernels have no per-element path: a vec that does not divide a row (or a group
  // norm channel's H*W) is refused with the reason, and vec 1 covers such shapes.
  const auto samples = SampleTargets(v1::FLOAT16, 1);
  auto odd_rows = Bind(Sample(samples, "log_softmax_long_rows").target);  // 1001 columns
  Config c = *odd_rows->Space().Parse(
      "row_threads=128;rows_per_block=1;vec=8;algo=online;cache=none;reg_cache=8;split=1;"
      "split_mode=scratch;lag_scale=1;unroll=2;fast_math=0;grid=oneshot");
  EXPECT_EQ(odd_rows->Check(c), "vec 8 does not divide the 1001 columns of a row (a vector "
                                "kernel has no per-element path)");
  c.Set("vec", "1");
  EXPECT_EQ(odd_rows->Check(c), "");
  auto odd_channels = Bind(Sample(samples, "group_norm_affine").target);  // H*W = 17*9
  Config g = *odd_channels->Space().Parse(
      "row_threads=256;rows_per_block=1;vec=2;algo=welford;cache=none;reg_cache=8;split=1;"
      "split_mode=scratch;lag_scale=1;unroll=1;grid=oneshot");
  EXPECT_EQ(odd_channels->Check(g), "vec 2 does not divide the 153 elements of a channel (a "
                                    "vector kernel has no per-element path)");
  // The same for batch norm's planes and a column reduction's kept inner run.
  auto odd_planes = Bind(Sample(samples, "batch_norm").target);  // H*W = 7*9
  Config b =
      *odd_planes->Space().Parse("mode=plane;threads=256;vec=2;ilp=1;grid=oneshot;occupancy=0");
  EXPECT_EQ(odd_planes->Check(b), "planes of 63 elements do not split into vectors of 2 (a vector "
                                  "kernel has no per-element path)");
  // Flat mode finds each element's channel: its vectors may straddle planes.
  b.Set("mode", "flat");
  EXPECT_EQ(odd_planes->Check(b), "");
  auto odd_inner = Bind(Sample(samples, "amin_first").target);  // inner 3*5
  Config r = *odd_inner->Space().Parse(
      "tile_threads=32;reduce_threads=4;vec=2;split=1;unroll=1;grid=oneshot");
  EXPECT_EQ(odd_inner->Check(r), "vec 2 does not divide the 15 kept inner elements (a vector "
                                 "kernel has no per-element path)");
}

TEST(SynthesizerTest, PriorPrefersSensibleShapes) {
  // Long rows of a few rows want a split; short rows want many rows per block.
  const auto samples = SampleTargets(v1::FLOAT16);
  auto long_rows = Bind(Sample(samples, "log_softmax_long_rows").target);
  Config one_block = *long_rows->Space().Parse(
      "row_threads=512;rows_per_block=1;vec=1;algo=online;cache=none;reg_cache=8;split=1;"
      "split_mode=scratch;lag_scale=1;unroll=2;fast_math=0;grid=oneshot");
  Config cluster = one_block;
  cluster.Set("split", "8");
  cluster.Set("split_mode", "cluster");
  ASSERT_EQ(long_rows->Check(cluster), "");
  EXPECT_LT(long_rows->EstimateSeconds(cluster), long_rows->EstimateSeconds(one_block));

  auto short_rows = Bind(Sample(samples, "rms_norm_plain").target);
  Config warp_rows = *short_rows->Space().Parse(
      "row_threads=16;rows_per_block=16;vec=8;cache=regs;reg_cache=8;split=1;"
      "split_mode=scratch;lag_scale=1;unroll=1;grid=oneshot");
  Config block_rows = warp_rows;
  block_rows.Set("row_threads", "1024");
  block_rows.Set("rows_per_block", "1");
  ASSERT_EQ(short_rows->Check(warp_rows), "");
  EXPECT_LT(short_rows->EstimateSeconds(warp_rows), short_rows->EstimateSeconds(block_rows));
}

// A captured entry is compiled for the captured row, so its register cache keeps live only
// the elements a thread reads there (4 of 1024 columns over 256 threads): a larger cache
// costs it nothing, and the prior says so (the generic entry's registers grow with the cache).
TEST(SynthesizerTest, ThePriorCountsOnlyTheCacheEntriesACapturedEntryFills) {
  auto rms = Bind(Sample(SampleTargets(v1::BFLOAT16), "mean_broadcast_rms_norm").target);
  ASSERT_NE(rms, nullptr);
  Config eight = *rms->Space().Parse(
      "row_threads=256;rows_per_block=1;vec=4;cache=regs;reg_cache=8;split=1;"
      "split_mode=scratch;lag_scale=1;unroll=1;grid=oneshot");
  Config thirty_two = eight;
  thirty_two.Set("reg_cache", "32");
  ASSERT_EQ(rms->Check(eight), "");
  ASSERT_EQ(rms->Check(thirty_two), "");
  EXPECT_EQ(rms->EstimateSeconds(eight), rms->EstimateSeconds(thirty_two));
}

TEST(SynthesizerTest, WideningOutputKeepsSixteenByteLoads) {
  // bf16 scores into float32 probabilities: 8 elements per vector (16-byte loads, two 16-byte
  // stores); a float32 row stays at 4, and the plan asks for the wider store's alignment.
  const std::string config =
      "row_threads=128;rows_per_block=1;vec=8;algo=online;cache=regs;reg_cache=16;split=1;"
      "split_mode=scratch;lag_scale=1;unroll=1;fast_math=0;grid=oneshot";
  auto widening = Bind(Sample(SampleTargets(v1::BFLOAT16), "softmax_into_float32").target);
  Config c = *widening->Space().Parse(config);
  ASSERT_EQ(widening->Check(c), "");
  auto kernel = widening->Generate(c);
  ASSERT_TRUE(kernel.ok()) << kernel.status();
  EXPECT_THAT(kernel->launch_plan_json, HasSubstr("\"alignment_bytes\": 32"));
  auto same_type = Bind(Sample(SampleTargets(v1::FLOAT32), "softmax_into_float32").target);
  EXPECT_THAT(same_type->Check(*same_type->Space().Parse(config)), HasSubstr("vec 8"));
}

// A broadcast kernel carries the captured shapes: the mask of [2,8,256,256] + [2,1,256,256]
// reads as groups (65536, stride 1), (8, broadcast), (2, stride 65536), divided by constants
// on the path a call of exactly those shapes and strides takes.
TEST(SynthesizerTest, BroadcastKernelBakesTheCapturedShapesGroups) {
  auto generator = Bind(Sample(SampleTargets(v1::FLOAT32), "add_attention_mask").target);
  auto config = generator->Space().Parse("threads=256;vec=4;ilp=2;grid=oneshot;keep=0;occupancy=0");
  ASSERT_TRUE(config.ok()) << config.status();
  auto kernel = generator->Generate(*config);
  ASSERT_TRUE(kernel.ok()) << kernel.status();
  EXPECT_THAT(kernel->source, ::testing::Not(HasSubstr("#define KF_KEEP")));
  // keep=1 reads the mask under an L2 evict_last policy; the source is otherwise the same.
  auto kept = generator->Generate(
      *generator->Space().Parse("threads=256;vec=4;ilp=2;grid=oneshot;keep=1;occupancy=0"));
  ASSERT_TRUE(kept.ok()) << kept.status();
  EXPECT_THAT(kept->source, HasSubstr("createpolicy.fractional.L2::evict_last.b64"));
  EXPECT_THAT(kept->source, HasSubstr("ld.global.L2::cache_hint.v4.u32"));
  // The captured call, which the launcher recognizes by the plan's shape key (as it computes
  // it from the call's tensors) and aligned pointers, takes the path kf_decide gave it when the
  // kernel was generated: vectors, the output-shaped input flat (0), the mask by runs of the last dim
  // (1).
  const v1::Target target = Sample(SampleTargets(v1::FLOAT32), "add_attention_mask").target;
  KfArgs call{};
  call.num_inputs = target.inputs_size();
  call.num_outputs = target.outputs_size();
  auto launched = [](const v1::TensorSignature& sig, int tag) {
    KfTensor t{};
    t.data = reinterpret_cast<void*>(uintptr_t{4096} * tag);
    t.ndim = sig.sizes_size();
    for (int d = 0; d < KF_MAX_DIMS; ++d) {
      t.sizes[d] = d < t.ndim ? sig.sizes(d) : 1;
      t.strides[d] = d < t.ndim ? sig.strides(d) : 0;
    }
    return t;
  };
  for (int i = 0; i < call.num_inputs; ++i) call.inputs[i] = launched(target.inputs(i), i + 1);
  call.outputs[0] = launched(target.outputs(0), 9);
  auto plan = LaunchPlan::Parse(kernel->launch_plan_json);
  ASSERT_TRUE(plan.ok()) << plan.status();
  ASSERT_TRUE(plan->captured().has_value());
  EXPECT_EQ(plan->captured()->shape_key, KfShapeKey(call));
  EXPECT_EQ(plan->captured()->alignment_bytes, 4 * 4);  // vec=4 floats
  EXPECT_EQ(plan->launches()[0].captured_entry, "kf_elementwise_captured");
  // The mask's size-1 head dim is read at index 0 whatever its stride: not in the key. Its
  // sizes are.
  KfArgs other_stride = call;
  other_stride.inputs[1].strides[1] = 12345;
  EXPECT_EQ(KfShapeKey(other_stride), KfShapeKey(call));
  KfArgs other_size = call;
  other_size.inputs[1].sizes[0] = 1;
  EXPECT_NE(KfShapeKey(other_size), KfShapeKey(call));
  EXPECT_THAT(kernel->source, HasSubstr("#define KF_CAPTURED_SETUP {1, 1, 0, 1, 0, 0}"));
  EXPECT_THAT(kernel->source,
              HasSubstr("kf_const_div<I, 65536ull>(e); offset += (e - q * (I)65536) * (I)1;"));
  EXPECT_THAT(kernel->source,
              HasSubstr("kf_const_div<I, 2ull>(e); offset += (e - q * (I)2) * (I)65536;"));
  EXPECT_NE(WithoutCapturedShape(kernel->source), kernel->source);
  // Same-shape operands: both flat, nothing to divide.
  const v1::Target flat_target = Sample(SampleTargets(v1::FLOAT32), "add_alpha").target;
  auto flat = Bind(flat_target);
  auto flat_kernel =
      flat->Generate(*flat->Space().Parse("threads=256;vec=4;ilp=2;grid=oneshot;occupancy=0"));
  ASSERT_TRUE(flat_kernel.ok()) << flat_kernel.status();
  EXPECT_THAT(flat_kernel->source, HasSubstr("#define KF_CAPTURED_SETUP {1, 1, 0, 0, 0, 0}"));
  // Its one-shot grid tiles the captured call (256 threads x 4 x 2 divide it): the captured
  // path has no loop, bounds test or tail, and a constant element count. A stride grid keeps
  // its loop.
  int64_t numel = 1;
  for (int64_t size : flat_target.outputs(0).sizes()) numel *= size;
  ASSERT_EQ(numel % (256 * 4 * 2), 0);
  EXPECT_THAT(flat_kernel->source, HasSubstr("#define KF_CAPTURED_EXACT 1"));
  EXPECT_THAT(flat_kernel->source, HasSubstr(absl::StrCat("#define KF_CAPTURED_NUMEL ", numel)));
  auto strided =
      flat->Generate(*flat->Space().Parse("threads=256;vec=4;ilp=2;grid=stride;occupancy=0"));
  ASSERT_TRUE(strided.ok()) << strided.status();
  EXPECT_THAT(strided->source, HasSubstr("#define KF_CAPTURED_EXACT 0"));
}

TEST(SynthesizerTest, ExplainReportsThePriorOfAConfig) {
  Synthesizer synth;
  const auto samples = SampleTargets(v1::FLOAT32);
  const auto& sample = Sample(samples, "relu");
  auto response = synth.Propose(Request(sample.target, 1, 1));
  ASSERT_TRUE(response.ok() && response->candidates_size() == 1);
  auto report = synth.Explain(sample.target, v1::GpuInfo(), Params(response->candidates(0)));
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_EQ(report->family, "elementwise");
  EXPECT_GT(report->estimated_s, report->floor_s);
  EXPECT_GT(report->floor_s, 0);
  // 32*64*56*56 floats in and out at 4.24 TB/s.
  EXPECT_NEAR(report->floor_s, 32.0 * 64 * 56 * 56 * 8 / 4.24e12, 1e-9);
}

// The sample target `name` in `dtype`, resized: input and output to `x`, affine inputs to
// x[1] (group norm) or the trailing size (layer / rms norm).
v1::Target Resized(const std::string& name, v1::DType dtype, std::vector<int64_t> x) {
  v1::Target t = Sample(SampleTargets(dtype), name).target;
  const bool group = absl::StartsWith(name, "group_norm");
  *t.mutable_inputs(0) = Dense(x, dtype);
  *t.mutable_outputs(0) = Dense(x, dtype);
  for (int i = 1; i < t.inputs_size(); ++i) {
    *t.mutable_inputs(i) = Dense({group ? x[1] : x.back()}, dtype);
  }
  v1::SubgraphNode* node = t.mutable_nodes(0);
  for (v1::Argument& arg : *node->mutable_args()) {
    if (arg.name() == "normalized_shape") {
      arg.mutable_scalar()->mutable_int_list()->clear_values();
      arg.mutable_scalar()->mutable_int_list()->add_values(x.back());
    }
    if (arg.name() == "num_groups") arg.mutable_scalar()->set_int_value(32);
  }
  return t;
}

// Every valid canonical config of a generator, best prior first.
std::vector<std::pair<double, Config>> RankedSpace(const KernelGenerator& g) {
  const auto& params = g.Space().params();
  std::vector<size_t> digit(params.size(), 0);
  std::set<std::string> seen;
  std::vector<std::pair<double, Config>> out;
  while (true) {
    std::vector<std::pair<std::string, std::string>> values;
    for (size_t i = 0; i < params.size(); ++i) values.emplace_back(params[i].name, params[i].values[digit[i]]);
    Config c = g.Canonicalize(Config(std::move(values)));
    if (seen.insert(c.ToString()).second && g.Check(c).empty()) {
      out.emplace_back(g.EstimateSeconds(c), c);
    }
    size_t i = 0;
    while (i < params.size() && ++digit[i] == params[i].values.size()) digit[i++] = 0;
    if (i == params.size()) break;
  }
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) {
    return a.first != b.first ? a.first < b.first : a.second.ToString() < b.second.ToString();
  });
  return out;
}

// The prior's best valid config on the norm anchor rows of the GPU round (H200 defaults):
// 16-byte accesses everywhere; x read once where the rows fit on chip (the group norm VAE row
// through a cluster or a sync split, layer / rms norm rows cached whole in one block); the two
// large group norm rows split into enough blocks to fill every SM twice.
TEST(NormPriorTest, BestPriorConfigsOnNormAnchorsReadOnceWithWideAccesses) {
  struct Row { const char* name; v1::DType dtype; std::vector<int64_t> x; int bytes; };
  for (const Row& row : std::vector<Row>{{"group_norm_affine", v1::FLOAT32, {1, 512, 128, 128}, 4},
                                         {"group_norm_affine", v1::BFLOAT16, {1, 256, 512, 512}, 2},
                                         {"group_norm_affine", v1::FLOAT16, {1, 128, 1024, 1024}, 2},
                                         {"rms_norm_weight", v1::BFLOAT16, {8192, 2048}, 2},
                                         {"layer_norm_affine", v1::FLOAT16, {8192, 4096}, 2}}) {
    SCOPED_TRACE(absl::StrCat(row.name, " ", v1::DType_Name(row.dtype), " ", row.x[1]));
    auto g = Bind(Resized(row.name, row.dtype, row.x));
    ASSERT_NE(g, nullptr);
    auto ranked = RankedSpace(*g);
    ASSERT_FALSE(ranked.empty());
    const Config& best = ranked.front().second;
    SCOPED_TRACE(best.ToString());
    EXPECT_EQ(best.GetInt("vec") * row.bytes, 16);
    const bool group = absl::StartsWith(row.name, "group_norm");
    if (!group) {
      EXPECT_EQ(best.GetInt("split"), 1);
      EXPECT_NE(best.Get("cache"), "none");
    } else if (row.dtype == v1::FLOAT32) {
      // Split, in whatever mode: the H200's exhaustive sweep found its fastest in a scratch
      // split without a row cache (34.8 us), its fastest cluster with a cache 1.10x behind.
      EXPECT_GT(best.GetInt("split"), 1);
    } else {
      EXPECT_NE(best.Get("split_mode"), "cluster");
      EXPECT_GE(32 * best.GetInt("split") / best.GetInt("rows_per_block"), 132 * 2);
    }
    // Some hand-picked seed is valid and within 1.5x of the best prior (roots start there).
    double best_seed = 1e9;
    for (const Config& seed : g->Seeds()) {
      if (g->Check(seed).empty()) best_seed = std::min(best_seed, g->EstimateSeconds(seed));
    }
    EXPECT_LT(best_seed, 1.5 * ranked.front().first);
  }
}

// The prior of an ordered split against the H100's measured VAE group norm f32[1,128,512,512]
// (docs/benchmarks/2026-12-06-session41.md): blocks of 256 threads with 4 vectors a thread in
// flight ran 135 us; the same with 1 vector 151; blocks of 32 threads, whose tickets in flight
// outgrow L2, 253; blocks of 1024 threads, one an SM, whose items end at barriers over 32
// warps, 647. The prior had ranked the small blocks first; they are out of the space now.
TEST(NormPriorTest, OrderedSplitPriorRanksBlockShapesAsMeasured) {
  auto g = Bind(Resized("group_norm_affine", v1::FLOAT32, {1, 128, 512, 512}));
  ASSERT_NE(g, nullptr);
  auto prior = [&](const std::string& shape, int unroll) {
    Config c = *g->Space().Parse(absl::StrCat(shape,
                                              ";vec=4;algo=welford;cache=none;reg_cache=8;"
                                              "split=128;split_mode=ordered;lag_scale=1;unroll=",
                                              unroll, ";grid=oneshot"));
    EXPECT_EQ(g->Check(c), "") << c.ToString();
    return g->EstimateSeconds(c);
  };
  const double best = prior("row_threads=256;rows_per_block=1", 4);
  EXPECT_LT(best, prior("row_threads=256;rows_per_block=1", 1));
  EXPECT_LT(best, prior("row_threads=1024;rows_per_block=1", 1));
  const Config small = *g->Space().Parse(
      "row_threads=16;rows_per_block=2;vec=4;algo=welford;cache=none;reg_cache=8;split=128;"
      "split_mode=ordered;lag_scale=1;unroll=1;grid=oneshot");
  EXPECT_THAT(g->Check(small), HasSubstr("blocks of at least 256 threads (32 here)"));
  const Config grouped = *g->Space().Parse(
      "row_threads=64;rows_per_block=4;vec=4;algo=welford;cache=none;reg_cache=8;split=128;"
      "split_mode=ordered;lag_scale=1;unroll=4;grid=oneshot");
  EXPECT_THAT(g->Check(grouped), HasSubstr("rows_per_block 1"));
  // Its seed is the engine's fastest measured shape (sessions 42, 44 and 45): 256 threads, 4
  // vectors in flight, 32 KB chunks, and the shortest lag whose reads are not waited for,
  // here half the quarter of L2 (15 MB in this model): the 8 MB rows a row block behind.
  for (const auto& [channels, split] : {std::pair{128, 128}, {256, 256}, {32, 32}}) {
    auto shaped = Bind(Resized("group_norm_affine", v1::FLOAT32, {1, channels, 512, 512}));
    ASSERT_NE(shaped, nullptr);
    bool seeded = false;
    for (const Config& seed : shaped->Seeds()) {
      seeded |= seed.Get("split_mode") == "ordered" && seed.GetInt("row_threads") == 256 &&
                seed.GetInt("unroll") == 4 && seed.GetInt("split") == split &&
                seed.Get("lag_scale") == "0.5" && shaped->Check(seed).empty();
    }
    EXPECT_TRUE(seeded) << channels << " channels";
  }
  // Where half the lag would leave the writes too few tickets behind their reads, the seed
  // keeps the whole quarter: 2 MB rows in 64 chunks, 6 row blocks behind on the H100's 50 MB,
  // ran 64.8 us, 3 behind 76.8 (session 45).
  const v1::Target small_rows = Resized("group_norm_affine", v1::FLOAT32, {1, 256, 256, 256});
  GpuModel h100;
  h100.l2_bytes = 50 << 20;
  std::string refusal;
  auto h100_rows = FamilyRegistry::Default().Find(small_rows, &refusal)->Bind(small_rows, h100);
  ASSERT_TRUE(h100_rows.ok()) << h100_rows.status();
  bool quarter = false;
  for (const Config& seed : (*h100_rows)->Seeds()) {
    quarter |= seed.Get("split_mode") == "ordered" && seed.GetInt("split") == 64 &&
               seed.Get("lag_scale") == "1";
  }
  EXPECT_TRUE(quarter);
}

// A root expansion's first pick covers the strategies the prior rates near its best before
// trusting its ranking across them (the calibration learns a split mode's error only from a
// measured config of that mode), each by its seed where it has one. Simulated as the tree does it:
// each root expansion's first candidate runs (at its prior, or half again for the stream split, as
// the H100 measured the VAE's) and joins the history and the root's children.
TEST(SynthesizerTest, RootsMeasureEachStrategyThePriorRatesNearItsBest) {
  const v1::Target target = Resized("group_norm_affine", v1::FLOAT32, {1, 128, 512, 512});
  auto g = Bind(target);
  ASSERT_NE(g, nullptr);
  Synthesizer synth;
  v1::ProposeRequest request = Request(target, 4, 11);
  std::vector<std::string> modes;
  std::optional<Config> ordered;
  for (int expansion = 0; expansion < 6; ++expansion) {
    request.set_seed(11 + expansion);
    auto response = synth.Propose(request);
    ASSERT_TRUE(response.ok() && response->candidates_size() > 0);
    const v1::Candidate& first = response->candidates(0);
    const Config c = *g->Space().FromMap(Params(first));
    modes.push_back(c.Get("split_mode"));
    if (c.Get("split_mode") == "ordered" && !ordered.has_value()) ordered = c;
    const double slow = c.Get("split_mode") == "stream" ? 1.5 : 1.0;
    v1::EvaluatedCandidate run = Evaluated(first, v1::PASS, "");
    run.mutable_evaluation()->mutable_candidate()->set_median_s(g->EstimateSeconds(c) * slow);
    *request.add_history() = run;
    *request.add_siblings() = run;
  }
  // The prior's best first (a stream split), then the ordered and scratch splits it rates
  // within 13% of it (and others within kStrategyCoverage, in an order the seeded jitter
  // decides), each measured once before any mode's second root.
  EXPECT_EQ(modes[0], "stream");
  std::set<std::string> before_a_second;
  for (const std::string& mode : modes) {
    if (!before_a_second.insert(mode).second) break;
  }
  for (const char* mode : {"stream", "ordered", "scratch"}) {
    EXPECT_TRUE(before_a_second.count(mode)) << mode << ": " << absl::StrJoin(modes, ", ");
  }
  // A strategy's first measurement is its seed, the shape measured best for it: for the
  // ordered split 256 threads, unroll 4 and 32 KB chunks (split 128 of the 4 MB rows).
  ASSERT_TRUE(ordered.has_value());
  bool is_seed = false;
  for (const Config& seed : g->Seeds()) is_seed |= g->Canonicalize(seed) == *ordered;
  EXPECT_TRUE(is_seed) << ordered->ToString();
  EXPECT_EQ(ordered->GetInt("split"), 128);
}

// A norm whose chain takes exps or divisions (a group norm's SiLU) has the fast-math choice a
// softmax has: its config sets the preamble's approximate forms.
TEST(SynthesizerTest, AChainsExpsAndDivisionsMayBeFast) {
  const auto samples = SampleTargets(v1::FLOAT32);
  auto silu = Bind(Sample(samples, "group_norm_silu_chain").target);
  auto plain = Bind(Sample(samples, "group_norm_affine").target);
  ASSERT_NE(silu, nullptr);
  ASSERT_NE(plain, nullptr);
  auto has_fast_math = [](const KernelGenerator& g) {
    for (const ParamDef& def : g.Space().params()) {
      if (def.name == "fast_math") return true;
    }
    return false;
  };
  EXPECT_TRUE(has_fast_math(*silu));
  EXPECT_FALSE(has_fast_math(*plain));
  // The VAE's 4 MB rows in ticket order.
  auto vae = Bind(Resized("group_norm_silu_chain", v1::FLOAT32, {1, 128, 512, 512}));
  ASSERT_NE(vae, nullptr);
  Config c = *vae->Space().Parse(
      "row_threads=256;rows_per_block=1;vec=4;algo=welford;cache=none;reg_cache=8;split=128;"
      "split_mode=ordered;lag_scale=1;unroll=4;fast_math=0;grid=oneshot");
  ASSERT_EQ(vae->Check(c), "");
  const double accurate = vae->EstimateSeconds(c);
  auto exact = vae->Generate(c);
  c.Set("fast_math", "1");
  auto fast = vae->Generate(c);
  ASSERT_TRUE(exact.ok() && fast.ok());
  EXPECT_THAT(exact->source, HasSubstr("#define KF_EXP(x) expf(x)"));
  EXPECT_THAT(fast->source, HasSubstr("#define KF_EXP(x) kf_fast_exp(x)"));
  EXPECT_THAT(fast->source, HasSubstr("KF_DIV(a, 1.f + KF_EXP(-a))"));
  // Memory-bound here, the prior rates the two alike: the search measures both.
  EXPECT_LE(vae->EstimateSeconds(c), accurate);
}

// `config`'s kernel for `target` and its launch plan resolved for the target's shapes on 132
// SMs; nullopt (with the failure recorded) when any step fails.
struct PlannedKernel {
  GeneratedKernel kernel;
  ResolvedPlan plan;
};
std::optional<PlannedKernel> PlanFor(const KernelGenerator& generator, const v1::Target& target,
                                     const Config& config) {
  EXPECT_EQ(generator.Check(config), "");
  auto kernel = generator.Generate(config);
  EXPECT_TRUE(kernel.ok()) << kernel.status();
  if (!kernel.ok()) return std::nullopt;
  auto plan = LaunchPlan::Parse(kernel->launch_plan_json);
  EXPECT_TRUE(plan.ok()) << plan.status();
  if (!plan.ok()) return std::nullopt;
  std::vector<v1::TensorSignature> ins(target.inputs().begin(), target.inputs().end());
  std::vector<v1::TensorSignature> outs(target.outputs().begin(), target.outputs().end());
  auto resolved = plan->Resolve(BindSymbols(ins, outs, testing::IntArgs(target), 132));
  EXPECT_TRUE(resolved.ok()) << resolved.status();
  if (!resolved.ok()) return std::nullopt;
  return PlannedKernel{*std::move(kernel), *std::move(resolved)};
}

// A stream split's plan: the partials per (row block, chunk), each row block's statistics, then
// the output pass over (spans of a row, rows), with scratch for the partials and two floats a
// row.
TEST(SynthesizerTest, StreamSplitPlansTheOutputPassPerRowSpan) {
  const v1::Target target = Sample(SampleTargets(v1::FLOAT32), "group_norm_affine").target;
  auto generator = Bind(target);  // 8x256x32x32, 32 groups: 256 rows of 8192
  ASSERT_NE(generator, nullptr);
  Config c = *generator->Space().Parse(
      "row_threads=32;rows_per_block=8;vec=4;algo=welford;cache=none;reg_cache=8;split=4;"
      "split_mode=stream;lag_scale=1;unroll=4;grid=oneshot");
  std::optional<PlannedKernel> planned = PlanFor(*generator, target, c);
  ASSERT_TRUE(planned.has_value());
  const GeneratedKernel* kernel = &planned->kernel;
  const ResolvedPlan* resolved = &planned->plan;
  ASSERT_EQ(resolved->launches.size(), 3u);
  EXPECT_EQ(resolved->launches[0].grid, (Dim3{32, 4, 1}));  // row blocks x chunks
  EXPECT_EQ(resolved->launches[1].grid, (Dim3{32, 1, 1}));
  EXPECT_EQ(resolved->launches[2].entry, "kf_rows_apply");
  EXPECT_EQ(resolved->launches[2].grid, (Dim3{2, 256, 1}));  // 8192 / (256 threads x 16)
  EXPECT_EQ(resolved->scratch_bytes, 256 * 4 * 16 + 256 * 8 + 16);
  // The output pass's fast path for the captured call: its geometry as constants (8 channels
  // a group of 1024 elements each, spans of 4096 tiling the 8192 columns).
  for (const char* line :
       {"#define KF_CAPTURED_APPLY 1\n", "#define KF_CAPTURED_ROWS 256\n",
        "#define KF_CAPTURED_COLS 8192\n", "#define KF_CAPTURED_EXACT true\n",
        "  ctx.c_first = (row % 32) * 8;\n", "  ctx.hw = 1024;\n"}) {
    EXPECT_THAT(kernel->source, HasSubstr(line));
  }
  c.Set("rows_per_block", "32");  // spans of 16384 elements overrun the row
  auto overrunning = generator->Generate(c);
  ASSERT_TRUE(overrunning.ok()) << overrunning.status();
  EXPECT_THAT(overrunning->source, HasSubstr("#define KF_CAPTURED_EXACT false\n"));
  // A per-row op has no output pass to stream.
  auto sum = Bind(Sample(SampleTargets(v1::FLOAT32), "sum_last").target);
  ASSERT_NE(sum, nullptr);
  Config r = *sum->Space().Parse(
      "row_threads=64;rows_per_block=1;vec=2;split=4;split_mode=scratch;unroll=2;grid=oneshot");
  r.Set("split_mode", "stream");
  EXPECT_THAT(sum->Check(r), HasSubstr("an op with an output pass"));
}

// An ordered split's plan: a clearing launch over the row blocks' counters, then about the
// resident blocks taking twice the (row block, chunk) items in ticket order, with scratch for
// the partials, the arrival counters and the ticket; the lag is sized by the GPU's L2.
TEST(SynthesizerTest, OrderedSplitPlansAClearThenResidentBlocksTakingTickets) {
  const v1::Target target = Sample(SampleTargets(v1::FLOAT32), "group_norm_affine").target;
  auto generator = Bind(target);  // 8x256x32x32, 32 groups: 256 rows of 8192
  ASSERT_NE(generator, nullptr);
  Config c = *generator->Space().Parse(
      "row_threads=256;rows_per_block=1;vec=4;algo=welford;cache=none;reg_cache=8;split=4;"
      "split_mode=ordered;lag_scale=1;unroll=1;grid=oneshot");
  std::optional<PlannedKernel> planned = PlanFor(*generator, target, c);
  ASSERT_TRUE(planned.has_value());
  const ResolvedPlan* resolved = &planned->plan;
  ASSERT_EQ(resolved->launches.size(), 2u);
  EXPECT_EQ(resolved->launches[0].entry, "kf_rows_clear");
  EXPECT_EQ(resolved->launches[0].grid, (Dim3{1, 1, 1}));  // 256 row blocks' counters
  EXPECT_EQ(resolved->launches[1].entry, "kf_rows_ordered");
  EXPECT_EQ(resolved->launches[1].block, (Dim3{256, 1, 1}));
  // 132 SMs times the blocks of 256 threads resident on one, under the 2,048 tickets.
  EXPECT_GE(resolved->launches[1].grid.x, 132);
  EXPECT_LE(resolved->launches[1].grid.x, 2048);
  EXPECT_FALSE(resolved->launches[1].cooperative);
  EXPECT_TRUE(resolved->launches[1].early_start);
  EXPECT_EQ(resolved->scratch_bytes, 256 * 4 * 12 + 256 * 4 + 16);  // Welford partials: 12 B
  EXPECT_THAT(planned->kernel.source, HasSubstr(absl::StrCat("#define KF_ORDERED_LAG_BYTES ",
                                                     GpuModel{}.l2_bytes / 4, "ll\n")));
  // The lag counts the bytes a write re-reads: the input's, and a residual added before the
  // norm beside it.
  EXPECT_THAT(planned->kernel.source, HasSubstr("#define KF_ORDERED_ELEM_BYTES 4ll\n"));
  for (v1::DType dtype : {v1::FLOAT32, v1::BFLOAT16}) {
    const v1::Target residual = Sample(SampleTargets(dtype), "layer_norm_chain").target;
    auto chain = Bind(residual);
    ASSERT_NE(chain, nullptr);
    std::optional<PlannedKernel> added =
        PlanFor(*chain, residual,
                *chain->Space().Parse(
                    "row_threads=256;rows_per_block=1;vec=1;algo=welford;cache=none;"
                    "reg_cache=8;split=2;split_mode=ordered;lag_scale=1;unroll=1;grid=oneshot"));
    ASSERT_TRUE(added.has_value());
    EXPECT_THAT(added->kernel.source,
                HasSubstr(dtype == v1::FLOAT32 ? "#define KF_ORDERED_ELEM_BYTES 8ll\n"
                                               : "#define KF_ORDERED_ELEM_BYTES 4ll\n"));
  }
  // Canonical: no row cache (the write re-reads from L2), one-pass statistics.
  c.Set("cache", "smem");
  c.Set("algo", "two_pass");
  const Config canonical = generator->Canonicalize(c);
  EXPECT_EQ(canonical.Get("cache"), "none");
  EXPECT_EQ(canonical.Get("algo"), "welford");
  // A per-row op has no output pass to interleave: not in its space.
  auto sum = Bind(Sample(SampleTargets(v1::FLOAT32), "sum_last").target);
  ASSERT_NE(sum, nullptr);
  Config r = *sum->Space().Parse(
      "row_threads=64;rows_per_block=1;vec=2;split=4;split_mode=scratch;unroll=2;grid=oneshot");
  r.Set("split_mode", "ordered");
  EXPECT_FALSE(sum->Space().Contains(r));
}

// An ordered split after a prologue with operands of the value's shape may keep the values
// after the prologue in a float output (cache=output): its lag then counts the one float a
// write re-reads, its read stores each value there and its write loads them after the wait.
TEST(SynthesizerTest, OrderedSplitMayKeepTheProloguesValuesInTheOutput) {
  const v1::Target residual = Sample(SampleTargets(v1::FLOAT32), "layer_norm_chain").target;
  auto chain = Bind(residual);
  ASSERT_NE(chain, nullptr);
  Config c = *chain->Space().Parse(
      "row_threads=256;rows_per_block=1;vec=1;algo=welford;cache=output;reg_cache=8;split=2;"
      "split_mode=ordered;lag_scale=1;unroll=1;grid=oneshot");
  EXPECT_EQ(chain->Canonicalize(c).Get("cache"), "output");
  EXPECT_EQ(chain->Check(c), "");
  std::optional<PlannedKernel> planned = PlanFor(*chain, residual, c);
  ASSERT_TRUE(planned.has_value());
  const std::string& src = planned->kernel.source;
  EXPECT_THAT(src, HasSubstr("#define KF_ORDERED_ELEM_BYTES 4ll\n"));
  EXPECT_THAT(src, HasSubstr("kf_store_floats_l2<TO, V>(yr + c, v, keep);"));
  EXPECT_THAT(src, Not(HasSubstr("#error")));
  // The write's first loads come after its wait for the row block.
  const size_t wait = src.find("const KfStat s = kf_row_block_stat(", src.find("kf_ordered_write"));
  ASSERT_NE(wait, std::string::npos);
  EXPECT_LT(wait, src.find("kf_load<V>(yr + c, first[u].v);"));
  // The ordered seed keeps them there (the searches' neighbour moves do not reach it), where
  // its rows are long enough for an ordered split (a decoder's group norm, not these 768),
  // with fast math for the chain's SiLU; its chunks and steps sized by what the read loads,
  // the input and the residual: 32 KB of the 128 KB that a row's 16384 elements read, two
  // vectors of each a step.
  auto decoder = Bind(Sample(SampleTargets(v1::FLOAT32), "group_norm_chain").target);
  ASSERT_NE(decoder, nullptr);
  bool seeded = false;
  for (const Config& seed : decoder->Seeds()) {
    if (seed.Get("split_mode") != "ordered") continue;
    seeded = seed.Get("cache") == "output" && seed.Get("fast_math") == "1" &&
             decoder->Check(seed).empty();
    EXPECT_EQ(seed.GetInt("split"), 4);
    EXPECT_EQ(seed.GetInt("unroll"), 2);
  }
  EXPECT_TRUE(seeded);
  // Without it, the lag counts the input and the residual.
  Config plain = c;
  plain.Set("cache", "none");
  EXPECT_THAT(chain->Generate(plain)->source, HasSubstr("#define KF_ORDERED_ELEM_BYTES 8ll\n"));
  // No other launch has a write after a read of its own launch to hold the values for: a
  // scratch split's cache canonicalizes to none, an unsplit row's cache=output is refused.
  Config stream = c;
  stream.Set("split_mode", "stream");
  EXPECT_EQ(chain->Canonicalize(stream).Get("cache"), "none");
  Config whole = c;
  whole.Set("split", "1");
  EXPECT_THAT(chain->Check(chain->Canonicalize(whole)), HasSubstr("split_mode ordered"));
  // A 16-bit output cannot hold the values exactly, and a norm without a prologue has none.
  for (const char* other : {"layer_norm_chain", "group_norm_affine"}) {
    const bool chained = std::string(other) == "layer_norm_chain";
    auto g = Bind(Sample(SampleTargets(chained ? v1::BFLOAT16 : v1::FLOAT32), other).target);
    ASSERT_NE(g, nullptr);
    const ParamDef* cache = g->Space().Find("cache");
    ASSERT_NE(cache, nullptr);
    EXPECT_THAT(cache->values, Not(Contains("output"))) << other;
  }
}

// A split that reads its row twice reads a residual added before the norm twice too: the
// prior counts the operand in every pass that applies the prologue, where it once counted it
// once and rated the stream split of a VAE's residual chain 1.76x faster than it ran (H100,
// session 48). Per element, the stream split moves input, residual, input, residual, output
// (20 bytes in fp32); the same norm without the residual input, input, output (12).
TEST(SynthesizerTest, APriorCountsAResidualInEveryPassThatReadsIt) {
  const std::vector<int64_t> x = {1, 128, 512, 512};
  v1::Target residual = Resized("group_norm_chain", v1::FLOAT32, x);
  *residual.mutable_inputs(1) = Dense(x, v1::FLOAT32);
  auto chain = Bind(residual);
  auto plain = Bind(Resized("group_norm_silu_chain", v1::FLOAT32, x));
  ASSERT_NE(chain, nullptr);
  ASSERT_NE(plain, nullptr);
  const char* stream =
      "row_threads=64;rows_per_block=1;vec=4;algo=welford;cache=none;reg_cache=8;split=64;"
      "split_mode=stream;lag_scale=1;unroll=2;fast_math=1;grid=oneshot";
  auto c = chain->Space().Parse(stream);
  auto p = plain->Space().Parse(stream);
  ASSERT_TRUE(c.ok() && p.ok());
  ASSERT_EQ(chain->Check(*c), "");
  ASSERT_EQ(plain->Check(*p), "");
  EXPECT_GT(chain->EstimateSeconds(*c) / plain->EstimateSeconds(*p), 1.5);
}

// An ordered split's lag (the row blocks read between a chunk's read and its write) is a
// parameter: the quarter-of-L2 lag scaled by lag_scale, in the kernel's source; scales that
// give the captured rows one lag are one config, and a per-row op has no such split.
TEST(SynthesizerTest, AnOrderedSplitsLagIsAParameterOfItsSpace) {
  // 8 MB rows: a quarter of L2 is 2 of them, so the four scales give four lags.
  auto g = Bind(Resized("group_norm_affine", v1::FLOAT32, {1, 256, 512, 512}));
  ASSERT_NE(g, nullptr);
  Config c = *g->Space().Parse(
      "row_threads=256;rows_per_block=1;vec=4;algo=welford;cache=none;reg_cache=8;split=128;"
      "split_mode=ordered;lag_scale=1;unroll=4;grid=oneshot");
  std::vector<double> estimates;
  for (const char* scale : {"0.5", "1", "1.5", "2"}) {
    c.Set("lag_scale", scale);
    EXPECT_EQ(g->Canonicalize(c).Get("lag_scale"), scale);
    EXPECT_EQ(g->Check(c), "") << scale;
    const int halves = static_cast<int>(std::lround(2 * std::stod(scale)));
    EXPECT_THAT(g->Generate(c)->source,
                HasSubstr(absl::StrCat("#define KF_ORDERED_LAG_HALVES ", halves, "\n")));
    estimates.push_back(g->EstimateSeconds(c));
  }
  // The prior counts the shortest lag's waits (its row block of reads, 256 tickets, is
  // under the grid's items in flight) and the longest's window (what outgrows L2 is re-read
  // from DRAM): the quarter of L2 is its best, as the H100 measured (session 45: 262.5 us
  // against 290.4, 267.8 and 269.2).
  EXPECT_EQ(std::min_element(estimates.begin(), estimates.end()) - estimates.begin(), 1);
  EXPECT_LT(estimates[1], estimates[3]);
  // Outside an ordered split the lag means nothing: it canonicalizes to 1.
  Config stream = c;
  stream.Set("split_mode", "stream");
  EXPECT_EQ(g->Canonicalize(stream).Get("lag_scale"), "1");
  // 128 KB rows: every scale's lag reaches all 32 row blocks, so each is the scale 1 config.
  auto small = Bind(Resized("group_norm_affine", v1::FLOAT32, {1, 256, 64, 64}));
  ASSERT_NE(small, nullptr);
  Config s = c;
  s.Set("split", "2");
  for (const char* scale : {"0.5", "1.5", "2"}) {
    s.Set("lag_scale", scale);
    EXPECT_EQ(small->Canonicalize(s).Get("lag_scale"), "1") << scale;
  }
  // A per-row op writes no output pass to lag.
  auto sum = Bind(Sample(SampleTargets(v1::FLOAT32), "sum_last").target);
  ASSERT_NE(sum, nullptr);
  EXPECT_EQ(sum->Space().Find("lag_scale"), nullptr);
}

// The norms' generated code: per-vector Welford with an approximate division, vector loads
// of per-column weights, and group norm's channel by multiply-shift once per vector.
TEST(NormPriorTest, NormSourcesUseVectorAffineAndCheapStatistics) {
  const auto samples = SampleTargets(v1::BFLOAT16);
  auto ln = Bind(Sample(samples, "layer_norm_affine").target);
  Config c = *ln->Space().Parse(
      "row_threads=32;rows_per_block=4;vec=8;algo=welford;cache=regs;reg_cache=32;split=1;"
      "split_mode=scratch;lag_scale=1;unroll=1;grid=oneshot");
  ASSERT_EQ(ln->Check(c), "");
  auto kernel = ln->Generate(c);
  ASSERT_TRUE(kernel.ok()) << kernel.status();
  EXPECT_THAT(kernel->source, HasSubstr("__fdividef((float)V, n)"));
  EXPECT_THAT(kernel->source, HasSubstr("kf_load_affine<V>(ctx.w, c, p.w)"));
  EXPECT_THAT(kernel->source, HasSubstr("kf_load_affine<V>(ctx.bias, c, p.bb)"));

  auto gn = Bind(Sample(samples, "group_norm_affine").target);
  Config s = *gn->Space().Parse(
      "row_threads=256;rows_per_block=1;vec=8;algo=welford;cache=none;reg_cache=8;split=4;"
      "split_mode=scratch;lag_scale=1;unroll=4;grid=oneshot");
  ASSERT_EQ(gn->Check(s), "");
  auto group = gn->Generate(s);
  ASSERT_TRUE(group.ok()) << group.status();
  EXPECT_THAT(group->source, HasSubstr("kf_divide((unsigned)col, ctx.hw_divisor)"));
  // Vectors never straddle channels (the plan requires V to divide H*W), so one scale and
  // shift per vector, loaded with the step's inputs; no 64-bit integer division for the
  // channel; no per-element path.
  auto plan = LaunchPlan::Parse(group->launch_plan_json);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->requirements().multiple_of,
            (std::vector<std::pair<std::string, int64_t>>{
                {"in0_numel / max(in0_size0 * in0_size1, 1)", 8}}));
  EXPECT_THAT(group->source, ::testing::Not(HasSubstr("kf_row<1,")));
  EXPECT_THAT(group->source, HasSubstr("kf_out_params<V>(c, ctx, p)"));
  EXPECT_THAT(group->source, ::testing::Not(HasSubstr("col / ctx.hw")));
  EXPECT_THAT(group->launch_plan_json, HasSubstr("kf_rows_partial"));
  // The scratch split's finishing launch re-reads and stores under evict_first; the unsplit
  // layer norm above takes no L2 policy.
  EXPECT_THAT(group->source, HasSubstr("kf_load_l2<TI, V>(xr + c, kf_l2_policy(false))"));
  EXPECT_THAT(group->source, HasSubstr("kf_store_l2<TO, V>(yr + c, packed, kf_l2_policy(false))"));
  EXPECT_THAT(kernel->source, ::testing::Not(HasSubstr("kf_l2_policy")));
  // Its finishing launch starts in the partial launch's tail and waits for the partials.
  EXPECT_THAT(group->source, HasSubstr("kf_launch_dependents();\n  kf_rows_body<1>(args);"));
  EXPECT_THAT(group->source, HasSubstr("kf_wait_previous();\n  kf_rows_body<2>(args);"));
  ASSERT_EQ(plan->launches().size(), 2u);
  EXPECT_TRUE(plan->launches()[1].early_start);
}

}  // namespace
}  // namespace kforge::synth
