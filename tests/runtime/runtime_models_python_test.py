#!/usr/bin/env python3
"""The bundles exported from real models (make_model_fixture.sh: ResNet-50, the Qwen3 example,
make_small_model.py's two chained softmax nodes, its written-out RMSNorm and its reshape whose
sizes the graph computes, and the chain
softmax(x * 0.125 + mask) of make_chain_model.py rewritten as one), run in plain PyTorch on the CPU (ctest:
runtime_models_python_test).

Each optimized model gives outputs identical to the original's (every rewritten node falls back
to its original operator on CPU tensors), and every rewritten node's call is counted as one
fallback with reason cpu_tensor: per forward, `cpu_tensor` equals the rewritten nodes and
`<kernel>:cpu_tensor` the nodes that list that kernel; nothing launches.

    runtime_models_python_test.py --lib LIB --fixtures DIR
"""
import argparse
import json
import os
import sys
import unittest

ARGS = None


class OptimizedModelsOnCpu(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        import torch
        cls.torch = torch
        torch.ops.load_library(ARGS.lib)

    def check(self, name, expected_nodes):
        torch = self.torch
        root = os.path.join(ARGS.fixtures, name)
        with open(os.path.join(root, "export.json")) as f:
            export = json.load(f)
        self.assertEqual(export["nodes_rewritten"], expected_nodes)
        optimized = torch.jit.load(os.path.join(root, "bundle", "model.pt"))
        original = torch.jit.load(os.path.join(root, "model", "model.pt"))
        inputs = torch.load(os.path.join(root, "model", "inputs.pt"))
        self.assertEqual(str(optimized.forward.graph).count("kforge::run("), expected_nodes)
        with torch.inference_mode():
            # Models that write their inputs in place get copies, the same for both.
            want = original(*[t.clone() for t in inputs])
            torch.ops.kforge.reset_counts()
            got = optimized(*[t.clone() for t in inputs])
            fallbacks = dict(torch.ops.kforge.fallback_counts())
            launches = dict(torch.ops.kforge.launch_counts())
            got_again = optimized(*[t.clone() for t in inputs])
        equal = (lambda a, b: all(torch.equal(x, y) for x, y in zip(a, b))
                 if isinstance(want, tuple) else torch.equal)
        self.assertTrue(equal(got, want), f"{name}: outputs differ")
        self.assertTrue(equal(got_again, want))
        expected = {"cpu_tensor": expected_nodes}
        for k in export["kernels"]:
            expected[f"{k['kernel_id']}:cpu_tensor"] = k["nodes"]
        self.assertEqual(fallbacks, expected)
        self.assertEqual(launches, {})

    def test_resnet50(self):
        self.check("resnet50", 16)

    def test_qwen3(self):
        self.check("qwen3", 29)

    def test_chained_rewritten_nodes(self):
        self.check("chained", 2)

    def test_a_chain_rewritten_as_one(self):
        self.check("fused", 1)

    def test_a_chain_reading_its_input_twice(self):
        self.check("rms_norm", 1)

    def test_a_reshape_whose_sizes_the_graph_computes(self):
        # As captured, the sizes match and the CPU tensor is why it falls back; another batch
        # gives the reshape other sizes, and the kernel, proven for the captured ones only, is
        # not tried: `arguments`, and the original reshape's result.
        self.check("computed_shape", 1)
        torch = self.torch
        root = os.path.join(ARGS.fixtures, "computed_shape")
        optimized = torch.jit.load(os.path.join(root, "bundle", "model.pt"))
        original = torch.jit.load(os.path.join(root, "model", "model.pt"))
        with open(os.path.join(root, "export.json")) as f:
            kernel_id = json.load(f)["kernels"][0]["kernel_id"]
        x = torch.randn(3, 4, 64, 32)
        torch.ops.kforge.reset_counts()
        self.assertTrue(torch.equal(optimized(x), original(x)))
        self.assertEqual(dict(torch.ops.kforge.fallback_counts()),
                         {"arguments": 1, f"{kernel_id}:arguments": 1})


class FusedChainOnGpu(unittest.TestCase):
    """With --cuda (label gpu): the fused fixture's chain kernel runs on the GPU in place of
    mul, add and softmax, once per forward, and agrees with them."""

    def test_the_chain_kernel_runs_and_agrees(self):
        if not ARGS.cuda:
            self.skipTest("needs --cuda")
        import torch
        torch.ops.load_library(ARGS.lib)
        root = os.path.join(ARGS.fixtures, "fused")
        torch.ops.kforge.load_bundle(os.path.join(root, "bundle"))
        optimized = torch.jit.load(os.path.join(root, "bundle", "model.pt"), map_location="cuda")
        original = torch.jit.load(os.path.join(root, "model", "model.pt"), map_location="cuda")
        inputs = [t.cuda() for t in torch.load(os.path.join(root, "model", "inputs.pt"))]
        with torch.inference_mode():
            want = original(*[t.clone() for t in inputs])
            torch.ops.kforge.reset_counts()
            got = optimized(*[t.clone() for t in inputs])
            torch.cuda.synchronize()
        launches = dict(torch.ops.kforge.launch_counts())
        self.assertEqual(list(launches.values()), [1], launches)
        self.assertEqual(dict(torch.ops.kforge.fallback_counts()), {})
        torch.testing.assert_close(got[0], want[0], rtol=1e-5, atol=1e-6)
        for g, w in zip(got[1:], want[1:]):
            self.assertTrue(torch.equal(g, w))


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--lib", required=True)
    parser.add_argument("--fixtures", required=True)
    parser.add_argument("--cuda", action="store_true", help="also run the GPU test")
    ARGS, rest = parser.parse_known_args()
    unittest.main(argv=[sys.argv[0]] + rest)
