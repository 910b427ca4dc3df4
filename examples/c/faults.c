/*
 * faults: envs whose callbacks misbehave on request, to show (and test)
 * what each failure means to a client.
 *
 *   examples/c/faults 127.0.0.1:PORT
 *
 * `faulty`: observation float32 (2,) (the step count twice); step's action:
 *   0  a normal step
 *   1  refused before anything changed: UNIENV_CALLBACK_INVALID_ARGUMENT
 *      (certain invalid_request; the env stays usable)
 *   2  fails while running: UNIENV_CALLBACK_EXECUTION_ERROR (uncertain
 *      execution_error; the env is faulted until a reset)
 *   3  returns an observation of the wrong shape (3,) (execution_error too)
 *   4  never returns until `gate` is stepped (a hung simulator: clients of
 *      `faulty` time out, `gate` keeps answering on its own thread)
 *   5  returns UNIENV_CALLBACK_OK without setting a result
 * `faulty` renders a 2x3 RGB frame filled with the step count, lent to the
 * server without a copy (unienv_value_array_lent).
 * `gate`: any step opens the gate that action 4 waits on. Its observation
 * shows nesting: Tuple(Dict(open: Binary(()), pos: Box(float64, (2,))),
 * Discrete(3)).
 * First line printed: "serving faulty, gate on ws://HOST:PORT"; stops on
 * SIGINT or SIGTERM.
 */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "unienv_remote.h"

static volatile sig_atomic_t stop_requested = 0;
static atomic_int gate_open = 0;

static void on_signal(int sig) {
    (void)sig;
    stop_requested = 1;
}

typedef struct Faulty {
    float steps;
} Faulty;

static UnienvValue *observation(float v, size_t n) {
    float data[3] = {v, v, v};
    size_t shape[1] = {n};
    return unienv_value_array(UNIENV_DTYPE_FLOAT32, shape, 1, data, n * sizeof(float));
}

static int32_t faulty_reset(void *user, UnienvCall *call) {
    Faulty *f = (Faulty *)user;
    f->steps = 0;
    unienv_call_set_reset(call, NULL, observation(f->steps, 2), NULL);
    return UNIENV_CALLBACK_OK;
}

static int32_t faulty_step(void *user, UnienvCall *call) {
    Faulty *f = (Faulty *)user;
    int64_t action;
    if (unienv_value_get_int(unienv_call_action(call), &action) != UNIENV_OK)
        return unienv_call_error(call, UNIENV_CALLBACK_INVALID_ARGUMENT,
                                 "faulty's action must be an integer from 0 to 5");
    switch (action) {
    case 1:
        return unienv_call_error(call, UNIENV_CALLBACK_INVALID_ARGUMENT,
                                 "action 1 is refused (nothing changed)");
    case 2:
        f->steps += 1;
        return unienv_call_error(call, UNIENV_CALLBACK_EXECUTION_ERROR,
                                 "the simulator failed half-way through the step");
    case 3:
        f->steps += 1;
        unienv_call_set_step(call, observation(f->steps, 3), 0.0, false, false, NULL);
        return UNIENV_CALLBACK_OK;
    case 4:
        while (!atomic_load(&gate_open)) {
            struct timespec ts = {0, 1000000};
            nanosleep(&ts, NULL);
        }
        atomic_store(&gate_open, 0);
        break;
    case 5:
        return UNIENV_CALLBACK_OK;
    default:
        break;
    }
    f->steps += 1;
    UnienvValue *info = unienv_value_dict();
    unienv_value_dict_set(info, "action", unienv_value_int(action));
    unienv_call_set_step(call, observation(f->steps, 2), 1.0, false, false, info);
    return UNIENV_CALLBACK_OK;
}

/* A frame: malloc'ed, lent to the server, freed by the server's release. */
static void release_frame(void *context, const void *data) {
    (void)context;
    free((void *)data);
}

static int32_t faulty_render(void *user, UnienvCall *call) {
    Faulty *f = (Faulty *)user;
    size_t shape[3] = {2, 3, 3};
    uint8_t *frame = malloc(18);
    if (!frame) return unienv_call_error(call, UNIENV_CALLBACK_EXECUTION_ERROR, "out of memory");
    memset(frame, (int)f->steps, 18);
    unienv_call_set_render(
        call, unienv_value_array_lent(UNIENV_DTYPE_UINT8, shape, 3, frame, 18, release_frame, NULL));
    return UNIENV_CALLBACK_OK;
}

/* (({"open": open, "pos": [x, -x]}, phase) */
static UnienvValue *gate_observation(bool open, double x, int64_t phase) {
    double pos[2] = {x, -x};
    size_t two[1] = {2};
    UnienvValue *d = unienv_value_dict();
    unienv_value_dict_set(d, "open", unienv_value_array(UNIENV_DTYPE_BOOL, NULL, 0, &open, 1));
    unienv_value_dict_set(d, "pos", unienv_value_array(UNIENV_DTYPE_FLOAT64, two, 1, pos, sizeof pos));
    UnienvValue *t = unienv_value_tuple();
    unienv_value_push(t, d);
    unienv_value_push(t, unienv_value_int(phase));
    return t;
}

static int32_t gate_reset(void *user, UnienvCall *call) {
    (void)user;
    unienv_call_set_reset(call, NULL, gate_observation(false, 0.0, 0), NULL);
    return UNIENV_CALLBACK_OK;
}

static int32_t gate_step(void *user, UnienvCall *call) {
    (void)user;
    atomic_store(&gate_open, 1);
    unienv_call_set_step(call, gate_observation(true, 0.5, 2), 0.0, false, false, NULL);
    return UNIENV_CALLBACK_OK;
}

static int add_faulty(UnienvServer *server, Faulty *faulty) {
    UnienvEnvCallbacks callbacks = {faulty, faulty_reset, faulty_step, faulty_render, NULL};
    UnienvEnv *env = unienv_env_new(&callbacks);
    size_t shape[1] = {2};
    unienv_env_set_action_space(env, unienv_space_discrete(6));
    unienv_env_set_observation_space(
        env, unienv_space_box(UNIENV_DTYPE_FLOAT32, shape, 1, -INFINITY, INFINITY));
    unienv_env_set_render(env, "rgb_array", 50);
    UnienvValue *metadata = unienv_value_dict();
    UnienvValue *modes = unienv_value_list();
    unienv_value_push(modes, unienv_value_string("rgb_array"));
    unienv_value_dict_set(metadata, "render_modes", modes);
    unienv_value_dict_set(metadata, "render_fps", unienv_value_int(50));
    unienv_env_set_metadata(env, metadata);
    return unienv_server_add_env(server, "faulty", env);
}

static int add_gate(UnienvServer *server) {
    UnienvEnvCallbacks callbacks = {NULL, gate_reset, gate_step, NULL, NULL};
    UnienvEnv *env = unienv_env_new(&callbacks);
    size_t two[1] = {2};
    UnienvSpace *d = unienv_space_dict();
    unienv_space_dict_set(d, "pos", unienv_space_box(UNIENV_DTYPE_FLOAT64, two, 1, -1.0, 1.0));
    unienv_space_dict_set(d, "open", unienv_space_binary(NULL, 0));
    UnienvSpace *t = unienv_space_tuple();
    unienv_space_tuple_push(t, d);
    unienv_space_tuple_push(t, unienv_space_discrete(3));
    unienv_env_set_action_space(env, unienv_space_discrete(2));
    unienv_env_set_observation_space(env, t);
    return unienv_server_add_env(server, "gate", env);
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: %s HOST:PORT\n", argv[0]);
        return 2;
    }
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    static Faulty faulty = {0};
    UnienvConfig *config = unienv_config_new();
    /* Stopping waits this long for a callback that never returns. */
    unienv_config_set_shutdown_timeout_ms(config, 1000);
    UnienvServer *server = unienv_server_new(config);
    unienv_config_free(config);
    if (add_faulty(server, &faulty) != UNIENV_OK || add_gate(server) != UNIENV_OK ||
        unienv_server_start(server, argv[1]) != UNIENV_OK) {
        fprintf(stderr, "faults: %s\n", unienv_last_error_message());
        unienv_server_free(server);
        return 1;
    }
    printf("serving faulty, gate on ws://%s\n", unienv_server_address(server));
    fflush(stdout);
    while (!stop_requested) unienv_server_poll(server, 50);
    unienv_server_free(server);
    return 0;
}
