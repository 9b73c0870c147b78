/*
 * pg_feed.c - the listening side of the PostgreSQL store's feed (store.h feed_*): a connection of its own that
 * LISTENs on acceptd_changes and passes on the jobs other nodes announced. The announcing side is the commit's
 * (store_pg.c, send_announcements); this file only parses "<node>\n<id>\n<id>\t<tenant>\t<type>..." and skips
 * what this node announced itself.
 */
#include "store/store_pg_int.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct ad_feed {
    struct pg_store *s;
    PGconn *pg;
};

void ad_pg_feed_close(struct ad_feed *f)
{
    if (f == NULL)
        return;
    PQfinish(f->pg);
    free(f);
}

/* A connection of its own that LISTENs; it never runs anything else. */
struct ad_feed *ad_pg_feed_open(struct ad_store *s, char *err, size_t errlen)
{
    struct ad_feed *f = ad_calloc(1, sizeof(*f));
    f->s = (struct pg_store *)s;
    f->pg = ad_pg_dial(f->s, err, errlen);
    if (f->pg == NULL) {
        free(f);
        return NULL;
    }
    PGresult *r = PQexec(f->pg, "LISTEN " PG_CHANNEL);
    if (PQresultStatus(r) != PGRES_COMMAND_OK) {
        snprintf(err, errlen, "listen for changes: %s", PQerrorMessage(f->pg));
        PQclear(r);
        ad_pg_feed_close(f);
        return NULL;
    }
    PQclear(r);
    return f;
}

/* Pass on the ids of the announcements received so far that other nodes made. How many there were. */
static int feed_dispatch(struct ad_feed *f, void (*fn)(void *arg, const struct ad_feed_change *ch), void *arg)
{
    int got = 0;
    PGnotify *n;
    while ((n = PQnotifies(f->pg)) != NULL) {
        got++;
        char *s = n->extra;
        char *sp = strchr(s, '\n');
        size_t node_len = sp != NULL ? (size_t)(sp - s) : strlen(s);
        int ours = node_len == strlen(f->s->node) && memcmp(s, f->s->node, node_len) == 0;
        if (strcmp(n->relname, PG_CHANNEL) == 0 && !ours && sp != NULL) {
            /* The payload is ours to cut up: it is freed with the notification. */
            for (char *id = sp + 1; *id != '\0';) {
                char *end = strchr(id, '\n');
                if (end != NULL)
                    *end = '\0';
                struct ad_feed_change ch = {.job_id = id};
                char *tab = strchr(id, '\t');
                if (tab != NULL) {
                    *tab = '\0';
                    ch.tenant = tab + 1;
                    tab = strchr(ch.tenant, '\t');
                    if (tab != NULL) {
                        *tab = '\0';
                        ch.type = tab + 1;
                    } else {
                        ch.tenant = NULL;
                    }
                }
                if (*id != '\0')
                    fn(arg, &ch);
                if (end == NULL)
                    break;
                id = end + 1;
            }
        }
        PQfreemem(n);
    }
    return got;
}

int ad_pg_feed_wait(struct ad_feed *f, int timeout_ms, int wake_fd,
                    void (*fn)(void *arg, const struct ad_feed_change *ch), void *arg)
{
    if (PQstatus(f->pg) != CONNECTION_OK || PQsocket(f->pg) < 0)
        return -1;
    if (feed_dispatch(f, fn, arg) > 0)
        return 0;
    struct pollfd pfd[2] = {{.fd = PQsocket(f->pg), .events = POLLIN}, {.fd = wake_fd, .events = POLLIN}};
    int rc = poll(pfd, wake_fd >= 0 ? 2 : 1, timeout_ms);
    if (rc < 0)
        return errno == EINTR ? 0 : -1;
    if (pfd[0].revents != 0 && !PQconsumeInput(f->pg)) {
        ad_pg_log_failure("listen for changes", PQerrorMessage(f->pg), NULL);
        return -1;
    }
    feed_dispatch(f, fn, arg);
    return PQstatus(f->pg) == CONNECTION_OK ? 0 : -1;
}
