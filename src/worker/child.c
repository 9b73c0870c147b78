/*
 * child.c - the command of one leased job as a child process: started in its own process group with the
 * payload on stdin and the job in its environment, its stdout and stderr read without blocking and split into
 * progress lines, the result and a stderr tail, signalled on cancel, lost lease or shutdown, and reaped.
 *
 * A child is never waited for: the loop (worker.c) polls its pipes and learns of its end from SIGCHLD
 * through the self-pipe, then drains what it left. Nothing here talks to the server; what the command's end
 * means for the job is decided in worker.c.
 */
#include "worker/worker_int.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define RESULT_MAX ((size_t)16 * 1024 * 1024) /* stdout kept for the result */
#define MESSAGE_MAX 1024                      /* the server's limit on a heartbeat message */
#define READ_CHUNK 65536

void ad_worker_task_terminate(struct ad_task *t, enum ad_task_end why)
{
    if (why > t->why)
        t->why = why;
    if (t->pid > 0 && t->kill_at == 0) {
        kill(-t->pid, SIGTERM);
        t->kill_at = ad_mono_ms() + (int64_t)t->w->o.grace_seconds * 1000;
        if (t->kill_at == 0)
            t->kill_at = 1;
    }
}

static void on_out_text(void *ctx, const char *p, size_t n)
{
    struct ad_task *t = ctx;
    ad_buf_append(&t->result, p, n); /* past the cap it sets result.toobig, reported when the command ends */
}

static void echo_flush(struct ad_task *t)
{
    if (t->echo_len == 0)
        return;
    t->echo[t->echo_len] = '\0';
    char *s = ad_worker_clean_text(t->echo, t->echo_len);
    ad_info("job %s: %s", t->id, s);
    free(s);
    t->echo_len = 0;
}

static void on_err_text(void *ctx, const char *p, size_t n)
{
    struct ad_task *t = ctx;
    if (n >= AD_WORKER_TAIL_MAX) {
        memcpy(t->tail, p + n - AD_WORKER_TAIL_MAX, AD_WORKER_TAIL_MAX);
        t->tail_len = AD_WORKER_TAIL_MAX;
    } else {
        size_t keep = t->tail_len + n > AD_WORKER_TAIL_MAX ? AD_WORKER_TAIL_MAX - n : t->tail_len;
        memmove(t->tail, t->tail + t->tail_len - keep, keep);
        memcpy(t->tail + keep, p, n);
        t->tail_len = keep + n;
    }
    /* Echo whole lines to the log; an overlong line is logged in pieces. */
    for (size_t i = 0; i < n; i++) {
        if (p[i] == '\n') {
            echo_flush(t);
            continue;
        }
        t->echo[t->echo_len++] = p[i];
        if (t->echo_len == AD_WORKER_ECHO_MAX)
            echo_flush(t);
    }
}

static void on_progress(void *ctx, const char *line, size_t n)
{
    struct ad_task *t = ctx;
    int pct;
    const char *msg;
    size_t msglen;
    if (ad_worker_parse_progress(line, n, &pct, &msg, &msglen) != 0) {
        char *s = ad_worker_clean_text(line, n < 200 ? n : 200);
        ad_warn("job %s: ignored a progress line without a 0-100 number: %s", t->id, s);
        free(s);
        return;
    }
    t->progress = pct;
    free(t->message);
    t->message = NULL;
    if (msg != NULL) {
        t->message = ad_worker_clean_cut(msg, msglen, MESSAGE_MAX);
    }
    t->hb_dirty = 1;
}

void ad_worker_close_fd(int *fd)
{
    if (*fd >= 0)
        close(*fd);
    *fd = -1;
}

/* Read what a pipe has now. Returns after EAGAIN, EOF (then the fd is closed) or a bounded amount. */
static void pipe_read(int *fd, struct ad_worker_lines *l)
{
    char buf[READ_CHUNK];
    for (int k = 0; *fd >= 0 && k < 16; k++) {
        ssize_t n = read(*fd, buf, sizeof(buf));
        if (n > 0) {
            ad_worker_lines_feed(l, buf, (size_t)n);
            continue;
        }
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            return;
        ad_worker_lines_finish(l); /* EOF or a read error: the stream is over */
        ad_worker_close_fd(fd);
    }
}

void ad_worker_task_io(struct ad_task *t)
{
    while (t->fd_in >= 0 && t->payload_off < t->payload_len) {
        ssize_t n = write(t->fd_in, t->payload + t->payload_off, t->payload_len - t->payload_off);
        if (n > 0) {
            t->payload_off += (size_t)n;
        } else if (n < 0 && errno == EINTR) {
            continue;
        } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            break;
        } else {
            ad_worker_close_fd(&t->fd_in); /* EPIPE: the command does not read its stdin, which is its business */
        }
    }
    if (t->fd_in >= 0 && t->payload_off == t->payload_len)
        ad_worker_close_fd(&t->fd_in);
    pipe_read(&t->fd_out, &t->out_lines);
    pipe_read(&t->fd_err, &t->err_lines);
}

void ad_worker_task_drain(struct ad_task *t)
{
    /* What it wrote is in the pipes; anything later comes from processes it left behind. */
    ad_worker_task_io(t);
    ad_worker_close_fd(&t->fd_in);
    if (t->fd_out >= 0) {
        ad_worker_lines_finish(&t->out_lines);
        ad_worker_close_fd(&t->fd_out);
    }
    if (t->fd_err >= 0) {
        ad_worker_lines_finish(&t->err_lines);
        ad_worker_close_fd(&t->fd_err);
    }
    echo_flush(t);
}

void ad_worker_task_output_init(struct ad_task *t)
{
    ad_buf_init(&t->result, RESULT_MAX);
    ad_worker_lines_init(&t->out_lines, on_out_text, on_progress, t);
    ad_worker_lines_init(&t->err_lines, on_err_text, on_progress, t);
}

void ad_worker_task_output_free(struct ad_task *t)
{
    ad_worker_close_fd(&t->fd_in);
    ad_worker_close_fd(&t->fd_out);
    ad_worker_close_fd(&t->fd_err);
    ad_worker_lines_free(&t->out_lines);
    ad_worker_lines_free(&t->err_lines);
    ad_buf_free(&t->result);
}

static int set_nonblock(int fd)
{
    int fl = fcntl(fd, F_GETFL);
    return fl < 0 ? -1 : fcntl(fd, F_SETFL, fl | O_NONBLOCK);
}

/* Start the command for t. Returns 0, or -1 with errno set (nothing left open). */
int ad_worker_task_spawn(struct ad_worker *w, struct ad_task *t)
{
    int in[2] = {-1, -1}, out[2] = {-1, -1}, err[2] = {-1, -1};
    if (pipe2(in, O_CLOEXEC) != 0 || pipe2(out, O_CLOEXEC) != 0 || pipe2(err, O_CLOEXEC) != 0) {
        int e = errno;
        int fds[] = {in[0], in[1], out[0], out[1], err[0], err[1]};
        for (size_t i = 0; i < 6; i++)
            if (fds[i] >= 0)
                close(fds[i]);
        errno = e;
        return -1;
    }
    char **envp = ad_calloc(w->nenv + 8, sizeof(char *));
    memcpy(envp, w->envp, w->nenv * sizeof(char *));
    envp[w->nenv] = ad_asprintf("ACCEPTD_JOB_ID=%s", t->id);
    envp[w->nenv + 1] = ad_asprintf("ACCEPTD_JOB_TYPE=%s", t->type);
    envp[w->nenv + 2] = ad_asprintf("ACCEPTD_JOB_ATTEMPT=%d", t->attempt);
    envp[w->nenv + 3] = ad_asprintf("ACCEPTD_URL=%s", w->client.base);
    envp[w->nenv + 4] = ad_asprintf("ACCEPTD_RESULT_FILE=%s/" AD_WORKER_RESULT_NAME, t->dir);
    /* The lease's trace context (docs/tracing.md), as OpenTelemetry's environment carriers name it. */
    size_t nenv = w->nenv + 5;
    if (t->traceparent != NULL)
        envp[nenv++] = ad_asprintf("TRACEPARENT=%s", t->traceparent);
    if (t->traceparent != NULL && t->tracestate != NULL)
        envp[nenv++] = ad_asprintf("TRACESTATE=%s", t->tracestate);

    posix_spawn_file_actions_t fa;
    posix_spawnattr_t at;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, in[0], 0);
    posix_spawn_file_actions_adddup2(&fa, out[1], 1);
    posix_spawn_file_actions_adddup2(&fa, err[1], 2);
    posix_spawn_file_actions_addclosefrom_np(&fa, 3); /* curl's sockets and other tasks' pipes */
    posix_spawnattr_init(&at);
    sigset_t dflt, none;
    sigemptyset(&dflt);
    sigaddset(&dflt, SIGPIPE);
    sigaddset(&dflt, SIGTERM);
    sigaddset(&dflt, SIGINT);
    sigaddset(&dflt, SIGCHLD);
    sigemptyset(&none);
    posix_spawnattr_setsigdefault(&at, &dflt);
    posix_spawnattr_setsigmask(&at, &none);
    posix_spawnattr_setpgroup(&at, 0);
    posix_spawnattr_setflags(&at, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK);
    pid_t pid;
    int rc = posix_spawn(&pid, w->exe, &fa, &at, w->o.command, envp);
    posix_spawn_file_actions_destroy(&fa);
    posix_spawnattr_destroy(&at);
    for (size_t i = w->nenv; i < nenv; i++)
        free(envp[i]);
    free(envp);
    close(in[0]);
    close(out[1]);
    close(err[1]);
    if (rc != 0) {
        close(in[1]);
        close(out[0]);
        close(err[0]);
        errno = rc;
        return -1;
    }
    t->pid = pid;
    t->fd_in = in[1];
    t->fd_out = out[0];
    t->fd_err = err[0];
    set_nonblock(t->fd_in);
    set_nonblock(t->fd_out);
    set_nonblock(t->fd_err);
    return 0;
}

char *ad_worker_exit_detail(const struct ad_task *t, const char *prefix)
{
    char how[96];
    if (WIFEXITED(t->wstatus))
        snprintf(how, sizeof(how), "exit status %d", WEXITSTATUS(t->wstatus));
    else if (WIFSIGNALED(t->wstatus))
        snprintf(how, sizeof(how), "killed by signal %d (%s)", WTERMSIG(t->wstatus), strsignal(WTERMSIG(t->wstatus)));
    else
        snprintf(how, sizeof(how), "ended with wait status %d", t->wstatus);
    size_t n = t->tail_len;
    while (n > 0 && (t->tail[n - 1] == '\n' || t->tail[n - 1] == '\r' || t->tail[n - 1] == ' '))
        n--;
    char *tail = ad_worker_clean_text(t->tail, n);
    char *d = ad_asprintf("%s%s%s%s", prefix, how, tail[0] != '\0' ? ": " : "", tail);
    free(tail);
    return d;
}

void ad_worker_reap(struct ad_worker *w)
{
    for (;;) {
        int st;
        pid_t pid = waitpid(-1, &st, WNOHANG);
        if (pid <= 0)
            return;
        for (struct ad_task *t = w->tasks; t != NULL; t = t->next) {
            if (t->pid == pid) {
                t->pid = 0;
                t->wstatus = st;
            }
        }
    }
}

char *ad_worker_resolve_command(const char *cmd)
{
    struct stat sb;
    if (strchr(cmd, '/') != NULL)
        return access(cmd, X_OK) == 0 && stat(cmd, &sb) == 0 && S_ISREG(sb.st_mode) ? ad_strdup(cmd) : NULL;
    const char *path = getenv("PATH");
    if (path == NULL || path[0] == '\0')
        path = "/usr/local/bin:/usr/bin:/bin";
    for (const char *p = path;;) {
        const char *end = strchr(p, ':');
        size_t len = end != NULL ? (size_t)(end - p) : strlen(p);
        char *cand = len == 0 ? ad_asprintf("./%s", cmd) : ad_asprintf("%.*s/%s", (int)len, p, cmd);
        if (access(cand, X_OK) == 0 && stat(cand, &sb) == 0 && S_ISREG(sb.st_mode))
            return cand;
        free(cand);
        if (end == NULL)
            return NULL;
        p = end + 1;
    }
}

extern char **environ;

static int env_ours(const char *e)
{
    static const char *const names[] = {
        "ACCEPTD_KEY=",         "ACCEPTD_URL=",         "ACCEPTD_JOB_ID=", "ACCEPTD_JOB_TYPE=",
        "ACCEPTD_JOB_ATTEMPT=", "ACCEPTD_RESULT_FILE=", "TRACEPARENT=",    "TRACESTATE="};
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
        if (strncmp(e, names[i], strlen(names[i])) == 0)
            return 1;
    return 0;
}

void ad_worker_std_fds_open(void)
{
    for (int fd = 0; fd < 3; fd++) {
        if (fcntl(fd, F_GETFD) < 0) {
            int n = open("/dev/null", O_RDWR);
            if (n >= 0 && n != fd) {
                dup2(n, fd);
                close(n);
            }
        }
    }
}

void ad_worker_env_init(struct ad_worker *w)
{
    size_t n = 0;
    while (environ[n] != NULL)
        n++;
    w->envp = ad_calloc(n + 1, sizeof(char *));
    for (size_t i = 0; i < n; i++)
        if (!env_ours(environ[i]))
            w->envp[w->nenv++] = environ[i];
}
