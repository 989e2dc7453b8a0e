/* 8 threads (more than this machine's CPUs: oversubscribed) on each structure at once,
 * checking that IDs are unique and counts exact. */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>

#include "check.h"
#include "idspace.h"

#define THREADS 8
#define ROUNDS 2000

static idspace_table table;
static idspace_pids pids;
static idspace_counter counter;
static idspace_pool pool;
static idspace_cids cids;
static uint32_t pid_ns;

/* Per thread: the table IDs and PIDs it got, to check uniqueness across threads. */
static uint32_t table_ids[THREADS][ROUNDS];
static uint32_t pid_ids[THREADS][ROUNDS];
static char pool_objects[THREADS * 16];
/* Which thread's running task holds each CID (0: none): CIDs of running tasks are unique. */
static int cid_holder[THREADS];

static void *worker(void *arg) {
  int me = (int)(intptr_t)arg;
  /* Tables: one shared owner, so that threads race for the same cursor. */
  for (int i = 0; i < ROUNDS; i++) {
    CHECK_EQ(idspace_table_create(table, 42, (uint64_t)me << 32 | (uint64_t)i, &table_ids[me][i]), 0);
    uint64_t value = 0;
    CHECK_EQ(idspace_table_lookup(table, 42, table_ids[me][i], &value), 0);
    CHECK_EQ(value, (uint64_t)me << 32 | (uint64_t)i);
  }
  /* PIDs in a shared namespace, with its ID at the root too. */
  for (int i = 0; i < ROUNDS; i++) {
    CHECK_EQ(idspace_pid_alloc(pids, pid_ns, NULL, 0, &pid_ids[me][i]), 0);
  }
  /* The counter: exact sum at the end. */
  for (int i = 0; i < ROUNDS * 10; i++) {
    CHECK_EQ(idspace_counter_add(counter, 1), 0);
  }
  /* The pool: every object taken is held by this thread alone until it gives it back. */
  for (int i = 0; i < ROUNDS; i++) {
    void *object = NULL;
    int taken = idspace_pool_take(pool, &object);
    if (taken == 0) {
      char *mark = (char *)object;
      CHECK_EQ(__atomic_exchange_n(mark, 1, __ATOMIC_ACQ_REL), 0);
      __atomic_store_n(mark, 0, __ATOMIC_RELEASE);
      CHECK_EQ(idspace_pool_give(pool, object), 0);
    } else {
      CHECK_EQ(taken, -EAGAIN);
    }
  }
  /* CIDs: this thread is CPU `me` of the space, switching its own tasks in and out. */
  uint64_t tasks[2];
  for (int t = 0; t < 2; t++) {
    CHECK_EQ(idspace_cid_fork(cids, 0, &tasks[t]), 0);
  }
  uint32_t held = UINT32_MAX;
  for (int i = 0; i < ROUNDS; i++) {
    if (held != UINT32_MAX) {
      __atomic_store_n(&cid_holder[held], 0, __ATOMIC_RELEASE);
    }
    CHECK_EQ(idspace_cid_switch_in(cids, (size_t)me, tasks[i % 2], &held), 0);
    CHECK(held < THREADS);
    CHECK_EQ(__atomic_exchange_n(&cid_holder[held], me + 1, __ATOMIC_ACQ_REL), 0);
  }
  __atomic_store_n(&cid_holder[held], 0, __ATOMIC_RELEASE);
  CHECK_EQ(idspace_cid_switch_out(cids, (size_t)me), 0);
  for (int t = 0; t < 2; t++) {
    CHECK_EQ(idspace_cid_exit(cids, tasks[t]), 0);
  }
  return NULL;
}

static int compare_u32(const void *a, const void *b) {
  uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
  return (x > y) - (x < y);
}

static void check_unique(uint32_t *ids, size_t n, const char *what) {
  qsort(ids, n, sizeof *ids, compare_u32);
  for (size_t i = 1; i < n; i++) {
    if (ids[i] == ids[i - 1]) {
      fprintf(stderr, "%s: ID %u handed out twice\n", what, ids[i]);
      exit(1);
    }
  }
}

static int pool_seen[sizeof pool_objects];
static int pool_released;
static void release_object(void *object, void *ctx) {
  (void)ctx;
  CHECK_EQ(pool_seen[(char *)object - pool_objects]++, 0);
  pool_released++;
}

static void run(uint32_t table_design, uint32_t pid_design, uint32_t cid_design) {
  CHECK_EQ(idspace_table_new(table_design, &table), 0);
  CHECK_EQ(idspace_pids_new(pid_design, &pids), 0);
  CHECK_EQ(idspace_pid_alloc(pids, IDSPACE_PID_NS_ROOT, NULL, 0, &pid_ns), 0);
  CHECK_EQ(idspace_pid_ns_new(pids, IDSPACE_PID_NS_ROOT, 0, &pid_ns), 0);
  CHECK_EQ(idspace_counter_new(&counter), 0);
  CHECK_EQ(idspace_pool_new(4, &pool), 0);
  for (size_t i = 0; i < sizeof pool_objects; i++) {
    CHECK_EQ(idspace_pool_give(pool, &pool_objects[i]), 0);
  }
  CHECK_EQ(idspace_cids_new(cid_design, THREADS, &cids), 0);

  pthread_t threads[THREADS];
  for (int t = 0; t < THREADS; t++) {
    CHECK_EQ(pthread_create(&threads[t], NULL, worker, (void *)(intptr_t)t), 0);
  }
  for (int t = 0; t < THREADS; t++) {
    CHECK_EQ(pthread_join(threads[t], NULL), 0);
  }

  check_unique(&table_ids[0][0], THREADS * ROUNDS, "table");
  size_t count = 0;
  static uint32_t listed[THREADS * ROUNDS];
  CHECK_EQ(idspace_table_ids(table, 42, listed, THREADS * ROUNDS, &count), 0);
  CHECK_EQ(count, THREADS * ROUNDS);
  size_t removed = 0;
  CHECK_EQ(idspace_table_remove_owner(table, 42, &removed), 0);
  CHECK_EQ(removed, THREADS * ROUNDS);

  check_unique(&pid_ids[0][0], THREADS * ROUNDS, "pid");
  for (int t = 0; t < THREADS; t++) {
    for (int i = 0; i < ROUNDS; i++) {
      CHECK_EQ(idspace_pid_free(pids, pid_ns, pid_ids[t][i]), 0);
    }
  }

  uint64_t sum = 0;
  CHECK_EQ(idspace_counter_sum(counter, &sum), 0);
  CHECK_EQ(sum, (uint64_t)THREADS * ROUNDS * 10);

  /* Destroying the pool hands back every object exactly once, from every CID's list. */
  memset(pool_seen, 0, sizeof pool_seen);
  pool_released = 0;
  CHECK_EQ(idspace_pool_destroy(pool, release_object, NULL), 0);
  CHECK_EQ(pool_released, (int)sizeof pool_objects);

  CHECK_EQ(idspace_table_destroy(table), 0);
  CHECK_EQ(idspace_pids_destroy(pids), 0);
  CHECK_EQ(idspace_counter_destroy(counter), 0);
  CHECK_EQ(idspace_cids_destroy(cids), 0);
}

/* Calls racing a destroy of the same handle: each is answered, either as usual or -EBADF. */
static idspace_counter doomed;
static void *racer(void *arg) {
  (void)arg;
  for (;;) {
    int result = idspace_counter_add(doomed, 1);
    if (result == -EBADF) {
      return NULL;
    }
    CHECK_EQ(result, 0);
  }
}

static void destroy_race(void) {
  CHECK_EQ(idspace_counter_new(&doomed), 0);
  pthread_t threads[THREADS];
  for (int t = 0; t < THREADS; t++) {
    CHECK_EQ(pthread_create(&threads[t], NULL, racer, NULL), 0);
  }
  uint64_t sum = 0;
  while (sum < 10000) {
    CHECK_EQ(idspace_counter_sum(doomed, &sum), 0);
  }
  CHECK_EQ(idspace_counter_destroy(doomed), 0);
  for (int t = 0; t < THREADS; t++) {
    CHECK_EQ(pthread_join(threads[t], NULL), 0);
  }
}

/* A destroyed counter is recycled by the next idspace_counter_new. Adds through the old
 * handle race its destroy; none may land in the counter's next owner, which nobody adds to. */
static _Atomic uint64_t stale_raw;
static atomic_int recycling_done;
static atomic_long refused;
static void *stale_adder(void *arg) {
  (void)arg;
  while (!atomic_load(&recycling_done)) {
    idspace_counter stale = {atomic_load(&stale_raw)};
    int result = idspace_counter_add(stale, 1);
    if (result == -EBADF) {
      atomic_fetch_add(&refused, 1);
    } else {
      CHECK_EQ(result, 0);
    }
  }
  return NULL;
}

static void recycle_race(void) {
  pthread_t threads[THREADS];
  idspace_counter first;
  CHECK_EQ(idspace_counter_new(&first), 0);
  atomic_store(&stale_raw, first.raw);
  for (int t = 0; t < THREADS; t++) {
    CHECK_EQ(pthread_create(&threads[t], NULL, stale_adder, NULL), 0);
  }
  idspace_counter old = first;
  for (int round = 0; round < 100; round++) {
    uint64_t sum = 0;
    while (sum < 100) {
      CHECK_EQ(idspace_counter_sum(old, &sum), 0);
    }
    CHECK_EQ(idspace_counter_destroy(old), 0);
    idspace_counter fresh;
    CHECK_EQ(idspace_counter_new(&fresh), 0);
    /* The adders still call with the old handle: wait for a few refusals. */
    long before = atomic_load(&refused);
    while (atomic_load(&refused) < before + THREADS) {
      sched_yield();
    }
    CHECK_EQ(idspace_counter_sum(fresh, &sum), 0);
    CHECK_EQ(sum, 0);
    old = fresh;
    atomic_store(&stale_raw, fresh.raw);
  }
  atomic_store(&recycling_done, 1);
  for (int t = 0; t < THREADS; t++) {
    CHECK_EQ(pthread_join(threads[t], NULL), 0);
  }
  CHECK_EQ(idspace_counter_destroy(old), 0);
}

int main(void) {
  run(IDSPACE_TABLE_SCALED, IDSPACE_PIDS_PERCPU, IDSPACE_CIDS_REWORK);
  run(IDSPACE_TABLE_GLOBAL, IDSPACE_PIDS_IDR_ONCE, IDSPACE_CIDS_BITMAP);
  run(IDSPACE_TABLE_RADIX, IDSPACE_PIDS_BITMAP_HASH, IDSPACE_CIDS_LAZY);
  destroy_race();
  recycle_race();
  puts("stress: ok");
  return 0;
}
