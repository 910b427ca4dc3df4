// unienv_remote.hpp: a header-only C++17 wrapper of unienv_remote.h.
//
// RAII owners for the library's objects (Server, Config, Value, Space),
// exceptions for errors (unienv::Error: a code and the library's message),
// and an abstract unienv::Env that a simulator derives from:
//
//   struct MyEnv : unienv::Env {
//       unienv::Space action_space() override { return unienv::Space::discrete(2); }
//       unienv::Space observation_space() override { ... }
//       unienv::ResetResult reset(std::optional<int64_t> seed, unienv::ValueRef kwargs) override;
//       unienv::StepResult step(unienv::ValueRef action) override;
//   };
//   unienv::Server server;                      // or Server(Config().pump())
//   server.add_env("my_env", std::make_unique<MyEnv>());
//   server.start("127.0.0.1:0");
//   while (running) server.poll(100);           // pump mode: runs the calls
//
// Inside a callback, throw unienv::InvalidArgument to refuse the call before
// changing anything (a certain invalid_request; the env stays usable); any
// other exception is an execution error (uncertain for reset and step; the
// env is faulted until a reset). No exception crosses into the library.
// The threading modes are the C header's (see unienv_remote.h).
#ifndef UNIENV_REMOTE_HPP
#define UNIENV_REMOTE_HPP

#include <cstdint>
#include <cstring>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "unienv_remote.h"

namespace unienv {

/// A failed library call: the UNIENV_ERR_* code and the library's message.
class Error : public std::runtime_error {
public:
    Error(int32_t code, const std::string &message) : std::runtime_error(message), code_(code) {}
    int32_t code() const noexcept { return code_; }

private:
    int32_t code_;
};

/// Thrown by an env method to refuse its arguments before changing anything.
class InvalidArgument : public std::runtime_error {
public:
    using std::runtime_error::runtime_error;
};

namespace detail {
inline Error last_error(int32_t code) {
    std::string message = unienv_last_error_message();
    if (message.empty()) message = unienv_status_name(code);
    return Error(code, message);
}
inline void check(int32_t code) {
    if (code != UNIENV_OK) throw last_error(code);
}
template <class T> T *check(T *ptr) {
    if (!ptr) throw last_error(unienv_last_error_code());
    return ptr;
}
template <class T> constexpr int32_t dtype_of() {
    if constexpr (std::is_same_v<T, bool>) return UNIENV_DTYPE_BOOL;
    else if constexpr (std::is_same_v<T, int8_t>) return UNIENV_DTYPE_INT8;
    else if constexpr (std::is_same_v<T, int16_t>) return UNIENV_DTYPE_INT16;
    else if constexpr (std::is_same_v<T, int32_t>) return UNIENV_DTYPE_INT32;
    else if constexpr (std::is_same_v<T, int64_t>) return UNIENV_DTYPE_INT64;
    else if constexpr (std::is_same_v<T, uint8_t>) return UNIENV_DTYPE_UINT8;
    else if constexpr (std::is_same_v<T, uint16_t>) return UNIENV_DTYPE_UINT16;
    else if constexpr (std::is_same_v<T, uint32_t>) return UNIENV_DTYPE_UINT32;
    else if constexpr (std::is_same_v<T, uint64_t>) return UNIENV_DTYPE_UINT64;
    else if constexpr (std::is_same_v<T, float>) return UNIENV_DTYPE_FLOAT32;
    else if constexpr (std::is_same_v<T, double>) return UNIENV_DTYPE_FLOAT64;
    else static_assert(sizeof(T) == 0, "unsupported element type");
}
} // namespace detail

/// A borrowed array: dtype, shape, data (possibly unaligned: use at()).
struct ArrayView {
    int32_t dtype;
    std::vector<size_t> shape;
    const void *data;
    size_t nbytes;

    size_t size() const {
        size_t n = 1;
        for (size_t d : shape) n *= d;
        return n;
    }
    /// Element `i` (flat, C order) as T, which must be the array's dtype.
    template <class T> T at(size_t i) const {
        if (detail::dtype_of<T>() != dtype) throw Error(UNIENV_ERR_WRONG_TYPE, "wrong element type");
        if ((i + 1) * sizeof(T) > nbytes) throw Error(UNIENV_ERR_NOT_FOUND, "index out of range");
        T v;
        std::memcpy(&v, static_cast<const unsigned char *>(data) + i * sizeof(T), sizeof(T));
        return v;
    }
};

/// A borrowed value (an action, reset's keywords, an item of either).
class ValueRef {
public:
    explicit ValueRef(const UnienvValue *v) : v_(v) {}
    const UnienvValue *get() const { return v_; }
    int32_t kind() const { return unienv_value_kind(v_); }
    bool is_none() const { return kind() == UNIENV_VALUE_NULL; }
    bool as_bool() const {
        bool b;
        detail::check(unienv_value_get_bool(v_, &b));
        return b;
    }
    int64_t as_int() const {
        int64_t i;
        detail::check(unienv_value_get_int(v_, &i));
        return i;
    }
    double as_double() const {
        double d;
        detail::check(unienv_value_get_float(v_, &d));
        return d;
    }
    std::string_view as_string() const {
        const char *p;
        size_t n;
        detail::check(unienv_value_get_string(v_, &p, &n));
        return {p, n};
    }
    ArrayView as_array() const {
        UnienvArrayView a;
        detail::check(unienv_value_array_view(v_, &a));
        return {a.dtype, std::vector<size_t>(a.shape, a.shape + a.ndim), a.data, a.nbytes};
    }
    size_t size() const { return unienv_value_len(v_); }
    ValueRef operator[](size_t i) const { return ValueRef(detail::check(unienv_value_item(v_, i))); }
    std::string_view key(size_t i) const {
        const char *p;
        size_t n;
        detail::check(unienv_value_dict_key(v_, i, &p, &n));
        return {p, n};
    }
    /// The value of `key` in a dict, or nothing when absent.
    std::optional<ValueRef> find(const std::string &key) const {
        const UnienvValue *item = unienv_value_dict_get(v_, key.c_str());
        if (!item) return std::nullopt;
        return ValueRef(item);
    }

private:
    const UnienvValue *v_;
};

/// An owned value (move-only).
class Value {
public:
    Value() : Value(unienv_value_null()) {}
    explicit Value(UnienvValue *v) : v_(detail::check(v)) {}
    Value(Value &&o) noexcept : v_(std::exchange(o.v_, nullptr)) {}
    Value &operator=(Value &&o) noexcept {
        std::swap(v_, o.v_);
        return *this;
    }
    Value(const Value &) = delete;
    Value &operator=(const Value &) = delete;
    ~Value() { unienv_value_free(v_); }

    static Value none() { return Value(unienv_value_null()); }
    /// No value at all: where the C API takes NULL (an info of `{}`, a
    /// context of `None`), without an allocation.
    static Value absent() noexcept { return Value(Absent{}); }
    static Value boolean(bool b) { return Value(unienv_value_bool(b)); }
    static Value integer(int64_t i) { return Value(unienv_value_int(i)); }
    static Value real(double d) { return Value(unienv_value_float(d)); }
    static Value string(const std::string &s) { return Value(unienv_value_string(s.c_str())); }
    static Value list() { return Value(unienv_value_list()); }
    static Value tuple() { return Value(unienv_value_tuple()); }
    static Value dict() { return Value(unienv_value_dict()); }
    /// An array of T copied from `data` (product(shape) elements).
    template <class T> static Value array(const std::vector<size_t> &shape, const T *data) {
        size_t n = 1;
        for (size_t d : shape) n *= d;
        return Value(unienv_value_array(detail::dtype_of<T>(), shape.data(), shape.size(), data,
                                        n * sizeof(T)));
    }
    /// A one-dimensional array of T copied from `data`.
    template <class T> static Value array(const std::vector<T> &data) {
        return array<T>({data.size()}, data.data());
    }

    /// Appends to a list or tuple.
    Value &push(Value item) {
        detail::check(unienv_value_push(v_, item.release()));
        return *this;
    }
    /// Sets a dict entry.
    Value &set(const std::string &key, Value item) {
        detail::check(unienv_value_dict_set(v_, key.c_str(), item.release()));
        return *this;
    }
    ValueRef ref() const { return ValueRef(v_); }
    /// Hands the value over to a C function that takes it.
    UnienvValue *release() { return std::exchange(v_, nullptr); }

private:
    struct Absent {};
    explicit Value(Absent) noexcept : v_(nullptr) {}
    UnienvValue *v_;
};

/// An owned space (move-only).
class Space {
public:
    explicit Space(UnienvSpace *s) : s_(detail::check(s)) {}
    Space(Space &&o) noexcept : s_(std::exchange(o.s_, nullptr)) {}
    Space &operator=(Space &&o) noexcept {
        std::swap(s_, o.s_);
        return *this;
    }
    Space(const Space &) = delete;
    Space &operator=(const Space &) = delete;
    ~Space() { unienv_space_free(s_); }

    /// A box of T with the same bounds for every element.
    template <class T> static Space box(const std::vector<size_t> &shape, double low, double high) {
        return Space(unienv_space_box(detail::dtype_of<T>(), shape.data(), shape.size(), low, high));
    }
    /// A box of T with a bound per element.
    template <class T>
    static Space box(const std::vector<size_t> &shape, const std::vector<T> &low,
                     const std::vector<T> &high) {
        size_t n = 1;
        for (size_t d : shape) n *= d;
        if (low.size() != n || high.size() != n)
            throw Error(UNIENV_ERR_INVALID_ARGUMENT, "bounds must have one element per cell");
        return Space(unienv_space_box_bounds(detail::dtype_of<T>(), shape.data(), shape.size(),
                                             low.data(), high.data()));
    }
    static Space discrete(int64_t n) { return Space(unienv_space_discrete(n)); }
    static Space binary(const std::vector<size_t> &shape) {
        return Space(unienv_space_binary(shape.data(), shape.size()));
    }
    static Space dict() { return Space(unienv_space_dict()); }
    static Space tuple() { return Space(unienv_space_tuple()); }
    Space &set(const std::string &key, Space child) {
        detail::check(unienv_space_dict_set(s_, key.c_str(), child.release()));
        return *this;
    }
    Space &push(Space child) {
        detail::check(unienv_space_tuple_push(s_, child.release()));
        return *this;
    }
    UnienvSpace *release() { return std::exchange(s_, nullptr); }

private:
    UnienvSpace *s_;
};

/// What reset returns: (context, observation, info).
struct ResetResult {
    Value observation;
    Value info = Value::absent();    // {}
    Value context = Value::absent(); // None
};

/// What step returns: (observation, reward, terminated, truncated, info).
struct StepResult {
    Value observation;
    double reward = 0.0;
    bool terminated = false;
    bool truncated = false;
    Value info = Value::absent(); // {}
};

/// A simulator hosted by a Server. Its methods run on the thread the
/// threading mode says; the object is destroyed (after close()) when the
/// server disposes of it.
class Env {
public:
    virtual ~Env() = default;
    virtual Space action_space() = 0;
    virtual Space observation_space() = 0;
    virtual ResetResult reset(std::optional<int64_t> seed, ValueRef kwargs) = 0;
    virtual StepResult step(ValueRef action) = 0;
    /// Whether render() is implemented (then it is exported).
    virtual bool renders() const { return false; }
    virtual Value render() { return Value::none(); }
    virtual void close() {}
};

namespace detail {
template <class F> int32_t guarded(UnienvCall *call, F &&f) noexcept {
    try {
        f();
        return UNIENV_CALLBACK_OK;
    } catch (const InvalidArgument &e) {
        return unienv_call_error(call, UNIENV_CALLBACK_INVALID_ARGUMENT, e.what());
    } catch (const std::exception &e) {
        return unienv_call_error(call, UNIENV_CALLBACK_EXECUTION_ERROR, e.what());
    } catch (...) {
        return unienv_call_error(call, UNIENV_CALLBACK_EXECUTION_ERROR, "unknown C++ exception");
    }
}
inline int32_t on_reset(void *user, UnienvCall *call) {
    return guarded(call, [&] {
        int64_t s;
        std::optional<int64_t> seed;
        if (unienv_call_seed(call, &s)) seed = s;
        ResetResult r = static_cast<Env *>(user)->reset(seed, ValueRef(unienv_call_kwargs(call)));
        check(unienv_call_set_reset(call, r.context.release(), r.observation.release(),
                                    r.info.release()));
    });
}
inline int32_t on_step(void *user, UnienvCall *call) {
    return guarded(call, [&] {
        StepResult r = static_cast<Env *>(user)->step(ValueRef(unienv_call_action(call)));
        check(unienv_call_set_step(call, r.observation.release(), r.reward, r.terminated,
                                   r.truncated, r.info.release()));
    });
}
inline int32_t on_render(void *user, UnienvCall *call) {
    return guarded(call, [&] {
        check(unienv_call_set_render(call, static_cast<Env *>(user)->render().release()));
    });
}
inline void on_close(void *user) {
    Env *env = static_cast<Env *>(user);
    try {
        env->close();
    } catch (...) {
    }
    delete env;
}
} // namespace detail

/// Where callbacks run (see the C header's THREADING).
enum class Threading { Worker = UNIENV_THREADING_WORKER, Pump = UNIENV_THREADING_PUMP };

/// Server settings; each setter returns *this.
class Config {
public:
    Config() : c_(detail::check(unienv_config_new())) {}
    Config(Config &&o) noexcept : c_(std::exchange(o.c_, nullptr)) {}
    Config(const Config &) = delete;
    Config &operator=(const Config &) = delete;
    ~Config() { unienv_config_free(c_); }
    Config &token(const std::string &t) { return ok(unienv_config_set_token(c_, t.c_str())); }
    Config &threading(Threading t) { return ok(unienv_config_set_threading(c_, int32_t(t))); }
    Config &pump() { return threading(Threading::Pump); }
    Config &max_message_size(size_t b) { return ok(unienv_config_set_max_message_size(c_, b)); }
    Config &max_connections(size_t n) { return ok(unienv_config_set_max_connections(c_, n)); }
    Config &shutdown_timeout_ms(uint64_t ms) { return ok(unienv_config_set_shutdown_timeout_ms(c_, ms)); }
    Config &validate_actions(bool on) { return ok(unienv_config_set_validate_actions(c_, on)); }
    const UnienvConfig *get() const { return c_; }

private:
    Config &ok(int32_t code) {
        detail::check(code);
        return *this;
    }
    UnienvConfig *c_;
};

/// A server: add envs, start, poll (pump mode), destroyed = stopped.
/// A server's dialing to a relay (`Server::dial`); destroying it stops
/// the dialing. See the C header's DIALING OUT.
class Dial {
public:
    explicit Dial(UnienvDial *d) : d_(d) {}
    Dial(Dial &&o) noexcept : d_(std::exchange(o.d_, nullptr)) {}
    Dial(const Dial &) = delete;
    Dial &operator=(const Dial &) = delete;
    ~Dial() { unienv_dial_free(d_); }

    /// The state (`UNIENV_DIAL_REGISTERED`, ...), attempts, registrations, tunnels.
    UnienvDialStatus status() const {
        UnienvDialStatus s{};
        detail::check(unienv_dial_status(d_, &s));
        return s;
    }
    /// Why it is not registered ("" when registered since).
    std::string last_error() const { return unienv_dial_last_error(d_); }
    /// Waits until registered, at most `timeout_ms` (negative: no limit).
    bool wait_registered(int32_t timeout_ms) const { return unienv_dial_wait_registered(d_, timeout_ms); }
    void stop() { detail::check(unienv_dial_stop(d_)); }
    UnienvDial *get() const { return d_; }

private:
    UnienvDial *d_;
};

class Server {
public:
    explicit Server(const Config &config = Config())
        : s_(detail::check(unienv_server_new(config.get()))) {}
    Server(Server &&o) noexcept : s_(std::exchange(o.s_, nullptr)) {}
    Server(const Server &) = delete;
    Server &operator=(const Server &) = delete;
    ~Server() { unienv_server_free(s_); }

    /// Registers `env` as `id`; the server owns it from now on.
    void add_env(const std::string &id, std::unique_ptr<Env> env) {
        UnienvEnvCallbacks callbacks{};
        callbacks.user = env.get();
        callbacks.reset = detail::on_reset;
        callbacks.step = detail::on_step;
        callbacks.render = env->renders() ? detail::on_render : nullptr;
        callbacks.close = detail::on_close;
        UnienvEnv *e = detail::check(unienv_env_new(&callbacks));
        int32_t rc = unienv_env_set_action_space(e, env->action_space().release());
        if (rc == UNIENV_OK) rc = unienv_env_set_observation_space(e, env->observation_space().release());
        if (rc != UNIENV_OK) {
            Error error = detail::last_error(rc);
            unienv_env_free(e);
            throw error;
        }
        rc = unienv_server_add_env(s_, id.c_str(), e);
        if (rc != UNIENV_OK) throw detail::last_error(rc);
        env.release(); // deleted by its close callback
    }
    void start(const std::string &address) { detail::check(unienv_server_start(s_, address.c_str())); }
    /// Starts without listening: the server serves the relays it dials.
    void start() { detail::check(unienv_server_start(s_, nullptr)); }
    /// Dials the relay at `url` as `name` (after `start`); clients reach the
    /// server at `url/hosts/name`. Empty `host_token` / `ca_file`: none.
    Dial dial(const std::string &url, const std::string &name, const std::string &host_token = "",
              const std::string &ca_file = "") {
        return Dial(detail::check(unienv_server_dial(s_, url.c_str(), name.c_str(),
                                                     host_token.empty() ? nullptr : host_token.c_str(),
                                                     ca_file.empty() ? nullptr : ca_file.c_str())));
    }
    std::string address() const { return unienv_server_address(s_); }
    /// Runs queued calls (pump mode) or waits (worker mode); see the C header.
    int poll(int32_t timeout_ms) {
        int32_t n = unienv_server_poll(s_, timeout_ms);
        if (n < 0) throw detail::last_error(-n);
        return n;
    }
    void stop() { detail::check(unienv_server_stop(s_)); }
    UnienvServer *get() const { return s_; }

private:
    UnienvServer *s_;
};

/// The library's version text.
inline std::string version() { return unienv_version(); }

} // namespace unienv

#endif
