//! What raidctl decodes from outside the process, as a library: the control protocol and the
//! NBD server. The binary links it, and so do the fuzz targets (fuzz/), which feed these
//! decoders hostile bytes.

#![deny(clippy::undocumented_unsafe_blocks)]

pub mod nbd;
pub mod protocol;
