/*
 * engine_loop: an engine-style host in pump mode. The "engine" owns its
 * main loop and its thread; every frame it lets the server run the queued
 * env calls (unienv_server_poll), then ticks its own systems. The cart-pole
 * (cartpole_sim.h) is only ever touched on this thread, as an Unreal or
 * Godot game thread would require.
 *
 *   examples/c/engine_loop 127.0.0.1:PORT [FPS]
 *
 * FPS (default 0) paces the frames: at 0 each frame waits for work up to
 * 10 ms instead of sleeping (a headless engine ticking as fast as it is
 * driven); at N > 0 each frame polls without waiting and sleeps to a fixed
 * 1/N s frame, the step rate then bounded by N. First line printed:
 * "serving cartpole on ws://HOST:PORT"; stops on SIGINT or SIGTERM.
 */
#define _POSIX_C_SOURCE 200809L
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cartpole_env.h"
#include "unienv_remote.h"

static volatile sig_atomic_t stop_requested = 0;

static void on_signal(int sig) {
    (void)sig;
    stop_requested = 1;
}

static double now_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

int main(int argc, char **argv) {
    if (argc < 2 || argc > 3) {
        fprintf(stderr, "usage: %s HOST:PORT [FPS]\n", argv[0]);
        return 2;
    }
    int fps = argc == 3 ? atoi(argv[2]) : 0;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);

    UnienvConfig *config = unienv_config_new();
    unienv_config_set_threading(config, UNIENV_THREADING_PUMP);
    UnienvServer *server = unienv_server_new(config);
    unienv_config_free(config);
    if (!server || cartpole_add(server, "cartpole") != UNIENV_OK ||
        unienv_server_start(server, argv[1]) != UNIENV_OK) {
        fprintf(stderr, "engine_loop: %s\n", unienv_last_error_message());
        unienv_server_free(server);
        return 1;
    }
    printf("serving cartpole on ws://%s (pump mode, %s)\n", unienv_server_address(server),
           fps > 0 ? "fixed frame rate" : "frames paced by requests");
    fflush(stdout);

    unsigned long long frames = 0, calls = 0;
    double frame = fps > 0 ? 1.0 / fps : 0.0;
    while (!stop_requested) {
        double start = now_seconds();
        /* 1. The server's queued calls run here, on the engine's thread. */
        int ran = unienv_server_poll(server, fps > 0 ? 0 : 10);
        if (ran < 0) {
            fprintf(stderr, "engine_loop: poll: %s\n", unienv_last_error_message());
            break;
        }
        calls += (unsigned long long)ran;
        /* 2. The engine's own work for this frame (physics of other
         *    objects, rendering, audio...) would go here. */
        frames++;
        /* 3. Frame pacing. */
        if (frame > 0) {
            double left = frame - (now_seconds() - start);
            if (left > 0) {
                struct timespec ts = {(time_t)left, (long)((left - (time_t)left) * 1e9)};
                nanosleep(&ts, NULL);
            }
        }
    }
    /* Still on the engine's thread: free pumps the envs' close callbacks. */
    unienv_server_free(server);
    fprintf(stderr, "engine_loop: stopped after %llu frames, %llu env calls\n", frames, calls);
    return 0;
}
