/*
 * cartpole_sim.h: Gymnasium's CartPole-v1, step for step, in plain C
 * (header-only; used by the C and C++ examples).
 *
 * gymnasium.make("CartPole-v1"): CartPoleEnv (Euler integration, tau 0.02 s,
 * force +-10 N) wrapped in TimeLimit(max_episode_steps=500):
 *   - state (x, x_dot, theta, theta_dot) in double, observed as float[4];
 *   - terminated when |x| > 2.4 or |theta| > 12 degrees;
 *   - reward 1 on every step up to and including the terminating one, 0 on
 *     steps taken after it (stepping on keeps integrating);
 *   - truncated from the 500th step after a reset on.
 * A reset draws the state as Gymnasium's does, number for number:
 * `np_random.uniform(-0.05, 0.05, size=(4,))` (or [low, high) from reset
 * options), where `reset(seed=s)` reseeds np_random as
 * Generator(PCG64(SeedSequence(s))) (numpy_random.h) and an unseeded reset
 * continues the stream. From `reset(seed=s)` on, every observation equals
 * `gymnasium.make("CartPole-v1")`'s under the same actions, so a port can be
 * checked step for step.
 */
#ifndef CARTPOLE_SIM_H
#define CARTPOLE_SIM_H

#include <math.h>
#include <stdbool.h>
#include <stdint.h>

#include "numpy_random.h"

#define CARTPOLE_GRAVITY 9.8
#define CARTPOLE_MASS_CART 1.0
#define CARTPOLE_MASS_POLE 0.1
#define CARTPOLE_TOTAL_MASS (CARTPOLE_MASS_POLE + CARTPOLE_MASS_CART)
#define CARTPOLE_LENGTH 0.5
#define CARTPOLE_POLEMASS_LENGTH (CARTPOLE_MASS_POLE * CARTPOLE_LENGTH)
#define CARTPOLE_FORCE_MAG 10.0
#define CARTPOLE_TAU 0.02
#define CARTPOLE_THETA_THRESHOLD (12.0 * 2.0 * 3.14159265358979323846 / 360.0)
#define CARTPOLE_X_THRESHOLD 2.4
#define CARTPOLE_MAX_STEPS 500

typedef struct CartPole {
    double state[4];
    bool has_state;
    NumpyPcg64 rng;
    uint64_t elapsed_steps;
    int64_t steps_beyond_terminated; /* -1: not terminated yet */
} CartPole;

/* Seeds the generator for unseeded resets before the first seeded one (as
 * Gymnasium seeds it from the OS's entropy). */
static inline void cartpole_init(CartPole *c, uint64_t entropy) {
    c->has_state = false;
    numpy_pcg64_seed(&c->rng, entropy);
    c->elapsed_steps = 0;
    c->steps_beyond_terminated = -1;
}

/* reset(seed=*seed) (a seed is >= 0, as Gymnasium requires), or reset()
 * when seed is NULL; low <= high. */
static inline void cartpole_reset(CartPole *c, const uint64_t *seed, double low, double high) {
    if (seed) numpy_pcg64_seed(&c->rng, *seed);
    for (int i = 0; i < 4; i++) c->state[i] = numpy_uniform(&c->rng, low, high);
    c->has_state = true;
    c->elapsed_steps = 0;
    c->steps_beyond_terminated = -1;
}

/* One step with action 0 (push left) or 1 (push right). */
static inline void cartpole_step(CartPole *c, int action, double *reward, bool *terminated,
                                 bool *truncated) {
    double x = c->state[0], x_dot = c->state[1], theta = c->state[2], theta_dot = c->state[3];
    double force = action == 1 ? CARTPOLE_FORCE_MAG : -CARTPOLE_FORCE_MAG;
    double costheta = cos(theta), sintheta = sin(theta);
    double temp = (force + CARTPOLE_POLEMASS_LENGTH * (theta_dot * theta_dot) * sintheta) /
                  CARTPOLE_TOTAL_MASS;
    double thetaacc = (CARTPOLE_GRAVITY * sintheta - costheta * temp) /
                      (CARTPOLE_LENGTH * (4.0 / 3.0 - CARTPOLE_MASS_POLE * (costheta * costheta) /
                                                          CARTPOLE_TOTAL_MASS));
    double xacc = temp - CARTPOLE_POLEMASS_LENGTH * thetaacc * costheta / CARTPOLE_TOTAL_MASS;
    x = x + CARTPOLE_TAU * x_dot;
    x_dot = x_dot + CARTPOLE_TAU * xacc;
    theta = theta + CARTPOLE_TAU * theta_dot;
    theta_dot = theta_dot + CARTPOLE_TAU * thetaacc;
    c->state[0] = x;
    c->state[1] = x_dot;
    c->state[2] = theta;
    c->state[3] = theta_dot;
    *terminated = x < -CARTPOLE_X_THRESHOLD || x > CARTPOLE_X_THRESHOLD ||
                  theta < -CARTPOLE_THETA_THRESHOLD || theta > CARTPOLE_THETA_THRESHOLD;
    if (!*terminated) {
        *reward = 1.0;
    } else if (c->steps_beyond_terminated < 0) {
        c->steps_beyond_terminated = 0;
        *reward = 1.0;
    } else {
        c->steps_beyond_terminated += 1;
        *reward = 0.0;
    }
    c->elapsed_steps += 1;
    *truncated = c->elapsed_steps >= CARTPOLE_MAX_STEPS;
}

static inline void cartpole_observation(const CartPole *c, float obs[4]) {
    for (int i = 0; i < 4; i++) obs[i] = (float)c->state[i];
}

/* The observation space's high bounds (low = -high), as Gymnasium's. */
static inline void cartpole_obs_high(float high[4]) {
    high[0] = (float)(CARTPOLE_X_THRESHOLD * 2.0);
    high[1] = INFINITY;
    high[2] = (float)(CARTPOLE_THETA_THRESHOLD * 2.0);
    high[3] = INFINITY;
}

#endif
