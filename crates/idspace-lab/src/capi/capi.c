/* The C side of the lab's `capi` experiment: `capi BENCH THREADS MILLIS` runs BENCH on THREADS
 * threads that start together, in chunks of CHUNK operations, until MILLIS milliseconds have
 * passed; checks the result, and prints the nanoseconds per operation per thread (elapsed x
 * threads / operations, elapsed from the first thread's start to the last one's end). A run
 * whose threads did not all run at once (one made no chunk, or one started after another had
 * stopped, or they had less than half the CPUs they could use because other work kept them
 * off) measured something else: it exits with status 2 and says so. Built by the lab at
 * run time against libidspace's static library (and glib's GHashTable when its development
 * files are installed). */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "idspace.h"
#ifdef HAVE_GLIB
#include <glib.h>
#endif

#define FAIL(...)                   \
  do {                              \
    fprintf(stderr, __VA_ARGS__);   \
    fputc('\n', stderr);            \
    exit(1);                        \
  } while (0)
#define OK(call)                                                                 \
  do {                                                                           \
    int ok_err_ = (call);                                                        \
    if (ok_err_ != 0) FAIL("%s: %s", #call, idspace_strerror(ok_err_));          \
  } while (0)

typedef void (*work_fn)(int me, uint64_t ops);

#define CHUNK 1024
#define MAX_THREADS 1024

static pthread_barrier_t start_line;
static int stop;
static work_fn work;

/* What each thread did: its first and last moment, its CPU time and its operations. */
static struct {
  double start, end, cpu;
  uint64_t ops;
} spans[MAX_THREADS];

/* --- idspace through the C ABI --- */
static idspace_counter counter;
static idspace_table table;
static idspace_pids pids;
static idspace_pool pool;

static void counter_idspace(int me, uint64_t ops) {
  (void)me;
  for (uint64_t i = 0; i < ops; i++) idspace_counter_add(counter, 1);
}

static void table_idspace(int me, uint64_t ops) {
  for (uint64_t i = 0; i < ops; i++) {
    uint32_t id;
    uint64_t value;
    OK(idspace_table_create(table, (uint64_t)me, i, &id));
    OK(idspace_table_lookup(table, (uint64_t)me, id, &value));
    if (value != i) FAIL("table: lookup found %llu", (unsigned long long)value);
    OK(idspace_table_remove(table, (uint64_t)me, id, NULL));
  }
}

static void pid_idspace(int me, uint64_t ops) {
  (void)me;
  for (uint64_t i = 0; i < ops; i++) {
    uint32_t pid;
    OK(idspace_pid_alloc(pids, IDSPACE_PID_NS_ROOT, NULL, 0, &pid));
    OK(idspace_pid_free(pids, IDSPACE_PID_NS_ROOT, pid));
  }
}

static uint64_t pool_made;

static void *pool_object(void) {
  void *object = malloc(64);
  if (object == NULL) FAIL("out of memory");
  __atomic_fetch_add(&pool_made, 1, __ATOMIC_RELAXED);
  return object;
}

static void pool_idspace(int me, uint64_t ops) {
  (void)me;
  void *object = pool_object();
  for (uint64_t i = 0; i < ops; i++) {
    OK(idspace_pool_give(pool, object));
    /* A thread that moved to another CID between the give and the take may find nothing at
     * hand there (its object waits on the old CID's list): it makes another, as a cache's
     * user would. */
    int taken = idspace_pool_take(pool, &object);
    if (taken == -EAGAIN) {
      object = pool_object();
    } else {
      OK(taken);
    }
  }
  /* Give the last one back: the pool then holds every object made. */
  OK(idspace_pool_give(pool, object));
}

static void mmcid_idspace(int me, uint64_t ops) {
  (void)me;
  int sink = 0;
  for (uint64_t i = 0; i < ops; i++) sink += idspace_mm_cid();
  __asm__ volatile("" : : "r"(sink));
}

/* --- what a C programmer writes instead --- */
static uint64_t shared_counter;

static void counter_atomic(int me, uint64_t ops) {
  (void)me;
  for (uint64_t i = 0; i < ops; i++) __atomic_fetch_add(&shared_counter, 1, __ATOMIC_RELAXED);
}

/* _Thread_local shards, each registered once, summed by walking the registry. */
struct shard {
  uint64_t value;
  char pad[56];
};
#define MAX_SHARDS 1024
static struct shard *shards[MAX_SHARDS];
static int shard_count;
static pthread_mutex_t shard_lock = PTHREAD_MUTEX_INITIALIZER;
static _Thread_local struct shard *my_shard;

static struct shard *shard_register(void) {
  struct shard *s = aligned_alloc(64, sizeof *s);
  if (s == NULL) FAIL("out of memory");
  memset(s, 0, sizeof *s);
  pthread_mutex_lock(&shard_lock);
  if (shard_count == MAX_SHARDS) FAIL("too many shards");
  shards[shard_count++] = s;
  pthread_mutex_unlock(&shard_lock);
  return s;
}

static void counter_tls(int me, uint64_t ops) {
  (void)me;
  for (uint64_t i = 0; i < ops; i++) {
    struct shard *s = my_shard;
    if (__builtin_expect(s == NULL, 0)) s = my_shard = shard_register();
    __atomic_store_n(&s->value, s->value + 1, __ATOMIC_RELAXED);
  }
}

static uint64_t tls_sum(void) {
  uint64_t sum = 0;
  pthread_mutex_lock(&shard_lock);
  for (int i = 0; i < shard_count; i++) sum += __atomic_load_n(&shards[i]->value, __ATOMIC_RELAXED);
  pthread_mutex_unlock(&shard_lock);
  return sum;
}

/* A handle table: an array of slots with a free list, under one pthread mutex. */
#define MUTEX_SLOTS 4096
static struct {
  uint64_t owner, value;
  int next_free;
  int used;
} mutex_slots[MUTEX_SLOTS];
static int mutex_free = -1;
static pthread_mutex_t mutex_lock = PTHREAD_MUTEX_INITIALIZER;

static void mutex_table_init(void) {
  for (int i = 0; i < MUTEX_SLOTS; i++) mutex_slots[i].next_free = i + 1 < MUTEX_SLOTS ? i + 1 : -1;
  mutex_free = 0;
}

static void table_mutex(int me, uint64_t ops) {
  for (uint64_t i = 0; i < ops; i++) {
    pthread_mutex_lock(&mutex_lock);
    int id = mutex_free;
    if (id < 0) FAIL("mutex table full");
    mutex_free = mutex_slots[id].next_free;
    mutex_slots[id].owner = (uint64_t)me;
    mutex_slots[id].value = i;
    mutex_slots[id].used = 1;
    pthread_mutex_unlock(&mutex_lock);

    pthread_mutex_lock(&mutex_lock);
    uint64_t value = mutex_slots[id].used && mutex_slots[id].owner == (uint64_t)me ? mutex_slots[id].value : ~0ull;
    pthread_mutex_unlock(&mutex_lock);
    if (value != i) FAIL("mutex table: lookup found %llu", (unsigned long long)value);

    pthread_mutex_lock(&mutex_lock);
    mutex_slots[id].used = 0;
    mutex_slots[id].next_free = mutex_free;
    mutex_free = id;
    pthread_mutex_unlock(&mutex_lock);
  }
}

#ifdef HAVE_GLIB
static GHashTable *glib_table;
static pthread_mutex_t glib_lock = PTHREAD_MUTEX_INITIALIZER;

static void table_glib(int me, uint64_t ops) {
  uint32_t cursor = 0;
  for (uint64_t i = 0; i < ops; i++) {
    uint32_t id = cursor++ & 0x7fffffff;
    gpointer key = GSIZE_TO_POINTER(((gsize)me << 32) | id);
    pthread_mutex_lock(&glib_lock);
    g_hash_table_insert(glib_table, key, GSIZE_TO_POINTER(i + 1));
    pthread_mutex_unlock(&glib_lock);
    pthread_mutex_lock(&glib_lock);
    gsize value = GPOINTER_TO_SIZE(g_hash_table_lookup(glib_table, key));
    pthread_mutex_unlock(&glib_lock);
    if (value != i + 1) FAIL("glib table: lookup found %zu", (size_t)value);
    pthread_mutex_lock(&glib_lock);
    g_hash_table_remove(glib_table, key);
    pthread_mutex_unlock(&glib_lock);
  }
}
#endif

static uint64_t pool_released;
static void count_release(void *object, void *ctx) {
  (void)ctx;
  free(object);
  pool_released++;
}

static double clock_ns(clockid_t clock) {
  struct timespec ts;
  clock_gettime(clock, &ts);
  return ts.tv_sec * 1e9 + ts.tv_nsec;
}

static double now(void) { return clock_ns(CLOCK_MONOTONIC); }

static void *thread_main(void *arg) {
  int me = (int)(intptr_t)arg;
  pthread_barrier_wait(&start_line);
  spans[me].start = now();
  double cpu = clock_ns(CLOCK_THREAD_CPUTIME_ID);
  uint64_t ops = 0;
  /* Relaxed: the flag only ends the loop; the spans are read after the joins. */
  while (!__atomic_load_n(&stop, __ATOMIC_RELAXED)) {
    work(me, CHUNK);
    ops += CHUNK;
  }
  spans[me].cpu = clock_ns(CLOCK_THREAD_CPUTIME_ID) - cpu;
  spans[me].end = now();
  spans[me].ops = ops;
  return NULL;
}

int main(int argc, char **argv) {
  if (argc != 4) FAIL("usage: capi BENCH THREADS MILLIS");
  const char *bench = argv[1];
  int threads = atoi(argv[2]);
  long millis = atol(argv[3]);
  if (threads < 1 || threads > MAX_THREADS || millis <= 0) FAIL("bad arguments");

  if (strcmp(bench, "counter-idspace") == 0) {
    OK(idspace_counter_new(&counter));
    work = counter_idspace;
  } else if (strcmp(bench, "counter-atomic") == 0) {
    work = counter_atomic;
  } else if (strcmp(bench, "counter-tls") == 0) {
    work = counter_tls;
  } else if (strcmp(bench, "table-idspace") == 0) {
    OK(idspace_table_new(IDSPACE_TABLE_SCALED, &table));
    work = table_idspace;
  } else if (strcmp(bench, "table-mutex") == 0) {
    mutex_table_init();
    work = table_mutex;
  } else if (strcmp(bench, "table-glib") == 0) {
#ifdef HAVE_GLIB
    glib_table = g_hash_table_new(g_direct_hash, g_direct_equal);
    work = table_glib;
#else
    FAIL("built without glib");
#endif
  } else if (strcmp(bench, "pid-idspace") == 0) {
    OK(idspace_pids_new(IDSPACE_PIDS_PERCPU, &pids));
    /* The namespace's init stays: freeing it would leave the namespace dead. */
    uint32_t init;
    OK(idspace_pid_alloc(pids, IDSPACE_PID_NS_ROOT, NULL, 0, &init));
    work = pid_idspace;
  } else if (strcmp(bench, "pool-idspace") == 0) {
    OK(idspace_pool_new(64, &pool));
    work = pool_idspace;
  } else if (strcmp(bench, "mmcid-idspace") == 0) {
    work = mmcid_idspace;
  } else {
    FAIL("unknown bench %s", bench);
  }

  pthread_barrier_init(&start_line, NULL, (unsigned)threads + 1);
  pthread_t handles[MAX_THREADS];
  for (int t = 0; t < threads; t++) {
    if (pthread_create(&handles[t], NULL, thread_main, (void *)(intptr_t)t) != 0) FAIL("pthread_create");
  }
  pthread_barrier_wait(&start_line);
  struct timespec window = {millis / 1000, (millis % 1000) * 1000000L};
  while (nanosleep(&window, &window) != 0 && errno == EINTR) {
  }
  __atomic_store_n(&stop, 1, __ATOMIC_RELAXED);
  for (int t = 0; t < threads; t++) pthread_join(handles[t], NULL);

  /* Every thread ran at once, or the run measured something else. */
  double first_start = spans[0].start, last_start = spans[0].start;
  double first_end = spans[0].end, last_end = spans[0].end;
  uint64_t done = 0;
  double cpu = 0;
  for (int t = 0; t < threads; t++) {
    cpu += spans[t].cpu;
    if (spans[t].ops == 0) {
      fprintf(stderr, "thread %d of %d made no operation in the window: the threads did not all run at once\n", t, threads);
      exit(2);
    }
    if (spans[t].start < first_start) first_start = spans[t].start;
    if (spans[t].start > last_start) last_start = spans[t].start;
    if (spans[t].end < first_end) first_end = spans[t].end;
    if (spans[t].end > last_end) last_end = spans[t].end;
    done += spans[t].ops;
  }
  if (last_start > first_end) {
    fprintf(stderr, "a thread started %.0f ns after another had stopped: the threads did not all run at once\n",
            last_start - first_end);
    exit(2);
  }
  double elapsed = last_end - first_start;
  /* The work is CPU-bound: threads that had less than half the CPUs they could use were kept
   * off them by other work, and their figure is of time slices taken in turn. */
  cpu_set_t allowed;
  int cpus = sched_getaffinity(0, sizeof allowed, &allowed) == 0 ? CPU_COUNT(&allowed) : 1;
  double usable = (threads < cpus ? threads : cpus) * elapsed;
  if (cpu < 0.5 * usable) {
    fprintf(stderr, "the %d threads had %.0f%% of the CPUs they could use: other work kept them off the CPUs\n",
            threads, 100.0 * cpu / usable);
    exit(2);
  }

  /* Exact counts: a benchmark of a wrong result measures nothing. */
  if (work == counter_idspace) {
    uint64_t sum;
    OK(idspace_counter_sum(counter, &sum));
    if (sum != done) FAIL("counter: sum %llu of %llu adds", (unsigned long long)sum, (unsigned long long)done);
    OK(idspace_counter_destroy(counter));
  } else if (work == counter_atomic && shared_counter != done) {
    FAIL("atomic: %llu of %llu", (unsigned long long)shared_counter, (unsigned long long)done);
  } else if (work == counter_tls && tls_sum() != done) {
    FAIL("thread_local: %llu of %llu", (unsigned long long)tls_sum(), (unsigned long long)done);
  } else if (work == table_idspace) {
    OK(idspace_table_destroy(table));
  } else if (work == pid_idspace) {
    OK(idspace_pids_destroy(pids));
  } else if (work == pool_idspace) {
    OK(idspace_pool_destroy(pool, count_release, NULL));
    if (pool_released != pool_made)
      FAIL("pool: %llu objects back of %llu", (unsigned long long)pool_released, (unsigned long long)pool_made);
  }
  printf("%.3f\n", elapsed * threads / (double)done);
  return 0;
}
