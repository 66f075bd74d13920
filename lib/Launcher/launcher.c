/* The package's native launcher (python/flashmlir/_native.py loads it with
 * ctypes): binds a call's tensor addresses into the prepacked parameter
 * slots of a sequence of launch plans and issues every launch, in one call
 * from Python instead of one ctypes call per slot and per driver function.
 *
 * It knows nothing about CUDA's headers or library: the driver entry points
 * are function pointers the package takes from the libcuda it loaded (so the
 * tests' fake driver works too), and every handle is an opaque pointer. The
 * layout of the structs is mirrored in _native.py; FM_ABI changes with it.
 */
#include <stdint.h>

#define FM_ABI 1

typedef int (*fm_launch_fn)(void *function, unsigned gx, unsigned gy, unsigned gz,
                            unsigned bx, unsigned by, unsigned bz, unsigned shared_bytes,
                            void *stream, void **params, void **extra);
typedef int (*fm_ctx_get_fn)(void **ctx);
typedef int (*fm_ctx_push_fn)(void *ctx);
typedef int (*fm_ctx_pop_fn)(void **ctx);

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
} fm_sequence;

/* What failed, for the caller's message. */
enum { FM_OK = 0, FM_MISALIGNED = 1, FM_CTX_GET = 2, FM_CTX_PUSH = 3, FM_LAUNCH = 4,
       FM_CTX_POP = 5 };

int fm_launcher_abi(void) { return FM_ABI; }

/* ptrs[i], offsets[i]: data pointer and storage offset (in elements) of the
 * call's tensor i. Every slot is written (and every pointer checked for
 * `alignment`) before the first launch, so a bad pointer launches nothing.
 * Returns 0, or the driver's error code (-1 for a misaligned pointer) with
 * failure[0] = what failed and failure[1] = the bind or kernel index. */
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
  for (int64_t i = 0; i < s->nkernels; ++i) {
    const fm_kernel *k = &s->kernels[i];
    rc = s->launch(k->function, k->grid[0], k->grid[1], k->grid[2], k->block[0], k->block[1],
                   k->block[2], k->shared_bytes, stream, k->params, 0);
    if (rc) {
      failure[0] = FM_LAUNCH;
      failure[1] = i;
      break;
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
