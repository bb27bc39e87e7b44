//! Unit and model tests of the dynamic PGM.
