//! The driver's `policy.rs`, compiled for the host exactly as the module compiles it.
#![no_std]

#[path = "../../../policy.rs"]
pub mod policy;
