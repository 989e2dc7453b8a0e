// The header compiles as C++17 and links from C++ (extern "C" linkage).
#include "idspace.h"

#include <cerrno>
#include <cstdio>
#include <cstring>

int main() {
  idspace_table table{};
  if (idspace_table_lookup(table, 0, 0, nullptr) != -EINVAL) {
    return 1;
  }
  if (idspace_table_new(IDSPACE_TABLE_SCALED, &table) != 0) {
    return 1;
  }
  uint32_t id = 0;
  uint64_t value = 0;
  auto visit = [](uint64_t v, void *ctx) { *static_cast<uint64_t *>(ctx) = v; };
  bool ok = idspace_table_create(table, 1, 7, &id) == 0 &&
            idspace_table_lookup_with(table, 1, id, visit, &value) == 0 && value == 7 &&
            idspace_table_destroy(table) == 0 &&
            std::strcmp(idspace_strerror(idspace_table_destroy(table)), idspace_strerror(-EBADF)) == 0;
  std::puts(ok ? "header.cpp: ok" : "header.cpp: failed");
  return ok ? 0 : 1;
}
