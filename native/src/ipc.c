/* ipc.c: sharing a table with other processes (funnel.h, "sharing").
 *
 * The exporter copies the table's buffers into memory another process can
 * open (the backend's shared_alloc: cuda IPC or POSIX shared memory) and
 * writes a descriptor; an importer maps that memory read only and builds a
 * table over it. A control block in POSIX shared memory (both backends: the
 * protocol is the host's business) holds one slot per importer, so the
 * exporter frees nothing while an importer holds it, and notices importers
 * that died. */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "format.h"
#include "table.h"
#include "work.h"

#define DESCRIPTOR_MAGIC "FNLTBL01"
/* 2: a column's length after its null count (a nested column's children
 * have rows of their own) */
#define DESCRIPTOR_VERSION 2
#define CONTROL_MAGIC UINT64_C(0x31544c43464e4c46) /* "FLNFCLT1" */
#define NAME_BYTES 64

/* ---------------------------------------------------------- control block */

struct slot {
  _Atomic int32_t pid;     /* 0: free */
  uint32_t unused;
  _Atomic uint64_t start;  /* the holder's start time (0: not yet written) */
};

struct control {
  _Atomic uint64_t magic; /* written last: the block is ready */
  uint32_t version;
  _Atomic int32_t withdrawn; /* 1: no new imports */
  int32_t exporter_pid;
  struct slot slots[FUNNEL_SHARE_SLOTS];
};

/* A process's start time in clock ticks since boot (/proc/PID/stat, field
 * 22), so a pid reused by a new process is not taken for the importer; 0
 * when unknown. */
static uint64_t start_time(pid_t pid) {
  char path[64], text[1024];
  snprintf(path, sizeof(path), "/proc/%ld/stat", (long)pid);
  FILE *f = fopen(path, "r");
  if (f == NULL) return 0;
  const size_t n = fread(text, 1, sizeof(text) - 1, f);
  fclose(f);
  text[n] = '\0';
  const char *p = strrchr(text, ')'); /* the command may hold spaces */
  if (p == NULL) return 0;
  unsigned long long value = 0;
  int field = 2;
  for (p++; *p && field < 22; p++)
    if (*p == ' ') field++;
  return field == 22 && sscanf(p, "%llu", &value) == 1 ? value : 0;
}

static bool holder_alive(struct slot *s, int32_t pid) {
  if (kill(pid, 0) != 0 && errno == ESRCH) return false;
  const uint64_t start = atomic_load(&s->start), now = start_time(pid);
  return start == 0 || now == 0 || start == now;
}

/* Frees the slots of importers that died; returns the live ones. */
static int reap(struct control *c) {
  int live = 0;
  for (uint32_t i = 0; i < FUNNEL_SHARE_SLOTS; i++) {
    struct slot *s = &c->slots[i];
    int32_t pid = atomic_load(&s->pid);
    if (pid == 0) continue;
    if (holder_alive(s, pid)) {
      live++;
    } else {
      atomic_store(&s->start, 0);
      atomic_compare_exchange_strong(&s->pid, &pid, 0);
    }
  }
  return live;
}

/* Maps the control block `name`, made anew when `create`. */
static int map_control(const char *name, bool create, struct control **out,
                       struct funnel_error *error) {
  int fd = shm_open(name, create ? O_CREAT | O_EXCL | O_RDWR : O_RDWR, 0600);
  if (fd < 0) {
    const int e = errno;
    if (!create && e == ENOENT)
      return FUNNEL_ERR(error, FUNNEL_ERR_IN_USE,
                        "the shared table is closed: its control block %s is gone", name);
    return FUNNEL_ERR(error, FUNNEL_ERR_DEVICE, "shm_open(%s): %s", name, strerror(e));
  }
  struct stat st;
  if ((create && ftruncate(fd, sizeof(struct control)) != 0) ||
      (!create && (fstat(fd, &st) != 0 || (size_t)st.st_size < sizeof(struct control)))) {
    const int e = errno;
    close(fd);
    if (create) shm_unlink(name);
    return FUNNEL_ERR(error, create ? FUNNEL_ERR_HOST_OUT_OF_MEMORY : FUNNEL_ERR_MALFORMED,
                      "control block %s: %s", name, create ? strerror(e) : "too small");
  }
  void *p = mmap(NULL, sizeof(struct control), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  const int e = errno;
  close(fd);
  if (p == MAP_FAILED) {
    if (create) shm_unlink(name);
    return FUNNEL_ERR(error, FUNNEL_ERR_HOST_OUT_OF_MEMORY, "cannot map control block %s: %s",
                      name, strerror(e));
  }
  *out = p;
  return FUNNEL_OK;
}

/* ------------------------------------------------------------- descriptor */

struct writer {
  uint8_t *p;
  size_t at;
};

static void put(struct writer *w, const void *v, size_t n) {
  memcpy(w->p + w->at, v, n);
  w->at += n;
}
static void put_u32(struct writer *w, uint32_t v) { put(w, &v, 4); }
static void put_i32(struct writer *w, int32_t v) { put(w, &v, 4); }
static void put_i64(struct writer *w, int64_t v) { put(w, &v, 8); }

struct cursor {
  const uint8_t *p;
  size_t length, at;
  struct funnel_error *error;
};

static int take(struct cursor *c, void *v, size_t n, const char *what) {
  if (c->length - c->at < n)
    return funnel__error_set(c->error, FUNNEL_ERR_MALFORMED, -1, -1, (int64_t)c->at,
                             "table descriptor truncated at byte %zu: %zu bytes for %s, %zu left",
                             c->at, n, what, c->length - c->at);
  memcpy(v, c->p + c->at, n);
  c->at += n;
  return FUNNEL_OK;
}

/* ---------------------------------------------------------------- sharing */

struct funnel_share {
  struct funnel_device *dev;
  struct funnel_table *table; /* the table shared as it is, held; NULL: a copy */
  uint64_t mem;
  size_t mem_size;
  struct funnel__ipc_handle mem_handle;
  void *event; /* interprocess event after the copy (cuda), or NULL */
  struct control *control;
  char control_name[NAME_BYTES];
  uint8_t *descriptor;
  size_t length;
};

static _Atomic int64_t share_sequence;

static void share_free(struct funnel_share *sh) {
  struct funnel_backend *be = &sh->dev->be;
  if (sh->event != NULL) {
    funnel__dev_event_wait(be, sh->event, NULL);
    funnel__dev_event_destroy(be, sh->event);
  }
  if (sh->table != NULL)
    funnel__table_unref(sh->table); /* its memory goes with it */
  else
    funnel__dev_shared_free(be, sh->mem, sh->mem_size, &sh->mem_handle);
  if (sh->control != NULL) {
    munmap(sh->control, sizeof(struct control));
    shm_unlink(sh->control_name);
  }
  free(sh->descriptor);
  funnel__device_unref(sh->dev);
  free(sh);
}

/* Copies the table's buffers into shared memory; the copy is waited for
 * (cpu) or an interprocess event is recorded after it (cuda). */
static int share_buffers(struct funnel_table *t, struct funnel_share *sh,
                         struct funnel__ipc_handle *event_handle, struct funnel_error *error) {
  struct funnel_backend *be = &t->dev->be;
  sh->mem_size = (size_t)t->plan.out_size;
  if (sh->mem_size == 0) return FUNNEL_OK;
  const bool ipc_event = be->ipc_event_create != NULL;
  void *event = NULL;
  if (ipc_event) FUNNEL_RETURN_NOT_OK(funnel__dev_ipc_event_create(be, &event, event_handle, error));
  struct funnel__work w;
  FUNNEL_RETURN_NOT_OK(funnel__work_begin(&w, be, t->dev->stream, ipc_event ? &event : NULL, error));
  int st = funnel__dev_shared_alloc(be, sh->mem_size, &sh->mem, &sh->mem_handle, error);
  if (st == FUNNEL_OK)
    st = funnel__work_enqueued(
        &w, funnel__dev_copy_d2d_async(be, sh->mem, t->out, sh->mem_size, w.stream, error));
  bool abandoned;
  st = funnel__work_finish(&w, st, !ipc_event, &abandoned, error);
  funnel__work_end(&w);
  if (st != FUNNEL_OK) {
    if (!abandoned) funnel__dev_shared_free(be, sh->mem, sh->mem_size, &sh->mem_handle);
    sh->mem = 0;
    funnel__dev_event_destroy(be, event);
    return st;
  }
  sh->event = event;
  return FUNNEL_OK;
}

static int write_descriptor(struct funnel_table *t, struct funnel_share *sh,
                            const uint8_t uuid[16], const struct funnel__ipc_handle *event_handle,
                            struct funnel_error *error) {
  const struct funnel__schema *schema = t->plan.schema;
  const int n = schema->n_fields;
  const int n_alloc = sh->mem != 0 ? 1 : 0;
  const size_t schema_padded = (size_t)funnel__align_up(schema->ipc_length, 8);
  const size_t length = 8 + 4 + 4 + 16 + 8 + NAME_BYTES + 8 + 4 * 4 + 64 +
                        (size_t)n_alloc * (64 + 8) + 8 + schema_padded + (size_t)n * (16 + 3 * 24);
  struct writer w = {calloc(1, length), 0};
  if (w.p == NULL) return FUNNEL_ERR(error, FUNNEL_ERR_HOST_OUT_OF_MEMORY, "out of host memory");
  put(&w, DESCRIPTOR_MAGIC, 8);
  put_u32(&w, DESCRIPTOR_VERSION);
  put_u32(&w, t->dev->be.ipc_backend_id);
  put(&w, uuid, 16);
  put_i64(&w, (int64_t)getpid());
  put(&w, sh->control_name, NAME_BYTES);
  put_i64(&w, t->plan.rows);
  put_i32(&w, n);
  put_i32(&w, n_alloc);
  put_i32(&w, sh->event != NULL);
  put_u32(&w, 0);
  put(&w, event_handle->bytes, 64);
  if (n_alloc) {
    put(&w, sh->mem_handle.bytes, 64);
    put_i64(&w, (int64_t)sh->mem_size);
  }
  put_i64(&w, schema->ipc_length);
  put(&w, schema->ipc, (size_t)schema->ipc_length);
  w.at += schema_padded - (size_t)schema->ipc_length;
  for (int c = 0; c < n; c++) {
    const struct funnel__out_column *oc = &t->plan.columns[c];
    put_i64(&w, oc->null_count);
    put_i64(&w, oc->length);
    const int64_t offset[3] = {oc->validity, oc->offsets, oc->data};
    const int64_t size[3] = {oc->validity_size, oc->offsets_size, oc->data_size};
    for (int k = 0; k < 3; k++) {
      const bool present = n_alloc && offset[k] >= 0 && size[k] > 0;
      put_i32(&w, present ? 0 : -1);
      put_u32(&w, 0);
      put_i64(&w, present ? offset[k] : 0);
      put_i64(&w, present ? size[k] : 0);
    }
  }
  sh->descriptor = w.p;
  sh->length = w.at;
  return FUNNEL_OK;
}

/* Creates the share's control block, no slot held. */
static int create_control(struct funnel_share *sh, struct funnel_error *error) {
  snprintf(sh->control_name, sizeof(sh->control_name), "/funnel-ctl-%ld-%lld-%lld",
           (long)getpid(), (long long)atomic_fetch_add(&share_sequence, 1),
           (long long)funnel__now_ns());
  FUNNEL_RETURN_NOT_OK(map_control(sh->control_name, true, &sh->control, error));
  struct control *c = sh->control;
  memset(c, 0, sizeof(*c));
  c->version = DESCRIPTOR_VERSION;
  c->exporter_pid = (int32_t)getpid();
  atomic_store(&c->magic, CONTROL_MAGIC);
  return FUNNEL_OK;
}

static int share_table(struct funnel_table *t, struct funnel_share **out,
                       struct funnel_error *error) {
  FUNNEL_CHECK_ARG(t->import == NULL, "an imported table cannot be shared again: share the "
                                      "original in the process that shared it");
  struct funnel_backend *be = &t->dev->be;
  if (!funnel__dev_can_share(be))
    return FUNNEL_ERR(error, FUNNEL_ERR_UNSUPPORTED, "the %s backend cannot share tables",
                      be->name);
  FUNNEL_RETURN_NOT_OK(funnel_table_wait(t, error));
  uint8_t uuid[16];
  FUNNEL_RETURN_NOT_OK(funnel__dev_device_uuid(be, uuid, error));
  struct funnel_share *sh = calloc(1, sizeof(*sh));
  if (sh == NULL) return FUNNEL_ERR(error, FUNNEL_ERR_HOST_OUT_OF_MEMORY, "out of host memory");
  sh->dev = funnel__device_ref(t->dev);
  struct funnel__ipc_handle event_handle;
  memset(&event_handle, 0, sizeof(event_handle));
  int st = create_control(sh, error);
  if (st == FUNNEL_OK && t->out_shared) {
    /* read into shareable memory: shared as it is, complete (waited for) */
    sh->table = funnel__table_ref(t);
    sh->mem = t->out;
    sh->mem_size = (size_t)t->plan.out_size;
    sh->mem_handle = t->out_handle;
  } else if (st == FUNNEL_OK) {
    st = share_buffers(t, sh, &event_handle, error);
  }
  if (st == FUNNEL_OK) st = write_descriptor(t, sh, uuid, &event_handle, error);
  if (st != FUNNEL_OK) {
    share_free(sh);
    return st;
  }
  *out = sh;
  return FUNNEL_OK;
}

funnel_status funnel_table_share(struct funnel_table *t, struct funnel_share **out,
                                 struct funnel_error *error) {
  funnel__error_clear(error);
  FUNNEL_CHECK_ARG(t != NULL && out != NULL, "funnel_table_share: table and out must not be NULL");
  funnel__table_enter(t); /* funnel_table_free waits for the copy */
  const int st = share_table(t, out, error);
  funnel__table_leave(t);
  return st;
}

const void *funnel_share_descriptor(const struct funnel_share *sh, size_t *length) {
  if (sh == NULL) return NULL;
  if (length != NULL) *length = sh->length;
  return sh->descriptor;
}

int funnel_share_importers(struct funnel_share *sh) {
  return sh != NULL && sh->control != NULL ? reap(sh->control) : 0;
}

funnel_status funnel_share_close(struct funnel_share *sh, int64_t timeout_ms,
                                  struct funnel_error *error) {
  funnel__error_clear(error);
  if (sh == NULL) return FUNNEL_OK;
  struct control *c = sh->control;
  atomic_store(&c->withdrawn, 1);
  const int64_t deadline = funnel__now_ns() + (timeout_ms < 0 ? 0 : timeout_ms * 1000000);
  for (;;) {
    const int live = reap(c);
    if (live == 0) break;
    if (timeout_ms >= 0 && funnel__now_ns() >= deadline) {
      char pids[256];
      size_t at = 0;
      pids[0] = '\0';
      for (uint32_t i = 0; i < FUNNEL_SHARE_SLOTS && at < sizeof(pids) - 16; i++) {
        const int32_t pid = atomic_load(&c->slots[i].pid);
        if (pid != 0) at += (size_t)snprintf(pids + at, sizeof(pids) - at, "%s%d", at ? ", " : "", pid);
      }
      return FUNNEL_ERR(error, FUNNEL_ERR_IN_USE,
                        "%d importer%s still hold%s the shared table (pid %s) after %lld ms; it "
                        "is withdrawn: close it again once they are done",
                        live, live == 1 ? "" : "s", live == 1 ? "s" : "", pids,
                        (long long)timeout_ms);
    }
    struct timespec ms = {0, 1000000};
    nanosleep(&ms, NULL);
  }
  share_free(sh);
  return FUNNEL_OK;
}

/* --------------------------------------------------------------- importer */

struct funnel__import {
  struct control *control;
  int slot;
  int n_alloc;
  uint64_t *mem;
  int64_t *mem_size;
};

static void release_import(struct funnel_table *t) {
  struct funnel__import *im = t->import;
  for (int i = 0; i < im->n_alloc; i++)
    funnel__dev_shared_close(&t->dev->be, im->mem[i], (size_t)im->mem_size[i]);
  if (im->control != NULL) {
    if (im->slot >= 0) {
      atomic_store(&im->control->slots[im->slot].start, 0);
      atomic_store(&im->control->slots[im->slot].pid, 0);
    }
    munmap(im->control, sizeof(struct control));
  }
  free(im);
  t->import = NULL;
}

static const char *backend_name(uint32_t id) {
  return id == FUNNEL__IPC_BACKEND_CPU ? "cpu" : id == FUNNEL__IPC_BACKEND_CUDA ? "cuda" : "unknown";
}

static void hex(const uint8_t *b, char out[33]) {
  for (int i = 0; i < 16; i++) snprintf(out + 2 * i, 3, "%02x", b[i]);
}

/* Takes a slot of the control block for this process. */
static int claim_slot(struct funnel__import *im, struct funnel_error *error) {
  struct control *c = im->control;
  if (atomic_load(&c->magic) != CONTROL_MAGIC || c->version != DESCRIPTOR_VERSION)
    return FUNNEL_ERR(error, FUNNEL_ERR_MALFORMED, "the share's control block is not funnel's");
  const int32_t me = (int32_t)getpid();
  for (int pass = 0; pass < 2 && im->slot < 0; pass++) {
    if (pass == 1) reap(c);
    for (int i = 0; i < FUNNEL_SHARE_SLOTS && im->slot < 0; i++) {
      int32_t free_pid = 0;
      if (atomic_compare_exchange_strong(&c->slots[i].pid, &free_pid, me)) im->slot = i;
    }
  }
  if (im->slot < 0)
    return FUNNEL_ERR(error, FUNNEL_ERR_IN_USE, "the shared table has %d importers already",
                      FUNNEL_SHARE_SLOTS);
  atomic_store(&c->slots[im->slot].start, start_time(me));
  /* after the slot is taken: the exporter either sees the slot, or this
   * sees the withdrawal */
  if (atomic_load(&c->withdrawn))
    return FUNNEL_ERR(error, FUNNEL_ERR_IN_USE,
                      "the shared table was withdrawn by its exporter (pid %d)", c->exporter_pid);
  return FUNNEL_OK;
}

struct header {
  char magic[8];
  uint32_t version, backend;
  uint8_t uuid[16];
  int64_t pid;
  char control[NAME_BYTES];
  int64_t rows;
  int32_t columns, allocations, has_event;
  uint32_t unused;
  struct funnel__ipc_handle event;
};

static int read_header(struct cursor *cur, struct header *h) {
  FUNNEL_RETURN_NOT_OK(take(cur, h->magic, 8, "the magic"));
  if (memcmp(h->magic, DESCRIPTOR_MAGIC, 8) != 0)
    return funnel__error_set(cur->error, FUNNEL_ERR_MALFORMED, -1, -1, 0,
                             "not a funnel table descriptor: bad magic at byte 0");
  FUNNEL_RETURN_NOT_OK(take(cur, &h->version, 4, "the version"));
  if (h->version != DESCRIPTOR_VERSION)
    return funnel__error_set(cur->error, FUNNEL_ERR_UNSUPPORTED, -1, -1, 8,
                             "table descriptor version %u, this funnel reads version %d",
                             h->version, DESCRIPTOR_VERSION);
  FUNNEL_RETURN_NOT_OK(take(cur, &h->backend, 4, "the backend"));
  FUNNEL_RETURN_NOT_OK(take(cur, h->uuid, 16, "the device UUID"));
  FUNNEL_RETURN_NOT_OK(take(cur, &h->pid, 8, "the exporter's pid"));
  FUNNEL_RETURN_NOT_OK(take(cur, h->control, NAME_BYTES, "the control block's name"));
  h->control[NAME_BYTES - 1] = '\0';
  FUNNEL_RETURN_NOT_OK(take(cur, &h->rows, 8, "the row count"));
  FUNNEL_RETURN_NOT_OK(take(cur, &h->columns, 4, "the column count"));
  FUNNEL_RETURN_NOT_OK(take(cur, &h->allocations, 4, "the allocation count"));
  FUNNEL_RETURN_NOT_OK(take(cur, &h->has_event, 4, "the event flag"));
  FUNNEL_RETURN_NOT_OK(take(cur, &h->unused, 4, "padding"));
  FUNNEL_RETURN_NOT_OK(take(cur, h->event.bytes, 64, "the event handle"));
  if (h->rows < 0 || h->rows > FUNNEL__MAX_ROWS || h->columns < 0 || h->allocations < 0 ||
      h->allocations > 3 * (int64_t)h->columns + 1 || (h->has_event != 0 && h->has_event != 1) ||
      h->control[0] != '/')
    return funnel__error_set(cur->error, FUNNEL_ERR_MALFORMED, -1, -1, 96,
                             "table descriptor header out of range: %lld rows, %d columns, %d "
                             "allocations, event flag %d",
                             (long long)h->rows, h->columns, h->allocations, h->has_event);
  return FUNNEL_OK;
}

/* The smallest size Arrow's layout allows for buffer k of a column of
 * `rows` rows (at most FUNNEL__MAX_ROWS: no overflow). */
static int64_t min_size(const struct funnel__field *f, int k, int64_t rows) {
  if (k == 0) return (rows + 7) / 8;
  if (k == 1) return f->offset_width > 0 ? (rows + 1) * f->offset_width : 0;
  if (f->nested != FUNNEL__NESTED_NONE) return 0; /* no data buffer */
  if (f->type_id == FUNNEL_TYPE_BOOL) return (rows + 7) / 8;
  return f->offset_width > 0 ? 0 : rows * f->byte_width;
}

/* The table comes from this backend, and from this device or one whose
 * memory this device may map (peer access). */
static int check_origin(struct funnel_backend *be, const struct header *h,
                        struct funnel_error *error) {
  if (h->backend != be->ipc_backend_id)
    return FUNNEL_ERR(error, FUNNEL_ERR_INVALID_ARGUMENT,
                      "the table was shared from the %s backend; this device is %s",
                      backend_name(h->backend), be->name);
  if (!funnel__dev_can_share(be))
    return FUNNEL_ERR(error, FUNNEL_ERR_UNSUPPORTED, "the %s backend cannot open shared tables",
                      be->name);
  uint8_t uuid[16];
  FUNNEL_RETURN_NOT_OK(funnel__dev_device_uuid(be, uuid, error));
  if (memcmp(uuid, h->uuid, 16) == 0) return FUNNEL_OK;
  /* another device of this host: read in place when this one may map its
   * memory (CUDA peer access, enabled as the allocations are opened) */
  int ordinal = -1, can_access = 0;
  FUNNEL_RETURN_NOT_OK(funnel__dev_peer(be, h->uuid, &ordinal, &can_access, error));
  if (can_access) return FUNNEL_OK;
  char want[33], have[33], from[96] = "", here[96] = "";
  hex(h->uuid, want);
  hex(uuid, have);
  if (be->peer != NULL && ordinal >= 0) {
    snprintf(from, sizeof(from), " (%s:%d in this process)", be->name, ordinal);
    snprintf(here, sizeof(here), " (%s:%lld), which has no peer access to it", be->name,
             (long long)be->device_id);
  } else if (be->peer != NULL) {
    snprintf(from, sizeof(from), ", which this process does not see (CUDA_VISIBLE_DEVICES?)");
  } else if (be->uuid_note != NULL) {
    snprintf(here, sizeof(here), " (%s)", be->uuid_note);
  }
  return FUNNEL_ERR(error, FUNNEL_ERR_INVALID_ARGUMENT,
                    "the table was shared from device %s%s; this device is %s%s", want, from,
                    have, here);
}

/* The allocations' handles and sizes. */
static int read_allocations(struct cursor *cur, const struct header *h, struct funnel_table *t,
                            struct funnel__import *im, struct funnel__ipc_handle **handles) {
  struct funnel_error *error = cur->error;
  const size_t n = (size_t)h->allocations + 1;
  *handles = funnel__arena_calloc(&t->arena, n, sizeof(**handles));
  im->mem = funnel__arena_calloc(&t->arena, n, sizeof(uint64_t));
  im->mem_size = funnel__arena_calloc(&t->arena, n, sizeof(int64_t));
  if (*handles == NULL || im->mem == NULL || im->mem_size == NULL)
    return FUNNEL_ERR(error, FUNNEL_ERR_HOST_OUT_OF_MEMORY, "out of host memory");
  for (int i = 0; i < h->allocations; i++) {
    FUNNEL_RETURN_NOT_OK(take(cur, (*handles)[i].bytes, 64, "an allocation's handle"));
    FUNNEL_RETURN_NOT_OK(take(cur, &im->mem_size[i], 8, "an allocation's size"));
    if (im->mem_size[i] <= 0)
      return funnel__error_set(error, FUNNEL_ERR_MALFORMED, -1, -1, (int64_t)cur->at - 8,
                               "allocation %d of the table descriptor has size %lld", i,
                               (long long)im->mem_size[i]);
  }
  return FUNNEL_OK;
}

/* The schema, padded to 8 bytes, with as many fields as the header says. */
static int read_schema(struct cursor *cur, const struct header *h, struct funnel_table *t,
                       struct funnel__schema **out) {
  struct funnel_error *error = cur->error;
  int64_t length;
  FUNNEL_RETURN_NOT_OK(take(cur, &length, 8, "the schema's length"));
  if (length <= 0 || (uint64_t)length > cur->length - cur->at)
    return funnel__error_set(error, FUNNEL_ERR_MALFORMED, -1, -1, (int64_t)cur->at - 8,
                             "the table descriptor's schema length %lld exceeds its %zu bytes left",
                             (long long)length, cur->length - cur->at);
  struct funnel__schema *schema = funnel__arena_calloc(&t->arena, 1, sizeof(*schema));
  if (schema == NULL) return FUNNEL_ERR(error, FUNNEL_ERR_HOST_OUT_OF_MEMORY, "out of host memory");
  FUNNEL_RETURN_NOT_OK(funnel__schema_parse(cur->p + cur->at, length, &t->arena, schema, error));
  const size_t padded = (size_t)funnel__align_up(length, 8), left = cur->length - cur->at;
  cur->at += padded < left ? padded : left;
  if (schema->n_fields != h->columns)
    return FUNNEL_ERR(error, FUNNEL_ERR_MALFORMED,
                      "the table descriptor lists %d columns, its schema %d", h->columns,
                      schema->n_fields);
  *out = schema;
  return FUNNEL_OK;
}

/* The columns, as the descriptor places them. */
struct placed {
  struct funnel__out_column *cols;
  uint64_t *addr; /* offsets within their allocation, made absolute once mapped */
  int32_t *which; /* the allocation of each buffer, -1: absent */
};

/* Buffer k of column c: its allocation, offset and length. */
static int read_buffer(struct cursor *cur, const struct header *h, const struct funnel__import *im,
                       const struct funnel__field *f, int c, int k, struct placed *pl) {
  const size_t at = cur->at;
  int32_t alloc;
  uint32_t pad;
  int64_t offset, size, end;
  FUNNEL_RETURN_NOT_OK(take(cur, &alloc, 4, "a buffer's allocation"));
  FUNNEL_RETURN_NOT_OK(take(cur, &pad, 4, "padding"));
  FUNNEL_RETURN_NOT_OK(take(cur, &offset, 8, "a buffer's offset"));
  FUNNEL_RETURN_NOT_OK(take(cur, &size, 8, "a buffer's length"));
  struct funnel__out_column *oc = &pl->cols[c];
  const bool wanted = k != FUNNEL_BUFFER_VALIDITY || oc->null_count > 0;
  const int64_t need = wanted ? min_size(f, k, oc->length) : 0;
  const bool bad = alloc < -1 || alloc >= h->allocations ||
                   (alloc >= 0 && (offset < 0 || size < need ||
                                   funnel__add_overflows(offset, size, &end) ||
                                   end > im->mem_size[alloc])) ||
                   (alloc < 0 && need > 0);
  if (bad)
    return funnel__error_set(
        cur->error, FUNNEL_ERR_MALFORMED, -1, c, (int64_t)at,
        "column %d ('%s'), buffer %d: allocation %d, offset %lld, length %lld does not "
        "fit (%d allocations, %lld bytes needed)",
        c, f->path, k, alloc, (long long)offset, (long long)size, h->allocations,
        (long long)need);
  pl->which[3 * c + k] = alloc;
  pl->addr[3 * c + k] = (uint64_t)offset;
  int64_t *dst = k == FUNNEL_BUFFER_VALIDITY  ? &oc->validity_size
                 : k == FUNNEL_BUFFER_OFFSETS ? &oc->offsets_size
                                              : &oc->data_size;
  *dst = alloc >= 0 ? size : 0;
  return FUNNEL_OK;
}

static int read_columns(struct cursor *cur, const struct header *h, const struct funnel__import *im,
                        const struct funnel__schema *schema, struct funnel_table *t,
                        struct placed *pl) {
  const size_t n = (size_t)h->columns;
  pl->cols = funnel__arena_calloc(&t->arena, n + 1, sizeof(*pl->cols));
  pl->addr = funnel__arena_calloc(&t->arena, 3 * n + 1, sizeof(uint64_t));
  pl->which = funnel__arena_calloc(&t->arena, 3 * n + 1, sizeof(int32_t));
  if (pl->cols == NULL || pl->addr == NULL || pl->which == NULL)
    return FUNNEL_ERR(cur->error, FUNNEL_ERR_HOST_OUT_OF_MEMORY, "out of host memory");
  for (int c = 0; c < h->columns; c++) {
    const struct funnel__field *f = &schema->fields[c];
    struct funnel__out_column *oc = &pl->cols[c];
    const size_t at = cur->at;
    FUNNEL_RETURN_NOT_OK(take(cur, &oc->null_count, 8, "a column's null count"));
    FUNNEL_RETURN_NOT_OK(take(cur, &oc->length, 8, "a column's length"));
    /* a top-level column has the table's rows, a struct's child the
     * struct's, a fixed_size_list's child list_size times its; a list's
     * child any (its offsets, in device memory, are the sharer's word) */
    const struct funnel__field *pf = f->parent >= 0 ? &schema->fields[f->parent] : NULL;
    const int64_t want = pf == NULL                              ? h->rows
                         : pf->nested == FUNNEL__NESTED_STRUCT   ? pl->cols[f->parent].length
                         : pf->nested == FUNNEL__NESTED_FIXED &&
                                   pl->cols[f->parent].length <= FUNNEL__MAX_ROWS / pf->list_size
                             ? pl->cols[f->parent].length * pf->list_size
                             : -1;
    if (oc->length < 0 || oc->length > FUNNEL__MAX_ROWS || (want >= 0 && oc->length != want) ||
        (want < 0 && pf->nested != FUNNEL__NESTED_LIST) || oc->null_count < 0 ||
        oc->null_count > oc->length)
      return funnel__error_set(cur->error, FUNNEL_ERR_MALFORMED, -1, c, (int64_t)at,
                               "column %d ('%s'): null count %lld of %lld rows (%lld expected)", c,
                               f->path, (long long)oc->null_count, (long long)oc->length,
                               (long long)want);
    for (int k = FUNNEL_BUFFER_VALIDITY; k <= FUNNEL_BUFFER_DATA; k++)
      FUNNEL_RETURN_NOT_OK(read_buffer(cur, h, im, f, c, k, pl));
    oc->validity = oc->offsets = oc->data = -1;
  }
  if (cur->at != cur->length)
    return funnel__error_set(cur->error, FUNNEL_ERR_MALFORMED, -1, -1, (int64_t)cur->at,
                             "%zu bytes after the table descriptor's end",
                             cur->length - cur->at);
  return FUNNEL_OK;
}

/* Claims a slot, then maps the allocations and opens the event: the
 * exporter frees nothing while the slot is held. */
static int open_shared(struct funnel_backend *be, const struct header *h,
                       const struct funnel__ipc_handle *handles, struct funnel__import *im,
                       struct funnel_table *t, struct funnel_error *error) {
  if (h->pid == (int64_t)getpid())
    return FUNNEL_ERR(error, FUNNEL_ERR_INVALID_ARGUMENT,
                      "the table was shared by this process (pid %lld): use the table itself "
                      "(a process cannot open its own CUDA IPC handles)",
                      (long long)h->pid);
  FUNNEL_RETURN_NOT_OK(map_control(h->control, false, &im->control, error));
  FUNNEL_RETURN_NOT_OK(claim_slot(im, error));
  for (int i = 0; i < h->allocations; i++) {
    FUNNEL_RETURN_NOT_OK(funnel__dev_shared_open(be, &handles[i], (size_t)im->mem_size[i],
                                                 &im->mem[i], error));
    im->n_alloc = i + 1;
  }
  if (h->has_event)
    FUNNEL_RETURN_NOT_OK(funnel__dev_ipc_event_open(be, &h->event, &t->event, error));
  return FUNNEL_OK;
}

static int import_table(struct cursor *cur, struct funnel_table *t, struct funnel__import *im) {
  struct funnel_backend *be = &t->dev->be;
  struct header h;
  struct funnel__ipc_handle *handles = NULL;
  struct funnel__schema *schema = NULL;
  struct placed pl = {0};
  FUNNEL_RETURN_NOT_OK(read_header(cur, &h));
  FUNNEL_RETURN_NOT_OK(check_origin(be, &h, cur->error));
  FUNNEL_RETURN_NOT_OK(read_allocations(cur, &h, t, im, &handles));
  FUNNEL_RETURN_NOT_OK(read_schema(cur, &h, t, &schema));
  FUNNEL_RETURN_NOT_OK(read_columns(cur, &h, im, schema, t, &pl));
  FUNNEL_RETURN_NOT_OK(open_shared(be, &h, handles, im, t, cur->error));
  for (int i = 0; i < 3 * h.columns; i++)
    pl.addr[i] = pl.which[i] >= 0 ? im->mem[pl.which[i]] + pl.addr[i] : 0;
  t->plan.schema = schema;
  t->plan.rows = h.rows;
  t->plan.columns = pl.cols;
  t->import_addr = pl.addr;
  t->done = t->event == NULL;
  t->stats.rows = h.rows;
  t->stats.columns = h.columns;
  return FUNNEL_OK;
}

funnel_status funnel_table_import(struct funnel_device *dev, const void *descriptor,
                                  size_t length, struct funnel_table **out,
                                  struct funnel_error *error) {
  funnel__error_clear(error);
  FUNNEL_CHECK_ARG(dev != NULL && out != NULL && (descriptor != NULL || length == 0),
                   "funnel_table_import: NULL argument");
  struct funnel__import *im = calloc(1, sizeof(*im));
  if (im == NULL) return FUNNEL_ERR(error, FUNNEL_ERR_HOST_OUT_OF_MEMORY, "out of host memory");
  struct funnel_table *t = funnel__table_new(dev, error);
  if (t == NULL) {
    free(im);
    return FUNNEL_ERR_HOST_OUT_OF_MEMORY;
  }
  im->slot = -1;
  t->import = im;
  t->release_import = release_import;
  struct cursor cur = {descriptor, length, 0, error};
  const int st = import_table(&cur, t, im);
  if (st != FUNNEL_OK) {
    funnel__table_unref(t); /* closes what was opened, gives the slot back */
    return st;
  }
  *out = t;
  return FUNNEL_OK;
}
