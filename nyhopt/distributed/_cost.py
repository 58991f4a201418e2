r"""When the Gram route pays on a cluster: a cost model of one pass, in seconds.

A pass over sharded data is one round of tasks, one per row block, followed
by a reduction of their float64 partials on the driver.  Its time is the
time of the busiest worker thread plus the round's overhead (task
submission, the transfers, the tree reduction), so for ``n`` rows in ``B``
blocks on ``s`` worker threads, each thread holding ``r = ceil(B / s) n / B``
rows,

.. math::

    t_{\mathrm{stream}}(k) &= \tau + r\,m\,(e + c\,k) + 8 m k B / \beta, \\
    t_{\mathrm{Gram}} &= \tau + r\,m\,(e + g\,m) + 8 m^2 B / \beta,

for a streaming normal product with ``k`` columns and for the Gram pass
(every block's ``m x m`` partial of :math:`K^T K` is reduced), with
:math:`\tau` = :data:`PASS_S`, :math:`e` = :data:`EVAL_S`,
:math:`c` = :data:`PRODUCT_S`, :math:`g` = :data:`GRAM_S` and :math:`\beta` =
:data:`NET_BYTES_S`.  After the Gram pass a normal product is
:math:`G V` on the driver and makes no pass, so the Gram route pays for
``p`` normal products when :math:`p\,t_{\mathrm{stream}}(k) \ge t_{\mathrm{Gram}}`.
The round's overhead :math:`\tau` weighs on the streaming side once per
product: on a cluster the Gram route pays sooner than in one process.
A partial larger than :data:`GRAM_PARTIAL_BYTES` never pays (each worker
holds a few during the reduction).

On workers whose chunks are CuPy arrays (``gpu``; one GPU per worker, so
``s`` counts workers, not threads) :math:`e`, :math:`c` and :math:`g` are
the single-GPU constants of :func:`nyhopt.ops.operator.gram_pays`:
:data:`~nyhopt.ops.operator.GPU_EVAL_S`, :data:`~nyhopt.ops.operator.GPU_PRODUCT_S`
and, for the Gram matrix, the constant of its ``route`` (int8 or float16
tensor cores, else float64 products), the route the workers are told to
take (:meth:`nyhopt.distributed.ShardedData.gram_route`).

The CPU constants were measured on a 2-core machine with one Numba thread per
worker, Gaussian kernel, d = 8, float64 (``LocalCluster`` of 2 workers: a
pass of 4 tiny blocks takes 0.04 s; at n = 6e4, m = 1000 the Gram pass took
9.4 times a streaming normal product, at m = 400 about 2 to 3 times;
docs/scaling-out.md, "Speed").  They set a break-even,
not a prediction: off by 2x, the route chosen costs at most about 2x the
better one near the break-even and is right far from it.
"""
from __future__ import annotations

import math

from ..ops import operator as _operator

__all__ = ["PASS_S", "EVAL_S", "PRODUCT_S", "GRAM_S", "NET_BYTES_S", "GRAM_PARTIAL_BYTES", "stream_seconds",
           "gram_seconds", "cluster_gram_pays", "worker_slots"]

#: Overhead of one pass (a round of block tasks and the reduction of small partials), seconds.
PASS_S = 0.04
#: Kernel evaluation per entry of ``K`` on a worker thread, seconds.
EVAL_S = 5e-9
#: Skinny products of a streaming normal product per ``n m k``, seconds.
PRODUCT_S = 1e-10
#: The rank update of the Gram pass per ``n m^2``, seconds.
GRAM_S = 4.5e-11
#: Bytes per second of the partials' reduction (about a 10 Gb/s network; a ``LocalCluster`` is faster).
NET_BYTES_S = 1e9
#: Largest ``m x m`` float64 partial the Gram route sends (bytes; m = 11585).
GRAM_PARTIAL_BYTES = 2**30


def _rows_per_slot(n, blocks, slots):
    blocks = max(int(blocks), 1)
    return math.ceil(blocks / max(int(slots), 1)) * n / blocks


def _unit_seconds(gpu, route):
    """``(e, c, g)`` of the module notes: CPU constants, or a GPU's for the Gram ``route``."""
    if not gpu:
        return EVAL_S, PRODUCT_S, GRAM_S
    g = {"int8": _operator.GPU_GRAM8_S, "float16": _operator.GPU_GRAM_S}.get(route, _operator.GPU_GRAM64_S)
    return _operator.GPU_EVAL_S, _operator.GPU_PRODUCT_S, g


def stream_seconds(n, m, k, blocks, slots, *, gpu=False):
    """Model time of one streaming normal product (``k`` columns) over ``n`` rows in ``blocks`` on ``slots`` threads."""
    r = _rows_per_slot(n, blocks, slots)
    e, c, _ = _unit_seconds(gpu, None)
    return PASS_S + r * m * (e + c * k) + 8.0 * m * k * blocks / NET_BYTES_S


def gram_seconds(n, m, blocks, slots, *, gpu=False, route=None):
    """Model time of the Gram pass: every block's ``m x m`` partial formed (by ``route`` on GPUs) and reduced."""
    r = _rows_per_slot(n, blocks, slots)
    e, _, g = _unit_seconds(gpu, route)
    return PASS_S + r * m * (e + g * m) + 8.0 * m * m * blocks / NET_BYTES_S


def cluster_gram_pays(n, m, k, products, blocks, slots, *, gpu=False, route=None) -> bool:
    """Whether the Gram pass costs no more than ``products`` streaming normal products (module notes).

    ``gpu``: the workers' chunks are CuPy arrays (``slots`` then counts
    GPUs), on which the Gram pass takes tensor-core ``route`` (``"int8"``,
    ``"float16"`` or None: float64 products).

    Examples
    --------
    >>> cluster_gram_pays(60_000, 400, 5, 20, blocks=4, slots=2)   # a step of stoch-prop: 20 CG iterations
    True
    >>> cluster_gram_pays(60_000, 400, 5, 2, blocks=4, slots=2)
    False
    >>> cluster_gram_pays(2_000_000, 5000, 5, 3, blocks=4, slots=2)
    False
    """
    if 8 * m * m > GRAM_PARTIAL_BYTES:
        return False
    return (products * stream_seconds(n, m, k, blocks, slots, gpu=gpu)
            >= gram_seconds(n, m, blocks, slots, gpu=gpu, route=route))


def worker_slots(client, gpu=False):
    """Worker threads of the cluster behind ``client`` (at least 1); with ``gpu``, its workers (one GPU each)."""
    nthreads = client.nthreads()
    return max(len(nthreads) if gpu else sum(nthreads.values()), 1)
