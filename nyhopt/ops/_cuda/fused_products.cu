// Fused streaming kernel products: no kernel block ever reaches global memory.
//
//     out[a, c0 + q] = sum_{b in range} phi(s(A_a, B_b)) V[b, c0 + q],   q < kc,
//
// with s the squared distance between scaled points.  The kernel is symmetric
// in its two points, so one template serves both products of nyhopt.ops:
//
//     K V     (kmv):  A = X / ell (n, d),  B = Z / ell (m, d),  V (m, k)      ->  (n, k)
//     K^T U  (kmtv):  A = Z / ell (m, d),  B = X / ell (n, d),  V = U (n, k)  ->  (m, k)
//
// and K^T (K V) is two sweeps: W = K V, then K^T W (recomputing K).
//
// Tiling.  A block of 32 x 8 threads owns BM = 64 points of A (the rows of the
// result) and sweeps the points of B in its range
// [chunk * blockIdx.y, chunk * (blockIdx.y + 1)) in tiles of BN = 64.  Lane
// `lane` (threadIdx.x) takes the TM = 2 A points TM lane + r, warp `warp`
// (threadIdx.y) the TN = 8 B points TN warp + c of the tile.  Per tile:
//   1. the coordinates of the A and B tiles are staged, transposed, in shared
//      memory, DK coordinates at a time (the A tile once when d <= DK), and each
//      thread forms the squared distances of its 2 x 8 micro-tile in registers:
//      from coordinate differences in the order of nh::sqdist (exact zeros for
//      coincident points), or, when `dot` is set (never for the Laplacian,
//      whose cusp needs exact distances), as |a|^2 + |b|^2 - 2 a.b clipped at
//      0 with the squared norms An2, Bn2 given by the caller (half the work);
//   2. phi(s) = nh::profile in registers;
//   3. the rows of V for the B tile (columns c0 .. c0 + kc) are in shared memory
//      (a warp reads the same entries: broadcasts) and each thread accumulates
//      acc[r][q] += sum_c phi_rc V[b_c, c0 + q] in T.
// Every FLUSH tiles and at the end, the 8 warps add their acc, one warp after
// the other, into a double sum S in shared memory: T sums run over at most
// FLUSH * TN terms, every longer sum is in double.  At the end the block writes
// its BM x kc sums: cast to T and stored into `out` when `accumulate` is 0 (the
// range is all of B), or added with atomicAdd into the double `out64` (zeroed
// by the caller) when B is split across blocks.  Outputs are row-major with
// leading dimension `ldo`.  Arguments that a call does not use (one of the
// outputs, the norms without `dot`) may be any valid pointer, never a null one
// (CuPy passes None as an invalid address).
//
// Launch: block (32, 8); grid (ceil(na / 64), ceil(nb / chunk)), chunk a
// multiple of 64; 1 <= kc <= KC; KC in {8, 16, 32} for float, {8, 16} for
// double.  Static shared memory: (2 DK + KC) (64 + 4) + 64 T and 64 KC double,
// at most 41.75 KiB (float, KC = 32).  Registers on sm_90 (nvcc 13, ptxas -v),
// no spills: float 168 (KC = 32), 96 (16), 72-96 (8); double 166-168 (16),
// 128 (8): one block of 8 warps per multiprocessor for KC = 32.
#include "common.cuh"

namespace nh {
namespace fused {

constexpr int LANES = 32, WARPS = 8, THREADS = LANES * WARPS;
constexpr int TM = 2, TN = 8;                    // micro-tile of a thread: A points x B points
constexpr int BM = LANES * TM, BN = WARPS * TN;  // block tile: 64 x 64
constexpr int PAD = 4;                           // rows of 68 entries: 16-byte aligned, fewer bank conflicts
constexpr int FLUSH = 32;                        // tiles between two flushes into double

// out[kk][p] = src[(p0 + p) d + k0 + kk] for p < ROWS, kk < dk; 0 past `end`.
// A warp copies one point at a time (its coordinates are contiguous).
template <typename T, int ROWS>
__device__ __forceinline__ void stage_coords(T (*out)[ROWS + PAD], const T* __restrict__ src, long long p0,
                                             long long end, int d, int k0, int dk, int lane, int warp) {
    for (int p = warp; p < ROWS; p += WARPS) {
        const long long i = p0 + p;
        for (int kk = lane; kk < dk; kk += LANES) out[kk][p] = i < end ? src[i * d + k0 + kk] : T(0);
    }
}

// S[q][TM lane + r] += acc[r][q], one warp after the other; acc is zeroed.
template <typename T, int KC>
__device__ __forceinline__ void flush(T (&acc)[TM][KC], double* S, int lane, int warp) {
    for (int w = 0; w < WARPS; ++w) {
        if (warp == w) {
#pragma unroll
            for (int q = 0; q < KC; ++q)
#pragma unroll
                for (int r = 0; r < TM; ++r) S[q * BM + TM * lane + r] += (double)acc[r][q];
        }
        __syncthreads();
    }
#pragma unroll
    for (int q = 0; q < KC; ++q)
#pragma unroll
        for (int r = 0; r < TM; ++r) acc[r][q] = T(0);
}

// s[r][c] += x_r z_c (DOT) or (x_r - z_c)^2 over the dk staged coordinates of the
// thread's A points TM lane + r and B points TN warp + c.
template <bool DOT, typename T>
__device__ __forceinline__ void micro_tile(T (&s)[TM][TN], const T (*As)[BM + PAD], const T (*Bs)[BN + PAD],
                                           int dk, int lane, int warp) {
#pragma unroll 4
    for (int kk = 0; kk < dk; ++kk) {
        T x[TM], z[TN];
#pragma unroll
        for (int r = 0; r < TM; ++r) x[r] = As[kk][TM * lane + r];
#pragma unroll
        for (int c = 0; c < TN; ++c) z[c] = Bs[kk][TN * warp + c];
#pragma unroll
        for (int r = 0; r < TM; ++r)
#pragma unroll
            for (int c = 0; c < TN; ++c) {
                if constexpr (DOT) {
                    s[r][c] += x[r] * z[c];
                } else {
                    const T t = x[r] - z[c];
                    s[r][c] += t * t;
                }
            }
    }
}

}  // namespace fused
}  // namespace nh

template <typename T, int KIND, int KC>
__global__ void nh_fused_products(const T* __restrict__ A,    // (na, d) scaled points: rows of the result
                                  const T* __restrict__ B,    // (nb, d) scaled points: summed over
                                  const T* __restrict__ V,    // (nb, ldv) operand
                                  const T* __restrict__ An2,  // (na,) squared norms of A (dot only)
                                  const T* __restrict__ Bn2,  // (nb,) squared norms of B (dot only)
                                  int na, int nb, int d, int ldv, int c0, int kc, int chunk, int dot,
                                  int accumulate,
                                  T* __restrict__ out,         // (na, ldo) when accumulate == 0
                                  double* __restrict__ out64,  // (na, ldo) when accumulate != 0
                                  int ldo) {
    using namespace nh::fused;
    constexpr int DK = 128 / sizeof(T);  // coordinates staged at a time: 32 float, 16 double
    static_assert(KC % 8 == 0 && KC * sizeof(T) <= 128, "KC must be 8, 16 (or 32 for float)");
    __shared__ __align__(16) T As[DK][BM + PAD];
    __shared__ __align__(16) T Bs[DK][BN + PAD];
    __shared__ __align__(16) T Vs[KC][BN + PAD];
    __shared__ T Bn[BN];
    __shared__ double S[KC * BM];

    const int lane = threadIdx.x, warp = threadIdx.y, tid = warp * LANES + lane;
    const long long a0 = (long long)blockIdx.x * BM;
    const long long b_begin = (long long)blockIdx.y * chunk;
    const long long b_end = b_begin + chunk < nb ? b_begin + chunk : nb;
    const bool a_once = d <= DK;
    const bool use_dot = KIND != 1 && dot;

    for (int e = tid; e < KC * BM; e += THREADS) S[e] = 0.0;
    T acc[TM][KC];
#pragma unroll
    for (int r = 0; r < TM; ++r)
#pragma unroll
        for (int q = 0; q < KC; ++q) acc[r][q] = T(0);
    T an[TM];
#pragma unroll
    for (int r = 0; r < TM; ++r) {
        const long long i = a0 + TM * lane + r;
        an[r] = (use_dot && i < na) ? An2[i] : T(0);
    }
    if (a_once) stage_coords<T, BM>(As, A, a0, na, d, 0, d, lane, warp);

    int since_flush = 0;
    for (long long b0 = b_begin; b0 < b_end; b0 += BN) {
        for (int e = tid; e < BN * KC; e += THREADS) {
            const int b = e / KC, q = e % KC;
            const long long i = b0 + b;
            Vs[q][b] = (i < b_end && q < kc) ? V[i * ldv + c0 + q] : T(0);
        }
        if (use_dot && tid < BN) Bn[tid] = b0 + tid < b_end ? Bn2[b0 + tid] : T(0);
        T s[TM][TN];
#pragma unroll
        for (int r = 0; r < TM; ++r)
#pragma unroll
            for (int c = 0; c < TN; ++c) s[r][c] = T(0);
        for (int k0 = 0; k0 < d; k0 += DK) {
            const int dk = d - k0 < DK ? d - k0 : DK;
            if (k0 > 0) __syncthreads();  // the previous coordinates are read
            if (!a_once) stage_coords<T, BM>(As, A, a0, na, d, k0, dk, lane, warp);
            stage_coords<T, BN>(Bs, B, b0, b_end, d, k0, dk, lane, warp);
            __syncthreads();
            if (use_dot) {
                micro_tile<true>(s, As, Bs, dk, lane, warp);
            } else {
                micro_tile<false>(s, As, Bs, dk, lane, warp);
            }
        }
#pragma unroll
        for (int c = 0; c < TN; ++c) {
            const bool ok = b0 + TN * warp + c < b_end;
            const T bn = use_dot ? Bn[TN * warp + c] : T(0);
#pragma unroll
            for (int r = 0; r < TM; ++r) {
                T v = s[r][c];
                if (use_dot) {
                    v = T(-2) * v + an[r] + bn;
                    v = v < T(0) ? T(0) : v;  // keeps NaN
                }
                s[r][c] = ok ? nh::profile<T, KIND>(v) : T(0);
            }
        }
#pragma unroll
        for (int q = 0; q < KC; ++q) {
            if (q < kc) {
                T v[TN];
#pragma unroll
                for (int c = 0; c < TN; ++c) v[c] = Vs[q][TN * warp + c];
#pragma unroll
                for (int r = 0; r < TM; ++r)
#pragma unroll
                    for (int c = 0; c < TN; ++c) acc[r][q] += s[r][c] * v[c];
            }
        }
        __syncthreads();  // Bs, Vs, Bn (and As) are read before the next tile overwrites them
        if (++since_flush == FLUSH) {
            flush(acc, S, lane, warp);
            since_flush = 0;
        }
    }
    if (since_flush > 0) flush(acc, S, lane, warp);

    for (int e = tid; e < BM * KC; e += THREADS) {
        const int a = e / KC, q = e % KC;
        const long long i = a0 + a;
        if (i < na && q < kc) {
            if (accumulate) {
                atomicAdd(out64 + i * ldo + c0 + q, S[q * BM + a]);
            } else {
                out[i * ldo + c0 + q] = T(S[q * BM + a]);
            }
        }
    }
}
