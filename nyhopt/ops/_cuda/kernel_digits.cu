// Kernel block as three signed 8-bit digits, in the layout of integer tensor-core products.
//
// For the Gram matrix G = K^T K on int8 tensor cores (nyhopt.ops.gram8), each
// kernel value k in [0, 1] is written as
//     k = (d0 + d1 / 254 + d2 / 254^2) / 127 + r,   d0 in [0, 127], d1, d2 in [-127, 127],
// |r| <= 0.5 / (127 * 254^2) = 6.1e-8 (nh::digits3), and every product of two
// digit planes is an exact sum of integers.
//
// Input `kt` is the block transposed, (m, b) row-major, so that the rows of
// the data (the sum of G) are contiguous:
//   FROM 0  the distance product Zs Xs^T; overwritten in place with k
//           (s = max(xn_i + zn_j - 2 g_ji, 0), k = phi(s), as nh_kernel_dot);
//   FROM 1  kernel values already evaluated (KIND is then unused).
// Output `digits`: three planes of `plane` bytes, plane p holding digit p of
// k_ij at j * ld + i; the columns i in [b, ld) of every row j < m are set to 0
// (a product may run over a padded length).  Rows j >= m are not touched.
//
// Launch: block (32, 8), grid (ceil(ld / 32), min(ceil(m / 8), 65535)): threads
// of a warp take consecutive rows i (coalesced reads and writes), the grid
// strides over the centers j.
#include "common.cuh"

template <typename T, int KIND, int FROM>
__global__ void nh_kernel_digits(T* kt,                          // (m, b), see FROM
                                 const T* __restrict__ xn,       // (b,) squared norms of the rows (FROM 0)
                                 const T* __restrict__ zn,       // (m,) squared norms of the centers (FROM 0)
                                 signed char* digits,            // 3 planes of (>= m, ld)
                                 int b, int m, int ld, long long plane) {
    static_assert(FROM == 0 || FROM == 1, "unknown input form");
    const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= ld) return;
    for (long long j = (long long)blockIdx.y * blockDim.y + threadIdx.y; j < m;
         j += (long long)gridDim.y * blockDim.y) {
        signed char* d = digits + j * ld + i;
        if (i >= b) {
            d[0] = 0;
            d[plane] = 0;
            d[2 * plane] = 0;
            continue;
        }
        T k;
        if constexpr (FROM == 0) {
            T s = xn[i] + zn[j] - T(2) * kt[j * b + i];
            s = s < T(0) ? T(0) : s;
            k = nh::profile<T, KIND>(s);
            kt[j * b + i] = k;
        } else {
            k = kt[j * b + i];
        }
        nh::digits3((double)k, d, plane);
    }
}
