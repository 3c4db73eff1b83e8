//! The concrete store, and the checking of the client histories it records.
pub mod lincheck;
