// Shared device helpers of nyhopt's CUDA kernels: kernel profiles and sums.
//
// Every kernel of nyhopt is a function of the scaled squared distance
//     s = sum_k (x_k - z_k)^2 / ell_k^2,   k(x, z) = phi(s),
// and the adjoints need phi'(s).  KIND selects the profile (same codes as
// nyhopt.ops._numba.KIND_CODES):
//     0 gaussian   phi = exp(-s/2)                      phi' = -phi/2
//     1 laplacian  phi = exp(-r), r = sqrt(s)           phi' = -exp(-r)/(2r), 0 at r = 0
//     2 matern32   phi = (1 + sqrt3 r) exp(-sqrt3 r)    phi' = -3/2 exp(-sqrt3 r)
//     3 matern52   phi = (1 + sqrt5 r + 5s/3) exp(-sqrt5 r)
//                                                     phi' = -5/6 (1 + sqrt5 r) exp(-sqrt5 r)
// T is float or double; arithmetic runs in T, cross-thread sums in double.
// Matern: s is clipped at S_CAP (exp(-sqrt(3 s)) is already 0 there) so that an
// overflowing distance gives 0, not inf * 0 = NaN (nyhopt.kernels.matern.S_CAP).
#pragma once

namespace nh {

__device__ __forceinline__ float exp_(float x) { return expf(x); }
__device__ __forceinline__ double exp_(double x) { return exp(x); }
__device__ __forceinline__ float sqrt_(float x) { return sqrtf(x); }
__device__ __forceinline__ double sqrt_(double x) { return sqrt(x); }

// min(s, 1e6) that keeps NaN (a comparison with NaN is false).
template <typename T>
__device__ __forceinline__ T cap_(T s) { return s > T(1e6) ? T(1e6) : s; }

template <typename T, int KIND>
__device__ __forceinline__ T profile(T s) {
    static_assert(KIND >= 0 && KIND <= 3, "unknown kernel kind");
    if constexpr (KIND == 0) {
        return exp_(T(-0.5) * s);
    } else if constexpr (KIND == 1) {
        return exp_(-sqrt_(s));
    } else if constexpr (KIND == 2) {
        const T a = T(1.7320508075688772) * sqrt_(cap_(s));
        return (T(1) + a) * exp_(-a);
    } else {
        const T sc = cap_(s);
        const T a = T(2.23606797749979) * sqrt_(sc);
        return (T(1) + a + T(5.0 / 3.0) * sc) * exp_(-a);
    }
}

template <typename T, int KIND>
__device__ __forceinline__ T derivative(T s) {
    static_assert(KIND >= 0 && KIND <= 3, "unknown kernel kind");
    if constexpr (KIND == 0) {
        return T(-0.5) * exp_(T(-0.5) * s);
    } else if constexpr (KIND == 1) {
        const T r = sqrt_(s);
        return r > T(0) ? T(-0.5) * exp_(-r) / r : T(0);
    } else if constexpr (KIND == 2) {
        return T(-1.5) * exp_(T(-1.7320508075688772) * sqrt_(s));
    } else {
        const T a = T(2.23606797749979) * sqrt_(cap_(s));
        return T(-5.0 / 6.0) * (T(1) + a) * exp_(-a);
    }
}

// Squared distance between row i of Xs (n x d, row-major) and column j of
// Zt (d x m, row-major): both already divided by the lengthscales.
template <typename T>
__device__ __forceinline__ T sqdist(const T* __restrict__ Xs, const T* __restrict__ Zt,
                                    long long i, long long j, int d, long long m) {
    T s = T(0);
    const T* x = Xs + i * d;
    for (int k = 0; k < d; ++k) {
        const T t = x[k] - Zt[k * m + j];
        s += t * t;
    }
    return s;
}

// float16 as its 16 bits (round to nearest even), and back.  The device uses
// the PTX conversions (no cuda_fp16.h, so NVRTC needs no include path); the
// host emulation of the tests uses the compiler's _Float16.
__device__ __forceinline__ unsigned short half_bits(float x) {
#ifdef __CUDA_ARCH__
    unsigned short h;
    asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(x));
    return h;
#else
    _Float16 h = (_Float16)x;
    unsigned short bits;
    memcpy(&bits, &h, 2);
    return bits;
#endif
}

__device__ __forceinline__ float half_value(unsigned short bits) {
#ifdef __CUDA_ARCH__
    float x;
    asm("cvt.f32.f16 %0, %1;" : "=f"(x) : "h"(bits));
    return x;
#else
    _Float16 h;
    memcpy(&h, &bits, 2);
    return (float)h;
#endif
}

// A kernel value k in [0, 1] as three signed 8-bit digits, at d[0], d[plane], d[2 plane]:
//     k = (d0 + d1 / 254 + d2 / 254^2) / 127 + r,   |r| <= 0.5 / (127 * 254^2),
// each digit the nearest integer to what is left (ties to even), so d0 is in
// [0, 127] and d1, d2 in [-127, 127].  In double, where every step is exact
// (a float k has 24 bits; 127 * 254 * 254 < 2^23 more).  k is clipped to
// [0, 1] first; a NaN gives 0 (the data are checked finite before).
__device__ __forceinline__ void digits3(double k, signed char* d, long long plane) {
    k = k > 1.0 ? 1.0 : (k >= 0.0 ? k : 0.0);
    double v = k * 127.0;
    const double d0 = rint(v);
    v = (v - d0) * 254.0;
    const double d1 = rint(v);
    v = (v - d1) * 254.0;
    const double d2 = rint(v);
    d[0] = (signed char)d0;
    d[plane] = (signed char)d1;
    d[2 * plane] = (signed char)d2;
}

// Sum of v over the 32 lanes of a warp (every lane gets the result).
__device__ __forceinline__ double warp_sum(double v) {
    for (int offset = 16; offset > 0; offset >>= 1) {
        v += __shfl_xor_sync(0xffffffffu, v, offset);
    }
    return v;
}

}  // namespace nh
