/* The README's example: cc example.c $(pkg-config --cflags --libs idspace) */
#include <idspace.h>
#include <stdio.h>

int main(void) {
  idspace_table timers;
  if (idspace_table_new(IDSPACE_TABLE_SCALED, &timers) != 0) {
    return 1;
  }
  uint32_t id;
  int err = idspace_table_create(timers, /* owner */ 1, /* value */ 42, &id);
  if (err < 0) {
    fprintf(stderr, "create: %s\n", idspace_strerror(err));
    return 1;
  }
  uint64_t value;
  err = idspace_table_lookup(timers, 1, id, &value);
  printf("owner 1, id %u -> %llu\n", id, (unsigned long long)value);
  idspace_table_destroy(timers);
  /* A destroyed handle is refused, never a use after free. */
  err = idspace_table_lookup(timers, 1, id, &value);
  printf("after destroy: %s\n", idspace_strerror(err));
  return 0;
}
