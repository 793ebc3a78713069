//! The integration tests, one binary (one link step instead of one a file): each file a
//! module, its tests named `module::test` (`cargo test --test it -- remote_hosts::`).
//! `.ci/run` splits them into streams by those names.

// Helpers shared by the modules.
mod common;
mod faulty;
mod naive;

mod audit;
mod bugs;
mod cli;
mod cluster;
mod cluster_clock;
mod differential;
mod docs;
mod etcd;
mod external;
mod interrupts;
mod libraries;
mod locks;
mod lua_scripts;
mod mariadb;
mod nemesis;
mod online;
mod plot;
mod plot_timeline;
mod postgres;
mod properties;
mod proxy;
mod redis_cluster;
mod redisson_locks;
mod reference_histories;
mod remote_hosts;
mod run;
mod secrets;
mod streams;
mod zookeeper;
