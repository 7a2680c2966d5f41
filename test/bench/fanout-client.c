/*
 * The fan-out benches' subscribers (fanout.ts, fanout-surfaces.ts, overload.ts) in C: what
 * fanout-clients.ts does, for a fraction of the client core. At 1,000 subscribers × 100 events/s the
 * Node clients ran their core at 95 % and more, so the servers' writes backed up and batched, and
 * that row was flagged instead of judged, nchan's anchor included (nginx read late shows a lower
 * cost per event than read promptly). Driven by fanout-client-proc.ts, which builds this with the
 * machine's C compiler and speaks to it in lines:
 *
 *   stdin:  start FROM TO URL...   one subscriber per URL, opened 50 at a time (each batch's
 *                                  responses read before the next, as the Node clients do)
 *           start-keyed FROM TO URL...   the same, each connection carrying several streams
 *           report
 *   stdout: {"type":"ready"} | {"type":"error","error":"..."} |
 *           {"type":"report","delivered":N,"hist":[...],"ended":N,"seen":N,"repeated":N,"bytes":N}
 *
 * Stdin's end (or SIGTERM) stops it. Each subscriber: a non-blocking socket, the request written by
 * hand, the status from the head, chunked framing undone when the head says so, and the body scanned
 * as it streams for `@seq@publish-ms@` markers (fanout-event.ts). A seq counts once per connection,
 * the first time it is seen (a BeeOS envelope repeats every earlier chunk's marker); one in the
 * measured window [FROM, TO] is delivered, and its publish → receipt latency goes into the same
 * log-bucketed histogram (1 % buckets from 0.01 ms). Receipt is the time of the read that completed
 * the marker (the Node clients take the read that completed its event: the same read in practice).
 *
 * `start-keyed` (the follow bench, fanout-follow.ts): a connection carries several streams, each
 * event's data line opening with the stream's key, `data: {"stream":"KEY"` (`GET /v1/follow`'s
 * framing, and the body the bench POSTs to nchan's multiplexed channels), so a seq counts once per
 * stream of a connection, and a seq at or below its stream's highest is counted as `repeated` (a
 * redelivery or a reordering: the follow contract allows neither). A line without a key is stream
 * "" (one stream per connection). `bytes` is the body read, chunked framing undone, in either mode.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <math.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define BUCKETS 1400
#define BATCH 50
#define HEAD_TIMEOUT_MS 20000.0
#define MAX_KEYS 4096
#define KEY_BYTES 256

/* What opens a keyed event's data line: the stream key follows, up to its closing quote. */
static const char KEY_PREFIX[] = "data: {\"stream\":\"";
#define KEY_PREFIX_LEN ((int)sizeof KEY_PREFIX - 1)

enum phase { CONNECTING, HEAD, BODY, DONE };

struct sub {
  int fd;
  enum phase phase;
  const char *url;
  char *head;
  size_t head_len;
  /* chunked framing: a size line (`size` so far), `left` data bytes, or the CRLF after them */
  int chunked;
  size_t left, size;
  int skip_to_lf, crlf_after;
  /* marker scan: 0 outside, 1 in seq digits, 2 in publish-time digits */
  int mstate, mdigits;
  double seq, ts, scale;
  double max_seq;
  /* keyed: where the current line is in KEY_PREFIX (-1: not a key line), the key read so far, the
     current line's stream (an index into keys[]) and each stream's highest seq */
  int line_pos, key_len, cur;
  char key[KEY_BYTES];
  struct stream_max {
    int key;
    double max;
  } *maxes;
  int nmaxes;
};

static long hist[BUCKETS];
static long delivered, seen, ended, repeated, bytes_read;
static int keyed;
/* Stream keys seen, interned; 0 is "" (a line without a key). */
static char *keys[MAX_KEYS] = {""};
static int nkeys = 1;
static double win_from = 1, win_to = 0;
static struct sub *subs;
static int nsubs, opened, pending_batch;
static double batch_deadline;
static int ep;
static char buf[64 * 1024];

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static int bucket_of(double ms) {
  double b = floor(log((ms > 0.01 ? ms : 0.01) / 0.01) / log(1.01));
  return b < 0 ? 0 : b > BUCKETS - 1 ? BUCKETS - 1 : (int)b;
}

static void reply_error(const char *fmt, const char *a, const char *b) {
  char msg[512];
  snprintf(msg, sizeof msg, fmt, a, b);
  for (char *p = msg; *p; p++)
    if (*p == '"' || *p == '\\' || (unsigned char)*p < 32) *p = '?';
  printf("{\"type\":\"error\",\"error\":\"%s\"}\n", msg);
  fflush(stdout);
}

static int intern(const char *key, int len) {
  for (int i = 1; i < nkeys; i++)
    if ((int)strlen(keys[i]) == len && memcmp(keys[i], key, (size_t)len) == 0) return i;
  if (nkeys == MAX_KEYS) return 0; /* past the table: counted as one stream */
  keys[nkeys] = strndup(key, (size_t)len);
  return nkeys++;
}

/* The highest seq seen on the marker's stream of this connection (one per connection unkeyed). */
static double *max_slot(struct sub *s) {
  if (!keyed) return &s->max_seq;
  for (int i = 0; i < s->nmaxes; i++)
    if (s->maxes[i].key == s->cur) return &s->maxes[i].max;
  s->maxes = realloc(s->maxes, sizeof *s->maxes * (size_t)(s->nmaxes + 1));
  s->maxes[s->nmaxes].key = s->cur;
  s->maxes[s->nmaxes].max = 0;
  return &s->maxes[s->nmaxes++].max;
}

static void marker_byte(struct sub *s, unsigned char c, double t) {
  int digit = c >= '0' && c <= '9';
  switch (s->mstate) {
    case 1:
      if (digit) {
        s->seq = s->seq * 10 + (c - '0');
        s->mdigits++;
        return;
      }
      if (c == '@' && s->mdigits > 0) {
        s->mstate = 2;
        s->ts = 0;
        s->scale = 0;
        s->mdigits = 0;
        return;
      }
      break;
    case 2:
      if (digit) {
        s->ts = s->ts * 10 + (c - '0');
        if (s->scale > 0) s->scale *= 10;
        s->mdigits++;
        return;
      }
      if (c == '.' && s->scale == 0) {
        s->scale = 1;
        return;
      }
      if (c == '@' && s->mdigits > 0) {
        double published = s->scale > 0 ? s->ts / s->scale : s->ts;
        s->mstate = 0;
        double *max = max_slot(s);
        if (keyed && s->seq <= *max) repeated++;
        if (s->seq > *max) {
          *max = s->seq;
          seen++;
          if (s->seq >= win_from && s->seq <= win_to) {
            delivered++;
            hist[bucket_of(t - published)]++;
          }
        }
        return;
      }
      break;
  }
  /* Outside a marker, or a marker broken off: an '@' starts the next one. */
  s->mstate = c == '@' ? 1 : 0;
  s->seq = 0;
  s->mdigits = 0;
}

/* Keyed: every byte, for the line starts (a key line names the stream of its markers). */
static void keyed_bytes(struct sub *s, const unsigned char *p, size_t n, double t) {
  for (size_t i = 0; i < n; i++) {
    unsigned char c = p[i];
    if (c == '\n') {
      s->line_pos = 0;
      s->key_len = 0;
      s->cur = 0;
      s->mstate = 0;
      continue;
    }
    if (s->line_pos >= 0) {
      if (s->line_pos < KEY_PREFIX_LEN) {
        s->line_pos = c == (unsigned char)KEY_PREFIX[s->line_pos] ? s->line_pos + 1 : -1;
        if (s->line_pos >= 0) continue;
      } else if (c == '"') {
        s->cur = intern(s->key, s->key_len);
        s->line_pos = -1;
        continue;
      } else {
        if (s->key_len < KEY_BYTES - 1) s->key[s->key_len++] = (char)c;
        continue;
      }
    }
    if (s->mstate != 0 || c == '@') marker_byte(s, c, t);
  }
}

static void body_bytes(struct sub *s, const unsigned char *p, size_t n, double t) {
  bytes_read += (long)n;
  if (keyed) return keyed_bytes(s, p, n, t);
  const unsigned char *end = p + n;
  while (p < end) {
    if (s->mstate == 0) {
      /* Outside a marker only an '@' matters: skip to the next one. */
      p = memchr(p, '@', (size_t)(end - p));
      if (!p) return;
    }
    marker_byte(s, *p++, t);
  }
}

static int hex_digit(unsigned char c) {
  return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
}

static void end_sub(struct sub *s) {
  if (s->phase == DONE) return;
  if (s->phase == BODY) ended++;
  s->phase = DONE;
  close(s->fd);
}

/* Body bytes as read: framing undone when chunked (the last chunk ends the response). */
static void on_body(struct sub *s, const unsigned char *p, size_t n, double t) {
  if (!s->chunked) return body_bytes(s, p, n, t);
  size_t i = 0;
  while (i < n && s->phase == BODY) {
    if (s->crlf_after > 0) {
      i++;
      s->crlf_after--;
    } else if (s->left > 0) {
      size_t take = n - i < s->left ? n - i : s->left;
      body_bytes(s, p + i, take, t);
      s->left -= take;
      i += take;
      if (s->left == 0) s->crlf_after = 2;
    } else {
      unsigned char c = p[i++];
      if (c == '\n') {
        if (s->size == 0) return end_sub(s);
        s->left = s->size;
        s->size = 0;
        s->skip_to_lf = 0;
      } else if (!s->skip_to_lf && c != '\r') {
        int d = hex_digit(c);
        if (d < 0) s->skip_to_lf = 1;
        else s->size = s->size * 16 + (size_t)d;
      }
    }
  }
}

/* The head: its status decides (anything but 200 fails the start); then the body as it comes. */
static int on_head(struct sub *s, const unsigned char *p, size_t n, double t) {
  s->head = realloc(s->head, s->head_len + n + 1);
  memcpy(s->head + s->head_len, p, n);
  s->head_len += n;
  s->head[s->head_len] = 0;
  char *end = memmem(s->head, s->head_len, "\r\n\r\n", 4);
  if (!end) return 0;
  if (s->head_len < 12 || memcmp(s->head, "HTTP/1.", 7) != 0 || memcmp(s->head + 9, "200", 3) != 0) {
    char status[4] = "0";
    if (s->head_len >= 12) memcpy(status, s->head + 9, 3);
    reply_error("%s: HTTP %s", s->url, status);
    return -1;
  }
  *end = 0;
  s->chunked = strcasestr(s->head, "\r\ntransfer-encoding: chunked") != NULL ||
               strcasestr(s->head, "\r\ntransfer-encoding:chunked") != NULL;
  size_t at = (size_t)(end + 4 - s->head);
  s->phase = BODY;
  pending_batch--;
  on_body(s, (unsigned char *)s->head + at, s->head_len - at, t);
  free(s->head);
  s->head = NULL;
  return 0;
}

static int open_sub(struct sub *s) {
  char host[256];
  int port;
  if (sscanf(s->url, "http://%255[^:/]:%d", host, &port) != 2) {
    reply_error("%s: %s", s->url, "not an http://host:port URL");
    return -1;
  }
  struct sockaddr_in addr = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
  if (inet_pton(AF_INET, host, &addr.sin_addr) != 1) {
    reply_error("%s: %s", s->url, "not a numeric IPv4 host");
    return -1;
  }
  s->fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
  int one = 1;
  setsockopt(s->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  if (connect(s->fd, (struct sockaddr *)&addr, sizeof addr) < 0 && errno != EINPROGRESS) {
    reply_error("%s: %s", s->url, strerrorname_np(errno));
    return -1;
  }
  struct epoll_event e = {.events = EPOLLOUT | EPOLLIN, .data.ptr = s};
  epoll_ctl(ep, EPOLL_CTL_ADD, s->fd, &e);
  return 0;
}

/* The next batch of subscribers, or "ready" once every one has its response. */
static int open_batch(void) {
  if (opened == nsubs) {
    printf("{\"type\":\"ready\"}\n");
    fflush(stdout);
    return 0;
  }
  int n = nsubs - opened < BATCH ? nsubs - opened : BATCH;
  pending_batch = n;
  batch_deadline = now_ms() + HEAD_TIMEOUT_MS;
  for (int i = 0; i < n; i++)
    if (open_sub(&subs[opened++]) < 0) return -1;
  return 0;
}

static void on_event(struct sub *s, unsigned events) {
  if (s->phase == DONE) return;
  if (s->phase == CONNECTING) {
    int err = 0;
    socklen_t len = sizeof err;
    getsockopt(s->fd, SOL_SOCKET, SO_ERROR, &err, &len);
    if (err) {
      reply_error("%s: %s", s->url, strerrorname_np(err));
      s->phase = DONE;
      close(s->fd);
      pending_batch = -1; /* the start failed: no more batches */
      return;
    }
    if (!(events & EPOLLOUT)) return;
    const char *path = strchr(s->url + 7, '/');
    const char *host_end = path ? path : s->url + strlen(s->url);
    char req[4096];
    int len2 = snprintf(req, sizeof req,
                        "GET %s HTTP/1.1\r\nHost: %.*s\r\nAccept: text/event-stream\r\nConnection: keep-alive\r\n\r\n",
                        path ? path : "/", (int)(host_end - (s->url + 7)), s->url + 7);
    if (write(s->fd, req, (size_t)len2) != len2) {
      reply_error("%s: %s", s->url, "request not written at once");
      pending_batch = -1;
      return;
    }
    s->phase = HEAD;
    struct epoll_event e = {.events = EPOLLIN, .data.ptr = s};
    epoll_ctl(ep, EPOLL_CTL_MOD, s->fd, &e);
    return;
  }
  for (;;) {
    ssize_t got = read(s->fd, buf, sizeof buf);
    if (got > 0) {
      double t = now_ms();
      if (s->phase == HEAD) {
        if (on_head(s, (unsigned char *)buf, (size_t)got, t) < 0) {
          pending_batch = -1;
          return;
        }
      } else
        on_body(s, (unsigned char *)buf, (size_t)got, t);
      if (s->phase == DONE || (size_t)got < sizeof buf) return;
      continue;
    }
    if (got < 0 && (errno == EAGAIN || errno == EINTR)) return;
    if (s->phase == HEAD) {
      reply_error("%s: %s", s->url, got == 0 ? "closed before the response" : strerrorname_np(errno));
      pending_batch = -1;
    }
    return end_sub(s);
  }
}

static void report(void) {
  printf("{\"type\":\"report\",\"delivered\":%ld,\"ended\":%ld,\"seen\":%ld,\"repeated\":%ld,\"bytes\":%ld,\"hist\":[",
         delivered, ended, seen, repeated, bytes_read);
  for (int i = 0; i < BUCKETS; i++) printf(i ? ",%ld" : "%ld", hist[i]);
  printf("]}\n");
  fflush(stdout);
}

/* One command line from stdin; 0 to go on, -1 to stop. */
static int command(char *line) {
  if (strncmp(line, "report", 6) == 0) {
    report();
    return 0;
  }
  if (strncmp(line, "start-keyed ", 12) == 0) keyed = 1;
  else if (strncmp(line, "start ", 6) != 0) return -1;
  char *save = NULL;
  strtok_r(line, " \n", &save);
  win_from = atof(strtok_r(NULL, " \n", &save));
  win_to = atof(strtok_r(NULL, " \n", &save));
  int cap = 1024;
  subs = calloc((size_t)cap, sizeof *subs);
  for (char *url; (url = strtok_r(NULL, " \n", &save));) {
    if (nsubs == cap) subs = realloc(subs, sizeof *subs * (size_t)(cap *= 2));
    memset(&subs[nsubs], 0, sizeof *subs);
    subs[nsubs++].url = strdup(url);
  }
  if (open_batch() < 0) pending_batch = -1;
  return 0;
}

int main(void) {
  struct rlimit lim;
  getrlimit(RLIMIT_NOFILE, &lim);
  lim.rlim_cur = lim.rlim_max;
  setrlimit(RLIMIT_NOFILE, &lim);
  ep = epoll_create1(0);
  struct epoll_event in = {.events = EPOLLIN, .data.ptr = NULL};
  epoll_ctl(ep, EPOLL_CTL_ADD, 0, &in);
  static char line[1 << 22];
  size_t line_len = 0;
  struct epoll_event events[256];
  for (;;) {
    int n = epoll_wait(ep, events, 256, pending_batch > 0 ? 100 : -1);
    for (int i = 0; i < n; i++) {
      if (events[i].data.ptr) {
        on_event(events[i].data.ptr, events[i].events);
        continue;
      }
      ssize_t got = read(0, line + line_len, sizeof line - 1 - line_len);
      if (got <= 0) return 0;
      line_len += (size_t)got;
      char *nl;
      while ((nl = memchr(line, '\n', line_len))) {
        *nl = 0;
        if (command(line) < 0) return 0;
        size_t used = (size_t)(nl + 1 - line);
        memmove(line, nl + 1, line_len - used);
        line_len -= used;
      }
    }
    if (pending_batch == 0) {
      pending_batch = -2; /* between batches */
      if (open_batch() < 0) pending_batch = -1;
    } else if (pending_batch > 0 && now_ms() > batch_deadline) {
      reply_error("%s: %s", subs[opened - 1].url, "no response within 20 s");
      pending_batch = -1;
    }
  }
}
