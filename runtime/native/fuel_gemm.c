/* fuel's packed FMA GEMM: products of many rows (prefill, an MLP's batch) by a weight, with
 * the bias and relu fused into the stores.
 *
 * Compiled in one unit after fuel_native.c (lowering/cpu/native/__init__.py `source`), whose
 * thread pool (`parallel_for`, `call_mu`) and thresholds it uses.
 */
#if defined(__GNUC__) && defined(__x86_64__)
#include <immintrin.h>
#endif

/* -- packed products -------------------------------------------------------------------- */
/* y [m, n] = x [m, k] @ w [k, n] (+ bias [n], then relu if asked) for many rows (prefill, an
 * MLP's batch): compute-bound, so the plan is about FMA throughput. w is packed into panels
 * of PK_NR columns, each panel k rows of PK_NR contiguous floats (zero-padded at the right),
 * once per weight (`fuel_native_pack`: a bundle's constant weights are packed when the
 * executor is built); a weight that is not a constant is read in place, PK_NR columns at a
 * time (`fuel_native_gemm_fma`: the same bits, slower: its rows are n floats apart). x is
 * read in place, row-major, in blocks of 12 or 8 rows (`pk_height`): a block's rows are 12
 * streams the micro-kernel broadcasts from (packing x k-major cost 4% of a prefill, more than
 * the packed broadcasts saved), except where its rows are a multiple of 4 KB apart (they would
 * share one L1 set: `pk_rows` copies them a little further apart); a last block short of its
 * height is copied, zero-padded. A panel is one chunk of the pool; for each PK_KC-row slice
 * of it (64 KB, from L2, prefetched; 256 rows, the L1 size, measured 2% slower on Zen 4 and 8%
 * on its AVX2 path) every row block runs the micro-kernel: AVX-512 12 x 32 or 8 x 32
 * accumulators in registers (AVX2: sub-blocks of 6 or 4 rows x 16 columns), one fused
 * multiply-add per k; B's vectors are loaded whole (a masked load costs that loop 7%: only an
 * unpacked weight's last, narrower panel needs one).
 *
 * Every output is y = fma(x[k-1], w[k-1], ... fma(x[0], w[0], 0)): one FMA chain in k order,
 * continued across slices through y (a float store and reload is exact), then `+ bias` (one
 * rounding, numpy's `out += b`) and relu as np.maximum(y, 0) (+0 for y <= 0, NaN kept). Lane
 * width does not enter the chain, so the AVX-512, AVX2 and portable (fmaf) micro-kernels give
 * the same bits on any machine and thread count; `fuel_native_gemm_fma_ref` is that chain
 * written plainly, for tests. Error: |y - x.w| <= k u sum|x w| (a recursive sum with exact
 * products until each addition). */

#define PK_NR 32
#define PK_MR 12 /* rows of a block: 12, or 8 (see pk_height) */
#define PK_KC 512

/* The micro-kernel this CPU runs: 2 AVX-512, 1 AVX2 + FMA, 0 the portable one (same bits,
 * each slower). */
int fuel_native_gemm_isa(void) {
#if defined(__GNUC__) && defined(__x86_64__)
  if (__builtin_cpu_supports("avx512f")) return 2;
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return 1;
#endif
  return 0;
}

long fuel_native_packed_floats(long k, long n) { return (n + PK_NR - 1) / PK_NR * PK_NR * k; }

typedef struct {
  const float *w;
  float *p;
  long k, n;
} pack_args;

static void pack_chunk(void *q, long panel) {
  const pack_args *a = q;
  const long c0 = panel * PK_NR, len = a->n - c0 < PK_NR ? a->n - c0 : PK_NR;
  float *restrict dst = a->p + panel * a->k * PK_NR;
  for (long i = 0; i < a->k; i++, dst += PK_NR) {
    memcpy(dst, a->w + i * a->n + c0, (size_t)len * sizeof(float));
    for (long j = len; j < PK_NR; j++) dst[j] = 0.0f;
  }
}

static void pack_panels(const float *w, float *p, long k, long n) {
  pack_args a = {w, p, k, n};
  long panels = (n + PK_NR - 1) / PK_NR;
  if (k * n * 4 < PARALLEL_BYTES) {
    for (long c = 0; c < panels; c++) pack_chunk(&a, c);
  } else {
    parallel_for(pack_chunk, &a, panels);
  }
}

/* p [fuel_native_packed_floats(k, n)] = w [k, n] in panels. */
void fuel_native_pack(const float *w, float *p, long k, long n) {
  pthread_mutex_lock(&call_mu);
  pack_panels(w, p, k, n);
  pthread_mutex_unlock(&call_mu);
}

typedef struct {
  const float *xp, *w, *bias; /* xp: x's rows, lda floats apart (`pk_rows`) */
  float *y;
  long m, k, n;
  int relu, packed; /* w: panels (ldb PK_NR), or the row-major weight itself (ldb n) */
  const long *limit; /* or null: row r needs only columns (limit_k: k terms) < limit[r] */
  int limit_k;
  int act; /* an ACT_* past relu: run on each finished panel (act_cols), bias already added */
  const float *tail; /* the last block's rows when it is short, zero-padded, or 0 (`pk_rows`) */
  long lda;
} pk_args;

/* The height of the block that starts with `rest` rows left: 12 while at least 12 are (but
 * 16 as two 8s), else 8 for up to 8 and 12 for 9-11: no padding for m = 8, 12, 16, 24, 32, 64. */
static long pk_height(long rest) {
  return rest == 16 || rest <= 8 ? 8 : 12;
}

static inline float pk_finish(float v, const float *bias, long j, int last, int relu) {
  if (!last) return v;
  if (bias) v = v + bias[j];
  return relu && !(v > 0.0f || v != v) ? 0.0f : v;
}

/* Rows [r0, r0 + mr) of panel c0 over k slice [i0, i1): the portable micro-kernel. */
static void pk_block_portable(const pk_args *a, const float *restrict xb, const float *restrict wb,
                              long ldb, long r0, long R, long mr, long c0, long len, long i0,
                              long i1) {
  const int last = i1 == a->k;
  for (long r = 0; r < mr; r++) {
    float *restrict yr = a->y + (r0 + r) * a->n + c0;
    for (long j = 0; j < len; j++) {
      float acc = i0 ? yr[j] : 0.0f;
      for (long i = i0; i < i1; i++) acc = fmaf(xb[r * a->lda + i], wb[i * ldb + j], acc);
      yr[j] = pk_finish(acc, a->bias ? a->bias + c0 : 0, j, last, a->relu);
    }
  }
}

#if defined(__GNUC__) && defined(__x86_64__)
__attribute__((target("avx512f"))) static inline __m512 pk_finish512(__m512 v, const float *bias,
                                                                     __mmask16 mask, int last,
                                                                     int relu) {
  if (!last) return v;
  if (bias) v = _mm512_add_ps(v, _mm512_maskz_loadu_ps(mask, bias));
  if (relu) v = _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(v, _mm512_setzero_ps(), _CMP_NLE_UQ), v);
  return v;
}

/* Rows [r0, r0 + mr) (mr <= R, R = 12 or 8: the block's height; xb its first row, rows lda
 * floats apart) x one panel over the k slice [i0, i1). The accumulators are named registers
 * (an array of them is spilled to the stack on every k by gcc); rows past mr are computed on
 * the zero padding and not stored. Row 3 g + j is read at x<3g>[i + j lda]: four pointers and
 * the row stride, in x86's base + index * scale addressing. */
#define PK_ACC(r) __m512 c##r##a = _mm512_setzero_ps(), c##r##b = _mm512_setzero_ps();
#define PK_LOAD(r)                                                                           \
  if (i0 && r < mr) {                                                                         \
    c##r##a = _mm512_maskz_loadu_ps(m0, y + r * n);                                           \
    c##r##b = _mm512_maskz_loadu_ps(m1, y + r * n + 16);                                      \
  }
#define PK_FMA(r, X, J)                                                                       \
  {                                                                                           \
    const __m512 xv = _mm512_set1_ps(X[i + J * lda]);                                         \
    c##r##a = _mm512_fmadd_ps(xv, b0, c##r##a);                                               \
    c##r##b = _mm512_fmadd_ps(xv, b1, c##r##b);                                               \
  }
#define PK_STORE(r)                                                                          \
  if (r < mr) {                                                                               \
    _mm512_mask_storeu_ps(y + r * n, m0, pk_finish512(c##r##a, bias, m0, last, a->relu));     \
    _mm512_mask_storeu_ps(y + r * n + 16, m1,                                                 \
                          pk_finish512(c##r##b, bias ? bias + 16 : 0, m1, last, a->relu));    \
  }
#define PK_KERNEL_HEAD                                                                       \
  const __mmask16 m0 = len >= 16 ? 0xffff : (__mmask16)((1u << len) - 1);                     \
  const __mmask16 m1 = len >= 32 ? 0xffff : len > 16 ? (__mmask16)((1u << (len - 16)) - 1) : 0; \
  const long n = a->n, lda = a->lda;                                                          \
  float *y = a->y + r0 * n + c0;                                                              \
  const int last = i1 == a->k;                                                                \
  const float *bias = a->bias ? a->bias + c0 : 0;                                             \
  const float *restrict x0 = xb, *restrict x3 = xb + 3 * lda, *restrict x6 = xb + 6 * lda;
/* The k loop: B's two vectors loaded whole when all 32 columns may be read (a packed panel is
 * zero-padded; a full one), else under the column masks (masked loads cost this loop ~7% on
 * Zen 4). */
#define PK_LOOP(FMAS)                                                                        \
  if (ldb == PK_NR || len == PK_NR) {                                                         \
    for (long i = i0; i < i1; i++) {                                                          \
      PK_PREFETCH                                                                             \
      const __m512 b0 = _mm512_loadu_ps(wb + i * ldb);                                        \
      const __m512 b1 = _mm512_loadu_ps(wb + i * ldb + 16);                                   \
      FMAS                                                                                    \
    }                                                                                         \
  } else {                                                                                    \
    for (long i = i0; i < i1; i++) {                                                          \
      PK_PREFETCH                                                                             \
      const __m512 b0 = _mm512_maskz_loadu_ps(m0, wb + i * ldb);                              \
      const __m512 b1 = _mm512_maskz_loadu_ps(m1, wb + i * ldb + 16);                         \
      FMAS                                                                                    \
    }                                                                                         \
  }
#define PK_PREFETCH                                                                          \
  _mm_prefetch((const char *)(wb + (i + 16) * ldb), _MM_HINT_T0);                             \
  _mm_prefetch((const char *)(wb + (i + 16) * ldb + 16), _MM_HINT_T0);
#define PK_FMAS12                                                                            \
  PK_FMA(0, x0, 0) PK_FMA(1, x0, 1) PK_FMA(2, x0, 2) PK_FMA(3, x3, 0) PK_FMA(4, x3, 1)     \
  PK_FMA(5, x3, 2) PK_FMA(6, x6, 0) PK_FMA(7, x6, 1) PK_FMA(8, x6, 2) PK_FMA(9, x9, 0)     \
  PK_FMA(10, x9, 1) PK_FMA(11, x9, 2)
#define PK_FMAS8                                                                             \
  PK_FMA(0, x0, 0) PK_FMA(1, x0, 1) PK_FMA(2, x0, 2) PK_FMA(3, x3, 0)                        \
  PK_FMA(4, x3, 1) PK_FMA(5, x3, 2) PK_FMA(6, x6, 0) PK_FMA(7, x6, 1)

__attribute__((target("avx512f"))) static void
pk_kernel12(const pk_args *a, const float *restrict xb, const float *restrict wb, long ldb,
            long r0, long mr, long c0, long len, long i0, long i1) {
  PK_KERNEL_HEAD
  const float *restrict x9 = xb + 9 * lda;
  PK_ACC(0) PK_ACC(1) PK_ACC(2) PK_ACC(3) PK_ACC(4) PK_ACC(5)
  PK_ACC(6) PK_ACC(7) PK_ACC(8) PK_ACC(9) PK_ACC(10) PK_ACC(11)
  PK_LOAD(0) PK_LOAD(1) PK_LOAD(2) PK_LOAD(3) PK_LOAD(4) PK_LOAD(5)
  PK_LOAD(6) PK_LOAD(7) PK_LOAD(8) PK_LOAD(9) PK_LOAD(10) PK_LOAD(11)
  PK_LOOP(PK_FMAS12)
  PK_STORE(0) PK_STORE(1) PK_STORE(2) PK_STORE(3) PK_STORE(4) PK_STORE(5)
  PK_STORE(6) PK_STORE(7) PK_STORE(8) PK_STORE(9) PK_STORE(10) PK_STORE(11)
}

__attribute__((target("avx512f"))) static void
pk_kernel8(const pk_args *a, const float *restrict xb, const float *restrict wb, long ldb,
           long r0, long mr, long c0, long len, long i0, long i1) {
  PK_KERNEL_HEAD
  PK_ACC(0) PK_ACC(1) PK_ACC(2) PK_ACC(3) PK_ACC(4) PK_ACC(5) PK_ACC(6) PK_ACC(7)
  PK_LOAD(0) PK_LOAD(1) PK_LOAD(2) PK_LOAD(3) PK_LOAD(4) PK_LOAD(5) PK_LOAD(6) PK_LOAD(7)
  PK_LOOP(PK_FMAS8)
  PK_STORE(0) PK_STORE(1) PK_STORE(2) PK_STORE(3) PK_STORE(4) PK_STORE(5) PK_STORE(6) PK_STORE(7)
}
#undef PK_ACC
#undef PK_LOAD
#undef PK_FMA
#undef PK_STORE
#undef PK_KERNEL_HEAD
#undef PK_LOOP
#undef PK_PREFETCH
#undef PK_FMAS12
#undef PK_FMAS8

/* The AVX2 micro-kernel: the same chains, 8 lanes. A block of R rows runs as sub-blocks of S
 * rows (6 + 6 for R = 12, 4 + 4 for R = 8), each over the panel's two 16-column halves:
 * 2 S accumulators, two B loads and S broadcasts per k. */
__attribute__((target("avx2,fma"))) static inline __m256 pk_finish256(__m256 v, const float *bias,
                                                                      __m256i mask, int last,
                                                                      int relu) {
  if (!last) return v;
  if (bias) v = _mm256_add_ps(v, _mm256_maskload_ps(bias, mask));
  if (relu) v = _mm256_and_ps(_mm256_cmp_ps(v, _mm256_setzero_ps(), _CMP_NLE_UQ), v);
  return v;
}

/* 8 weights, whole when all 16 columns of the half may be read (`full`: a loop invariant, the
 * loop is compiled twice), else under the mask. */
__attribute__((target("avx2,fma"))) static inline __m256 pk_load256(const float *p, __m256i mask,
                                                                    int full) {
  return full ? _mm256_loadu_ps(p) : _mm256_maskload_ps(p, mask);
}

#define PK2_ACC(r) __m256 c##r##a = _mm256_setzero_ps(), c##r##b = _mm256_setzero_ps();
#define PK2_LOAD(r)                                                                           \
  if (i0 && r < rows) {                                                                       \
    c##r##a = _mm256_maskload_ps(y + r * n, m0);                                              \
    c##r##b = _mm256_maskload_ps(y + r * n + 8, m1);                                          \
  }
#define PK2_FMA(r)                                                                            \
  {                                                                                           \
    const __m256 xv = _mm256_broadcast_ss(xb + r * lda + i);                                  \
    c##r##a = _mm256_fmadd_ps(xv, b0, c##r##a);                                               \
    c##r##b = _mm256_fmadd_ps(xv, b1, c##r##b);                                               \
  }
#define PK2_STORE(r)                                                                          \
  if (r < rows) {                                                                             \
    _mm256_maskstore_ps(y + r * n, m0, pk_finish256(c##r##a, bias, m0, last, a->relu));       \
    _mm256_maskstore_ps(y + r * n + 8, m1,                                                    \
                        pk_finish256(c##r##b, bias ? bias + 8 : 0, m1, last, a->relu));       \
  }
#define PK2_HEAD                                                                              \
  const __m256i iota = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);                             \
  const __m256i m0 = _mm256_cmpgt_epi32(_mm256_set1_epi32((int)len), iota);                   \
  const __m256i m1 = _mm256_cmpgt_epi32(_mm256_set1_epi32((int)len - 8), iota);               \
  const long n = a->n, lda = a->lda;                                                          \
  float *y = a->y + r0 * n + c0;                                                              \
  const int last = i1 == a->k;                                                                \
  const float *bias = a->bias ? a->bias + c0 : 0;                                             \
  const int full = ldb == PK_NR || len == 16;
#define PK2_B_LOADS                                                                           \
  const __m256 b0 = pk_load256(wb + i * ldb, m0, full);                                       \
  const __m256 b1 = pk_load256(wb + i * ldb + 8, m1, full);

/* Rows [r0, r0 + rows) (rows <= 6, xb the first, lda floats apart) x 16 columns from c0 (len of
 * them valid) over the k slice [i0, i1). */
__attribute__((target("avx2,fma"))) static void
pk_kernel_avx2_6(const pk_args *a, const float *restrict xb, const float *restrict wb,
                 long ldb, long r0, long rows, long c0, long len, long i0, long i1) {
  PK2_HEAD
  PK2_ACC(0) PK2_ACC(1) PK2_ACC(2) PK2_ACC(3) PK2_ACC(4) PK2_ACC(5)
  PK2_LOAD(0) PK2_LOAD(1) PK2_LOAD(2) PK2_LOAD(3) PK2_LOAD(4) PK2_LOAD(5)
  for (long i = i0; i < i1; i++) {
    PK2_B_LOADS
    PK2_FMA(0) PK2_FMA(1) PK2_FMA(2) PK2_FMA(3) PK2_FMA(4) PK2_FMA(5)
  }
  PK2_STORE(0) PK2_STORE(1) PK2_STORE(2) PK2_STORE(3) PK2_STORE(4) PK2_STORE(5)
}

__attribute__((target("avx2,fma"))) static void
pk_kernel_avx2_4(const pk_args *a, const float *restrict xb, const float *restrict wb,
                 long ldb, long r0, long rows, long c0, long len, long i0, long i1) {
  PK2_HEAD
  PK2_ACC(0) PK2_ACC(1) PK2_ACC(2) PK2_ACC(3)
  PK2_LOAD(0) PK2_LOAD(1) PK2_LOAD(2) PK2_LOAD(3)
  for (long i = i0; i < i1; i++) {
    PK2_B_LOADS
    PK2_FMA(0) PK2_FMA(1) PK2_FMA(2) PK2_FMA(3)
  }
  PK2_STORE(0) PK2_STORE(1) PK2_STORE(2) PK2_STORE(3)
}
#undef PK2_ACC
#undef PK2_LOAD
#undef PK2_FMA
#undef PK2_STORE
#undef PK2_HEAD
#undef PK2_B_LOADS

/* A block of R rows (mr of them real) x one panel, on the AVX2 kernels. */
static void pk_block_avx2(const pk_args *a, const float *xb, const float *wb, long ldb, long r0,
                          long R, long mr, long c0, long len, long i0, long i1) {
  const long S = R == 12 ? 6 : 4;
  for (long s0 = 0; s0 < R && s0 < mr; s0 += S)
    for (long h = 0; h < 2 && 16 * h < len; h++) {
      const long rows = mr - s0 < S ? mr - s0 : S, hl = len - 16 * h < 16 ? len - 16 * h : 16;
      (S == 6 ? pk_kernel_avx2_6 : pk_kernel_avx2_4)(a, xb + s0 * a->lda, wb + 16 * h, ldb,
                                                     r0 + s0, rows, c0 + 16 * h, hl, i0, i1);
    }
}
#endif

static int pk_isa = -1; /* fuel_native_gemm_isa(), or a lesser one (tests) */

#if defined(__GNUC__) && defined(__x86_64__)
/* dst[j][i] = src[i][j] for an 8 x 8 block of floats (rows ls and ld floats apart). */
__attribute__((target("avx"))) static void transpose8x8(const float *src, long ls, float *dst,
                                                         long ld) {
  __m256 r[8], t[8];
  for (int i = 0; i < 8; i++) r[i] = _mm256_loadu_ps(src + i * ls);
  for (int i = 0; i < 8; i += 2) {
    t[i] = _mm256_unpacklo_ps(r[i], r[i + 1]);
    t[i + 1] = _mm256_unpackhi_ps(r[i], r[i + 1]);
  }
  for (int i = 0; i < 8; i += 4) {
    r[i] = _mm256_shuffle_ps(t[i], t[i + 2], 0x44);
    r[i + 1] = _mm256_shuffle_ps(t[i], t[i + 2], 0xee);
    r[i + 2] = _mm256_shuffle_ps(t[i + 1], t[i + 3], 0x44);
    r[i + 3] = _mm256_shuffle_ps(t[i + 1], t[i + 3], 0xee);
  }
  for (int i = 0; i < 4; i++) {
    _mm256_storeu_ps(dst + i * ld, _mm256_permute2f128_ps(r[i], r[i + 4], 0x20));
    _mm256_storeu_ps(dst + (i + 4) * ld, _mm256_permute2f128_ps(r[i], r[i + 4], 0x31));
  }
}
#endif

/* -- a few rows (decode) ------------------------------------------------------------------- */
/* Fewer than PK_FEW rows (a decode step's products): the micro-kernels above compute a block of
 * 8 rows whatever m is, so m = 1 would pay 16 FMAs per 32 weights read and be compute-bound.
 * These compute exactly the rows there are over the whole k at once (the accumulators never
 * leave registers): one row over two panels (four chains, two sequential streams: the panels
 * are one read each, front to back), two or four rows over one panel. Each output is still
 * the one FMA chain in k order, so the bits are the micro-kernels' (and the decode step's
 * product of a row is the prefill's). x is read in place (row-major: `xp` of such a product's
 * pk_args is x itself, not packed: packing it cost more than the product's reads of it). */
#define PK_FEW 8

typedef struct {
  const float *w; /* the panel's first weight (ldb floats per k) */
  float *y;       /* the output row's first column of the panel */
  const float *bias;
  long len;
} pk_panel;

/* The panel of columns [c0, c0 + len) for the rows from r0. */
static pk_panel pk_panel_at(const pk_args *a, long panel, long r0) {
  const long c0 = panel * PK_NR, len = a->n - c0 < PK_NR ? a->n - c0 : PK_NR;
  const float *w = a->packed ? a->w + panel * a->k * PK_NR : a->w + c0;
  return (pk_panel){w, a->y + r0 * a->n + c0, a->bias ? a->bias + c0 : 0, len};
}

static void pk_few_portable(const pk_args *a, const float *xb, long rows, pk_panel p, long ldb) {
  for (long r = 0; r < rows; r++)
    for (long j = 0; j < p.len; j++) {
      float acc = 0.0f;
      for (long i = 0; i < a->k; i++) acc = fmaf(xb[r * a->k + i], p.w[i * ldb + j], acc);
      p.y[r * a->n + j] = pk_finish(acc, p.bias, j, 1, a->relu);
    }
}

#if defined(__GNUC__) && defined(__x86_64__)
#define PF_MASKS(p, m0, m1)                                                                   \
  const __mmask16 m0 = p.len >= 16 ? 0xffff : (__mmask16)((1u << p.len) - 1);                \
  const __mmask16 m1 = p.len >= 32 ? 0xffff                                                   \
                       : p.len > 16 ? (__mmask16)((1u << (p.len - 16)) - 1)                   \
                                    : 0;
#define PF_STORE(p, r, m0, m1, va, vb)                                                        \
  _mm512_mask_storeu_ps(p.y + (r) * n, m0, pk_finish512(va, p.bias, m0, 1, relu));            \
  _mm512_mask_storeu_ps(p.y + (r) * n + 16, m1,                                               \
                        pk_finish512(vb, p.bias ? p.bias + 16 : 0, m1, 1, relu));

/* One row (x0) over panels p and q. */
__attribute__((target("avx512f"))) static void
pk_few1x2_512(const pk_args *a, const float *restrict x0, pk_panel p, pk_panel q, long ldb) {
  const long n = a->n, k = a->k;
  const int relu = a->relu;
  PF_MASKS(p, pm0, pm1)
  PF_MASKS(q, qm0, qm1)
  const float *restrict w = p.w, *restrict v = q.w;
  __m512 pa = _mm512_setzero_ps(), pb = _mm512_setzero_ps();
  __m512 qa = _mm512_setzero_ps(), qb = _mm512_setzero_ps();
  if (ldb == PK_NR || (p.len == PK_NR && q.len == PK_NR)) {
    for (long i = 0; i < k; i++) {
      const __m512 xv = _mm512_set1_ps(x0[i]);
      pa = _mm512_fmadd_ps(xv, _mm512_loadu_ps(w + i * ldb), pa);
      pb = _mm512_fmadd_ps(xv, _mm512_loadu_ps(w + i * ldb + 16), pb);
      qa = _mm512_fmadd_ps(xv, _mm512_loadu_ps(v + i * ldb), qa);
      qb = _mm512_fmadd_ps(xv, _mm512_loadu_ps(v + i * ldb + 16), qb);
    }
  } else {
    for (long i = 0; i < k; i++) {
      const __m512 xv = _mm512_set1_ps(x0[i]);
      pa = _mm512_fmadd_ps(xv, _mm512_maskz_loadu_ps(pm0, w + i * ldb), pa);
      pb = _mm512_fmadd_ps(xv, _mm512_maskz_loadu_ps(pm1, w + i * ldb + 16), pb);
      qa = _mm512_fmadd_ps(xv, _mm512_maskz_loadu_ps(qm0, v + i * ldb), qa);
      qb = _mm512_fmadd_ps(xv, _mm512_maskz_loadu_ps(qm1, v + i * ldb + 16), qb);
    }
  }
  PF_STORE(p, 0, pm0, pm1, pa, pb)
  PF_STORE(q, 0, qm0, qm1, qa, qb)
}

#define PF_ACC(r) __m512 c##r##a = _mm512_setzero_ps(), c##r##b = _mm512_setzero_ps();
#define PF_FMA(r)                                                                             \
  {                                                                                           \
    const __m512 xv = _mm512_set1_ps(x##r[i]);                                                \
    c##r##a = _mm512_fmadd_ps(xv, b0, c##r##a);                                               \
    c##r##b = _mm512_fmadd_ps(xv, b1, c##r##b);                                               \
  }
/* The k loop, B loaded whole where it may be (as PK_LOOP). */
#define PF_LOOP(FMAS)                                                                         \
  if (ldb == PK_NR || p.len == PK_NR) {                                                       \
    for (long i = 0; i < k; i++) {                                                            \
      const __m512 b0 = _mm512_loadu_ps(w + i * ldb), b1 = _mm512_loadu_ps(w + i * ldb + 16); \
      FMAS                                                                                    \
    }                                                                                         \
  } else {                                                                                    \
    for (long i = 0; i < k; i++) {                                                            \
      const __m512 b0 = _mm512_maskz_loadu_ps(m0, w + i * ldb);                               \
      const __m512 b1 = _mm512_maskz_loadu_ps(m1, w + i * ldb + 16);                          \
      FMAS                                                                                    \
    }                                                                                         \
  }
#define PF_HEAD                                                                               \
  const long n = a->n, k = a->k;                                                              \
  const int relu = a->relu;                                                                   \
  const float *restrict w = p.w;                                                              \
  PF_MASKS(p, m0, m1)

/* Rows xb (k floats each) over panel p: one, two or four. */
__attribute__((target("avx512f"))) static void
pk_few1_512(const pk_args *a, const float *restrict xb, pk_panel p, long ldb) {
  PF_HEAD
  const float *restrict x0 = xb;
  PF_ACC(0)
  PF_LOOP(PF_FMA(0))
  PF_STORE(p, 0, m0, m1, c0a, c0b)
}

__attribute__((target("avx512f"))) static void
pk_few2_512(const pk_args *a, const float *restrict xb, pk_panel p, long ldb) {
  PF_HEAD
  const float *restrict x0 = xb, *restrict x1 = xb + k;
  PF_ACC(0) PF_ACC(1)
  PF_LOOP(PF_FMA(0) PF_FMA(1))
  PF_STORE(p, 0, m0, m1, c0a, c0b)
  PF_STORE(p, 1, m0, m1, c1a, c1b)
}

__attribute__((target("avx512f"))) static void
pk_few4_512(const pk_args *a, const float *restrict xb, pk_panel p, long ldb) {
  PF_HEAD
  const float *restrict x0 = xb, *restrict x1 = xb + k, *restrict x2 = xb + 2 * k;
  const float *restrict x3 = xb + 3 * k;
  PF_ACC(0) PF_ACC(1) PF_ACC(2) PF_ACC(3)
  PF_LOOP(PF_FMA(0) PF_FMA(1) PF_FMA(2) PF_FMA(3))
  PF_STORE(p, 0, m0, m1, c0a, c0b)
  PF_STORE(p, 1, m0, m1, c1a, c1b)
  PF_STORE(p, 2, m0, m1, c2a, c2b)
  PF_STORE(p, 3, m0, m1, c3a, c3b)
}
#undef PF_ACC
#undef PF_FMA
#undef PF_LOOP
#undef PF_HEAD
#undef PF_MASKS
#undef PF_STORE

/* AVX2: one or two rows (xb, k floats each) over a 16-column half of a panel (h: 0 or 1),
 * four or eight accumulators. */
__attribute__((target("avx2,fma"))) static void
pk_few_avx2(const pk_args *a, const float *restrict xb, long rows, pk_panel p, long h, long ldb) {
  const long n = a->n, k = a->k, len = p.len - 16 * h < 16 ? p.len - 16 * h : 16;
  const int relu = a->relu;
  const __m256i iota = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  const __m256i m0 = _mm256_cmpgt_epi32(_mm256_set1_epi32((int)len), iota);
  const __m256i m1 = _mm256_cmpgt_epi32(_mm256_set1_epi32((int)len - 8), iota);
  const float *restrict w = p.w + 16 * h;
  const float *bias = p.bias ? p.bias + 16 * h : 0;
  float *y = p.y + 16 * h;
  const int full = ldb == PK_NR || len == 16;
  __m256 c0a = _mm256_setzero_ps(), c0b = _mm256_setzero_ps();
  __m256 c1a = _mm256_setzero_ps(), c1b = _mm256_setzero_ps();
  if (rows == 2) {
    for (long i = 0; i < k; i++) {
      const __m256 b0 = pk_load256(w + i * ldb, m0, full);
      const __m256 b1 = pk_load256(w + i * ldb + 8, m1, full);
      const __m256 x0 = _mm256_broadcast_ss(xb + i), x1 = _mm256_broadcast_ss(xb + k + i);
      c0a = _mm256_fmadd_ps(x0, b0, c0a);
      c0b = _mm256_fmadd_ps(x0, b1, c0b);
      c1a = _mm256_fmadd_ps(x1, b0, c1a);
      c1b = _mm256_fmadd_ps(x1, b1, c1b);
    }
  } else {
    for (long i = 0; i < k; i++) {
      const __m256 x0 = _mm256_broadcast_ss(xb + i);
      c0a = _mm256_fmadd_ps(x0, pk_load256(w + i * ldb, m0, full), c0a);
      c0b = _mm256_fmadd_ps(x0, pk_load256(w + i * ldb + 8, m1, full), c0b);
    }
  }
  _mm256_maskstore_ps(y, m0, pk_finish256(c0a, bias, m0, 1, relu));
  _mm256_maskstore_ps(y + 8, m1, pk_finish256(c0b, bias ? bias + 8 : 0, m1, 1, relu));
  if (rows == 2) {
    _mm256_maskstore_ps(y + n, m0, pk_finish256(c1a, bias, m0, 1, relu));
    _mm256_maskstore_ps(y + n + 8, m1, pk_finish256(c1b, bias ? bias + 8 : 0, m1, 1, relu));
  }
}
#endif

/* A few-row product: x in place (`xp` is x), the kernels above. */
static int pk_is_few(const pk_args *a) { return a->m < PK_FEW && !a->limit; }

/* Every row of a few-row product over one panel, on this CPU's kernels. */
static void pk_few_panel(const pk_args *a, long panel, long ldb) {
  const long step = pk_isa == 2 ? 4 : 2;
  for (long r0 = 0, rows; r0 < a->m; r0 += rows) {
    rows = a->m - r0 >= step ? step : a->m - r0 >= 2 ? 2 : 1;
    const pk_panel p = pk_panel_at(a, panel, r0);
    const float *xb = a->xp + r0 * a->k;
#if defined(__GNUC__) && defined(__x86_64__)
    if (pk_isa == 2) {
      (rows == 4 ? pk_few4_512 : rows == 2 ? pk_few2_512 : pk_few1_512)(a, xb, p, ldb);
      continue;
    }
    if (pk_isa == 1) {
      for (long h = 0; h < 2 && 16 * h < p.len; h++) pk_few_avx2(a, xb, rows, p, h, ldb);
      continue;
    }
#endif
    pk_few_portable(a, xb, rows, p, ldb);
  }
}

/* Panels [panel, panel + count) (count 1 or 2) of a few-row product, then the epilogue past
 * relu on them: a single row reads two panels at once. */
static void pk_few(const pk_args *a, long panel, long count) {
  const long ldb = a->packed ? PK_NR : a->n;
#if defined(__GNUC__) && defined(__x86_64__)
  if (pk_isa == 2 && a->m == 1 && count == 2)
    pk_few1x2_512(a, a->xp, pk_panel_at(a, panel, 0), pk_panel_at(a, panel + 1, 0), ldb);
  else
#endif
    for (long q = panel; q < panel + count; q++) pk_few_panel(a, q, ldb);
  if (a->act > ACT_RELU) {
    const long c0 = panel * PK_NR, c1 = c0 + count * PK_NR < a->n ? c0 + count * PK_NR : a->n;
    act_cols(a->y, a->n, a->m, c0, c1, 0, a->act);
  }
}


static void pk_chunk(void *q, long panel) {
  const pk_args *a = q;
  if (pk_is_few(a)) {
    pk_few(a, panel, 1);
    return;
  }
  const long c0 = panel * PK_NR, len = a->n - c0 < PK_NR ? a->n - c0 : PK_NR;
  const float *wb = a->packed ? a->w + panel * a->k * PK_NR : a->w + c0;
  const long ldb = a->packed ? PK_NR : a->n;
  for (long i0 = 0; i0 < a->k; i0 += PK_KC) {
    const long i1 = i0 + PK_KC < a->k ? i0 + PK_KC : a->k;
    for (long r0 = 0, R; r0 < a->m; r0 += R) {
      R = pk_height(a->m - r0);
      const long mr = a->m - r0 < R ? a->m - r0 : R;
      const float *xb = a->tail && a->m - r0 < R ? a->tail : a->xp + r0 * a->lda;
      long i1b = i1;
      if (a->limit) { /* skip what no row of the block needs (causal attention) */
        long lim = 0;
        for (long r = r0; r < r0 + mr; r++) lim = a->limit[r] > lim ? a->limit[r] : lim;
        if (a->limit_k ? i0 >= lim : c0 >= lim) continue;
        if (a->limit_k && lim < i1b) i1b = lim;
      }
#if defined(__GNUC__) && defined(__x86_64__)
      if (pk_isa == 2) {
        (R == 12 ? pk_kernel12 : pk_kernel8)(a, xb, wb, ldb, r0, mr, c0, len, i0, i1b);
        continue;
      }
      if (pk_isa == 1) {
        pk_block_avx2(a, xb, wb, ldb, r0, R, mr, c0, len, i0, i1b);
        continue;
      }
#endif
      pk_block_portable(a, xb, wb, ldb, r0, R, mr, c0, len, i0, i1b);
    }
  }
  if (a->act > ACT_RELU) act_cols(a->y, a->n, a->m, c0, c0 + len, 0, a->act);
}

/* Scratch for packed operands (grown, never shrunk; guarded by call_mu). */
static float *pk_scratch;
static long pk_scratch_len;

static float *pk_floats(long n) { return grow_floats(&pk_scratch, &pk_scratch_len, n); }

/* Floats of `pk_rows`'s scratch for x [m, k]. */
static long pk_rows_floats(long m, long k) {
  return k % 1024 ? PK_MR * k : (m + PK_MR) * (k + 16);
}

typedef struct {
  const float *x;
  float *dst;
  long m, k, lda;
} rows_copy_args;

/* Rows [16 chunk, +16) of x copied lda floats apart. */
static void rows_copy_chunk(void *q, long chunk) {
  const rows_copy_args *c = q;
  for (long r = chunk * 16; r < c->m && r < chunk * 16 + 16; r++)
    memcpy(c->dst + r * c->lda, c->x + r * c->k, (size_t)c->k * sizeof(float));
}

/* Where the micro-kernels read x [m, k] (a->xp, a->lda, a->tail): in place, rows k floats
 * apart, unless k is a multiple of 1024: rows 4 KB apart fall in one L1 set, and a block's
 * 12 rows evict each other (measured 5-9% slower on Zen 4): then x is copied into buf, rows
 * k + 16 floats apart (on the pool when `pooled` and large). A last block short of its height
 * (m = 10: one block of 12) is copied and zero-padded, so no kernel reads a row past x.
 * buf: `pk_rows_floats(m, k)` floats. */
static void pk_rows(pk_args *a, const float *x, float *buf, long m, long k, int pooled) {
  a->xp = x, a->lda = k, a->tail = 0;
  if (k % 1024 == 0) {
    rows_copy_args c = {x, buf, m, k, k + 16};
    if (pooled && 4 * m * k >= PARALLEL_BYTES && m > 16)
      parallel_for(rows_copy_chunk, &c, (m + 15) / 16);
    else
      for (long ch = 0; ch < (m + 15) / 16; ch++) rows_copy_chunk(&c, ch);
    a->xp = buf, a->lda = k + 16, buf += m * (k + 16);
  }
  long r0 = 0, R = 0;
  for (; r0 < m; r0 += R) {
    R = pk_height(m - r0);
    if (m - r0 < R) break;
  }
  if (r0 >= m) return;
  for (long r = 0; r < R; r++) {
    if (r0 + r < m)
      memcpy(buf + r * a->lda, a->xp + (r0 + r) * a->lda, (size_t)k * sizeof(float));
    else
      memset(buf + r * a->lda, 0, (size_t)k * sizeof(float));
  }
  a->tail = buf;
}

/* Panels 2 chunk and 2 chunk + 1 (the last may be alone) of a few-row product. */
static void pk_few_pair(void *q, long chunk) {
  const pk_args *a = q;
  const long panels = (a->n + PK_NR - 1) / PK_NR;
  pk_few(a, 2 * chunk, panels - 2 * chunk < 2 ? 1 : 2);
}

/* x read where `pk_rows` says (xp: its scratch, `pk_rows_floats(m, k)` floats), times the
 * panels of w (`packed`: in panels, else read in place, row-major): on the pool when `pooled`
 * and the product is large enough, else on this thread alone (the same bits either way). */
static void gemm_rows(const float *x, float *xp, const float *w, int packed, const float *bias,
                      float *y, long m, long k, long n, int act, const long *limit, int limit_k,
                      int pooled) {
  pk_args a = {x, w, bias, y, m, k, n, act == ACT_RELU, packed, limit, limit_k, act, 0, k};
  const long panels = (n + PK_NR - 1) / PK_NR;
  if (pk_is_few(&a)) { /* memory-bound: the pool once the weight is big enough */
    const long pairs = (panels + 1) / 2;
    if (!pooled || 4 * k * n < PARALLEL_BYTES)
      for (long c = 0; c < pairs; c++) pk_few_pair(&a, c);
    else
      parallel_for(pk_few_pair, &a, pairs);
    return;
  }
  pk_rows(&a, x, xp, m, k, pooled);
  if (!pooled || 2 * m * k * n < 4 * PARALLEL_BYTES) {
    for (long c = 0; c < panels; c++) pk_chunk(&a, c);
  } else {
    parallel_for(pk_chunk, &a, panels);
  }
}

/* With call_mu held: `gemm_rows` on the pool, x packed into the shared scratch. */
static int gemm_limited_locked(const float *x, const float *w, int packed, const float *bias,
                               float *y, long m, long k, long n, int act, const long *limit,
                               int limit_k) {
  if (pk_isa < 0) pk_isa = fuel_native_gemm_isa();
  float *xp = pk_floats(pk_rows_floats(m, k));
  if (!xp) return -1;
  gemm_rows(x, xp, w, packed, bias, y, m, k, n, act, limit, limit_k, 1);
  return 0;
}

static int gemm_packed_locked(const float *x, const float *w, int packed, const float *bias,
                              float *y, long m, long k, long n, int act) {
  return gemm_limited_locked(x, w, packed, bias, y, m, k, n, act, 0, 0);
}

/* y [m, n] = act(x [m, k] @ (packed w) (+ bias [n] unless null)), act an ACT_* (relu in the
 * micro-kernel's stores, the others by act_cols on each finished panel). 0, or -1 when out
 * of memory. */
int fuel_native_gemm_packed(const float *x, const float *wp, const float *bias, float *y, long m,
                            long k, long n, int act) {
  pthread_mutex_lock(&call_mu);
  int rc = gemm_packed_locked(x, wp, 1, bias, y, m, k, n, act);
  pthread_mutex_unlock(&call_mu);
  return rc;
}

/* The same product reading w [k, n] in place (a weight that is not a constant): same bits. */
int fuel_native_gemm_fma(const float *x, const float *w, const float *bias, float *y, long m,
                         long k, long n, int act) {
  pthread_mutex_lock(&call_mu);
  int rc = gemm_packed_locked(x, w, 0, bias, y, m, k, n, act);
  pthread_mutex_unlock(&call_mu);
  return rc;
}

/* -- the SiLU-gated MLP on many rows ------------------------------------------------------ */
/* y [m, n] = (silu(x @ wg) * (x @ wu)) @ wd for many rows, in one call: x packed once (on the
 * pool) for both up products; one chunk per panel of the hidden width computes that panel of
 * the gate and of the up product (the chains of `fuel_native_gemm_packed`) and then silu(g) * u
 * on it (`silu_mul_range`: the bits of `fuel_native_silu_mul`), while it is in cache; the
 * gated state is packed and the down product runs as `fuel_native_gemm_packed`. The same bits
 * as the three products and the middle pass called one by one, with two barriers fewer and
 * no pass over the [m, f] hidden state of its own. `packed`: the weights are in panels
 * (`fuel_native_pack`), else row-major, read in place. g and u are [m, f] scratch. */

typedef struct {
  pk_args gate, up;
  float *g;
  const float *u;
  long m, f;
} gated_pk_args;

static void gated_up_chunk(void *q, long panel) {
  const gated_pk_args *a = q;
#if defined(__GNUC__) && defined(__x86_64__)
  if (pk_isa == 2 && a->m == 1) { /* one row: the gate's and the up panel read together */
    const long ldb = a->gate.packed ? PK_NR : a->f;
    pk_few1x2_512(&a->gate, a->gate.xp, pk_panel_at(&a->gate, panel, 0),
                  pk_panel_at(&a->up, panel, 0), ldb);
  } else
#endif
  {
    pk_chunk((void *)&a->gate, panel);
    pk_chunk((void *)&a->up, panel);
  }
  const long c0 = panel * PK_NR, len = a->f - c0 < PK_NR ? a->f - c0 : PK_NR;
  for (long r = 0; r < a->m; r++) silu_mul_range(a->g + r * a->f + c0, a->u + r * a->f + c0, 0, len);
}

/* 0, or -1 when out of memory. */
int fuel_native_gated_packed(const float *x, const float *wg, const float *wu, const float *wd,
                             float *g, float *u, float *y, long m, long k, long f, long n,
                             int packed) {
  int rc = 0;
  pthread_mutex_lock(&call_mu);
  if (pk_isa < 0) pk_isa = fuel_native_gemm_isa();
  float *xp = pk_floats(pk_rows_floats(m, k));
  if (!xp) {
    rc = -1;
  } else {
    pk_args rows = {x, 0, 0, 0, m, k, 0, 0, 0, 0, 0, 0, 0, k};
    if (m >= PK_FEW) pk_rows(&rows, x, xp, m, k, 1);
    gated_pk_args a = {{rows.xp, wg, 0, g, m, k, f, 0, packed, 0, 0, 0, rows.tail, rows.lda},
                       {rows.xp, wu, 0, u, m, k, f, 0, packed, 0, 0, 0, rows.tail, rows.lda},
                       g,
                       u,
                       m,
                       f};
    const long panels = (f + PK_NR - 1) / PK_NR;
    if (m < PK_FEW ? 8 * k * f < PARALLEL_BYTES : 2 * m * k * f < 4 * PARALLEL_BYTES)
      for (long c = 0; c < panels; c++) gated_up_chunk(&a, c);
    else
      parallel_for(gated_up_chunk, &a, panels);
    rc = gemm_limited_locked(g, wd, packed, 0, y, m, f, n, 0, 0, 0);
  }
  pthread_mutex_unlock(&call_mu);
  return rc;
}

/* -- batched products ------------------------------------------------------------------- */
/* y[b] [m, n] = x [xoff[b] ..] [m, k] @ w [woff[b] ..] [k, n] for b < batch (numpy's matmul
 * with batch dimensions: the offsets, in floats, carry the broadcast), y C-contiguous. Fewer
 * than GEMV_ROWS rows (attention's decode products, [1, h, 1, d] x [1, h, d, s]): one chunk
 * per batch element, `gemm_tile` over all of k (blocks of 8 summed pairwise, added in k
 * order). More rows: the packed FMA GEMM per batch element, reading w in place, one chunk per
 * (element, panel): its FMA chains in k order. One thread per output element and a fixed
 * order that depends only on the shapes, so the bits do not depend on the threads. */
#define GEMV_ROWS 8

typedef struct {
  const float *x, *w;
  float *y;
  const long *xoff, *woff;
  long m, k, n, panels;
  pk_args *pk; /* per batch element (packed rows), or null on the GEMV path */
} batched_args;

static void batched_gemv_chunk(void *q, long b) {
  const batched_args *a = q;
  gemm_tile(a->x + a->xoff[b], a->k, a->w + a->woff[b], a->y + b * a->m * a->n, a->m, a->n, 0,
            a->k, 0, a->n);
}

static void batched_fma_chunk(void *q, long chunk) {
  const batched_args *a = q;
  pk_chunk(&a->pk[chunk / a->panels], chunk % a->panels);
}

/* 0, or -1 when out of memory. */
int fuel_native_gemm_batched(const float *x, const float *w, float *y, long batch, long m,
                             long k, long n, const long *xoff, const long *woff) {
  batched_args a = {x, w, y, xoff, woff, m, k, n, (n + PK_NR - 1) / PK_NR, 0};
  const long work = 4 * batch * (m * k + k * n + m * n);
  int rc = 0;
  pthread_mutex_lock(&call_mu);
  if (m < GEMV_ROWS) {
    if (work < PARALLEL_BYTES)
      for (long b = 0; b < batch; b++) batched_gemv_chunk(&a, b);
    else
      parallel_for(batched_gemv_chunk, &a, batch);
  } else {
    if (pk_isa < 0) pk_isa = fuel_native_gemm_isa();
    const long per = pk_rows_floats(m, k); /* an element's scratch (`pk_rows`) */
    float *xp = pk_floats(batch * per);
    pk_args *pk = malloc((size_t)batch * sizeof(pk_args));
    if (!xp || !pk) {
      rc = -1;
    } else {
      for (long b = 0; b < batch; b++) {
        pk_args e = {0, w + woff[b], 0, y + b * m * n, m, k, n, 0, 0, 0, 0, 0, 0, k};
        pk_rows(&e, x + xoff[b], xp + b * per, m, k, 0);
        pk[b] = e;
      }
      a.pk = pk;
      if (2 * batch * m * k * n < 4 * PARALLEL_BYTES)
        for (long c = 0; c < batch * a.panels; c++) batched_fma_chunk(&a, c);
      else
        parallel_for(batched_fma_chunk, &a, batch * a.panels);
    }
    free(pk);
  }
  pthread_mutex_unlock(&call_mu);
  return rc;
}

/* The same chain written plainly (one thread, no packing): what the tests compare against. */
void fuel_native_gemm_fma_ref(const float *x, const float *w, const float *bias, float *y, long m,
                              long k, long n, int act) {
  for (long r = 0; r < m; r++)
    for (long j = 0; j < n; j++) {
      float acc = 0.0f;
      for (long i = 0; i < k; i++) acc = fmaf(x[r * k + i], w[i * n + j], acc);
      y[r * n + j] = pk_finish(acc, bias, j, 1, act == ACT_RELU);
    }
  if (act > ACT_RELU) act_cols(y, n, m, 0, n, 0, act);
}

/* Run the micro-kernel `isa` (2 AVX-512, 1 AVX2, 0 portable; capped at this CPU's), or this
 * CPU's for -1; returns the one now in use. For the tests. */
int fuel_native_gemm_use_isa(int isa) {
  pthread_mutex_lock(&call_mu);
  const int best = fuel_native_gemm_isa();
  pk_isa = isa < 0 || isa > best ? best : isa;
  const int now = pk_isa;
  pthread_mutex_unlock(&call_mu);
  return now;
}

/* -- attention on the packed GEMM (long prompts) ------------------------------------------- */
/* out[b, h, i] = softmax(scale * q[b, h, i] . k[b, h / g, j] for j < L_i) @ v[b, h / g], the
 * mask as `fuel_native_flash_attention`'s, for many queries: per (batch, kv head) the g heads'
 * queries [g sq, d] times K^T (packed per call, panels of 32 keys) give the scores in one GEMM;
 * each row's softmax runs in double (`softmax_exp`), its weights rounded to f32 and summed in
 * double; the weights times V (read in place) is a second GEMM; each row is then divided by
 * its sum. A causal row block skips the key panels (and k terms) past its rows' live keys.
 * FMA chains in f32 where the flash kernel sums in f64: error ~ gamma_L max|v| (L live keys)
 * on top of the scores' gamma_d sum|q k|. */

typedef struct {
  float *s;
  double *l;
  long *live; /* keys row r reads (the softmax trims it to the keys of nonzero weight) */
  long m, n;
  float scale;
  const float *mask; /* additive, or 0: row r's at mask + mrow[r], key j's at + j mj */
  const long *mrow;
  long mj;
  const long *full; /* keys row r has before the masked-out tail was cut (see below) */
} softmax_args;

/* The lowest float: what exporters fill a mask with (torch.finfo(float32).min), or -inf. */
#define MASK_LOWEST (-0x1.fffffep+127f)

/* Eight lanes of doubles (GCC vector extensions: one zmm on the AVX-512 clone, two ymm on
 * AVX2, the same IEEE operations lane by lane on each, so the same bits). */
typedef double sm_v8d __attribute__((vector_size(64)));
typedef float sm_v8f __attribute__((vector_size(32)));
typedef long long sm_v8l __attribute__((vector_size(64)));
typedef int sm_v8i __attribute__((vector_size(32)));
#pragma GCC diagnostic ignored "-Wpsabi" /* inlined: no vector crosses a call */

/* e^x for x <= 0 (a score minus its row's max) or NaN, 8 lanes: c-vecmath's `fuel_vm_exp`
 * (runtime/native/vecmath.py, prepended to this unit: x = n ln2 + r, a degree-7 fit of e^r,
 * 4e-11 relative, far inside an f32 rounding; 2^n in the exponent bits), its operations in
 * its order, so each lane is `fuel_vm_exp`'s bits. x is clamped to -160 (e^-160 rounds to a
 * float 0); a NaN stays NaN. */
static inline __attribute__((always_inline)) sm_v8d softmax_exp8(sm_v8d x) {
  const sm_v8l low = (sm_v8l)(x < -160.0); /* all ones where x is below the clamp */
  const sm_v8d lo = (sm_v8d){0} - 160.0;
  const sm_v8d c = (sm_v8d)(((sm_v8l)x & ~low) | ((sm_v8l)lo & low));
  const sm_v8d t = FUEL_VM_EXP_T(c), n = t - 0x1.8p52;
  return FUEL_VM_EXP_POLY(FUEL_VM_EXP_R(c, n)) * (sm_v8d)(((sm_v8l)t + 1023) << 52);
}

/* p[j] = exp(p[j] - mx) (p: the row's scaled scores, f32, mx their max) rounded to f32 for
 * j < n, 8 at a time (`softmax_exp8`; the last short group padded with -inf, whose weight is
 * a float 0), their sum in double over 8 lanes in a fixed order (lane c sums j = c mod 8,
 * then pairwise). */
FUEL_CLONES
static double softmax_exp(float *restrict p, double mx, long n) {
  sm_v8d lane = {0, 0, 0, 0, 0, 0, 0, 0};
  long j = 0;
  for (; j + 8 <= n; j += 8) {
    sm_v8f f;
    memcpy(&f, p + j, sizeof f);
    const sm_v8f e = __builtin_convertvector(softmax_exp8(__builtin_convertvector(f, sm_v8d) - mx),
                                             sm_v8f);
    memcpy(p + j, &e, sizeof e);
    lane += __builtin_convertvector(e, sm_v8d);
  }
  if (j < n) {
    sm_v8f f = {-INFINITY, -INFINITY, -INFINITY, -INFINITY,
                -INFINITY, -INFINITY, -INFINITY, -INFINITY};
    memcpy(&f, p + j, (size_t)(n - j) * sizeof(float));
    const sm_v8f e = __builtin_convertvector(softmax_exp8(__builtin_convertvector(f, sm_v8d) - mx),
                                             sm_v8f);
    memcpy(p + j, &e, (size_t)(n - j) * sizeof(float));
    lane += __builtin_convertvector(e, sm_v8d);
  }
  return ((lane[0] + lane[1]) + (lane[2] + lane[3])) + ((lane[4] + lane[5]) + (lane[6] + lane[7]));
}

/* s[j] = s[j] scale (+ mr[j mj] unless mr is null) in f32 for j < n (the flash kernel's f32
 * product and f32 mask sum), vectorized; returns their max (NaNs skipped; -inf if none is
 * above it). */
FUEL_CLONES
static double softmax_logits(float *restrict s, long n, float scale, const float *restrict mr,
                             long mj) {
  if (!mr)
    for (long j = 0; j < n; j++) s[j] = s[j] * scale;
  else if (mj == 1)
    for (long j = 0; j < n; j++) s[j] = s[j] * scale + mr[j];
  else
    for (long j = 0; j < n; j++) s[j] = s[j] * scale + mr[j * mj];
  sm_v8f m8 = {-INFINITY, -INFINITY, -INFINITY, -INFINITY,
               -INFINITY, -INFINITY, -INFINITY, -INFINITY};
  long j = 0;
  for (; j + 8 <= n; j += 8) {
    sm_v8f v;
    memcpy(&v, s + j, sizeof v);
    const sm_v8i gt = (sm_v8i)(v > m8); /* a NaN compares false: skipped */
    m8 = (sm_v8f)(((sm_v8i)v & gt) | ((sm_v8i)m8 & ~gt));
  }
  float m = -INFINITY;
  for (int c = 0; c < 8; c++) m = m8[c] > m ? m8[c] : m;
  for (; j < n; j++) m = s[j] > m ? s[j] : m;
  return m;
}

/* Rows [chunk * 16, +16) of the scores: p = exp(scale s - max) over the row's live keys (0
 * past them; e^-160 rounds to a float 0 as well), their sum in l. */
static void softmax_chunk(void *q, long chunk) {
  const softmax_args *a = q;
  const long r1 = (chunk + 1) * 16 < a->m ? (chunk + 1) * 16 : a->m;
  for (long r = chunk * 16; r < r1; r++) {
    float *s = a->s + r * a->n;
    long live = a->live[r];
    double mx = -INFINITY;
    const float *mr = a->mask ? a->mask + a->mrow[r] : 0;
    mx = softmax_logits(s, live, a->scale, mr, a->mj);
    if (mr && live < a->full[r] && !(mx >= -1e38)) {
      /* every kept key is masked out too: the cut keys count after all. Their logits are
       * their mask values exactly (scale q . k is below 2^100 here, under half an ulp of the
       * lowest float), as the uncut row would have them. */
      for (long j = live; j < a->full[r]; j++) {
        s[j] = mr[j * a->mj];
        if ((double)s[j] > mx) mx = s[j];
      }
      live = a->full[r];
    }
    if (mx == -INFINITY) live = 0; /* no live key, or every score NaN / -inf: adds nothing */
    /* Trailing keys whose weight exp(s - mx) rounds to a float 0 (s - mx < -110; exp(-110)
     * is below half the least subnormal) add nothing to the sum or to the weights times V:
     * the product below stops before them (a masked-out future, e.g.). NaN stays. */
    while (live > 0 && (double)s[live - 1] - mx < -110.0) live--;
    a->live[r] = live;
    a->l[r] = live ? softmax_exp(s, mx, live) : 0.0;
    for (long j = live; j < a->n; j++) s[j] = 0.0f;
  }
}

/* The largest squared norm of `rows` rows of length d (ld floats apart), in double over 8
 * lanes; NaN if any element is NaN (inf if any is infinite). */
FUEL_CLONES
static double max_norm2(const float *restrict x, long rows, long d, long ld) {
  double mx = 0.0;
  for (long r = 0; r < rows; r++) {
    const float *restrict xr = x + r * ld;
    double lane[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    long i = 0;
    for (; i + 8 <= d; i += 8)
      for (int c = 0; c < 8; c++) lane[c] += (double)xr[i + c] * xr[i + c];
    for (int c = 0; i < d; i++, c++) lane[c] += (double)xr[i] * xr[i];
    const double t =
        ((lane[0] + lane[1]) + (lane[2] + lane[3])) + ((lane[4] + lane[5]) + (lane[6] + lane[7]));
    if (t > mx || t != t) mx = t; /* a NaN sticks: no later t compares above it */
  }
  return mx;
}

typedef struct {
  const float *q, *k, *v;
  float *out;
  long bsz, hq, hkv, sq, sk, d, dv, kv_len;
  int causal;
  double scale;
  const float *mask;
  const long *ms;
  const long *st; /* element strides of q, k, v, out along batch, head, position (rows dense) */
  _Atomic int failed; /* a group found no memory for its scratch */
} att_args;

/* Floats of one group's scratch: K^T in panels, the scores, dense copies of the group's
 * queries, values and output (when strided), then (8-byte aligned) the rows' sums, live keys,
 * mask rows and uncut key counts; with `own_xp`, room for the products' `pk_rows` copies too
 * (a group run on one thread makes them in its own scratch). */
static long att_floats(const att_args *a, int own_xp) {
  const long m = a->hq / a->hkv * a->sq, n = a->kv_len, d = a->d, dv = a->dv;
  const long rows = pk_rows_floats(m, d) > pk_rows_floats(m, n) ? pk_rows_floats(m, d)
                                                                 : pk_rows_floats(m, n);
  return fuel_native_packed_floats(d, n) + m * n + m * d + n * dv + m * dv + 8 * m + 2 +
         (own_xp ? rows : 0);
}

/* K^T [d, n] (k's rows ld floats apart) in panels of PK_NR keys (zero past n): kp[p][i][c] =
 * k[p PK_NR + c][i]. Blocks of 8 keys x 8 dims are transposed in registers (AVX; moves only),
 * the rest one by one. */
static void pack_keys(const float *restrict k, long ld, float *restrict kp, long n, long d) {
  for (long p = 0; p * PK_NR < n; p++) {
    float *restrict dst = kp + p * d * PK_NR;
    const long c1 = n - p * PK_NR < PK_NR ? n - p * PK_NR : PK_NR;
    long i0 = 0;
#if defined(__GNUC__) && defined(__x86_64__)
    if (pk_isa >= 1) {
      for (; i0 + 8 <= d; i0 += 8)
        for (long c0 = 0; c0 + 8 <= c1; c0 += 8)
          transpose8x8(k + (p * PK_NR + c0) * ld + i0, ld, dst + i0 * PK_NR + c0, PK_NR);
      /* the keys of a short panel past its last whole 8, every dim below i0 */
      for (long i = 0; i < i0; i++)
        for (long c = c1 / 8 * 8; c < PK_NR; c++)
          dst[i * PK_NR + c] = c < c1 ? k[(p * PK_NR + c) * ld + i] : 0.0f;
    }
#endif
    for (long i = i0; i < d; i++)
      for (long c = 0; c < PK_NR; c++)
        dst[i * PK_NR + c] = c < c1 ? k[(p * PK_NR + c) * ld + i] : 0.0f;
  }
}

/* o[r] = o[r] / l[r] in double, rounded to f32 (0 where l[r] is 0: no live key). */
FUEL_CLONES
static void divide_rows(float *restrict o, const double *restrict l, long m, long dv) {
  for (long r = 0; r < m; r++) {
    float *restrict orow = o + r * dv;
    const double lr = l[r];
    if (lr > 0.0)
      for (long c = 0; c < dv; c++) orow[c] = (float)((double)orow[c] / lr);
    else
      for (long c = 0; c < dv; c++) orow[c] = 0.0f;
  }
}

/* The attention of group `grp` (a batch row's kv head and the g query heads that share it):
 * its products and softmax on the pool (`pooled`), else all on this thread, packing into
 * `buf`'s own room (the same bits either way). 0, or -1 when out of memory. */
static int att_group(const att_args *a, long grp, float *buf, int pooled) {
  const long g = a->hq / a->hkv, m = g * a->sq, n = a->kv_len, d = a->d, dv = a->dv;
  const long b = grp / a->hkv, kvh = grp % a->hkv;
  const long *st = a->st;
  const float *qg = a->q + b * st[0] + kvh * g * st[1];
  /* the group's output rows: dense (its place in out), else in scratch and then copied to
   * their strides (a transposed view: rows h dv floats apart) */
  float *const ob = a->out + b * st[9] + kvh * g * st[10];
  const int out_dense = st[11] == dv && (g == 1 || st[10] == a->sq * dv);
  if (!n) { /* no live key: zeros, like a fully masked row */
    for (long r = 0; r < m; r++)
      memset(ob + r / a->sq * st[10] + r % a->sq * st[11], 0, (size_t)dv * sizeof(float));
    return 0;
  }
  const float *mask = a->mask;
  const long *ms = a->ms;
  const long sfloats = m * n;
  float *kp = buf, *s = kp + fuel_native_packed_floats(d, n), *qc = s + sfloats;
  float *vc = qc + m * d, *oc = vc + n * dv;
  float *og = out_dense ? ob : oc;
  const long cfloats = sfloats + m * d + n * dv + m * dv;
  double *l = (double *)(oc + m * dv + (cfloats & 1)); /* 8-byte aligned */
  long *live = (long *)(l + m); /* keys row r reads: causal rows skip the later panels */
  long *mrow = live + m;        /* row r (head kvh g + r / sq, query r % sq): its mask row */
  long *full = mrow + m;
  float *xp = (float *)(full + m); /* the products' packed rows (not `pooled`) */
  const float *kb = a->k + b * st[3] + kvh * st[4];
  const float *vb = a->v + b * st[6] + kvh * st[7];
  /* Strided queries and values (a transposed view: rows h d floats apart) are copied dense
   * here, by the thread that runs the group, into its scratch (the products read x and an
   * unpacked w dense; rows a multiple of 2 KB apart would also share a few L1 sets). K is
   * packed from where it is. */
  if (st[2] != d || (g > 1 && st[1] != a->sq * d)) {
    for (long r = 0; r < m; r++)
      memcpy(qc + r * d, qg + r / a->sq * st[1] + r % a->sq * st[2], (size_t)d * sizeof(float));
    qg = qc;
  }
  if (st[8] != dv) {
    for (long j = 0; j < n; j++)
      memcpy(vc + j * dv, vb + j * st[8], (size_t)dv * sizeof(float));
    vb = vc;
  }
  /* A row's trailing keys the mask sets to the lowest float or -inf (a causal mask written
   * out) are cut before scoring when every |scale q . k| is below 2^100 (by Cauchy-Schwarz
   * on the largest norms; a NaN or inf operand: nothing is cut): their logits are then the
   * mask value exactly, whose weight is 0 next to any key not masked out (the softmax puts
   * them back for a row whose kept keys are all masked out too). */
  const int cut = mask && fabs(a->scale) * sqrt(max_norm2(qg, m, d, d)) *
                                 sqrt(max_norm2(kb, n, d, st[5])) * 1.01 <
                             0x1p100;
  for (long r = 0; r < m; r++) {
    full[r] = live[r] = live_keys(r % a->sq, a->sq, n, a->causal);
    if (!mask) continue;
    mrow[r] = b * ms[0] + (kvh * g + r / a->sq) * ms[1] + r % a->sq * ms[2];
    while (cut && live[r] > 0 && mask[mrow[r] + (live[r] - 1) * ms[3]] <= MASK_LOWEST) live[r]--;
  }
  pack_keys(kb, st[5], kp, n, d);
  if (pooled) {
    if (gemm_limited_locked(qg, kp, 1, 0, s, m, d, n, 0, live, 0)) return -1;
  } else {
    gemm_rows(qg, xp, kp, 1, 0, s, m, d, n, 0, live, 0, 0);
  }
  softmax_args sa = {s, l, live, m, n, (float)a->scale, mask, mrow, mask ? ms[3] : 0, full};
  if (pooled) {
    parallel_for(softmax_chunk, &sa, (m + 15) / 16);
    if (gemm_limited_locked(s, vb, 0, 0, og, m, n, dv, 0, live, 1)) return -1;
  } else {
    for (long c = 0; c < (m + 15) / 16; c++) softmax_chunk(&sa, c);
    gemm_rows(s, xp, vb, 0, 0, og, m, n, dv, 0, live, 1, 0);
  }
  divide_rows(og, l, m, dv);
  if (!out_dense)
    for (long r = 0; r < m; r++)
      memcpy(ob + r / a->sq * st[10] + r % a->sq * st[11], oc + r * dv, (size_t)dv * sizeof(float));
  return 0;
}

/* Each thread's scratch for the groups it runs (grown, never shrunk: the pool's threads
 * live as long as the process). */
static __thread float *att_own;
static __thread long att_own_len;

static void att_chunk(void *q, long grp) {
  att_args *a = q;
  float *buf = grow_floats(&att_own, &att_own_len, att_floats(a, 1));
  if (!buf || att_group(a, grp, buf, 0)) atomic_store(&a->failed, 1);
}

static float *att_scratch;
static long att_scratch_len;

/* q [b, hq, sq, d], k [b, hkv, sk, d], v [b, hkv, sk, dv] -> out [b, hq, sq, dv]; kv_len
 * clamped to [0, sk] by the caller. q, k, v and out are at the element strides `st` (each
 * one's along batch, head and position; its rows dense), or dense where st is null: a
 * transposed view ([b, s, h, d] as [b, h, s, d]) needs no transpose pass of its own.
 * Groups (a batch row's kv head) split evenly over the pool run whole on one thread each (one
 * head's products are too small to share: ~4 panels); otherwise group after group, each
 * product and softmax on the pool. 0, or -1 when out of memory. */
int fuel_native_attention_gemm(const float *q, const float *k, const float *v, float *out,
                               long bsz, long hq, long hkv, long sq, long sk, long d, long dv,
                               long kv_len, int causal, double scale, const float *mask,
                               const long *ms, const long *st) {
  const long dense[12] = {hq * sq * d,   sq * d,  d,  /* q */
                          hkv * sk * d,  sk * d,  d,  /* k */
                          hkv * sk * dv, sk * dv, dv, /* v */
                          hq * sq * dv,  sq * dv, dv /* out */};
  att_args a = {q,  k,      v,      out,   bsz,  hq, hkv, sq, sk, d,
                dv, kv_len, causal, scale, mask, ms, st ? st : dense, 0};
  const long groups = bsz * hkv;
  int rc = 0;
  pthread_mutex_lock(&call_mu);
  if (pk_isa < 0) pk_isa = fuel_native_gemm_isa();
  if (n_threads > 1 && groups >= n_threads &&
      (groups % n_threads == 0 || groups >= 4 * n_threads)) {
    parallel_for(att_chunk, &a, groups);
    rc = atomic_load(&a.failed) ? -1 : 0;
  } else {
    float *buf = grow_floats(&att_scratch, &att_scratch_len, att_floats(&a, 0));
    for (long grp = 0; grp < groups && !rc; grp++)
      rc = buf ? att_group(&a, grp, buf, 1) : -1;
  }
  pthread_mutex_unlock(&call_mu);
  return rc;
}
