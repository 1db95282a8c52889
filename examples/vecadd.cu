// A small CUDA library for the cudaship README example: one kernel and a C entry point.
#include <cuda_runtime.h>

__global__ void vecadd(const float* a, const float* b, float* c, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) c[i] = a[i] + b[i];
}

extern "C" int vecadd_launch(const float* a, const float* b, float* c, int n) {
    vecadd<<<(n + 255) / 256, 256>>>(a, b, c, n);
    return static_cast<int>(cudaGetLastError());
}

// A C++ (mangled) export, so `cudaship inspect --demangle` has something to show.
namespace vecadd_lib {
int abi_version() { return 1; }
}  // namespace vecadd_lib
