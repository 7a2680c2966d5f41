/*
 * The resume storm's clients (scale-resume.ts), in C: the storm asks one replica to serve 10,000
 * connections a page of 190 KB each, and the Node clients on the client core spent more CPU on
 * their side of that than the gateway did on its own (3.7-4.2 s per storm, the core at 86-100 %), so
 * they, not the gateway, set the figure. This one does what the Node clients' raw reader in
 * scale-sse-clients.ts does, with the kernel's work left as the main cost: open every connection at
 * once (non-blocking connect, one epoll), write the request by hand, read the status from the first
 * line, and look for the marker in the raw bytes (a close-delimited SSE stream and a Content-Length
 * JSON body are both the body as is on the wire). Every read lands in one shared buffer; a
 * connection keeps only the marker's length of carry across reads. A connection that has its marker
 * stays open, still read and discarded, as an EventSource's would.
 *
 * usage: storm-client HOST PORT COUNT TIMEOUT_MS MARKER REQUEST
 * It prints "ready", waits for a line on stdin, then opens the connections; when every connection
 * has its marker or failed it prints one JSON line {"last":ms,"failed":n,"errors":[[kind,n],...]}
 * (`last`: wall-clock ms with a fraction, the same clock as the bench's nowMs()), and holds its
 * connections until stdin closes.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

enum phase { CONNECTING, HEAD, BODY, CAUGHT, FAILED, CLOSED };

struct conn {
  int fd;
  enum phase phase;
  char *head; /* the response head until it is complete */
  size_t head_len;
  char carry[128]; /* the last marker-length - 1 bytes of the body so far */
  size_t carry_len;
};

#define MAX_KINDS 16
static char kinds[MAX_KINDS][200];
static int kind_counts[MAX_KINDS];
static int nkinds;
static int failed, caught, count;
static double last_ms;
static const char *marker;
static size_t marker_len;
static const char *request;
static size_t request_len;
static char buf[64 * 1024];

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static const char *phase_name(const struct conn *c) {
  return c->phase == BODY ? "after the response started" : "before the response";
}

/* Failures by kind, as the Node clients report them (error code and phase, or status and body). */
static void fail(struct conn *c, const char *kind) {
  char clean[200];
  size_t i;
  for (i = 0; kind[i] && i < sizeof clean - 1; i++)
    clean[i] = (kind[i] == '"' || kind[i] == '\\' || (unsigned char)kind[i] < 32) ? '?' : kind[i];
  clean[i] = 0;
  int k;
  for (k = 0; k < nkinds && strcmp(kinds[k], clean) != 0; k++)
    ;
  if (k == nkinds && nkinds < MAX_KINDS) strcpy(kinds[nkinds++], clean);
  if (k < MAX_KINDS) kind_counts[k]++;
  failed++;
  c->phase = FAILED;
  free(c->head);
  c->head = NULL;
  close(c->fd);
}

static void fail_errno(struct conn *c, int err) {
  char kind[200];
  snprintf(kind, sizeof kind, "%s %s", strerrorname_np(err) ? strerrorname_np(err) : "error", phase_name(c));
  fail(c, kind);
}

/* Body bytes: the marker in the seam with the previous read, or in this one. */
static void on_body(struct conn *c, const char *p, size_t n) {
  if (c->phase != BODY) return;
  if (c->carry_len) {
    char seam[256];
    size_t take = n < marker_len - 1 ? n : marker_len - 1;
    memcpy(seam, c->carry, c->carry_len);
    memcpy(seam + c->carry_len, p, take);
    if (memmem(seam, c->carry_len + take, marker, marker_len)) goto found;
  }
  if (memmem(p, n, marker, marker_len)) goto found;
  if (n >= marker_len - 1) {
    c->carry_len = marker_len - 1;
    memcpy(c->carry, p + n - c->carry_len, c->carry_len);
  } else {
    /* A short read: keep the tail of carry + this read. */
    char tmp[256];
    memcpy(tmp, c->carry, c->carry_len);
    memcpy(tmp + c->carry_len, p, n);
    size_t all = c->carry_len + n;
    size_t keep = all < marker_len - 1 ? all : marker_len - 1;
    memcpy(c->carry, tmp + all - keep, keep);
    c->carry_len = keep;
  }
  return;
found:
  c->phase = CAUGHT;
  caught++;
  last_ms = now_ms();
}

static void on_read(struct conn *c, const char *p, size_t n) {
  if (c->phase != HEAD) return on_body(c, p, n);
  c->head = realloc(c->head, c->head_len + n + 1);
  memcpy(c->head + c->head_len, p, n);
  c->head_len += n;
  c->head[c->head_len] = 0;
  char *end = memmem(c->head, c->head_len, "\r\n\r\n", 4);
  if (!end) return;
  if (c->head_len < 12 || memcmp(c->head + 9, "200", 3) != 0) {
    char kind[200];
    size_t body = (size_t)(end + 4 - c->head);
    snprintf(kind, sizeof kind, "HTTP %.3s %.160s", c->head_len >= 12 ? c->head + 9 : "???", c->head + body);
    return fail(c, kind);
  }
  char *head = c->head;
  size_t rest = c->head_len - (size_t)(end + 4 - head);
  c->phase = BODY;
  c->head = NULL;
  on_body(c, end + 4, rest);
  free(head);
}

int main(int argc, char **argv) {
  if (argc != 7) {
    fprintf(stderr, "usage: storm-client HOST PORT COUNT TIMEOUT_MS MARKER REQUEST\n");
    return 2;
  }
  struct sockaddr_in addr = {.sin_family = AF_INET, .sin_port = htons((uint16_t)atoi(argv[2]))};
  if (inet_pton(AF_INET, argv[1], &addr.sin_addr) != 1) return 2;
  count = atoi(argv[3]);
  double timeout_ms = atof(argv[4]);
  marker = argv[5];
  marker_len = strlen(marker);
  request = argv[6];
  request_len = strlen(request);
  if (marker_len < 1 || marker_len > 120) return 2;

  struct rlimit lim;
  getrlimit(RLIMIT_NOFILE, &lim);
  lim.rlim_cur = lim.rlim_max;
  setrlimit(RLIMIT_NOFILE, &lim);

  struct conn *conns = calloc((size_t)count, sizeof *conns);
  int ep = epoll_create1(0);

  printf("ready\n");
  fflush(stdout);
  char line[64];
  if (!fgets(line, sizeof line, stdin)) return 1;

  double deadline = now_ms() + timeout_ms;
  for (int i = 0; i < count; i++) {
    struct conn *c = &conns[i];
    c->fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
    if (c->fd < 0) {
      fail_errno(c, errno);
      continue;
    }
    if (connect(c->fd, (struct sockaddr *)&addr, sizeof addr) < 0 && errno != EINPROGRESS) {
      fail_errno(c, errno);
      continue;
    }
    struct epoll_event e = {.events = EPOLLOUT | EPOLLIN, .data.ptr = c};
    epoll_ctl(ep, EPOLL_CTL_ADD, c->fd, &e);
  }

  struct epoll_event events[256];
  int reported = 0;
  for (;;) {
    if (!reported && caught + failed >= count) {
      printf("{\"last\":%.3f,\"failed\":%d,\"errors\":[", last_ms, failed);
      for (int k = 0; k < nkinds; k++) printf("%s[\"%s\",%d]", k ? "," : "", kinds[k], kind_counts[k]);
      printf("]}\n");
      fflush(stdout);
      reported = 1;
      struct epoll_event in = {.events = EPOLLIN, .data.ptr = NULL};
      epoll_ctl(ep, EPOLL_CTL_ADD, 0, &in); /* stdin: its end (or any line) means stop */
    }
    if (!reported && now_ms() >= deadline) {
      char kind[200];
      for (int i = 0; i < count; i++) {
        struct conn *c = &conns[i];
        if (c->phase == CAUGHT || c->phase == FAILED) continue;
        snprintf(kind, sizeof kind, "not within %.0f ms %s", timeout_ms, phase_name(c));
        fail(c, kind);
      }
      continue;
    }
    int n = epoll_wait(ep, events, 256, reported ? -1 : 100);
    for (int i = 0; i < n; i++) {
      struct conn *c = events[i].data.ptr;
      if (!c) {
        /* stdin: its end (or anything more) means stop. */
        return 0;
      }
      if (c->phase == FAILED || c->phase == CLOSED) continue;
      if (c->phase == CONNECTING) {
        int err = 0;
        socklen_t len = sizeof err;
        getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &err, &len);
        if (err) {
          fail_errno(c, err);
          continue;
        }
        if (!(events[i].events & EPOLLOUT)) continue;
        if (write(c->fd, request, request_len) != (ssize_t)request_len) {
          fail_errno(c, errno ? errno : EIO);
          continue;
        }
        c->phase = HEAD;
        struct epoll_event e = {.events = EPOLLIN, .data.ptr = c};
        epoll_ctl(ep, EPOLL_CTL_MOD, c->fd, &e);
        continue;
      }
      for (;;) {
        ssize_t got = read(c->fd, buf, sizeof buf);
        if (got > 0) {
          on_read(c, buf, (size_t)got);
          if (c->phase == FAILED) break;
          if ((size_t)got < sizeof buf) break;
          continue;
        }
        if (got < 0 && (errno == EAGAIN || errno == EINTR)) break;
        if (c->phase == CAUGHT) {
          close(c->fd);
          c->phase = CLOSED; /* the server ended it after the marker (a poll answer): counted already */
          break;
        }
        if (got == 0) {
          char kind[200];
          snprintf(kind, sizeof kind, "closed %s", phase_name(c));
          fail(c, kind);
        } else
          fail_errno(c, errno);
        break;
      }
    }
  }
}
