//! raidcore: everything about RAID behind raidctl. Layouts, parity, the on-disk format, member
//! devices and the array engine (assembly, read and write paths, degraded operation, accounting).
#![deny(unsafe_op_in_unsafe_fn)]
#![deny(clippy::undocumented_unsafe_blocks)]

#[macro_use]
pub mod error;
pub mod array;
pub mod buf;
pub mod clock;
pub mod device;
pub mod format;
pub mod jobs;
pub mod layout;
pub mod parity;
pub mod plan;
pub mod rng;
pub mod sim;
pub mod sync;
pub mod wear;

pub use array::{Array, AssembleOptions, CreateSpec};
pub use error::{Error, ErrorKind, Result};
pub use layout::{Layout, LayoutParams, Level};
