// Minimal test harness for the C tests: checks that name what failed, and a way to check that
// a call aborts through ggml_abort with a given message (in a child process).
#pragma once

#include "ggml.h"

#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define CHECK(cond, ...)                                                              \
    do {                                                                              \
        if (!(cond)) {                                                                \
            fprintf(stderr, "%s:%d: CHECK(%s) failed: ", __FILE__, __LINE__, #cond);  \
            fprintf(stderr, __VA_ARGS__);                                             \
            fprintf(stderr, "\n");                                                    \
            exit(1);                                                                  \
        }                                                                             \
    } while (0)

#define CHECK_FLOAT(got, want)                                                                       \
    do {                                                                                             \
        double g_ = (got), w_ = (want);                                                              \
        CHECK(fabs(g_ - w_) <= 1e-5 * (1.0 + fabs(w_)), "%s = %.9g, expected %.9g", #got, g_, w_);  \
    } while (0)

// (unused in a program's second file: the runner is in its main file)
static int g_tests_run __attribute__((unused)) = 0;
// `program NAME` runs only the test called NAME (scripts/test.sh runs tests one by one on upstream)
static const char * g_only __attribute__((unused)) = NULL;

#define RUN(test)                                             \
    do {                                                      \
        if (g_only == NULL || strcmp(g_only, #test) == 0) {   \
            printf("%-56s", #test);                           \
            fflush(stdout);                                   \
            test();                                           \
            printf("ok\n");                                   \
            g_tests_run++;                                    \
        }                                                     \
    } while (0)

static void abort_to_stderr(const char * message) {
    fprintf(stderr, "%s\n", message);
    fflush(stderr);
}

// Runs fn() in a child process and checks that it aborts (SIGABRT) with `expected` in its message.
static void expect_abort(const char * what, void (*fn)(void), const char * expected) {
    int fds[2];
    CHECK(pipe(fds) == 0, "pipe");
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    CHECK(pid >= 0, "fork");
    if (pid == 0) {
        dup2(fds[1], 2);
        close(fds[0]);
        ggml_set_abort_callback(abort_to_stderr);
        fn();
        _exit(0); // no abort: the parent reports it
    }
    close(fds[1]);
    char out[8192];
    size_t n = 0;
    ssize_t r;
    while (n < sizeof(out) - 1 && (r = read(fds[0], out + n, sizeof(out) - 1 - n)) > 0) {
        n += (size_t) r;
    }
    out[n] = 0;
    close(fds[0]);
    int status = 0;
    waitpid(pid, &status, 0);
    CHECK(WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT, "%s: expected an abort, the child ended with status %d; stderr: %s", what, status, out);
    CHECK(strstr(out, expected) != NULL, "%s: abort message does not mention \"%s\": %s", what, expected, out);
}

static float * f32(struct ggml_tensor * t) { return (float *) t->data; }

// Collects what ggml logs (ggml_log_set), so tests can check messages.
static char g_log[65536];
static size_t g_log_len = 0;

static void collect_log(enum ggml_log_level level, const char * text, void * user_data) {
    (void) level;
    (void) user_data;
    size_t n = strlen(text);
    if (g_log_len + n < sizeof(g_log) - 1) {
        memcpy(g_log + g_log_len, text, n);
        g_log_len += n;
        g_log[g_log_len] = 0;
    }
    if (getenv("GGML_RS_TEST_VERBOSE")) {
        fputs(text, stderr);
    }
}

static void log_capture_begin(void) {
    g_log_len = 0;
    g_log[0] = 0;
    ggml_log_set(collect_log, NULL);
}
