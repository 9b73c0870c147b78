/*
 * event.c - deciding and rendering the events of the job event log (event.h).
 */
#include "event.h"

#include <stdlib.h>
#include <string.h>

void ad_event_prev_take(struct ad_event_prev *p, const struct ad_job *j)
{
    p->status = j != NULL ? j->status : AD_STATUS__COUNT;
    p->progress = j != NULL ? j->progress : -1;
    p->message = j != NULL && j->message != NULL ? ad_strdup(j->message) : NULL;
}

void ad_event_prev_free(struct ad_event_prev *p)
{
    free(p->message);
    p->message = NULL;
}

static int same_text(const char *a, const char *b)
{
    return a == b || (a != NULL && b != NULL && strcmp(a, b) == 0);
}

enum ad_event_kind ad_event_kind_of(const struct ad_event_prev *prev, const struct ad_job *j)
{
    if (ad_status_terminal(j->status))
        return prev->status != j->status ? AD_EVK_DONE : AD_EVK_NONE;
    if (prev->status != j->status)
        return AD_EVK_STATUS;
    if (prev->progress != j->progress || !same_text(prev->message, j->message))
        return AD_EVK_PROGRESS;
    return AD_EVK_NONE;
}

const char *ad_event_name(enum ad_event_kind k)
{
    switch (k) {
    case AD_EVK_STATUS:
        return "status";
    case AD_EVK_PROGRESS:
        return "progress";
    case AD_EVK_DONE:
        return "done";
    default:
        return NULL;
    }
}

int ad_event_render_brief(const struct ad_job *j, struct ad_buf *b)
{
    char updated[40];
    ad_time_rfc3339(j->updated_at, updated, sizeof(updated));
    int rc = ad_buf_append(b, "{\"id\":", 6);
    rc |= ad_json_str(b, j->id);
    rc |= ad_buf_printf(b, ",\"status\":\"%s\",\"progress\":", ad_status_name(j->status));
    rc |= j->progress >= 0 ? ad_buf_printf(b, "%d", j->progress) : ad_buf_append(b, "null", 4);
    rc |= ad_buf_append(b, ",\"message\":", 11);
    rc |= ad_json_str(b, j->message);
    rc |= ad_buf_printf(b, ",\"lastUpdatedAt\":\"%s\"}", updated);
    return rc != 0 ? -1 : 0;
}
