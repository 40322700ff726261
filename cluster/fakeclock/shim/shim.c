/*
 * Preloaded ahead of libfaketime into redis-server.
 *
 * Debian's redis-server links jemalloc dynamically. Under libfaketime,
 * jemalloc's start-up calls clock_gettime, libfaketime's lazy set-up then
 * calls malloc, which re-enters jemalloc while it is still initialising, and
 * the process hangs ("Unexpected recursive calls to clock_gettime()"). This
 * object takes every allocation entry point away from jemalloc and hands it
 * to glibc's own allocator, so jemalloc is never asked to allocate.
 *
 * Redis also calls jemalloc's non-standard API (nallocx, mallctl,
 * malloc_stats_print, and on some builds the *allocx family). Those would
 * see glibc pointers or report jemalloc's empty arenas, so they are answered
 * here from glibc too.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <malloc.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#define EXPORT __attribute__((visibility("default")))

extern void *__libc_malloc(size_t);
extern void __libc_free(void *);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);
extern void *__libc_memalign(size_t, size_t);

EXPORT void *malloc(size_t n) { return __libc_malloc(n); }
EXPORT void free(void *p) { __libc_free(p); }
EXPORT void *calloc(size_t a, size_t b) { return __libc_calloc(a, b); }
EXPORT void *realloc(void *p, size_t n) { return __libc_realloc(p, n); }
EXPORT void *memalign(size_t a, size_t n) { return __libc_memalign(a, n); }

EXPORT void *aligned_alloc(size_t a, size_t n) {
  if (a == 0 || (a & (a - 1)) != 0) {
    errno = EINVAL;
    return NULL;
  }
  return __libc_memalign(a, n);
}

EXPORT int posix_memalign(void **out, size_t a, size_t n) {
  if (a % sizeof(void *) != 0 || (a & (a - 1)) != 0) return EINVAL;
  void *p = __libc_memalign(a, n);
  if (!p) return ENOMEM;
  *out = p;
  return 0;
}

static size_t page_size(void) {
  long ps = sysconf(_SC_PAGESIZE);
  return ps > 0 ? (size_t)ps : 4096;
}

EXPORT void *valloc(size_t n) { return __libc_memalign(page_size(), n); }

EXPORT void *pvalloc(size_t n) {
  size_t ps = page_size();
  if (n > SIZE_MAX - ps) {
    errno = ENOMEM;
    return NULL;
  }
  return __libc_memalign(ps, n ? (n + ps - 1) / ps * ps : ps);
}

/*
 * glibc exports no __libc_ alias for malloc_usable_size, and a plain lookup
 * would find jemalloc's (it comes before libc in the search order), which
 * crashes on glibc pointers. So take libc's definition from libc itself.
 * It is resolved in a constructor, before redis starts threads; the atomic
 * lazy path only covers callers running before that constructor, and racing
 * resolvers store the same value.
 */
typedef size_t (*usable_fn)(void *);
static usable_fn libc_usable;

static usable_fn resolve_usable(void) {
  usable_fn f = __atomic_load_n(&libc_usable, __ATOMIC_ACQUIRE);
  if (f) return f;
  void *h = dlopen("libc.so.6", RTLD_NOW | RTLD_NOLOAD);
  if (h) {
    f = (usable_fn)dlvsym(h, "malloc_usable_size", "GLIBC_2.2.5");
    if (!f) f = (usable_fn)dlsym(h, "malloc_usable_size");
    dlclose(h); /* NOLOAD took a reference; libc itself stays mapped. */
  }
  if (!f) {
    static const char msg[] =
        "lockjepsen fakeclock shim: cannot find glibc malloc_usable_size\n";
    (void)!write(2, msg, sizeof msg - 1);
    _exit(127);
  }
  __atomic_store_n(&libc_usable, f, __ATOMIC_RELEASE);
  return f;
}

__attribute__((constructor(101))) static void shim_init(void) {
  (void)resolve_usable();
}

EXPORT size_t malloc_usable_size(void *p) {
  return p ? resolve_usable()(p) : 0;
}

/* ---- jemalloc's own API, answered for glibc's heap ---------------------- */

#define MALLOCX_ZERO 0x40
#define MALLOCX_LG_ALIGN_MASK 0x3f

static void *alloc_flags(size_t n, int flags) {
  size_t lg = (size_t)(flags & MALLOCX_LG_ALIGN_MASK);
  void *p = lg ? __libc_memalign((size_t)1 << lg, n) : __libc_malloc(n);
  if (p && (flags & MALLOCX_ZERO)) memset(p, 0, n);
  return p;
}

EXPORT void *mallocx(size_t n, int flags) { return alloc_flags(n, flags); }

EXPORT void *rallocx(void *p, size_t n, int flags) {
  if (!(flags & (MALLOCX_LG_ALIGN_MASK | MALLOCX_ZERO)))
    return __libc_realloc(p, n);
  size_t old = malloc_usable_size(p);
  void *q = alloc_flags(n, flags);
  if (!q) return NULL;
  memcpy(q, p, old < n ? old : n);
  __libc_free(p);
  return q;
}

/* glibc cannot grow in place; like jemalloc, report the size it has. */
EXPORT size_t xallocx(void *p, size_t n, size_t extra, int flags) {
  (void)n;
  (void)extra;
  (void)flags;
  return malloc_usable_size(p);
}

EXPORT size_t sallocx(const void *p, int flags) {
  (void)flags;
  return malloc_usable_size((void *)p);
}

EXPORT void dallocx(void *p, int flags) {
  (void)flags;
  __libc_free(p);
}

EXPORT void sdallocx(void *p, size_t n, int flags) {
  (void)n;
  (void)flags;
  __libc_free(p);
}

/*
 * Redis's sdsResize skips a realloc when nallocx(newlen) equals the block's
 * usable size, which is only safe if the answer is never below newlen. This
 * mirrors glibc's rounding for heap chunks (8 bytes of header, 16-byte
 * steps, 24 usable bytes at least); for mmapped sizes it may differ from
 * glibc, which only costs a realloc.
 */
EXPORT size_t nallocx(size_t n, int flags) {
  (void)flags;
  if (n > SIZE_MAX - 64) return 0;
  size_t chunk = (n + 8 + 15) & ~(size_t)15;
  if (chunk < 32) chunk = 32;
  return chunk - 8;
}

static int read_size(void *oldp, size_t *oldlenp, size_t v) {
  if (!oldp || !oldlenp) return 0;
  if (*oldlenp != sizeof(size_t)) return EINVAL;
  memcpy(oldp, &v, sizeof v);
  return 0;
}

/*
 * Redis reads "epoch" and "stats.{allocated,active,resident}" for INFO
 * memory and MEMORY STATS, and purges with "arenas.narenas" and
 * "arena.<n>.purge". Everything else (background_thread, tcache, ...) is
 * ENOENT, which redis ignores.
 */
EXPORT int mallctl(const char *name, void *oldp, size_t *oldlenp, void *newp,
                   size_t newlen) {
  (void)newp;
  (void)newlen;
  if (!name) return EINVAL;
  if (strcmp(name, "epoch") == 0) {
    if (oldp && oldlenp && *oldlenp == sizeof(uint64_t)) {
      uint64_t one = 1;
      memcpy(oldp, &one, sizeof one);
    }
    return 0;
  }
  if (strcmp(name, "stats.allocated") == 0 ||
      strcmp(name, "stats.active") == 0) {
    struct mallinfo2 mi = mallinfo2();
    return read_size(oldp, oldlenp, mi.uordblks + mi.hblkhd);
  }
  if (strcmp(name, "stats.resident") == 0 ||
      strcmp(name, "stats.mapped") == 0) {
    struct mallinfo2 mi = mallinfo2();
    return read_size(oldp, oldlenp, mi.arena + mi.hblkhd);
  }
  if (strcmp(name, "arenas.narenas") == 0) {
    if (oldp && oldlenp) {
      if (*oldlenp != sizeof(unsigned)) return EINVAL;
      unsigned one = 1;
      memcpy(oldp, &one, sizeof one);
    }
    return 0;
  }
  if (strncmp(name, "arena.", 6) == 0) {
    size_t len = strlen(name);
    if (len > 6 && strcmp(name + len - 6, ".purge") == 0) {
      malloc_trim(0);
      return 0;
    }
  }
  return ENOENT;
}

EXPORT int mallctlnametomib(const char *name, size_t *mibp, size_t *miblenp) {
  (void)name;
  (void)mibp;
  (void)miblenp;
  return ENOENT;
}

EXPORT int mallctlbymib(const size_t *mib, size_t miblen, void *oldp,
                        size_t *oldlenp, void *newp, size_t newlen) {
  (void)mib;
  (void)miblen;
  (void)oldp;
  (void)oldlenp;
  (void)newp;
  (void)newlen;
  return ENOENT;
}

EXPORT void malloc_stats_print(void (*write_cb)(void *, const char *),
                               void *cbopaque, const char *opts) {
  (void)opts;
  struct mallinfo2 mi = mallinfo2();
  char buf[256];
  snprintf(buf, sizeof buf,
           "jemalloc bypassed by the lockjepsen fakeclock shim; glibc heap: "
           "in use %zu, free %zu, mmapped %zu bytes\n",
           mi.uordblks, mi.fordblks, mi.hblkhd);
  if (write_cb)
    write_cb(cbopaque, buf);
  else
    (void)!write(2, buf, strlen(buf));
}
