// Kernel block from a distance product: one pass over the b x m block
//     s_ij = max(xn_i + zn_j - 2 g_ij, 0),   out_ij = phi(s_ij),
// where g = Xs Zs^T comes from one cuBLAS GEMM and xn, zn are the squared
// norms of the scaled (and centered) rows and centers.  It replaces the
// chain "GEMM, scale, add the norms, clamp, profile, cast" of elementwise
// passes by one read of g and one write of the result.
//
// OUT selects the output:
//   0  T (b, m), row stride m; `out` may be `g` itself (in place);
//   1  float16 bits (b, 2m), row stride 2m: hi_ij = fl16(k_ij) in columns
//      [0, m), lo_ij = fl16(2^11 (k_ij - hi_ij)) in columns [m, 2m), so that
//      k = hi + lo / 2048 to about 2^-22 of k (the split Gram route,
//      nyhopt.ops.gram16).
//
// Launch: block (32, 8), grid (ceil(m / 32), min(ceil(b / 8), 65535)), as
// nh_kernel_block: threads of a warp take consecutive centers (coalesced),
// the grid strides over rows.
#include "common.cuh"

template <typename T, int KIND, int OUT>
__global__ void nh_kernel_dot(const T* g,                     // (b, m) Xs Zs^T
                              const T* __restrict__ xn,       // (b,) squared norms of the rows
                              const T* __restrict__ zn,       // (m,) squared norms of the centers
                              void* out,                      // see OUT
                              int b, int m) {
    static_assert(OUT == 0 || OUT == 1, "unknown output form");
    const long long j = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (j >= m) return;
    const T zj = zn[j];
    for (long long i = (long long)blockIdx.y * blockDim.y + threadIdx.y; i < b;
         i += (long long)gridDim.y * blockDim.y) {
        T s = xn[i] + zj - T(2) * g[i * m + j];
        s = s < T(0) ? T(0) : s;  // clamp rounding below zero; a NaN stays NaN
        const T k = nh::profile<T, KIND>(s);
        if constexpr (OUT == 0) {
            static_cast<T*>(out)[i * m + j] = k;
        } else {
            unsigned short* o = static_cast<unsigned short*>(out) + i * 2 * (long long)m;
            const float kf = (float)k;
            const unsigned short hi = nh::half_bits(kf);
            o[j] = hi;
            o[m + j] = nh::half_bits((kf - nh::half_value(hi)) * 2048.0f);
        }
    }
}
