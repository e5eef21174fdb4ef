/* The floor of any process between a client and a stdio server: bytes
 * copied both ways by two blocking threads, nothing read or changed.
 *
 *     gcc -O2 -pthread -o c_relay benchmarks/servers/c_relay.c
 *     ./c_relay COMMAND [ARGS...]
 *
 * bench_stdio_neutral.py compiles it itself for its `c-relay` row. */
#include <pthread.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

struct pipe_pair { int src, dst; };

static void *copy(void *arg) {
    struct pipe_pair *p = arg;
    char buf[1 << 16];
    for (;;) {
        ssize_t n = read(p->src, buf, sizeof buf);
        if (n <= 0) break;
        for (ssize_t off = 0; off < n;) {
            ssize_t w = write(p->dst, buf + off, (size_t)(n - off));
            if (w <= 0) return NULL;
            off += w;
        }
    }
    close(p->dst);
    return NULL;
}

int main(int argc, char **argv) {
    int to_child[2], from_child[2];
    if (argc < 2 || pipe(to_child) || pipe(from_child)) return 2;
    signal(SIGPIPE, SIG_IGN);
    pid_t pid = fork();
    if (pid < 0) return 2;
    if (pid == 0) {
        dup2(to_child[0], 0);
        dup2(from_child[1], 1);
        close(to_child[0]); close(to_child[1]); close(from_child[0]); close(from_child[1]);
        execvp(argv[1], argv + 1);
        _exit(127);
    }
    close(to_child[0]);
    close(from_child[1]);
    struct pipe_pair up = {0, to_child[1]}, down = {from_child[0], 1};
    pthread_t t_up, t_down;
    pthread_create(&t_up, NULL, copy, &up);
    pthread_create(&t_down, NULL, copy, &down);
    pthread_join(t_up, NULL);
    int status;
    waitpid(pid, &status, 0);
    pthread_join(t_down, NULL);
    return 0;
}
