/* The package's native launcher (python/flashmlir/_native.py loads it with
 * ctypes): binds a call's tensor addresses into the prepacked parameter
 * slots of a sequence of launch plans, encodes the plans' TMA tensor maps
 * for those addresses and issues every launch, in one call from Python
 * instead of one ctypes call per slot and per driver function.
 *
 * It knows nothing about CUDA's headers or library: the driver entry points
 * are function pointers the package takes from the libcuda it loaded (so the
 * tests' fake driver works too), and every handle is an opaque pointer. The
 * layout of the structs is mirrored in _native.py; FM_ABI changes with it.
 */
#include <stdint.h>

#define FM_ABI 2

typedef int (*fm_launch_fn)(void *function, unsigned gx, unsigned gy, unsigned gz,
                            unsigned bx, unsigned by, unsigned bz, unsigned shared_bytes,
                            void *stream, void **params, void **extra);
typedef int (*fm_ctx_get_fn)(void **ctx);
typedef int (*fm_ctx_push_fn)(void *ctx);
typedef int (*fm_ctx_pop_fn)(void **ctx);
/* cuTensorMapEncodeTiled (enums as int, cuuint32_t/cuuint64_t as below). */
typedef int (*fm_encode_fn)(void *map, int data_type, uint32_t rank, void *address,
                            const uint64_t *global_dim, const uint64_t *global_strides,
                            const uint32_t *box, const uint32_t *element_strides,
                            int interleave, int swizzle, int l2_promotion, int oob_fill);

/* One memref parameter: the pointer of tensor `tensor` (plus `byte_offset`,
 * for buffers carved out of one allocation) goes into the aligned slot, the
 * start of its storage into the allocated slot. */
typedef struct {
  int64_t tensor;
  int64_t element_size;
  int64_t byte_offset;
  uint64_t *aligned;
  uint64_t *allocated;
} fm_bind;

/* One tensor map parameter: `map` (128 bytes, 64-byte aligned: the kernel
 * parameter's storage) is encoded for the address in `address` (the aligned
 * slot of the memref it covers, written by the binds) with the plan's fixed
 * arguments (_tensormap's values), unless `*encoded` says it holds that
 * address's map already (the Python path reads and writes it too). */
typedef struct {
  const uint64_t *address;
  void *map;
  uint64_t *encoded;
  const uint64_t *global_dim;
  const uint64_t *global_strides;
  const uint32_t *box;
  const uint32_t *element_strides;
  uint32_t data_type;
  uint32_t rank;
  uint32_t interleave;
  uint32_t swizzle;
  uint32_t l2_promotion;
  uint32_t oob_fill;
} fm_tensormap;

typedef struct {
  void *function;
  uint32_t grid[3];
  uint32_t block[3];
  uint32_t shared_bytes;
  uint32_t pad;
  void **params;
} fm_kernel;

typedef struct {
  int64_t nkernels;
  int64_t nbinds;
  const fm_kernel *kernels;
  const fm_bind *binds;
  void *context;
  fm_launch_fn launch;
  fm_ctx_get_fn ctx_get;
  fm_ctx_push_fn ctx_push;
  fm_ctx_pop_fn ctx_pop;
  int64_t nmaps;
  const fm_tensormap *maps;
  fm_encode_fn encode;
} fm_sequence;

/* What failed, for the caller's message. */
enum { FM_OK = 0, FM_MISALIGNED = 1, FM_CTX_GET = 2, FM_CTX_PUSH = 3, FM_LAUNCH = 4,
       FM_CTX_POP = 5, FM_ENCODE = 6 };

int fm_launcher_abi(void) { return FM_ABI; }

/* Encodes every tensor map whose storage does not hold its address's map.
 * Returns 0 or the driver's error code, with failure[1] = the map's index. */
static int fm_encode_maps(const fm_sequence *s, int64_t *failure) {
  for (int64_t i = 0; i < s->nmaps; ++i) {
    const fm_tensormap *m = &s->maps[i];
    uint64_t address = *m->address;
    if (*m->encoded == address)
      continue;
    *m->encoded = 0;
    int rc = s->encode(m->map, (int)m->data_type, m->rank, (void *)(uintptr_t)address,
                       m->global_dim, m->global_strides, m->box, m->element_strides,
                       (int)m->interleave, (int)m->swizzle, (int)m->l2_promotion,
                       (int)m->oob_fill);
    if (rc) {
      failure[1] = i;
      return rc;
    }
    *m->encoded = address;
  }
  return 0;
}

/* ptrs[i], offsets[i]: data pointer and storage offset (in elements) of the
 * call's tensor i. Every slot is written (and every pointer checked for
 * `alignment`) and every tensor map encoded before the first launch, so a
 * bad pointer or a failing encode launches nothing. Returns 0, or the
 * driver's error code (-1 for a misaligned pointer) with failure[0] = what
 * failed and failure[1] = the bind, map or kernel index. */
int fm_run(const fm_sequence *s, const uint64_t *ptrs, const int64_t *offsets,
           uint64_t alignment, void *stream, int64_t *failure) {
  for (int64_t i = 0; i < s->nbinds; ++i) {
    const fm_bind *b = &s->binds[i];
    uint64_t base = ptrs[b->tensor];
    uint64_t p = base + (uint64_t)b->byte_offset;
    if (p % alignment) {
      failure[0] = FM_MISALIGNED;
      failure[1] = i;
      return -1;
    }
    *b->aligned = p;
    *b->allocated = base - (uint64_t)(offsets[b->tensor] * b->element_size);
  }
  void *current = 0;
  int rc = s->ctx_get(&current);
  if (rc) {
    failure[0] = FM_CTX_GET;
    failure[1] = 0;
    return rc;
  }
  int pushed = current != s->context;
  if (pushed && (rc = s->ctx_push(s->context))) {
    failure[0] = FM_CTX_PUSH;
    failure[1] = 0;
    return rc;
  }
  if ((rc = fm_encode_maps(s, failure)))
    failure[0] = FM_ENCODE;
  for (int64_t i = 0; !rc && i < s->nkernels; ++i) {
    const fm_kernel *k = &s->kernels[i];
    rc = s->launch(k->function, k->grid[0], k->grid[1], k->grid[2], k->block[0], k->block[1],
                   k->block[2], k->shared_bytes, stream, k->params, 0);
    if (rc) {
      failure[0] = FM_LAUNCH;
      failure[1] = i;
    }
  }
  if (pushed) {
    void *popped = 0;
    int prc = s->ctx_pop(&popped);
    if (prc && !rc) {
      failure[0] = FM_CTX_POP;
      failure[1] = 0;
      rc = prc;
    }
  }
  return rc;
}
