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

// The device-memory test's patterns: mode 0 stores in each word its own
// index plus a seed (address in address: a word that lands at the wrong
// address, or an address line stuck, reads back another word's value);
// mode 1 a single 1 bit at a position that moves with the index and the seed
// (walking ones: a data bit stuck at 0 or 1 shows in the pass that walks it).
static inline uint32_t memtest_pattern(uint32_t mode, uint32_t seed, uint64_t i) {
  return mode == 0 ? (uint32_t)i + seed : 1u << ((uint32_t)(i + seed) & 31u);
}

__kernel void memtest_write(__global uint32_t *buf, uint32_t mode, uint32_t seed, uint32_t n) {
  uint64_t i = global_id_x();
  if (i < n) {
    buf[i] = memtest_pattern(mode, seed, i);
  }
}

// Counts the words that do not hold their pattern in errors[0] and records
// the first `capacity` of them as (word index, bits that differ) pairs after it.
__kernel void memtest_check(__global const uint32_t *buf, uint32_t mode, uint32_t seed, uint32_t n,
                            __global uint32_t *errors, uint32_t capacity) {
  uint64_t i = global_id_x();
  if (i < n) {
    uint32_t want = memtest_pattern(mode, seed, i);
    uint32_t got = buf[i];
    if (got != want) {
      uint32_t k = __atomic_fetch_add(&errors[0], 1u, __ATOMIC_RELAXED);
      if (k < capacity) {
        errors[1 + 2 * k] = (uint32_t)i;
        errors[2 + 2 * k] = got ^ want;
      }
    }
  }
}

// STREAM triad: a[i] = b[i] + scalar * c[i], for memory bandwidth.
__kernel void triad(__global float *a, __global const float *b, __global const float *c, float scalar, uint32_t n) {
  uint64_t i = global_id_x();
  if (i < n) {
    a[i] = b[i] + scalar * c[i];
  }
}

// BabelStream copy: c[i] = a[i], for memory bandwidth (one load, one store).
__kernel void stream_copy(__global const float *a, __global float *c, uint32_t n) {
  uint64_t i = global_id_x();
  if (i < n) {
    c[i] = a[i];
  }
}

// The burn-in's integer work: a 32-bit mix (an avalanche of multiplies,
// shifts and xors) applied `rounds` times to the seed and the word's index,
// xored into out[i]. Integer arithmetic has one right answer, so the same
// launch on any GPU, at any time, gives the same bits: a word that differs
// is a computation the GPU got wrong.
static inline uint32_t burn_mix(uint32_t x) {
  x ^= x >> 16;
  x *= 0x7feb352du;
  x ^= x >> 15;
  x *= 0x846ca68bu;
  x ^= x >> 16;
  return x;
}

__kernel void burn_hash(__global uint32_t *out, uint32_t seed, uint32_t rounds, uint32_t n) {
  uint64_t i = global_id_x();
  if (i < n) {
    uint32_t x = seed ^ (uint32_t)i;
    for (uint32_t r = 0; r < rounds; r++) {
      x = burn_mix(x + r);
    }
    out[i] ^= x;
  }
}
