// Fused adjoint contraction of a kernel matrix K = k(X, Z) with a cotangent
// G (dense n x m, or low rank G = P Q^T), without any n x m temporary:
//
//     W_ij = G_ij phi'(s_ij),   G_ij = P_i . Q_j  (LOWRANK)
//     gz[k, j]  += sum_i W_ij (Zs_jk - Xs_ik)          (center gradient / (2 / ell_k))
//     gell[k]   += sum_ij W_ij (Zs_jk - Xs_ik)^2       (lengthscale gradient / (-2 / ell_k))
//     gx[i, k]  += sum_j W_ij (Xs_ik - Zs_jk)          (X gradient / (2 / ell_k))
//
// `wanted` is a bit mask of the sums to compute: 1 = gz, 2 = gell, 4 = gx (the
// others are never touched: pass any valid pointer, never a null one, since
// CuPy passes None as an invalid address).  The outputs are float64 and must
// be zeroed by the caller; blocks add their parts with atomicAdd.
//
// Layout: block (32, 8) = 8 warps; lane tx takes center j = 32 * blockIdx.x + tx,
// warp ty takes rows 32 * tile + 8 * rr + ty (rr = 0..3) of each 32-row tile;
// blocks stride over tiles along gridDim.y.  A warp therefore works on one row
// at a time (its X-gradient sum over j is a warp reduction) and the center
// and lengthscale sums of a block build up in shared memory across its tiles
// before one atomicAdd per entry.  Each thread sums its 4 rows in T; every
// sum across threads is in double.
//
// Dynamic shared memory: (32 * d + d) doubles.
#include "common.cuh"

template <typename T, int KIND, bool LOWRANK>
__global__ void nh_adjoint(const T* __restrict__ Xs,  // (n, d) scaled rows
                           const T* __restrict__ Zt,  // (d, m) scaled centers, transposed
                           const T* __restrict__ C,   // G (n, m), or P (n, r) when LOWRANK
                           const T* __restrict__ Qt,  // (r, m) when LOWRANK, else unused
                           int n, int m, int d, int r, int wanted,
                           double* __restrict__ gz,    // (d, m)
                           double* __restrict__ gell,  // (d,)
                           double* __restrict__ gx) {  // (n, d)
    constexpr int ROWS = 4;
    extern __shared__ double shared[];
    double* sz = shared;           // (d, 32)
    double* se = shared + 32 * d;  // (d,)
    const int tx = threadIdx.x, ty = threadIdx.y;
    const int tid = ty * 32 + tx;
    const bool want_z = wanted & 1, want_ell = wanted & 2, want_x = wanted & 4;
    for (int q = tid; q < 33 * d; q += 256) shared[q] = 0.0;
    __syncthreads();

    const long long j = (long long)blockIdx.x * 32 + tx;
    const bool j_ok = j < m;
    const long long jc = j_ok ? j : m - 1;  // clamped: loads stay in bounds
    const long long ntiles = ((long long)n + 31) / 32;

    for (long long tile = blockIdx.y; tile < ntiles; tile += gridDim.y) {
        T w[ROWS];
        long long row[ROWS];
#pragma unroll
        for (int rr = 0; rr < ROWS; ++rr) {
            const long long i = tile * 32 + rr * 8 + ty;
            const long long ic = i < n ? i : n - 1;
            row[rr] = i;
            const T s = nh::sqdist<T>(Xs, Zt, ic, jc, d, m);
            T c;
            if constexpr (LOWRANK) {
                c = T(0);
                for (int q = 0; q < r; ++q) c += C[ic * r + q] * Qt[(long long)q * m + jc];
            } else {
                c = C[ic * m + jc];
            }
            w[rr] = (j_ok && i < n) ? c * nh::derivative<T, KIND>(s) : T(0);
        }
        for (int k = 0; k < d; ++k) {
            const T z = Zt[(long long)k * m + jc];
            T zsum = T(0), esum = T(0);
#pragma unroll
            for (int rr = 0; rr < ROWS; ++rr) {
                const long long ic = row[rr] < n ? row[rr] : n - 1;
                const T t = z - Xs[ic * d + k];
                const T wt = w[rr] * t;
                zsum += wt;
                esum += wt * t;
                if (want_x) {
                    const double v = nh::warp_sum(-(double)wt);
                    if (tx == 0 && row[rr] < n) atomicAdd(gx + row[rr] * d + k, v);
                }
            }
            if (want_z) atomicAdd(sz + k * 32 + tx, (double)zsum);
            if (want_ell) {
                const double v = nh::warp_sum((double)esum);
                if (tx == 0) atomicAdd(se + k, v);
            }
        }
    }
    __syncthreads();
    if (want_z) {
        for (int q = tid; q < 32 * d; q += 256) {
            const long long jj = (long long)blockIdx.x * 32 + (q % 32);
            if (jj < m) atomicAdd(gz + (long long)(q / 32) * m + jj, sz[q]);
        }
    }
    if (want_ell) {
        for (int k = tid; k < d; k += 256) atomicAdd(gell + k, se[k]);
    }
}
