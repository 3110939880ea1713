// rocgate's device kernels, compiled to AMDGPU code objects at build time.
// Written without the ROCm device library (-nogpulib): the global id comes
// from the AQL dispatch packet, so the same code object runs under HSA and HIP.

typedef unsigned int uint32_t;
typedef unsigned long uint64_t;

static inline uint64_t global_id_x(void) {
  // hsa_kernel_dispatch_packet_t: workgroup_size_x is the u16 at byte 4.
  __constant unsigned short *packet = (__constant unsigned short *)__builtin_amdgcn_dispatch_ptr();
  uint64_t workgroup_size = packet[2];
  return (uint64_t)__builtin_amdgcn_workgroup_id_x() * workgroup_size + __builtin_amdgcn_workitem_id_x();
}

// c[i] = a[i] + b[i]
__kernel void vector_add(__global const float *a, __global const float *b, __global float *c, uint32_t n) {
  uint64_t i = global_id_x();
  if (i < n) {
    c[i] = a[i] + b[i];
  }
}

// out[i] = value + i: a result no stale buffer can match by accident.
__kernel void fill(__global uint32_t *out, uint32_t value, uint32_t n) {
  uint64_t i = global_id_x();
  if (i < n) {
    out[i] = value + (uint32_t)i;
  }
}

// STREAM triad: a[i] = b[i] + scalar * c[i], for memory bandwidth.
__kernel void triad(__global float *a, __global const float *b, __global const float *c, float scalar, uint32_t n) {
  uint64_t i = global_id_x();
  if (i < n) {
    a[i] = b[i] + scalar * c[i];
  }
}
