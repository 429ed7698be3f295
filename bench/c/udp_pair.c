/* The reference pair for Horde's engine benchmark (bench/gso.sh): the plainest fast UDP sender
 * and receiver on Linux, no per-packet logs. The sender sends SIZE-byte datagrams to 127.0.0.1
 * as fast as sendmmsg takes them (64 per call), or with -g as GSO super-datagrams (UDP_SEGMENT,
 * 64 segments each, 64 of them per sendmmsg), for SECS seconds; it prints what it sent and how
 * long it took. The receiver reads with recvmmsg (with -g: UDP_GRO, counting the segments each
 * buffer holds) until nothing arrives for one second, and prints what it received.
 *
 *   udp_pair recv PORT [-g]
 *   udp_pair send PORT SIZE SECS [-g]
 * Output: one line "sent N SECONDS" or "received N BYTES". */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/udp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>
#ifndef UDP_SEGMENT
#define UDP_SEGMENT 103
#endif
#ifndef UDP_GRO
#define UDP_GRO 104
#endif
#define BATCH 64
#define SEGS 64

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + t.tv_nsec / 1e9;
}

static int recv_main(int port, int gro) {
  int s = socket(AF_INET, SOCK_DGRAM, 0), one = 1, buf = 64 << 20;
  setsockopt(s, SOL_SOCKET, SO_RCVBUFFORCE, &buf, sizeof buf);
  if (gro) setsockopt(s, SOL_UDP, UDP_GRO, &one, sizeof one);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port), .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  if (bind(s, (struct sockaddr *)&a, sizeof a)) { perror("bind"); return 1; }
  struct timeval tv = {1, 0};
  setsockopt(s, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  static char data[BATCH][65536];
  static char ctl[BATCH][64];
  struct iovec iov[BATCH];
  struct mmsghdr m[BATCH];
  unsigned long long n = 0, bytes = 0;
  int started = 0;
  for (;;) {
    for (int i = 0; i < BATCH; i++) {
      iov[i] = (struct iovec){data[i], sizeof data[i]};
      memset(&m[i], 0, sizeof m[i]);
      m[i].msg_hdr.msg_iov = &iov[i];
      m[i].msg_hdr.msg_iovlen = 1;
      m[i].msg_hdr.msg_control = ctl[i];
      m[i].msg_hdr.msg_controllen = sizeof ctl[i];
    }
    int r = recvmmsg(s, m, BATCH, started ? 0 : MSG_WAITFORONE, NULL);
    if (r <= 0) {
      if (started) break; /* a second of silence after traffic: the end */
      continue;
    }
    started = 1;
    for (int i = 0; i < r; i++) {
      unsigned len = m[i].msg_len, seg = 0;
      for (struct cmsghdr *c = CMSG_FIRSTHDR(&m[i].msg_hdr); c; c = CMSG_NXTHDR(&m[i].msg_hdr, c))
        if (c->cmsg_level == SOL_UDP && c->cmsg_type == UDP_GRO) seg = *(int *)CMSG_DATA(c);
      n += seg ? (len + seg - 1) / seg : 1;
      bytes += len;
    }
  }
  printf("received %llu %llu\n", n, bytes);
  return 0;
}

static int send_main(int port, int size, double secs, int gso) {
  int s = socket(AF_INET, SOCK_DGRAM, 0), buf = 64 << 20;
  setsockopt(s, SOL_SOCKET, SO_SNDBUFFORCE, &buf, sizeof buf);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port), .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  if (connect(s, (struct sockaddr *)&a, sizeof a)) { perror("connect"); return 1; }
  int per = gso ? (65000 / size < SEGS ? 65000 / size : SEGS) : 1;
  static char data[SEGS * 1500 > 65536 ? SEGS * 1500 : 65536];
  struct iovec iov[BATCH];
  struct mmsghdr m[BATCH];
  union { char b[CMSG_SPACE(sizeof(unsigned short))]; struct cmsghdr align; } ctl[BATCH];
  memset(m, 0, sizeof m);
  for (int i = 0; i < BATCH; i++) {
    iov[i] = (struct iovec){data, (size_t)size * per};
    m[i].msg_hdr.msg_iov = &iov[i];
    m[i].msg_hdr.msg_iovlen = 1;
    if (gso) {
      m[i].msg_hdr.msg_control = ctl[i].b;
      m[i].msg_hdr.msg_controllen = sizeof ctl[i].b;
      struct cmsghdr *c = CMSG_FIRSTHDR(&m[i].msg_hdr);
      c->cmsg_level = SOL_UDP;
      c->cmsg_type = UDP_SEGMENT;
      c->cmsg_len = CMSG_LEN(sizeof(unsigned short));
      *(unsigned short *)CMSG_DATA(c) = size;
    }
  }
  unsigned long long n = 0;
  double t0 = now(), t = t0;
  while (t - t0 < secs) {
    int r = sendmmsg(s, m, BATCH, 0);
    if (r > 0) n += (unsigned long long)r * per;
    t = now();
  }
  printf("sent %llu %.6f\n", n, t - t0);
  return 0;
}

int main(int argc, char **argv) {
  if (argc >= 3 && !strcmp(argv[1], "recv")) return recv_main(atoi(argv[2]), argc > 3 && !strcmp(argv[3], "-g"));
  if (argc >= 5 && !strcmp(argv[1], "send")) return send_main(atoi(argv[2]), atoi(argv[3]), atof(argv[4]), argc > 5 && !strcmp(argv[5], "-g"));
  fprintf(stderr, "usage: udp_pair recv PORT [-g] | udp_pair send PORT SIZE SECS [-g]\n");
  return 2;
}
