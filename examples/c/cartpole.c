/*
 * cartpole: serves Gymnasium's CartPole-v1 (cartpole_sim.h) as the UniEnv
 * env `cartpole`, its callbacks on the env's worker thread (with --pump, on
 * the main thread, inside unienv_server_poll, as an engine's game thread).
 *
 *   examples/c/cartpole 127.0.0.1:PORT [TOKEN]
 *   examples/c/cartpole [--pump] --dial ws://RELAY:PORT --name NAME
 *                       [--host-token TOKEN] [127.0.0.1:PORT [TOKEN]]
 *
 * Port 0 picks a free port; the first line printed is
 * "serving cartpole on ws://HOST:PORT". With --dial it also (or, without an
 * address, only) dials the relay and registers as NAME: clients reach it at
 * ws://RELAY:PORT/hosts/NAME, and it prints "registered as NAME at
 * ws://RELAY:PORT" each time it is (it re-dials after any loss). Serves
 * until SIGINT or SIGTERM, then stops cleanly (exit status 0). From Python:
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

static int usage(const char *argv0) {
    fprintf(stderr,
            "usage: %s HOST:PORT [TOKEN]\n"
            "       %s [--pump] --dial URL --name NAME [--host-token TOKEN] [HOST:PORT [TOKEN]]\n",
            argv0, argv0);
    return 2;
}

int main(int argc, char **argv) {
    const char *dial_url = NULL, *name = NULL, *host_token = NULL, *positional[2] = {NULL, NULL};
    int pump = 0, positionals = 0;
    for (int i = 1; i < argc; i++) {
        const char *next = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(argv[i], "--pump") == 0) pump = 1;
        else if (strcmp(argv[i], "--dial") == 0 && next) dial_url = argv[++i];
        else if (strcmp(argv[i], "--name") == 0 && next) name = argv[++i];
        else if (strcmp(argv[i], "--host-token") == 0 && next) host_token = argv[++i];
        else if (strncmp(argv[i], "--", 2) != 0 && positionals < 2) positional[positionals++] = argv[i];
        else return usage(argv[0]);
    }
    if ((dial_url == NULL) != (name == NULL) || (host_token && !dial_url) ||
        (positionals == 0 && !dial_url))
        return usage(argv[0]);
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
    if (positional[1] && unienv_config_set_token(config, positional[1]) != UNIENV_OK)
        return fail("token");
    if (pump) unienv_config_set_threading(config, UNIENV_THREADING_PUMP);
    UnienvServer *server = unienv_server_new(config);
    unienv_config_free(config);
    if (!server) return fail("unienv_server_new");
    if (cartpole_add(server, "cartpole") != UNIENV_OK) {
        unienv_server_free(server);
        return fail("registering cartpole");
    }
    /* Without an address (dialing only), nothing listens. */
    if (unienv_server_start(server, positional[0]) != UNIENV_OK) {
        unienv_server_free(server);
        return fail("unienv_server_start");
    }
    if (positional[0])
        printf("serving cartpole on ws://%s (unienv-remote %s, protocol %u)\n",
               unienv_server_address(server), unienv_version(), unienv_protocol_version());
    UnienvDial *dial = NULL;
    if (dial_url) {
        dial = unienv_server_dial(server, dial_url, name, host_token, NULL);
        if (!dial) {
            unienv_server_free(server);
            return fail("unienv_server_dial");
        }
        printf("dialing %s as %s\n", dial_url, name);
    }
    fflush(stdout);
    /* Worker mode: the callbacks run on the env's own thread; this thread
     * only waits for a signal (poll just sleeps in worker mode). Pump mode:
     * they run here, inside poll. */
    uint64_t registrations = 0, failed_attempt = 0;
    while (!stop_requested) {
        unienv_server_poll(server, pump ? 10 : 50);
        UnienvDialStatus status;
        if (!dial || unienv_dial_status(dial, &status) != UNIENV_OK) continue;
        if (status.registrations > registrations) {
            printf("registered as %s at %s\n", name, dial_url);
            fflush(stdout);
        } else if (status.state == UNIENV_DIAL_WAITING && status.attempts != failed_attempt) {
            fprintf(stderr, "cartpole: not registered (%s); re-dialing in %llu ms\n",
                    unienv_dial_last_error(dial), (unsigned long long)status.retry_in_ms);
            failed_attempt = status.attempts;
        }
        registrations = status.registrations;
    }
    unienv_dial_free(dial);
    unienv_server_free(server);
    fprintf(stderr, "cartpole: stopped\n");
    return 0;
}
