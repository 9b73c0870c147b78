/*
 * test_walbuf.c - unit tests for src/walbuf.c: a commit's WAL frames leave in one write system call, and
 * what is written that way is what SQLite reads back, from another connection, after a reopen, and in
 * commits larger than the buffer and than one write may carry.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tmpdir.h"
#include "store/walbuf.h"
#include "write_calls.h"

struct fixture {
    char dir[64];
    char path[96];
};

static int setup(void **state)
{
    struct fixture *f = calloc(1, sizeof(*f));
    if (tmpdir_make(f->dir, sizeof(f->dir), "walbuf") != 0)
        return -1;
    snprintf(f->path, sizeof f->path, "%s/t.db", f->dir);
    *state = f;
    return ad_walbuf_register() == SQLITE_OK ? 0 : -1;
}

static int teardown(void **state)
{
    struct fixture *f = *state;
    tmpdir_remove(f->dir);
    free(f);
    return 0;
}

static sqlite3 *open_db(const char *path, const char *vfs)
{
    sqlite3 *db = NULL;
    assert_int_equal(sqlite3_open_v2(path, &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, vfs), SQLITE_OK);
    assert_int_equal(sqlite3_exec(db,
                                  "PRAGMA journal_mode = WAL; PRAGMA synchronous = FULL;"
                                  "CREATE TABLE IF NOT EXISTS t (k INTEGER PRIMARY KEY, v BLOB NOT NULL);",
                                  NULL, NULL, NULL),
                     SQLITE_OK);
    return db;
}

static void exec(sqlite3 *db, const char *sql)
{
    char *msg = NULL;
    int rc = sqlite3_exec(db, sql, NULL, NULL, &msg);
    if (rc != SQLITE_OK)
        fail_msg("%s: %s", sql, msg != NULL ? msg : sqlite3_errstr(rc));
}

static sqlite3_int64 scalar(sqlite3 *db, const char *sql)
{
    sqlite3_stmt *st = NULL;
    assert_int_equal(sqlite3_prepare_v2(db, sql, -1, &st, NULL), SQLITE_OK);
    assert_int_equal(sqlite3_step(st), SQLITE_ROW);
    sqlite3_int64 v = sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
    return v;
}

/* Insert rows keys [from, from + n) of 3,000-byte blobs in one transaction; return its write calls. */
static long insert_rows(sqlite3 *db, int from, int n)
{
    char sql[256];
    snprintf(sql, sizeof sql,
             "WITH RECURSIVE r(k) AS (SELECT %d UNION ALL SELECT k + 1 FROM r WHERE k < %d)"
             " INSERT INTO t SELECT k, randomblob(3000) FROM r",
             from, from + n - 1);
    exec(db, "BEGIN");
    exec(db, sql);
    long before = write_calls();
    exec(db, "COMMIT");
    return write_calls() - before;
}

static void check_rows(sqlite3 *db, sqlite3_int64 want)
{
    assert_int_equal(scalar(db, "SELECT count(*) FROM t"), want);
    assert_int_equal(scalar(db, "SELECT count(*) FROM t WHERE length(v) = 3000"), want);
    sqlite3_stmt *st = NULL;
    assert_int_equal(sqlite3_prepare_v2(db, "PRAGMA integrity_check", -1, &st, NULL), SQLITE_OK);
    assert_int_equal(sqlite3_step(st), SQLITE_ROW);
    assert_string_equal((const char *)sqlite3_column_text(st, 0), "ok");
    sqlite3_finalize(st);
}

/* 20 rows of 3,000 bytes are 20 pages and more: SQLite alone writes them as 40 and more pwrite calls. */
static void test_commit_is_one_write(void **state)
{
    struct fixture *f = *state;
    sqlite3 *plain = open_db(f->path, NULL);
    insert_rows(plain, 1, 20); /* the first commit after the WAL is created also writes and syncs its header */
    long unbuffered = insert_rows(plain, 21, 20);
    sqlite3_close(plain);

    sqlite3 *db = open_db(f->path, AD_WALBUF_VFS);
    insert_rows(db, 41, 20);
    long buffered = insert_rows(db, 61, 20);
    assert_true(unbuffered >= 40);
    if (buffered != 1)
        fail_msg("a commit of 20 pages took %ld write calls (without walbuf: %ld), want 1", buffered, unbuffered);
    check_rows(db, 80);
    sqlite3_close(db);
}

/* Another connection sees every commit, and all of it survives closing and reopening. */
static void test_readers_and_reopen(void **state)
{
    struct fixture *f = *state;
    sqlite3 *db = open_db(f->path, AD_WALBUF_VFS);
    sqlite3 *reader = open_db(f->path, AD_WALBUF_VFS);
    for (int i = 0; i < 30; i++) {
        insert_rows(db, i * 10 + 1, 10);
        assert_int_equal(scalar(reader, "SELECT count(*) FROM t"), (i + 1) * 10);
    }
    /* A rolled-back savepoint rewrites pages inside the transaction; the commit must carry the final ones. */
    exec(db, "BEGIN; INSERT INTO t VALUES (1000, randomblob(3000)); SAVEPOINT s;"
             "DELETE FROM t WHERE k <= 100; ROLLBACK TO s; RELEASE s; COMMIT");
    check_rows(reader, 301);
    sqlite3_close(reader);
    sqlite3_close(db);
    db = open_db(f->path, AD_WALBUF_VFS);
    check_rows(db, 301);
    sqlite3_close(db);
}

/* A commit of about 3 MiB: more than the buffer holds and than one write may carry. */
static void test_large_commit(void **state)
{
    struct fixture *f = *state;
    sqlite3 *db = open_db(f->path, AD_WALBUF_VFS);
    /* Too big for the page cache, too: SQLite spills frames before the commit and reads them back. */
    exec(db, "PRAGMA cache_size = 10; BEGIN;"
             "WITH RECURSIVE r(k) AS (SELECT 1 UNION ALL SELECT k + 1 FROM r WHERE k < 1000)"
             " INSERT INTO t SELECT k, randomblob(3000) FROM r");
    check_rows(db, 1000);
    exec(db, "COMMIT");
    check_rows(db, 1000);
    exec(db, "PRAGMA wal_checkpoint(TRUNCATE)");
    sqlite3_close(db);
    db = open_db(f->path, NULL);
    check_rows(db, 1000);
    sqlite3_close(db);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_commit_is_one_write, setup, teardown),
        cmocka_unit_test_setup_teardown(test_readers_and_reopen, setup, teardown),
        cmocka_unit_test_setup_teardown(test_large_commit, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
