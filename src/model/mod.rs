//! Pure algorithms on sorted keys (no I/O).
