// Fused kernel-value block: out[i, j] = phi(s_ij) for rows i of Xs and
// columns j of Zt, with s from coordinate differences (exact zeros for
// coincident points, as the Laplacian needs).  One thread per entry; threads
// of a warp take consecutive centers j (coalesced loads of Zt and stores of
// out), the grid strides over rows so any number of rows fits.
//
// Launch: block (32, 8), grid (ceil(m / 32), min(ceil(b / 8), 65535)).
#include "common.cuh"

template <typename T, int KIND>
__global__ void nh_kernel_block(const T* __restrict__ Xs,  // (b, d) scaled rows
                                const T* __restrict__ Zt,  // (d, m) scaled centers, transposed
                                T* __restrict__ out,       // (b, m)
                                int b, int m, int d) {
    const long long j = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (j >= m) return;
    for (long long i = (long long)blockIdx.y * blockDim.y + threadIdx.y; i < b;
         i += (long long)gridDim.y * blockDim.y) {
        out[i * m + j] = nh::profile<T, KIND>(nh::sqdist<T>(Xs, Zt, i, j, d, m));
    }
}
