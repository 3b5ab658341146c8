/*
 * floor: the kernel's floor for the benchmark, in C.
 *
 * One thread (pinned to a CPU with -cpu, or by taskset), one epoll loop:
 * accept4, recv, count the requests that arrived by their terminating empty
 * line (CRLFCRLF, tracked across reads), and one send of that many copies
 * of a canned /json response. No parsing, no routing, no Date refresh, no
 * runtime: what is left is the cost of the system calls and the TCP stack,
 * which no server on this kernel can go below. (A send the socket does not
 * take in full is cut short: wrk's responses fit the socket.)
 *
 * Build: gcc -O2 -o floor floor.c       (tests/bench/run.sh does)
 * Usage: floor -addr 127.0.0.1:8085 [-cpu N]
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

static const char response[] =
	"HTTP/1.1 200 OK\r\nServer: floor\r\nDate: Mon, 01 Jan 2024 00:00:00 GMT\r\n"
	"Content-Type: application/json\r\nContent-Length: 27\r\n\r\n"
	"{\"message\":\"Hello, World!\"}";
#define RESPONSE_LEN (sizeof(response) - 1)
#define MAX_BATCH 1024 /* responses per send; more go out in further sends */
#define MAX_FDS 65536

static unsigned char match[MAX_FDS]; /* per connection: CRLFCRLF bytes matched so far */
static char out[MAX_BATCH * RESPONSE_LEN];
static char in[64 << 10];

static void die(const char *what) {
	perror(what);
	exit(1);
}

/* count returns the CRLFCRLFs ending in p[0:n], continuing the match
 * carried in *m from the previous read. */
static int count(const char *p, ssize_t n, unsigned char *m) {
	static const char pat[4] = {'\r', '\n', '\r', '\n'};
	int c = 0;
	unsigned s = *m;
	for (ssize_t i = 0; i < n; i++) {
		char b = p[i];
		if (b == pat[s]) {
			if (++s == 4) {
				c++;
				s = 0;
			}
		} else {
			s = (b == '\r') ? 1 : 0;
		}
	}
	*m = (unsigned char)s;
	return c;
}

int main(int argc, char **argv) {
	const char *addr = "127.0.0.1:8085";
	int cpu = -1;
	for (int i = 1; i + 1 < argc; i += 2) {
		if (strcmp(argv[i], "-addr") == 0)
			addr = argv[i + 1];
		else if (strcmp(argv[i], "-cpu") == 0)
			cpu = atoi(argv[i + 1]);
		else {
			fprintf(stderr, "usage: floor -addr host:port [-cpu N]\n");
			return 2;
		}
	}
	if (cpu >= 0) {
		cpu_set_t set;
		CPU_ZERO(&set);
		CPU_SET(cpu, &set);
		if (sched_setaffinity(0, sizeof set, &set) < 0)
			die("sched_setaffinity");
	}
	char host[64];
	const char *colon = strrchr(addr, ':');
	if (!colon || (size_t)(colon - addr) >= sizeof host) {
		fprintf(stderr, "floor: bad address %s\n", addr);
		return 2;
	}
	memcpy(host, addr, colon - addr);
	host[colon - addr] = 0;
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(atoi(colon + 1))};
	if (inet_pton(AF_INET, host, &sa.sin_addr) != 1) {
		fprintf(stderr, "floor: bad address %s\n", addr);
		return 2;
	}
	for (int i = 0; i < MAX_BATCH; i++)
		memcpy(out + i * RESPONSE_LEN, response, RESPONSE_LEN);

	int lfd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (lfd < 0)
		die("socket");
	int one = 1;
	setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
	setsockopt(lfd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one); /* inherited */
	if (bind(lfd, (struct sockaddr *)&sa, sizeof sa) < 0)
		die("bind");
	if (listen(lfd, 4096) < 0)
		die("listen");
	int ep = epoll_create1(EPOLL_CLOEXEC);
	if (ep < 0)
		die("epoll_create1");
	struct epoll_event ev = {.events = EPOLLIN, .data.fd = lfd};
	if (epoll_ctl(ep, EPOLL_CTL_ADD, lfd, &ev) < 0)
		die("epoll_ctl");
	fprintf(stderr, "floor: ready on %s\n", addr);

	struct epoll_event events[512];
	for (;;) {
		int n = epoll_wait(ep, events, 512, -1);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			die("epoll_wait");
		}
		for (int i = 0; i < n; i++) {
			int fd = events[i].data.fd;
			if (fd == lfd) {
				for (;;) {
					int c = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
					if (c < 0)
						break;
					if (c >= MAX_FDS) {
						close(c);
						continue;
					}
					match[c] = 0;
					struct epoll_event cev = {.events = EPOLLIN, .data.fd = c};
					epoll_ctl(ep, EPOLL_CTL_ADD, c, &cev);
				}
				continue;
			}
			ssize_t r = recv(fd, in, sizeof in, 0);
			if (r < 0 && (errno == EAGAIN || errno == EINTR))
				continue;
			if (r <= 0) {
				close(fd);
				continue;
			}
			int k = count(in, r, &match[fd]);
			while (k > 0) {
				int b = k < MAX_BATCH ? k : MAX_BATCH;
				if (send(fd, out, (size_t)b * RESPONSE_LEN, MSG_NOSIGNAL) < 0)
					break;
				k -= b;
			}
		}
	}
}
