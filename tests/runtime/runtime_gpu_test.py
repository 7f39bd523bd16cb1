#!/usr/bin/env python3
"""libkforge_runtime.so on a CUDA GPU (ctest label gpu: runtime_gpu_test).

Uses the runtime_bundle fixture (tests/runtime/make_fixture.sh): the exported model of
make_runtime_model.py whose softmax(dim=-1) calls tests/gpu/kernels/softmax_two_launches.cu
(f32 [64, 512], contiguous; two launches through scratch, the second early_start). Checks that
the kernel runs (launch counted, output matches the original model), that each non-matching
call falls back through the original operator with its reason counted — shape, dtype, stride
(non-contiguous), alignment (misaligned pointer), requires_grad, arch_missing (a bundle with
only sm_80 cubins on a newer GPU) — and that a CUDA graph captured over the optimized model
(its early_start launch a programmatic edge of the graph) replays correctly.

    runtime_gpu_test.py --lib LIB --fixture DIR --kforge KFORGE --repo REPO
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import unittest

from runtime_lib import find_library

ARGS = None


class RuntimeOnGpu(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        import torch
        if not torch.cuda.is_available():
            raise SystemExit("runtime_gpu_test needs a CUDA GPU")
        cls.torch = torch
        torch.ops.load_library(find_library(ARGS.lib))
        cls.bundle = os.path.join(ARGS.fixture, "bundle")
        with open(os.path.join(cls.bundle, "manifest.json")) as f:
            cls.kernel_id = json.load(f)["kernels"][0]["id"]
        cls.model = torch.jit.load(os.path.join(cls.bundle, "model.pt"), map_location="cuda")
        cls.original = torch.jit.load(os.path.join(ARGS.fixture, "model", "model.pt"),
                                      map_location="cuda")

    def run_both(self, x):
        torch = self.torch
        torch.ops.kforge.reset_counts()
        with torch.inference_mode():
            got = self.model(x)
            want = self.original(x)
        torch.cuda.synchronize()
        return got, want, dict(torch.ops.kforge.fallback_counts()), dict(torch.ops.kforge.launch_counts())

    def assert_fallback(self, x, reason):
        got, want, fallbacks, launches = self.run_both(x)
        self.assertEqual(launches, {}, f"{reason}: the kernel must not run")
        self.assertEqual(fallbacks.get(reason), 1, fallbacks)
        self.assertEqual(fallbacks.get(f"{self.kernel_id}:{reason}"), 1, fallbacks)
        # The fallback is the original operator.
        self.assertTrue(self.torch.equal(got, want), reason)

    def test_the_kernel_runs_and_matches(self):
        torch = self.torch
        x = torch.randn(64, 512, device="cuda")
        got, want, fallbacks, launches = self.run_both(x)
        self.assertEqual(launches, {self.kernel_id: 1})
        self.assertEqual(fallbacks, {})
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6)
        # On a side stream too: the kernel runs on the current stream.
        s = torch.cuda.Stream()
        with torch.cuda.stream(s), torch.inference_mode():
            y = self.model(x)
        s.synchronize()
        torch.testing.assert_close(y, want, rtol=1e-5, atol=1e-6)

    def test_shape(self):
        self.assert_fallback(self.torch.randn(32, 512, device="cuda"), "shape")

    def test_dtype(self):
        self.assert_fallback(self.torch.randn(64, 512, device="cuda").half(), "dtype")

    def test_non_contiguous(self):
        x = self.torch.randn(512, 64, device="cuda").t()
        self.assertEqual(tuple(x.shape), (64, 512))
        self.assert_fallback(x, "stride")

    def test_misaligned(self):
        flat = self.torch.randn(64 * 512 + 1, device="cuda")
        x = flat[1:].view(64, 512)  # contiguous, 4 bytes past a 16-byte boundary
        self.assertTrue(x.is_contiguous())
        self.assertNotEqual(x.data_ptr() % 16, 0)
        self.assert_fallback(x, "alignment")

    def test_requires_grad(self):
        torch = self.torch
        x = torch.randn(64, 512, device="cuda", requires_grad=True)
        torch.ops.kforge.reset_counts()
        y = self.model(x)  # grad mode on
        y.sum().backward()
        self.assertIsNotNone(x.grad)
        self.assertEqual(dict(torch.ops.kforge.fallback_counts()).get("requires_grad"), 1)
        self.assertEqual(dict(torch.ops.kforge.launch_counts()), {})

    def test_cpu_tensor(self):
        torch = self.torch
        model = torch.jit.load(os.path.join(self.bundle, "model.pt"), map_location="cpu")
        torch.ops.kforge.reset_counts()
        with torch.inference_mode():
            model(torch.randn(64, 512))
        self.assertEqual(dict(torch.ops.kforge.fallback_counts()).get("cpu_tensor"), 1)

    def test_cuda_graph_capture_replays(self):
        torch = self.torch
        static_x = torch.randn(64, 512, device="cuda")
        with torch.inference_mode():
            # Warm-up on a side stream (PyTorch's recipe): loads the module before capture.
            s = torch.cuda.Stream()
            s.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(s):
                for _ in range(2):
                    self.model(static_x)
            torch.cuda.current_stream().wait_stream(s)
            torch.ops.kforge.reset_counts()
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph):
                static_y = self.model(static_x)
            self.assertEqual(dict(torch.ops.kforge.launch_counts()), {self.kernel_id: 1})
            self.assertEqual(dict(torch.ops.kforge.fallback_counts()), {})
            for seed in range(3):
                torch.manual_seed(seed)
                fresh = torch.randn(64, 512, device="cuda")
                static_x.copy_(fresh)
                graph.replay()
                torch.cuda.synchronize()
                torch.testing.assert_close(static_y, self.original(fresh), rtol=1e-5, atol=1e-6)

    def test_arch_missing(self):
        torch = self.torch
        major, _ = torch.cuda.get_device_capability()
        if major == 8:
            self.skipTest("this GPU runs sm_80 cubins")
        with tempfile.TemporaryDirectory() as tmp:
            out = os.path.join(tmp, "sm80")
            r = subprocess.run([ARGS.kforge, "export", os.path.join(ARGS.fixture, "run"), "--out",
                                out, "--arch", "sm_80"], capture_output=True, text=True, timeout=600)
            self.assertEqual(r.returncode, 0, r.stderr)
            with open(os.path.join(out, "manifest.json")) as f:
                kid = json.load(f)["kernels"][0]["id"]
            model = torch.jit.load(os.path.join(out, "model.pt"), map_location="cuda")
            x = torch.randn(64, 512, device="cuda")
            torch.ops.kforge.reset_counts()
            with torch.inference_mode():
                got = model(x)
                want = self.original(x)
            self.assertEqual(dict(torch.ops.kforge.fallback_counts()).get(f"{kid}:arch_missing"), 1)
            self.assertEqual(dict(torch.ops.kforge.launch_counts()), {})
            self.assertTrue(torch.equal(got, want))

    def test_check_optimized_passes(self):
        script = os.path.join(ARGS.repo, "tools", "check-optimized")
        module = os.path.join(ARGS.repo, "tests", "runtime", "make_runtime_model.py") + ":make"
        r = subprocess.run([sys.executable, script, self.bundle, "--lib", find_library(ARGS.lib),
                            "--device", "cuda", "--runs", "20", "--module", module, "--json"],
                           capture_output=True, text=True, timeout=900)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        report = json.loads(r.stdout)
        self.assertTrue(report["passed"], report)
        self.assertGreater(report["launches"].get(self.kernel_id, 0), 0)

    def test_torch_times_time_the_kernel_beside_torch_compile(self):
        # torch_compile_times.py --kforge-bundle on the fixture's softmax row: the kernel runs
        # through the runtime in the same interleaved loop as eager and torch.compile, every
        # timed call launched it, and the spin covered every batch.
        times = os.path.join(ARGS.repo, "tools", "bench", "torch_compile_times.py")
        with open(os.path.join(self.bundle, "manifest.json")) as f:
            target_id = json.load(f)["kernels"][0]["target_id"]
        with tempfile.TemporaryDirectory() as tmp:
            rows, out = os.path.join(tmp, "rows.json"), os.path.join(tmp, "times.json")
            r = subprocess.run([ARGS.kforge, "report", os.path.join(ARGS.fixture, "run"),
                                "--torch-rows", rows, "--torch-inputs",
                                os.path.join(tmp, "inputs")],
                               capture_output=True, text=True, timeout=300)
            self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
            r = subprocess.run([sys.executable, times, "--rows-json", rows, "--out", out,
                                "--rows", target_id, "--modes", "default",
                                "--kforge-bundle", self.bundle,
                                "--kforge-lib", find_library(ARGS.lib)],
                               capture_output=True, text=True, timeout=900)
            self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
            with open(out) as f:
                rec = json.load(f)["rows"][target_id]
            self.assertGreater(rec["kforge_s"].get("default", 0), 0, rec)
            self.assertGreater(rec["compiled_s"].get("default", 0), 0, rec)
            self.assertEqual(rec["uncovered_batches"], 0, rec)
            self.assertNotIn("fell back", rec["note"], rec)
            # A launch-bound row is also timed as CUDA-graph replays, the kernel captured too.
            if min(rec["compiled_s"]["default"], rec["kforge_s"]["default"]) < 20e-6:
                self.assertGreater(rec.get("graph_kforge_s", {}).get("default", 0), 0, rec)
                self.assertGreater(rec.get("graph_compiled_s", {}).get("default", 0), 0, rec)


def main():
    global ARGS
    parser = argparse.ArgumentParser()
    parser.add_argument("--lib", required=True)
    parser.add_argument("--fixture", required=True)
    parser.add_argument("--kforge", required=True)
    parser.add_argument("--repo", required=True)
    ARGS, rest = parser.parse_known_args()
    unittest.main(argv=[sys.argv[0]] + rest, verbosity=2)


if __name__ == "__main__":
    main()
