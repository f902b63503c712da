// mma.sync f16->f32 m16n8k16 issue rate against warps per SM, accumulator chains per warp and
// interleaved ldmatrix (1 ldmatrix.x4 per LD mmas, into registers consumed once per iteration).
#include <cstdio>
#include <cuda_runtime.h>

template <int CHAINS, int LD>
__global__ void rate(float* out, int iters) {
  __shared__ unsigned smem[4096];
  for (int i = threadIdx.x; i < 4096; i += blockDim.x) smem[i] = i * 2654435761u;
  __syncthreads();
  float acc[CHAINS][4];
#pragma unroll
  for (int c = 0; c < CHAINS; c++) acc[c][0] = acc[c][1] = acc[c][2] = acc[c][3] = 0.f;
  unsigned a0 = threadIdx.x, a1 = a0 * 3, a2 = a0 * 5, a3 = a0 * 7, b0 = a0 * 11, b1 = a0 * 13;
  unsigned x0 = 0, x1 = 0, x2 = 0, x3 = 0;
  unsigned addr = (unsigned)__cvta_generic_to_shared(smem) + ((threadIdx.x % 32) * 16 + (threadIdx.x / 32) * 512) % 16384;
  for (int it = 0; it < iters; it++) {
#pragma unroll
    for (int c = 0; c < CHAINS; c++) {
      asm volatile(
          "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
          : "+f"(acc[c][0]), "+f"(acc[c][1]), "+f"(acc[c][2]), "+f"(acc[c][3])
          : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
      if (LD && c % LD == LD - 1) {
        unsigned y0, y1, y2, y3;
        asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];"
                     : "=r"(y0), "=r"(y1), "=r"(y2), "=r"(y3) : "r"(addr + c * 16 % 2048));
        x0 ^= y0; x1 ^= y1; x2 ^= y2; x3 ^= y3;
      }
    }
    b0 ^= x0 & 1; b1 ^= x1 & 1;
  }
  float s = 0.f;
#pragma unroll
  for (int c = 0; c < CHAINS; c++) s += acc[c][0] + acc[c][1] + acc[c][2] + acc[c][3];
  out[blockIdx.x * blockDim.x + threadIdx.x] = s + (x2 ^ x3);
}

template <int CHAINS, int LD>
void run(int warps_per_block, int blocks_per_sm, int sms, float* out) {
  int iters = 2000;
  dim3 grid(sms * blocks_per_sm), block(32 * warps_per_block);
  rate<CHAINS, LD><<<grid, block>>>(out, 10);
  cudaEvent_t e0, e1;
  cudaEventCreate(&e0); cudaEventCreate(&e1);
  cudaEventRecord(e0);
  rate<CHAINS, LD><<<grid, block>>>(out, iters);
  cudaEventRecord(e1);
  cudaEventSynchronize(e1);
  float ms; cudaEventElapsedTime(&ms, e0, e1);
  double flop = 2.0 * 16 * 8 * 16 * CHAINS * (double)iters * grid.x * warps_per_block;
  printf("chains %2d ldsm-per %2d warps/SM %2d (%d x %d): %7.1f TFLOP/s\n", CHAINS, LD,
         warps_per_block * blocks_per_sm, blocks_per_sm, warps_per_block, flop / ms / 1e9);
}

int main() {
  int sms; cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
  float* out; cudaMalloc(&out, sizeof(float) * sms * 32 * 1024 * 4);
  int configs[][2] = {{4, 1}, {8, 1}, {4, 3}, {8, 2}, {4, 4}, {8, 3}, {8, 4}};
  for (auto& c : configs) run<8, 0>(c[0], c[1], sms, out);
  for (auto& c : configs) run<32, 0>(c[0], c[1], sms, out);
  for (auto& c : configs) run<32, 4>(c[0], c[1], sms, out);
  for (auto& c : configs) run<32, 8>(c[0], c[1], sms, out);
  cudaError_t err = cudaDeviceSynchronize();
  if (err != cudaSuccess) printf("error %s\n", cudaGetErrorString(err));
  return 0;
}
