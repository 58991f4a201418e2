"""The fused streaming products (``_cuda/fused_products.cu``) without a GPU.

``nh_fused_products`` computes ``K V``, ``K^T U`` and, in two sweeps,
``K^T (K V)`` without writing kernel blocks to memory; ``nyhopt.ops._cupy``
runs it when ``NYHOPT_CUDA_FUSED`` (:data:`nyhopt.ops._cupy.FUSED_PRODUCTS`)
asks for it.  As in ``test_cuda_sources.py``:

1. NVRTC compiles every instantiation (``test_cuda_sources.test_source_compiles``
   covers every source of ``_cuda_compile.SOURCES``; here: the per-form module
   lists and a width that must not compile);
2. the kernel is *executed* on the host (the C++20 emulation of the CUDA
   built-ins of ``test_cuda_sources.py``, with ``__shared__`` arrays made
   ``static`` so that the threads of a block share them), through the launch
   code of ``_cupy`` run on NumPy arrays, and compared with the NumPy
   reference for d in {1, 3, 28, 64}, sizes that are not multiples of the
   64-point tiles, operands of 1, 5 and 33 columns (one, and two or three
   column groups), float32 and float64, every kernel kind, exact and ``dot``
   distances, and B swept by one block or split across blocks (float64
   atomics).  The emulation starts one ``std::thread`` per CUDA thread, so
   sizes stay small; one case sweeps more than ``FLUSH`` tiles.

``test_ops_gpu.py`` repeats the parity checks on a real GPU.
"""
from __future__ import annotations

import itertools
import shutil
import subprocess

import numpy as np
import pytest

import nyhopt as nh
from nyhopt.ops import _cuda_compile as cc
from nyhopt.ops import _reference

from test_cuda_sources import DISPATCH_MAIN, EMULATION, HARNESS_IO, compile_source

SOURCE = "fused_products"
KINDS = list(cc.KINDS)
N, M = 77, 45  # rows and centers: not multiples of the 64-point tiles
TOL = {"float64": 1e-12, "float32": 2e-5}


# ------------------------------------------------------------------ names, NVRTC
def test_forms_partition_the_instantiations():
    for dtype, widths in [("float32", (8, 16, 32)), ("float64", (8, 16))]:
        per_form = [cc.name_expressions(SOURCE, dtype, w) for w in widths]
        assert sum(per_form, []) == cc.name_expressions(SOURCE, dtype)
        assert all(len(names) == len(KINDS) for names in per_form)
    assert cc.kernel_name(SOURCE, np.float32, "matern32", 16) == "nh_fused_products<float, 2, 16>"
    with pytest.raises(ValueError, match="no form 32 for float64"):
        cc.kernel_name(SOURCE, np.float64, "gaussian", 32)
    with pytest.raises(ValueError, match="no form 12"):
        cc.kernel_name(SOURCE, np.float32, "gaussian", 12)


def test_double_width_32_does_not_compile():
    """Its shared memory would pass the 48 KiB of a static allocation: a static_assert says so."""
    with pytest.raises(cc.CompileError, match="KC must be"):
        compile_source(cc.read_source(SOURCE), ["nh_fused_products<double, 0, 32>"], "compute_90")


# ----------------------------------------------------------------- host emulation
HARNESS = HARNESS_IO + r"""

template <typename T, int KIND, int KC>
void run_fused(FILE* in, FILE* out) {
    // grid.x, grid.y, na, nb, d, ldv, c0, kc, chunk, dot, accumulate, ldo, size of out, size of out64
    auto h = read<int>(in, 14);
    const int na = h[2], nb = h[3], d = h[4], ldv = h[5];
    auto A = read<T>(in, (long long)na * d);
    auto B = read<T>(in, (long long)nb * d);
    auto V = read<T>(in, (long long)nb * ldv);
    auto An2 = read<T>(in, na);
    auto Bn2 = read<T>(in, nb);
    auto o = read<T>(in, h[12]);
    auto o64 = read<double>(in, h[13]);
    launch(dim3(h[0], h[1]), dim3(32, 8), [&] {
        nh_fused_products<T, KIND, KC>(A.data(), B.data(), V.data(), An2.data(), Bn2.data(), na, nb, d, ldv,
                                       h[6], h[7], h[8], h[9], h[10], o.data(), o64.data(), h[11]);
    });
    write(out, o);
    write(out, o64);
}

"""

# Static __shared__ arrays: one copy per instantiation, shared by the threads
# (blocks run one after another).
_SHARED = "#define __shared__ static\n#define __align__(n) __attribute__((aligned(n)))\n"


@pytest.fixture(scope="module")
def emulator(tmp_path_factory):
    """Path of the host build of every instantiation of ``nh_fused_products``."""
    gxx = shutil.which("g++")
    if gxx is None:
        pytest.skip("g++ not found: the host emulation of the CUDA kernels needs a C++20 compiler")
    assert "#define __shared__\n" in EMULATION
    names = cc.name_expressions(SOURCE, "float64") + cc.name_expressions(SOURCE, "float32")
    rows = [f'{{"{name}", {name.replace("nh_fused_products", "run_fused", 1)}}},' for name in names]
    code = EMULATION.replace("#define __shared__\n", _SHARED) + cc.read_source(SOURCE)
    code += (HARNESS + DISPATCH_MAIN).replace("TABLE", "\n        ".join(rows))
    folder = tmp_path_factory.mktemp("cuda_fused_emulation")
    src, exe = folder / "emulate.cpp", folder / "emulate"
    src.write_text(code)
    proc = subprocess.run([gxx, "-std=c++20", "-O1", "-pthread", "-w", str(src), "-o", str(exe)],
                          capture_output=True, text=True)
    if proc.returncode != 0 and "barrier" in proc.stderr and "No such file" in proc.stderr:
        pytest.skip("the C++ standard library has no <barrier> (C++20)")
    assert proc.returncode == 0, proc.stderr[-4000:]
    return exe


class EmulatedFused:
    """Stands for the ``cupy.RawKernel`` of one width: checks the launch, runs the emulator."""

    def __init__(self, exe, tmp_path, dtype, kind, width):
        self.exe, self.tmp_path = exe, tmp_path
        self.dtype = np.dtype(dtype)
        self.width = int(width)
        self.name = cc.kernel_name(SOURCE, dtype, kind, width)
        self.launches = []

    def __call__(self, grid, block, args, shared_mem=0):
        assert tuple(block) == (32, 8) and shared_mem == 0
        assert len(grid) == 2 and all(isinstance(g, int) and g > 0 for g in grid) and grid[1] <= 65535
        A, B, V, An2, Bn2 = args[:5]
        ints, (out, out64), ldo = args[5:14], args[14:16], args[16]
        for a in (A, B, V, An2, Bn2, out):
            assert isinstance(a, np.ndarray) and a.flags.c_contiguous and a.dtype == self.dtype
        assert isinstance(out64, np.ndarray) and out64.flags.c_contiguous and out64.dtype == np.float64
        assert all(type(v) is np.int32 for v in (*ints, ldo))
        na, nb, d, ldv, c0, kc, chunk, dot, accumulate = (int(v) for v in ints)
        ldo = int(ldo)
        assert A.shape == (na, d) and B.shape == (nb, d) and V.shape == (nb, ldv)
        assert 1 <= kc <= self.width and c0 + kc <= ldv and c0 + kc <= ldo
        assert chunk % 64 == 0 and grid[0] == -(-na // 64) and grid[1] == -(-nb // chunk)
        assert dot in (0, 1) and accumulate in (0, 1)
        if dot:
            np.testing.assert_allclose(An2, (A * A).sum(axis=1), rtol=1e-6)
            np.testing.assert_allclose(Bn2, (B * B).sum(axis=1), rtol=1e-6)
        target = out64 if accumulate else out
        assert target.size >= na * ldo
        self.launches.append(dict(grid=tuple(grid), c0=c0, kc=kc, dot=dot, accumulate=accumulate))
        header = [*grid, na, nb, d, ldv, c0, kc, chunk, dot, accumulate, ldo, out.size, out64.size]
        inp, res = self.tmp_path / "in.bin", self.tmp_path / "out.bin"
        with open(inp, "wb") as fh:
            fh.write(np.asarray(header, dtype=np.int32).tobytes())
            for a in (A, B, V, An2.ravel()[:na], Bn2.ravel()[:nb], out, out64):
                fh.write(a.tobytes())
        subprocess.run([str(self.exe), self.name, str(inp), str(res)], check=True, timeout=120)
        raw = np.fromfile(res, dtype=np.uint8)
        out[...] = raw[: out.nbytes].view(self.dtype).reshape(out.shape)
        out64[...] = raw[out.nbytes :].view(np.float64).reshape(out64.shape)


@pytest.fixture
def fused_cupy(emulator, tmp_path, monkeypatch):
    """``_cupy`` with the fused products on and their kernel emulated; returns (module, made, set)."""
    from nyhopt.ops import _cupy

    made = []

    def get_function(source, dtype, kind, form=None):
        assert source == SOURCE, f"the fused path launched {source}"
        fn = EmulatedFused(emulator, tmp_path, dtype, kind, form)
        made.append(fn)
        return fn

    def setup(mode="exact", blocks_per_sm=1):
        monkeypatch.setattr(_cupy, "FUSED_PRODUCTS", mode)
        monkeypatch.setattr(_cupy, "_FUSED_BLOCKS_PER_SM", blocks_per_sm)

    monkeypatch.setattr(_cupy, "get_function", get_function)
    monkeypatch.setattr(_cupy, "_multiprocessors", lambda xp: 1)
    setup()
    return _cupy, made, setup


def _problem(kind, dtype, d, n=N, m=M, k=1, ku=2, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.uniform(-1.5, 1.5, (n, d)).astype(dtype)
    Z = rng.uniform(-1.5, 1.5, (m, d)).astype(dtype)
    Z[4] = X[7]  # a coincident pair
    ell = np.sqrt(d) * np.linspace(0.8, 1.6, d)  # kernel values of order 0.1 to 1 for every d
    kernel = nh.make_kernel(kind, ell)
    V = rng.standard_normal((m, k)).astype(dtype)
    U = rng.standard_normal((n, ku)).astype(dtype)
    return kernel, X, Z, kernel.lengthscale_array(d), V, U


def _close(got, want, dtype):
    assert got.shape == want.shape and got.dtype == np.dtype(dtype)
    scale = max(np.max(np.abs(want)), 1e-300)
    err = np.max(np.abs(got.astype(np.float64) - want)) / scale
    assert err <= TOL[dtype], f"relative error {err:.2e} > {TOL[dtype]:.0e}"


# Every (dtype, kind, d): k, the distance form and the split of the sums over
# the rows rotate so that each value meets every kind and every d.
CASES = [
    (dtype, kind, d, (1, 5, 33)[(i + j) % 3], ("exact", "dot")[(i + j + (dtype == "float32")) % 2],
     1 + (i // 2 + j) % 2)
    for dtype in ("float64", "float32")
    for i, kind in enumerate(KINDS)
    for j, d in enumerate((1, 3, 28, 64))
]


@pytest.mark.parametrize("dtype,kind,d,k,mode,blocks_per_sm", CASES)
def test_emulated_normal_matvec(fused_cupy, dtype, kind, d, k, mode, blocks_per_sm):
    """``(K^T K V, K^T U, K V)``: sweep 1 is ``kmv`` (V), sweep 2 ``kmtv`` (``[K V, U]``)."""
    _cupy, made, setup = fused_cupy
    setup(mode, blocks_per_sm)
    kernel, X, Z, ell, V, U = _problem(kind, dtype, d, k=k)
    saved = [a.copy() for a in (X, Z, V, U)]
    KtKV, KtU, KV = _cupy.normal_matvec(kernel, X, Z, V, ell, np, U=U, kv=True)
    K = _reference.kernel_matrix(kernel, X.astype(np.float64), Z.astype(np.float64), ell, np)
    V64, U64 = V.astype(np.float64), U.astype(np.float64)
    for got, want in [(KV, K @ V64), (KtKV, K.T @ (K @ V64)), (KtU, K.T @ U64)]:
        _close(got, want, dtype)
    for a, b in zip((X, Z, V, U), saved):
        np.testing.assert_array_equal(a, b)
    launches = [launch for fn in made for launch in fn.launches]
    widths = _cupy._FUSED_WIDTHS[dtype]
    assert len(launches) == -(-k // widths[-1]) + -(-(k + 2) // widths[-1])  # one per column group
    assert all(launch["dot"] == (mode == "dot" and kind != "laplacian") for launch in launches)
    sweep2 = launches[-1]
    assert sweep2["accumulate"] == (blocks_per_sm == 2) and sweep2["grid"] == (1, blocks_per_sm)


@pytest.mark.parametrize("mode", ["exact", "dot"])
@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_emulated_kmv_and_kmtv(fused_cupy, dtype, mode):
    """The public ``kmv``/``kmtv`` paths; three tiles of centers; sums split or not."""
    _cupy, made, setup = fused_cupy
    kernel, X, Z, ell, V, U = _problem("matern52", dtype, 3, n=N, m=130, k=5, ku=3, seed=1)
    K = _reference.kernel_matrix(kernel, X.astype(np.float64), Z.astype(np.float64), ell, np)
    for blocks_per_sm in (1, 4):
        setup(mode, blocks_per_sm)
        _close(_cupy.kmv(kernel, X, Z, V, ell, np), K @ V.astype(np.float64), dtype)
        _close(_cupy.kmtv(kernel, X, Z, U, ell, np), K.T @ U.astype(np.float64), dtype)
    grids = [launch["grid"] for fn in made for launch in fn.launches]
    # kmv: 2 blocks of rows sweep the 3 center tiles, or split them (4 blocks per "SM": 2 ranges);
    # kmtv: 3 blocks of centers sweep both row tiles, or split them (2 ranges).
    assert grids == [(2, 1), (3, 1), (2, 2), (3, 2)]


def test_emulated_sweep_longer_than_a_flush(fused_cupy):
    """One block sweeps 35 tiles of rows: float32 sums flushed into float64 after 32 tiles, then at the end."""
    _cupy, made, setup = fused_cupy
    kernel, X, Z, ell, V, U = _problem("gaussian", "float32", 3, n=64 * 34 + 9, m=20, k=1, ku=3, seed=2)
    got = _cupy.kmtv(kernel, X, Z, U, ell, np)
    K = _reference.kernel_matrix(kernel, X.astype(np.float64), Z.astype(np.float64), ell, np)
    _close(got, K.T @ U.astype(np.float64), "float32")
    assert made[0].launches[0]["grid"] == (1, 1) and not made[0].launches[0]["accumulate"]


def test_switch_off_and_fallbacks(fused_cupy, monkeypatch):
    """Off: the cuBLAS blocks of today; d above FUSED_BLOCK_MAX_D: the reference; bad settings: an error."""
    _cupy, made, setup = fused_cupy
    kernel, X, Z, ell, V, U = _problem("gaussian", "float64", 3)
    setup("")
    blocks = []
    monkeypatch.setattr(_cupy, "_block_into", lambda kernel, Xs, Zt, out: blocks.append(Xs.shape) or
                        _reference.kernel_block(kernel, Xs, np.ascontiguousarray(Zt.T), np, None).astype(out.dtype))
    _close(_cupy.kmv(kernel, X, Z, V, ell, np), _reference.kmv(kernel, X, Z, V, ell, np), "float64")
    assert blocks and not made
    setup("exact")
    d = _cupy.FUSED_BLOCK_MAX_D + 1
    kernel, X, Z, ell, V, U = _problem("gaussian", "float64", d)
    _close(_cupy.normal_matvec(kernel, X, Z, V, ell, np)[0], _reference.normal_matvec(kernel, X, Z, V, ell, np)[0],
           "float64")
    assert not made
    assert [_cupy._fused_setting(v) for v in ("", " 0", "1", "Exact", "dot")] == ["", "", "exact", "exact", "dot"]
    with pytest.raises(ValueError, match="NYHOPT_CUDA_FUSED"):
        _cupy._fused_setting("yes")


def test_column_groups_and_empty_operands(fused_cupy):
    _cupy, made, _ = fused_cupy
    assert list(_cupy._column_groups(21, "float32")) == [(0, 21, 32)]
    assert list(_cupy._column_groups(33, "float32")) == [(0, 17, 32), (17, 16, 16)]
    assert list(_cupy._column_groups(33, "float64")) == [(0, 11, 16), (11, 11, 16), (22, 11, 16)]
    for k in range(1, 70):
        for dtype in ("float32", "float64"):
            groups = list(_cupy._column_groups(k, dtype))
            assert [g[0] for g in groups] == list(itertools.accumulate([0] + [g[1] for g in groups[:-1]]))
            assert sum(g[1] for g in groups) == k and all(g[1] <= g[2] for g in groups)
    kernel = nh.GaussianKernel(1.0)
    A = np.ones((5, 2))
    assert _cupy._contract(kernel, A, np.ones((0, 2)), np.ones((0, 3)), np).tolist() == [[0.0] * 3] * 5
    assert _cupy._contract(kernel, A[:0], A, np.ones((5, 3)), np).shape == (0, 3)
    assert not made
