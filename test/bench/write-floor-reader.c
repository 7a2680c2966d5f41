/*
 * The write-floor bench's reader (write-floor.ts): opens N connections to 127.0.0.1:port and reads
 * and discards what arrives, on one epoll, until the sender closes them. C so that the client core
 * stays far from saturation and the sender's writes never back up into larger ones.
 * Usage: write-floor-reader <port> <connections>
 */
#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

int main(int argc, char **argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: %s <port> <connections>\n", argv[0]);
    return 2;
  }
  int port = atoi(argv[1]), n = atoi(argv[2]), open = 0;
  int ep = epoll_create1(0);
  for (int i = 0; i < n; i++) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((unsigned short)port)};
    inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
    if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof a) < 0) {
      perror("write-floor-reader: connect");
      return 1;
    }
    struct epoll_event e = {.events = EPOLLIN, .data.fd = fd};
    epoll_ctl(ep, EPOLL_CTL_ADD, fd, &e);
    open++;
  }
  static char buf[65536];
  struct epoll_event ev[256];
  while (open > 0) {
    int k = epoll_wait(ep, ev, 256, -1);
    for (int i = 0; i < k; i++) {
      if (read(ev[i].data.fd, buf, sizeof buf) <= 0) {
        close(ev[i].data.fd);
        open--;
      }
    }
  }
  return 0;
}
