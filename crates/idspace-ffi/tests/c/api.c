/* Every family through the C ABI, and every kind of bad input the header documents: null
 * pointers, sizes of 0 and SIZE_MAX, a set_tid longer than the levels, destroyed, zeroed and
 * wrong-kind handles. Run under AddressSanitizer and UndefinedBehaviorSanitizer, and under
 * valgrind (where rseq is unsupported, so the per-CID structures take their fallback). */
#include <errno.h>
#include <stdint.h>
#include <string.h>

#include "check.h"
#include "idspace.h"

static void count_visit(uint64_t value, void *ctx) { *(uint64_t *)ctx += value; }

static idspace_table nested_table;
static void nested_visit(uint64_t value, void *ctx) {
  (void)value;
  int *results = (int *)ctx;
  /* Removing the entry being visited would wait for itself; destroying the table too. */
  results[0] = idspace_table_remove(nested_table, 1, 0, NULL);
  results[1] = idspace_table_destroy(nested_table);
  uint64_t copied = 0;
  results[2] = idspace_table_lookup(nested_table, 1, 0, &copied);
}

static void tables(uint32_t design) {
  idspace_table table;
  CHECK_EQ(idspace_table_new(design, &table), 0);
  uint32_t id = 99;
  CHECK_EQ(idspace_table_create(table, 1, 100, &id), 0);
  CHECK_EQ(id, 0);
  CHECK_EQ(idspace_table_create(table, 1, 101, &id), 0);
  CHECK_EQ(id, 1);
  uint64_t value = 0;
  CHECK_EQ(idspace_table_lookup(table, 1, 1, &value), 0);
  CHECK_EQ(value, 101);
  CHECK_EQ(idspace_table_lookup(table, 2, 1, &value), -EINVAL);
  uint64_t seen = 0;
  CHECK_EQ(idspace_table_lookup_with(table, 1, 0, count_visit, &seen), 0);
  CHECK_EQ(seen, 100);
  CHECK_EQ(idspace_table_lookup_with(table, 1, 7, count_visit, &seen), -EINVAL);
  CHECK_EQ(idspace_table_lookup_with(table, 1, 0, NULL, &seen), -EINVAL);

  nested_table = table;
  int results[3] = {0, 0, 0};
  CHECK_EQ(idspace_table_lookup_with(table, 1, 0, nested_visit, results), 0);
  CHECK_EQ(results[0], -EDEADLK);
  CHECK_EQ(results[1], -EDEADLK);
  CHECK_EQ(results[2], 0);

  /* Restore mode: exact IDs. */
  CHECK_EQ(idspace_table_create_at(table, 1, 10, 110), -EPERM);
  CHECK_EQ(idspace_table_set_restore(table, 1, 1), 0);
  CHECK_EQ(idspace_table_create_at(table, 1, 10, 110), 0);
  CHECK_EQ(idspace_table_create_at(table, 1, 10, 111), -EEXIST);
  CHECK_EQ(idspace_table_create_at(table, 1, IDSPACE_TABLE_MAX_ID + 1u, 1), -EINVAL);
  CHECK_EQ(idspace_table_set_restore(table, 1, 0), 0);

  /* Cursor save and restore. */
  uint32_t cursor = 0;
  CHECK_EQ(idspace_table_cursor(table, 1, &cursor), 0);
  CHECK_EQ(cursor, 11);
  CHECK_EQ(idspace_table_set_cursor(table, 1, 20), 0);
  CHECK_EQ(idspace_table_create(table, 1, 120, &id), 0);
  CHECK_EQ(id, 20);
  CHECK_EQ(idspace_table_set_cursor(table, 1, IDSPACE_TABLE_MAX_ID + 1u), -EINVAL);

  /* Iterate the owner's IDs. */
  uint32_t ids[8];
  size_t count = 0;
  CHECK_EQ(idspace_table_ids(table, 1, ids, 8, &count), 0);
  CHECK_EQ(count, 4);
  CHECK_EQ(ids[0], 0);
  CHECK_EQ(ids[1], 1);
  CHECK_EQ(ids[2], 10);
  CHECK_EQ(ids[3], 20);
  CHECK_EQ(idspace_table_ids(table, 1, ids, 2, &count), -ERANGE);
  CHECK_EQ(count, 4);
  CHECK_EQ(idspace_table_ids(table, 1, ids, 0, &count), -EINVAL);
  CHECK_EQ(idspace_table_ids(table, 1, ids, SIZE_MAX, &count), -EINVAL);
  CHECK_EQ(idspace_table_ids(table, 1, NULL, 8, &count), -EINVAL);
  CHECK_EQ(idspace_table_ids(table, 1, ids, 8, NULL), -EINVAL);

  /* Remove, remove_owner. */
  CHECK_EQ(idspace_table_remove(table, 1, 1, &value), 0);
  CHECK_EQ(value, 101);
  CHECK_EQ(idspace_table_remove(table, 1, 1, &value), -EINVAL);
  size_t removed = 0;
  CHECK_EQ(idspace_table_remove_owner(table, 1, &removed), 0);
  CHECK_EQ(removed, 3);
  CHECK_EQ(idspace_table_remove_owner(table, 1, NULL), 0);

  /* Null out-pointers. */
  CHECK_EQ(idspace_table_create(table, 1, 1, NULL), -EINVAL);
  CHECK_EQ(idspace_table_lookup(table, 1, 0, NULL), -EINVAL);
  CHECK_EQ(idspace_table_cursor(table, 1, NULL), -EINVAL);

  /* A destroyed handle is refused, also after its slot is reused. */
  CHECK_EQ(idspace_table_destroy(table), 0);
  CHECK_EQ(idspace_table_create(table, 1, 1, &id), -EBADF);
  CHECK_EQ(idspace_table_destroy(table), -EBADF);
  idspace_table again;
  CHECK_EQ(idspace_table_new(design, &again), 0);
  CHECK_EQ(idspace_table_lookup(table, 1, 0, &value), -EBADF);
  CHECK_EQ(idspace_table_destroy(again), 0);
}

static void pids(uint32_t design) {
  idspace_pids pids;
  CHECK_EQ(idspace_pids_new(design, &pids), 0);
  uint32_t pid = 0;
  CHECK_EQ(idspace_pid_alloc(pids, IDSPACE_PID_NS_ROOT, NULL, 0, &pid), 0);
  CHECK_EQ(pid, 1);
  uint32_t ns = 0;
  CHECK_EQ(idspace_pid_ns_new(pids, IDSPACE_PID_NS_ROOT, 1000, &ns), 0);
  CHECK_EQ(idspace_pid_ns_new(pids, IDSPACE_PID_NS_ROOT, 300, &ns), -EINVAL);
  CHECK_EQ(idspace_pid_ns_new(pids, IDSPACE_PID_NS_ROOT, UINT32_MAX, &ns), -EINVAL);
  CHECK_EQ(idspace_pid_ns_new(pids, 12345, 0, &ns), -EINVAL);
  CHECK_EQ(idspace_pid_ns_new(pids, IDSPACE_PID_NS_ROOT, 0, NULL), -EINVAL);
  CHECK_EQ(idspace_pid_ns_new(pids, IDSPACE_PID_NS_ROOT, 1000, &ns), 0);

  /* set_tid: exact IDs per level, innermost first. */
  uint32_t set_tid[3] = {1, 500, 7};
  CHECK_EQ(idspace_pid_alloc(pids, ns, set_tid, 3, &pid), -EINVAL); /* longer than the levels */
  CHECK_EQ(idspace_pid_alloc(pids, ns, set_tid, SIZE_MAX, &pid), -EINVAL);
  CHECK_EQ(idspace_pid_alloc(pids, ns, NULL, 2, &pid), -EINVAL);
  uint32_t not_init = 5;
  CHECK_EQ(idspace_pid_alloc(pids, ns, &not_init, 1, &pid), -EINVAL); /* no init yet */
  uint32_t too_big = 1000;
  CHECK_EQ(idspace_pid_alloc(pids, ns, &too_big, 1, &pid), -EINVAL); /* >= pid_max */
  CHECK_EQ(idspace_pid_alloc(pids, ns, set_tid, 2, &pid), 0);
  CHECK_EQ(pid, 1);
  CHECK_EQ(idspace_pid_alloc(pids, ns, set_tid, 2, &pid), -EEXIST);
  CHECK_EQ(idspace_pid_alloc(pids, ns, NULL, 0, NULL), -EINVAL);

  uint32_t nr = 0;
  CHECK_EQ(idspace_pid_lookup(pids, IDSPACE_PID_NS_ROOT, 500, ns, &nr), 0);
  CHECK_EQ(nr, 1);
  CHECK_EQ(idspace_pid_lookup(pids, ns, 1, IDSPACE_PID_NS_ROOT, &nr), 0);
  CHECK_EQ(nr, 500);
  CHECK_EQ(idspace_pid_lookup(pids, IDSPACE_PID_NS_ROOT, 1, ns, &nr), 0);
  CHECK_EQ(nr, 0); /* the root's init is invisible inside */
  CHECK_EQ(idspace_pid_lookup(pids, ns, 2, ns, &nr), -ESRCH);
  CHECK_EQ(idspace_pid_lookup(pids, ns, 1, ns, NULL), -EINVAL);

  /* The namespace's init exits: the namespace is dead. */
  CHECK_EQ(idspace_pid_ns_destroy(pids, ns), -EBUSY);
  CHECK_EQ(idspace_pid_free(pids, ns, 1), 0);
  CHECK_EQ(idspace_pid_free(pids, ns, 1), -ESRCH);
  CHECK_EQ(idspace_pid_alloc(pids, ns, NULL, 0, &pid), -ENOMEM);
  CHECK_EQ(idspace_pid_ns_destroy(pids, ns), 0);
  CHECK_EQ(idspace_pid_ns_destroy(pids, ns), -EINVAL);
  CHECK_EQ(idspace_pid_ns_destroy(pids, IDSPACE_PID_NS_ROOT), -EINVAL);
  CHECK_EQ(idspace_pid_alloc(pids, ns, NULL, 0, &pid), -EINVAL);

  /* Nesting stops 32 levels below the root. */
  uint32_t level = IDSPACE_PID_NS_ROOT;
  for (int i = 0; i < IDSPACE_PID_MAX_LEVEL; i++) {
    CHECK_EQ(idspace_pid_ns_new(pids, level, 0, &level), 0);
  }
  CHECK_EQ(idspace_pid_ns_new(pids, level, 0, &ns), -ENOSPC);

  /* A full namespace: -EAGAIN. */
  CHECK_EQ(idspace_pid_ns_new(pids, IDSPACE_PID_NS_ROOT, 301, &ns), 0);
  int allocated = 0;
  int last = 0;
  while ((last = idspace_pid_alloc(pids, ns, NULL, 0, &pid)) == 0) {
    allocated++;
  }
  CHECK_EQ(last, -EAGAIN);
  CHECK_EQ(allocated, 300);

  CHECK_EQ(idspace_pids_destroy(pids), 0);
  CHECK_EQ(idspace_pid_alloc(pids, IDSPACE_PID_NS_ROOT, NULL, 0, &pid), -EBADF);
}

static void cids(uint32_t design) {
  idspace_cids space;
  CHECK_EQ(idspace_cids_new(design, 0, &space), -EINVAL);
  CHECK_EQ(idspace_cids_new(design, SIZE_MAX, &space), -EINVAL);
  CHECK_EQ(idspace_cids_new(design, IDSPACE_CIDS_MAX_CPUS + 1, &space), -EINVAL);
  CHECK_EQ(idspace_cids_new(design, 2, NULL), -EINVAL);
  CHECK_EQ(idspace_cids_new(design, 2, &space), 0);
  uint64_t a = 0, b = 0;
  CHECK_EQ(idspace_cid_fork(space, 0, &a), 0);
  CHECK_EQ(idspace_cid_fork(space, 1u << 1, &b), 0);
  CHECK_EQ(idspace_cid_fork(space, 1u << 5, &b), -EINVAL);
  uint32_t cid_a = 99, cid_b = 99;
  CHECK_EQ(idspace_cid_switch_in(space, 0, a, &cid_a), 0);
  CHECK_EQ(idspace_cid_switch_in(space, 0, b, &cid_b), -EINVAL); /* not in b's affinity */
  CHECK_EQ(idspace_cid_switch_in(space, 1, a, &cid_b), -EBUSY);  /* a runs on CPU 0 */
  CHECK_EQ(idspace_cid_switch_in(space, 1, b, &cid_b), 0);
  CHECK(cid_a < 2 && cid_b < 2 && cid_a != cid_b);
  CHECK_EQ(idspace_cid_switch_in(space, 2, b, &cid_b), -EINVAL);
  CHECK_EQ(idspace_cid_switch_in(space, SIZE_MAX, b, &cid_b), -EINVAL);
  CHECK_EQ(idspace_cid_switch_in(space, 0, 12345, &cid_b), -ESRCH);
  CHECK_EQ(idspace_cid_switch_in(space, 0, a, NULL), -EINVAL);
  CHECK_EQ(idspace_cid_switch_out(space, 0), 0);
  CHECK_EQ(idspace_cid_switch_out(space, SIZE_MAX), -EINVAL);
  CHECK_EQ(idspace_cid_exit(space, a), 0);
  CHECK_EQ(idspace_cid_exit(space, a), -ESRCH);
  CHECK_EQ(idspace_cid_exit(space, b), 0);
  CHECK_EQ(idspace_cid_fork(space, 0, NULL), -EINVAL);
  CHECK_EQ(idspace_cids_destroy(space), 0);
  CHECK_EQ(idspace_cid_fork(space, 0, &a), -EBADF);
}

static void release_count(void *object, void *ctx) {
  (void)object;
  ++*(int *)ctx;
}

static void percid(void) {
  int cid = idspace_mm_cid();
  CHECK(cid >= 0 || cid == -EOPNOTSUPP);
  printf("idspace_mm_cid() = %d (%s)\n", cid, cid >= 0 ? "rseq" : idspace_strerror(cid));

  idspace_counter counter;
  CHECK_EQ(idspace_counter_new(NULL), -EINVAL);
  CHECK_EQ(idspace_counter_new(&counter), 0);
  for (int i = 0; i < 1000; i++) {
    CHECK_EQ(idspace_counter_add(counter, 3), 0);
  }
  uint64_t sum = 0;
  CHECK_EQ(idspace_counter_sum(counter, &sum), 0);
  CHECK_EQ(sum, 3000);
  CHECK_EQ(idspace_counter_sum(counter, NULL), -EINVAL);

  idspace_pool pool;
  CHECK_EQ(idspace_pool_new(0, &pool), -EINVAL);
  CHECK_EQ(idspace_pool_new(SIZE_MAX, &pool), -EINVAL);
  CHECK_EQ(idspace_pool_new(IDSPACE_POOL_MAX_CAPACITY + 1, &pool), -EINVAL);
  CHECK_EQ(idspace_pool_new(4, NULL), -EINVAL);
  CHECK_EQ(idspace_pool_new(4, &pool), 0);
  void *taken = NULL;
  CHECK_EQ(idspace_pool_take(pool, &taken), -EAGAIN);
  CHECK_EQ(idspace_pool_give(pool, NULL), -EINVAL);
  CHECK_EQ(idspace_pool_take(pool, NULL), -EINVAL);
  static char objects[10];
  for (int i = 0; i < 10; i++) {
    CHECK_EQ(idspace_pool_give(pool, &objects[i]), 0);
  }
  int seen[10] = {0};
  for (int i = 0; i < 7; i++) {
    CHECK_EQ(idspace_pool_take(pool, &taken), 0);
    CHECK(taken >= (void *)objects && taken < (void *)(objects + 10));
    CHECK_EQ(seen[(char *)taken - objects]++, 0);
  }
  int released = 0;
  CHECK_EQ(idspace_pool_destroy(pool, release_count, &released), 0);
  CHECK_EQ(released, 3);
  CHECK_EQ(idspace_pool_give(pool, &objects[0]), -EBADF);

  /* A handle of one kind passed as another is refused. */
  idspace_pool wrong = {counter.raw};
  CHECK_EQ(idspace_pool_take(wrong, &taken), -EBADF);
  CHECK_EQ(idspace_pool_destroy(wrong, NULL, NULL), -EBADF);
  CHECK_EQ(idspace_counter_destroy(counter), 0);
  CHECK_EQ(idspace_counter_add(counter, 1), -EBADF);

  /* Zeroed and made-up handles. */
  idspace_counter zero = {0};
  CHECK_EQ(idspace_counter_add(zero, 1), -EBADF);
  idspace_counter made_up = {UINT64_MAX};
  CHECK_EQ(idspace_counter_add(made_up, 1), -EBADF);
  idspace_counter far = {((uint64_t)1 << 32) | 60000};
  CHECK_EQ(idspace_counter_sum(far, &sum), -EBADF);
}

static void errors(void) {
  CHECK(strcmp(idspace_strerror(0), "success") == 0);
  CHECK(strstr(idspace_strerror(-EBADF), "handle") != NULL);
  CHECK(strcmp(idspace_strerror(EAGAIN), idspace_strerror(-EAGAIN)) == 0);
  CHECK(strcmp(idspace_strerror(-12345), "unknown error code") == 0);
  CHECK(strcmp(idspace_strerror(INT32_MIN), "unknown error code") == 0);
}

int main(void) {
  uint32_t table_designs[] = {IDSPACE_TABLE_GLOBAL, IDSPACE_TABLE_SCALED, IDSPACE_TABLE_RADIX};
  for (int i = 0; i < 3; i++) {
    tables(table_designs[i]);
  }
  idspace_table table;
  CHECK_EQ(idspace_table_new(3, &table), -EINVAL);
  CHECK_EQ(idspace_table_new(IDSPACE_TABLE_SCALED, NULL), -EINVAL);
  uint32_t pid_designs[] = {IDSPACE_PIDS_IDR_RELOCK, IDSPACE_PIDS_IDR_ONCE, IDSPACE_PIDS_BITMAP_HASH,
                            IDSPACE_PIDS_PERCPU};
  for (int i = 0; i < 4; i++) {
    pids(pid_designs[i]);
  }
  idspace_pids pids_handle;
  CHECK_EQ(idspace_pids_new(4, &pids_handle), -EINVAL);
  uint32_t cid_designs[] = {IDSPACE_CIDS_REWORK, IDSPACE_CIDS_BITMAP, IDSPACE_CIDS_LAZY};
  for (int i = 0; i < 3; i++) {
    cids(cid_designs[i]);
  }
  percid();
  errors();
  puts("api: ok");
  return 0;
}
