/*
 * walbuf.c - the "acceptd-walbuf" SQLite VFS: a commit's WAL frames reach the file in one write.
 *
 * The VFS's file object is ours followed by the default VFS's. A WAL file is opened into the second part and
 * wrapped by the first; any other file is opened into the start of the object and is the default VFS's own,
 * with its own methods, so it costs nothing. The gathered bytes are one contiguous range [off, off + len):
 * a write that continues it is appended, anything else first writes it out. It never holds more than
 * WB_MAX bytes. A failed write-out is reported by the call that caused it (usually the commit's sync), and
 * SQLite then rolls the transaction back as it would after a failed write.
 */
#include "store/walbuf.h"
#include "common/util.h"

#include <pthread.h>
#include <sqlite3.h>
#include <stdlib.h>
#include <string.h>

#define WB_FIRST (64 * 1024)
#define WB_MAX (1024 * 1024)
/* The unix VFS writes at most 128 KiB - 1 bytes per call (it masks the size to 17 bits). */
#define WB_CHUNK (124 * 1024)

struct wb_file {
    sqlite3_file base;
    sqlite3_file *real; /* the default VFS's object for the WAL, right after this struct */
    unsigned char *buf;
    size_t len, cap;
    sqlite3_int64 off;
};

static sqlite3_vfs *parent;
static sqlite3_vfs vfs;
static sqlite3_io_methods methods;

static struct wb_file *wb(sqlite3_file *f)
{
    return (struct wb_file *)f;
}

static int flush(struct wb_file *w)
{
    int rc = SQLITE_OK;
    for (size_t done = 0; done < w->len && rc == SQLITE_OK;) {
        size_t n = w->len - done < WB_CHUNK ? w->len - done : WB_CHUNK;
        rc = w->real->pMethods->xWrite(w->real, w->buf + done, (int)n, w->off + (sqlite3_int64)done);
        done += n;
    }
    w->len = 0;
    return rc;
}

static int wb_close(sqlite3_file *f)
{
    struct wb_file *w = wb(f);
    int rc = flush(w);
    int rc2 = w->real->pMethods->xClose(w->real);
    free(w->buf);
    w->buf = NULL;
    return rc != SQLITE_OK ? rc : rc2;
}

static int wb_read(sqlite3_file *f, void *p, int n, sqlite3_int64 off)
{
    struct wb_file *w = wb(f);
    int rc = flush(w);
    return rc != SQLITE_OK ? rc : w->real->pMethods->xRead(w->real, p, n, off);
}

static int wb_write(sqlite3_file *f, const void *p, int n, sqlite3_int64 off)
{
    struct wb_file *w = wb(f);
    if (w->len > 0 && off != w->off + (sqlite3_int64)w->len) {
        int rc = flush(w);
        if (rc != SQLITE_OK)
            return rc;
    }
    if (w->len + (size_t)n > w->cap && w->cap < WB_MAX) {
        size_t cap = w->cap == 0 ? WB_FIRST : w->cap;
        while (cap < w->len + (size_t)n && cap < WB_MAX)
            cap *= 2;
        w->buf = ad_realloc(w->buf, cap);
        w->cap = cap;
    }
    if (w->len + (size_t)n > w->cap) {
        int rc = flush(w);
        if (rc != SQLITE_OK)
            return rc;
        if ((size_t)n > w->cap)
            return w->real->pMethods->xWrite(w->real, p, n, off);
    }
    if (w->len == 0)
        w->off = off;
    memcpy(w->buf + w->len, p, (size_t)n);
    w->len += (size_t)n;
    return SQLITE_OK;
}

static int wb_truncate(sqlite3_file *f, sqlite3_int64 size)
{
    struct wb_file *w = wb(f);
    int rc = flush(w);
    return rc != SQLITE_OK ? rc : w->real->pMethods->xTruncate(w->real, size);
}

static int wb_sync(sqlite3_file *f, int flags)
{
    struct wb_file *w = wb(f);
    int rc = flush(w);
    return rc != SQLITE_OK ? rc : w->real->pMethods->xSync(w->real, flags);
}

static int wb_file_size(sqlite3_file *f, sqlite3_int64 *size)
{
    struct wb_file *w = wb(f);
    int rc = flush(w);
    return rc != SQLITE_OK ? rc : w->real->pMethods->xFileSize(w->real, size);
}

static int wb_lock(sqlite3_file *f, int lock)
{
    return wb(f)->real->pMethods->xLock(wb(f)->real, lock);
}

static int wb_unlock(sqlite3_file *f, int lock)
{
    return wb(f)->real->pMethods->xUnlock(wb(f)->real, lock);
}

static int wb_check_reserved(sqlite3_file *f, int *out)
{
    return wb(f)->real->pMethods->xCheckReservedLock(wb(f)->real, out);
}

static int wb_file_control(sqlite3_file *f, int op, void *arg)
{
    struct wb_file *w = wb(f);
    int rc = flush(w);
    return rc != SQLITE_OK ? rc : w->real->pMethods->xFileControl(w->real, op, arg);
}

static int wb_sector_size(sqlite3_file *f)
{
    return wb(f)->real->pMethods->xSectorSize(wb(f)->real);
}

static int wb_device_characteristics(sqlite3_file *f)
{
    return wb(f)->real->pMethods->xDeviceCharacteristics(wb(f)->real);
}

static int wb_open(sqlite3_vfs *v, sqlite3_filename name, sqlite3_file *f, int flags, int *out_flags)
{
    (void)v;
    if ((flags & SQLITE_OPEN_WAL) == 0)
        return parent->xOpen(parent, name, f, flags, out_flags);
    struct wb_file *w = wb(f);
    memset(w, 0, sizeof(*w));
    w->real = (sqlite3_file *)(w + 1);
    int rc = parent->xOpen(parent, name, w->real, flags, out_flags);
    /* On failure SQLite calls xClose only if pMethods is set; leave it NULL then. */
    if (rc == SQLITE_OK)
        w->base.pMethods = &methods;
    else if (w->real->pMethods != NULL)
        w->real->pMethods->xClose(w->real);
    return rc;
}

static int wb_delete(sqlite3_vfs *v, const char *name, int sync_dir)
{
    (void)v;
    return parent->xDelete(parent, name, sync_dir);
}

static int wb_access(sqlite3_vfs *v, const char *name, int flags, int *out)
{
    (void)v;
    return parent->xAccess(parent, name, flags, out);
}

static int wb_full_pathname(sqlite3_vfs *v, const char *name, int n, char *out)
{
    (void)v;
    return parent->xFullPathname(parent, name, n, out);
}

static int wb_randomness(sqlite3_vfs *v, int n, char *out)
{
    (void)v;
    return parent->xRandomness(parent, n, out);
}

static int wb_sleep(sqlite3_vfs *v, int us)
{
    (void)v;
    return parent->xSleep(parent, us);
}

static int wb_current_time(sqlite3_vfs *v, double *out)
{
    (void)v;
    return parent->xCurrentTime(parent, out);
}

static int wb_last_error(sqlite3_vfs *v, int n, char *out)
{
    (void)v;
    return parent->xGetLastError(parent, n, out);
}

static void *wb_dl_open(sqlite3_vfs *v, const char *name)
{
    (void)v;
    return parent->xDlOpen(parent, name);
}

static void wb_dl_error(sqlite3_vfs *v, int n, char *out)
{
    (void)v;
    parent->xDlError(parent, n, out);
}

static void (*wb_dl_sym(sqlite3_vfs *v, void *h, const char *sym))(void)
{
    (void)v;
    return parent->xDlSym(parent, h, sym);
}

static void wb_dl_close(sqlite3_vfs *v, void *h)
{
    (void)v;
    parent->xDlClose(parent, h);
}

static int wb_current_time_int64(sqlite3_vfs *v, sqlite3_int64 *out)
{
    (void)v;
    return parent->xCurrentTimeInt64(parent, out);
}

static pthread_once_t once = PTHREAD_ONCE_INIT;
static int register_rc;

static void do_register(void)
{
    register_rc = sqlite3_initialize();
    parent = sqlite3_vfs_find(NULL);
    if (register_rc != SQLITE_OK || parent == NULL || parent->iVersion < 2) {
        if (register_rc == SQLITE_OK)
            register_rc = SQLITE_ERROR;
        return;
    }
    /* A WAL file never uses the shared-memory or memory-mapping methods: version 1 is all it needs. */
    methods = (sqlite3_io_methods){
        .iVersion = 1,
        .xClose = wb_close,
        .xRead = wb_read,
        .xWrite = wb_write,
        .xTruncate = wb_truncate,
        .xSync = wb_sync,
        .xFileSize = wb_file_size,
        .xLock = wb_lock,
        .xUnlock = wb_unlock,
        .xCheckReservedLock = wb_check_reserved,
        .xFileControl = wb_file_control,
        .xSectorSize = wb_sector_size,
        .xDeviceCharacteristics = wb_device_characteristics,
    };
    vfs = (sqlite3_vfs){
        .iVersion = 2,
        .szOsFile = (int)sizeof(struct wb_file) + parent->szOsFile,
        .mxPathname = parent->mxPathname,
        .zName = AD_WALBUF_VFS,
        .xOpen = wb_open,
        .xDelete = wb_delete,
        .xAccess = wb_access,
        .xFullPathname = wb_full_pathname,
        .xDlOpen = wb_dl_open,
        .xDlError = wb_dl_error,
        .xDlSym = wb_dl_sym,
        .xDlClose = wb_dl_close,
        .xRandomness = wb_randomness,
        .xSleep = wb_sleep,
        .xCurrentTime = wb_current_time,
        .xGetLastError = wb_last_error,
        .xCurrentTimeInt64 = wb_current_time_int64,
    };
    register_rc = sqlite3_vfs_register(&vfs, 0);
}

int ad_walbuf_register(void)
{
    pthread_once(&once, do_register);
    return register_rc;
}
