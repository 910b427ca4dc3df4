//! Our server: observation, protocol, registry, security, faults (disconnect, eviction, factory, queue, shutdown, simulator), hostile peers, regressions.
//!
//! One test binary; each module was once a test file of its own.

#[path = "../common/mod.rs"]
mod common;

mod attributes;
mod busy_domain;
mod fairness;
mod fault_disconnect;
mod fault_eviction;
mod fault_factory;
mod fault_queue;
mod fault_shutdown;
mod fault_simulator;
mod fd_limit;
mod heartbeat;
mod hostile;
mod kept_requests;
mod observation;
mod protocol;
mod registry;
mod regressions;
mod security;
mod unix;
