/*
 * sqlite_conn.c - a SQLite store connection (store_sqlite.c): opening it with the one-write WAL VFS
 * (walbuf.c), its cache of prepared statements, what a result code means (a full disk has its own error),
 * the transactions and savepoints with the seq high-water mark, and the space the write-ahead log takes:
 * checkpoints after a batch rather than inside its commit, and giving space back when the disk is full.
 * It knows nothing of the rows it writes: those are store_sqlite.c's and sqlite_webhook.c's.
 */
#include "store/store_sqlite_int.h"
#include "store/walbuf.h"
#include "common/metrics.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>

/* Transient conditions (lock held too long, disk trouble) answer 503; everything else is our bug. A full disk has
 * its own code: the writer keeps /readyz at 503 until there is room again (writer.c). */
static ad_err map_rc(int rc)
{
    switch (rc & 0xff) {
    case SQLITE_FULL:
        return AD_E_STORAGE_FULL;
    case SQLITE_BUSY:
    case SQLITE_LOCKED:
    case SQLITE_IOERR:
    case SQLITE_CANTOPEN:
    case SQLITE_PROTOCOL:
    case SQLITE_READONLY:
        return AD_E_UNAVAILABLE;
    default:
        return AD_E_INTERNAL;
    }
}

ad_err ad_sq_fail(struct ad_conn *c, int rc, const char *what)
{
    ad_error("store: %s: %s (%d)", what, sqlite3_errmsg(c->db), rc);
    ad_metrics_store_error();
    if ((rc & 0xff) == SQLITE_FULL)
        c->tx_full = c->in_tx;
    return map_rc(rc);
}

/* The cached statement id, prepared on first use; NULL (logged) when it does not prepare. */
sqlite3_stmt *ad_sq_stmt(struct ad_conn *c, enum sq_stmt id)
{
    if (c->st[id] == NULL) {
        int rc = sqlite3_prepare_v3(c->db, ad_sq_stmt_sql[id], -1, SQLITE_PREPARE_PERSISTENT, &c->st[id], NULL);
        if (rc != SQLITE_OK) {
            ad_sq_fail(c, rc, "prepare");
            c->st[id] = NULL;
        }
    }
    return c->st[id];
}

/* Make a used statement ready for its next use. */
void ad_sq_done(sqlite3_stmt *st)
{
    sqlite3_reset(st);
    sqlite3_clear_bindings(st);
}

/* Step a statement that returns no rows (or whose rows are ignored) to the end, then reset it. */
ad_err ad_sq_run(struct ad_conn *c, sqlite3_stmt *st, const char *what)
{
    int rc;
    do {
        rc = sqlite3_step(st);
    } while (rc == SQLITE_ROW);
    ad_err e = rc == SQLITE_DONE ? AD_E_OK : ad_sq_fail(c, rc, what);
    ad_sq_done(st);
    return e;
}

ad_err ad_sq_run_id(struct ad_conn *c, enum sq_stmt id, const char *what)
{
    sqlite3_stmt *st = ad_sq_stmt(c, id);
    return st != NULL ? ad_sq_run(c, st, what) : AD_E_INTERNAL;
}

/*
 * SQLite rolls a whole transaction back by itself on some errors (disk full, I/O error). Writing on after
 * that would commit each statement on its own, outside the batch the caller thinks it is in, so a write
 * refuses to run once the transaction is gone.
 */
ad_err ad_sq_check_tx(struct ad_conn *c)
{
    if (c->in_tx && sqlite3_get_autocommit(c->db)) {
        ad_error("store: the transaction was rolled back by SQLite; refusing to write outside it");
        return c->tx_full ? AD_E_STORAGE_FULL : AD_E_UNAVAILABLE;
    }
    return AD_E_OK;
}

/* The prepared statement id for a write inside the open transaction, or why there is none. */
ad_err ad_sq_write_stmt(struct ad_conn *c, enum sq_stmt id, sqlite3_stmt **st)
{
    ad_err e = ad_sq_check_tx(c);
    if (e != AD_E_OK)
        return e;
    *st = ad_sq_stmt(c, id);
    return *st != NULL ? AD_E_OK : AD_E_INTERNAL;
}

/*
 * Raise the seq counter to the file's high-water mark (meta's seq_hw: the highest seq a committed transaction
 * handed out, raised by ad_sq_commit) once per transaction, so that seq never goes backwards or repeats, even
 * across restarts, rolled-back transactions (which only leave gaps) and deletions of the newest rows.
 */
ad_err ad_sq_sync_seq(struct ad_conn *c)
{
    if (c->seq_synced)
        return AD_E_OK;
    sqlite3_stmt *st = ad_sq_stmt(c, ST_MAX_SEQ);
    if (st == NULL)
        return AD_E_INTERNAL;
    int rc = sqlite3_step(st);
    if (rc != SQLITE_ROW) {
        ad_err e = ad_sq_fail(c, rc, "read max seq");
        ad_sq_done(st);
        return e;
    }
    int64_t max = sqlite3_column_int64(st, 0);
    ad_sq_done(st);
    if (max > c->seq)
        c->seq = max;
    c->seq_stored = max;
    c->seq_synced = c->in_tx;
    return AD_E_OK;
}

/* ---- connections and transactions ---- */

void ad_sq_disconnect(struct ad_conn *c)
{
    if (c == NULL)
        return;
    for (int i = 0; i < ST__COUNT; i++)
        sqlite3_finalize(c->st[i]);
    sqlite3_close(c->db);
    ad_hook_cache_drop(&c->hooks);
    ad_sq_rows_drop(c);
    free(c->rows);
    free(c);
}

/* Process-wide settings, before SQLite initializes (ad_walbuf_register does): no memory statistics. Nothing
 * here reads them, and keeping them takes a global mutex on every allocation SQLite makes (5% of the
 * writer's time under load). Too late only if something else initialized SQLite first; then the default
 * stays. */
static void sq_configure(void)
{
    sqlite3_config(SQLITE_CONFIG_MEMSTATUS, 0);
}

/* SQLite's own automatic checkpoint runs inside the commit that fills the log to 1000 frames, before the
 * commit returns, so that batch's answers waited for it (about 200 page writes and a sync of the database
 * file: 1.5-3 ms, every 40-50 batches of a steady submit load). A connection that runs the writer's batches
 * (the first ad_sq_begin) only counts the frames instead, and checkpoints once the batch's answers are out
 * (ad_sq_after_batch). Other connections, which write only now and then, keep SQLite's. */
#define SQ_CHECKPOINT_FRAMES 1000
/*
 * A checkpoint copies the log into the database but leaves the file its size, to be written over from the start:
 * the log keeps the most it ever held. journal_size_limit truncates it back to this at that restart: twice what
 * it holds between two checkpoints, so that a steady load never pays for it, while a log swollen by a huge
 * batch, or by checkpoints that readers held back, gives its space back.
 */
#define SQ_WAL_LIMIT "8388608"
/* How far the log grows between two looks at the free space of its file system (ad_sq_after_batch). */
#define SQ_SPACE_CHECK_FRAMES 64
#define SQ_BUSY_TIMEOUT_MS 5000

static int sq_wal_hook(void *arg, sqlite3 *db, const char *name, int frames)
{
    ((struct ad_conn *)arg)->wal_frames = frames;
    return SQLITE_OK;
}

/* Copy the whole log into the database and truncate it to nothing, without waiting for a reader in the way
 * (then the copy stops at what it holds and the next try goes on). SQLITE_OK when the log is empty. */
static int truncate_log(struct ad_conn *c)
{
    sqlite3_busy_timeout(c->db, 0);
    int rc = sqlite3_wal_checkpoint_v2(c->db, "main", SQLITE_CHECKPOINT_TRUNCATE, NULL, NULL);
    sqlite3_busy_timeout(c->db, SQ_BUSY_TIMEOUT_MS);
    if (rc == SQLITE_OK)
        c->wal_frames = c->space_frames = 0;
    return rc;
}

/* Free bytes on the file system of the database (and its log), or -1 when it cannot be told. */
static int64_t free_bytes(struct ad_conn *c)
{
    struct statvfs fs;
    return statvfs(sqlite3_db_filename(c->db, "main"), &fs) == 0 ? (int64_t)fs.f_bavail * (int64_t)fs.f_frsize : -1;
}

/*
 * Whether the log takes more room than its file system has left. On a small volume the log, which a checkpoint
 * empties but does not shrink, would fill it long before SQ_CHECKPOINT_FRAMES (1000 frames are 4 MiB): every
 * batch would then fail for want of room that the log only holds for pages the database file already has.
 */
static int log_crowds_disk(struct ad_conn *c)
{
    const char *wal = sqlite3_filename_wal(sqlite3_db_filename(c->db, "main"));
    struct stat st;
    if (wal == NULL || stat(wal, &st) != 0)
        return 0;
    int64_t room = free_bytes(c);
    return room >= 0 && room < (int64_t)st.st_size;
}

void ad_sq_after_batch(struct ad_conn *c)
{
    if (c->wal_frames < c->space_frames)
        c->space_frames = 0; /* the log restarted */
    if (c->wal_frames - c->space_frames >= SQ_SPACE_CHECK_FRAMES) {
        c->space_frames = c->wal_frames;
        if (log_crowds_disk(c) && truncate_log(c) == SQLITE_OK)
            return;
    }
    if (c->wal_frames < SQ_CHECKPOINT_FRAMES)
        return;
    int rc = sqlite3_wal_checkpoint_v2(c->db, "main", SQLITE_CHECKPOINT_PASSIVE, NULL, NULL);
    if (rc != SQLITE_OK && rc != SQLITE_BUSY)
        ad_warn("store: checkpoint: %s", sqlite3_errmsg(c->db));
    c->wal_frames = 0;
}

/*
 * Out of space: the log is what the store can give back, since every page in it that has been copied into the
 * database takes room twice. Then there is room again once the file system has SQ_ROOM_BYTES free and a write
 * of one page (a row written and deleted again in one transaction) goes through. The write alone would say yes
 * too soon: it fits in the tail that the failed batch left in the log, and the next batch would fail again.
 * Nothing here logs its failure: the writer tries again and again while the disk is full.
 */
#define SQ_ROOM_BYTES (1024 * 1024)

ad_err ad_sq_reclaim(struct ad_conn *c)
{
    truncate_log(c);
    int64_t room = free_bytes(c);
    if (room >= 0 && room < SQ_ROOM_BYTES)
        return AD_E_STORAGE_FULL;
    int rc = sqlite3_exec(c->db,
                          "BEGIN IMMEDIATE;"
                          "INSERT OR REPLACE INTO meta (key, value) VALUES ('space_probe', 0);"
                          "DELETE FROM meta WHERE key = 'space_probe';"
                          "COMMIT",
                          NULL, NULL, NULL);
    if (rc != SQLITE_OK && !sqlite3_get_autocommit(c->db))
        sqlite3_exec(c->db, "ROLLBACK", NULL, NULL, NULL);
    return rc == SQLITE_OK ? AD_E_OK : map_rc(rc);
}

struct ad_conn *ad_sq_connect(struct ad_store *s, char *err, size_t errlen)
{
    static pthread_once_t configured = PTHREAD_ONCE_INIT;
    struct sq_store *ss = (struct sq_store *)s;
    struct ad_conn *c = ad_calloc(1, sizeof(*c));
    pthread_once(&configured, sq_configure);
    /* NOMUTEX: a connection is used by exactly one thread. */
    int rc = ad_walbuf_register();
    if (rc == SQLITE_OK)
        rc = sqlite3_open_v2(ss->path, &c->db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX, AD_WALBUF_VFS);
    if (rc != SQLITE_OK) {
        snprintf(err, errlen, "open %s: %s", ss->path, c->db != NULL ? sqlite3_errmsg(c->db) : sqlite3_errstr(rc));
        ad_sq_disconnect(c);
        return NULL;
    }
    sqlite3_extended_result_codes(c->db, 1);
    /* synchronous=FULL makes a commit durable, and walbuf.c relies on it. */
    static const char pragmas[] = "PRAGMA journal_mode = WAL;"
                                  "PRAGMA synchronous = FULL;"
                                  "PRAGMA cache_size = -16384;" /* 16 MiB, not 2: the hot pages of every index */
                                  "PRAGMA temp_store = MEMORY;"
                                  "PRAGMA journal_size_limit = " SQ_WAL_LIMIT ";"
                                  "PRAGMA foreign_keys = ON;";
    char *msg = NULL;
    rc = sqlite3_exec(c->db, pragmas, NULL, NULL, &msg);
    if (rc != SQLITE_OK) {
        snprintf(err, errlen, "configure %s: %s", ss->path, msg != NULL ? msg : sqlite3_errstr(rc));
        sqlite3_free(msg);
        ad_sq_disconnect(c);
        return NULL;
    }
    sqlite3_busy_timeout(c->db, SQ_BUSY_TIMEOUT_MS);
    return c;
}

/* The transaction is over (or begins): nothing learnt in it holds any more. */
static void tx_reset(struct ad_conn *c, int in_tx)
{
    c->in_tx = in_tx;
    c->seq_synced = 0;
    ad_hook_cache_drop(&c->hooks);
}

ad_err ad_sq_begin(struct ad_conn *c)
{
    if (!c->own_checkpoints) {
        sqlite3_wal_hook(c->db, sq_wal_hook, c);
        c->own_checkpoints = 1;
    }
    c->tx_full = 0;
    ad_err e = ad_sq_run_id(c, ST_BEGIN, "begin");
    if (e == AD_E_OK)
        tx_reset(c, 1);
    if (e == AD_E_OK)
        e = ad_sq_rows_check(c);
    if (e != AD_E_OK && !sqlite3_get_autocommit(c->db)) {
        ad_sq_run_id(c, ST_ROLLBACK, "rollback after failed begin");
        tx_reset(c, 0);
    }
    return e;
}

/* The transaction's seqs are in the file once it commits: raise seq_hw to the last one it handed out. */
static ad_err store_seq_hw(struct ad_conn *c)
{
    if (c->seq <= c->seq_stored)
        return AD_E_OK;
    sqlite3_stmt *st = ad_sq_stmt(c, ST_SET_SEQ_HW);
    if (st == NULL)
        return AD_E_INTERNAL;
    sqlite3_bind_int64(st, 1, c->seq);
    return ad_sq_run(c, st, "record seq high-water mark");
}

ad_err ad_sq_commit(struct ad_conn *c)
{
    ad_err e = ad_sq_check_tx(c);
    if (e == AD_E_OK)
        e = store_seq_hw(c);
    if (e == AD_E_OK)
        e = ad_sq_run_id(c, ST_COMMIT, "commit");
    if (e == AD_E_OK)
        c->seq_stored = c->seq;
    /* A failed COMMIT in WAL mode leaves the transaction open; end it so the next begin starts clean. */
    if (e != AD_E_OK && !sqlite3_get_autocommit(c->db))
        ad_sq_run_id(c, ST_ROLLBACK, "rollback after failed commit");
    if (e != AD_E_OK)
        ad_sq_rows_drop(c);
    tx_reset(c, 0);
    return e;
}

void ad_sq_rollback(struct ad_conn *c)
{
    if (!sqlite3_get_autocommit(c->db))
        ad_sq_run_id(c, ST_ROLLBACK, "rollback");
    tx_reset(c, 0);
    ad_sq_rows_drop(c);
}

int64_t ad_sq_changes(struct ad_conn *c)
{
    return sqlite3_total_changes64(c->db);
}

ad_err ad_sq_savepoint(struct ad_conn *c)
{
    ad_err e = ad_sq_check_tx(c);
    return e == AD_E_OK ? ad_sq_run_id(c, ST_SAVEPOINT, "savepoint") : e;
}

ad_err ad_sq_release(struct ad_conn *c)
{
    ad_err e = ad_sq_check_tx(c);
    return e == AD_E_OK ? ad_sq_run_id(c, ST_RELEASE, "release") : e;
}

void ad_sq_rollback_to(struct ad_conn *c)
{
    if (ad_sq_check_tx(c) != AD_E_OK)
        return;
    /* ROLLBACK TO keeps the savepoint open; release it so the next operation's savepoint is not nested. */
    if (ad_sq_run_id(c, ST_ROLLBACK_TO, "rollback to savepoint") == AD_E_OK)
        ad_sq_run_id(c, ST_RELEASE, "release after rollback");
    /* A webhook or a job written by the undone operation may be in what is remembered. */
    ad_hook_cache_drop(&c->hooks);
    ad_sq_rows_drop(c);
}
