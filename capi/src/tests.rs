//! The C functions called from Rust as a C program calls them: errors and
//! messages, values, spaces, and both threading modes end to end with the
//! crate's client.

use super::*;
use std::ffi::{c_void, CStr};
use std::ptr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;
use unienv_remote::client::{Client, ClientConfig};
use unienv_remote::host::ResetArgs;
use unienv_remote::Value;

fn last_message() -> String {
    unsafe { CStr::from_ptr(unienv_last_error_message()) }
        .to_string_lossy()
        .into_owned()
}

#[test]
fn header_is_current() {
    let generated = include_str!(concat!(env!("OUT_DIR"), "/unienv_remote.h"));
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../include/unienv_remote.h");
    let checked_in = std::fs::read_to_string(path).unwrap_or_default();
    assert!(
        generated == checked_in,
        "include/unienv_remote.h is not current: run `make -C examples/c header` \
         (UNIENV_BLESS_HEADER=1 cargo build -p unienv-remote-capi) and commit it"
    );
}

#[test]
fn versions() {
    let v = unsafe { CStr::from_ptr(unienv_version()) };
    assert_eq!(v.to_str().unwrap(), env!("CARGO_PKG_VERSION"));
    assert_eq!(unienv_abi_version(), UNIENV_ABI_VERSION);
    assert_eq!(unienv_protocol_version(), 1);
}

#[test]
fn every_failure_has_a_code_and_a_message() {
    unsafe {
        assert!(unienv_value_string(ptr::null()).is_null());
        assert_eq!(unienv_last_error_code(), UNIENV_ERR_INVALID_ARGUMENT);
        assert_eq!(last_message(), "text is NULL");

        let shape = [2usize];
        let data = [1.0f32];
        let v = unienv_value_array(
            UNIENV_DTYPE_FLOAT32,
            shape.as_ptr(),
            1,
            data.as_ptr().cast(),
            4,
        );
        assert!(v.is_null());
        assert_eq!(unienv_last_error_code(), UNIENV_ERR_INVALID_ARGUMENT);
        assert!(last_message().contains("8"), "{}", last_message());

        assert!(unienv_space_box(99, ptr::null(), 0, 0.0, 1.0).is_null());
        assert_eq!(last_message(), "unknown dtype code 99");
        assert!(unienv_space_discrete(0).is_null());
        assert!(unienv_space_box(UNIENV_DTYPE_FLOAT32, ptr::null(), 0, 1.0, 0.0).is_null());

        let s = unienv_value_string(c"hi".as_ptr());
        let mut i = 0i64;
        assert_eq!(unienv_value_get_int(s, &mut i), UNIENV_ERR_WRONG_TYPE);
        assert_eq!(last_message(), "expected an integer, got str");
        unienv_value_free(s);

        let config = unienv_config_new();
        assert_eq!(
            unienv_config_set_threading(config, 7),
            UNIENV_ERR_INVALID_ARGUMENT
        );
        assert_eq!(unienv_config_set_max_in_flight(config, 0), UNIENV_OK);
        let server = unienv_server_new(config);
        unienv_config_free(config);
        assert_eq!(
            unienv_server_start(server, c"127.0.0.1:0".as_ptr()),
            UNIENV_ERR_CONFIG
        );
        assert!(
            last_message().contains("max_in_flight"),
            "{}",
            last_message()
        );
        unienv_server_free(server);

        let server = unienv_server_new(ptr::null());
        assert_eq!(
            unienv_server_start(server, c"not an address".as_ptr()),
            UNIENV_ERR_IO
        );
        assert!(
            last_message().contains("not an address"),
            "{}",
            last_message()
        );
        unienv_server_free(server);

        let callbacks = UnienvEnvCallbacks {
            user: ptr::null_mut(),
            reset: None,
            step: None,
            render: None,
            close: None,
        };
        assert!(unienv_env_new(&callbacks).is_null());
        assert_eq!(unienv_last_error_code(), UNIENV_ERR_INVALID_ARGUMENT);
        assert_eq!(
            CStr::from_ptr(unienv_status_name(UNIENV_ERR_STATE)),
            c"wrong state"
        );
    }
}

#[test]
fn values_lend_and_build() {
    unsafe {
        let d = unienv_value_dict();
        let shape = [2usize, 2];
        let data = [1i32, 2, 3, 4];
        let a = unienv_value_array(
            UNIENV_DTYPE_INT32,
            shape.as_ptr(),
            2,
            data.as_ptr().cast(),
            16,
        );
        assert_eq!(unienv_value_dict_set(d, c"a".as_ptr(), a), UNIENV_OK);
        let t = unienv_value_tuple();
        assert_eq!(unienv_value_push(t, unienv_value_int(-3)), UNIENV_OK);
        assert_eq!(unienv_value_push(t, unienv_value_float(0.5)), UNIENV_OK);
        assert_eq!(unienv_value_dict_set(d, c"t".as_ptr(), t), UNIENV_OK);
        assert_eq!(
            unienv_value_push(d, unienv_value_null()),
            UNIENV_ERR_WRONG_TYPE
        );
        assert_eq!(unienv_value_len(d), 2);

        let got = unienv_value_dict_get(d, c"a".as_ptr());
        let mut view = UnienvArrayView {
            dtype: 0,
            ndim: 0,
            shape: ptr::null(),
            data: ptr::null(),
            nbytes: 0,
        };
        assert_eq!(unienv_value_array_view(got, &mut view), UNIENV_OK);
        assert_eq!(view.dtype, UNIENV_DTYPE_INT32);
        assert_eq!(std::slice::from_raw_parts(view.shape, view.ndim), &[2, 2]);
        assert_eq!(view.nbytes, 16);
        let t = unienv_value_item(d, 1);
        assert_eq!(unienv_value_kind(t), UNIENV_VALUE_TUPLE);
        let mut f = 0.0;
        assert_eq!(
            unienv_value_get_float(unienv_value_item(t, 0), &mut f),
            UNIENV_OK
        );
        assert_eq!(f, -3.0);
        assert!(unienv_value_item(t, 2).is_null());
        assert_eq!(unienv_last_error_code(), UNIENV_ERR_NOT_FOUND);
        assert!(unienv_value_dict_get(d, c"zz".as_ptr()).is_null());
        assert_eq!(
            (*d).0.to_string(),
            r#"{"a": array(dtype=<i4, shape=[2, 2], [1, 2, 3, 4]), "t": (-3, 0.5)}"#
        );
        unienv_value_free(d);
    }
}

static RELEASED: AtomicUsize = AtomicUsize::new(0);

unsafe extern "C" fn release(context: *mut c_void, data: *const c_void) {
    assert_eq!(context as usize, 7);
    assert!(!data.is_null());
    RELEASED.fetch_add(1, Ordering::SeqCst);
}

#[test]
fn lent_arrays_are_released_once() {
    static DATA: [f64; 3] = [1.0, 2.0, 3.0];
    unsafe {
        let shape = [3usize];
        let v = unienv_value_array_lent(
            UNIENV_DTYPE_FLOAT64,
            shape.as_ptr(),
            1,
            DATA.as_ptr().cast(),
            24,
            Some(release),
            7 as *mut c_void,
        );
        let copy = unienv_value_clone(v);
        unienv_value_free(v);
        assert_eq!(
            RELEASED.load(Ordering::SeqCst),
            0,
            "the clone still lends it"
        );
        let Value::Array(a) = &(*copy).0 else {
            panic!()
        };
        assert_eq!(a.as_bytes().as_ptr(), DATA.as_ptr().cast(), "no copy");
        unienv_value_free(copy);
        assert_eq!(RELEASED.load(Ordering::SeqCst), 1);
    }
}

#[test]
fn spaces_nest() {
    unsafe {
        let d = unienv_space_dict();
        let shape = [3usize];
        let low = [0u8, 0, 0];
        let high = [255u8, 255, 9];
        let b = unienv_space_box_bounds(
            UNIENV_DTYPE_UINT8,
            shape.as_ptr(),
            1,
            low.as_ptr().cast(),
            high.as_ptr().cast(),
        );
        assert_eq!(unienv_space_dict_set(d, c"pixels".as_ptr(), b), UNIENV_OK);
        let t = unienv_space_tuple();
        assert_eq!(
            unienv_space_tuple_push(t, unienv_space_discrete(3)),
            UNIENV_OK
        );
        assert_eq!(
            unienv_space_tuple_push(t, unienv_space_binary(shape.as_ptr(), 1)),
            UNIENV_OK
        );
        assert_eq!(unienv_space_dict_set(d, c"a".as_ptr(), t), UNIENV_OK);
        assert_eq!(
            unienv_space_tuple_push(d, unienv_space_discrete(2)),
            UNIENV_ERR_INVALID_ARGUMENT
        );
        assert_eq!(
            (*d).0.to_string(),
            "Dict(a: Tuple(Box(int64, []), Binary([3])), pixels: Box(uint8, [3]))"
        );
        let bad_low = [5u8, 0, 0];
        let bad = unienv_space_box_bounds(
            UNIENV_DTYPE_UINT8,
            shape.as_ptr(),
            1,
            bad_low.as_ptr().cast(),
            [1u8, 1, 1].as_ptr().cast(),
        );
        assert!(bad.is_null());
        assert!(
            last_message().starts_with("element 0"),
            "{}",
            last_message()
        );
        unienv_space_free(d);
    }
}

/// A counter env: reset sets it to the seed, step adds the action; it
/// records the thread its callbacks ran on.
#[derive(Default)]
struct Counter {
    value: i64,
    threads: Vec<std::thread::ThreadId>,
    closed: bool,
}

unsafe extern "C" fn counter_reset(user: *mut c_void, call: *mut UnienvCall) -> i32 {
    let c = &mut *(user as *mut Counter);
    c.threads.push(std::thread::current().id());
    let mut seed = 0;
    c.value = if unienv_call_seed(call, &mut seed) {
        seed
    } else {
        0
    };
    unienv_call_set_reset(
        call,
        ptr::null_mut(),
        unienv_value_int(c.value),
        ptr::null_mut(),
    );
    UNIENV_CALLBACK_OK
}

unsafe extern "C" fn counter_step(user: *mut c_void, call: *mut UnienvCall) -> i32 {
    let c = &mut *(user as *mut Counter);
    c.threads.push(std::thread::current().id());
    let mut a = 0;
    if unienv_value_get_int(unienv_call_action(call), &mut a) != UNIENV_OK || a < 0 {
        return unienv_call_error(
            call,
            UNIENV_CALLBACK_INVALID_ARGUMENT,
            c"bad action".as_ptr(),
        );
    }
    if a == 99 {
        return unienv_call_error(call, UNIENV_CALLBACK_EXECUTION_ERROR, c"exploded".as_ptr());
    }
    c.value += a;
    unienv_call_set_step(
        call,
        unienv_value_int(c.value),
        1.0,
        false,
        false,
        ptr::null_mut(),
    );
    UNIENV_CALLBACK_OK
}

unsafe extern "C" fn counter_close(user: *mut c_void) {
    (*(user as *mut Counter)).closed = true;
}

fn serve(counter: &mut Counter, pump: bool) -> *mut UnienvServer {
    unsafe {
        let config = unienv_config_new();
        if pump {
            assert_eq!(
                unienv_config_set_threading(config, UNIENV_THREADING_PUMP),
                UNIENV_OK
            );
        }
        let server = unienv_server_new(config);
        unienv_config_free(config);
        let callbacks = UnienvEnvCallbacks {
            user: (counter as *mut Counter).cast(),
            reset: Some(counter_reset),
            step: Some(counter_step),
            render: None,
            close: Some(counter_close),
        };
        let env = unienv_env_new(&callbacks);
        assert_eq!(
            unienv_server_add_env(server, c"counter".as_ptr(), env),
            UNIENV_OK
        );
        let dup = unienv_env_new(&callbacks);
        assert_eq!(
            unienv_server_add_env(server, c"counter".as_ptr(), dup),
            UNIENV_ERR_REGISTER
        );
        assert_eq!(
            unienv_server_start(server, c"127.0.0.1:0".as_ptr()),
            UNIENV_OK
        );
        assert_eq!(
            unienv_server_start(server, c"127.0.0.1:0".as_ptr()),
            UNIENV_ERR_STATE
        );
        server
    }
}

/// Drives `counter` at `url`: errors keep their protocol meaning.
fn drive(url: String) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async move {
        let config = ClientConfig::default().with_timeout(Some(Duration::from_secs(20)));
        let client = Client::connect(&url, config).await.unwrap();
        let env = client.env("counter").await.unwrap();
        let e = env.step(Value::Int(1)).await.unwrap_err();
        assert_eq!(e.code(), "invalid_request", "step before reset: {e}");
        let r = env.reset(ResetArgs::with_seed(5)).await.unwrap();
        assert_eq!(r.observation, Value::Int(5));
        for i in 1..=3 {
            let s = env.step(Value::Int(2)).await.unwrap();
            assert_eq!(s.observation, Value::Int(5 + 2 * i));
        }
        let e = env.step(Value::Int(-1)).await.unwrap_err();
        assert_eq!(e.code(), "invalid_request");
        assert!(!e.is_uncertain());
        assert!(e.to_string().contains("bad action"), "{e}");
        assert_eq!(
            env.step(Value::Int(1)).await.unwrap().observation,
            Value::Int(12)
        );
        let e = env.step(Value::Int(99)).await.unwrap_err();
        assert_eq!(e.code(), "execution_error");
        assert!(
            e.is_uncertain() && e.to_string().contains("exploded"),
            "{e}"
        );
        let e = env.step(Value::Int(1)).await.unwrap_err();
        assert_eq!(e.code(), "faulted");
        env.reset(ResetArgs::with_seed(0)).await.unwrap();
        assert_eq!(
            env.step(Value::Int(1)).await.unwrap().observation,
            Value::Int(1)
        );
        client.close().await;
    });
}

fn url_of(server: *mut UnienvServer) -> String {
    let addr = unsafe { CStr::from_ptr(unienv_server_address(server)) };
    format!("ws://{}", addr.to_str().unwrap())
}

#[test]
fn worker_mode_runs_callbacks_on_the_env_thread() {
    let mut counter = Counter::default();
    let server = serve(&mut counter, false);
    drive(url_of(server));
    unsafe { unienv_server_free(server) };
    assert!(counter.closed);
    let me = std::thread::current().id();
    assert!(counter
        .threads
        .iter()
        .all(|t| *t != me && *t == counter.threads[0]));
}

#[test]
fn pump_mode_runs_callbacks_in_poll_on_the_polling_thread() {
    let mut counter = Counter::default();
    let server = serve(&mut counter, true);
    let url = url_of(server);
    let client = std::thread::spawn(move || drive(url));
    let mut ran = 0;
    while !client.is_finished() {
        let n = unsafe { unienv_server_poll(server, 10) };
        assert!(n >= 0);
        ran += n;
    }
    client.join().unwrap();
    assert_eq!(counter.threads.len() as i32, ran);
    assert!(!counter.closed);
    unsafe { unienv_server_free(server) };
    assert!(counter.closed, "free pumps the close callback");
    let me = std::thread::current().id();
    assert!(counter.threads.iter().all(|t| *t == me));
}
