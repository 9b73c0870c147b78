/*
 * walbuf.h - a SQLite VFS that writes each commit's WAL frames with one system call.
 *
 * SQLite writes a WAL frame as two writes (its 24-byte header, then the page), so a commit of 13 pages is 26
 * pwrite calls before its fsync. The "acceptd-walbuf" VFS wraps the default one: writes to a WAL file that
 * continue the previous one are gathered in memory and reach the file in one write when SQLite syncs, reads,
 * truncates, asks for its size or closes it, or when the next write does not continue them. Every other file
 * goes straight to the default VFS.
 *
 * It relies on synchronous=FULL (which sqlite_conn.c always sets): SQLite then syncs the WAL before it
 * publishes a commit in the wal-index, so no other connection can look for frames still held here.
 */
#ifndef AD_WALBUF_H
#define AD_WALBUF_H

#define AD_WALBUF_VFS "acceptd-walbuf"

/* Register the VFS (not as the default). Idempotent and thread-safe. Returns a SQLite result code. */
int ad_walbuf_register(void);

#endif
