#!/usr/bin/env python3
"""The real CUDA backend (libckrt's runtime/cuda_driver.c and cuda_ops.c) on the CPU, against
tests/fake_cuda.c standing in for the driver, cuBLAS and NVRTC.

  cuda_fake_test.py CKPTC SAMPLES WORK FAKE_DIR BUILTINS_LIB CUDA_STREAMS

The programs are the ordinary ones (linked against libckrt); the environment points the backend
at FAKE_DIR (CKRT_CUDA_DRIVER, CKRT_CUDA_LIBDIR), which is on no loader path. The fake runs a
stream's work only when the program's own synchronization demands it (CKRT_FAKE_CUDA_SEED=0)
or in seeded random legal orders (1, 2, 3), so a kernel that is not ordered after the bytes it
reads sees device garbage and the run differs from the CPU. Checked:
  1. ordering: every sample (training, and --checkpoint=blocks --offload: the copy stream)
     matches the CPU backend (losses and step-2 gradients within 1e-5 relative; the kernels are
     the same bodies, built by g++ instead of gcc) under each seed; planned == measured peak;
  2. the kernel cache: a second start loads the compiled kernels instead of compiling;
  3. NVRTC's builtins library is found beside NVRTC although no loader path has it;
  4. architectures: a GPU newer than every architecture NVRTC knows runs PTX for the newest one
     (the first line says so); an older one is refused with exit 2 and a message;
  5. a plan that does not fit the device's free memory with the backend's margin is refused at
     start-up, exit 2, in one line that gives the figures;
  6. a kernel on the communication stream that reads a pending reload waits for it
     (tests/cuda_streams.c, with a data-parallel program's kernels.cu), under every seed;
  7. no host copy of the arena: on an MLP whose arena is far larger than the staging, the fake's
     own accounting (CKRT_FAKE_CUDA_STATS) shows pinned host memory = the backend's staging, the
     report's largest read-back = the largest tensor dumped, and the trainer's peak RSS less the
     fake's device memory stays under half the arena (a host mirror would add the whole arena);
     planned == measured peak, found by the device-side search, and the CPU's bits;
  8. a small conv net whose 2x2-output convolutions the CPU runs several images per GEMM
     (ckrt_conv_batch.h): the GPU path, one image at a time, matches the CPU's losses and
     parameters, planned == measured on both devices; with cuDNN and with CKRT_CUDNN=0 (im2col);
  9. cuDNN (when the toolkit has cudnn.h, the fake stands in for libcudnn too; its heuristics
     offer non-deterministic, tensor-op, oversized and just-too-large algorithms before the
     one to take, and a run with any other, or with less workspace than it asked for, fails):
     every sample's convolutions run through it, each policy's step-2 gradients are the bits
     of `train`'s; convolutions of 1, 2 and 3 spatial axes, grouped, depthwise, dilated,
     strided, with a bias, each with a data gradient, match the CPU's gradients, with and
     without --tf32, and one with asymmetric padding (which cuDNN cannot express) falls back
     to im2col, planned == measured throughout;
 10. the toolkit's real libcudnn beside the fake driver: it loads with every function the backend
     calls, and each convolution's descriptors give the model's output size in it (no GPU, so
     cudnnCreate fails and the convolutions fall back to im2col, which the run shows).
"""
import json
import os
import shutil
import subprocess
import sys

from cuda_emu_test import dims_of, npys, rel  # the same sample dims, .npy loading and relative error

SAMPLES = os.environ.get("CK_FAKE_SAMPLES", "mlp gpt bert resnet gpt4 hardmlp padnet").split()
VARIANTS = [("train", []), ("blocks+offload", ["--checkpoint=blocks", "--offload"])]
SEEDS = [0, 1, 2, 3]
TOL = 1e-5


def losses_rel(got, ref):
    """The largest relative difference between two runs' losses, step by step."""
    return max(abs(a - b) / max(abs(b), 1e-6) for a, b in zip(got, ref))


def tensors_rel(got, ref):
    """The largest relative difference over dumped tensors (rel each); inf when the names differ."""
    return max(rel(got[k], v) for k, v in ref.items()) if set(got) == set(ref) else float("inf")


def run(cmd, env=None, expect=0):
    r = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=600)
    if expect is not None and r.returncode != expect:
        raise SystemExit(f"FAIL: {' '.join(cmd)}: exit {r.returncode} (expected {expect})\n{r.stdout[-3000:]}{r.stderr[-3000:]}")
    return r


def main():
    ckptc, samples, work, fake, builtins, streams = sys.argv[1:7]
    shutil.rmtree(work, ignore_errors=True)  # a fresh kernel cache: part 2 needs the first start to compile
    os.makedirs(work)
    if os.path.dirname(os.path.abspath(builtins)) != os.path.abspath(fake):
        raise SystemExit(f"FAIL: the builtins library {builtins} must sit beside the fake NVRTC in {fake}")
    for var in ("LD_LIBRARY_PATH",):
        if fake in os.environ.get(var, ""):
            raise SystemExit(f"FAIL: {var} holds {fake}: the loader test would prove nothing")
    env = dict(os.environ, CKRT_CUDA_DRIVER=os.path.join(fake, "libcuda.so.1"), CKRT_CUDA_LIBDIR=fake,
               XDG_CACHE_HOME=os.path.join(work, "cache"))
    env.pop("CKRT_FAKE_CUDA_SEED", None)
    bad = 0
    progs = {}
    # 1. ordering, every seed
    for name in SAMPLES:
        for vname, flags in VARIANTS:
            d = os.path.join(work, f"{name}-{vname}")
            run([ckptc, os.path.join(samples, name + ".onnx"), *dims_of(samples, name), *flags, "-o", d])
            run(["make", "-s", "-C", d])
            progs[(name, vname)] = d
            out = os.path.join(d, "grads-cpu")
            rep = os.path.join(d, "report-cpu.json")
            run([os.path.join(d, "trainer"), "--device", "cpu", "--steps", "2", "--dump-grads", out, "--report", rep])
            ref_losses, ref = json.load(open(rep))["losses"], npys(out)
            for seed in SEEDS:
                out = os.path.join(d, f"grads-fake{seed}")
                rep = os.path.join(d, f"report-fake{seed}.json")
                r = run([os.path.join(d, "trainer"), "--device", "cuda", "--steps", "2", "--dump-grads", out, "--report", rep],
                        dict(env, CKRT_FAKE_CUDA_SEED=str(seed)), expect=None)
                if r.returncode != 0:
                    print(f"{name:7s} {vname:15s} seed {seed}: FAIL exit {r.returncode}: {r.stderr.strip()[-400:]}")
                    bad += 1
                    continue
                first = r.stdout.splitlines()[0]
                rg = json.load(open(rep))
                got = npys(out)
                le = losses_rel(rg["losses"], ref_losses)
                ge = max([rel(got[k], v) for k, v in ref.items() if k in got] or [0.0])
                ok = (first.startswith("device: cuda (fake GPU") and le <= TOL and ge <= TOL and set(got) == set(ref)
                      and rg["planned_peak_bytes"] == rg["measured_peak_bytes"])
                bad += not ok
                print(f"{name:7s} {vname:15s} seed {seed}: loss rel {le:.1e} grads rel {ge:.1e} ({len(ref)} tensors) "
                      f"planned {rg['planned_peak_bytes']} measured {rg['measured_peak_bytes']} "
                      f"cache {'hit' if rg['device']['kernel_cache_hit'] else 'compiled'}  {'ok' if ok else 'FAIL'}", flush=True)
    if bad:
        raise SystemExit(f"FAIL: {bad} run(s) of the CUDA backend on the fake driver differ from the CPU or failed")
    cudnn = any(f.startswith("libcudnn.so.") for f in os.listdir(fake))
    if cudnn:
        check_cudnn_samples(progs)
    print(f"ok 1: {len(progs) * len(SEEDS)} runs of the real CUDA backend under adversarial stream orders match the CPU")

    # 2. the kernel cache: seed 0 compiled (first start), later seeds loaded it
    reps = [json.load(open(os.path.join(progs[("mlp", "train")], f"report-fake{s}.json"))) for s in SEEDS] if ("mlp", "train") in progs else []
    if reps and (reps[0]["device"]["kernel_cache_hit"] or not reps[-1]["device"]["kernel_cache_hit"]):
        raise SystemExit("FAIL: the first start should compile and the later ones hit the kernel cache")
    print("ok 2: the first start compiled kernels.cu, later starts loaded it from the cache")

    # 3. the builtins library: beside NVRTC, on no loader path, and compiles worked
    print(f"ok 3: NVRTC's builtins ({os.path.basename(builtins)}) found beside NVRTC; LD_LIBRARY_PATH does not hold {fake}")

    d = progs.get(("mlp", "train")) or next(iter(progs.values()))
    prog = os.path.join(d, "trainer")
    # 4. a GPU NVRTC does not know: PTX for the newest architecture below it; an older one: refused
    new = dict(env, CKRT_FAKE_CUDA_SM="121", CKRT_FAKE_NVRTC_ARCHS="75,80,90", XDG_CACHE_HOME=os.path.join(work, "cache-arch"))
    r = run([prog, "--device", "cuda", "--steps", "1"], new)
    first = r.stdout.splitlines()[0]
    if "compute_90 PTX" not in first:
        raise SystemExit(f"FAIL: an sm_121 GPU with NVRTC up to sm_90 should run compute_90 PTX: {first!r}")
    r2 = run([prog, "--device", "cuda", "--steps", "1"], new)
    if "from the cache" not in r2.stdout:
        raise SystemExit("FAIL: the PTX was not taken from the cache on the second start\n" + r2.stdout)
    old = dict(new, CKRT_FAKE_CUDA_SM="70")
    r = run([prog, "--device", "cuda", "--steps", "1"], old, expect=2)
    if "older than every architecture" not in r.stderr:
        raise SystemExit(f"FAIL: an sm_70 GPU should be refused saying why: {r.stderr!r}")
    print(f"ok 4: {first}; sm_70: {r.stderr.strip()}")

    # 5. a plan that does not fit: the device holds the context (300 MiB in the fake) + the arena,
    # but not cuBLAS's workspace and the margin
    arena = json.load(open(os.path.join(d, "report-cpu.json")))["planned_peak_bytes"]
    small = dict(env, CKRT_FAKE_CUDA_MEM=str((300 << 20) + arena + (64 << 20)))
    r = run([prog, "--device", "cuda", "--steps", "1"], small, expect=2)
    lines = r.stderr.strip().splitlines()
    if len(lines) != 1 or "free of" not in lines[0] or "margin" not in lines[0]:
        raise SystemExit(f"FAIL: a plan over the device's memory should be refused in one line: {r.stderr!r}")
    print("ok 5: " + lines[0])

    # 6. the communication stream and a pending reload
    dd = os.path.join(work, "mlp-dp")
    p = subprocess.run([ckptc, os.path.join(samples, "mlp.onnx"), *dims_of(samples, "mlp"), "--data-parallel", "-o", dd],
                       capture_output=True, text=True)
    if p.returncode != 0 or "ck_g_copy_f32" not in open(os.path.join(dd, "kernels.cu")).read():
        raise SystemExit(f"FAIL: a data-parallel program's kernels.cu with copy_f32: exit {p.returncode}\n{p.stderr}")
    for seed in SEEDS:
        r = run([streams, os.path.join(dd, "kernels.cu")], dict(env, CKRT_FAKE_CUDA_SEED=str(seed)))
    print(f"ok 6 (seeds {SEEDS}): " + r.stdout.strip())

    check_host_memory(ckptc, work, env)
    check_batched_conv(ckptc, work, env, cudnn)
    if cudnn:
        check_conv_geometries(ckptc, work, env)
        check_real_cudnn(work, env, fake, progs)
    return 0


def check_real_cudnn(work, env, fake, progs):
    """10. the toolkit's own libcudnn, beside the fake driver: it loads, has every function the
    backend calls and the headers' major version; cudnnCreate fails without a GPU, so convolutions
    fall back to im2col, but first every convolution's descriptors are set in the real library and
    its output size (cudnnGetConvolutionNdForwardOutputDim) must be the model's."""
    name = next(f for f in os.listdir(fake) if f.startswith("libcudnn.so."))
    real = os.path.join("/usr/local/cuda/lib64", name)
    if not os.path.exists(real) or os.path.exists("/proc/driver/nvidia/version"):
        print(f"ok 10: skipped ({'no ' + real if not os.path.exists(real) else 'a real driver is loaded: cudnnCreate would work'})")
        return
    r = run([os.path.join(work, "conv-2d", "trainer"), "--device", "cuda", "--steps", "1"],
            dict(env, CKRT_CUDNN=os.path.join(work, "no-such-libcudnn.so")), expect=2)
    if "CKRT_CUDNN=" not in r.stderr or "cannot load it" not in r.stderr:
        raise SystemExit(f"FAIL 10: CKRT_CUDNN naming a missing library should stop the program saying so: {r.stderr!r}")
    menv = dict(env, CKRT_CUDNN=real)  # the fake driver, cuBLAS and NVRTC; the real cuDNN
    dirs = [progs[k] for k in progs if k[0] == "resnet"] + [os.path.join(work, f"conv-{c}") for c in ("2d", "dw", "1d", "3d")]
    for d in dirs:
        rep = os.path.join(d, "report-realcudnn.json")
        r = run([os.path.join(d, "trainer"), "--device", "cuda", "--steps", "1", "--report", rep], menv, expect=None)
        first = (r.stdout.splitlines() or [""])[0]
        cu, im = conv_calls(rep) if r.returncode == 0 else (0, 0)
        if r.returncode != 0 or "no cuDNN (cudnnCreate failed" not in first or cu or not im or "warning: cuDNN" in r.stderr:
            raise SystemExit(f"FAIL 10: {d} with CKRT_CUDNN={real}: exit {r.returncode}, {first!r}, {cu} cuDNN / {im} im2col calls\n"
                             f"{r.stderr[-1500:]}")
    said = first.split("convolutions: ")[-1]
    print(f"ok 10: {real} loads with every function the backend calls; {len(dirs)} programs' convolution descriptors "
          f"give the models' output sizes in it; the device line says: {said[:-1] if said.endswith(')') else said}")


def conv_calls(rep):
    dev = json.load(open(rep))["device"]
    return dev["conv_cudnn_calls"], dev["conv_im2col_calls"]


def check_cudnn_samples(progs):
    """9a. the samples' convolutions went through cuDNN, and its policies give the same bits."""
    problems, seen = [], 0
    for (name, vname), d in progs.items():
        cu, im = conv_calls(os.path.join(d, "report-fake0.json"))
        if cu + im == 0:
            continue
        seen += 1
        if im:
            problems.append(f"{name} {vname}: {im} convolution calls by im2col ({cu} through cuDNN)")
        if vname != "train":
            ref, got = npys(os.path.join(progs[(name, "train")], "grads-fake0")), npys(os.path.join(d, "grads-fake0"))
            diff = [k for k in ref if k not in got or not (ref[k] == got[k]).all()]
            if diff:
                problems.append(f"{name} {vname}: step-2 gradients differ from train's in {len(diff)} tensors ({diff[:3]})")
    if problems or not seen:
        raise SystemExit("FAIL 9a: " + ("; ".join(problems) or "no sample has a convolution"))
    print(f"ok 9a: {seen} sample programs convolve through the (fake) cuDNN only; each policy's gradients are train's bits")


def conv_zoo(path, case):
    """One of check_conv_geometries' models: a few convolutions, then GlobalAveragePool -> logits (N, 8)."""
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    rng = np.random.default_rng(2)
    inits, nodes = [], []

    def conv(x, y, cin, cout, k, **attrs):
        w = f"w_{y}"
        g = attrs.get("group", 1)
        inits.append(numpy_helper.from_array((rng.standard_normal((cout, cin // g, *k)) / np.sqrt(cin // g * np.prod(k))).astype(np.float32), w))
        ins = [x, w]
        if attrs.pop("bias", False):
            inits.append(numpy_helper.from_array((rng.standard_normal(cout) / 10).astype(np.float32), f"b_{y}"))
            ins.append(f"b_{y}")
        nodes.append(helper.make_node("Conv", ins, [y], name=f"/{y}/Conv", kernel_shape=list(k), **attrs))

    # each starts with a pointwise convolution, so that the ones after it have a data gradient too
    if case == "2d":  # grouped with a bias, dilated and strided, then asymmetric padding (im2col)
        shape = [4, 8, 9, 9]
        conv("x", "p0", 8, 8, (1, 1))
        conv("p0", "c0", 8, 8, (3, 3), pads=[1, 1, 1, 1], group=2, bias=True)
        nodes.append(helper.make_node("Relu", ["c0"], ["r0"], name="/r0/Relu"))
        conv("r0", "c1", 8, 8, (3, 3), pads=[2, 2, 2, 2], dilations=[2, 2], strides=[2, 2])
        conv("c1", "c2", 8, 8, (2, 2), pads=[0, 0, 1, 1])
        last = "c2"
    elif case == "dw":  # depthwise (group = channels), strided, then a pointwise one (MobileNet's pair)
        shape = [4, 8, 9, 9]
        conv("x", "p0", 8, 8, (1, 1))
        conv("p0", "c0", 8, 8, (3, 3), pads=[1, 1, 1, 1], strides=[2, 2], group=8)
        nodes.append(helper.make_node("Relu", ["c0"], ["r0"], name="/r0/Relu"))
        conv("r0", "c1", 8, 8, (1, 1), bias=True)
        last = "c1"
    elif case == "1d":
        shape = [4, 6, 17]
        conv("x", "p0", 6, 6, (1,))
        conv("p0", "c0", 6, 8, (5,), pads=[2, 2], strides=[2], bias=True)
        last = "c0"
    else:
        shape = [2, 4, 5, 6, 7]
        conv("x", "p0", 4, 4, (1, 1, 1))
        conv("p0", "c0", 4, 8, (3, 3, 3), pads=[1, 1, 1, 1, 1, 1], group=2, bias=True)
        last = "c0"
    nodes.append(helper.make_node("GlobalAveragePool", [last], ["p"], name="/pool/GlobalAveragePool"))
    nodes.append(helper.make_node("Flatten", ["p"], ["logits"], name="/Flatten"))
    g = helper.make_graph(nodes, f"conv_{case}", [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
                          [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [shape[0], 8])], inits)
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), path)


def check_conv_geometries(ckptc, work, env):
    """9b. convolution geometries through the (fake) cuDNN, and the one it cannot take."""
    said = []
    for case in ("2d", "dw", "1d", "3d"):
        model = os.path.join(work, f"conv_{case}.onnx")
        conv_zoo(model, case)
        d = os.path.join(work, f"conv-{case}")
        run([ckptc, model, "--optimizer=sgd", "-o", d])
        run(["make", "-s", "-C", d])
        reps, grads = {}, {}
        # --tf32: the fake's tensor-op algorithm (its arithmetic is the same double loop)
        for dev, e, flags in (("cpu", None, []), ("cuda", env, []), ("cuda-tf32", env, ["--tf32"])):
            rep = os.path.join(d, f"report-{dev}.json")
            run([os.path.join(d, "trainer"), "--device", dev.split("-")[0], "--steps", "2", "--report", rep, "--dump-grads",
                 os.path.join(d, f"grads-{dev}"), *flags], e)
            reps[dev], grads[dev] = json.load(open(rep)), npys(os.path.join(d, f"grads-{dev}"))
        for dev in ("cuda", "cuda-tf32"):
            cu, im = conv_calls(os.path.join(d, f"report-{dev}.json"))
            le, ge = losses_rel(reps[dev]["losses"], reps["cpu"]["losses"]), tensors_rel(grads[dev], grads["cpu"])
            want_im = 6 if case == "2d" else 0  # the asymmetric one: forward, data and weight gradient, 2 steps
            rg = reps[dev]
            if le > TOL or ge > TOL or cu == 0 or im != want_im or rg["planned_peak_bytes"] != rg["measured_peak_bytes"]:
                raise SystemExit(f"FAIL 9b: conv {case} ({dev}): losses {le:.1e}, step-2 gradients {ge:.1e} from the CPU's; {cu} cuDNN "
                                 f"calls, {im} im2col (expected {want_im}); planned {rg['planned_peak_bytes']} measured "
                                 f"{rg['measured_peak_bytes']}")
        said.append(f"{case}: {cu} cuDNN + {im} im2col calls, within {max(le, ge):.1e}")
    print("ok 9b: " + "; ".join(said))


def big_mlp(path, batch, width, layers):
    """x (batch, width) -> layers x (MatMul + Tanh) -> logits: weights in the ONNX file."""
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    rng = np.random.default_rng(0)
    nodes, inits, x = [], [], "x"
    for i in range(layers):
        w = (rng.standard_normal((width, width)) / np.sqrt(width)).astype(np.float32)
        inits.append(numpy_helper.from_array(w, f"w{i}"))
        nodes.append(helper.make_node("MatMul", [x, f"w{i}"], [f"h{i}"], name=f"/layers.{i}/MatMul"))
        nodes.append(helper.make_node("Tanh", [f"h{i}"], [f"a{i}"], name=f"/layers.{i}/Tanh"))
        x = f"a{i}"
    nodes[-1].output[0] = "logits"
    g = helper.make_graph(nodes, "big_mlp", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [batch, width])],
                          [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [batch, width])], inits)
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), path)


def small_convnet(path, batch):
    """x (batch, 256, 4, 4) -> Conv 3x3 stride 2 -> Relu -> Conv 3x3 (both 2x2 outputs: the CPU takes
    the images side by side, ckrt_conv_batch.h) -> GlobalAveragePool -> logits (batch, 128)."""
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    rng = np.random.default_rng(1)
    w0 = (rng.standard_normal((128, 256, 3, 3)) / 48).astype(np.float32)
    w1 = (rng.standard_normal((128, 128, 3, 3)) / 34).astype(np.float32)
    b1 = (rng.standard_normal(128) / 10).astype(np.float32)
    nodes = [helper.make_node("Conv", ["x", "w0"], ["h0"], name="/conv0/Conv", pads=[1, 1, 1, 1], strides=[2, 2]),
             helper.make_node("Relu", ["h0"], ["a0"], name="/relu0/Relu"),
             helper.make_node("Conv", ["a0", "w1", "b1"], ["h1"], name="/conv1/Conv", pads=[1, 1, 1, 1]),
             helper.make_node("GlobalAveragePool", ["h1"], ["p"], name="/pool/GlobalAveragePool"),
             helper.make_node("Flatten", ["p"], ["logits"], name="/Flatten")]
    inits = [numpy_helper.from_array(w0, "w0"), numpy_helper.from_array(w1, "w1"), numpy_helper.from_array(b1, "b1")]
    g = helper.make_graph(nodes, "small_convnet", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [batch, 256, 4, 4])],
                          [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [batch, 128])], inits)
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), path)


def check_batched_conv(ckptc, work, env, cudnn):
    """8. convolutions whose images the CPU batches (a larger planned workspace; the GPU path runs one
    image at a time and clears the rest of it) give the CPU's results, planned == measured on both
    devices. (In this model the workspace is never the arena's top, so the clearing itself is not
    what makes the peaks equal here.)"""
    model = os.path.join(work, "small_convnet.onnx")
    small_convnet(model, batch=16)
    d = os.path.join(work, "small-convnet")
    run([ckptc, model, "--optimizer=sgd", "-o", d])  # SGD: AdamW's g / sqrt(v) would magnify rounding in tiny gradients
    run(["make", "-s", "-C", d])
    prog = os.path.join(d, "trainer")
    reps = {}
    runs = [("cpu", None), ("cuda", dict(env, CKRT_CUDNN="0"))] + ([("cuda-cudnn", env)] if cudnn else [])
    for dev, e in runs:
        rep = os.path.join(d, f"report-{dev}.json")
        run([prog, "--device", dev.split("-")[0], "--steps", "2", "--report", rep, "--dump-params", os.path.join(d, f"params-{dev}")], e)
        reps[dev] = json.load(open(rep))
    problems, said = [], []
    for dev, rg in reps.items():
        if rg["measured_peak_bytes"] != rg["planned_peak_bytes"]:
            problems.append(f"{dev}: measured {rg['measured_peak_bytes']} != planned {rg['planned_peak_bytes']}")
    ref = npys(os.path.join(d, "params-cpu"))
    for dev in reps:
        if dev == "cpu":
            continue
        cu, im = conv_calls(os.path.join(d, f"report-{dev}.json"))
        if (cu > 0) != (dev == "cuda-cudnn") or (im > 0) != (dev == "cuda"):
            problems.append(f"{dev}: {cu} convolution calls through cuDNN, {im} by im2col")
        le, pe = losses_rel(reps[dev]["losses"], reps["cpu"]["losses"]), tensors_rel(npys(os.path.join(d, f"params-{dev}")), ref)
        if le > TOL or pe > TOL:
            problems.append(f"{dev}: losses differ by {le:.1e}, parameters by {pe:.1e} (relative)")
        said.append(f"{dev}: losses within {le:.1e}, parameters within {pe:.1e}")
    if problems:
        raise SystemExit("FAIL 8: " + "; ".join(problems))
    print(f"ok 8: batched convolutions: planned == measured on every device ({reps['cpu']['planned_peak_bytes']} bytes); "
          + "; ".join(said) + " of the CPU's")


def check_host_memory(ckptc, work, env):
    model = os.path.join(work, "big_mlp.onnx")
    big_mlp(model, batch=2048, width=1024, layers=4)
    d = os.path.join(work, "big-mlp")
    # SGD: AdamW's g / sqrt(v) magnifies the rounding differences between the fake cuBLAS
    # (OpenBLAS) and the CPU backend's GEMM (oneDNN) in tiny gradients (1.5e-4 after 2 steps)
    run([ckptc, model, "--optimizer=sgd", "-o", d])
    run(["make", "-s", "-C", d])
    prog = os.path.join(d, "trainer")
    cpu_rep = os.path.join(d, "report-cpu.json")
    run([prog, "--device", "cpu", "--steps", "2", "--report", cpu_rep, "--dump-params", os.path.join(d, "params-cpu")])
    run([prog, "--device", "cuda", "--steps", "1"], env)  # compiles kernels.cu (g++ would count in the RSS)
    stats = os.path.join(d, "fake-stats.json")
    rep = os.path.join(d, "report-fake.json")
    cmd = [prog, "--device", "cuda", "--steps", "2", "--report", rep, "--dump-params", os.path.join(d, "params-fake")]
    pid = os.fork()
    if pid == 0:  # the trainer alone, so that wait4 gives its own peak RSS
        fd = os.open(os.path.join(d, "fake-run.log"), os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
        os.dup2(fd, 1)
        os.dup2(fd, 2)
        os.execve(prog, cmd, dict(env, CKRT_FAKE_CUDA_STATS=stats))
    _, status, ru = os.wait4(pid, 0)
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"FAIL 7: the big MLP on the fake GPU exited {os.waitstatus_to_exitcode(status)}")
    rss = ru.ru_maxrss * 1024
    fs, rg, rc = json.load(open(stats)), json.load(open(rep)), json.load(open(cpu_rep))
    arena, staging = rg["planned_peak_bytes"], rg["device"]["host_staging_bytes"]
    largest = max(os.path.getsize(os.path.join(d, "params-fake", f)) for f in os.listdir(os.path.join(d, "params-fake")))
    host = rss - fs["device_peak_bytes"]
    problems = []
    if rg["measured_peak_bytes"] != arena:
        problems.append(f"measured {rg['measured_peak_bytes']} != planned {arena}")
    if rg["losses"] != rc["losses"]:
        problems.append(f"losses {rg['losses']} vs the CPU's {rc['losses']}")
    pf, pc = npys(os.path.join(d, "params-fake")), npys(os.path.join(d, "params-cpu"))
    if pf.keys() != pc.keys():
        problems.append("different parameter files")
    elif (worst := tensors_rel(pf, pc)) > TOL:
        problems.append(f"parameters differ from the CPU's by {worst:.2e}")
    if staging > 16 << 20 or fs["pinned_peak_bytes"] > staging:
        problems.append(f"pinned host memory {fs['pinned_peak_bytes']} (staging {staging}): more than the staging")
    if rg["host_readback_peak_bytes"] > largest + 128:
        problems.append(f"read back {rg['host_readback_peak_bytes']} bytes at once, the largest tensor is {largest}")
    if arena < 8 * (staging + largest):
        problems.append(f"the arena ({arena}) is too small for this check to mean anything")
    if host > arena // 2:
        problems.append(f"peak RSS {rss} less device memory {fs['device_peak_bytes']} = {host} bytes of host memory, "
                        f"over half the arena ({arena}): a host copy of the arena?")
    if problems:
        raise SystemExit("FAIL 7: " + "; ".join(problems))
    print(f"ok 7: arena {arena / 2**20:.1f} MiB on the device; host: pinned {fs['pinned_peak_bytes'] / 2**20:.1f} MiB (staging), "
          f"largest read-back {rg['host_readback_peak_bytes'] / 2**20:.1f} MiB, peak RSS {rss / 2**20:.1f} MiB of which "
          f"{fs['device_peak_bytes'] / 2**20:.1f} MiB is the fake's device memory: {host / 2**20:.1f} MiB on the host")


if __name__ == "__main__":
    sys.exit(main())
