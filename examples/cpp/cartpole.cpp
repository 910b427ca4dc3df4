// cartpole (C++): Gymnasium's CartPole-v1 (examples/c/cartpole_sim.h) served
// as `cartpole` through the header-only C++17 wrapper unienv_remote.hpp:
// an Env subclass, RAII owners, exceptions for errors.
//
//   examples/cpp/cartpole 127.0.0.1:PORT [pump]
//
// With `pump`, the env's methods run on the main thread inside
// Server::poll (an engine's game thread); otherwise on the env's worker
// thread. First line printed: "serving cartpole on ws://HOST:PORT"; stops on
// SIGINT or SIGTERM.
#include <csignal>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <iostream>

#include "../c/cartpole_sim.h"
#include "unienv_remote.hpp"

namespace {

volatile std::sig_atomic_t stop_requested = 0;

class CartPoleEnv : public unienv::Env {
public:
    CartPoleEnv() { cartpole_init(&sim_, static_cast<uint64_t>(std::time(nullptr))); }

    unienv::Space action_space() override { return unienv::Space::discrete(2); }

    unienv::Space observation_space() override {
        std::vector<float> high(4), low(4);
        cartpole_obs_high(high.data());
        for (int i = 0; i < 4; i++) low[i] = -high[i];
        return unienv::Space::box<float>({4}, low, high);
    }

    unienv::ResetResult reset(std::optional<int64_t> seed, unienv::ValueRef kwargs) override {
        double low = -0.05, high = 0.05;
        for (size_t i = 0; i < kwargs.size(); i++) {
            if (kwargs.key(i) != "options")
                throw unienv::InvalidArgument("reset() got an unexpected keyword argument '" +
                                              std::string(kwargs.key(i)) + "'");
            unienv::ValueRef options = kwargs[i];
            if (options.is_none()) continue;
            if (options.kind() != UNIENV_VALUE_DICT)
                throw unienv::InvalidArgument("options must be a dict or None");
            if (auto v = options.find("low")) low = number(*v, "low");
            if (auto v = options.find("high")) high = number(*v, "high");
        }
        if (low > high) throw unienv::InvalidArgument("the low bound must not exceed the high bound");
        // gymnasium.utils.seeding.np_random refuses a negative seed too.
        if (seed && *seed < 0) throw unienv::InvalidArgument("seed must be a non-negative integer");
        uint64_t useed = seed ? static_cast<uint64_t>(*seed) : 0;
        cartpole_reset(&sim_, seed ? &useed : nullptr, low, high);
        return {observation()};
    }

    unienv::StepResult step(unienv::ValueRef action) override {
        int64_t a;
        try {
            a = action.as_int();
        } catch (const unienv::Error &) {
            a = -1;
        }
        if (a != 0 && a != 1) throw unienv::InvalidArgument("cartpole's action must be 0 or 1");
        double reward;
        bool terminated, truncated;
        cartpole_step(&sim_, static_cast<int>(a), &reward, &terminated, &truncated);
        return {observation(), reward, terminated, truncated};
    }

private:
    static double number(unienv::ValueRef v, const char *name) {
        if (v.kind() == UNIENV_VALUE_BOOL) throw unienv::InvalidArgument(std::string(name) + " must be a number");
        double d;
        try {
            d = v.as_double();
        } catch (const unienv::Error &) {
            throw unienv::InvalidArgument(std::string(name) + " must be a number");
        }
        if (!std::isfinite(d)) throw unienv::InvalidArgument(std::string(name) + " must be finite");
        return d;
    }

    unienv::Value observation() const {
        float obs[4];
        cartpole_observation(&sim_, obs);
        return unienv::Value::array<float>({4}, obs);
    }

    CartPole sim_;
};

} // namespace

int main(int argc, char **argv) {
    if (argc < 2 || argc > 3) {
        std::cerr << "usage: " << argv[0] << " HOST:PORT [pump]\n";
        return 2;
    }
    bool pump = argc == 3 && std::string(argv[2]) == "pump";
    std::signal(SIGINT, [](int) { stop_requested = 1; });
    std::signal(SIGTERM, [](int) { stop_requested = 1; });
    try {
        unienv::Config config;
        if (pump) config.pump();
        unienv::Server server(config);
        server.add_env("cartpole", std::make_unique<CartPoleEnv>());
        server.start(argv[1]);
        std::cout << "serving cartpole on ws://" << server.address() << " (C++, "
                  << (pump ? "pump" : "worker") << " mode)" << std::endl;
        while (!stop_requested) server.poll(pump ? 10 : 50);
        // ~Server stops the server (pumping the close callback in pump mode).
    } catch (const unienv::Error &e) {
        std::cerr << "cartpole: " << e.what() << " (" << unienv_status_name(e.code()) << ")\n";
        return 1;
    }
    std::cerr << "cartpole: stopped\n";
    return 0;
}
