/*
 * cartpole: serves Gymnasium's CartPole-v1 (cartpole_sim.h) as the UniEnv
 * env `cartpole`, its callbacks on the env's worker thread.
 *
 *   examples/c/cartpole 127.0.0.1:PORT [TOKEN]
 *
 * Port 0 picks a free port; the first line printed is
 * "serving cartpole on ws://HOST:PORT". Serves until SIGINT or SIGTERM, then
 * stops cleanly (exit status 0). From Python:
 *
 *   from unienv_remote import RemoteClient
 *   env = RemoteClient.connect("ws://127.0.0.1:PORT").env("cartpole")
 *   context, obs, info = env.reset(seed=0)
 *   obs, reward, terminated, truncated, info = env.step(1)
 */
#define _POSIX_C_SOURCE 200809L
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "cartpole_env.h"
#include "unienv_remote.h"

static volatile sig_atomic_t stop_requested = 0;

static void on_signal(int sig) {
    (void)sig;
    stop_requested = 1;
}

static int fail(const char *what) {
    fprintf(stderr, "cartpole: %s: %s (%s)\n", what, unienv_last_error_message(),
            unienv_status_name(unienv_last_error_code()));
    return 1;
}

int main(int argc, char **argv) {
    if (argc < 2 || argc > 3) {
        fprintf(stderr, "usage: %s HOST:PORT [TOKEN]\n", argv[0]);
        return 2;
    }
    if (unienv_abi_version() != UNIENV_ABI_VERSION) {
        fprintf(stderr, "cartpole: header and library do not match\n");
        return 1;
    }
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);

    UnienvConfig *config = unienv_config_new();
    if (argc == 3 && unienv_config_set_token(config, argv[2]) != UNIENV_OK)
        return fail("token");
    UnienvServer *server = unienv_server_new(config);
    unienv_config_free(config);
    if (!server) return fail("unienv_server_new");
    if (cartpole_add(server, "cartpole") != UNIENV_OK) {
        unienv_server_free(server);
        return fail("registering cartpole");
    }
    if (unienv_server_start(server, argv[1]) != UNIENV_OK) {
        unienv_server_free(server);
        return fail("unienv_server_start");
    }
    printf("serving cartpole on ws://%s (unienv-remote %s, protocol %u)\n",
           unienv_server_address(server), unienv_version(), unienv_protocol_version());
    fflush(stdout);
    /* Worker mode: the callbacks run on the env's own thread; this thread
     * only waits for a signal (poll just sleeps in worker mode). */
    while (!stop_requested) unienv_server_poll(server, 50);
    unienv_server_free(server);
    fprintf(stderr, "cartpole: stopped\n");
    return 0;
}
