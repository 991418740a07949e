// The launch-latency floor: cuLaunchKernel in a C++ loop (driver API, no Python).
// Build: nvcc -O2 -o launch_floor launch_floor.cu -lcuda
// Run:   ./launch_floor <nargs> <iterations>   -> prints ns per launch
#include <cuda.h>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

#define CHECK(x) do { CUresult e = (x); if (e != CUDA_SUCCESS) { \
    const char *s; cuGetErrorName(e, &s); std::fprintf(stderr, "%s: %s\n", #x, s); return 1; } } while (0)

static const char *PTX_TEMPLATE_HEAD = ".version 7.0\n.target sm_70\n.address_size 64\n.visible .entry k(";

int main(int argc, char **argv) {
    int nargs = argc > 1 ? std::atoi(argv[1]) : 0;
    long iters = argc > 2 ? std::atol(argv[2]) : 100000;
    std::string ptx = PTX_TEMPLATE_HEAD;
    for (int i = 0; i < nargs; ++i)
        ptx += std::string(i ? ", " : "") + ".param .u64 p" + std::to_string(i);
    ptx += ") { ret; }\n";
    CUdevice dev; CUcontext ctx; CUmodule mod; CUfunction f; CUstream s;
    CHECK(cuInit(0)); CHECK(cuDeviceGet(&dev, 0)); CHECK(cuDevicePrimaryCtxRetain(&ctx, dev));
    CHECK(cuCtxSetCurrent(ctx)); CHECK(cuModuleLoadData(&mod, ptx.c_str()));
    CHECK(cuModuleGetFunction(&f, mod, "k")); CHECK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    std::vector<unsigned long long> vals(nargs > 0 ? nargs : 1, 0);
    std::vector<void *> params(nargs > 0 ? nargs : 1);
    for (int i = 0; i < nargs; ++i) params[i] = &vals[i];
    for (int i = 0; i < 1000; ++i)
        CHECK(cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, s, params.data(), nullptr));
    CHECK(cuStreamSynchronize(s));
    auto t0 = std::chrono::steady_clock::now();
    for (long i = 0; i < iters; ++i)
        CHECK(cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, s, params.data(), nullptr));
    auto t1 = std::chrono::steady_clock::now();
    CHECK(cuStreamSynchronize(s));
    std::printf("%.1f\n", std::chrono::duration<double, std::nano>(t1 - t0).count() / iters);
    return 0;
}
