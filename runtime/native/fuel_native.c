/* fuel's native CPU kernels: f32 GEMV-shaped products (a few rows times a weight), the
 * SiLU-gated MLP on them, rms_norm, rope, flash attention and programs (runs of calls); a small
 * persistent thread pool runs them (and fuel_gemm.c's packed products).
 *
 * Loaded by lowering/cpu/native/__init__.py, which prepends <math.h> and `fuel_silu` (the C
 * codegen's helper, special.silu's algorithm in double), appends fuel_gemm.c and compiles the
 * unit once per machine (-O3, no fast-math, no FMA contraction).
 *
 * Results are bit-stable everywhere: every output element is computed by one thread in a
 * fixed order that depends only on the shapes (threads split the *columns*, never a sum), and
 * without FMA contraction or reassociation the AVX-512, AVX2 and baseline clones round alike.
 * A product sums over k in blocks of 8: a pairwise sum of the block's 8 terms, added to the
 * running total (error ~ (k/8 + 3) u instead of k u for a plain loop).
 */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__)
#define FUEL_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define FUEL_CLONES
#endif

#if defined(__x86_64__) || defined(__i386__)
#define FUEL_PAUSE() __builtin_ia32_pause()
#else
#define FUEL_PAUSE() ((void)0)
#endif

/* -- the pool --------------------------------------------------------------------------- */
/* `fuel_native_threads(n)` starts n - 1 workers once. A parallel call cuts its work into
 * chunks (column blocks or row blocks) and publishes (fn, args, chunks) with a new generation
 * in `ticket` ((generation << 32) | next unclaimed chunk); every thread, the caller included,
 * claims chunks by compare-and-swap until none is left; the caller then waits for the chunks
 * others claimed. A worker that wakes late (descheduled on a busy machine) finds nothing to
 * claim, so the caller never waits for a thread that has not started: the dynamic split
 * degrades to one thread instead of stalling (a static split stalls a whole timeslice). A
 * stale worker cannot claim a newer task's chunk: the CAS compares the generation too.
 * Idle workers poll ~2 ms (a decode step issues its products microseconds apart), then
 * sleep on the condition variable; every wait pauses a few times, then yields the core.
 * A worker woken from that sleep may be placed on the caller's own CPU (the scheduler's
 * wake-affine choice): both would share one core until the load balancer moves one of them,
 * milliseconds later (a whole prefill ran at one thread's speed after any idle pause). So a
 * woken worker on the caller's CPU moves itself off it: its affinity without that CPU, then
 * the process's whole set again (no thread stays pinned).
 * `call_mu` serializes calls (ctypes releases the GIL). */

typedef void (*fuel_chunk)(void *args, long chunk);

#define FUEL_MAX_THREADS 64
static int n_threads = 0;
static _Atomic uint64_t ticket = 0;
static _Atomic long done = 0;
static _Atomic(fuel_chunk) task_fn;
static _Atomic(void *) task_args;
static _Atomic long task_chunks;
static pthread_mutex_t sleep_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t sleep_cv = PTHREAD_COND_INITIALIZER;
static pthread_mutex_t call_mu = PTHREAD_MUTEX_INITIALIZER;
static const double SPIN_NS = 2e6;

static double now_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return 1e9 * (double)t.tv_sec + (double)t.tv_nsec;
}

/* Claim and run chunks of generation `gen` until none is left (or a newer task is out). */
static void run_chunks(uint64_t gen) {
  for (;;) {
    uint64_t t = atomic_load(&ticket);
    if (t >> 32 != gen) return;
    fuel_chunk fn = atomic_load(&task_fn);
    void *args = atomic_load(&task_args);
    long chunk = (long)(uint32_t)t;
    if (chunk >= atomic_load(&task_chunks)) return;
    if (!atomic_compare_exchange_weak(&ticket, &t, t + 1)) continue;
    fn(args, chunk);
    atomic_fetch_add(&done, 1);
  }
}

/* One step of a wait: a few pauses, then yield the core to any other runnable thread (on a
 * busy machine a spinning thread must not take the core from the thread it waits for). */
static void relax(long spins) {
  if (spins < 64)
    FUEL_PAUSE();
  else
    sched_yield();
}

static _Atomic int caller_cpu = -1;

/* Off the caller's CPU if the wake put this worker there (see the pool's comment). */
static void leave_caller_cpu(void) {
#ifdef __linux__
  const int here = sched_getcpu(), caller = atomic_load(&caller_cpu);
  cpu_set_t all, others;
  if (here < 0 || here != caller || sched_getaffinity(0, sizeof all, &all) != 0) return;
  others = all;
  CPU_CLR(here, &others);
  if (CPU_COUNT(&others) == 0) return;
  if (sched_setaffinity(0, sizeof others, &others) == 0) sched_setaffinity(0, sizeof all, &all);
#endif
}

static void *worker(void *unused) {
  (void)unused;
  uint64_t seen = 0;
  for (;;) {
    long spins = 0;
    double start = now_ns();
    while (atomic_load(&ticket) >> 32 == seen) {
      if (++spins < 64 || ((spins & 15) || now_ns() - start < SPIN_NS)) {
        relax(spins);
        continue;
      }
      pthread_mutex_lock(&sleep_mu);
      while (atomic_load(&ticket) >> 32 == seen) pthread_cond_wait(&sleep_cv, &sleep_mu);
      pthread_mutex_unlock(&sleep_mu);
      leave_caller_cpu();
    }
    seen = atomic_load(&ticket) >> 32;
    run_chunks(seen);
  }
  return 0;
}

/* A forked child has none of the workers (only the forking thread survives a fork) and may
 * inherit a lock a worker held: it runs everything on its one thread, with fresh locks. */
static void after_fork_in_child(void) {
  pthread_mutex_t fresh_mu = PTHREAD_MUTEX_INITIALIZER;
  pthread_cond_t fresh_cv = PTHREAD_COND_INITIALIZER;
  sleep_mu = fresh_mu, call_mu = fresh_mu, sleep_cv = fresh_cv;
  n_threads = 1;
}

int fuel_native_threads(int n) {
  pthread_mutex_lock(&call_mu);
  if (n_threads == 0) {
    pthread_atfork(0, 0, after_fork_in_child);
    if (n < 1) n = 1;
    if (n > FUEL_MAX_THREADS) n = FUEL_MAX_THREADS;
    int started = 1;
    for (int i = 1; i < n; i++) {
      pthread_t t;
      if (pthread_create(&t, 0, worker, 0) != 0) break;
      pthread_detach(t);
      started++;
    }
    n_threads = started;
  }
  pthread_mutex_unlock(&call_mu);
  return n_threads;
}

/* fn(args, c) for every chunk c < chunks, on the pool (inline for one chunk or one thread). */
static void parallel_for(fuel_chunk fn, void *args, long chunks) {
  if (chunks <= 1 || n_threads <= 1) {
    for (long c = 0; c < chunks; c++) fn(args, c);
    return;
  }
  /* Close the ticket first (a generation of its own whose chunk index no task reaches): a
   * worker still holding the last task's exhausted ticket (gen, c) would otherwise see the
   * new fn, args and chunk count below while the ticket is still (gen, c), claim chunk c of
   * the new task by CAS before it is published, and count it in `done` twice over; the
   * caller then returns while a chunk still runs (wrong results on a busy machine). */
  uint64_t gen = (atomic_load(&ticket) >> 32) + 1;
  atomic_store(&ticket, (gen << 32) | UINT32_MAX);
  gen++;
  atomic_store(&task_fn, fn);
  atomic_store(&task_args, args);
  atomic_store(&task_chunks, chunks);
  atomic_store(&done, 0);
#ifdef __linux__
  atomic_store(&caller_cpu, sched_getcpu());
#endif
  pthread_mutex_lock(&sleep_mu);
  atomic_store(&ticket, gen << 32);
  pthread_cond_broadcast(&sleep_cv);
  pthread_mutex_unlock(&sleep_mu);
  run_chunks(gen);
  for (long spins = 0; atomic_load(&done) < chunks; spins++) relax(spins);
}

/* Below this many bytes of work a kernel runs on the calling thread alone: waking a worker
 * costs more than it saves. */
static const long PARALLEL_BYTES = 128 * 1024;

/* -- activation epilogues ---------------------------------------------------------------- */
/* What a fused product applies to its outputs as it finishes them (`matmul_bias_act`, kernel
 * source native-vecmath): ACT_RELU exactly (np.maximum(y, 0): +0 for y <= 0, NaN kept), the
 * others by runtime/kernels/cpu/vecmath.py's c-vecmath functions (prepended to this unit):
 * double inside from the exact f32 input, rounded once (1 ulp; verified into the ledger).
 * Elementwise and fixed per element, so the bits do not depend on the tiling or threads. */
enum { ACT_NONE = 0, ACT_RELU, ACT_GELU, ACT_GELU_TANH, ACT_SILU, ACT_SIGMOID, ACT_TANH };

/* y[r, c0:c1] (rows n floats apart, r < m) += bias[c0:c1] (unless null: numpy's `out += b`,
 * one f32 rounding), then y = act(y). */
FUEL_VM_CLONES
static void act_cols(float *restrict y, long n, long m, long c0, long c1,
                     const float *restrict bias, int act) {
  for (long r = 0; r < m; r++) {
    float *restrict yr = y + r * n;
    if (bias)
      for (long j = c0; j < c1; j++) yr[j] = yr[j] + bias[j];
    switch (act) {
    case ACT_RELU:
      for (long j = c0; j < c1; j++) yr[j] = (yr[j] > 0.0f || yr[j] != yr[j]) ? yr[j] : 0.0f;
      break;
    case ACT_GELU:
      for (long j = c0; j < c1; j++) yr[j] = (float)fuel_vm_gelu((double)yr[j]);
      break;
    case ACT_GELU_TANH:
      for (long j = c0; j < c1; j++) yr[j] = (float)fuel_vm_gelu_tanh((double)yr[j]);
      break;
    case ACT_SILU:
      for (long j = c0; j < c1; j++) yr[j] = (float)fuel_vm_silu((double)yr[j]);
      break;
    case ACT_SIGMOID:
      for (long j = c0; j < c1; j++) yr[j] = (float)fuel_vm_sigmoid((double)yr[j]);
      break;
    case ACT_TANH:
      for (long j = c0; j < c1; j++) yr[j] = (float)fuel_vm_tanh((double)yr[j]);
      break;
    default:
      break;
    }
  }
}

/* y [m, n] = act(y + bias) in place (bias [n] or null): a fused product's epilogue where the
 * product itself ran elsewhere (batched weights). */
void fuel_native_bias_act(float *y, const float *bias, long m, long n, int act) {
  act_cols(y, n, m, 0, n, bias, act);
}

/* -- products --------------------------------------------------------------------------- */
/* y [m, n] = x [m, k] @ w [k, n] (row-major, f32) for a few rows m: memory-bound, so the plan
 * is about reading w in long sequential runs. w is cut into tiles of KB rows by CW columns
 * (whole rows when n <= MAX_CW); a tile is one chunk, streamed top to bottom, and writes its
 * partial product to its own slot; the partials of a column range are then summed in K order.
 * Tiles depend only on (m, k, n), so the sums and the bits do not depend on the threads. */

static const long TILE_BYTES = 128 * 1024, MAX_CW = 4096, MIN_KB = 64;

typedef struct {
  long m, k, n, cw, kb, ct, kt;
} gemm_plan;

static gemm_plan plan_gemm(long m, long k, long n) {
  gemm_plan p = {m, k, n, n <= MAX_CW ? n : MAX_CW / 2, 0, 0, 0};
  p.kb = TILE_BYTES / (4 * p.cw) / 8 * 8;
  if (p.kb < MIN_KB) p.kb = MIN_KB;
  if (k * n * 4 < PARALLEL_BYTES || p.kb >= k) p.kb = k; /* one K block: no partials */
  p.ct = (n + p.cw - 1) / p.cw;
  p.kt = (k + p.kb - 1) / p.kb;
  return p;
}

/* y[r, c0:c1] = x[r, i0:i1] @ w[i0:i1, c0:c1] for r < m; x rows have stride ldx, w and y rows
 * stride n. Sums over i in blocks of 8 (pairwise inside a block) added in order. */
FUEL_CLONES
static void gemm_tile(const float *restrict x, long ldx, const float *restrict w,
                      float *restrict y, long m, long n, long i0, long i1, long c0, long c1) {
  const long len = c1 - c0;
  for (long r = 0; r < m; r++)
    for (long j = 0; j < len; j++) y[r * n + c0 + j] = 0.0f;
  long i = i0;
  for (; i + 8 <= i1; i += 8) {
    const float *restrict w0 = w + i * n + c0;
    for (long r = 0; r < m; r++) {
      const float *restrict xr = x + r * ldx + i;
      const float a0 = xr[0], a1 = xr[1], a2 = xr[2], a3 = xr[3];
      const float a4 = xr[4], a5 = xr[5], a6 = xr[6], a7 = xr[7];
      float *restrict yr = y + r * n + c0;
      for (long j = 0; j < len; j++) {
        float s01 = a0 * w0[j] + a1 * w0[n + j];
        float s23 = a2 * w0[2 * n + j] + a3 * w0[3 * n + j];
        float s45 = a4 * w0[4 * n + j] + a5 * w0[5 * n + j];
        float s67 = a6 * w0[6 * n + j] + a7 * w0[7 * n + j];
        yr[j] += (s01 + s23) + (s45 + s67);
      }
    }
  }
  for (; i < i1; i++) {
    const float *restrict wi = w + i * n + c0;
    for (long r = 0; r < m; r++) {
      const float a = x[r * ldx + i];
      float *restrict yr = y + r * n + c0;
      for (long j = 0; j < len; j++) yr[j] += a * wi[j];
    }
  }
}

/* Tile `chunk` of plan p: into y itself with one K block, else into partial slot kb. */
static void gemm_run_tile(const gemm_plan *p, const float *x, const float *w, float *y,
                          float *part, long chunk) {
  long ci = chunk % p->ct, ki = chunk / p->ct;
  long c0 = ci * p->cw, c1 = c0 + p->cw < p->n ? c0 + p->cw : p->n;
  long i0 = ki * p->kb, i1 = i0 + p->kb < p->k ? i0 + p->kb : p->k;
  float *dst = p->kt == 1 ? y : part + ki * p->m * p->n;
  gemm_tile(x, p->k, w, dst, p->m, p->n, i0, i1, c0, c1);
}

/* y = sum of the kt partials in K order, over all m rows and columns [c0, c1). */
FUEL_CLONES
static void gemm_reduce(const gemm_plan *p, const float *restrict part, float *restrict y,
                        long c0, long c1) {
  const long mn = p->m * p->n;
  for (long r = 0; r < p->m; r++) {
    float *restrict yr = y + r * p->n;
    for (long j = c0; j < c1; j++) yr[j] = part[r * p->n + j];
    for (long b = 1; b < p->kt; b++) {
      const float *restrict pb = part + b * mn + r * p->n;
      for (long j = c0; j < c1; j++) yr[j] += pb[j];
    }
  }
}

/* Scratch for the partials (grown, never shrunk; guarded by call_mu). */
static float *scratch;
static long scratch_len;

/* *buf, grown to at least n floats (*len: its size now); 0 when out of memory. */
static float *grow_floats(float **buf, long *len, long n) {
  if (n > *len) {
    float *grown = realloc(*buf, (size_t)n * sizeof(float));
    if (!grown) return 0;
    *buf = grown, *len = n;
  }
  return *buf;
}

static float *scratch_floats(long n) { return grow_floats(&scratch, &scratch_len, n); }

typedef struct {
  gemm_plan p;
  const float *x, *w;
  float *y, *part;
  long rw;           /* columns per reduction chunk */
  const float *bias; /* the epilogue (act_cols) on finished columns: bias or null, ACT_* */
  int act;
} gemm_args;

static int has_epilogue(const gemm_args *a) { return a->bias || a->act != ACT_NONE; }

/* Columns per chunk of a pass over the [m, n] partials: all of them when small. */
static long reduce_width(long m, long n, long kt) {
  return m * n * kt < 65536 ? n : 1024;
}

/* One tile; with one K block it is finished, so its epilogue runs on it while it is in cache. */
static void gemm_chunk(void *q, long chunk) {
  gemm_args *a = q;
  gemm_run_tile(&a->p, a->x, a->w, a->y, a->part, chunk);
  if (a->p.kt == 1 && has_epilogue(a)) {
    long c0 = (chunk % a->p.ct) * a->p.cw, c1 = c0 + a->p.cw < a->p.n ? c0 + a->p.cw : a->p.n;
    act_cols(a->y, a->p.n, a->p.m, c0, c1, a->bias, a->act);
  }
}

static void reduce_chunk(void *q, long chunk) {
  gemm_args *a = q;
  long c0 = chunk * a->rw, c1 = c0 + a->rw < a->p.n ? c0 + a->rw : a->p.n;
  gemm_reduce(&a->p, a->part, a->y, c0, c1);
  if (has_epilogue(a)) act_cols(a->y, a->p.n, a->p.m, c0, c1, a->bias, a->act);
}

/* The product of a plan: tiles on the pool, then the K-order sums (1024-column chunks), each
 * finished column range through the epilogue (bias, act) where one is asked. */
static int gemm_execute(const gemm_plan *p, const float *x, const float *w, float *y,
                        float *part, const float *bias, int act) {
  gemm_args a = {*p, x, w, y, part, reduce_width(p->m, p->n, p->kt), bias, act};
  parallel_for(gemm_chunk, &a, p->ct * p->kt);
  if (p->kt > 1) parallel_for(reduce_chunk, &a, (p->n + a.rw - 1) / a.rw);
  return 0;
}

/* y [m, n] = act(x [m, k] @ w [k, n] + bias [n]) (bias: null for none; act: ACT_*); all
 * C-contiguous f32; meant for m <= 8 (w read once). The product's bits are
 * `fuel_native_gemm`'s; then `+ bias` in f32 and the activation (act_cols). Returns 0, or -1
 * if the partials' scratch cannot be allocated. */
int fuel_native_gemm_bias_act(const float *x, const float *w, const float *bias, float *y,
                              long m, long k, long n, int act) {
  gemm_plan p = plan_gemm(m, k, n);
  pthread_mutex_lock(&call_mu);
  float *part = p.kt > 1 ? scratch_floats(p.kt * m * n) : 0;
  int rc = p.kt > 1 && !part ? -1 : gemm_execute(&p, x, w, y, part, bias, act);
  pthread_mutex_unlock(&call_mu);
  return rc;
}

/* y [m, n] = x [m, k] @ w [k, n]; all C-contiguous f32; meant for m <= 8 (w read once).
 * Returns 0, or -1 if the partials' scratch cannot be allocated. */
int fuel_native_gemm(const float *x, const float *w, float *y, long m, long k, long n) {
  return fuel_native_gemm_bias_act(x, w, 0, y, m, k, n, ACT_NONE);
}

/* -- SiLU-gated MLP --------------------------------------------------------------------- */

typedef struct {
  gemm_plan up;
  const float *x, *wg, *wu;
  float *g, *u, *pg, *pu;
  long rw; /* columns per finishing chunk */
} gate_args;

/* chunks [0, T) tile x @ wg, [T, 2T) tile x @ wu (T tiles each) */
static void gate_chunk(void *q, long chunk) {
  gate_args *a = q;
  long t = a->up.ct * a->up.kt;
  if (chunk < t)
    gemm_run_tile(&a->up, a->x, a->wg, a->g, a->pg, chunk);
  else
    gemm_run_tile(&a->up, a->x, a->wu, a->u, a->pu, chunk - t);
}

/* Column chunks of the hidden state: the K-order sums, then g = silu(g) * u, silu in double
 * rounded to f32 (the numpy kernel's silu), the product in f32. */
static void gate_finish(void *q, long chunk) {
  gate_args *a = q;
  const long f = a->up.n, c0 = chunk * a->rw, c1 = c0 + a->rw < f ? c0 + a->rw : f;
  if (a->up.kt > 1) {
    gemm_reduce(&a->up, a->pg, a->g, c0, c1);
    gemm_reduce(&a->up, a->pu, a->u, c0, c1);
  }
  for (long r = 0; r < a->up.m; r++)
    for (long j = c0; j < c1; j++) {
      float *g = a->g + r * f + j;
      *g = (float)fuel_silu((double)*g);
      *g = *g * a->u[r * f + j];
    }
}

/* y [m, n] = (silu(x @ wg) * (x @ wu)) @ wd with x [m, k], wg/wu [k, f], wd [f, n]; g and u
 * are [m, f] scratch (g ends holding the gated hidden state). Returns 0, or -1 if the
 * partials' scratch cannot be allocated. */
int fuel_native_gated_mlp(const float *x, const float *wg, const float *wu, const float *wd,
                          float *g, float *u, float *y, long m, long k, long f, long n) {
  gemm_plan up = plan_gemm(m, k, f), down = plan_gemm(m, f, n);
  long up_part = up.kt > 1 ? up.kt * m * f : 0, down_part = down.kt > 1 ? down.kt * m * n : 0;
  pthread_mutex_lock(&call_mu);
  float *part = scratch_floats(2 * up_part + down_part + 1);
  int rc = -1;
  if (part) {
    gate_args a = {up, x, wg, wu, g, u, part, part + up_part, reduce_width(m, f, 2 * up.kt)};
    parallel_for(gate_chunk, &a, 2 * up.ct * up.kt);
    parallel_for(gate_finish, &a, (f + a.rw - 1) / a.rw);
    rc = gemm_execute(&down, g, wd, y, part + 2 * up_part, 0, ACT_NONE);
  }
  pthread_mutex_unlock(&call_mu);
  return rc;
}

/* -- silu(g) * u: the gated MLP's middle on many rows ----------------------------------- */

/* exp(x) for x in [-700, 709] in a form the compiler vectorizes (libm's exp is a call per
 * element): k = round(x / ln2) by the 1.5 * 2^52 trick, r = x - k ln2 (two-part ln2),
 * exp(r) by the degree-13 Taylor polynomial on |r| <= ln2 / 2, times 2^k built from its
 * exponent bits. Measured max relative error 2.2e-16 against libm over [-700, 700]. */
static inline double exp_vec(double x) {
  const double shift = 6755399441055744.0; /* 1.5 * 2^52: rounds x / ln2 to an integer */
  const double inv_ln2 = 1.4426950408889634, ln2_hi = 6.93147180369123816490e-01,
               ln2_lo = 1.90821492927058770002e-10;
  double kd = x * inv_ln2 + shift;
  int64_t kbits;
  memcpy(&kbits, &kd, sizeof kbits);
  kd -= shift;
  double r = (x - kd * ln2_hi) - kd * ln2_lo, p = 1.0 / 6227020800.0;
  p = p * r + 1.0 / 479001600.0;
  p = p * r + 1.0 / 39916800.0;
  p = p * r + 1.0 / 3628800.0;
  p = p * r + 1.0 / 362880.0;
  p = p * r + 1.0 / 40320.0;
  p = p * r + 1.0 / 5040.0;
  p = p * r + 1.0 / 720.0;
  p = p * r + 1.0 / 120.0;
  p = p * r + 1.0 / 24.0;
  p = p * r + 1.0 / 6.0;
  p = p * r + 0.5;
  p = p * r + 1.0;
  p = p * r + 1.0;
  int64_t two_k_bits = (kbits - (int64_t)0x4338000000000000LL + 1023) << 52; /* 2^k */
  double two_k;
  memcpy(&two_k, &two_k_bits, sizeof two_k);
  return p * two_k;
}

/* silu(x) = x e / (1 + e) (x < 0) or x / (1 + e) (x >= 0), e = exp(-|x|), in double,
 * rounded to f32 once: special.silu's formula. Below -700 the f32 result is -0 (the
 * exponential is clamped there, which changes no f32 result); NaN stays NaN, +inf is +inf. */
static inline float silu_f32(float xf) {
  double x = xf, ax = fabs(x);
  double e = exp_vec(ax > 700.0 ? -700.0 : -ax);
  double r = (x >= 0 ? x : x * e) / (1.0 + e);
  return x < -700.0 ? -0.0f : (float)r;
}

typedef struct {
  float *g;
  const float *u;
  long n, per;
} silu_mul_args;

FUEL_CLONES
static void silu_mul_range(float *restrict g, const float *restrict u, long i0, long i1) {
  for (long i = i0; i < i1; i++) g[i] = silu_f32(g[i]) * u[i];
}

static void silu_mul_chunk(void *p, long chunk) {
  silu_mul_args *a = p;
  long i0 = chunk * a->per, i1 = i0 + a->per < a->n ? i0 + a->per : a->n;
  silu_mul_range(a->g, a->u, i0, i1);
}

/* g = silu(g) * u elementwise (n floats; the product in f32), blocks of 16K on the pool. */
void fuel_native_silu_mul(float *g, const float *u, long n) {
  silu_mul_args a = {g, u, n, 16384};
  pthread_mutex_lock(&call_mu);
  parallel_for(silu_mul_chunk, &a, (n + a.per - 1) / a.per);
  pthread_mutex_unlock(&call_mu);
}

/* -- rms_norm --------------------------------------------------------------------------- */

/* y[r] = x[r] * (1 / sqrt(mean(x[r]^2) + eps)) * w for each of `rows` rows of length d; the
 * mean of squares in double, the scale rounded to f32 once, each output x * scale * w in f32
 * (the numpy kernel's last two steps). */
FUEL_CLONES
static void rms_rows(const float *restrict x, const float *restrict w, float *restrict y,
                     long r0, long r1, long d, double eps) {
  for (long r = r0; r < r1; r++) {
    const float *restrict xr = x + r * d;
    float *restrict yr = y + r * d;
    double s0 = 0, s1 = 0, s2 = 0, s3 = 0;
    long j = 0;
    for (; j + 4 <= d; j += 4) {
      s0 += (double)xr[j] * xr[j];
      s1 += (double)xr[j + 1] * xr[j + 1];
      s2 += (double)xr[j + 2] * xr[j + 2];
      s3 += (double)xr[j + 3] * xr[j + 3];
    }
    for (; j < d; j++) s0 += (double)xr[j] * xr[j];
    const float inv = (float)(1.0 / sqrt(((s0 + s1) + (s2 + s3)) / (double)d + eps));
    for (j = 0; j < d; j++) yr[j] = (xr[j] * inv) * w[j];
  }
}

typedef struct {
  const float *x, *w;
  float *y;
  long rows, d, per;
  double eps;
} rms_args;

static void rms_chunk(void *p, long chunk) {
  rms_args *a = p;
  long r0 = chunk * a->per, r1 = r0 + a->per < a->rows ? r0 + a->per : a->rows;
  rms_rows(a->x, a->w, a->y, r0, r1, a->d, a->eps);
}

/* Row blocks of about PARALLEL_BYTES each. */
void fuel_native_rms_norm(const float *x, const float *w, float *y, long rows, long d,
                          double eps) {
  long per = PARALLEL_BYTES / (4 * d) > 1 ? PARALLEL_BYTES / (4 * d) : 1;
  rms_args a = {x, w, y, rows, d, per, eps};
  pthread_mutex_lock(&call_mu);
  parallel_for(rms_chunk, &a, (rows + per - 1) / per);
  pthread_mutex_unlock(&call_mu);
}

/* -- layer_norm ------------------------------------------------------------------------- */

/* y[r] = (x[r] - mean) / sqrt(var + eps) * w + b for each of `rows` rows of length d, all in
 * double from the exact f32 inputs and rounded once: the corrected two-pass mean (the first
 * pass's mean plus the mean of the residuals, like the numpy kernel: a constant row's mean is
 * exactly its value, so it gives exactly the bias), the biased variance of the residuals. Four
 * partial sums per pass, added in a fixed order: the bits do not depend on the threads. */
FUEL_CLONES
static void ln_rows(const float *restrict x, const float *restrict w, const float *restrict b,
                    float *restrict y, long r0, long r1, long d, double eps) {
  for (long r = r0; r < r1; r++) {
    const float *restrict xr = x + r * d;
    float *restrict yr = y + r * d;
    double s[4] = {0, 0, 0, 0}, c[4] = {0, 0, 0, 0}, v[4] = {0, 0, 0, 0};
    long j = 0;
    for (; j + 4 <= d; j += 4)
      for (int q = 0; q < 4; q++) s[q] += (double)xr[j + q];
    for (; j < d; j++) s[0] += (double)xr[j];
    double m = ((s[0] + s[1]) + (s[2] + s[3])) / (double)d;
    for (j = 0; j + 4 <= d; j += 4)
      for (int q = 0; q < 4; q++) c[q] += (double)xr[j + q] - m;
    for (; j < d; j++) c[0] += (double)xr[j] - m;
    m += ((c[0] + c[1]) + (c[2] + c[3])) / (double)d;
    for (j = 0; j + 4 <= d; j += 4)
      for (int q = 0; q < 4; q++) {
        const double t = (double)xr[j + q] - m;
        v[q] += t * t;
      }
    for (; j < d; j++) {
      const double t = (double)xr[j] - m;
      v[0] += t * t;
    }
    const double inv = 1.0 / sqrt(((v[0] + v[1]) + (v[2] + v[3])) / (double)d + eps);
    for (j = 0; j < d; j++) yr[j] = (float)(((double)xr[j] - m) * inv * (double)w[j] + (double)b[j]);
  }
}

typedef struct {
  const float *x, *w, *b;
  float *y;
  long rows, d, per;
  double eps;
} ln_args;

static void ln_chunk(void *p, long chunk) {
  ln_args *a = p;
  long r0 = chunk * a->per, r1 = r0 + a->per < a->rows ? r0 + a->per : a->rows;
  ln_rows(a->x, a->w, a->b, a->y, r0, r1, a->d, a->eps);
}

/* Row blocks of about PARALLEL_BYTES each. */
void fuel_native_layer_norm(const float *x, const float *w, const float *b, float *y, long rows,
                            long d, double eps) {
  long per = PARALLEL_BYTES / (4 * d) > 1 ? PARALLEL_BYTES / (4 * d) : 1;
  ln_args a = {x, w, b, y, rows, d, per, eps};
  pthread_mutex_lock(&call_mu);
  parallel_for(ln_chunk, &a, (rows + per - 1) / per);
  pthread_mutex_unlock(&call_mu);
}

/* -- flash attention: each query over its live keys, split-KV ------------------------------ */

/* out[b, h, i] = softmax(scale * q[b, h, i] . k[b, h / g, j] for j < L_i) @ v[b, h / g] with
 * g = hq / hkv (grouped-query heads) and L_i = kv_len, or, causal, min(kv_len, i + kv_len -
 * sq + 1): numpy's mask (kernels/nn.py `_mask`). Split-KV: the keys are cut into splits of
 * SPLIT_KEYS; each (kv head, query row, split) is one chunk computing, for each query head of
 * the group,
 * its partial max m, sum of exponentials l = sum exp(s - m) and weighted values
 * o = sum exp(s - m) v; a reduction pass then combines the splits with w = exp(m - max m):
 * out = sum w o / sum w l. Each q . k in f32 over 8 lanes (`dot_f32`) times scale in f32, plus
 * the additive mask in f32 when there is one (mask[b ms[0] + h ms[1] + i ms[2] + j ms[3]], the
 * strides 0 where it broadcasts); the exponentials and sums in double, rounded once. kv_len 0,
 * or every logit -inf: zeros. The splits depend only on kv_len, so the bits do not depend on
 * the thread count. */
#define SPLIT_KEYS 256

typedef struct {
  const float *q, *k, *v;
  float *out;
  long hq, hkv, sq, sk, d, dv, kv_len, splits;
  int causal;
  float scale;
  double *part; /* per (query row, split): m, l, o[dv] */
  const float *mask; /* additive, or 0 */
  const long *ms;    /* its element strides over (b, h, i, j) */
} flash_args;

/* a . b in f32 over 8 lanes (lane l sums the terms i = l mod 8 in order), the lanes then
 * added pairwise: a fixed order the compiler vectorizes without reassociating. */
FUEL_CLONES
static float dot_f32(const float *restrict a, const float *restrict b, long n) {
  float lane[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  long i = 0;
  for (; i + 8 <= n; i += 8)
    for (int l = 0; l < 8; l++) lane[l] += a[i + l] * b[i + l];
  for (int l = 0; i < n; i++, l++) lane[l] += a[i] * b[i];
  return ((lane[0] + lane[1]) + (lane[2] + lane[3])) + ((lane[4] + lane[5]) + (lane[6] + lane[7]));
}

FUEL_CLONES
static void axpy_f64(double *restrict acc, double p, const float *restrict v, long n) {
  for (long i = 0; i < n; i++) acc[i] += p * (double)v[i];
}

/* s[j] = exp(s[j] - m) for j < n (s[j] <= m): `exp_vec`, vectorized, within an ulp or two of
 * libm's; below -700 (under 1e-304 of the largest term, which is 1) it is 0. */
FUEL_CLONES
static void exp_shifted(double *restrict s, double m, long n) {
  for (long j = 0; j < n; j++) {
    const double x = s[j] - m;
    s[j] = x < -700.0 ? 0.0 : exp_vec(x);
  }
}

/* The keys query row i of sq reads: the first kv_len, or (causal) the first i + kv_len - sq + 1
 * of them (numpy's mask, kernels/nn.py `_mask`), at least none. */
static inline long live_keys(long i, long sq, long kv_len, int causal) {
  const long c = i + kv_len - sq + 1;
  return !causal || c >= kv_len ? kv_len : c < 0 ? 0 : c;
}

/* chunk = ((b * hkv + kv head) * sq + query row) * splits + split: the g query heads of one
 * kv head together, so each key and value row is read once for all of them. */
static void flash_chunk(void *p, long chunk) {
  flash_args *a = p;
  const long g = a->hq / a->hkv, stride = a->dv + 2;
  long split = chunk % a->splits, i = chunk / a->splits % a->sq;
  long grp = chunk / a->splits / a->sq, b = grp / a->hkv, kvh = grp % a->hkv;
  const long live = live_keys(i, a->sq, a->kv_len, a->causal);
  long j0 = split * SPLIT_KEYS, j1 = j0 + SPLIT_KEYS < live ? j0 + SPLIT_KEYS : live;
  const float *kb = a->k + (b * a->hkv + kvh) * a->sk * a->d;
  const float *vb = a->v + (b * a->hkv + kvh) * a->sk * a->dv;
  double s[SPLIT_KEYS];
  for (long r = 0; r < g; r++) {
    long row = (b * a->hq + kvh * g + r) * a->sq + i; /* head kvh * g + r reads kv head kvh */
    const float *qr = a->q + row * a->d;
    double *part = a->part + (row * a->splits + split) * stride, *o = part + 2;
    double m = -INFINITY, l = 0.0;
    const float *mr = a->mask ? a->mask + b * a->ms[0] + (kvh * g + r) * a->ms[1] + i * a->ms[2]
                              : 0;
    for (long j = j0; j < j1; j++) {
      float x = dot_f32(qr, kb + j * a->d, a->d) * a->scale;
      if (mr) x = x + mr[j * a->ms[3]];
      s[j - j0] = (double)x;
      if (s[j - j0] > m) m = s[j - j0];
    }
    for (long c = 0; c < a->dv; c++) o[c] = 0.0;
    if (m != -INFINITY) { /* else every score is -inf (or the split is empty): it adds nothing */
      exp_shifted(s, m, j1 - j0);
      for (long j = j0; j < j1; j++) {
        l += s[j - j0];
        axpy_f64(o, s[j - j0], vb + j * a->dv, a->dv);
      }
    }
    part[0] = m, part[1] = l;
  }
}

static void flash_reduce(flash_args *a, long row) {
  const long stride = a->dv + 2;
  const double *first = a->part + row * a->splits * stride;
  float *out = a->out + row * a->dv;
  double mx = -INFINITY, l = 0.0;
  for (long s = 0; s < a->splits; s++)
    if (first[s * stride] > mx) mx = first[s * stride];
  if (mx == -INFINITY) { /* no live key, or every score -inf: zeros */
    for (long c = 0; c < a->dv; c++) out[c] = 0.0f;
    return;
  }
  double w[a->splits]; /* exp(m_s - max m): 0 for a split that adds nothing */
  for (long s = 0; s < a->splits; s++) {
    w[s] = first[s * stride] == -INFINITY ? 0.0 : exp(first[s * stride] - mx);
    l += w[s] * first[s * stride + 1];
  }
  for (long c = 0; c < a->dv; c++) {
    double acc = 0.0;
    for (long s = 0; s < a->splits; s++) acc += w[s] * first[s * stride + 2 + c];
    out[c] = (float)(acc / l);
  }
}

/* q [b, hq, sq, d], k [b, hkv, sk, d], v [b, hkv, sk, dv] -> out [b, hq, sq, dv]; kv_len is
 * clamped to [0, sk] by the caller; part holds b * hq * sq * splits * (dv + 2) doubles with
 * splits = max(1, ceil(kv_len / SPLIT_KEYS)) (`fuel_native_flash_splits`). */
long fuel_native_flash_splits(long kv_len) {
  return kv_len <= SPLIT_KEYS ? 1 : (kv_len + SPLIT_KEYS - 1) / SPLIT_KEYS;
}

void fuel_native_flash_attention(const float *q, const float *k, const float *v, float *out,
                                 double *part, long bsz, long hq, long hkv, long sq, long sk,
                                 long d, long dv, long kv_len, int causal, double scale,
                                 const float *mask, const long *ms) {
  long splits = fuel_native_flash_splits(kv_len);
  flash_args a = {q, k, v, out, hq, hkv, sq, sk, d, dv, kv_len, splits, causal, (float)scale,
                  part, mask, ms};
  long chunks = bsz * hkv * sq * splits, work = bsz * hq * sq * kv_len * (d + dv) * 4;
  pthread_mutex_lock(&call_mu);
  if (work < PARALLEL_BYTES)
    for (long c = 0; c < chunks; c++) flash_chunk(&a, c);
  else
    parallel_for(flash_chunk, &a, chunks);
  for (long r = 0; r < bsz * hq * sq; r++) flash_reduce(&a, r);
  pthread_mutex_unlock(&call_mu);
}

/* One query per head (decode): `fuel_native_flash_attention` with sq = 1. */
void fuel_native_flash_decode(const float *q, const float *k, const float *v, float *out,
                              double *part, long bsz, long hq, long hkv, long sk, long d,
                              long dv, long kv_len, double scale) {
  fuel_native_flash_attention(q, k, v, out, part, bsz, hq, hkv, 1, sk, d, dv, kv_len, 0, scale,
                              0, 0);
}

/* -- rope --------------------------------------------------------------------------------- */

/* Rotary embedding of x [outer, s, d] by cos/sin [s, d/2]: pairs (x[i], x[i + d/2]), or
 * (x[2i], x[2i+1]) if interleaved, become (a c - b s, b c + a s), each computed in double
 * (the f32 products are exact there) and rounded once: the numpy kernel's arithmetic. */
FUEL_CLONES
static void rope_row(const float *restrict xr, const float *restrict c, const float *restrict sr,
                     float *restrict yr, long h, long ia, long ib) {
  if (ia == 1) { /* rotate-half: both halves contiguous, vectorized */
    for (long i = 0; i < h; i++) {
      const double a = xr[i], b = xr[i + h];
      yr[i] = (float)(a * c[i] - b * sr[i]);
      yr[i + h] = (float)(b * c[i] + a * sr[i]);
    }
    return;
  }
  for (long i = 0; i < h; i++) {
    double a = xr[i * ia], b = xr[i * ia + ib];
    yr[i * ia] = (float)(a * c[i] - b * sr[i]);
    yr[i * ia + ib] = (float)(b * c[i] + a * sr[i]);
  }
}

/* x [n0, n1, s, d] -> out (dense). ldt: the tables' row stride in elements (their rows are
 * contiguous; h when packed). xs: x's element strides along n0, n1 and s (its rows dense: a
 * transposed view, [b, s, h, d] read as [b, h, s, d]), or null: x dense. */
void fuel_native_rope(const float *x, const float *cs, const float *sn, float *out, long n0,
                      long n1, long s, long d, int interleaved, long ldt, const long *xs) {
  const long h = d / 2, ia = interleaved ? 2 : 1, ib = interleaved ? 1 : h;
  const long dense[3] = {n1 * s * d, s * d, d};
  if (!xs) xs = dense;
  for (long o = 0; o < n0 * n1; o++)
    for (long t = 0; t < s; t++)
      rope_row(x + o / n1 * xs[0] + o % n1 * xs[1] + t * xs[2], cs + t * ldt, sn + t * ldt,
               out + (o * s + t) * d, h, ia, ib);
}

/* -- copies: transpose and concat (exact) ------------------------------------------------- */

/* out (C-contiguous) = the view of x with `size` [rank] and x's element `stride` [rank]
 * (rank 1..8): a transpose is x read by permuted strides. Rows of the last dim are copied
 * whole where that dim is contiguous in x. */
void fuel_native_permute(const float *x, float *out, long rank, const long *size,
                         const long *stride) {
  long idx[8] = {0}, rows = 1;
  const long n = size[rank - 1], sn = stride[rank - 1];
  for (long d = 0; d < rank - 1; d++) rows *= size[d];
  for (long r = 0; r < rows; r++) {
    long off = 0;
    for (long d = 0; d < rank - 1; d++) off += idx[d] * stride[d];
    const float *src = x + off;
    float *dst = out + r * n;
    if (sn == 1)
      memcpy(dst, src, (size_t)n * sizeof(float));
    else
      for (long j = 0; j < n; j++) dst[j] = src[j * sn];
    for (long d = rank - 2; d >= 0 && ++idx[d] == size[d]; d--) idx[d] = 0;
  }
}

/* out [outer, sum inner] = the n inputs [outer, inner[i]] side by side (a concat of
 * C-contiguous arrays along one axis: outer the product of the dims before it). */
void fuel_native_concat(float *out, long outer, long n, const int64_t *src, const long *inner) {
  long total = 0;
  for (long i = 0; i < n; i++) total += inner[i];
  for (long o = 0; o < outer; o++) {
    float *dst = out + o * total;
    for (long i = 0; i < n; i++) {
      memcpy(dst, (const float *)(intptr_t)src[i] + o * inner[i], (size_t)inner[i] * 4);
      dst += inner[i];
    }
  }
}

/* fuel_gemm.c (compiled after this file, in the same unit) */
int fuel_native_gemm_packed(const float *x, const float *wp, const float *bias, float *y, long m,
                            long k, long n, int act);
int fuel_native_gemm_batched(const float *x, const float *w, float *y, long batch, long m,
                             long k, long n, const long *xoff, const long *woff);
int fuel_native_gated_packed(const float *x, const float *wg, const float *wu, const float *wd,
                             float *g, float *u, float *y, long m, long k, long f, long n,
                             int packed);
int fuel_native_attention_gemm(const float *q, const float *k, const float *v, float *out,
                               long bsz, long hq, long hkv, long sq, long sk, long d, long dv,
                               long kv_len, int causal, double scale, const float *mask,
                               const long *ms, const long *st);

/* -- programs: a run of kernels in one call --------------------------------------------------- */

/* A decode step calls these kernels ~100 times; from Python each call costs microseconds, and
 * more after a weight stream has evicted the interpreter's working set from cache. The
 * executor encodes a run of consecutive calls whose buffers never move as one program: records
 * [opcode, args...] back to back (pointers and integers as int64, doubles by their bits), run
 * here in order. Returns -1, or the index of the record that failed (out of memory). */
enum {
  OP_GEMM = 1,
  OP_GATED,
  OP_RMS,
  OP_ROPE,
  OP_FLASH,
  OP_ADD,
  OP_MUL,
  OP_CALL,
  OP_GEMM_PACKED,
  OP_GEMM_BATCHED,
  OP_GATED_PACKED,
  OP_ATTN,
  OP_PERMUTE,
  OP_CONCAT,
  OP_GEMM_ACT,
  OP_LN
};

static double bits_f64(int64_t v) {
  double d;
  memcpy(&d, &v, sizeof d);
  return d;
}

#define P(i) ((void *)(intptr_t)a[i])
long fuel_native_program(const int64_t *prog, long records) {
  const int64_t *a = prog;
  for (long r = 0; r < records; r++) {
    const int64_t op = *a++;
    switch (op) {
    case OP_GEMM:
      if (fuel_native_gemm(P(0), P(1), P(2), a[3], a[4], a[5])) return r;
      a += 6;
      break;
    case OP_GATED:
      if (fuel_native_gated_mlp(P(0), P(1), P(2), P(3), P(4), P(5), P(6), a[7], a[8], a[9],
                                a[10]))
        return r;
      a += 11;
      break;
    case OP_RMS:
      fuel_native_rms_norm(P(0), P(1), P(2), a[3], a[4], bits_f64(a[5]));
      a += 6;
      break;
    case OP_ROPE: /* x, cos, sin, out, n0, n1, s, d, interleaved, the tables' row stride, x's
                     strides (0: dense) */
      fuel_native_rope(P(0), P(1), P(2), P(3), a[4], a[5], a[6], a[7], (int)a[8], a[9], P(10));
      a += 11;
      break;
    case OP_FLASH: { /* a[11]: the i64 live length's address (0: all sk keys) */
      long sk = a[8], n = a[11] ? *(const int64_t *)P(11) : sk;
      n = n < 0 ? 0 : n > sk ? sk : n;
      fuel_native_flash_decode(P(0), P(1), P(2), P(3), P(4), a[5], a[6], a[7], sk, a[9], a[10],
                               n, bits_f64(a[12]));
      a += 13;
      break;
    }
    case OP_ADD:
    case OP_MUL: { /* same-shape contiguous f32: IEEE, so exactly numpy's */
      const float *x = P(0), *y = P(1);
      float *out = P(2);
      if (op == OP_ADD)
        for (long i = 0; i < a[3]; i++) out[i] = x[i] + y[i];
      else
        for (long i = 0; i < a[3]; i++) out[i] = x[i] * y[i];
      a += 4;
      break;
    }
    case OP_GEMM_ACT: /* x, w, bias (0: none), y, m, k, n, act */
      if (fuel_native_gemm_bias_act(P(0), P(1), P(2), P(3), a[4], a[5], a[6], (int)a[7])) return r;
      a += 8;
      break;
    case OP_LN: /* x, w, b, y, rows, d, eps bits */
      fuel_native_layer_norm(P(0), P(1), P(2), P(3), a[4], a[5], bits_f64(a[6]));
      a += 7;
      break;
    case OP_GEMM_PACKED: /* x, packed w, bias (0: none), y, m, k, n, act */
      if (fuel_native_gemm_packed(P(0), P(1), P(2), P(3), a[4], a[5], a[6], (int)a[7])) return r;
      a += 8;
      break;
    case OP_GEMM_BATCHED: /* x, w, y, batch, m, k, n, x offsets, w offsets */
      if (fuel_native_gemm_batched(P(0), P(1), P(2), a[3], a[4], a[5], a[6], P(7), P(8)))
        return r;
      a += 9;
      break;
    case OP_GATED_PACKED: /* x, wg, wu, wd, g, u, y, m, k, f, n, packed */
      if (fuel_native_gated_packed(P(0), P(1), P(2), P(3), P(4), P(5), P(6), a[7], a[8], a[9],
                                   a[10], (int)a[11]))
        return r;
      a += 12;
      break;
    case OP_ATTN: /* q, k, v, out, part, bsz, hq, hkv, sq, sk, d, dv, causal, scale bits,
                     additive mask (0: none), its element strides, q/k/v strides (0: dense;
                     sq > 1 only): every key live */
      if (a[8] > 1) {
        if (fuel_native_attention_gemm(P(0), P(1), P(2), P(3), a[5], a[6], a[7], a[8], a[9],
                                       a[10], a[11], a[9], (int)a[12], bits_f64(a[13]), P(14),
                                       P(15), P(16)))
          return r;
      } else {
        fuel_native_flash_attention(P(0), P(1), P(2), P(3), P(4), a[5], a[6], a[7], a[8], a[9],
                                    a[10], a[11], a[9], (int)a[12], bits_f64(a[13]), P(14),
                                    P(15));
      }
      a += 17;
      break;
    case OP_PERMUTE: /* x, out, rank, sizes, x's strides */
      fuel_native_permute(P(0), P(1), a[2], P(3), P(4));
      a += 5;
      break;
    case OP_CONCAT: /* out, outer, n, input addresses, their inner sizes */
      fuel_native_concat(P(0), a[1], a[2], P(3), P(4));
      a += 5;
      break;
    case OP_CALL: /* a generated C kernel (lowering/cpu/codegen.py): fn(void **args) */
      ((void (*)(void **))P(0))((void **)P(1));
      a += 2;
      break;
    default:
      return r;
    }
  }
  return -1;
}
#undef P
