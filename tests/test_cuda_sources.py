"""Every CUDA source compiles, without a GPU; its kernels compute the right sums.

1. NVRTC (through CuPy's low-level binding and the ``nvidia-cuda-nvrtc-cu12``
   wheel of the ``test`` extra) compiles each ``nyhopt/ops/_cuda/*.cu`` with
   every template instantiation the run time asks for, so a syntax or
   template error fails CI.  Where NVRTC cannot be loaded, ``nvcc`` is used;
   with neither, the compile tests skip and say why, and
   ``test_nvrtc_is_usable`` fails (the ``test`` extra installs NVRTC, so its
   absence is a broken installation; set ``NYHOPT_ALLOW_NO_NVRTC=1`` to accept
   it).
2. The kernels are also *executed* on the host: the same source is compiled
   as C++20 with a small emulation of the CUDA built-ins used
   (``threadIdx``/``blockIdx``, ``__syncthreads``, ``__shfl_xor_sync``,
   ``atomicAdd``; one ``std::thread`` per CUDA thread of a block, blocks one
   after another), and its results are compared with the NumPy reference.
   This checks indexing, clamping, reductions and grid striding without a
   GPU (it needs ``g++``; skipped otherwise).
3. The launch code of ``nyhopt.ops._cupy`` (arguments, their types, grids,
   blocks, post-processing) runs on NumPy arrays with the compiled kernels
   replaced by the emulated ones.  ``test_ops_gpu.py`` repeats the parity
   checks on a real GPU.
"""
from __future__ import annotations

import os
import shutil
import subprocess

import numpy as np
import pytest

import nyhopt as nh
from nyhopt.ops import _cuda_compile as cc
from nyhopt.ops import _reference

# Every dtype for the newest architecture, and an older one once.
TARGETS = [("float32", "compute_90"), ("float64", "compute_90"), ("float64", "compute_80")]


# ---------------------------------------------------------------------- compilers
def _nvrtc_or_reason():
    try:
        cc.load_nvrtc()
        return None
    except Exception as exc:  # pragma: no cover - depends on the installation
        return str(exc)


NVRTC_MISSING = _nvrtc_or_reason()
NVCC = shutil.which("nvcc")


def _with_instantiations(code, names):
    """Append host-side references that force nvcc to instantiate ``names``."""
    refs = ", ".join(f"(void*)&{name}" for name in names)
    return code + f"\nstatic void* const nyhopt_instantiate[] = {{{refs}}};\n"


def compile_source(code, names, arch):
    """Compile with NVRTC, else nvcc; raise ``cc.CompileError`` on bad code."""
    if NVRTC_MISSING is None:
        return cc.nvrtc_compile(code, names, arch=arch)
    if NVCC is None:
        pytest.skip(f"neither NVRTC ({NVRTC_MISSING}) nor nvcc is available")
    from cupy.cuda import compiler  # pragma: no cover - fallback only

    try:  # pragma: no cover
        binary = compiler.compile_using_nvcc(_with_instantiations(code, names), options=cc.OPTIONS, arch=arch.split("_")[1])
        return binary, None
    except compiler.CompileException as exc:  # pragma: no cover
        raise cc.CompileError(str(exc)) from None


def test_nvrtc_is_usable():
    """CI must compile with NVRTC: a missing library is a failure, not a skip."""
    if NVRTC_MISSING is not None and os.environ.get("NYHOPT_ALLOW_NO_NVRTC") != "1":
        pytest.fail(f"NVRTC could not be loaded: {NVRTC_MISSING}")


def test_every_source_is_known():
    assert cc.source_files() == sorted(cc.SOURCES)


@pytest.mark.parametrize("dtype,arch", TARGETS)
@pytest.mark.parametrize("source", sorted(cc.SOURCES))
def test_source_compiles(source, dtype, arch):
    names = cc.name_expressions(source, dtype)
    ptx, lowered = compile_source(cc.read_source(source), names, arch)
    assert len(ptx) > 0
    if lowered is not None:  # NVRTC: every instantiation exists
        assert set(lowered) == set(names)
        assert all(name.startswith("_Z") for name in lowered.values())


def test_sources_are_self_contained():
    for source in cc.SOURCES:
        code = cc.read_source(source)
        assert "#include \"" not in code
        assert "namespace nh" in code


def test_broken_source_fails_to_compile():
    code = cc.read_source("kernel_block").replace("out[i * m + j] =", "out[i * m + j] = = ", 1)
    assert code != cc.read_source("kernel_block")
    with pytest.raises(cc.CompileError, match="error"):
        compile_source(code, cc.name_expressions("kernel_block", "float64"), "compute_90")


def test_bad_instantiation_fails_to_compile():
    with pytest.raises(cc.CompileError):
        compile_source(cc.read_source("kernel_block"), ["nh_kernel_block<double, 7>"], "compute_90")


def test_names_and_errors():
    assert cc.kernel_name("adjoint", np.float32, "matern52", lowrank=True) == "nh_adjoint<float, 3, true>"
    assert cc.kernel_name("kernel_block", "float64", "laplacian") == "nh_kernel_block<double, 1>"
    with pytest.raises(TypeError, match="float16"):
        cc.kernel_name("kernel_block", np.float16, "gaussian")
    with pytest.raises(ValueError, match="kind"):
        cc.kernel_name("kernel_block", np.float64, "cauchy")
    with pytest.raises(ValueError, match="unknown CUDA source"):
        cc.read_source("nope")


# --------------------------------------------------------------- host emulation
EMULATION = r"""
// Minimal host emulation of the CUDA built-ins used by nyhopt's kernels.
#include <atomic>
#include <barrier>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

struct dim3 {
    unsigned x, y, z;
    dim3(unsigned x_ = 1, unsigned y_ = 1, unsigned z_ = 1) : x(x_), y(y_), z(z_) {}
};
static thread_local dim3 threadIdx, blockIdx;
static thread_local int emu_tid;
static dim3 blockDim, gridDim;
static std::barrier<>* emu_block_barrier;
static std::vector<std::unique_ptr<std::barrier<>>> emu_warp_barriers;
static double emu_warp_buf[64][32];
double shared[1 << 16];

#define __global__
#define __device__
#define __forceinline__ inline
#define __restrict__ __restrict
#define __shared__

inline void __syncthreads() { emu_block_barrier->arrive_and_wait(); }
inline double __shfl_xor_sync(unsigned, double v, int offset) {
    const int warp = emu_tid / 32, lane = emu_tid % 32;
    emu_warp_buf[warp][lane] = v;
    emu_warp_barriers[warp]->arrive_and_wait();
    const double r = emu_warp_buf[warp][lane ^ offset];
    emu_warp_barriers[warp]->arrive_and_wait();
    return r;
}
inline double atomicAdd(double* p, double v) { return std::atomic_ref<double>(*p).fetch_add(v); }

// CONCURRENT = false runs the threads of a block one after another in this
// thread: only for kernels without __syncthreads and warp shuffles.
template <bool CONCURRENT = true, typename F>
void launch(dim3 grid, dim3 block, F kernel) {
    gridDim = grid;
    blockDim = block;
    const int nt = block.x * block.y * block.z;
    for (unsigned bz = 0; bz < grid.z; ++bz)
        for (unsigned by = 0; by < grid.y; ++by)
            for (unsigned bx = 0; bx < grid.x; ++bx) {
                if (!CONCURRENT) {
                    blockIdx = dim3(bx, by, bz);
                    for (int t = 0; t < nt; ++t) {
                        threadIdx = dim3(t % block.x, (t / block.x) % block.y, t / (block.x * block.y));
                        emu_tid = t;
                        kernel();
                    }
                    continue;
                }
                std::barrier<> bar(nt);
                emu_block_barrier = &bar;
                emu_warp_barriers.clear();
                for (int w = 0; w < (nt + 31) / 32; ++w)
                    emu_warp_barriers.emplace_back(new std::barrier<>(std::min(32, nt - 32 * w)));
                std::vector<std::thread> threads;
                for (int t = 0; t < nt; ++t)
                    threads.emplace_back([=] {
                        blockIdx = dim3(bx, by, bz);
                        threadIdx = dim3(t % block.x, (t / block.x) % block.y, t / (block.x * block.y));
                        emu_tid = t;
                        kernel();
                    });
                for (auto& th : threads) th.join();
            }
}
"""

# Reading the inputs and writing the outputs of an emulated launch (shared with test_cuda_fused.py).
HARNESS_IO = r"""
template <typename T>
std::vector<T> read(FILE* f, long long count) {
    std::vector<T> v(count > 0 ? count : 1);
    if (count > 0 && fread(v.data(), sizeof(T), count, f) != (size_t)count) { fprintf(stderr, "short read\n"); exit(3); }
    return v;
}
template <typename T>
void write(FILE* f, const std::vector<T>& v) { fwrite(v.data(), sizeof(T), v.size(), f); }
"""

HARNESS = HARNESS_IO + r"""

template <typename T, int KIND>
void run_block(FILE* in, FILE* out) {
    auto h = read<int>(in, 5);  // grid.x, grid.y, b, m, d
    const int b = h[2], m = h[3], d = h[4];
    auto Xs = read<T>(in, (long long)b * d);
    auto Zt = read<T>(in, (long long)d * m);
    std::vector<T> o((size_t)b * m, T(NAN));
    launch<false>(dim3(h[0], h[1]), dim3(32, 8), [&] { nh_kernel_block<T, KIND>(Xs.data(), Zt.data(), o.data(), b, m, d); });
    write(out, o);
}

template <typename T, int KIND, int OUT>
void run_dot(FILE* in, FILE* out) {
    auto h = read<int>(in, 4);  // grid.x, grid.y, b, m
    const int b = h[2], m = h[3];
    auto g = read<T>(in, (long long)b * m);
    auto xn = read<T>(in, b);
    auto zn = read<T>(in, m);
    if constexpr (OUT == 0) {
        launch<false>(dim3(h[0], h[1]), dim3(32, 8), [&] { nh_kernel_dot<T, KIND, OUT>(g.data(), xn.data(), zn.data(), g.data(), b, m); });
        write(out, g);  // in place
    } else {
        std::vector<unsigned short> o((size_t)b * 2 * m, 0xFFFF);
        launch<false>(dim3(h[0], h[1]), dim3(32, 8), [&] { nh_kernel_dot<T, KIND, OUT>(g.data(), xn.data(), zn.data(), o.data(), b, m); });
        write(out, o);
    }
}

template <typename T, int KIND>
void run_adjoint_dot(FILE* in, FILE* out) {
    auto h = read<int>(in, 4);  // grid.x, grid.y, b, m
    const int b = h[2], m = h[3];
    auto g = read<T>(in, (long long)b * m);
    auto c = read<T>(in, (long long)b * m);
    auto xn = read<T>(in, b);
    auto zn = read<T>(in, m);
    std::vector<double> W((size_t)b * m, NAN);
    launch<false>(dim3(h[0], h[1]), dim3(32, 8), [&] { nh_adjoint_dot<T, KIND>(g.data(), c.data(), xn.data(), zn.data(), W.data(), b, m); });
    write(out, W);
}

template <typename T, int KIND, int FROM>
void run_digits(FILE* in, FILE* out) {
    auto h = read<int>(in, 6);  // grid.x, grid.y, b, m, ld, rows of a digit plane
    const int b = h[2], m = h[3], ld = h[4], rows = h[5];
    auto kt = read<T>(in, (long long)m * b);
    auto xn = read<T>(in, b);
    auto zn = read<T>(in, m);
    const long long plane = (long long)rows * ld;
    std::vector<signed char> dg((size_t)(3 * plane), (signed char)99);
    launch<false>(dim3(h[0], h[1]), dim3(32, 8), [&] {
        nh_kernel_digits<T, KIND, FROM>(kt.data(), xn.data(), zn.data(), dg.data(), b, m, ld, plane);
    });
    write(out, kt);
    write(out, dg);
}

template <typename T, int KIND, bool LOWRANK>
void run_adjoint(FILE* in, FILE* out) {
    auto h = read<int>(in, 7);  // grid.x, grid.y, n, m, d, r, wanted
    const int n = h[2], m = h[3], d = h[4], r = h[5], wanted = h[6];
    auto Xs = read<T>(in, (long long)n * d);
    auto Zt = read<T>(in, (long long)d * m);
    auto C = read<T>(in, LOWRANK ? (long long)n * r : (long long)n * m);
    auto Qt = read<T>(in, LOWRANK ? (long long)r * m : 0);
    std::vector<double> gz((size_t)d * m, 0.0), ge(d, 0.0), gx((size_t)n * d, 0.0);
    launch(dim3(h[0], h[1]), dim3(32, 8), [&] {
        nh_adjoint<T, KIND, LOWRANK>(Xs.data(), Zt.data(), C.data(), Qt.data(), n, m, d, r, wanted,
                                     gz.data(), ge.data(), gx.data());
    });
    write(out, gz);
    write(out, ge);
    write(out, gx);
}

"""

# The harness's entry point: runs the function named by argv[1] on the files argv[2] -> argv[3].
DISPATCH_MAIN = r"""
int main(int argc, char** argv) {
    std::map<std::string, std::function<void(FILE*, FILE*)>> table = {
        TABLE
    };
    FILE* in = fopen(argv[2], "rb");
    FILE* out = fopen(argv[3], "wb");
    table.at(argv[1])(in, out);
    fclose(in);
    fclose(out);
    return 0;
}
"""

_RUNNERS = {"kernel_block": "run_block", "adjoint": "run_adjoint", "kernel_dot": "run_dot",
            "adjoint_dot": "run_adjoint_dot", "kernel_digits": "run_digits"}


_BUILT = {}  # the emulator, built once per run (test_host_cupy.py uses it too)


@pytest.fixture(scope="module")
def emulator(tmp_path_factory):
    """Path of the host build of every kernel instantiation (every source, dtype, kind and form)."""
    gxx = shutil.which("g++")
    if gxx is None:
        pytest.skip("g++ not found: the host emulation of the CUDA kernels needs a C++20 compiler")
    if "exe" in _BUILT:
        return _BUILT["exe"]
    rows = []
    for source in _RUNNERS:
        stem = cc.SOURCES[source][0].split("<")[0]
        for name in cc.name_expressions(source, "float64") + cc.name_expressions(source, "float32"):
            rows.append(f'{{"{name}", {_RUNNERS[source] + name[len(stem):]}}},')
    code = EMULATION + cc.read_source(*_RUNNERS)
    code += (HARNESS + DISPATCH_MAIN).replace("TABLE", "\n        ".join(rows))
    folder = tmp_path_factory.mktemp("cuda_emulation")
    src, exe = folder / "emulate.cpp", folder / "emulate"
    src.write_text(code)
    proc = subprocess.run([gxx, "-std=c++20", "-O1", "-pthread", "-w", str(src), "-o", str(exe)], capture_output=True, text=True)
    if proc.returncode != 0 and "barrier" in proc.stderr and "No such file" in proc.stderr:
        pytest.skip("the C++ standard library has no <barrier> (C++20)")
    assert proc.returncode == 0, proc.stderr[-4000:]
    _BUILT["exe"] = exe
    return exe


def _run(exe, name, header, arrays, tmp_path):
    inp, out = tmp_path / "in.bin", tmp_path / "out.bin"
    with open(inp, "wb") as fh:
        fh.write(np.asarray(header, dtype=np.int32).tobytes())
        for a in arrays:
            fh.write(np.ascontiguousarray(a).tobytes())
    subprocess.run([str(exe), name, str(inp), str(out)], check=True, timeout=120)
    return np.fromfile(out, dtype=np.uint8)


def _problem(kind, dtype, n=45, m=37, d=3, r=2, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, d)).astype(dtype)
    Z = rng.standard_normal((m, d)).astype(dtype)
    Z[4] = X[7]  # a coincident pair: the Laplacian's derivative is 0 there
    kernel = nh.make_kernel(kind, np.array([0.8, 1.3, 2.1])[:d])
    ell = kernel.lengthscale_array(d)
    Xs = np.ascontiguousarray(_reference.scaled(X, ell, np))
    Zt = np.ascontiguousarray(_reference.scaled(Z, ell, np).T)
    P = rng.standard_normal((n, r)).astype(dtype)
    Q = rng.standard_normal((m, r)).astype(dtype)
    G = rng.standard_normal((n, m)).astype(dtype)
    return kernel, X, Z, ell, Xs, Zt, P, Q, G


KINDS = ["gaussian", "laplacian", "matern32", "matern52"]


def _tol(dtype):
    return 1e-12 if dtype == "float64" else 2e-5


@pytest.mark.parametrize("grid_y", [1, 2])
@pytest.mark.parametrize("dtype,kind", [("float64", k) for k in KINDS] + [("float32", "laplacian")])
def test_emulated_kernel_block(emulator, tmp_path, kind, dtype, grid_y):
    kernel, X, Z, ell, Xs, Zt, *_ = _problem(kind, dtype)
    n, m = X.shape[0], Z.shape[0]
    name = cc.kernel_name("kernel_block", dtype, kind)
    raw = _run(emulator, name, [(m + 31) // 32, grid_y, n, m, X.shape[1]], [Xs, Zt], tmp_path)
    K = raw.view(dtype).reshape(n, m)
    ref = _reference.kernel_matrix(kernel, X.astype(np.float64), Z.astype(np.float64), ell, np)
    np.testing.assert_allclose(K, ref, rtol=_tol(dtype), atol=_tol(dtype))
    assert K[7, 4] == 1.0  # coincident points: exactly phi(0)


def _dot_inputs(X, Z, ell, dtype):
    """The distance product and squared norms that ``_cupy`` gives ``nh_kernel_dot``."""
    Xs = _reference.scaled(X, ell, np).astype(dtype)
    Zs = _reference.scaled(Z, ell, np).astype(dtype)
    return np.ascontiguousarray(Xs @ Zs.T), (Xs * Xs).sum(1), (Zs * Zs).sum(1)


@pytest.mark.parametrize("grid_y", [1, 2])
@pytest.mark.parametrize("dtype,kind", [("float64", k) for k in KINDS] + [("float32", k) for k in KINDS])
def test_emulated_kernel_dot(emulator, tmp_path, kind, dtype, grid_y):
    """``phi(xn + zn - 2 g)`` in place, against the reference (GEMM form) on the same numbers."""
    kernel, X, Z, ell, *_ = _problem(kind, dtype)
    n, m = X.shape[0], Z.shape[0]
    g, xn, zn = _dot_inputs(X, Z, ell, dtype)
    raw = _run(emulator, cc.kernel_name("kernel_dot", dtype, kind, 0), [(m + 31) // 32, grid_y, n, m], [g, xn, zn], tmp_path)
    K = raw.view(dtype).reshape(n, m)
    s = np.maximum(xn.astype(np.float64)[:, None] + zn.astype(np.float64)[None, :] - 2 * g.astype(np.float64), 0)
    np.testing.assert_allclose(K, kernel.profile(s, np), rtol=10 * _tol(dtype), atol=_tol(dtype))
    ref = _reference.kernel_matrix(kernel, X.astype(np.float64), Z.astype(np.float64), ell, np)
    atol = 1e-7 if dtype == "float64" else 2e-3  # the GEMM form near coincident points (sqrt for Matern)
    np.testing.assert_allclose(K, ref, rtol=0, atol=atol)


@pytest.mark.parametrize("kind", KINDS)
def test_emulated_kernel_dot_half_parts(emulator, tmp_path, kind):
    """The float16 ``[hi | lo]`` output: ``hi = fl16(k)``, ``hi + lo / 2048`` holds ``k`` to ~2^-22."""
    kernel, X, Z, ell, *_ = _problem(kind, "float32", n=61, m=45)
    n, m = X.shape[0], Z.shape[0]
    g, xn, zn = _dot_inputs(X, Z, ell, "float32")
    raw = _run(emulator, cc.kernel_name("kernel_dot", "float32", kind, 1), [2, 3, n, m], [g, xn, zn], tmp_path)
    HL = raw.view(np.float16).reshape(n, 2 * m)
    raw32 = _run(emulator, cc.kernel_name("kernel_dot", "float32", kind, 0), [2, 3, n, m], [g, xn, zn], tmp_path)
    K = raw32.view(np.float32).reshape(n, m)
    from nyhopt.ops.gram16 import split_block

    np.testing.assert_array_equal(HL.view(np.uint16), split_block(K, np).view(np.uint16))
    back = HL[:, :m].astype(np.float64) + HL[:, m:].astype(np.float64) / 2048
    np.testing.assert_allclose(back, K, rtol=2.0**-21, atol=2.0**-36)
    assert np.abs(HL[:, :m].astype(np.float64) - K).max() > 1e-5  # float16 alone would not


def _digits_run(emulator, tmp_path, name, kt, xn, zn, b, m, ld, rows, grid_y):
    raw = _run(emulator, name, [(ld + 31) // 32, grid_y, b, m, ld, rows], [kt, xn, zn], tmp_path)
    nbytes = kt.size * kt.itemsize
    return raw[:nbytes].view(kt.dtype).reshape(m, b), raw[nbytes:].view(np.int8).reshape(3, rows, ld)


@pytest.mark.parametrize("grid_y", [1, 3])
@pytest.mark.parametrize("kind", KINDS)
def test_emulated_kernel_digits(emulator, tmp_path, kind, grid_y):
    """From the transposed distance product: ``k`` in place and its three digits, as the host route has them."""
    from nyhopt.ops.gram8 import split_digits

    kernel, X, Z, ell, *_ = _problem(kind, "float32", n=61, m=45)
    n, m = X.shape[0], Z.shape[0]
    g, xn, zn = _dot_inputs(X, Z, ell, "float32")
    ld, rows = 64, 48
    kt, D = _digits_run(emulator, tmp_path, cc.kernel_name("kernel_digits", "float32", kind, 0),
                        np.ascontiguousarray(g.T), xn, zn, n, m, ld, rows, grid_y)
    raw32 = _run(emulator, cc.kernel_name("kernel_dot", "float32", kind, 0), [2, 3, n, m], [g, xn, zn], tmp_path)
    np.testing.assert_array_equal(kt, raw32.view(np.float32).reshape(n, m).T)  # the same k as nh_kernel_dot
    np.testing.assert_array_equal(D[:, :m, :n], split_digits(kt))
    assert not D[:, :m, n:].any()  # the padded rows of the sums are zero
    assert (D[:, m:, :] == 99).all()  # rows past m are not touched


def test_emulated_kernel_digits_from_values(emulator, tmp_path):
    from nyhopt.ops.gram8 import split_digits

    rng = np.random.default_rng(4)
    b, m = 40, 9
    kt = rng.random((m, b)).astype(np.float32)
    kt[0, :3] = [0.0, 1.0, 0.5]
    out, D = _digits_run(emulator, tmp_path, cc.kernel_name("kernel_digits", "float32", "gaussian", 1),
                         kt, np.zeros(b, np.float32), np.zeros(m, np.float32), b, m, 48, 16, 1)
    np.testing.assert_array_equal(out, kt)
    np.testing.assert_array_equal(D[:, :m, :b], split_digits(kt))
    assert not D[:, :m, b:].any()


@pytest.mark.parametrize("lowrank", [False, True])
@pytest.mark.parametrize("dtype,kind", [("float64", k) for k in KINDS] + [("float32", "gaussian")])
def test_emulated_adjoint(emulator, tmp_path, kind, dtype, lowrank):
    kernel, X, Z, ell, Xs, Zt, P, Q, G = _problem(kind, dtype)
    n, d = X.shape
    m, r = Z.shape[0], P.shape[1]
    name = cc.kernel_name("adjoint", dtype, kind, lowrank)
    # grid_y = 1 < number of row tiles (2): one block strides over both tiles.
    header = [(m + 31) // 32, 1, n, m, d, r if lowrank else 0, 7]
    arrays = [Xs, Zt, P, np.ascontiguousarray(Q.T)] if lowrank else [Xs, Zt, G]
    raw = _run(emulator, name, header, arrays, tmp_path).view(np.float64)
    gz, ge, gx = raw[: d * m].reshape(d, m), raw[d * m : d * m + d], raw[d * m + d :].reshape(n, d)
    X64, Z64 = X.astype(np.float64), Z.astype(np.float64)
    wrt = ("lengthscale", "centers", "X")
    if lowrank:
        ref = _reference.adjoint_lowrank(kernel, X64, Z64, P.astype(np.float64), Q.astype(np.float64), ell, np, wrt)
    else:
        ref = _reference.adjoint_dense(kernel, X64, Z64, G.astype(np.float64), ell, np, wrt)
    # The kernel returns the raw sums; _cupy applies the 2 / ell factors.
    got_ell = (-2.0 * ge / ell).reshape(ell.shape)
    got_z = (2.0 * gz / ell[:, None]).T
    got_x = 2.0 * gx / ell
    for got, want in [(got_ell, ref.lengthscale), (got_z, ref.centers), (got_x, ref.X)]:
        scale = np.max(np.abs(want))
        np.testing.assert_allclose(got, want, rtol=0, atol=_tol(dtype) * 10 * scale)


def test_emulated_adjoint_honours_the_mask(emulator, tmp_path):
    kernel, X, Z, ell, Xs, Zt, P, Q, G = _problem("matern52", "float64", n=70)
    n, d = X.shape
    m = Z.shape[0]
    name = cc.kernel_name("adjoint", "float64", "matern52", True)
    raw = _run(emulator, name, [2, 3, n, m, d, 2, 2], [Xs, Zt, P, np.ascontiguousarray(Q.T)], tmp_path).view(np.float64)
    gz, ge, gx = raw[: d * m], raw[d * m : d * m + d], raw[d * m + d :]
    assert not gz.any() and not gx.any()
    ref = _reference.adjoint_lowrank(kernel, X, Z, P, Q, ell, np, ("lengthscale",))
    np.testing.assert_allclose(-2.0 * ge / ell, ref.lengthscale, rtol=1e-12)


# ------------------------------------------------- _cupy.py on emulated kernels
class EmulatedFunction:
    """Stands for a ``cupy.RawKernel``: checks the arguments, runs the emulator."""

    def __init__(self, exe, tmp_path, source, dtype, kind, lowrank):
        self.exe, self.tmp_path, self.source = exe, tmp_path, source
        self.dtype = np.dtype(dtype)
        self.name = cc.kernel_name(source, dtype, kind, lowrank)
        self.lowrank = lowrank
        self.launches = []

    def _check(self, args, n_arrays, n_ints):
        arrays, ints = args[:n_arrays], args[n_arrays : n_arrays + n_ints]
        for a in arrays:
            assert isinstance(a, np.ndarray) and a.flags.c_contiguous and a.dtype == self.dtype
        for v in ints:
            assert type(v) is np.int32
        return arrays, [int(v) for v in ints]

    def __call__(self, grid, block, args, shared_mem=0):
        assert tuple(block) == (32, 8)
        assert all(isinstance(g, int) and 0 < g <= 65535 for g in grid)
        self.launches.append(tuple(grid))
        if self.source == "adjoint_dot":
            (g, c, xn, zn), (b, m) = self._check(args, 4, 0)[0], (int(args[5]), int(args[6]))
            W = args[4]
            assert W.dtype == np.float64 and W.shape == (b, m) and g.shape == c.shape == (b, m)
            raw = _run(self.exe, self.name, [grid[0], grid[1], b, m], [g, c, xn, zn], self.tmp_path)
            W[...] = raw.view(np.float64).reshape(b, m)
            return
        if self.source == "kernel_dot":
            g, xn, zn = self._check(args, 3, 0)[0]
            out = args[3]
            b, m = int(args[4]), int(args[5])
            assert type(args[4]) is np.int32 and type(args[5]) is np.int32
            assert g.shape == (b, m) and xn.shape == (b,) and zn.shape == (m,)
            raw = _run(self.exe, self.name, [grid[0], grid[1], b, m], [g, xn, zn], self.tmp_path)
            if self.lowrank:  # the output form: float16 [hi | lo]
                assert out.dtype == np.float16 and out.shape == (b, 2 * m) and out.flags.c_contiguous
                out[...] = raw.view(np.float16).reshape(b, 2 * m)
            else:  # in place (kernel blocks) or into another block (the residual adjoint's values)
                assert out is g or (out.shape == g.shape and out.dtype == g.dtype and out.flags.c_contiguous)
                out[...] = raw.view(self.dtype).reshape(b, m)
            return
        if self.source == "kernel_digits":
            kt, xn, zn, D = args[:4]
            b, m, ld, plane = (int(v) for v in args[4:8])
            assert [type(v) for v in args[4:8]] == [np.int32] * 3 + [np.int64]
            assert kt.dtype == self.dtype and kt.flags.c_contiguous and kt.shape == (m, b)
            assert D.dtype == np.int8 and D.flags.c_contiguous and D.shape[2] == ld and plane == D.shape[1] * ld
            assert grid[0] == (ld + 31) // 32
            raw = _run(self.exe, self.name, [grid[0], grid[1], b, m, ld, D.shape[1]],
                       [kt, xn.astype(self.dtype), zn.astype(self.dtype)], self.tmp_path)
            nbytes = kt.size * kt.itemsize
            kt[...] = raw[:nbytes].view(self.dtype).reshape(m, b)
            D[:, :m] = raw[nbytes:].view(np.int8).reshape(D.shape)[:, :m]
            return
        if self.source == "kernel_block":
            (Xs, Zt, out), (b, m, d) = self._check(args, 3, 3)
            assert Xs.shape == (b, d) and Zt.shape == (d, m) and out.shape == (b, m)
            raw = _run(self.exe, self.name, [grid[0], grid[1], b, m, d], [Xs, Zt], self.tmp_path)
            out[...] = raw.view(self.dtype).reshape(b, m)
            return
        (Xs, Zt, C, Qt), (n, m, d, r, wanted) = self._check(args, 4, 5)
        outs = args[9:]
        assert all(o.dtype == np.float64 and o.flags.c_contiguous and not o.any() for o in outs)
        assert shared_mem == 33 * d * 8
        arrays = [Xs, Zt, C, Qt] if self.lowrank else [Xs, Zt, C]
        raw = _run(self.exe, self.name, [grid[0], grid[1], n, m, d, r, wanted], arrays, self.tmp_path).view(np.float64)
        sums = [raw[: d * m], raw[d * m : d * m + d], raw[d * m + d :]]
        for bit, out, s in zip((1, 2, 4), outs, sums):
            if wanted & bit:
                out[...] = s.reshape(out.shape)
            else:
                assert not s.any()


@pytest.fixture
def emulated_cupy(emulator, tmp_path, monkeypatch):
    from nyhopt.ops import _cupy

    made = []

    def get_function(source, dtype, kind, lowrank=None):
        fn = EmulatedFunction(emulator, tmp_path, source, dtype, kind, lowrank)
        made.append(fn)
        return fn

    monkeypatch.setattr(_cupy, "get_function", get_function)
    monkeypatch.setattr(_cupy, "_multiprocessors", lambda xp: 1)
    monkeypatch.setattr(_cupy, "_BLOCKS_PER_SM", 1)  # fewer blocks than row tiles: blocks stride
    return _cupy, made


@pytest.mark.parametrize("kind", KINDS)
def test_cupy_products_on_emulated_kernels(emulated_cupy, kind):
    _cupy, made = emulated_cupy
    kernel, X, Z, ell, _, _, P, Q, _ = _problem(kind, "float64", n=70)
    V, U = Q[:, :1], P
    with nh.memory_budget(2**12):  # several row blocks
        got = [
            _cupy.kernel_matrix(kernel, X, Z, ell, np),
            _cupy.kmv(kernel, X, Z, V, ell, np),
            _cupy.kmtv(kernel, X, Z, U, ell, np),
            *_cupy.normal_matvec(kernel, X, Z, V, ell, np, U=U),
        ]
    K = _reference.kernel_matrix(kernel, X, Z, ell, np)
    want = [K, K @ V, K.T @ U, K.T @ (K @ V), K.T @ U]
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-12, atol=1e-12 * np.max(np.abs(w)))
    assert sum(len(fn.launches) for fn in made) > 5  # really blocked
    Ks = _cupy.kernel_matrix(kernel, X, X, ell, np, symmetric=True)
    np.testing.assert_array_equal(Ks, Ks.T)


@pytest.mark.parametrize("lowrank", [False, True])
@pytest.mark.parametrize("kind", ["gaussian", "laplacian"])
def test_cupy_adjoints_on_emulated_kernels(emulated_cupy, kind, lowrank, monkeypatch):
    _cupy, made = emulated_cupy
    monkeypatch.setattr(_cupy, "ADJOINT_GEMM", False)  # the SIMT nh_adjoint (the GEMM form has its own tests)
    kernel, X, Z, ell, _, _, P, Q, G = _problem(kind, "float64", n=70)
    for wrt in [("lengthscale", "centers", "X"), ("centers",)]:
        if lowrank:
            got = _cupy.adjoint_lowrank(kernel, X, Z, P, Q, ell, np, wrt)
            want = _reference.adjoint_lowrank(kernel, X, Z, P, Q, ell, np, wrt)
        else:
            got = _cupy.adjoint_dense(kernel, X, Z, G, ell, np, wrt)
            want = _reference.adjoint_dense(kernel, X, Z, G, ell, np, wrt)
        for g, w in zip(got, want):
            if w is None:
                assert g is None
            else:
                assert g.shape == w.shape and g.dtype == np.float64
                np.testing.assert_allclose(g, w, rtol=0, atol=1e-12 * np.max(np.abs(w)))
    # 70 rows = 3 row tiles, 2 center tiles, 1 block per "multiprocessor": 1 row of blocks.
    assert made[0].launches[0] == (2, 1)


def test_cupy_isotropic_lengthscale_and_float32(emulated_cupy):
    _cupy, _ = emulated_cupy
    kernel, X, Z, _, _, _, P, Q, _ = _problem("laplacian", "float32")
    kernel = kernel.with_lengthscale(1.3)
    ell = kernel.lengthscale_array(3)
    got = _cupy.adjoint_lowrank(kernel, X, Z, P, Q, ell, np, ("lengthscale",))
    want = _reference.adjoint_lowrank(kernel, *(a.astype(np.float64) for a in (X, Z, P, Q)), ell, np, ("lengthscale",))
    assert got.lengthscale.shape == (1,)
    np.testing.assert_allclose(got.lengthscale, want.lengthscale, rtol=1e-5)


# ------------------------------------------------- run-time modules (fake CuPy)
class _FakeRawModule:
    """Stands for ``cupy.RawModule``: records what it was asked to compile."""

    def __init__(self, code, options, name_expressions, log):
        self.code, self.options, self.names = code, options, list(name_expressions)
        log.append(self)

    def get_function(self, name):
        assert name in self.names, f"{name} was not compiled in this module"
        return ("function", name, id(self))


@pytest.fixture
def fake_cupy(monkeypatch):
    """A ``cupy`` module with a settable device id and a recording RawModule; returns (device, built)."""
    import sys
    import types

    built, device = [], {"id": 0}
    fake = types.ModuleType("cupy")
    fake.RawModule = lambda code, options, name_expressions: _FakeRawModule(code, options, name_expressions, built)
    fake.cuda = types.SimpleNamespace(Device=lambda: types.SimpleNamespace(id=device["id"]))
    monkeypatch.setitem(sys.modules, "cupy", fake)
    monkeypatch.setattr(cc, "load_nvrtc", lambda: None)
    monkeypatch.setattr(cc, "_modules", {})
    return device, built


def test_get_function_compiles_only_the_instantiation_a_call_needs(fake_cupy):
    device, built = fake_cupy
    fn = cc.get_function("adjoint", np.float32, "gaussian", True)
    assert [m.names for m in built] == [["nh_adjoint<float, 0, true>"]]
    assert built[0].code == cc.read_source("adjoint") and tuple(built[0].options) == cc.OPTIONS
    assert fn == ("function", "nh_adjoint<float, 0, true>", id(built[0]))

    assert cc.get_function("adjoint", "float32", "gaussian", True) is fn  # reused, not rebuilt
    assert len(built) == 1

    cc.get_function("adjoint", "float32", "gaussian", False)
    cc.get_function("kernel_block", "float64", "laplacian")
    cc.get_function("kernel_dot", "float32", "matern52", 1)
    assert [m.names for m in built[1:]] == [
        ["nh_adjoint<float, 0, false>"],
        ["nh_kernel_block<double, 1>"],
        ["nh_kernel_dot<float, 3, 1>"],
    ]

    device["id"] = 1  # another device: its own module
    cc.get_function("adjoint", "float32", "gaussian", True)
    assert len(built) == 5 and built[-1].names == ["nh_adjoint<float, 0, true>"]
    assert {key[0] for key in cc._modules} == {0, 1}


def test_get_function_checks_its_arguments_before_compiling(fake_cupy):
    _, built = fake_cupy
    with pytest.raises(ValueError, match="kind"):
        cc.get_function("kernel_block", "float32", "cauchy")
    with pytest.raises(ValueError, match="no form 1 for float64"):
        cc.get_function("kernel_dot", "float64", "gaussian", 1)
    assert built == []


@pytest.mark.parametrize("kind", KINDS)
def test_cupy_half_blocks_on_emulated_kernels(emulated_cupy, kind):
    """``_cupy``'s float16 parts of a block (GEMM + ``nh_kernel_dot``, or the exact kernel + split) on the host."""
    _cupy, made = emulated_cupy
    from nyhopt.ops.gram16 import split_block

    kernel, X, Z, ell, *_ = _problem(kind, "float32", n=70)
    n, m = X.shape[0], Z.shape[0]
    if kind == "laplacian":  # the split pass is a CuPy ElementwiseKernel: a NumPy stand-in
        def split(k, hi, lo):
            hi[...] = k.astype(np.float16)
            lo[...] = ((k - hi.astype(np.float32)) * np.float32(2048)).astype(np.float16)
        _cupy._SPLIT["k"] = split
    try:
        pts = _cupy.kernel_block_half(kernel, X, Z, ell, np)
        out = np.empty((40, 2 * m), dtype=np.float16)
        work = np.empty((40, m), dtype=np.float32)
        got = pts.block_half(slice(30, 70), out, work)
    finally:
        _cupy._SPLIT.clear()
    K = _cupy.kernel_matrix(kernel, X, Z, ell, np)[30:70]
    np.testing.assert_array_equal(got.view(np.uint16), split_block(K, np).view(np.uint16))
    assert [fn.source for fn in made][-1] == ("kernel_block" if kind == "laplacian" else "kernel_dot")


@pytest.mark.parametrize("kind", KINDS)
def test_cupy_digit_blocks_on_emulated_kernels(emulated_cupy, kind):
    """``_Points.block_digits`` (distance GEMM + ``nh_kernel_digits``, or the exact-distance block) on NumPy."""
    from nyhopt.ops.gram8 import split_digits

    _cupy, made = emulated_cupy
    kernel, X, Z, ell, *_ = _problem(kind, "float32", n=70, m=21)
    pts = _cupy.kernel_block_digits(kernel, X, Z, ell, np)
    sl = slice(10, 60)
    kt = np.empty((21, 50), dtype=np.float32)
    D = np.full((3, 32, 64), 99, dtype=np.int8)
    pts.block_digits(sl, kt, D)
    ref = _reference.kernel_matrix(kernel, X[sl].astype(np.float64), Z.astype(np.float64), ell, np)
    np.testing.assert_allclose(kt, ref.T, rtol=0, atol=2e-3)
    np.testing.assert_array_equal(D[:, :21, :50], split_digits(kt))
    assert not D[:, :21, 50:].any() and (D[:, 21:] == 99).all()
    assert made[-1].source == "kernel_digits"


def test_the_removed_fused_products_setting_is_an_error(monkeypatch):
    """``NYHOPT_CUDA_FUSED`` switched on the removed SIMT products: now a clear error, off is fine."""
    from nyhopt.ops import _cupy

    for off in ("", "0", " 0 "):
        _cupy._removed_fused_setting(off)
    for on in ("1", "dot", "exact"):
        with pytest.raises(ValueError, match="NYHOPT_CUDA_FUSED.*removed"):
            _cupy._removed_fused_setting(on)
    assert "fused_products" not in cc.SOURCES


@pytest.mark.parametrize("dtype,kind", [("float64", k) for k in KINDS] + [("float32", "gaussian")])
def test_emulated_adjoint_dot(emulator, tmp_path, kind, dtype):
    """``nh_adjoint_dot``: ``W = (P Q^T) phi'(s)`` in float64 from the two products and the norms."""
    kernel, X, Z, ell, *_, P, Q, _ = _problem(kind, dtype)
    n, m = X.shape[0], Z.shape[0]
    g, xn, zn = _dot_inputs(X, Z, ell, dtype)
    c = np.ascontiguousarray(P @ Q.T).astype(dtype)
    raw = _run(emulator, cc.kernel_name("adjoint_dot", dtype, kind), [2, 3, n, m], [g, c, xn, zn], tmp_path)
    W = raw.view(np.float64).reshape(n, m)
    s = np.maximum(xn[:, None] + zn[None, :] - 2 * g, 0)
    _, dphi = kernel.profile_and_derivative(s.astype(np.float64), np)
    np.testing.assert_allclose(W, c * dphi, rtol=10 * _tol(dtype), atol=_tol(dtype) * np.abs(c).max())


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("d", [1, 3, 28])
@pytest.mark.parametrize("kind", ["gaussian", "matern32", "matern52"])
def test_gemm_adjoint_matches_the_reference(monkeypatch, kind, d, dtype):
    """``ADJOINT_GEMM``: the low-rank adjoint from GEMMs (on NumPy) against the reference, uncentered data."""
    from nyhopt.ops import _cupy

    rng = np.random.default_rng(4)
    n, m, k = 1031, 57, 3
    X = (rng.uniform(-1.5, 1.5, (n, d)) + 5.0).astype(dtype)
    Z = (rng.uniform(-1.5, 1.5, (m, d)) + 5.0).astype(dtype)
    Z[4] = X[7]
    kernel = nh.make_kernel(kind, np.sqrt(d) * np.linspace(0.8, 1.6, d))
    ell = kernel.lengthscale_array(d)
    P, Q = rng.standard_normal((n, k)).astype(dtype), rng.standard_normal((m, k)).astype(dtype)
    up = [a.astype(np.float64) for a in (X, Z, P, Q)]
    tol = 1e-9 if dtype == "float64" else 2e-5  # the GEMM form of the distances; float32 as the GPU tests
    monkeypatch.setattr(_cupy, "ADJOINT_GEMM", True)
    for wrt in [("lengthscale", "centers", "X"), ("centers",), ("lengthscale",), ("X",)]:
        with nh.memory_budget(2**16):  # several row blocks
            got = _cupy.adjoint_lowrank(kernel, X, Z, P, Q, ell, np, wrt)
        want = _reference.adjoint_lowrank(kernel, *up, ell, np, wrt)
        for g, w in zip(got, want):
            if w is None:
                assert g is None
            else:
                assert g.dtype == np.float64
                np.testing.assert_allclose(g, w, rtol=0, atol=tol * np.abs(w).max())
    monkeypatch.undo()
    assert _cupy.ADJOINT_GEMM is True  # the default, from the H100 timing in gpu_report.py blocks


def test_cupy_gemm_adjoint_on_emulated_kernels(emulated_cupy, monkeypatch):
    """``ADJOINT_GEMM`` through ``_cupy`` with the emulated ``nh_adjoint_dot`` (float64, Gaussian)."""
    _cupy, made = emulated_cupy
    from nyhopt.ops import _adjoint_gemm

    monkeypatch.setattr(_adjoint_gemm, "get_function", _cupy.get_function)
    monkeypatch.setattr(_adjoint_gemm, "is_cupy_namespace", lambda xp: True)
    monkeypatch.setattr(_cupy, "ADJOINT_GEMM", True)
    kernel, X, Z, ell, _, _, P, Q, _ = _problem("gaussian", "float64", n=70)
    wrt = ("lengthscale", "centers", "X")
    with nh.memory_budget(37 * 24 * 30):  # row blocks of 30
        got = _cupy.adjoint_lowrank(kernel, X, Z, P, Q, ell, np, wrt)
    want = _reference.adjoint_lowrank(kernel, X, Z, P, Q, ell, np, wrt)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=0, atol=1e-10 * np.abs(w).max())
    assert [fn.source for fn in made] == ["adjoint_dot"] * 3


def test_cupy_gemm_residual_adjoint_on_emulated_kernels(emulated_cupy, monkeypatch):
    """``adjoint_residual`` on the GEMM route through ``_cupy``: ``nh_kernel_dot`` (out of place) gives each
    block's values for ``K_b B``, ``nh_adjoint_dot`` the weights (float64, Gaussian, blocks of 30 rows)."""
    _cupy, made = emulated_cupy
    from nyhopt.ops import _adjoint_gemm

    monkeypatch.setattr(_adjoint_gemm, "get_function", _cupy.get_function)
    monkeypatch.setattr(_adjoint_gemm, "is_cupy_namespace", lambda xp: True)
    monkeypatch.setattr(_cupy, "ADJOINT_GEMM", True)
    kernel, X, Z, ell, _, _, P, Q, _ = _problem("gaussian", "float64", n=70)
    B = 0.5 * Q[:, :1]
    wrt = ("lengthscale", "centers", "X")
    with nh.memory_budget(37 * 32 * 30):  # row blocks of 30
        got = _cupy.adjoint_residual(kernel, X, Z, P, B, Q, ell, np, wrt)
    Pfull = P.copy()
    Pfull[:, :1] -= _reference.kernel_matrix(kernel, X, Z, ell, np) @ B
    want = _reference.adjoint_lowrank(kernel, X, Z, Pfull, Q, ell, np, wrt)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=0, atol=1e-10 * np.abs(w).max())
    assert [fn.source for fn in made] == ["kernel_dot", "adjoint_dot"] * 3
