r"""Randomized trace estimation: probes, Hutchinson, Hutch++ and row sampling.

Every estimator of this module writes a trace as a weighted sum of quadratic
forms over a fixed set of *probe vectors*,

.. math:: \operatorname{Tr} A \;\approx\; \sum_{j=1}^{k} w_j\, v_j^\top A\, v_j ,

so that an objective can apply :math:`A` to all probes at once (one
multi-right-hand-side solve for the hat matrix :math:`H`) and differentiate
each quadratic form separately.  A :class:`TraceProbes` holds the vectors
:math:`V = [v_1, \dots, v_k]` and the weights :math:`w`.

Estimators
----------
Hutchinson (1989)
    :math:`v_j = r_j` with i.i.d. standard Gaussian or Rademacher entries and
    :math:`w_j = 1/t`.  Unbiased; for symmetric :math:`A` the variance of one
    probe is :math:`2\|A\|_F^2` (Gaussian) or
    :math:`2(\|A\|_F^2 - \sum_i A_{ii}^2)` (Rademacher).
Hutch++ (Meyer, Musco, Musco and Woodruff, 2021)
    An orthonormal basis :math:`Q` (n x k) of a sketch of the range of
    :math:`A` is traced exactly and Hutchinson is applied to the rest:

    .. math:: \operatorname{Tr} A = \operatorname{Tr}(Q^\top A Q)
              + \operatorname{Tr}\big((I - QQ^\top) A (I - QQ^\top)\big)
              \approx \operatorname{Tr}(Q^\top A Q)
              + \frac1l \sum_{j=1}^{l} g_j^\perp{}^\top A\, g_j^\perp ,
              \qquad g_j^\perp = (I - QQ^\top) g_j .

    The estimate is unbiased for *any* fixed :math:`Q` independent of the
    :math:`g_j`; its variance is that of Hutchinson on the deflated matrix,
    small when :math:`Q` captures the large eigenvalues of :math:`A`.
    :func:`hutchpp` is the textbook adaptive version (the sketch is
    :math:`A S`); :func:`hutchpp_probes` builds the probes from any given
    sketch, which lets an objective keep them fixed while :math:`A` changes.
Row sampling
    For a trace whose diagonal entries can be computed one row at a time,
    :math:`\operatorname{Tr} A \approx (n/q) \sum_{i \in \mathcal Q} A_{ii}`
    over :math:`q` rows drawn uniformly without replacement (exact when
    :math:`q = n`).

Probes are drawn on the host with NumPy's generator and moved to the array
module ``xp`` afterwards, so a seed gives the same probes on CPU and GPU.

Counter-based streams
---------------------
An objective's probes must not depend on how the rows are split (one array,
or row blocks on the workers of a cluster).  :func:`probe_rows` draws the
rows ``start:stop`` of an ``n x t`` probe matrix from an integer seed: global
row ``i`` belongs to block ``i // PROBE_BLOCK_ROWS``, and each block has its
own Philox generator keyed by ``(seed, stream, block)``
(:func:`keyed_generator`), which fills the block row by row.  Any chunking of
the rows therefore reproduces the same matrix, row for row, without drawing
anything ``n``-sized.  :func:`sample_rows` draws ``q`` distinct rows out of
``n`` in ``O(q)`` memory (no permutation of ``n``).

Examples
--------
>>> import numpy as np
>>> from nyhopt.objectives._trace import draw_probes, hutchinson
>>> rng = np.random.default_rng(0)
>>> A = np.diag(np.arange(1.0, 6.0))               # trace 15
>>> R = draw_probes(5, 4000, "rademacher", rng)
>>> abs(hutchinson(lambda V: A @ V, R) - 15.0) < 1e-9   # diagonal A: exact with +-1
True
"""
from __future__ import annotations

import numbers
from typing import NamedTuple

import numpy as np

__all__ = [
    "PROBE_KINDS",
    "TraceProbes",
    "as_generator",
    "draw_probes",
    "PROBE_BLOCK_ROWS",
    "derive_seed",
    "keyed_generator",
    "probe_rows",
    "hutchinson_probes",
    "hutchpp_probes",
    "orthonormal_basis",
    "weighted_quadratic_trace",
    "hutchinson",
    "hutchpp",
    "sample_rows",
    "row_sampling",
]

#: Distributions accepted by :func:`draw_probes`.
PROBE_KINDS = ("gaussian", "rademacher")

#: Rows per block of the counter-based streams of :func:`probe_rows` (a format constant:
#: changing it changes every seeded probe matrix).
PROBE_BLOCK_ROWS = 65536


class TraceProbes(NamedTuple):
    """Probe vectors and weights of a trace estimate.

    Attributes
    ----------
    vectors : array, shape (n, k)
        Probe vectors :math:`v_j` as columns (array module and dtype of the data).
    weights : numpy.ndarray, shape (k,)
        float64 weights :math:`w_j`; the estimate is
        :math:`\\sum_j w_j v_j^\\top A v_j`.
    method : str
        ``"hutchinson"`` or ``"hutch++"``.
    n_exact : int
        Number of leading columns that trace a subspace exactly (the
        orthonormal sketch of Hutch++; 0 for Hutchinson).
    """

    vectors: object
    weights: np.ndarray
    method: str
    n_exact: int = 0

    @property
    def n_vectors(self) -> int:
        """Number of probe vectors ``k`` (right-hand sides of one solve)."""
        return int(self.vectors.shape[1])


def as_generator(random_state) -> np.random.Generator:
    """Return a NumPy ``Generator`` from a seed-like ``random_state``.

    Parameters
    ----------
    random_state : None, int, numpy.random.Generator or numpy.random.RandomState
        ``None`` draws fresh entropy; an integer seeds a new generator; a
        ``Generator`` is used as is (and advanced); a legacy ``RandomState``
        seeds a new generator from one draw.

    Raises
    ------
    TypeError
        For anything else (the message names ``random_state``).

    Examples
    --------
    >>> int(as_generator(3).integers(10)) == int(as_generator(3).integers(10))
    True
    """
    if random_state is None or isinstance(random_state, np.random.Generator):
        return np.random.default_rng(random_state)
    if isinstance(random_state, numbers.Integral) and not isinstance(random_state, bool):
        if random_state < 0:
            raise ValueError(f"random_state must be a non-negative integer, got {random_state}")
        return np.random.default_rng(int(random_state))
    if isinstance(random_state, np.random.RandomState):
        return np.random.default_rng(random_state.randint(0, 2**31 - 1))
    raise TypeError(
        "random_state must be None, an int, a numpy.random.Generator or a RandomState, "
        f"got {type(random_state).__name__}"
    )


def _check_count(value, name, low=1):
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{name} must be an integer, got {value!r}")
    if value < low:
        raise ValueError(f"{name} must be >= {low}, got {value}")
    return int(value)


def draw_probes(n, t, kind="gaussian", rng=None, dtype=np.float64, xp=np):
    """Draw ``t`` random probe vectors of length ``n`` (an ``(n, t)`` array).

    Parameters
    ----------
    n, t : int
        Length and number of the probes.
    kind : {"gaussian", "rademacher"}
        Standard normal entries, or independent signs :math:`\\pm 1`.
    rng : numpy.random.Generator, optional
        Source of randomness (see :func:`as_generator`); a fresh one if None.
    dtype : dtype, default float64
    xp : module, default numpy
        Array module of the result (the draw itself happens on the host).

    Returns
    -------
    array of shape (n, t)

    Examples
    --------
    >>> import numpy as np
    >>> R = draw_probes(3, 2, "rademacher", np.random.default_rng(1))
    >>> R.shape, sorted(set(np.abs(R).ravel().tolist()))
    ((3, 2), [1.0])
    """
    n = _check_count(n, "n")
    t = _check_count(t, "n_probes")
    if kind not in PROBE_KINDS:
        raise ValueError(f"probes must be one of {PROBE_KINDS}, got {kind!r}")
    rng = as_generator(rng)
    if kind == "gaussian":
        host = rng.standard_normal((n, t))
    else:
        host = rng.integers(0, 2, size=(n, t), dtype=np.int8).astype(np.float64)
        host *= 2.0
        host -= 1.0
    return xp.asarray(host.astype(dtype, copy=False))


def derive_seed(random_state) -> int:
    """One integer seed (``0 <= seed < 2**63 - 1``) for the counter-based streams.

    ``random_state`` is read as by :func:`as_generator` (a ``Generator`` is
    advanced by one draw), so an integer gives the same seed every time.

    Examples
    --------
    >>> derive_seed(7) == derive_seed(7)
    True
    """
    return int(as_generator(random_state).integers(2**63 - 1))


def keyed_generator(seed, *key) -> np.random.Generator:
    """A Philox generator keyed by ``(seed, *key)`` (non-negative integers).

    Generators with different keys are independent streams
    (``numpy.random.SeedSequence`` with ``spawn_key=key``).

    Examples
    --------
    >>> a = keyed_generator(1, 0, 5).standard_normal(2)
    >>> bool((a == keyed_generator(1, 0, 5).standard_normal(2)).all())
    True
    """
    if isinstance(seed, bool) or not isinstance(seed, numbers.Integral) or seed < 0:
        raise ValueError(f"seed must be a non-negative integer, got {seed!r}")
    return np.random.Generator(np.random.Philox(np.random.SeedSequence(int(seed), spawn_key=tuple(key))))


def _fill(rng, rows, t, kind):
    """``rows x t`` float64 entries of ``kind``, filled row by row (a prefix of a longer draw)."""
    if kind == "gaussian":
        return rng.standard_normal((rows, t))
    host = rng.integers(0, 2, size=(rows, t), dtype=np.uint8).astype(np.float64)
    host *= 2.0
    host -= 1.0
    return host


def probe_rows(seed, t, start, stop, kind="gaussian", *, stream=0, dtype=np.float64, xp=np):
    """Rows ``start:stop`` of the seeded probe matrix with ``t`` columns, whatever the chunking.

    Global row ``i`` is row ``i % PROBE_BLOCK_ROWS`` of block
    ``i // PROBE_BLOCK_ROWS``, whose entries come from
    ``keyed_generator(seed, stream, block)`` in row-major order.  The result
    depends only on ``(seed, stream, t, kind)`` and the global row indices:
    ``probe_rows(s, t, 0, n)`` equals the concatenation of ``probe_rows`` over
    any split of ``[0, n)``.  Memory: ``O((stop - start + PROBE_BLOCK_ROWS) t)``.

    Parameters
    ----------
    seed : int
        Non-negative seed (see :func:`derive_seed`).
    t : int
        Number of columns (probe vectors).
    start, stop : int
        Global row range, ``0 <= start <= stop``.
    kind : {"gaussian", "rademacher"}
    stream : int, default 0
        Independent streams of one seed (e.g. probes and Hutch++ vectors).
    dtype : dtype, default float64
        Drawn in float64 on the host, then cast.
    xp : module, default numpy
        Array module of the result (copied once from the host).

    Returns
    -------
    array of shape (stop - start, t)

    Examples
    --------
    >>> import numpy as np
    >>> R = probe_rows(3, 2, 0, 10)
    >>> bool(np.array_equal(R, np.vstack([probe_rows(3, 2, 0, 4), probe_rows(3, 2, 4, 10)])))
    True
    """
    t = _check_count(t, "n_probes")
    if kind not in PROBE_KINDS:
        raise ValueError(f"probes must be one of {PROBE_KINDS}, got {kind!r}")
    for v, name in ((start, "start"), (stop, "stop")):
        if isinstance(v, bool) or not isinstance(v, numbers.Integral):
            raise TypeError(f"{name} must be an integer, got {v!r}")
    start, stop = int(start), int(stop)
    if not 0 <= start <= stop:
        raise ValueError(f"need 0 <= start <= stop, got start={start}, stop={stop}")
    out = np.empty((stop - start, t))
    B = PROBE_BLOCK_ROWS
    for b in range(start // B, -(-stop // B)):
        b0 = b * B
        lo, hi = max(start, b0), min(stop, b0 + B)
        block = _fill(keyed_generator(seed, stream, b), hi - b0, t, kind)  # rows [b0, hi): a prefix
        out[lo - start:hi - start] = block[lo - b0:]
    return xp.asarray(out.astype(dtype, copy=False))


def hutchinson_probes(n, t, kind="gaussian", rng=None, dtype=np.float64, xp=np) -> TraceProbes:
    """Hutchinson probes: ``t`` random vectors, each with weight ``1/t``.

    Examples
    --------
    >>> import numpy as np
    >>> p = hutchinson_probes(10, 4, rng=np.random.default_rng(0))
    >>> p.vectors.shape, p.weights.tolist()
    ((10, 4), [0.25, 0.25, 0.25, 0.25])
    """
    R = draw_probes(n, t, kind, rng, dtype, xp)
    return TraceProbes(R, np.full(R.shape[1], 1.0 / R.shape[1]), "hutchinson", 0)


def orthonormal_basis(S, xp=np):
    """Orthonormal basis (n x k) of the columns of ``S`` by a thin QR.

    Columns of ``S`` that are numerically dependent give basis vectors with
    no meaning for the range of ``S`` but the result is still orthonormal,
    which is all Hutch++ needs for unbiasedness.
    """
    if S.shape[1] > S.shape[0]:
        raise ValueError(f"sketch has more columns ({S.shape[1]}) than rows ({S.shape[0]})")
    Q, _ = xp.linalg.qr(S.astype(xp.float64, copy=False))
    return Q


def hutchpp_probes(sketch, G, xp=np, dtype=None) -> TraceProbes:
    """Hutch++ probes from a sketch of the range and Hutchinson vectors.

    Parameters
    ----------
    sketch : array, shape (n, k)
        Vectors whose span should hold the dominant eigenvectors of the
        matrix to trace (orthonormalized here).
    G : array, shape (n, l)
        Random probes for the remainder; they are projected on the
        orthogonal complement of the sketch.
    dtype : dtype, optional
        dtype of the returned vectors (default: that of ``G``).

    Returns
    -------
    TraceProbes
        ``vectors = [Q | (I - QQ^T) G]`` with weights ``[1]*k + [1/l]*l``.

    Examples
    --------
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> U = np.linalg.qr(rng.standard_normal((50, 3)))[0]
    >>> A = U @ np.diag([100.0, 50.0, 20.0]) @ U.T + 0.01 * np.eye(50)   # trace 170.5
    >>> p = hutchpp_probes(A @ rng.standard_normal((50, 3)), rng.standard_normal((50, 4)))
    >>> est = weighted_quadratic_trace(p, A @ p.vectors)
    >>> abs(est - 170.5) < 0.5          # the large eigenvalues are traced exactly
    True
    """
    if sketch.ndim != 2 or G.ndim != 2 or sketch.shape[0] != G.shape[0]:
        raise ValueError(
            f"sketch (n, k) and G (n, l) must be 2-D with the same rows, got "
            f"{tuple(sketch.shape)} and {tuple(G.shape)}"
        )
    k, l = sketch.shape[1], G.shape[1]
    if l < 1:
        raise ValueError("Hutch++ needs at least one random probe besides the sketch")
    dtype = G.dtype if dtype is None else dtype
    Q = orthonormal_basis(sketch, xp)
    G64 = G.astype(xp.float64, copy=False)
    Gp = G64 - Q @ (Q.T @ G64)
    V = xp.concatenate([Q, Gp], axis=1).astype(dtype, copy=False)
    w = np.concatenate([np.ones(k), np.full(l, 1.0 / l)])
    return TraceProbes(V, w, "hutch++", k)


def weighted_quadratic_trace(probes: TraceProbes, AV, xp=None) -> float:
    """Return :math:`\\sum_j w_j v_j^\\top (A v_j)` given ``AV = A @ probes.vectors``.

    Accumulated in float64.

    Examples
    --------
    >>> import numpy as np
    >>> p = TraceProbes(np.eye(3), np.ones(3), "hutchinson")   # exact with the unit vectors
    >>> weighted_quadratic_trace(p, np.diag([1.0, 2.0, 3.0]) @ p.vectors)
    6.0
    """
    V = probes.vectors
    if AV.shape != V.shape:
        raise ValueError(f"AV must have the probes' shape {tuple(V.shape)}, got {tuple(AV.shape)}")
    if xp is None:
        from ..backend import get_namespace

        xp = get_namespace(V, AV)
    q = xp.sum(V.astype(xp.float64, copy=False) * AV.astype(xp.float64, copy=False), axis=0)
    return float(xp.sum(q * xp.asarray(probes.weights)))


def hutchinson(matvec, R) -> float:
    """Hutchinson estimate :math:`\\frac1t \\sum_j r_j^\\top A r_j`.

    Parameters
    ----------
    matvec : callable
        ``matvec(V)`` returns ``A @ V`` for an (n, k) array ``V``.
    R : array, shape (n, t)
        Probe vectors (see :func:`draw_probes`).
    """
    probes = TraceProbes(R, np.full(R.shape[1], 1.0 / R.shape[1]), "hutchinson", 0)
    return weighted_quadratic_trace(probes, matvec(R))


def hutchpp(matvec, n, n_matvecs, kind="gaussian", rng=None, dtype=np.float64, xp=np) -> float:
    """Adaptive Hutch++ estimate of :math:`\\operatorname{Tr} A` with a budget of matvecs.

    The budget ``n_matvecs`` (at least 3) is split in three thirds as in
    Meyer et al. (2021): ``k`` products for the sketch :math:`A S`, ``k`` for
    :math:`A Q` and the rest for Hutchinson on the deflated remainder.

    Parameters
    ----------
    matvec : callable
        ``matvec(V)`` returns ``A @ V`` for an (n, k) array ``V``; ``A`` symmetric.
    n : int
        Size of ``A``.
    n_matvecs : int
        Total number of matrix-vector products.

    Examples
    --------
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> lam = 1.0 / np.arange(1, 201) ** 2                    # fast decay
    >>> U = np.linalg.qr(rng.standard_normal((200, 200)))[0]
    >>> A = (U * lam) @ U.T
    >>> bool(abs(hutchpp(lambda V: A @ V, 200, 30, rng=rng) / lam.sum() - 1) < 0.02)
    True
    """
    n_matvecs = _check_count(n_matvecs, "n_matvecs", 3)
    rng = as_generator(rng)
    k = n_matvecs // 3
    l = n_matvecs - 2 * k
    S = draw_probes(n, k, kind, rng, dtype, xp)
    G = draw_probes(n, l, kind, rng, dtype, xp)
    probes = hutchpp_probes(matvec(S), G, xp=xp, dtype=dtype)
    return weighted_quadratic_trace(probes, matvec(probes.vectors), xp)


def sample_rows(n, q, rng=None) -> np.ndarray:
    """``q`` distinct row indices out of ``n``, drawn uniformly, sorted (int64, host).

    With ``q >= n`` every row is returned (the estimate becomes exact).
    No permutation of ``n`` is drawn: memory is ``O(q)`` (``O(n)`` bits only
    when ``q > n / 2``, where the ``n - q`` rows left out are drawn instead).

    Examples
    --------
    >>> import numpy as np
    >>> sample_rows(10, 3, np.random.default_rng(0)).shape, sample_rows(4, 9).tolist()
    ((3,), [0, 1, 2, 3])
    """
    n = _check_count(n, "n")
    q = _check_count(q, "n_rows")
    if q >= n:
        return np.arange(n, dtype=np.int64)
    rng = as_generator(rng)
    if 2 * q > n:  # q is O(n) here: the complement is the smaller draw
        keep = np.ones(n, dtype=bool)
        keep[_distinct(n, n - q, rng)] = False
        return np.flatnonzero(keep).astype(np.int64)
    return np.sort(_distinct(n, q, rng))


def _distinct(n, q, rng):
    """``q`` distinct uniform indices out of ``n`` (``2 q <= n``) in ``O(q)`` memory.

    Sequential rejection of repeats, done in batches: the indices in order of
    first appearance form a uniformly random ``q``-subset.
    """
    got = np.empty(0, dtype=np.int64)
    while got.size < q:
        cand = np.concatenate([got, rng.integers(0, n, size=q - got.size + 16, dtype=np.int64)])
        _, first = np.unique(cand, return_index=True)
        got = cand[np.sort(first)][:q]
    return got


def row_sampling(diag_entries, n) -> float:
    """Row-sampling estimate :math:`(n/q) \\sum_{i \\in \\mathcal Q} A_{ii}`.

    Parameters
    ----------
    diag_entries : array, shape (q,)
        Diagonal entries :math:`A_{ii}` on the sampled rows.
    n : int
        Size of ``A`` (number of rows sampled from).

    Examples
    --------
    >>> import numpy as np
    >>> d = np.arange(10.0)
    >>> rows = sample_rows(10, 10)
    >>> row_sampling(d[rows], 10) == float(d.sum())
    True
    """
    q = int(diag_entries.shape[0])
    if q < 1:
        raise ValueError("row sampling needs at least one sampled row")
    return float(diag_entries.astype("float64").sum()) * (n / q)
