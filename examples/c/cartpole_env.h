/*
 * cartpole_env.h: the CartPole-v1 simulator of cartpole_sim.h as a UniEnv
 * env served through the C ABI (header-only; shared by cartpole.c and
 * engine_loop.c). cartpole_add(server, "cartpole") registers one.
 *
 * Spaces, as the crate's Rust-hosted `cartpole`: action Discrete(2) (an
 * int64 box of shape () from 0 to 1), observation a float32 box of shape
 * (4,) with Gymnasium's bounds; render mode none. reset accepts
 * options={"low": .., "high": ..} as Gymnasium does.
 */
#ifndef CARTPOLE_ENV_H
#define CARTPOLE_ENV_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cartpole_sim.h"
#include "unienv_remote.h"

/* Reads one bound of reset's options; returns false (after setting the
 * call's error) when it is not a finite number. */
static bool cartpole_option(UnienvCall *call, const UnienvValue *options, const char *name,
                            double *out) {
    const UnienvValue *v = unienv_value_dict_get(options, name);
    if (!v) return true; /* absent: keep the default */
    if (unienv_value_kind(v) == UNIENV_VALUE_BOOL || unienv_value_get_float(v, out) != UNIENV_OK ||
        !isfinite(*out)) {
        char msg[128];
        snprintf(msg, sizeof msg, "options[\"%s\"] must be a finite number", name);
        unienv_call_error(call, UNIENV_CALLBACK_INVALID_ARGUMENT, msg);
        return false;
    }
    return true;
}

static UnienvValue *cartpole_obs_value(const CartPole *c) {
    float obs[4];
    size_t shape[1] = {4};
    cartpole_observation(c, obs);
    return unienv_value_array(UNIENV_DTYPE_FLOAT32, shape, 1, obs, sizeof obs);
}

static int32_t cartpole_on_reset(void *user, UnienvCall *call) {
    CartPole *c = (CartPole *)user;
    double low = -0.05, high = 0.05;
    const UnienvValue *kwargs = unienv_call_kwargs(call);
    for (size_t i = 0; i < unienv_value_len(kwargs); i++) {
        const char *key;
        size_t len;
        unienv_value_dict_key(kwargs, i, &key, &len);
        const UnienvValue *value = unienv_value_item(kwargs, i);
        if (len != 7 || memcmp(key, "options", 7) != 0) {
            char msg[160];
            snprintf(msg, sizeof msg, "reset() got an unexpected keyword argument '%.*s'", (int)len,
                     key);
            return unienv_call_error(call, UNIENV_CALLBACK_INVALID_ARGUMENT, msg);
        }
        if (unienv_value_kind(value) == UNIENV_VALUE_NULL) continue;
        if (unienv_value_kind(value) != UNIENV_VALUE_DICT)
            return unienv_call_error(call, UNIENV_CALLBACK_INVALID_ARGUMENT,
                                     "options must be a dict or None");
        if (!cartpole_option(call, value, "low", &low) ||
            !cartpole_option(call, value, "high", &high))
            return UNIENV_CALLBACK_INVALID_ARGUMENT;
    }
    if (low > high)
        return unienv_call_error(call, UNIENV_CALLBACK_INVALID_ARGUMENT,
                                 "the low bound must not exceed the high bound");
    int64_t seed = 0;
    bool seeded = unienv_call_seed(call, &seed);
    if (seeded && seed < 0) /* gymnasium.utils.seeding.np_random refuses it too */
        return unienv_call_error(call, UNIENV_CALLBACK_INVALID_ARGUMENT,
                                 "seed must be a non-negative integer");
    uint64_t useed = (uint64_t)seed;
    cartpole_reset(c, seeded ? &useed : NULL, low, high);
    return unienv_call_set_reset(call, NULL, cartpole_obs_value(c), NULL) == UNIENV_OK
               ? UNIENV_CALLBACK_OK
               : unienv_call_error(call, UNIENV_CALLBACK_EXECUTION_ERROR,
                                   unienv_last_error_message());
}

static int32_t cartpole_on_step(void *user, UnienvCall *call) {
    CartPole *c = (CartPole *)user;
    int64_t action;
    /* A Python int or a NumPy integer (a one-element integer array). */
    if (unienv_value_get_int(unienv_call_action(call), &action) != UNIENV_OK ||
        (action != 0 && action != 1))
        return unienv_call_error(call, UNIENV_CALLBACK_INVALID_ARGUMENT,
                                 "cartpole's action must be 0 or 1");
    double reward;
    bool terminated, truncated;
    cartpole_step(c, (int)action, &reward, &terminated, &truncated);
    return unienv_call_set_step(call, cartpole_obs_value(c), reward, terminated, truncated,
                                NULL) == UNIENV_OK
               ? UNIENV_CALLBACK_OK
               : unienv_call_error(call, UNIENV_CALLBACK_EXECUTION_ERROR,
                                   unienv_last_error_message());
}

static void cartpole_on_close(void *user) { free(user); }

/* Registers a new cart-pole as `id`; returns UNIENV_OK or an error code. */
static int32_t cartpole_add(UnienvServer *server, const char *id) {
    CartPole *c = (CartPole *)malloc(sizeof *c);
    if (!c) return UNIENV_ERR_INTERNAL;
    cartpole_init(c, (uint64_t)time(NULL) ^ (uint64_t)(uintptr_t)c);
    UnienvEnvCallbacks callbacks = {
        .user = c,
        .reset = cartpole_on_reset,
        .step = cartpole_on_step,
        .render = NULL,
        .close = cartpole_on_close,
    };
    UnienvEnv *env = unienv_env_new(&callbacks);
    if (!env) {
        free(c);
        return unienv_last_error_code();
    }
    float high[4], low[4];
    cartpole_obs_high(high);
    for (int i = 0; i < 4; i++) low[i] = -high[i];
    size_t shape[1] = {4};
    int32_t rc = unienv_env_set_action_space(env, unienv_space_discrete(2));
    if (rc == UNIENV_OK)
        rc = unienv_env_set_observation_space(
            env, unienv_space_box_bounds(UNIENV_DTYPE_FLOAT32, shape, 1, low, high));
    if (rc != UNIENV_OK) {
        unienv_env_free(env);
        free(c);
        return rc;
    }
    rc = unienv_server_add_env(server, id, env); /* takes env; close frees c */
    if (rc != UNIENV_OK) free(c);
    return rc;
}

#endif
