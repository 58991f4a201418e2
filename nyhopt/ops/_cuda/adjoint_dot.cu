// Weights of the low-rank adjoint from two distance-free products, in one pass:
//     W_ij = c_ij phi'(s_ij),   s_ij = max(xn_i + zn_j - 2 g_ij, 0),
// where g = Xs Zs^T and c = P Q^T come from cuBLAS GEMMs (nyhopt.ops._adjoint_gemm),
// written in float64 for the float64 sums that follow (W^T Xs, row and column sums).
//
// Launch: block (32, 8), grid (ceil(m / 32), min(ceil(b / 8), 65535)), as nh_kernel_dot.
#include "common.cuh"

template <typename T, int KIND>
__global__ void nh_adjoint_dot(const T* __restrict__ g,   // (b, m) Xs Zs^T
                               const T* __restrict__ c,   // (b, m) P Q^T
                               const T* __restrict__ xn,  // (b,)
                               const T* __restrict__ zn,  // (m,)
                               double* __restrict__ W,    // (b, m)
                               int b, int m) {
    const long long j = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (j >= m) return;
    const T zj = zn[j];
    for (long long i = (long long)blockIdx.y * blockDim.y + threadIdx.y; i < b;
         i += (long long)gridDim.y * blockDim.y) {
        const long long e = i * m + j;
        T s = xn[i] + zj - T(2) * g[e];
        s = s < T(0) ? T(0) : s;
        W[e] = (double)c[e] * (double)nh::derivative<T, KIND>(s);
    }
}
