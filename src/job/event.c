/*
 * event.c - deciding and rendering the events of the job event log (event.h).
 */
#include "job/event.h"
#include "common/json.h"

#include <stdlib.h>
#include <string.h>

void ad_event_prev_take(struct ad_event_prev *p, const struct ad_job *j)
{
    p->status = j != NULL ? j->status : AD_STATUS__COUNT;
    p->progress = j != NULL ? j->progress : -1;
    p->message = j != NULL ? ad_strdup_opt(j->message) : NULL;
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

/* j as it was when it entered status at the time at, before any worker reported progress or a message. */
static struct ad_job view_at(const struct ad_job *j, enum ad_status status, int64_t at)
{
    struct ad_job v = *j;
    v.status = status;
    v.progress = -1;
    v.message = NULL;
    v.updated_at = at;
    return v;
}

struct ad_job ad_event_created_view(const struct ad_job *j)
{
    return view_at(j, AD_QUEUED, j->created_at);
}

struct ad_job ad_event_started_view(const struct ad_job *j)
{
    return view_at(j, AD_RUNNING, j->started_at);
}

int ad_event_render_brief(const struct ad_job *j, struct ad_buf *b)
{
    AD_JSON_OPEN(b, "id");
    ad_json_str(b, j->id);
    AD_JSON_KEY(b, "status");
    ad_json_str(b, ad_status_name(j->status));
    AD_JSON_KEY(b, "progress");
    j->progress >= 0 ? ad_json_int(b, j->progress) : ad_json_null(b);
    AD_JSON_KEY(b, "message");
    ad_json_str(b, j->message);
    AD_JSON_KEY(b, "lastUpdatedAt");
    ad_json_time(b, j->updated_at);
    AD_BUF_LIT(b, "}");
    return ad_json_end(b);
}
